#!/usr/bin/env bash
# Runs the durable agent example end to end: bash scripts/demo.sh
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON),
# keeps Airflow's home and its SQLite database in .airflow-demo/.
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

EXAMPLE="$ROOT/example_dags/example_durable_agent.py"
if [[ ! -f "$EXAMPLE" ]]; then
    echo "demo: $EXAMPLE does not exist yet; there is nothing to run" >&2
    exit 1
fi
ensure_venv

export AIRFLOW_HOME="${DEMO_AIRFLOW_HOME:-$ROOT/.airflow-demo}"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/example_dags"
export OPENAI_AGENTS_DISABLE_TRACING=1
mkdir -p "$AIRFLOW_HOME"

echo "Migrating the Airflow database in $AIRFLOW_HOME ..."
"$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || {
    cat "$AIRFLOW_HOME/db-migrate.log" >&2
    echo "demo: airflow db migrate failed (output above)" >&2
    exit 1
}

cd "$ROOT"
"$VENV/bin/python" "$EXAMPLE"
