"""A Pydantic AI agent durable through real Airflow retries: ``dag.test()`` runs each try with ``retries=1``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

import dag_runs
from test_journal_retries import assert_no_journal_left, run_dag_file

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


def test_try_2_replays_the_model_call_and_the_tool_call_of_try_1_and_deletes_the_journal(tmp_path):
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        result = run_dag_file(
            "durable_pydantic_ai.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    # try 1 sent requests 1 and 2 and failed on 2; try 2 replayed 1 and the tool call, sent only 2 again
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    runs = (tmp_path / "tool_runs.txt").read_text().splitlines()
    assert len(runs) == 1 and runs[0].startswith("weather Paris durable-")
    assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1)" in output
    assert "Durable: journal deleted" in output
    assert_no_journal_left("durable_pydantic_ai", cache, task_keys=[])


def test_a_changed_prompt_on_try_2_runs_live_from_the_first_request_naming_what_changed(tmp_path):
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.tool_calls(("weather", {"city": "Paris"}, "call_2")),
        reply.text("Sunny in Paris."),
    ]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        result = run_dag_file(
            "durable_pydantic_ai.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            DURABLE_PROMPT="Weather in Paris, please?",
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200), (4, 200)]
    assert server.requests[2].body["messages"][-1]["content"] == "Weather in Paris, please?"
    assert len((tmp_path / "tool_runs.txt").read_text().splitlines()) == 2
    assert "input item 0 differs" in output
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1)" in output


def test_agent_operator_and_task_agent_retry_a_pydantic_ai_agent_replaying_what_try_1_completed(tmp_path):
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.text("Sunny in Paris."),
        reply.tool_calls(("weather", {"city": "Rome"}, "call_2")),
        reply.text("Sunny in Rome."),
    ]
    with FakeOpenAIServer(script, fail_requests={2, 5}) as server:
        run = dag_runs.run_dag_file(
            dag_runs.TEST_DAGS / "durable_pydantic_ai_operator.py",
            {
                **dag_runs.durable_env(server, tmp_path),
                "FAKE_OPENAI_BASE_URL": server.base_url,
                "DURABLE_TEST_OUT": str(tmp_path),
            },
        )
    assert run.returncode == 0, run.output[-5000:]
    dag_id = "durable_pydantic_ai_operator"
    run_id = dag_runs.latest_run_id(dag_id)
    assert dag_runs.task_states(dag_id, run_id) == {
        ("forecast", -1): ("success", 2),
        ("forecast_decorated", -1): ("success", 2),
    }

    # Each task: try 1 sent a request whose answer asked for the tool, then a request that failed;
    # try 2 replayed the first answer and the tool call and sent only the failed request again.
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
    assert server.requests[0].body["messages"][-1]["content"] == "Weather in Paris?"  # the rendered template
    assert server.requests[3].body["messages"][-1]["content"] == "Weather in Rome?"  # the function's prompt
    runs = (tmp_path / "tool_runs.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in runs] == ["weather Paris", "weather Rome"]

    for task_id, city in (("forecast", "Paris"), ("forecast_decorated", "Rome")):
        try_1, try_2 = run.tries(task_id)
        assert "Durable: replayed 0, ran live 2 (model 1, tool 1), could not record 0" in try_1
        assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0" in try_2
        assert "Agent 'forecaster' answered: 1 model request reached the model in this try" in try_2
        assert "Durable: journal deleted" in try_2
        assert dag_runs.xcom_return_value(dag_id, run_id, task_id) == f"Sunny in {city}."
        usage = dag_runs.xcom_value(dag_id, run_id, task_id, "usage")
        assert (usage["requests"], usage["saved"]["requests"], usage["replayed"], usage["live"]) == (
            1,
            1,
            {"model": 1, "tool": 1},
            {"model": 1},
        )
    assert dag_runs.journal_entries(dag_id, run_id, tmp_path) == []


def test_a_stream_cut_off_mid_answer_on_try_1_is_streamed_again_on_try_2_after_the_replayed_ones(tmp_path):
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(script, cut_requests={2}) as server:
        result = run_dag_file(
            "durable_pydantic_ai_streamed.py",
            tmp_path,
            FAKE_OPENAI_BASE_URL=server.base_url,
            AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=f"file://{cache}",
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]

    # try 1 streamed 1 and was cut off in 2; try 2 replayed 1 and the tool call, streamed 2 again, asking the same
    assert [(r.number, r.streamed, r.cut) for r in server.requests] == [
        (1, True, False),
        (2, True, True),
        (3, True, False),
    ]
    assert server.requests[2].body == server.requests[1].body
    runs = (tmp_path / "tool_runs.txt").read_text().splitlines()
    assert len(runs) == 1 and runs[0].startswith("weather Paris durable-")
    # the cut answer's text never completed on try 1; try 2's consumer got all of it
    assert "".join(json.loads((tmp_path / "try1.json").read_text())) != "Sunny in Paris."
    assert "".join(json.loads((tmp_path / "try2.json").read_text())) == "Sunny in Paris."
    assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1)" in output
    assert "Durable: journal deleted" in output
    assert_no_journal_left("durable_pydantic_ai_streamed", cache, task_keys=[])
