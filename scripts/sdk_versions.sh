#!/usr/bin/env bash
# Tests the provider beside one openai-agents version, with Airflow 3.3.2 (or AIRFLOW_VERSION):
#
#   bash scripts/sdk_versions.sh VERSION [pytest arguments]     (default: tests/unit -q)
#   bash scripts/sdk_versions.sh 0.20.0 tests/unit -q -x -p no:warnings
#   AIRFLOW_VERSION=3.4.0b2 NO_CONSTRAINTS=1 bash scripts/sdk_versions.sh 0.24.0 tests/system/test_journal_retries.py
#
# Makes (once) .venv-sdk-VERSION with this checkout editable, apache-airflow==3.3.2 and
# openai-agents==VERSION, pinned by constraints/sdk-MINOR.txt when there is one (NO_CONSTRAINTS=1
# lets pip resolve freely, as a user's pip install does), then runs pytest in it. The versions and
# what was run on each are in docs/airflow_lines.rst; scripts/sdk_combinations.sh runs the combinations
# it names.
#
#   AIRFLOW_VERSION  the apache-airflow release (default 3.3.2); another one gets the venv
#                    .venv-sdk-VERSION-airflow-AIRFLOW_VERSION, no constraints file (those are freezes
#                    beside 3.3.2), pip --pre for a pre-release, and, before Airflow 3.3, the journal
#                    under a cache path in the tests' Airflow home
#   VENV             the virtualenv to use (default .venv-sdk-VERSION)
#   EXTRAS           the checkout's extras to install beside test, comma-separated (for example
#                    pydantic-ai); part of what the venv was made with, so a venv made without one
#                    installs it when asked
#   PYTHON           the interpreter that creates the venv (default python3, needs 3.10+)
#
# openai-agents 0.20 has no agents.testing, the SDK's test doubles the unit tests use (added in
# 0.21): the venv gets the module of 0.21.0, whose one import 0.20 lacks is replaced by a no-op.
# Only the tests use it; the provider never imports agents.testing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/_agents_testing.sh
source "$ROOT/scripts/_agents_testing.sh"
if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+\.[0-9]+\.[0-9]+((a|b|rc)[0-9]+)?$ ]]; then
    echo "usage: bash scripts/sdk_versions.sh VERSION [pytest arguments], for example 0.20.0" >&2
    exit 2
fi
SDK_VERSION="$1"
shift
MINOR="${SDK_VERSION%.*}"
AIRFLOW_VERSION="${AIRFLOW_VERSION:-3.3.2}"
if [[ ! "$AIRFLOW_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+((a|b|rc)[0-9]+)?$ ]]; then
    echo "AIRFLOW_VERSION=$AIRFLOW_VERSION is not a release of apache-airflow, for example 3.3.2 or 3.4.0b2" >&2
    exit 2
fi
if [[ "$AIRFLOW_VERSION" == "3.3.2" ]]; then
    VENV="${VENV:-$ROOT/.venv-sdk-$SDK_VERSION}"
else
    VENV="${VENV:-$ROOT/.venv-sdk-$SDK_VERSION-airflow-$AIRFLOW_VERSION}"
fi
[[ "$VENV" == /* ]] || VENV="$PWD/$VENV"
PYTHON="${PYTHON:-python3}"
CONSTRAINTS="$ROOT/constraints/sdk-$MINOR.txt"
constraint_args=()
if [[ -f "$CONSTRAINTS" && -z "${NO_CONSTRAINTS:-}" && "$AIRFLOW_VERSION" == "3.3.2" ]]; then
    constraint_args=(-c "$CONSTRAINTS")
fi
EXTRAS="${EXTRAS:-}"
if [[ -n "$EXTRAS" && ! "$EXTRAS" =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]]; then
    echo "EXTRAS=$EXTRAS is not a comma-separated list of the checkout's extras, for example pydantic-ai" >&2
    exit 2
fi
pre_release=()
[[ ! "$AIRFLOW_VERSION" =~ (a|b|rc)[0-9]+$ ]] || pre_release=(--pre)

stamp="$VENV/.common-ai-installed"
want="$(cat "$ROOT/pyproject.toml" "${constraint_args[@]:1}" /dev/null | sha256sum | cut -d' ' -f1)-$SDK_VERSION-$AIRFLOW_VERSION${EXTRAS:+-$EXTRAS}"
if [[ ! -x "$VENV/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    started=$SECONDS
    echo "Installing the provider${EXTRAS:+ with [$EXTRAS]} beside Airflow $AIRFLOW_VERSION and openai-agents $SDK_VERSION into $VENV${constraint_args[*]:+ (constraints ${constraint_args[*]:1})} (minutes) ..."
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    rm -f "$stamp"
    log="$(mktemp)"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "${pre_release[@]}" \
        "${constraint_args[@]}" -e "${ROOT}[test${EXTRAS:+,$EXTRAS}]" "apache-airflow==$AIRFLOW_VERSION" "openai-agents==$SDK_VERSION" >"$log" 2>&1; then
        grep -v "^WARNING: Location '.*' is ignored" "$log" >&2 || true
        rm -f "$log"
        echo "pip install into $VENV failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
    ensure_agents_testing "$VENV"
    echo "$want" >"$stamp"
    echo "Installed in $((SECONDS - started)) s: $("$VENV/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -E '^(apache-airflow|openai-agents|openai|mcp|pydantic-ai-slim) ' | tr -s ' ' | paste -sd, -)"
fi

# A fresh Airflow home per run, never the developer's own.
AIRFLOW_HOME="$(mktemp -d "${TMPDIR:-/tmp}/common-ai-test-home.XXXXXX")"
export AIRFLOW_HOME
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
export OPENAI_AGENTS_DISABLE_TRACING=1
# No task state store before Airflow 3.3: the journal goes under a cache path (docs/configuration.rst).
if [[ "$AIRFLOW_VERSION" =~ ^(2\.|3\.[012]\.) ]]; then
    export AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH="${AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH:-file://$AIRFLOW_HOME/durable_cache}"
fi

cd "$ROOT"
if [[ $# -eq 0 ]]; then
    set -- tests/unit -q
fi
"$VENV/bin/python" -m pytest "$@"
