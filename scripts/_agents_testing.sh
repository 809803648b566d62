# shellcheck shell=bash
# Sourced by scripts/sdk_versions.sh and scripts/sdk_conformance.sh.
#
# ensure_agents_testing VENV: openai-agents 0.20 has no agents.testing (the SDK's test doubles,
# added in 0.21), which the tests and the conformance harness use and the provider never imports.
# A venv without it gets the module of 0.21.0, whose one import 0.20 lacks is replaced by a no-op.
ensure_agents_testing() {
    local venv="$1" wheels
    "$venv/bin/python" -c "import agents.testing" 2>/dev/null && return 0
    echo "openai-agents $("$venv/bin/python" -c 'import agents; print(agents.__version__)' 2>/dev/null) has no agents.testing: adding the test doubles of openai-agents 0.21.0"
    wheels="$(mktemp -d)"
    "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps "openai-agents==0.21.0" -d "$wheels" 2>&1 |
        grep -v "^WARNING: Location '.*' is ignored" >&2 || true
    "$venv/bin/python" - "$wheels"/openai_agents-0.21.0-*.whl <<'EOF'
import os
import sys
import zipfile

import agents

target = os.path.join(os.path.dirname(agents.__file__), "testing")
os.makedirs(target, exist_ok=True)
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in ("__init__.py", "model.py", "sandbox.py"):
        text = wheel.read(f"agents/testing/{name}").decode()
        if name == "model.py":
            # 0.20 converts a response's usage from its fields alone: nothing to attach.
            text = text.replace("    _attach_normalized_usage,\n", "", 1).replace(
                "from ..util._error_tracing import REDACTED_TRACE_ERROR_MESSAGE\n",
                "from ..util._error_tracing import REDACTED_TRACE_ERROR_MESSAGE\n\n\n"
                "def _attach_normalized_usage(target: Any, usage: Usage) -> None:\n    pass\n",
                1,
            )
        with open(os.path.join(target, name), "w") as out:
            out.write(text)
EOF
    rm -rf "$wheels"
    "$venv/bin/python" -c "import agents.testing"
}
