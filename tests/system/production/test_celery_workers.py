"""
Durable tasks on a production topology (R-46, R-47): PostgreSQL as the metadata database, Redis
as the Celery broker, the api-server, the scheduler, the dag-processor and two Celery workers with
names of their own, all started here. On Airflow 3.3 the journal is in the task state store (in
PostgreSQL); on 3.2 under ``durable_cache_path`` ``s3://CONN_ID@bucket/path`` on moto's S3 server,
reached through an Airflow ``aws`` connection. A Fernet key is set, so the journal is encrypted.

Run by scripts/production.sh (``AIRFLOW_LINE=3.3-prod`` and ``3.2-prod``); skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import time
import urllib.error
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

LINE = os.environ.get("AIRFLOW_LINE", "")
if LINE not in ("3.3-prod", "3.2-prod"):
    pytest.skip("a production topology: run scripts/production.sh", allow_module_level=True)
_missing = [
    name
    for name in ("psycopg2", "redis", "airflow.providers.celery", *(() if AIRFLOW_V_3_3_PLUS else ("moto", "s3fs")))
    if importlib.util.find_spec(name) is None
]
if _missing:
    raise RuntimeError(f"AIRFLOW_LINE={LINE} lacks {', '.join(_missing)}: see constraints/packages-{LINE}.txt")

from airflow_services import AirflowServices  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402
from dag_runs import openai_connection, segment_records  # noqa: E402
from services import CeleryWorkers, PostgreSQL, Redis, migrate_database  # noqa: E402

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply  # noqa: E402

DAGS = Path(__file__).parent / "dags"
BUCKET = "durable-journals"
CONN_ID = "durable_s3"
CITIES = ["Zürich", "Paris", "Rome", "Oslo"]
#: The task state store keys (3.3) of journals start with the first, of try summaries with the second.
PROVIDER_KEY_PREFIX = "airflow.providers.common.ai.durable"
JOURNAL_KEY_PREFIX = "airflow.providers.common.ai.durable/"
PLAIN_TEXTS = ("T-9", "parcel", "lookup_ticket", "send_reply", "in_flight", "fingerprint", "sunny")
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@dataclass
class Deployment:
    airflow: AirflowServices
    workers: CeleryWorkers
    postgres: PostgreSQL
    out: Path
    server: FakeOpenAIServer
    city_servers: list[FakeOpenAIServer]
    s3_endpoint: str | None

    def workers_running(self, *names: str) -> None:
        for name in self.workers.processes.copy():
            if name not in names:
                self.workers.stop(name)
        for name in names:
            if not self.workers.running(name):
                self.workers.start(name)

    def journal(self, dag_id: str) -> dict[str, str]:
        """
        What the store holds of ``dag_id``'s journals, as stored: each record of their segments by
        where it is stored and its entry's key (``<row or object>#1.2``), superseded ones too.
        """
        journal = {key: text for key, text in self.stored(dag_id).items() if _is_journal_key(key)}
        return {f"{key}#{entry}": text for key, entry, text in segment_records(journal)}

    def journal_after_success(self, dag_id: str) -> dict[str, str]:
        """
        What is left of ``dag_id``'s journals once their worker is done: the worker deletes a
        journal in its success listener, a moment after Airflow recorded the success.
        """
        deadline = time.monotonic() + 60
        while (left := self.journal(dag_id)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def stored(self, dag_id: str) -> dict[str, str]:
        """Everything the provider stored for ``dag_id``: journals, and try summaries (kept after success)."""
        if AIRFLOW_V_3_3_PLUS:
            rows = self.postgres.query("SELECT key, value FROM task_state_store WHERE dag_id = %s", dag_id)
            return {key: json.loads(value) for key, value in rows if key.startswith(PROVIDER_KEY_PREFIX)}
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.s3_endpoint)
        stored = {}
        for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
            if f"dag_id={dag_id}/" in item["Key"]:
                # A worker may delete an object between the listing and the read: it is gone.
                with contextlib.suppress(s3.exceptions.NoSuchKey):
                    stored[item["Key"]] = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read().decode()
        return stored

    def tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
        if map_index >= 0:
            path += f"/{map_index}"
        try:
            return self.airflow._request("GET", f"{path}/tries")["task_instances"]
        except urllib.error.HTTPError as error:
            if error.code == 404:  # the scheduler has not created the task instance yet
                return []
            raise


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, airflow_db) -> Iterator[Deployment]:
    out = tmp_path_factory.mktemp("production_out")
    with ExitStack() as stack:
        environment = stack.enter_context(pytest.MonkeyPatch.context())
        for name, value in FAKE_AWS.items():  # for boto3 in this process; the services get them too
            environment.setenv(name, value)
        postgres = stack.enter_context(PostgreSQL())
        redis = stack.enter_context(Redis())
        server = stack.enter_context(FakeOpenAIServer())
        city_servers = [stack.enter_context(FakeOpenAIServer()) for _ in CITIES]
        env = {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres.url,
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__CELERY__BROKER_URL": redis.url,
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg2://airflow@127.0.0.1:{postgres.port}/airflow",
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
            # A killed worker's task instance stops heartbeating; the scheduler retries it this soon.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "15",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            "AIRFLOW_CONN_OPENAI_DEFAULT": openai_connection(server),
            **{f"AIRFLOW_CONN_OPENAI_{i}": openai_connection(s) for i, s in enumerate(city_servers)},
            "DURABLE_TEST_OUT": str(out),
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            **FAKE_AWS,
        }
        s3_endpoint = None
        if not AIRFLOW_V_3_3_PLUS:
            import boto3
            from moto.server import ThreadedMotoServer

            moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            moto.start()
            stack.callback(moto.stop)
            host, port = moto.get_host_and_port()
            s3_endpoint = f"http://{host}:{port}"
            boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=BUCKET)
            connection = {
                "conn_type": "aws",
                "login": "testing",
                "password": "testing",
                "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
            }
            env[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(connection)
            env["AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH"] = f"s3://{CONN_ID}@{BUCKET}/airflow/durable"
        airflow = AirflowServices(DAGS, tmp_path_factory.mktemp("production_logs"), env)
        migrate_database(airflow.env)
        stack.enter_context(airflow)
        workers = stack.enter_context(CeleryWorkers(airflow))
        yield Deployment(airflow, workers, postgres, out, server, city_servers, s3_endpoint)


def _is_journal_key(key: str) -> bool:
    # On S3 a task instance's try summaries are in "<its journal's folder>.summaries/".
    return key.startswith(JOURNAL_KEY_PREFIX) if AIRFLOW_V_3_3_PLUS else ".summaries/" not in key


def assert_encrypted(stored: dict[str, str]) -> None:
    for key, text in stored.items():
        # One Fernet token and nothing beside it. A short plain text (the ticket id) is not looked
        # for in the token: base64 holds "T-9" now and then by chance.
        assert re.fullmatch(r"fernet:[A-Za-z0-9_-]+=*", text), key
        for plain in PLAIN_TEXTS:
            assert len(plain) < 6 or plain not in text, (key, plain)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_file(path: Path, deployment: Deployment, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            logs = {
                name: deployment.airflow.service_log(name)[-2000:]
                for name in ("scheduler", *deployment.workers.processes)
            }
            raise TimeoutError(f"{path} did not appear in {timeout} s: {logs}")
        time.sleep(0.2)


def record_timing(name: str, seconds: float) -> None:
    """Measured costs go to the file scripts/production.sh prints, never into an assertion."""
    if timings := os.environ.get("DURABLE_PRODUCTION_TIMINGS"):
        with open(timings, "a") as file:
            file.write(f"{LINE} {name}: {seconds:.1f} s\n")


def test_a_task_whose_worker_is_killed_in_a_tool_call_is_retried_on_another_worker_that_replays(deployment):
    deployment.workers_running("worker-a")
    deployment.server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-9"}, "call_lookup")),
        reply.tool_calls(("send_reply", {"ticket_id": "T-9", "text": "We are on it."}, "call_send")),
        reply.text("Replied to T-9."),
    )
    first_request = len(deployment.server.requests)
    run_id = deployment.airflow.trigger("production_tool_killed")

    # Try 1 is inside send_reply on worker A, which has already written the message.
    marker = deployment.out / "in_send_reply.json"
    wait_for_file(marker, deployment)
    assert json.loads(marker.read_text())["worker"] == "worker-a"
    deployment.workers_running("worker-a", "worker-b")

    # what the store holds while try 1 waits is encrypted; none of it reads as plain text.
    stored = deployment.journal("production_tool_killed")
    # two answers, a recorded tool call, the one in flight
    assert len({key.rsplit("#", 1)[1] for key in stored}) == 4, stored
    assert_encrypted(stored)

    killed = time.monotonic()
    deployment.workers.kill("worker-a")
    with contextlib.suppress(ProcessLookupError):  # in case the task process left worker A's group
        os.kill(json.loads(marker.read_text())["pid"], signal.SIGKILL)

    instance = deployment.airflow.wait_for_task(
        "production_tool_killed", run_id, "answer_ticket", try_number=2, timeout=300
    )
    record_timing("from SIGKILL of worker A to the retry's success on worker B", time.monotonic() - killed)
    assert (instance["state"], instance["try_number"]) == ("success", 2), deployment.airflow.service_log("scheduler")[
        -4000:
    ]
    tries = deployment.tries("production_tool_killed", run_id, "answer_ticket")
    assert [(t["try_number"], t["hostname"]) for t in tries] == [(1, "worker-a"), (2, "worker-b")]
    if tries[1].get("duration") is not None:
        record_timing("the retry on worker B (replay of 3 steps, 2 live calls)", tries[1]["duration"])

    # Model: two requests on try 1; try 2 replays both and asks only for the final answer.
    assert [r.status for r in deployment.server.requests[first_request:]] == [200, 200, 200]
    # Tools: lookup_ticket ran once, on A; send_reply, killed on A, ran once more on B with the same key.
    [lookup, send_1, send_2] = lines(deployment.out / "tool_calls.jsonl")
    assert (lookup["tool"], lookup["try"], lookup["worker"]) == ("lookup_ticket", 1, "worker-a")
    assert (send_1["tool"], send_1["try"], send_1["worker"], send_1["already_sent"]) == (
        "send_reply",
        1,
        "worker-a",
        False,
    )
    assert (send_2["tool"], send_2["try"], send_2["worker"], send_2["already_sent"]) == (
        "send_reply",
        2,
        "worker-b",
        True,
    )
    assert send_1["key"] == send_2["key"]
    assert len(list((deployment.out / "outbox").iterdir())) == 1

    try_2 = deployment.airflow.task_log("production_tool_killed", run_id, "answer_ticket", 2)
    assert "a call an earlier try started and never finished runs again" in try_2
    assert "Durable: replayed 3 (model 2, tool 1), ran live 2 (model 1, tool 1), could not record 0" in try_2
    # Success leaves no journal behind in the table or the bucket; the try summaries kept for the
    # journal page (if any) are encrypted too.
    assert deployment.journal_after_success("production_tool_killed") == {}
    assert_encrypted(deployment.stored("production_tool_killed"))


def test_mapped_tasks_running_at_once_on_both_workers_keep_their_journals_apart(deployment):
    deployment.workers_running("worker-a", "worker-b")
    for city, server in zip(CITIES, deployment.city_servers, strict=True):
        server.add(reply.tool_calls(("weather", {"city": city}, "call_weather")), reply.text(f"{city}: sunny"))
        server.fail_later(2)  # each map index's request after its tool fails on try 1
    run_id = deployment.airflow.trigger("production_mapped")

    for map_index in range(len(CITIES)):
        deadline = time.monotonic() + 300
        while not (tries := deployment.tries("production_mapped", run_id, "forecast", map_index)) or not (
            tries[-1]["try_number"] == 2 and tries[-1]["state"] in ("success", "failed")
        ):
            assert time.monotonic() < deadline, tries
            time.sleep(0.5)
        assert [t["try_number"] for t in tries] == [1, 2] and tries[-1]["state"] == "success", (map_index, tries)

    calls = lines(deployment.out / "weather.jsonl")
    # Each tool ran once, on try 1; the barrier held two tries at once, so both workers ran some.
    assert sorted((c["map_index"], c["city"], c["try"]) for c in calls) == [
        (i, city, 1) for i, city in enumerate(CITIES)
    ]
    assert {c["worker"] for c in calls} == {"worker-a", "worker-b"}
    for map_index, (city, server) in enumerate(zip(CITIES, deployment.city_servers, strict=True)):
        assert [r.status for r in server.requests] == [200, 500, 200], city
        # The retry's request carries the tool output replayed from this map index's own journal.
        retried = json.dumps(server.requests[2].body, ensure_ascii=False)
        assert f"{city} (map index {map_index}): sunny" in retried
        assert not [other for other in CITIES if other != city and other in retried]
        assert server.requests[2].body == server.requests[1].body
    assert deployment.journal_after_success("production_mapped") == {}
    assert_encrypted(deployment.stored("production_mapped"))
