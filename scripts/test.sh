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

ensure_line_packages

# A fresh Airflow home per run, never the developer's own.
AIRFLOW_HOME="$(mktemp -d "${TMPDIR:-/tmp}/common-ai-test-home.XXXXXX")"
export AIRFLOW_HOME
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
export OPENAI_AGENTS_DISABLE_TRACING=1

cd "$ROOT"
"$VENV/bin/python" -m pytest -q "$@"
