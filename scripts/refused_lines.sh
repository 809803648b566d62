#!/usr/bin/env bash
# Checks, on a real install, that the provider refuses at import the Airflow releases it cannot run
# on (3.0 and 3.1.0, docs/airflow_lines.rst), naming the reason: bash scripts/refused_lines.sh [DIR]
# Each release gets a venv under DIR (default .refused-lines/) with that Airflow from PyPI and this
# provider without its dependencies. Exits non-zero if one imports, or fails for another reason.
# 3.1.1 and later are not refused: they run beside openai-agents 0.20 (AIRFLOW_LINE=3.1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/.refused-lines}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$DIR"
status=0
for airflow in 3.0.6 3.1.0; do
    venv="$DIR/airflow-$airflow"
    if [[ ! -f "$venv/.installed" ]]; then
        "$PYTHON" -m venv "$venv"
        # structlog 25.5 renamed a name Airflow 3.1.0's logging imports (Styles), and 3.1.0 does not cap it:
        # without the cap Airflow itself fails to import, before the provider is reached.
        "$venv/bin/python" -m pip install --disable-pip-version-check -q "apache-airflow==$airflow" "structlog<25.5" >"$venv/install.log" 2>&1 \
            && "$venv/bin/python" -m pip install --disable-pip-version-check -q --no-deps -e "$ROOT" >>"$venv/install.log" 2>&1 \
            || { grep -v "^WARNING: Location" "$venv/install.log" >&2; echo "refused_lines: installing Airflow $airflow failed" >&2; exit 1; }
        touch "$venv/.installed"
    fi
    # A fresh Airflow home: importing Airflow writes its config there.
    home="$(mktemp -d)"
    if AIRFLOW_HOME="$home" "$venv/bin/python" -c "import airflow.providers.common.ai" >"$venv/import.log" 2>&1; then
        echo "refused_lines: Airflow $airflow imported the provider; it must refuse the line" >&2
        status=1
    elif grep -q "RuntimeError: The package \`apache-airflow-providers-common-ai:.*\` cannot run on Apache Airflow $airflow: it sets no cap on fastapi.*HTTP 422.*It supports Airflow 2.11, 3.1.1+, 3.2 and 3.3+" "$venv/import.log"; then
        echo "Airflow $airflow: refused at import: $(grep -o "cannot run on .*" "$venv/import.log")"
    else
        cat "$venv/import.log" >&2
        echo "refused_lines: Airflow $airflow failed to import the provider for another reason (above)" >&2
        status=1
    fi
    rm -rf "$home"
done
exit $status
