"""
A budget over all tries and the cost in US dollars (R-58, R-59) through real Airflow retries
(``dag.test()``), the real OpenAI client and a local model server: which requests reach the
server in each try, how often the tool ran, what the usage XCom and the summary line say, and
that a refused task fails for good with retries left. The same tasks run an OpenAI Agents SDK agent
(``dags/durable_budget.py``) and a Pydantic AI agent through Pydantic AI's real ``OpenAIChatModel``
(``dags/durable_pydantic_ai_budget.py``).
"""

from __future__ import annotations

import importlib.util

import pytest
from dag_runs import TEST_DAGS, durable_env, latest_run_id, run_dag_file, task_states, xcom_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

#: One request of 10 input and 5 output tokens at the table's price of gpt-4.1-mini ($0.40, $1.60 per million).
COST = (10 * 0.4 + 5 * 1.6) / 1_000_000


def answers(first: str, second: str) -> list:
    return [
        reply.tool_calls(("look_up", {"order_id": first}, "call_1")),
        reply.tool_calls(("look_up", {"order_id": second}, "call_2")),
        reply.text(f"{first} and {second} have shipped."),
    ]


@pytest.mark.parametrize(
    "dag_id",
    [
        pytest.param("durable_budget", id="OpenAI Agents SDK"),
        pytest.param(
            "durable_pydantic_ai_budget",
            id="Pydantic AI",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("pydantic_ai") is None,
                reason="Pydantic AI is the optional extra [pydantic-ai], not installed here",
            ),
        ),
    ],
)
def test_a_budget_counts_every_try_replays_free_and_refuses_a_request_before_it_is_sent(tmp_path, dag_id):
    # within_budget: requests 1-2 answered, 3 fails; try 2 sends a 4th. over_budget: 5-6 answered, 7 fails.
    script = [*answers("O-1", "O-2"), *answers("O-3", "O-4")]
    with FakeOpenAIServer(script, fail_requests={3, 7}) as server:
        run = run_dag_file(
            TEST_DAGS / f"{dag_id}.py", {**durable_env(server, tmp_path), "DURABLE_TEST_OUT": str(tmp_path)}
        )
    run_id = latest_run_id(dag_id)
    assert task_states(dag_id, run_id) == {
        ("within_budget", -1): ("success", 2),
        ("over_budget", -1): ("failed", 2),  # two retries left, none taken: a retry would be refused too
    }, run.output[-5000:]
    assert [(r.number, r.status) for r in server.requests] == [
        (1, 200), (2, 200), (3, 500), (4, 200),  # within_budget: try 1, then try 2's one live request
        (5, 200), (6, 200), (7, 500),  # over_budget's try 1; its try 2 sent nothing
    ]  # fmt: skip
    assert server.requests[3].body == server.requests[2].body
    # Each tool ran once, on try 1: try 2 replayed it.
    assert (tmp_path / "within_budget.calls").read_text().split() == ["O-1", "O-2"]
    assert (tmp_path / "over_budget.calls").read_text().split() == ["O-3", "O-4"]

    usage = xcom_value(dag_id, run_id, "within_budget", "usage")
    assert (usage["requests"], usage["cost_usd"], usage["models"]["gpt-4.1-mini"]["cost_usd"]) == (1, COST, COST)
    assert usage["saved"] == {"requests": 2, "tokens": 30, "cost_usd": 0.0 + COST + COST}
    assert usage["budget"] == {
        "first_try": 1,
        "limits": {"requests": 4, "cost_usd": 0.01},
        "spent": {"requests": 4, "cost_usd": 0.0 + COST + COST + COST},
        "left": {"requests": 0, "cost_usd": 0.01 - (0.0 + COST + COST + COST)},
    }
    within_1, within_2 = run.tries("within_budget")
    assert "spent $0.000024, saved $0, budget left: requests 1, cost_usd $0.009976" in within_1  # 3 sent
    assert "saved 30 tokens by replaying, spent $0.000012, saved $0.000024, budget left: requests 0" in within_2

    over_1, over_2 = run.tries("over_budget")
    refusal = (
        "Durable: the request to model 'gpt-4.1-mini' at 1.5 was not sent: it would pass this task's budget, "
        "max_requests=3. Its tries spent 3 (try 1: 3, try 2: 0)."
    )
    assert refusal in over_2 and refusal not in over_1
    assert xcom_value(dag_id, run_id, "over_budget", "usage")["budget"]["spent"] == {"requests": 3}
