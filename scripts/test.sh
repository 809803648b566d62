#!/usr/bin/env bash
# Runs the test suite: bash scripts/test.sh [pytest arguments]
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON).
# Exits with pytest's exit code; 5 means no test ran.
#
# A line with a constraints/packages-$AIRFLOW_LINE.txt also gets the packages it names, at the
# versions its constraints pin: AIRFLOW_LINE=3.2-s3 is the 3.2 line with the S3 filesystem and
# a local S3 server, for tests/system/test_s3_cache_path.py (skipped on the other lines).
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ensure_venv

ensure_line_packages() {
    local packages="$ROOT/constraints/packages-$AIRFLOW_LINE.txt"
    [[ -f "$packages" ]] || return 0
    local stamp="$VENV/.common-ai-line-packages" want log
    want="$(cat "$CONSTRAINTS" "$packages" | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    echo "Installing the packages of $(basename "$packages") into $VENV ..."
    log="$(mktemp)"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
        -c "$CONSTRAINTS" -r "$packages" >"$log" 2>&1; then
        grep -v "^WARNING: Location '.*' is ignored" "$log" >&2 || true
        rm -f "$log"
        echo "pip install of $packages into $VENV failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
    echo "$want" >"$stamp"
}
ensure_line_packages

# A fresh Airflow home per run, never the developer's own.
AIRFLOW_HOME="$(mktemp -d "${TMPDIR:-/tmp}/common-ai-test-home.XXXXXX")"
export AIRFLOW_HOME
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
export OPENAI_AGENTS_DISABLE_TRACING=1

cd "$ROOT"
"$VENV/bin/python" -m pytest -q "$@"
