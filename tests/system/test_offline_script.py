"""
scripts/offline.sh runs a user's own DAG file offline in one command (issue 37): its own Airflow
home and database, ``airflow dags test``, the local endpoint on a chosen port, and its exit code.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_demo_script import ROOT, _line_of_this_venv

MY_OWN_DAG = Path(__file__).parent / "dags" / "offline" / "my_own_agent.py"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_users_dag_runs_offline_on_the_chosen_port_and_its_retry_replays(tmp_path):
    line = _line_of_this_venv()
    if line is None:
        pytest.skip(f"{sys.prefix} is not a venv scripts/_venv.sh installed for the current constraints")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Hello from offline."]))
    port = _free_port()
    environ = {key: value for key, value in os.environ.items() if key not in ("OPENAI_API_KEY", "AIRFLOW_HOME")}
    run = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "offline.sh"),
            str(MY_OWN_DAG),
            "--replies",
            str(replies),
            "--fail",
            "1",
            "--port",
            str(port),
        ],
        env={**environ, "AIRFLOW_LINE": line, "VENV": sys.prefix, "OFFLINE_AIRFLOW_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    assert "Installing" not in output
    assert (
        f"Offline: the local endpoint at http://127.0.0.1:{port}/v1 answers the model requests of my_own_agent"
        in output
    )
    # Try 1 met the failed request, try 2 got the one scripted answer; no request went anywhere else.
    assert "Offline: the model requests the local endpoint got: #1 HTTP 500, #2 HTTP 200." in output
    summaries = [line.split("Durable: ", 1)[1] for line in output.splitlines() if "Durable: replayed" in line]
    assert summaries[-1].startswith("replayed 0, ran live 1 (model 1)"), summaries
    assert "Offline: airflow dags test my_own_agent succeeded." in output
    assert f"Migrating the Airflow database in {tmp_path / 'home'} ..." in output
