#!/usr/bin/env bash
# Runs the test suite: bash scripts/test.sh [pytest arguments]
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON).
# Exits with pytest's exit code; 5 means no test ran.
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ensure_venv

# A fresh Airflow home per run, never the developer's own.
AIRFLOW_HOME="$(mktemp -d "${TMPDIR:-/tmp}/common-ai-test-home.XXXXXX")"
export AIRFLOW_HOME
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
export OPENAI_AGENTS_DISABLE_TRACING=1

cd "$ROOT"
"$VENV/bin/python" -m pytest -q "$@"
