"""
The offline recipe of the quick start, as a user follows it: ``python <example> --serve PORT``
serves the example's scripted model on a fixed port and prints the connection to set; a real
scheduler, api-server and LocalExecutor then run the example DAG, retry included, against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from airflow_services import AirflowServices, _free_port
from dag_runs import EXAMPLE_DAGS, ROOT, journal_entries

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

DAG_ID, TASK = "example_durable_agent", "triage_ticket"


def test_an_example_runs_under_a_scheduler_against_the_endpoint_it_serves_on_a_fixed_port(tmp_path):
    port = _free_port()
    environ = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    serving = subprocess.Popen(
        [sys.executable, str(EXAMPLE_DAGS / f"{DAG_ID}.py"), "--serve", str(port)],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        printed = []
        while not (line := serving.stdout.readline()).startswith("export AIRFLOW_CONN_OPENAI_DEFAULT="):
            assert line, f"the example stopped before it printed the connection: {''.join(printed)}"
            printed.append(line)
        assert f"http://127.0.0.1:{port}/v1" in printed[-1]
        name, value = line.removeprefix("export ").rstrip("\n").split("=", 1)
        env = {name: value.strip("'"), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        if not AIRFLOW_V_3_3_PLUS:
            env["AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH"] = f"file://{tmp_path / 'durable_cache'}"

        with AirflowServices(EXAMPLE_DAGS, tmp_path / "service_logs", env) as airflow:
            run_id = airflow.trigger(DAG_ID)
            instance = airflow.wait_for_task(DAG_ID, run_id, TASK, try_number=2)
            assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.service_log("scheduler")[
                -4000:
            ]
            try_2 = airflow.task_log(DAG_ID, run_id, TASK, try_number=2)
        assert "Durable: replayed 4 (model 2, tool 2), ran live 1 (model 1)" in try_2
        assert journal_entries(DAG_ID, run_id, tmp_path) == []
    finally:
        serving.send_signal(signal.SIGTERM)
        output, _ = serving.communicate(timeout=30)
    # Try 1 got requests 1 to 3 (the third failed); try 2 replayed two and sent the third again.
    assert "#1 HTTP 200, #2 HTTP 200, #3 HTTP 500, #4 HTTP 200." in output
