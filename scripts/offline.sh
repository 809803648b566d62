#!/usr/bin/env bash
# Runs your own DAG file offline, in one command: bash scripts/offline.sh DAG_FILE [DAG_ID] [options]
#   airflow dags test DAG_ID on DAG_FILE (DAG_ID defaults to the file's name without .py), with
#   the openai connection (--conn-id, default openai_default) and the SDK's default client pointed
#   at a local OpenAI-compatible endpoint that answers with scripted replies: --replies FILE (a JSON
#   list), --fail N (fail request N once with HTTP 500), --port N (default: a free one). See
#   python -m airflow.providers.common.ai.testing.offline --help and docs/quickstart.rst.
# Installs into .venv first if needed (see scripts/_venv.sh for AIRFLOW_LINE, VENV, PYTHON), keeps an
# Airflow home of its own in .airflow-offline/ (.airflow-offline-$AIRFLOW_LINE for other lines;
# OFFLINE_AIRFLOW_HOME picks another) with its SQLite database, migrated on each run.
# Exits with airflow dags test's exit code: non-zero when the DAG run failed.
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

if [[ $# -lt 1 || ! -f "$1" ]]; then
    echo "usage: bash scripts/offline.sh DAG_FILE [DAG_ID] [--replies FILE] [--fail N] [--port N] [--conn-id ID]${1:+ (no file at $1)}" >&2
    exit 2
fi
DAG_FILE="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
ensure_venv

# Only the DAG's own folder is parsed.
use_airflow_home offline "${OFFLINE_AIRFLOW_HOME:-}" "$(dirname "$DAG_FILE")"

exec "$VENV/bin/python" -m airflow.providers.common.ai.testing.offline "$DAG_FILE" "$@"
