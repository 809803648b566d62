#!/usr/bin/env bash
# Removes durable journals under a file:// [common.ai] durable_cache_path (Airflow before 3.3):
# the folder of every DAG run in which no journal file changed for DAYS days, then the folders
# left empty. Usage: CACHE=/tmp/airflow_durable_cache DAYS=30 bash clean_durable_cache.sh
set -euo pipefail
# [START clean_durable_cache]
CACHE="${CACHE:-/tmp/airflow_durable_cache}" DAYS="${DAYS:-30}"
find "$CACHE" -mindepth 2 -maxdepth 2 -type d -name 'run_id=*' -print0 |
    while IFS= read -r -d '' run; do
        [[ -n "$(find "$run" -type f -mtime "-$DAYS" -print -quit)" ]] || rm -rf -- "$run"
    done
find "$CACHE" -mindepth 1 -maxdepth 1 -type d -empty -delete
# [END clean_durable_cache]
