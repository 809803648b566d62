#!/usr/bin/env bash
# Conformance with the OpenAI Agents SDK's own tests (R-20, R-49; issue 14): is a durable run
# indistinguishable from Runner.run, as judged by a test suite nobody on this project wrote?
#
#   bash scripts/sdk_conformance.sh [--modes "shipped outside journal retry"] [--rev REV]
#                                   [--files "tests/test_x.py ..."] [-- pytest arguments]
#
# 1. Downloads the source release (sdist) of the openai-agents version that
#    constraints/airflow-3.3.txt pins (or SDK_VERSION, below), with pip, once: cached under
#    .conformance/.
# 2. Makes .conformance/venv (no system site packages; the project's venvs are left alone):
#    this provider, editable, against constraints/airflow-3.3.txt, plus the SDK's test
#    dependencies at the versions the SDK's own uv.lock pins (pytest among them: newer ones fail
#    to collect one of its files), and pytest-timeout.
# 3. Runs the runner-level test files listed in SDK_TEST_FILES below, once per mode, through the
#    pytest plugin scripts/sdk_conformance/durable_conformance.py:
#      shipped  the tests as shipped (the baseline; they must all pass)
#      outside  every top-level non-streamed Runner.run / run_sync is run_durably /
#               run_durably_sync with no journal: outside a task, where it must be exactly
#               Runner.run (R-20), so no refusal is allowed here
#      journal  the same inside a fresh in-memory journal per run, as inside a task (R-49)
#      retry    as journal, and each journaled run (returned or raised) is run again as a retry over
#               the same storage, as a new try would run it (the context as it was before the
#               first run, the test's scripted models answering by request as a deterministic
#               model does). It must show the same final output, item types, interruptions and
#               last agent (by name), replay every call the first run recorded, and ask no model
#               anything new; a retry that hangs counts too. Only that comparison is the verdict
#               here: the retry calls the test's hooks and tracing a second time, so the test's
#               own asserts are shown for information only.
#    Each mode's pytest output is kept in .conformance/results/MODE.log (results-VERSION/ for
#    another SDK_VERSION).
# 4. Prints per mode the passed/failed counts and the failing test ids, marks those listed in
#    scripts/sdk_conformance_allowed.txt (mode, test id, reason), writes the whole report to
#    .conformance/results/summary.md, and exits 1 when a failure or a mismatch is not allowed, or
#    when a test the list allows passes now (its line is stale).
#
#   --rev REV   judge the provider as committed at REV (git archive into .conformance/, put first
#               on PYTHONPATH) instead of the working tree
#   JOBS        pytest-xdist workers (default 2; JOBS=0 runs in one process)
#   TEST_TIMEOUT  seconds before a test that hangs fails (pytest-timeout; default 20)
#   PYTHON      the interpreter that creates the venv (default python3, 3.10+)
#   SDK_VERSION   the openai-agents release whose tests to run (default: the one
#               constraints/airflow-3.3.txt pins). Another one installs against
#               constraints/sdk-MINOR.txt (which must pin that release), into .conformance/venv-VERSION,
#               with results in .conformance/results-VERSION, and is judged by
#               scripts/sdk_conformance_allowed-MINOR.txt when there is one. Files of the list that
#               its source release does not have are skipped (the output names them). A release
#               without agents.testing (0.20) gets the test doubles of 0.21.0 in its venv, for the
#               plugin's mode retry; its own tests use their FakeModel, which mode retry does not
#               make answer by request.
#
# Each mode takes about a minute on 2 cores with JOBS=2 (shipped half that), besides the first
# download and install. docs/conformance.rst says what is allowed and why.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/_agents_testing.sh
source "$ROOT/scripts/_agents_testing.sh"
CONF="$ROOT/.conformance"
CONSTRAINTS="$ROOT/constraints/airflow-3.3.txt"
ALLOWED="$ROOT/scripts/sdk_conformance_allowed.txt"
PLUGIN_DIR="$ROOT/scripts/sdk_conformance"
VENV="$CONF/venv"
RESULTS="$CONF/results"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-2}"
TEST_TIMEOUT="${TEST_TIMEOUT:-20}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# The runner-level files of the SDK's tests/: the ones that run agents with Runner.run.
SDK_TEST_FILES=(
    # runs
    test_agent_runner.py test_agent_runner_sync.py test_run.py test_run_config.py
    test_run_error_details.py test_runner_model_provider_lifecycle.py test_run_impl_resume_paths.py
    test_invalid_final_output_handler.py test_call_model_input_filter.py test_agent_prompt.py
    test_prompt_cache_key.py test_tool_choice_reset.py test_error_logging_redaction.py
    # handoffs
    test_handoff_history_duplication.py
    # guardrails
    test_guardrails.py test_tool_guardrails.py test_agent_as_tool_output_guardrails.py
    test_runner_guardrail_resume.py
    # tool use
    test_tool_use_behavior.py test_agent_as_tool.py test_tool_failure_boundaries.py
    test_default_tool_error_redaction.py test_tool_batch_failure_history.py
    test_resume_tool_use_behavior.py test_tool_exception_formatter.py
    test_tool_name_collision_policy.py test_tool_custom_data.py test_tool_origin.py
    test_start_hook_tools.py test_start_hook_tool_concurrency.py test_native_tool_failure_history.py
    test_agent_tool_enablement_snapshot.py
    # approvals (human in the loop)
    test_agent_scoped_approvals.py test_hitl_error_scenarios.py test_hitl_session_scenario.py
    test_tool_approval_call_id_reuse.py test_function_tool_approval_arguments.py
    # max turns
    test_max_turns.py
    # hooks
    test_agent_hooks.py test_run_hooks.py test_global_hooks.py test_agent_llm_hooks.py
    test_run_state_hook_identity.py
    # tracing
    test_agent_tracing.py test_tracing_errors.py test_runner_tracing_disabled.py
    # run state
    test_run_state.py test_run_state_agent_identity.py test_run_state_pending_input.py
    test_run_state_aliases.py
)

MODES="shipped outside journal retry"
REV=""
FILES=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --modes) MODES="$2"; shift 2 ;;
        --rev) REV="$2"; shift 2 ;;
        --files) FILES="$2"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1; see: bash scripts/sdk_conformance.sh --help" >&2; exit 2 ;;
    esac
done
for mode in $MODES; do
    case "$mode" in shipped|outside|journal|retry) ;; *)
        echo "unknown mode $mode; use some of: shipped outside journal retry" >&2; exit 2 ;;
    esac
done

VERSION="$(sed -n 's/^openai-agents==//p' "$CONSTRAINTS")"
if [[ -z "$VERSION" ]]; then
    echo "constraints/airflow-3.3.txt pins no openai-agents version; add openai-agents==X.Y.Z" >&2
    exit 2
fi
if [[ -n "${SDK_VERSION:-}" && "$SDK_VERSION" != "$VERSION" ]]; then
    if [[ ! "$SDK_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
        echo "SDK_VERSION=$SDK_VERSION is not a release of openai-agents, for example 0.20.0" >&2
        exit 2
    fi
    VERSION="$SDK_VERSION"
    MINOR="${VERSION%.*}"
    CONSTRAINTS="$ROOT/constraints/sdk-$MINOR.txt"
    pinned="$(sed -n 's/^openai-agents==//p' "$CONSTRAINTS" 2>/dev/null || true)"
    if [[ "$pinned" != "$VERSION" ]]; then
        echo "SDK_VERSION=$VERSION needs constraints/sdk-$MINOR.txt pinning openai-agents==$VERSION" \
            "(it pins: ${pinned:-nothing, or is missing})" >&2
        exit 2
    fi
    VENV="$CONF/venv-$VERSION"
    RESULTS="$CONF/results-$VERSION"
    [[ ! -f "$ROOT/scripts/sdk_conformance_allowed-$MINOR.txt" ]] || ALLOWED="$ROOT/scripts/sdk_conformance_allowed-$MINOR.txt"
fi
SDK="$CONF/openai_agents-$VERSION"
mkdir -p "$RESULTS"

# 1. The venv (bare first: its pip downloads the sdist).
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi

# 2. The SDK's source release, for its tests/, its pytest settings and its lock file.
SDIST="$CONF/sdist/openai_agents-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
    echo "Downloading the openai-agents $VERSION source release ..."
    "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$CONF/sdist" \
        "openai-agents==$VERSION" 2>&1 | grep -v "^WARNING: Location '.*' is ignored" || true
    [[ -f "$SDIST" ]] || { echo "pip did not download $SDIST (output above)" >&2; exit 1; }
fi
if [[ ! -f "$SDK/.extracted" ]]; then
    rm -rf "$SDK"
    tar -xzf "$SDIST" -C "$CONF" "openai_agents-$VERSION/tests" "openai_agents-$VERSION/pyproject.toml" \
        "openai_agents-$VERSION/uv.lock"
    touch "$SDK/.extracted"
fi

# 3. Install, when the constraints, pyproject.toml or the SDK's lock file changed.
TEST_DEPS="$("$VENV/bin/python" - "$SDK/uv.lock" <<'PY'
import sys, tomllib
wanted = ("pytest", "pytest-asyncio", "pytest-mock", "pytest-xdist", "inline-snapshot")
locked = {p["name"]: p["version"] for p in tomllib.load(open(sys.argv[1], "rb"))["package"]}
# pytest-timeout is not the SDK's: a run that hangs is a failure of its test, not of the session.
print(" ".join([*(f"{name}=={locked[name]}" for name in wanted), "pytest-timeout==2.4.0"]))
PY
)"
want="$(cat "$CONSTRAINTS" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1) $TEST_DEPS"
stamp="$VENV/.conformance-installed"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "Installing the provider and the SDK's test dependencies ($TEST_DEPS) into $VENV ..."
    log="$(mktemp)"
    # Two steps: the SDK's lock file pins an older pytest than the Airflow constraints do.
    if ! { "$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e "$ROOT" \
        && "$VENV/bin/python" -m pip install -q $TEST_DEPS; } >"$log" 2>&1; then
        grep -v "^WARNING: Location '.*' is ignored" "$log" >&2 || true
        rm -f "$log"
        echo "pip install into $VENV failed (output above)" >&2
        exit 1
    fi
    rm -f "$log"
    ensure_agents_testing "$VENV"
    echo "$want" >"$stamp"
fi
# Some SDK tests look for the SDK's frames in tracebacks under tests/../src/agents: point that at
# the installed package, which is the same release.
agents_dir="$("$VENV/bin/python" -c 'import agents, os; print(os.path.dirname(agents.__file__))')"
mkdir -p "$SDK/src"
ln -sfn "$agents_dir" "$SDK/src/agents"

# The provider to judge: the working tree (editable), or a committed revision.
PYPATH="$PLUGIN_DIR"
SOURCE="working tree $(git -C "$ROOT" rev-parse --short HEAD)"
if [[ -n "$(git -C "$ROOT" status --porcelain -- src 2>/dev/null)" ]]; then
    SOURCE="$SOURCE with uncommitted changes in src/"
fi
if [[ -n "$REV" ]]; then
    sha="$(git -C "$ROOT" rev-parse --short "$REV^{commit}")"
    if [[ ! -d "$CONF/src-$sha" ]]; then
        mkdir -p "$CONF/src-$sha"
        git -C "$ROOT" archive "$sha" src | tar -x -C "$CONF/src-$sha"
    fi
    PYPATH="$PLUGIN_DIR:$CONF/src-$sha/src"
    SOURCE="commit $sha"
fi

if [[ -n "$FILES" ]]; then
    read -r -a TARGETS <<<"$FILES"
else
    # An older release may not have every file of the list yet.
    TARGETS=()
    missing=()
    for file in "${SDK_TEST_FILES[@]}"; do
        if [[ -f "$SDK/tests/$file" ]]; then TARGETS+=("tests/$file"); else missing+=("$file"); fi
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        echo "openai-agents $VERSION has no ${#missing[@]} of the listed test files, skipped: ${missing[*]}"
    fi
fi
XDIST=()
[[ "$JOBS" == "0" ]] || XDIST=(-n "$JOBS")

cd "$SDK"
provider_file="$(PYTHONPATH="$PYPATH" "$VENV/bin/python" -c \
    'import airflow.providers.common.ai.durable.openai_agents as m; print(m.__file__)')"
echo "openai-agents $VERSION tests, ${#TARGETS[@]} files; provider: $SOURCE ($provider_file)"
for mode in $MODES; do
    started=$SECONDS
    echo
    echo "=== $mode"
    # pytest's own exit status is not the verdict: summarize.py compares with the allowed list.
    # --tb=native: after a RecursionError pytest's own traceback formatting can crash a worker
    # (CPython 3.11: "AST constructor recursion depth mismatch"), ending the session early.
    PYTHONPATH="$PYPATH" "$VENV/bin/python" -m pytest -p durable_conformance -p no:cacheprovider \
        --durable-mode="$mode" --durable-results="$RESULTS/$mode.jsonl" \
        --timeout="$TEST_TIMEOUT" -q --no-header -rN --tb=native "${XDIST[@]}" "${TARGETS[@]}" "$@" \
        >"$RESULTS/$mode.log" 2>&1 || true
    tail -n 1 "$RESULTS/$mode.log"
    echo "$((SECONDS - started))" >"$RESULTS/$mode.seconds"
done

exec "$VENV/bin/python" "$PLUGIN_DIR/summarize.py" --results "$RESULTS" --allowed "$ALLOWED" \
    --sdk-version "$VERSION" --source "$SOURCE" $MODES
