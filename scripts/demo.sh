#!/usr/bin/env bash
# Runs the durable agent example end to end: bash scripts/demo.sh
# Another example: DEMO_EXAMPLE=example_durable_payment bash scripts/demo.sh
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON),
# keeps Airflow's home and its SQLite database in .airflow-demo/ (.airflow-demo-$AIRFLOW_LINE for other lines).
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

EXAMPLE="$ROOT/example_dags/${DEMO_EXAMPLE:-example_durable_agent}.py"
ensure_venv

# One home per line: each line's database schema is its own.
if [[ "$AIRFLOW_LINE" == "3.3" ]]; then
    export AIRFLOW_HOME="${DEMO_AIRFLOW_HOME:-$ROOT/.airflow-demo}"
else
    export AIRFLOW_HOME="${DEMO_AIRFLOW_HOME:-$ROOT/.airflow-demo-$AIRFLOW_LINE}"
fi
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/example_dags"
export OPENAI_AGENTS_DISABLE_TRACING=1
if [[ "$AIRFLOW_LINE" != "3.3" ]]; then
    # Before Airflow 3.3 the journal lives under the cache path (on 3.3+ in the task state store).
    export AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH="${AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH:-file://$AIRFLOW_HOME/durable_cache}"
fi
mkdir -p "$AIRFLOW_HOME"

echo "Migrating the Airflow database in $AIRFLOW_HOME ..."
"$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || {
    cat "$AIRFLOW_HOME/db-migrate.log" >&2
    echo "demo: airflow db migrate failed (output above)" >&2
    exit 1
}

cd "$ROOT"
"$VENV/bin/python" "$EXAMPLE" 2>&1 | tee "$AIRFLOW_HOME/demo.log"
echo
echo "What happened (the whole log: $AIRFLOW_HOME/demo.log):"
grep -E '\[DAG TEST\] starting|Tool .* ran|HTTP Request|Durable:|Task failed|Agent .* answered' "$AIRFLOW_HOME/demo.log" \
    | sed -E 's/^[^ ]+ \[[a-z ]+\] //; s/ +\[[^]]+\] loc=.*$//; s/ +\[[^]]+\] *$//'
