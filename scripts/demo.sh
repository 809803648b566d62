#!/usr/bin/env bash
# Runs the durable agent example end to end: bash scripts/demo.sh
# Another example: DEMO_EXAMPLE=example_durable_payment bash scripts/demo.sh
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON),
# keeps Airflow's home and its SQLite database in .airflow-demo/ (.airflow-demo-$AIRFLOW_LINE for other lines).
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

# DEMO_EXAMPLE names an example of example_dags/, or is the path of a DAG file that runs itself
# the same way (testing.examples.run_example), as tests/system/test_demo_script.py's does.
case "${DEMO_EXAMPLE:-example_durable_agent}" in
    */* | *.py) EXAMPLE="$(cd "$(dirname "$DEMO_EXAMPLE")" && pwd)/$(basename "$DEMO_EXAMPLE")" ;;
    *) EXAMPLE="$ROOT/example_dags/${DEMO_EXAMPLE:-example_durable_agent}.py" ;;
esac
[[ -f "$EXAMPLE" ]] || { echo "demo: no example at $EXAMPLE" >&2; exit 2; }
ensure_venv

use_airflow_home demo "${DEMO_AIRFLOW_HOME:-}" "$(dirname "$EXAMPLE")"

cd "$ROOT"
# The example exits non-zero when its DAG run failed; the recap says so and the demo exits with it.
set +e
"$VENV/bin/python" "$EXAMPLE" 2>&1 | tee "$AIRFLOW_HOME/demo.log"
status=${PIPESTATUS[0]}
set -e
exec "$VENV/bin/python" "$ROOT/scripts/demo_recap.py" "$AIRFLOW_HOME/demo.log" "$status"
