"""
scripts/demo.sh, run as a user runs it, on an example whose DAG run fails for good (issue 37):
it exits non-zero, says so, and its recap keeps why each try failed, each line once.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FAILS_FOR_GOOD = Path(__file__).parent / "dags" / "demo" / "demo_fails_for_good.py"


def _line_of_this_venv() -> str | None:
    """The AIRFLOW_LINE scripts/_venv.sh installed this venv for, so that the demo installs nothing."""
    stamp = Path(sys.prefix, ".common-ai-installed")
    if not stamp.is_file():
        return None
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    for constraints in sorted((ROOT / "constraints").glob("airflow-*.txt")):
        if hashlib.sha256(constraints.read_bytes() + pyproject).hexdigest() == stamp.read_text().strip():
            return constraints.stem.removeprefix("airflow-")
    return None


def test_the_demo_exits_non_zero_when_the_dag_run_failed_and_its_recap_says_why(tmp_path):
    line = _line_of_this_venv()
    if line is None:
        pytest.skip(f"{sys.prefix} is not a venv scripts/_venv.sh installed for the current constraints")
    environ = {key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", "AIRFLOW_HOME")}
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        env={
            **environ,
            "AIRFLOW_LINE": line,
            "VENV": sys.prefix,
            "DEMO_EXAMPLE": str(FAILS_FOR_GOOD),
            "DEMO_AIRFLOW_HOME": str(tmp_path / "home"),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0, output[-5000:]
    assert "Installing" not in output
    assert "Example: the DAG run of demo_fails_for_good ended failed, not success." in output
    assert "demo: the DAG run failed (the example exited with 1)" in run.stderr
    recap = run.stdout.split("What happened (the whole log: ")[1].splitlines()[1:]
    failures = [entry for entry in recap if entry.startswith("Task failed")]
    assert len(failures) == 2, recap
    assert all("Error code: 500" in failure for failure in failures), failures
    # Each try's summary once, and no line twice within a try.
    assert len([entry for entry in recap if re.match(r"Durable: replayed \d", entry)]) == 2, recap
    assert "fails request 1, 2 with HTTP 500" in output
