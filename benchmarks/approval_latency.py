"""
What the approval waits cost (docs/approvals.rst): from a person's answer to the approved tool's
run, under a real scheduler, api-server and triggerer (SQLite, LocalExecutor), for an answer given
at chosen moments after the request appears, with ``[common.ai] approval_wait_in_worker`` at its
default and off. One task at a time, so that the times are Airflow's and the provider's, not a
queue's. Run by hand, from the repository root, in the project's venv:

    AIRFLOW_HOME=$(mktemp -d) OPENAI_AGENTS_DISABLE_TRACING=1 .venv/bin/python benchmarks/approval_latency.py

It prints one line per answer: the hold, the moment of the answer, the seconds from the answer to
the refund, and how the task ended (a task the scheduler failed for the defer race retries once).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "system"))

from dag_runs import TEST_DAGS, durable_env  # noqa: E402
from test_approvals_in_airflow import LOOKUP, REFUND, ServicesWithTriggerer  # noqa: E402

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply  # noqa: E402

DAG_ID = "durable_approval"
#: Seconds after the request appears that each answer is given.
MOMENTS = [0, 5, 25]
REPEATS = 2


def request_appeared(airflow: ServicesWithTriggerer, run_id: str) -> float:
    while True:
        try:
            airflow._request("GET", airflow.hitl_path(DAG_ID, run_id))
            return time.time()
        except (urllib.error.HTTPError, OSError):
            airflow.ensure_running()
            time.sleep(0.1)


def measure(hold: str, out: Path) -> list[tuple[float, float, str]]:
    results = []
    with FakeOpenAIServer() as server:
        env = {
            **durable_env(server, out),
            "DURABLE_TEST_OUT": str(out),
            "AIRFLOW__COMMON_AI__APPROVAL_WAIT_IN_WORKER": hold,
        }
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
        )
        with ServicesWithTriggerer(TEST_DAGS, Path(tempfile.mkdtemp()), env) as airflow:
            for moment in MOMENTS * REPEATS:
                server.add(LOOKUP, REFUND, reply.text("Refunded, closing."))
                run_id = airflow.trigger(DAG_ID)
                time.sleep(moment - (time.time() - request_appeared(airflow, run_id)))
                answered = time.time()
                airflow.answer(DAG_ID, run_id, "Approve")
                instance = airflow.wait_for_task(DAG_ID, run_id, "handle_ticket", timeout=600)
                calls = [json.loads(line) for line in (out / "approval_tool_calls.jsonl").read_text().splitlines()]
                [refunded] = [c["at"] for c in calls if c["run_id"] == run_id and c["tool"] == "issue_refund"] or [
                    float("nan")
                ]
                results.append((moment, refunded - answered, f"{instance['state']} in try {instance['try_number']}"))
                print(
                    f"hold {hold:>2} s, answer at {moment:>2} s: refund {refunded - answered:5.1f} s later, "
                    f"{results[-1][2]}",
                    flush=True,
                )
    return results


def main() -> None:
    for hold in ("20", "0"):
        with tempfile.TemporaryDirectory() as out:
            results = measure(hold, Path(out))
        for moment in MOMENTS:
            latencies = [latency for at, latency, _ in results if at == moment]
            print(f"hold {hold} s, answer at {moment} s: median {statistics.median(latencies):.1f} s")


if __name__ == "__main__":
    main()
