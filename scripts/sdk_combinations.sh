#!/usr/bin/env bash
# The install a user makes, per Airflow release and openai-agents release the docs' version table
# names (docs/airflow_lines.rst): pip install of this checkout beside apache-airflow==A and
# openai-agents==S with no constraints file, then a task that fails after a model call and a tool
# call, through real retries under dag.test(): the retry replays both (the model server sees each
# request once, the tool runs once) and the journal is deleted when the task succeeds.
#
#   bash scripts/sdk_combinations.sh [AIRFLOW:SDK[:pydantic-ai] ...]    (default: the combinations below)
#
# A third field, pydantic-ai, installs the checkout with its extra [pydantic-ai] too (a user's
# pip install 'apache-airflow-providers-common-ai[pydantic-ai]', pip picking the pydantic-ai-slim),
# and runs, after the two tests, the Pydantic AI retries under dag.test()
# (tests/system/test_pydantic_ai_retries.py) and the Pydantic AI unit tests. Only where the extra
# installs: pydantic-ai-slim 2.68 and later need openai>=3.31, which openai-agents 0.20 (openai<3)
# does not allow, so a combination with SDK 0.20 cannot have it (docs/airflow_lines.rst). The extra
# is part of what the venv was made with: the same AIRFLOW:SDK named with and without it is one
# venv, with the extra.
#
# "newest" for AIRFLOW or SDK is the newest release on the index at that moment, pre-releases
# included (pip index versions --pre): CI's "newest:newest" sees a release that breaks the provider
# in its first run after the release, not in a user's task.
#
# Each combination is scripts/sdk_versions.sh with NO_CONSTRAINTS=1 and AIRFLOW_VERSION=A, in a venv
# of its own that no constrained install touched (.venv-combination-A-S, made once, resolved freely
# by pip then); the venvs install side by side, the tests then run JOBS combinations at a time
# (default 2). Prints what pip resolved (Airflow, the SDK, openai, starlette, fastapi) per
# combination and exits non-zero if one failed to resolve or its tests failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
combinations=("$@")
if [[ ${#combinations[@]} -eq 0 ]]; then
    combinations=(3.3.2:0.20.0 3.3.2:0.22.3 3.4.0b2:0.24.0:pydantic-ai 3.1.8:0.20.0 3.1.8:0.22.2:pydantic-ai)
fi
PYTHON="${PYTHON:-python3}"
newest() {
    local found
    found="$("$PYTHON" -m pip index versions --disable-pip-version-check --pre "$1" 2>/dev/null | sed -n '1s/^[^(]*(\(.*\))$/\1/p')"
    [[ -n "$found" ]] || { echo "sdk_combinations: the index names no release of $1" >&2; exit 1; }
    echo "$found"
}
resolved=()
#: The extra each AIRFLOW:SDK installs ("" or pydantic-ai).
declare -A extras=()
for combination in "${combinations[@]}"; do
    IFS=: read -r airflow sdk extra rest <<<"$combination"
    if [[ -z "$airflow" || -z "$sdk" || -n "$rest" || ! "$extra" =~ ^(pydantic-ai)?$ ]]; then
        echo "sdk_combinations: $combination is not AIRFLOW:SDK or AIRFLOW:SDK:pydantic-ai, for example 3.4.0b2:0.24.0:pydantic-ai" >&2
        exit 2
    fi
    [[ "$airflow" != newest ]] || airflow="$(newest apache-airflow)"
    [[ "$sdk" != newest ]] || sdk="$(newest openai-agents)"
    [[ "$combination" != *newest* ]] || echo "newest on the index now: apache-airflow $airflow, openai-agents $sdk"
    # Once each: "newest:newest" is one of the named combinations until a newer release comes.
    [[ -n "${extras[$airflow:$sdk]+named}" ]] || resolved+=("$airflow:$sdk")
    [[ -n "${extras[$airflow:$sdk]:-}" ]] || extras[$airflow:$sdk]="$extra"
done
combinations=("${resolved[@]}")
#: The two tests of tests/system/test_journal_retries.py whose task fails after a model call and a tool call,
#: and the runs through the real OpenAI client (a durable run sends the request a plain run sends: a
#: method the SDK adds to its Model shows there first).
TESTS=(tests/system/test_journal_retries.py tests/unit/durable/openai_agents/test_openai_agents_http.py
    -q -p no:warnings -k "two_agents or session or test_openai_agents_http")
#: With the extra: the Pydantic AI retries under dag.test(), and the Pydantic AI unit tests (the adapter's and the operator's).
PYDANTIC_AI_TESTS=(tests/system/test_pydantic_ai_retries.py tests/unit/durable/pydantic_ai
    tests/unit/operators/test_agent_pydantic_ai.py tests/unit/operators/test_agent_pydantic_ai_extra.py -q -p no:warnings -rs)
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/sdk-combinations.XXXXXX")"
trap 'rm -rf "$LOGS"' EXIT

declare -A installing=()
for combination in "${combinations[@]}"; do
    airflow="${combination%%:*}" sdk="${combination##*:}"
    VENV="$ROOT/.venv-combination-$airflow-$sdk" NO_CONSTRAINTS=1 AIRFLOW_VERSION="$airflow" EXTRAS="${extras[$combination]}" \
        bash scripts/sdk_versions.sh "$sdk" --version \
        >"$LOGS/$combination.install" 2>&1 &
    installing[$combination]=$!
done
# The tests of one combination, its output on stdout; non-zero if they failed.
tests_of() {
    local combination=$1 failed=0
    local airflow="${combination%%:*}" sdk="${combination##*:}" extra="${extras[$combination]}"
    local venv="$ROOT/.venv-combination-$airflow-$sdk"
    echo "resolved: $("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null |
        grep -iE '^(apache-airflow|openai-agents|openai|starlette|fastapi|mcp|pydantic-ai-slim) ' | tr -s ' ' | paste -sd, -)"
    if ! VENV="$venv" NO_CONSTRAINTS=1 AIRFLOW_VERSION="$airflow" EXTRAS="$extra" bash scripts/sdk_versions.sh "$sdk" "${TESTS[@]}"; then
        echo "sdk_combinations: the retries failed beside Airflow $airflow and openai-agents $sdk" >&2
        failed=1
    fi
    if [[ "$extra" == pydantic-ai ]] &&
        ! VENV="$venv" NO_CONSTRAINTS=1 AIRFLOW_VERSION="$airflow" EXTRAS="$extra" bash scripts/sdk_versions.sh "$sdk" "${PYDANTIC_AI_TESTS[@]}"; then
        echo "sdk_combinations: the Pydantic AI tests failed beside Airflow $airflow and openai-agents $sdk" >&2
        failed=1
    fi
    return $failed
}
# The combinations' tests run JOBS at a time, each to a log of its own, shown in order once all
# have ended: in CI they run last, on a machine the other jobs have left, where one combination's
# dag.test() runs kept one of two cores busy (load 1 to 2 for the last 8 minutes, 2026-12-08).
JOBS="${JOBS:-2}"
declare -A testing=() tested=()
status=0
for combination in "${combinations[@]}"; do
    if ! wait "${installing[$combination]}"; then
        tested[$combination]=install
        continue
    fi
    while running=($(for pid in "${testing[@]}"; do kill -0 "$pid" 2>/dev/null && echo "$pid"; done)) &&
        [[ ${#running[@]} -ge $JOBS ]]; do
        wait -n "${running[@]}" || true
    done
    tests_of "$combination" >"$LOGS/$combination.tests" 2>&1 &
    testing[$combination]=$!
done
for combination in "${combinations[@]}"; do
    airflow="${combination%%:*}" sdk="${combination##*:}" extra="${extras[$combination]}"
    echo "=== Airflow $airflow, openai-agents $sdk${extra:+, the extra [$extra]}, no constraints file"
    if [[ "${tested[$combination]:-}" == install ]]; then
        cat "$LOGS/$combination.install"
        echo "sdk_combinations: Airflow $airflow with openai-agents $sdk did not install (output above)" >&2
        status=1
        continue
    fi
    wait "${testing[$combination]}" || status=1
    cat "$LOGS/$combination.tests"
done
exit $status
