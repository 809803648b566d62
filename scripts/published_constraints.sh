#!/usr/bin/env bash
# Checks which openai-agents installs beside the pins of each constraints file Apache Airflow
# published that constraints/published/ keeps a copy of (the pins that matter to this provider:
# openai, starlette, fastapi, httpx, pydantic; each file names its source). bash scripts/published_constraints.sh [DIR]
#
# Per file, pip resolves (--dry-run, in a throwaway venv under DIR, default a temporary one) the
# provider's own SDK requirement, read from pyproject.toml, with the file as constraints, and the
# outcome is compared with the file's "# expect:" line:
#   # expect: openai-agents X.Y.Z      pip must resolve, to that release
#   # expect: no openai-agents ...     pip must find no set of versions
# Exits non-zero when an outcome differs (a copy refreshed, or the declared range changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
DIR="${1:-$(mktemp -d "${TMPDIR:-/tmp}/published-constraints.XXXXXX")}"
[[ -x "$DIR/bin/python" ]] || "$PYTHON" -m venv "$DIR"
sdk="$("$DIR/bin/python" - "$ROOT/pyproject.toml" <<'EOF'
import sys
import tomllib

with open(sys.argv[1], "rb") as file:
    dependencies = tomllib.load(file)["project"]["dependencies"]
print(next(d for d in dependencies if d.replace(" ", "").startswith("openai-agents")))
EOF
)"
status=0
for copy in "$ROOT"/constraints/published/*.txt; do
    expect="$(sed -n 's/^# expect: //p' "$copy")"
    log="$DIR/$(basename "$copy" .txt).log"
    resolved=0
    "$DIR/bin/python" -m pip install --disable-pip-version-check --dry-run --ignore-installed \
        -c "$copy" "$sdk" >"$log" 2>&1 && resolved=1
    got="$(grep -o 'openai-agents-[0-9][^ ]*' "$log" | head -1 | sed 's/^openai-agents-/openai-agents /' || true)"
    if [[ "$expect" == "no openai-agents"* ]]; then
        if ((resolved)); then
            echo "published_constraints: $(basename "$copy"): expected no openai-agents, pip resolved $got" >&2
            status=1
        else
            echo "$(basename "$copy"): no $sdk installs beside its pins, as expected: $(grep -m1 -o 'The user requested (constraint) openai==[^ ]*' "$log" || grep -m1 'ERROR' "$log")"
        fi
    elif ((resolved)) && [[ "$got" == "$expect" ]]; then
        echo "$(basename "$copy"): resolves $sdk to $got, as expected"
    else
        grep -v "^WARNING: Location" "$log" >&2 || true
        echo "published_constraints: $(basename "$copy"): expected $expect, got ${got:-no resolution} (output above)" >&2
        status=1
    fi
done
exit $status
