"""
AgentOperator with a Pydantic AI agent (R-65): its real ``OpenAIChatModel`` against the local
OpenAI-compatible server, one storage over the tries, a new journal per try as a new worker has.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

# A module of the real package: see tests/unit/durable/pydantic_ai/test_pydantic_ai_http.py.
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS


class Forecast(BaseModel):
    city: str
    sky: str


class PushedXComs:
    """A running task instance as far as the operator uses it: the XComs it pushes, as JSON."""

    def __init__(self) -> None:
        self.xcoms: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcoms[key] = json.loads(json.dumps(value))


class Tries:
    """The tries of one task instance: one storage, a fresh journal and task instance per try."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()

    def run(self, op: AgentOperator):
        self.ti = PushedXComs()
        with journal_scope(DurableJournal(self.storage)):
            return op.execute({"ti": self.ti})


def weather_agent(server: FakeOpenAIServer, cities: list[str], **kwargs) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), **kwargs)

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return f"sunny in {city}"

    return agent


WEATHER_SCRIPT = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]


def usage(requests: int, *, replayed: dict[str, int], live: dict[str, int], saved: int) -> dict:
    """The usage XCom of a try whose live requests each took 10 + 5 tokens of gpt-4o ($2.50 and $10 per million)."""
    cost = requests * (10 * 2.5 + 5 * 10) / 1_000_000
    models = {"gpt-4o": {"requests": requests, "input_tokens": 10 * requests, "output_tokens": 5 * requests}}
    for model in models.values():
        model.update(total_tokens=15 * requests, cost_usd=pytest.approx(cost))
    return {
        "requests": requests,
        "input_tokens": 10 * requests,
        "output_tokens": 5 * requests,
        "total_tokens": 15 * requests,
        "cost_usd": pytest.approx(cost),
        "models": models if requests else {},
        "saved": {"requests": saved, "tokens": 15 * saved, "cost_usd": pytest.approx(saved * 75 / 1_000_000)},
        "unknown_prices": [],
        "replayed": replayed,
        "live": live,
        "not_recorded": {},
        "in_flight": [],
    }


def test_a_durable_retry_replays_the_model_call_and_the_tool_call_the_failed_try_completed():
    cities: list[str] = []
    tries = Tries()
    with FakeOpenAIServer(WEATHER_SCRIPT, fail_requests={2}) as server:
        op = AgentOperator(
            task_id="t",
            prompt="Weather in {{ params.city }}?",
            agent=weather_agent(server, cities),
            durable=True,
            retries=1,
        )
        op.render_template_fields({"params": {"city": "Paris"}})
        with pytest.raises(ModelHTTPError):
            tries.run(op)
        assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500)]
        assert cities == ["Paris"]
        # The failed try pushed what it got to: one request paid, the tool call.
        assert tries.ti.xcoms["usage"] == usage(1, replayed={}, live={"model": 1, "tool": 1}, saved=0)

        assert tries.run(op) == "Sunny in Paris."

    # Try 2 sent only the request that failed, as it was asked; the tool did not run again.
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert server.requests[0].body["messages"][-1]["content"] == "Weather in Paris?"
    assert cities == ["Paris"]
    assert tries.ti.xcoms["usage"] == usage(1, replayed={"model": 1, "tool": 1}, live={"model": 1}, saved=1)


def test_without_durable_a_retry_runs_everything_again_and_each_try_pushes_its_usage():
    cities: list[str] = []
    script = [*WEATHER_SCRIPT[:1], *WEATHER_SCRIPT]
    storage = InMemoryStorage()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        op = AgentOperator(task_id="t", prompt="Weather in Paris?", agent=weather_agent(server, cities), retries=1)
        first, second = PushedXComs(), PushedXComs()
        with journal_scope(DurableJournal(storage)), pytest.raises(ModelHTTPError):
            op.execute({"ti": first})
        with journal_scope(DurableJournal(storage)):
            assert op.execute({"ti": second}) == "Sunny in Paris."

    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200), (4, 200)]
    assert cities == ["Paris", "Paris"]
    assert storage.entries == {}
    assert first.xcoms["usage"] == usage(1, replayed={}, live={"model": 1, "tool": 1}, saved=0)
    assert second.xcoms["usage"] == usage(2, replayed={}, live={"model": 2, "tool": 1}, saved=0)


@contextlib.contextmanager
def operator_log() -> Iterator[list[dict[str, str]]]:
    """What operators log meanwhile, as ``{"event": ...}``: through structlog on Airflow 3, through the logging module on 2.11."""
    if AIRFLOW_V_3_0_PLUS:
        with structlog.testing.capture_logs() as logs:
            yield logs
        return
    logs: list[dict[str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logs.append({"event": record.getMessage()})

    keep, logger = Keep(), logging.getLogger("airflow.task.operators")
    logger.addHandler(keep)
    try:
        yield logs
    finally:
        logger.removeHandler(keep)


def test_a_structured_output_is_the_return_value_as_json_data_and_the_log_names_the_agent():
    answer = reply.tool_calls(("final_result", {"city": "Paris", "sky": "sunny"}, "call_out"))
    with FakeOpenAIServer([answer]) as server, operator_log() as logs:
        agent = weather_agent(server, [], output_type=Forecast, name="forecaster")
        op = AgentOperator(task_id="t", prompt="Weather in Paris?", agent=agent, durable=True, retries=1)
        assert Tries().run(op) == {"city": "Paris", "sky": "sunny"}
    assert (
        "Agent 'forecaster' answered: 1 model request reached the model in this try, 15 tokens (10 input, 5 output)"
        in [log["event"] for log in logs]
    )


def test_an_agent_function_builds_the_agent_in_each_try_and_the_retry_replays():
    cities: list[str] = []
    tries = Tries()
    with FakeOpenAIServer(WEATHER_SCRIPT, fail_requests={2}) as server:
        built: list[Agent] = []

        def build_agent() -> Agent:
            built.append(weather_agent(server, cities))
            return built[-1]

        op = AgentOperator(task_id="t", prompt="Weather in Paris?", agent=build_agent, durable=True, retries=1)
        assert built == []
        with pytest.raises(ModelHTTPError):
            tries.run(op)
        assert tries.run(op) == "Sunny in Paris."
    assert (len(built), len(server.requests), cities) == (2, 3, ["Paris"])
    # The second agent's first request is the one that failed: it replayed the first answer and the tool call.
    assert server.requests[2].body == server.requests[1].body


def test_a_budget_is_checked_before_each_live_request_of_a_pydantic_ai_agent():
    cities: list[str] = []
    with FakeOpenAIServer(WEATHER_SCRIPT) as server:
        op = AgentOperator(
            task_id="t",
            prompt="Weather in Paris?",
            agent=weather_agent(server, cities),
            durable=True,
            retries=1,
            budget=UsageBudget(max_requests=1),
        )
        with pytest.raises(Exception, match="max_requests"):
            Tries().run(op)
    # The first request was sent and its tool ran; the second would have passed the budget.
    assert (len(server.requests), cities) == (1, ["Paris"])


# Refused when the DAG is parsed: each error names the task, the option and what to do instead.


@pytest.mark.parametrize(
    ("option", "value", "instead"),
    [
        ("run_config", None, "give the model and its settings to the Pydantic AI Agent itself"),
        ("openai_conn_id", "openai_default", "give the Pydantic AI Agent a model whose provider has the key"),
        ("max_turns", 3, r"limit its requests with budget=UsageBudget\(max_requests=\.\.\.\) and durable=True"),
        ("assigned_users", {"id": "ada"}, "approvals of a Pydantic AI agent's tool calls are not built yet"),
        ("response_timeout", datetime.timedelta(hours=1), "approvals of a Pydantic AI agent's tool calls"),
        ("defaults", "Reject", "approvals of a Pydantic AI agent's tool calls"),
        ("notifiers", [lambda context: None], "approvals of a Pydantic AI agent's tool calls"),
    ],
)
def test_an_option_of_the_openai_agents_sdk_is_refused_with_a_pydantic_ai_agent_when_the_dag_is_parsed(
    option, value, instead
):
    from agents import RunConfig

    value = RunConfig() if option == "run_config" else value
    with pytest.raises(
        ValueError,
        match=rf"^AgentOperator 't': {option} is an option of OpenAI Agents SDK agents, not of a Pydantic AI "
        rf"agent; {instead}",
    ):
        AgentOperator(task_id="t", prompt="p", agent=Agent("test"), durable=True, **{option: value})


def test_an_agent_function_returning_a_pydantic_ai_agent_with_such_an_option_fails_before_any_request():
    cities: list[str] = []
    with FakeOpenAIServer(WEATHER_SCRIPT) as server:
        op = AgentOperator(task_id="t", prompt="p", agent=lambda: weather_agent(server, cities), max_turns=3)
        with pytest.raises(ValueError, match="max_turns is an option of OpenAI Agents SDK agents"):
            Tries().run(op)
    assert (server.requests, cities) == ([], [])


def test_a_budget_without_durable_is_refused_for_a_pydantic_ai_agent_too():
    with pytest.raises(ValueError, match="a budget counts what every try spent, which the journal keeps"):
        AgentOperator(task_id="t", prompt="p", agent=Agent("test"), budget=UsageBudget(max_requests=3))
