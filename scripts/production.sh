#!/usr/bin/env bash
# The production-shaped tests (R-46, R-47): PostgreSQL, Redis, the api-server, the scheduler and two
# Celery workers on this machine, on each Airflow line: 3.3 keeps the journal in the task state store
# (PostgreSQL), 3.2 under an s3:// durable_cache_path on moto's S3 server; and R-54's dozen approvals
# answered at chosen moments, on PostgreSQL with LocalExecutor and a triggerer. The tests start and stop
# every process themselves; this script installs PostgreSQL and Redis from Debian packages when
# they are missing, and prints the measured costs.
#
#   bash scripts/production.sh [3.3|3.2 ...] [-- pytest arguments]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

lines=()
while [[ $# -gt 0 && "$1" != "--" ]]; do lines+=("$1"); shift; done
[[ "${1:-}" == "--" ]] && shift
[[ ${#lines[@]} -gt 0 ]] || lines=(3.3 3.2)

have_postgres() {
    command -v initdb >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
missing=()
have_postgres || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "Installing ${missing[*]} from Debian packages ..."
    if [[ $(id -u) -ne 0 ]]; then
        echo "production.sh: ${missing[*]} missing and not root: apt-get install -y ${missing[*]}" >&2
        exit 2
    fi
    log="$(mktemp)"
    if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "production.sh: apt-get install ${missing[*]} failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
fi
# The Debian package starts a cluster and a server of its own; the tests start theirs on free ports.

timings="$(mktemp)"
trap 'rm -f "$timings"' EXIT
status=0
for line in "${lines[@]}"; do
    echo "--- production topology, Airflow $line"
    # VENV: a venv of this line's own, beside the others (.venv-3.3-prod, .venv-3.2-prod).
    AIRFLOW_LINE="$line-prod" VENV="${PRODUCTION_VENV_PREFIX:-$ROOT/.venv}-$line-prod" \
        DURABLE_PRODUCTION_TIMINGS="$timings" \
        bash scripts/test.sh tests/system/production "$@" || status=$?
    [[ $status -eq 0 ]] || break
done
if [[ -s "$timings" ]]; then
    echo "--- measured (not asserted)"
    cat "$timings"
fi
exit $status
