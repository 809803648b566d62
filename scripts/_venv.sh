# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/test.sh: makes sure "$VENV" holds this package,
# installed editable against the pinned versions of one Airflow line.
#
#   AIRFLOW_LINE  3.3 (default) or 3.2: picks constraints/airflow-$AIRFLOW_LINE.txt
#   VENV          the virtualenv to use; default .venv for 3.3, .venv-3.2 for 3.2
#   PYTHON        the interpreter that creates the venv (default python3, needs 3.10+)
#
# The venv is (re)installed only when it is missing or the constraints or pyproject.toml
# changed since it was installed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AIRFLOW_LINE="${AIRFLOW_LINE:-3.3}"
CONSTRAINTS="$ROOT/constraints/airflow-$AIRFLOW_LINE.txt"
if [[ ! -f "$CONSTRAINTS" ]]; then
    echo "AIRFLOW_LINE=$AIRFLOW_LINE has no constraints file; use one of: $(find "$ROOT/constraints" -name "airflow-*.txt" -printf "%f\n" | sed "s/^airflow-\(.*\)\.txt$/\1/" | sort | xargs)" >&2
    exit 2
fi
if [[ "$AIRFLOW_LINE" == "3.3" ]]; then
    VENV="${VENV:-$ROOT/.venv}"
else
    VENV="${VENV:-$ROOT/.venv-$AIRFLOW_LINE}"
fi
[[ "$VENV" == /* ]] || VENV="$PWD/$VENV"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
    local stamp="$VENV/.common-ai-installed" want
    want="$(cat "$CONSTRAINTS" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
    if [[ -x "$VENV/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "$PYTHON is missing or older than 3.10; set PYTHON to a Python 3.10+ interpreter" >&2
        exit 2
    fi
    echo "Installing apache-airflow-providers-common-ai for Airflow $AIRFLOW_LINE into $VENV ..."
    local started=$SECONDS log
    log="$(mktemp)"
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    rm -f "$stamp"
    # -e: the venv runs the working tree, so edits need no reinstall.
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
        -c "$CONSTRAINTS" -e "${ROOT}[test,docs,otel]" >"$log" 2>&1; then
        grep -v "^WARNING: Location '.*' is ignored" "$log" >&2 || true
        rm -f "$log"
        echo "pip install into $VENV failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
    echo "$want" >"$stamp"
    echo "Installed in $((SECONDS - started)) s: $("$VENV/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -E '^(apache-airflow|openai-agents) ' | tr -s ' ' | paste -sd, -)"
}

# A line with a constraints/packages-$AIRFLOW_LINE.txt also gets the packages it names, at the
# versions its constraints pin (scripts/test.sh calls this after ensure_venv).
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
