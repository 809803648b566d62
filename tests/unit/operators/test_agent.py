"""AgentOperator: what it refuses when the DAG is parsed, what it returns, and how it runs durably."""

from __future__ import annotations

import contextlib
import datetime
import json
import logging

import pytest
import structlog
from agents import Agent, ModelSettings, RunConfig, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

import airflow
from airflow.providers.common.ai.durable.airflow.approvals import ApprovalsNotSupported
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_2_PLUS


@contextlib.contextmanager
def operator_log():
    """What operators log meanwhile, as ``{"event": ..., "log_level": ...}``: through structlog on
    Airflow 3, through the logging module on 2.11."""
    if AIRFLOW_V_3_0_PLUS:
        with structlog.testing.capture_logs() as logs:
            yield logs
        return
    logs: list[dict[str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logs.append({"event": record.getMessage(), "log_level": record.levelname.lower()})

    keep, logger = Keep(), logging.getLogger("airflow.task.operators")
    logger.addHandler(keep)
    try:
        yield logs
    finally:
        logger.removeHandler(keep)


class Triage(BaseModel):
    category: str
    due: datetime.date


class ToolRuns:
    """A tool that counts how often it really ran."""

    def __init__(self) -> None:
        self.cities: list[str] = []

        @function_tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.cities.append(city)
            return f"sunny in {city}"

        self.tool = get_weather


class TaskInstance:
    """The part of a running task instance an operator talks to: the XComs it pushes."""

    def __init__(self) -> None:
        self.xcoms: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        # What Airflow stores is JSON: a value that is not would fail the push.
        self.xcoms[key] = json.loads(json.dumps(value))


def run_try(op: AgentOperator, storage: InMemoryStorage | None = None, ti: TaskInstance | None = None):
    """One try of ``op``, as a new worker process would run it: a fresh journal over ``storage``."""
    context = {"ti": ti if ti is not None else TaskInstance()}
    if storage is None:
        return op.execute(context)
    with journal_scope(DurableJournal(storage)):
        return op.execute(context)


class Tries:
    """The tries of one task instance: one storage, a fresh journal per try; keeps the last try's journal."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def run(self, op: AgentOperator):
        self.journal = DurableJournal(self.storage)
        self.ti = TaskInstance()
        with journal_scope(self.journal):
            return op.execute({"ti": self.ti})

    @property
    def replayed(self) -> dict[str, int]:
        assert self.journal is not None
        return dict(self.journal.stats.replayed)


# Refused when the DAG is parsed: each error names the task, the problem and the fix.


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (
            {"agent": "triage"},
            TypeError,
            "agent must be an agents.Agent, a pydantic_ai.Agent or a function that returns one, not str",
        ),
        ({"prompt": ""}, ValueError, "prompt is empty; give the agent something to do"),
        ({"prompt": "  \n"}, ValueError, "prompt is empty"),
        ({"prompt": []}, ValueError, "prompt is an empty list; give at least one input item"),
        ({"prompt": 42}, TypeError, "prompt must be a string or a list of input items, not int"),
        ({"max_turns": 0}, ValueError, "max_turns must be a whole number of at least 1, not 0"),
        ({"max_turns": True}, ValueError, "max_turns must be a whole number of at least 1, not True"),
        ({"durable": "yes"}, TypeError, "durable must be True or False, not 'yes'"),
        ({"run_config": {"model": "gpt-4.1"}}, TypeError, "run_config must be an agents.RunConfig, not dict"),
    ],
)
def test_an_impossible_argument_is_refused_when_the_dag_is_parsed(arguments, error, message):
    kwargs = {"task_id": "triage", "prompt": "Triage this.", "agent": Agent(name="a"), **arguments}
    with pytest.raises(error, match=f"^AgentOperator 'triage': {message}") as raised:
        AgentOperator(**kwargs)
    assert "\n" not in str(raised.value)


def test_a_connection_and_a_run_config_with_its_own_model_provider_are_refused_together():
    from agents import OpenAIProvider

    with pytest.raises(ValueError, match="give either openai_conn_id or a run_config with its own model_provider"):
        AgentOperator(
            task_id="t",
            prompt="p",
            agent=Agent(name="a"),
            openai_conn_id="openai_default",
            run_config=RunConfig(model_provider=OpenAIProvider(api_key="k")),
        )


def test_a_prompt_from_an_upstream_task_is_accepted_when_the_dag_is_parsed():
    from airflow.providers.common.compat.sdk import DAG, task

    with DAG("prompts", schedule=None):

        @task
        def write_prompt() -> str:
            return "Summarize this."

        op = AgentOperator(task_id="t", prompt=write_prompt(), agent=Agent(name="a"))
    assert op.upstream_task_ids == {"write_prompt"}


def test_the_agent_function_is_not_called_when_the_dag_is_parsed_but_once_per_try():
    built = []

    def build_agent() -> Agent:
        built.append(1)
        return Agent(name="a", model=ScriptedModel([[assistant_message("done")]]))

    op = AgentOperator(task_id="t", prompt="p", agent=build_agent)
    assert built == []
    assert run_try(op) == "done"
    assert built == [1]


def test_an_agent_function_that_returns_something_else_fails_the_task_naming_it():
    def build_agent():
        return "not an agent"

    op = AgentOperator(task_id="t", prompt="p", agent=build_agent)
    with pytest.raises(
        TypeError, match=r"the agent function .*build_agent returned str; it must return an agents\.Agent"
    ):
        run_try(op)


def test_a_template_that_renders_an_empty_prompt_fails_the_task_before_any_model_call():
    model = ScriptedModel([[assistant_message("never")]])
    op = AgentOperator(task_id="t", prompt="{{ params.ticket }}", agent=Agent(name="a", model=model))
    op.render_template_fields({"params": {"ticket": ""}})
    with pytest.raises(ValueError, match="prompt is empty"):
        run_try(op)
    assert model.calls == ()


# What the task returns and logs.


def test_the_prompt_is_templated_and_the_final_text_is_the_return_value():
    model = ScriptedModel([[assistant_message("Ticket 7 is about billing.")]])
    op = AgentOperator(task_id="t", prompt="Summarize ticket {{ params.ticket }}.", agent=Agent(name="a", model=model))
    op.render_template_fields({"params": {"ticket": 7}})

    assert run_try(op) == "Ticket 7 is about billing."
    assert model.first_call.input == [{"content": "Summarize ticket 7.", "role": "user"}]


def test_a_pydantic_output_is_returned_as_json_data():
    answer = Triage(category="billing", due=datetime.date(2026, 2, 3)).model_dump_json()
    model = ScriptedModel([[assistant_message(answer)]])
    op = AgentOperator(task_id="t", prompt="p", agent=Agent(name="a", model=model, output_type=Triage))

    output = run_try(op)

    assert output == {"category": "billing", "due": "2026-02-03"}
    assert json.loads(json.dumps(output)) == output


def test_max_turns_and_the_run_config_reach_the_run():
    model = ScriptedModel([[function_call("get_weather", {"city": "Oslo"}, call_id="c1")]] * 3)
    tool = ToolRuns()
    op = AgentOperator(
        task_id="t",
        prompt="p",
        agent=Agent(name="a", model=model, tools=[tool.tool]),
        max_turns=2,
        run_config=RunConfig(model_settings=ModelSettings(temperature=0.25)),
    )
    from agents import MaxTurnsExceeded

    with pytest.raises(MaxTurnsExceeded):
        run_try(op)
    assert len(model.calls) == 2
    assert model.first_call.model_settings.temperature == 0.25


def test_each_try_logs_how_many_requests_reached_the_model_and_their_tokens():
    from agents import Usage

    model = ScriptedModel(
        [
            ModelStep(
                output=[assistant_message("ok")],
                usage=Usage(requests=1, input_tokens=7, output_tokens=3, total_tokens=10),
            )
        ]
    )
    op = AgentOperator(task_id="t", prompt="p", agent=Agent(name="writer", model=model))
    with operator_log() as logs:
        run_try(op)
    assert "Agent 'writer' answered: 1 model request reached the model in this try, 10 tokens (7 input, 3 output)" in [
        entry["event"] for entry in logs
    ]


# durable=True: a retry replays what the failed try completed.


def script_failing_on_the_third_request() -> list:
    return [
        [function_call("get_weather", {"city": "Paris"}, call_id="c1")],
        [function_call("get_weather", {"city": "Rome"}, call_id="c2")],
        ModelStep.raise_error(ConnectionError("the model provider is down")),
        [assistant_message("Sunny in Paris and Rome.")],
    ]


def durable_weather_operator(model: ScriptedModel, tool: ToolRuns) -> AgentOperator:
    return AgentOperator(
        task_id="t",
        prompt="Weather?",
        agent=Agent(name="a", model=model, tools=[tool.tool]),
        durable=True,
        retries=1,
    )


def test_a_durable_retry_replays_the_calls_the_failed_try_completed():
    model, tool, tries = ScriptedModel(script_failing_on_the_third_request()), ToolRuns(), Tries()
    op = durable_weather_operator(model, tool)

    with pytest.raises(ConnectionError):
        tries.run(op)
    assert (len(model.calls), tool.cities) == (3, ["Paris", "Rome"])

    assert tries.run(op) == "Sunny in Paris and Rome."
    # Try 2 sent only the request that failed, asked as it was; neither tool call ran again.
    assert (len(model.calls), tool.cities) == (4, ["Paris", "Rome"])
    assert model.calls[3].input == model.calls[2].input
    assert model.calls[3].input[-1]["output"] == "sunny in Rome"
    assert tries.replayed == {"model": 2, "tool": 2}


def test_an_agent_function_builds_a_new_agent_each_try_and_the_retry_still_replays():
    tool, tries, models = ToolRuns(), Tries(), []

    def build_agent() -> Agent:
        steps = script_failing_on_the_third_request()
        models.append(ScriptedModel(steps[:3] if not models else steps[3:]))
        return Agent(name="a", model=models[-1], tools=[tool.tool])

    op = AgentOperator(task_id="t", prompt="Weather?", agent=build_agent, durable=True, retries=1)
    with pytest.raises(ConnectionError):
        tries.run(op)
    assert tries.run(op) == "Sunny in Paris and Rome."

    assert [len(model.calls) for model in models] == [3, 1]
    assert models[1].calls[0].input == models[0].calls[2].input
    assert tool.cities == ["Paris", "Rome"]
    assert tries.replayed == {"model": 2, "tool": 2}


def test_without_durable_a_retry_runs_everything_again_and_nothing_is_journaled():
    tool = ToolRuns()
    model = ScriptedModel(
        [
            *script_failing_on_the_third_request()[:3],
            [function_call("get_weather", {"city": "Paris"}, call_id="c1")],
            [function_call("get_weather", {"city": "Rome"}, call_id="c2")],
            [assistant_message("Sunny in Paris and Rome.")],
        ]
    )
    storage = InMemoryStorage()
    op = AgentOperator(task_id="t", prompt="Weather?", agent=Agent(name="a", model=model, tools=[tool.tool]), retries=1)

    with pytest.raises(ConnectionError):
        run_try(op, storage)
    assert run_try(op, storage) == "Sunny in Paris and Rome."
    assert (len(model.calls), tool.cities) == (6, ["Paris", "Rome", "Paris", "Rome"])
    assert storage.entries == {}


def test_a_durable_try_records_each_call_it_completed_in_the_journal():
    model, tool, storage = ScriptedModel(script_failing_on_the_third_request()), ToolRuns(), InMemoryStorage()
    op = durable_weather_operator(model, tool)

    with pytest.raises(ConnectionError):
        run_try(op, storage)

    recorded = [json.loads(text) for text in storage.entries.values()]
    assert sorted(entry["kind"] for entry in recorded if entry["state"] == "done") == [
        "model",
        "model",
        "tool",
        "tool",
    ]


def test_durable_without_retries_warns_that_only_a_retry_or_a_clear_replays():
    op = AgentOperator(
        task_id="t",
        prompt="p",
        agent=Agent(name="a", model=ScriptedModel([[assistant_message("ok")]])),
        durable=True,
    )
    with operator_log() as logs:
        run_try(op, InMemoryStorage())
    warnings = [entry["event"] for entry in logs if entry["log_level"] == "warning"]
    assert warnings == [
        "Durable: durable=True with retries=0 records calls that only a retry, or a clear after the task "
        "failed, replays; set retries to let Airflow replay them"
    ]


def test_durable_with_retries_does_not_warn():
    op = AgentOperator(
        task_id="t",
        prompt="p",
        agent=Agent(name="a", model=ScriptedModel([[assistant_message("ok")]])),
        durable=True,
        retries=2,
    )
    with operator_log() as logs:
        run_try(op, InMemoryStorage())
    assert [entry for entry in logs if entry["log_level"] == "warning"] == []


def test_outside_a_task_a_durable_operator_runs_the_agent_as_runner_run_would():
    model = ScriptedModel([[assistant_message("ok")]])
    op = AgentOperator(task_id="t", prompt="p", agent=Agent(name="a", model=model), durable=True, retries=1)
    assert run_try(op) == "ok"
    assert len(model.calls) == 1


# Models and credentials from an Airflow connection.


@pytest.fixture
def openai_connection(monkeypatch):
    """Defines connection ``openai_test`` against a fresh fake server; yields the server."""

    def define(server: FakeOpenAIServer, **extra) -> None:
        connection = {
            "conn_type": "openai",
            "password": "sk-connection-key",
            "host": server.base_url,
            "extra": {"openai_client_kwargs": {"max_retries": 0}, **extra},
        }
        monkeypatch.setenv("AIRFLOW_CONN_OPENAI_TEST", json.dumps(connection))

    return define


def test_a_model_given_by_name_is_served_by_the_connections_endpoint_with_its_key(openai_connection, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer([reply.text("Hello from the endpoint.")]) as server:
        openai_connection(server)
        op = AgentOperator(
            task_id="t", prompt="p", agent=Agent(name="a", model="gpt-4.1-mini"), openai_conn_id="openai_test"
        )
        assert run_try(op) == "Hello from the endpoint."

    [request] = server.requests
    assert request.path == "/v1/responses"
    assert request.body["model"] == "gpt-4.1-mini"
    assert request.headers["authorization"] == "Bearer sk-connection-key"


def test_a_connection_with_use_responses_false_speaks_chat_completions(openai_connection):
    with FakeOpenAIServer([reply.text("Hello.")]) as server:
        openai_connection(server, use_responses=False)
        op = AgentOperator(
            task_id="t", prompt="p", agent=Agent(name="a", model="gpt-4.1-mini"), openai_conn_id="openai_test"
        )
        assert run_try(op) == "Hello."
    assert [request.path for request in server.requests] == ["/v1/chat/completions"]


def test_the_connection_replaces_only_the_model_provider_of_the_users_run_config(openai_connection):
    run_config = RunConfig(model_settings=ModelSettings(temperature=0.25))
    original_provider = run_config.model_provider
    with FakeOpenAIServer([reply.text("Hello.")]) as server:
        openai_connection(server)
        op = AgentOperator(
            task_id="t",
            prompt="p",
            agent=Agent(name="a", model="gpt-4.1-mini"),
            openai_conn_id="openai_test",
            run_config=run_config,
        )
        run_try(op)
    assert server.requests[0].body["temperature"] == 0.25
    assert run_config.model_provider is original_provider


WEATHER_REPLIES = [
    reply.tool_calls(("get_weather", {"city": "Paris"}, "c1")),
    reply.tool_calls(("get_weather", {"city": "Rome"}, "c2")),
    reply.text("Sunny in Paris and Rome."),
]


@pytest.mark.parametrize(
    "model_given",
    ["agent-model-by-name", "run-config-model-by-name", "agent-in-handoffs"],
)
def test_a_durable_retry_through_the_connection_sends_only_the_request_the_failed_try_did_not_complete(
    openai_connection, model_given
):
    from openai import InternalServerError

    tool, tries = ToolRuns(), Tries()
    agent, run_config, replies = Agent(name="a", model="gpt-4.1-mini", tools=[tool.tool]), None, WEATHER_REPLIES
    if model_given == "run-config-model-by-name":
        agent, run_config = Agent(name="a", tools=[tool.tool]), RunConfig(model="gpt-4.1-mini")
    elif model_given == "agent-in-handoffs":
        agent = Agent(name="triage", model="gpt-4.1-nano", handoffs=[agent])
        replies = [reply.tool_calls(("transfer_to_a", {}, "h1")), *WEATHER_REPLIES]
    with FakeOpenAIServer(replies, fail_requests={len(replies)}) as server:
        openai_connection(server)
        op = AgentOperator(
            task_id="t",
            prompt="Weather?",
            agent=agent,
            run_config=run_config,
            openai_conn_id="openai_test",
            durable=True,
            retries=1,
        )
        with pytest.raises(InternalServerError):
            tries.run(op)
        first_try = server.requests
        assert ([r.status for r in first_try], tool.cities) == ([200] * (len(replies) - 1) + [500], ["Paris", "Rome"])

        assert tries.run(op) == "Sunny in Paris and Rome."
        second_try = server.requests[len(first_try) :]

    # Try 2 sent one request, the one that failed, asked exactly as it was.
    assert [r.status for r in second_try] == [200]
    assert second_try[0].body == first_try[-1].body
    assert tool.cities == ["Paris", "Rome"]
    assert tries.replayed == {"model": len(replies) - 1, "tool": 2}


def test_a_durable_task_that_cannot_have_a_journal_fails_before_the_agent_is_built(monkeypatch):
    from types import SimpleNamespace

    from airflow.exceptions import AirflowConfigException

    from airflow.providers.common.ai.durable.airflow import task_instance

    # A running task on Airflow before 3.3 (no task state store) without durable_cache_path.
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1)
    monkeypatch.setattr(task_instance, "_running_task_context", lambda: {"ti": ti})
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", "")
    built = []
    op = AgentOperator(task_id="t", prompt="p", agent=lambda: built.append(1), durable=True, retries=1)

    with pytest.raises(AirflowConfigException, match="durable_cache_path"):
        op.execute({"ti": TaskInstance()})
    assert built == []


# Usage in XCom: every try pushes what it used, also when it fails.

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


def test_a_durable_retry_pushes_what_it_used_and_what_the_replay_saved_and_the_failed_try_what_it_got_to():
    model = ScriptedModel(script_failing_on_the_third_request(), default_usage=USAGE)
    tool, tries = ToolRuns(), Tries()
    op = durable_weather_operator(model, tool)

    with pytest.raises(ConnectionError):
        tries.run(op)
    assert tries.ti.xcoms["usage"] == {
        "requests": 2,
        "input_tokens": 200,
        "output_tokens": 40,
        "total_tokens": 240,
        "cost_usd": 0,
        "models": {
            "ScriptedModel": {
                "requests": 2,
                "input_tokens": 200,
                "output_tokens": 40,
                "total_tokens": 240,
                "cost_usd": None,
            }
        },
        "saved": {"requests": 0, "tokens": 0, "cost_usd": 0.0},
        "unknown_prices": ["ScriptedModel"],
        "replayed": {},
        "live": {"model": 2, "tool": 2},
        "not_recorded": {},
        "in_flight": [],
    }

    tries.run(op)
    assert len(model.calls) == 4
    assert tries.ti.xcoms["usage"] == {
        "requests": 1,
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cost_usd": 0,
        "models": {
            "ScriptedModel": {
                "requests": 1,
                "input_tokens": 100,
                "output_tokens": 20,
                "total_tokens": 120,
                "cost_usd": None,
            }
        },
        "saved": {"requests": 2, "tokens": 240, "cost_usd": 0.0},
        "unknown_prices": ["ScriptedModel"],
        "replayed": {"model": 2, "tool": 2},
        "live": {"model": 1},
        "not_recorded": {},
        "in_flight": [],
    }


def test_a_plain_try_pushes_its_usage_per_model_also_when_it_fails():
    tool = ToolRuns()
    model = ScriptedModel(script_failing_on_the_third_request(), default_usage=USAGE)
    op = AgentOperator(task_id="t", prompt="Weather?", agent=Agent(name="a", model=model, tools=[tool.tool]))
    ti = TaskInstance()

    with pytest.raises(ConnectionError):
        run_try(op, ti=ti)
    usage = ti.xcoms["usage"]
    assert usage["models"] == {
        "ScriptedModel": {
            "requests": 2,
            "input_tokens": 200,
            "output_tokens": 40,
            "total_tokens": 240,
            "cost_usd": None,
        }
    }
    assert (usage["live"], usage["replayed"], usage["saved"]) == (
        {"model": 2, "tool": 2},
        {},
        {"requests": 0, "tokens": 0, "cost_usd": 0.0},
    )


def test_usage_names_each_model_a_run_reached_by_its_name():
    model = ScriptedModel([[assistant_message("ok")]], default_usage=USAGE)
    model.model = "gpt-4.1-mini"  # as the SDK's OpenAI models name themselves
    ti = TaskInstance()
    run_try(AgentOperator(task_id="t", prompt="p", agent=Agent(name="a", model=model)), ti=ti)
    assert list(ti.xcoms["usage"]["models"]) == ["gpt-4.1-mini"]
    assert ti.xcoms["usage"]["total_tokens"] == 120


# Approvals need Airflow's human-in-the-loop (3.2+ of the supported lines): refused on 2.11.


@function_tool(needs_approval=True)
def refund(order: str) -> str:
    """Refunds an order."""
    return f"refunded {order}"


def agent_that_refunds(model=None) -> Agent:
    helper = Agent(name="helper", tools=[refund])
    return Agent(name="front", model=model, handoffs=[helper])


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"agent": agent_that_refunds()}, "needs_approval of helper.refund"),
        ({"agent": Agent(name="a"), "assigned_users": {"id": "ada"}}, "assigned_users"),
        (
            {"agent": Agent(name="a"), "response_timeout": datetime.timedelta(hours=1), "defaults": "Reject"},
            "response_timeout and defaults",
        ),
        ({"agent": Agent(name="a"), "notifiers": [lambda context: None]}, "notifiers"),
    ],
)
def test_approvals_are_refused_when_the_dag_is_parsed_on_a_line_without_human_in_the_loop(arguments, named):
    if AIRFLOW_V_3_2_PLUS:
        AgentOperator(task_id="t", prompt="p", durable=True, **arguments)
        return
    with pytest.raises(ApprovalsNotSupported) as refused:
        AgentOperator(task_id="t", prompt="p", durable=True, **arguments)
    assert str(refused.value) == (
        f"AgentOperator 't': approvals ({named}) need Airflow's human-in-the-loop support, which Airflow 3.2 "
        f"and later have, not Airflow {airflow.__version__}: upgrade Airflow, or let the tools run without approval"
    )


@pytest.mark.skipif(AIRFLOW_V_3_2_PLUS, reason="Airflow 3.2+ has human-in-the-loop")
def test_an_approval_the_dag_could_not_show_is_refused_when_the_agent_asks_for_it_and_nothing_runs():
    # An agent built in the worker: nothing to check when the DAG is parsed.
    model = ScriptedModel([[function_call("refund", {"order": "O-7"}, call_id="c1")], [assistant_message("done")]])
    op = AgentOperator(
        task_id="t", prompt="p", agent=lambda: Agent(name="front", model=model, tools=[refund]), durable=True
    )
    storage = InMemoryStorage()
    with pytest.raises(ApprovalsNotSupported, match=r"approvals \(refund, asked by the agent\) need .* Airflow 3\.2"):
        run_try(op, storage)
    assert len(model.calls) == 1
    assert [json.loads(text)["kind"] for text in storage.entries.values()].count("tool") == 0
