"""Durable tasks through real Airflow retries: ``dag.test()`` runs each try of a task with ``retries=1``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dag_runs import is_try_summary, latest_run_id

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

DAGS = Path(__file__).parent / "dags"


def run_dag_file(name: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``dag.test()`` of a DAG file in DAGS in its own process, as ``python <file>`` would."""
    return subprocess.run(
        [sys.executable, str(DAGS / name)],
        env={**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "DURABLE_TEST_OUT": str(out), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_no_journal_left(dag_id: str, cache: Path, *, task_keys: list[str]) -> None:
    if AIRFLOW_V_3_3_PLUS:
        # the task state store held the journal; only the task's own keys are left.
        assert task_state_store_keys(dag_id) == task_keys
        assert not cache.exists()
    else:
        # the cache path held the journal; after success the task instance's folder is gone.
        assert [path for path in cache.rglob("*") if path.is_file() and not is_try_summary(str(path))] == []


def task_state_store_keys(dag_id: str, run_id: str | None = None) -> list[str]:
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskStateStoreModel.key).where(TaskStateStoreModel.dag_id == dag_id)
    if run_id is not None:
        query = query.where(TaskStateStoreModel.run_id == run_id)
    with create_session() as session:
        keys = session.scalars(query)
        return [key for key in keys if not is_try_summary(key)]


def test_a_second_try_replays_what_the_first_recorded_and_nothing_is_left_after_success(tmp_path):
    cache = tmp_path / "cache"
    result = run_dag_file(
        "durable_journal_steps.py", tmp_path, AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}"
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    assert json.loads((tmp_path / "try1.json").read_text()) == ["live 0", "live 1", "live 2"]
    assert json.loads((tmp_path / "try2.json").read_text()) == ["replayed 0", "replayed 1", "live 2"]
    assert "Durable: replayed 2 (tool 2), ran live 1 (tool 1), could not record 0" in output
    assert "Durable: journal deleted" in output

    assert_no_journal_left("durable_journal_steps", cache, task_keys=["users_own_key"])


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="the task state store and its clear_on_success are Airflow 3.3+")
def test_when_airflow_clears_the_task_state_on_success_the_clean_up_deletes_nothing_itself(tmp_path):
    result = run_dag_file("durable_journal_steps.py", tmp_path, AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS="True")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    assert json.loads((tmp_path / "try2.json").read_text()) == ["replayed 0", "replayed 1", "live 2"]
    assert "Durable: Airflow cleared the journal with the task's state" in output
    assert "Durable: journal deleted" in output
    # Airflow cleared the task's own key too: that is what the option does.
    assert task_state_store_keys("durable_journal_steps", latest_run_id("durable_journal_steps")) == []


def test_a_task_running_two_agents_replays_both_when_the_second_failed(tmp_path):
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.text("Paris: sunny"),
        reply.tool_calls(("save_report", {"text": "Paris: sunny"}, "call_2")),
        reply.text("Report saved."),
    ]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, fail_requests={4}) as server:
        result = run_dag_file(
            "durable_two_agents.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    # try 1 sent requests 1-4 and failed on 4; try 2 replayed 1-3 and sent only that one again
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 200), (4, 500), (5, 200)]
    assert server.requests[4].body == server.requests[3].body
    assert (tmp_path / "tool_runs.txt").read_text().splitlines() == ["weather Paris", "save_report Paris: sunny"]
    assert "Durable: replayed 5 (model 3, tool 2), ran live 1 (model 1)" in output
    assert_no_journal_left("durable_two_agents", cache, task_keys=[])


def test_a_run_with_a_session_holds_the_conversation_once_after_a_retry(tmp_path):
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        result = run_dag_file(
            "durable_session.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    # try 1 sent 1-2 and failed on 2; try 2 replayed 1 and sent 2 again, asking exactly the same
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert [m.get("role") for m in server.requests[2].body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert (tmp_path / "tool_runs.txt").read_text().splitlines() == ["weather Paris"]
    session = json.loads((tmp_path / "session.json").read_text())
    assert [item.get("role") or item["type"] for item in session] == [
        "user",
        "assistant",
        "user",
        "function_call",
        "function_call_output",
        "assistant",
    ]
    assert_no_journal_left("durable_session", cache, task_keys=[])


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_streamed_run_cut_off_mid_answer_replays_the_completed_stream_and_streams_the_same_items(tmp_path, api):
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, cut_requests={2}) as server:
        result = run_dag_file(
            "durable_streamed.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KIND=api,
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    # try 1 streamed 1 and was cut off in 2; try 2 replayed 1 and streamed 2 again, asking the same
    assert [(r.number, r.streamed, r.cut) for r in server.requests] == [
        (1, True, False),
        (2, True, True),
        (3, True, False),
    ]
    assert server.requests[2].body == server.requests[1].body
    assert (tmp_path / "tool_runs.txt").read_text().splitlines() == ["weather Paris"]
    items = ["item tool_called", "item tool_output", "item message_output_created"]
    assert json.loads((tmp_path / "try1.json").read_text()) == ["completed", *items[:2]]
    # The replayed answer streams as one completed event; the consumer sees the same run items.
    assert json.loads((tmp_path / "try2.json").read_text()) == ["completed", *items[:2], "completed", items[2]]
    assert_no_journal_left("durable_streamed", cache, task_keys=[])
