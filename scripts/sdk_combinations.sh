#!/usr/bin/env bash
# The install a user makes, per Airflow release and openai-agents release the docs' version table
# names (docs/airflow_lines.rst): pip install of this checkout beside apache-airflow==A and
# openai-agents==S with no constraints file, then a task that fails after a model call and a tool
# call, through real retries under dag.test(): the retry replays both (the model server sees each
# request once, the tool runs once) and the journal is deleted when the task succeeds.
#
#   bash scripts/sdk_combinations.sh [AIRFLOW:SDK ...]    (default: the combinations below)
#
# "newest" for AIRFLOW or SDK is the newest release on the index at that moment, pre-releases
# included (pip index versions --pre): CI's "newest:newest" sees a release that breaks the provider
# in its first run after the release, not in a user's task.
#
# Each combination is scripts/sdk_versions.sh with NO_CONSTRAINTS=1 and AIRFLOW_VERSION=A, in a venv
# of its own that no constrained install touched (.venv-combination-A-S, made once, resolved freely
# by pip then); the venvs install side by side, the tests then run one combination at a time. Prints what pip resolved (Airflow, the SDK, openai, starlette, fastapi) per
# combination and exits non-zero if one failed to resolve or its tests failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
combinations=("$@")
if [[ ${#combinations[@]} -eq 0 ]]; then
    combinations=(3.3.2:0.20.0 3.3.2:0.22.3 3.4.0b2:0.24.0 3.1.8:0.20.0)
fi
PYTHON="${PYTHON:-python3}"
newest() {
    local found
    found="$("$PYTHON" -m pip index versions --disable-pip-version-check --pre "$1" 2>/dev/null | sed -n '1s/^[^(]*(\(.*\))$/\1/p')"
    [[ -n "$found" ]] || { echo "sdk_combinations: the index names no release of $1" >&2; exit 1; }
    echo "$found"
}
resolved=()
declare -A seen=()
for combination in "${combinations[@]}"; do
    airflow="${combination%%:*}" sdk="${combination##*:}"
    [[ "$airflow" != newest ]] || airflow="$(newest apache-airflow)"
    [[ "$sdk" != newest ]] || sdk="$(newest openai-agents)"
    [[ "$combination" != *newest* ]] || echo "newest on the index now: apache-airflow $airflow, openai-agents $sdk"
    # Once each: "newest:newest" is one of the named combinations until a newer release comes.
    [[ -n "${seen[$airflow:$sdk]:-}" ]] || resolved+=("$airflow:$sdk")
    seen[$airflow:$sdk]=1
done
combinations=("${resolved[@]}")
#: The two tests of tests/system/test_journal_retries.py whose task fails after a model call and a tool call.
TESTS=(tests/system/test_journal_retries.py -q -p no:warnings -k "two_agents or session")
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/sdk-combinations.XXXXXX")"
trap 'rm -rf "$LOGS"' EXIT

declare -A installing=()
for combination in "${combinations[@]}"; do
    airflow="${combination%%:*}" sdk="${combination##*:}"
    VENV="$ROOT/.venv-combination-$airflow-$sdk" NO_CONSTRAINTS=1 AIRFLOW_VERSION="$airflow" \
        bash scripts/sdk_versions.sh "$sdk" --version \
        >"$LOGS/$combination.install" 2>&1 &
    installing[$combination]=$!
done
status=0
for combination in "${combinations[@]}"; do
    airflow="${combination%%:*}" sdk="${combination##*:}"
    echo "=== Airflow $airflow, openai-agents $sdk, no constraints file"
    if ! wait "${installing[$combination]}"; then
        cat "$LOGS/$combination.install"
        echo "sdk_combinations: Airflow $airflow with openai-agents $sdk did not install (output above)" >&2
        status=1
        continue
    fi
    venv="$ROOT/.venv-combination-$airflow-$sdk"
    echo "resolved: $("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null |
        grep -iE '^(apache-airflow|openai-agents|openai|starlette|fastapi|mcp) ' | tr -s ' ' | paste -sd, -)"
    if ! VENV="$venv" NO_CONSTRAINTS=1 AIRFLOW_VERSION="$airflow" bash scripts/sdk_versions.sh "$sdk" "${TESTS[@]}"; then
        echo "sdk_combinations: the retries failed beside Airflow $airflow and openai-agents $sdk" >&2
        status=1
    fi
done
exit $status
