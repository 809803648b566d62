# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/test.sh: makes sure "$VENV" holds this package,
# installed editable against the pinned versions of one Airflow line.
#
#   AIRFLOW_LINE  3.3 (default), 3.4 (3.4.0b2, a pre-release: pip runs with --pre), 3.2 or 2.11:
#                 picks constraints/airflow-$AIRFLOW_LINE.txt
#   VENV          the virtualenv to use; default .venv for 3.3, .venv-$AIRFLOW_LINE for the others
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
# A line whose Airflow is a pre-release: pip takes pre-releases only where the constraints pin one.
PRE_RELEASE=()
[[ "$AIRFLOW_LINE" != 3.4* ]] || PRE_RELEASE=(--pre)
# Whether the line keeps the journal under [common.ai] durable_cache_path (no task state store
# before Airflow 3.3): the lines 2.11 and 3.2 (and their -prod, -s3 variants).
has_task_state_store() {
    [[ "$AIRFLOW_LINE" == 3.3* || "$AIRFLOW_LINE" == 3.4* ]]
}

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
    echo "Installing apache-airflow-providers-common-ai for Airflow $AIRFLOW_LINE into $VENV (a minute or two the first time) ..."
    local started=$SECONDS log ticker installed=0
    log="$(mktemp)"
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    rm -f "$stamp"
    # A line every 15 s, so a quiet pip does not look hung.
    (while sleep 15; do echo "  ... $((SECONDS - started)) s, $(grep -c '^Collecting' "$log" 2>/dev/null || echo 0) packages collected"; done) &
    ticker=$!
    # -e: the venv runs the working tree, so edits need no reinstall.
    "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "${PRE_RELEASE[@]}" \
        -c "$CONSTRAINTS" -e "${ROOT}[test,docs,otel]" >"$log" 2>&1 && installed=1
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    if ((!installed)); then
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
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q "${PRE_RELEASE[@]}" \
        -c "$CONSTRAINTS" -r "$packages" >"$log" 2>&1; then
        grep -v "^WARNING: Location '.*' is ignored" "$log" >&2 || true
        rm -f "$log"
        echo "pip install of $packages into $VENV failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
    echo "$want" >"$stamp"
}

# A script's own Airflow home, SQLite, migrated on each run: .airflow-$1/ on 3.3, .airflow-$1-$AIRFLOW_LINE/
# on the other lines (each line's database schema is its own), or $2 when set; $3 is the DAGS folder.
# Before Airflow 3.3 the journal lives under a cache path in it (on 3.3 and 3.4 in the task state store).
use_airflow_home() {
    local name="$1" home="$2" dags="$3" suffix=""
    [[ "$AIRFLOW_LINE" == "3.3" ]] || suffix="-$AIRFLOW_LINE"
    export AIRFLOW_HOME="${home:-$ROOT/.airflow-$name$suffix}"
    export AIRFLOW__CORE__LOAD_EXAMPLES=False
    export AIRFLOW__CORE__DAGS_FOLDER="$dags"
    export OPENAI_AGENTS_DISABLE_TRACING=1
    if ! has_task_state_store; then
        export AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH="${AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH:-file://$AIRFLOW_HOME/durable_cache}"
    fi
    mkdir -p "$AIRFLOW_HOME"
    echo "Migrating the Airflow database in $AIRFLOW_HOME ..."
    "$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || {
        cat "$AIRFLOW_HOME/db-migrate.log" >&2
        echo "$name: airflow db migrate failed (output above)" >&2
        exit 1
    }
}
