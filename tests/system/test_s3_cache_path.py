"""
The cache path on an S3-compatible store (R-2, R-46), through real Airflow retries on the 3.2
line: moto's S3 server on 127.0.0.1, reached through an Airflow connection named in the path
(``s3://CONN_ID@bucket/path``).

Needs the S3 filesystem and moto, which the pinned 3.2 line cannot hold beside its
python-dateutil: run it as ``AIRFLOW_LINE=3.2-s3 bash scripts/test.sh tests/system/test_s3_cache_path.py``
(.ci/run runs it on the 3.2-prod line, which has the same packages). Elsewhere it is skipped; on that line a missing package is an error.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from dag_runs import TEST_DAGS, is_try_summary, latest_run_id, openai_connection, run_dag_file, task_states

from airflow.providers.common.ai.durable.airflow.object_storage import task_instance_folder
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

RUN_IT = "AIRFLOW_LINE=3.2-s3 bash scripts/test.sh tests/system/test_s3_cache_path.py"
_missing = [
    name
    for name in ("s3fs", "moto", "flask", "flask_cors", "airflow.providers.amazon")
    if importlib.util.find_spec(name) is None
]
if os.environ.get("AIRFLOW_LINE") in ("3.2-s3", "3.2-prod") and _missing:
    line = os.environ["AIRFLOW_LINE"]
    raise RuntimeError(f"AIRFLOW_LINE={line} lacks {', '.join(_missing)}: see constraints/packages-{line}.txt")
if AIRFLOW_V_3_3_PLUS:
    pytest.skip("durable_cache_path is used before Airflow 3.3 only", allow_module_level=True)
if _missing:
    pytest.skip(f"needs {', '.join(_missing)}; run it with {RUN_IT}", allow_module_level=True)

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

BUCKET = "durable-journals"
CONN_ID = "durable_s3"
# Credentials for moto only: the environment never points boto at a real account.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture
def s3_endpoint(monkeypatch):
    """An empty bucket on moto's S3 server at 127.0.0.1; yields the endpoint URL."""
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def bucket_keys(endpoint: str) -> list[str]:
    listed = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(Bucket=BUCKET)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def test_run_durably_in_a_task_journals_to_s3_through_the_connection_in_the_path_and_a_retry_replays(
    tmp_path, s3_endpoint
):
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.text("Paris: sunny"),
        reply.tool_calls(("weather", {"city": "Rome"}, "call_2")),
        reply.text("Rome: sunny"),
    ]
    connection = {
        "conn_type": "aws",
        "login": "testing",
        "password": "testing",
        "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    }
    # Each task's second model request fails on try 1, after its first answer and its tool ran.
    with FakeOpenAIServer(script, fail_requests={2, 5}) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_s3_cache_path.py",
            {
                **FAKE_CREDENTIALS,
                "AIRFLOW_CONN_OPENAI_DEFAULT": openai_connection(server),
                f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(connection),
                "AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH": f"s3://{CONN_ID}@{BUCKET}/airflow/durable",
                "FAKE_OPENAI_BASE_URL": server.base_url,
                "DURABLE_TEST_OUT": str(tmp_path),
                "DURABLE_TEST_S3_ENDPOINT": s3_endpoint,
                "DURABLE_TEST_S3_BUCKET": BUCKET,
                "OPENAI_AGENTS_DISABLE_TRACING": "1",
            },
        )
    run_id = latest_run_id("durable_s3_cache_path")
    assert task_states("durable_s3_cache_path", run_id) == {
        ("forecast_sync", -1): ("success", 2),
        ("forecast_async", -1): ("success", 2),
    }, run.output[-5000:]

    # Try 1 of each task sent two requests and failed on the second; try 2 replayed the first
    # answer and the tool and sent only the failed request again.
    assert [(r.number, r.status) for r in server.requests] == [
        (1, 200),
        (2, 500),
        (3, 200),
        (4, 200),
        (5, 500),
        (6, 200),
    ]
    assert server.requests[2].body == server.requests[1].body
    assert server.requests[5].body == server.requests[4].body
    assert (tmp_path / "tool_runs.txt").read_text().splitlines() == [
        "forecast_sync weather Paris try 1",
        "forecast_async weather Rome try 1",
    ]
    for task_id in ("forecast_sync", "forecast_async"):
        try_1, try_2 = run.tries(task_id)
        assert "Durable: replayed 0, ran live 2 (model 1, tool 1), could not record 0" in try_1
        assert "Durable: journal deleted" not in try_1
        assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0" in try_2
        assert "Durable: journal deleted" in try_2

        # Nothing was in the bucket when try 1 started; try 1 left its two steps there, in one
        # segment under the task instance's folder; after success it is gone.
        assert [
            key for key in json.loads((tmp_path / f"{task_id}.try1.json").read_text()) if not is_try_summary(key)
        ] == []
        folder = f"airflow/durable/{task_instance_folder('durable_s3_cache_path', run_id, task_id, -1)}"
        # The try summary try 1 left beside the journal (for the journal page) is not a step; its
        # one segment, which try 2 replayed from, holds both steps.
        found = json.loads((tmp_path / f"{task_id}.try2.json").read_text())
        assert [key for key in found if not is_try_summary(key)] == [f"{folder}/segment-1.json"]
    # Only the try summaries, kept on purpose for the journal page, stay in the bucket.
    assert [key for key in bucket_keys(s3_endpoint) if not is_try_summary(key)] == []
