"""
AgentOperator with a Pydantic AI agent (R-65): its real ``OpenAIChatModel`` against the local
OpenAI-compatible server, one storage over the tries, a new journal per try as a new worker has.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import structlog

# A module of the real package: see tests/unit/durable/pydantic_ai/test_pydantic_ai_http.py.
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, ToolDenied
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.operators.agent import AgentOperator
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_2_PLUS


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


# Approvals (R-39..R-41): the operator waits for a person for a Pydantic AI agent as for an OpenAI
# Agents SDK one, with the same options. Each execution (the try, its resume after the answer) gets
# a fresh journal over the task instance's storage, as a new worker does.

needs_human_in_the_loop = pytest.mark.skipif(not AIRFLOW_V_3_2_PLUS, reason="approvals need Airflow 3.2+")

LOOKUP = reply.tool_calls(("lookup_order", {"order_id": "O-77"}, "call_lookup"))
REFUND = reply.tool_calls(("issue_refund", {"order_id": "O-77", "amount_eur": 40}, "call_refund"))


def support_agent(server: FakeOpenAIServer, runs: Counter[str], **kwargs) -> Agent:
    """Looks up an order, then refunds it: a person approves each refund."""
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), name="support", **kwargs)

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        runs["lookup_order"] += 1
        return f"{order_id}: charged twice"

    @agent.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_eur: int) -> str:
        """Refund an order."""
        runs["issue_refund"] += 1
        return f"refunded {amount_eur} EUR on {order_id}"

    return agent


def tool_outputs(body: dict) -> list[str]:
    return [message["content"] for message in body["messages"] if message.get("role") == "tool"]


class TaskInstance(PushedXComs):
    """A running task instance as far as the operator and its approvals use it."""

    dag_id, run_id, task_id, map_index, try_number, id = "payments", "manual", "t", -1, 1, "ti-1"


class HumanInTheLoop:
    """
    Airflow's human-in-the-loop as the task and its trigger reach it: the requests the task made,
    a person's answer once given (none until then), and the default the trigger takes at a timeout.
    """

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.answer: tuple[str, str] | None = None
        self.defaults_taken: list[list[str]] = []

    def upsert(self, **request: object) -> None:
        self.requests.append(request)

    def look_up(self, ti_id: str):
        from airflow.sdk.api.datamodels._generated import HITLDetailResponse, HITLUser
        from airflow.sdk.timezone import utcnow

        if self.answer is None:
            return HITLDetailResponse(response_received=False, responded_at=None, chosen_options=None, params_input={})
        option, who = self.answer
        return HITLDetailResponse(
            response_received=True,
            responded_by_user=HITLUser(id=who, name=who.title()),
            responded_at=utcnow(),
            chosen_options=[option],
            params_input={},
        )

    def take_default(self, ti_id: str, chosen_options: list[str], params_input: dict):
        from types import SimpleNamespace

        from airflow.sdk.timezone import utcnow

        self.defaults_taken.append(chosen_options)
        return SimpleNamespace(responded_at=utcnow())


@pytest.fixture
def human_in_the_loop(monkeypatch) -> HumanInTheLoop:
    import airflow.providers.standard.triggers.hitl as hitl_trigger
    import airflow.sdk.execution_time.hitl as hitl

    import airflow.providers.common.ai.durable.airflow.approval_trigger as approval_trigger

    person = HumanInTheLoop()
    monkeypatch.setattr(hitl, "upsert_hitl_detail", person.upsert)
    for module in (hitl_trigger, approval_trigger):
        monkeypatch.setattr(module, "get_hitl_detail_content_detail", person.look_up)
    monkeypatch.setattr(hitl_trigger, "update_hitl_detail_response", person.take_default)
    # The resumed try acts on the answer at once, not approval_resume_delay (15 s) after it deferred.
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_RESUME_DELAY", "0")
    return person


class ApprovalTries(Tries):
    """The executions of one task instance: its try, which defers for an answer, and the resumes after one."""

    def start(self, op: AgentOperator):
        """The try, which stops for a person: how it deferred."""
        from airflow.providers.common.compat.sdk import TaskDeferred

        self.ti = TaskInstance()
        with journal_scope(DurableJournal(self.storage)), pytest.raises(TaskDeferred) as deferred:
            op.execute({"ti": self.ti, "task_instance": self.ti})
        return deferred.value

    def resume(self, op: AgentOperator, deferred):
        """What the trigger hands back (the answer, or the timeout), and the task resumed with it."""
        import asyncio

        event = asyncio.run(anext(deferred.trigger.run()))
        self.ti = TaskInstance()
        with journal_scope(DurableJournal(self.storage)):
            return getattr(op, deferred.method_name)(
                {"ti": self.ti, "task_instance": self.ti}, event.payload, **deferred.kwargs
            )


def passed(moment: datetime.datetime) -> None:
    """Wait until ``moment`` has passed."""
    from airflow.sdk.timezone import utcnow

    while utcnow() <= moment:
        time.sleep(0.01)


@needs_human_in_the_loop
def test_a_pydantic_ai_agent_waits_for_a_person_asked_with_the_approval_options_and_resumes_replaying(
    human_in_the_loop,
):
    from airflow.sdk.timezone import utcnow

    runs: Counter[str] = Counter()
    notified: list[object] = []
    tries = ApprovalTries()
    with FakeOpenAIServer([LOOKUP, REFUND, reply.text("Refunded 40 EUR.")]) as server:
        op = AgentOperator(
            task_id="t",
            prompt="Order O-77 was charged twice.",
            agent=lambda: support_agent(server, runs),
            durable=True,
            retries=1,
            assigned_users={"id": "ada", "name": "Ada"},
            response_timeout=datetime.timedelta(hours=1),
            defaults="Approve",
            notifiers=[notified.append],
        )
        before = utcnow()
        deferred = tries.start(op)

        # The try stopped at the refund: two requests, the lookup ran, the refund did not.
        assert [r.status for r in server.requests] == [200, 200]
        assert runs == {"lookup_order": 1}
        [request] = human_in_the_loop.requests
        assert request["subject"] == "Agent 'support' asks to run issue_refund"
        assert '"amount_eur": 40' in request["body"]
        assert (request["options"], request["defaults"]) == (["Approve", "Reject"], ["Approve"])
        assert request["assigned_users"] == [{"id": "ada", "name": "Ada"}]
        assert len(notified) == 1 and notified[0]["ti"] is tries.ti
        assert deferred.method_name == "execute_complete"
        assert deferred.trigger.defaults == ["Approve"]
        timeout = deferred.trigger.timeout_datetime - before
        assert datetime.timedelta(hours=1) <= timeout < datetime.timedelta(hours=1, minutes=1)

        human_in_the_loop.answer = ("Approve", "ada")
        assert tries.resume(op, deferred) == "Refunded 40 EUR."

    # The resume replayed both requests of the try and the lookup, and ran the approved refund once.
    assert len(server.requests) == 3
    assert tool_outputs(server.requests[2].body) == ["O-77: charged twice", "refunded 40 EUR on O-77"]
    assert runs == {"lookup_order": 1, "issue_refund": 1}
    assert len(human_in_the_loop.requests) == 1
    usage = tries.ti.xcoms["usage"]
    # The answer is the resume's own step: recorded live, as the approved refund and the last request.
    assert (usage["requests"], usage["replayed"]) == (1, {"model": 2, "tool": 1})
    assert usage["live"] == {"approval": 1, "model": 1, "tool": 1}


@needs_human_in_the_loop
def test_task_agent_waits_for_a_person_with_a_pydantic_ai_agent_and_its_resume_writes_the_prompt_again(
    human_in_the_loop,
):
    from airflow.providers.common.compat.sdk import DAG, task

    runs: Counter[str] = Counter()
    written: list[str] = []
    tries = ApprovalTries()
    with FakeOpenAIServer([LOOKUP, REFUND, reply.text("Refunded 40 EUR.")]) as server:

        @task.agent(agent=lambda: support_agent(server, runs), durable=True, retries=1, assigned_users={"id": "ada"})
        def refund(order_id: str) -> str:
            written.append(order_id)
            return f"Order {order_id} was charged twice."

        with DAG("decorated_approval", schedule=None, start_date=datetime.datetime(2026, 1, 1)) as dag:
            refund("O-77")
        op = dag.get_task("refund")
        deferred = tries.start(op)
        assert (len(server.requests), runs) == (2, {"lookup_order": 1})
        assert human_in_the_loop.requests[0]["assigned_users"] == [{"id": "ada"}]

        human_in_the_loop.answer = ("Approve", "ada")
        assert tries.resume(op, deferred) == "Refunded 40 EUR."

    assert written == ["O-77", "O-77"]
    assert len(server.requests) == 3
    assert server.requests[0].body["messages"][-1]["content"] == "Order O-77 was charged twice."
    assert tool_outputs(server.requests[2].body) == ["O-77: charged twice", "refunded 40 EUR on O-77"]
    assert runs == {"lookup_order": 1, "issue_refund": 1}


@needs_human_in_the_loop
def test_a_response_timeout_takes_the_default_rejection_and_the_refund_never_runs(human_in_the_loop):
    runs: Counter[str] = Counter()
    tries = ApprovalTries()
    with FakeOpenAIServer([LOOKUP, REFUND, reply.text("I could not refund it.")]) as server:
        op = AgentOperator(
            task_id="t",
            prompt="Order O-77 was charged twice.",
            agent=lambda: support_agent(server, runs),
            durable=True,
            retries=1,
            response_timeout=datetime.timedelta(milliseconds=1),
            defaults="Reject",
        )
        deferred = tries.start(op)
        assert len(server.requests) == 2

        # Nobody answers: the trigger takes the default once the timeout passed.
        passed(deferred.trigger.timeout_datetime)
        assert tries.resume(op, deferred) == "I could not refund it."

    assert human_in_the_loop.defaults_taken == [["Reject"]]
    assert len(server.requests) == 3
    assert tool_outputs(server.requests[2].body) == ["O-77: charged twice", ToolDenied().message]
    assert runs == {"lookup_order": 1}


@needs_human_in_the_loop
def test_a_response_timeout_without_defaults_fails_the_task_keeping_the_journal(human_in_the_loop):
    from airflow.providers.common.ai.durable.airflow.approvals import ApprovalTimedOut

    runs: Counter[str] = Counter()
    tries = ApprovalTries()
    with FakeOpenAIServer([LOOKUP, REFUND]) as server:
        op = AgentOperator(
            task_id="t",
            prompt="Order O-77 was charged twice.",
            agent=lambda: support_agent(server, runs),
            durable=True,
            retries=1,
            response_timeout=datetime.timedelta(milliseconds=1),
        )
        deferred = tries.start(op)
        assert deferred.trigger.defaults is None
        passed(deferred.trigger.timeout_datetime)

        with pytest.raises(ApprovalTimedOut, match="nobody answered the approval request before its response_timeout"):
            tries.resume(op, deferred)

    assert (len(server.requests), runs, human_in_the_loop.defaults_taken) == (2, {"lookup_order": 1}, [])
    kinds = sorted(json.loads(text)["kind"] for text in tries.storage.entries.values())
    assert kinds.count("model") == 2 and kinds.count("tool") == 1 and kinds.count("approval") == 1


@needs_human_in_the_loop
@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"defaults": "Maybe"}, ValueError, "defaults must be 'Approve' or 'Reject'"),
        ({"response_timeout": 3600}, TypeError, "response_timeout must be a datetime.timedelta, not int"),
    ],
)
def test_the_operator_refuses_approval_arguments_it_cannot_use_with_a_pydantic_ai_agent(arguments, error, message):
    with pytest.raises(error, match=message):
        AgentOperator(task_id="t", prompt="p", agent=Agent("test"), durable=True, **arguments)


@pytest.mark.skipif(
    not AIRFLOW_V_3_2_PLUS, reason="before Airflow 3.2 the approval tool is refused when the DAG is parsed"
)
def test_a_pydantic_ai_agent_that_stops_for_an_approval_without_durable_fails_the_task_naming_the_fix():
    runs: Counter[str] = Counter()
    with FakeOpenAIServer([LOOKUP, REFUND]) as server:
        agent = support_agent(server, runs, output_type=[str, DeferredToolRequests])
        op = AgentOperator(task_id="t", prompt="Order O-77 was charged twice.", agent=agent)
        with pytest.raises(RuntimeError, match="approvals need durable=True"):
            Tries().run(op)
    assert (len(server.requests), runs) == (2, {"lookup_order": 1})


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "requires_approval of support.issue_refund"),
        ({"assigned_users": {"id": "ada"}}, "assigned_users"),
        ({"response_timeout": datetime.timedelta(hours=1), "defaults": "Reject"}, "response_timeout and defaults"),
        ({"notifiers": [lambda context: None]}, "notifiers"),
    ],
)
def test_approvals_of_a_pydantic_ai_agent_are_refused_when_the_dag_is_parsed_on_a_line_without_human_in_the_loop(
    arguments, named, monkeypatch
):
    import airflow
    from airflow.providers.common.ai import version_compat
    from airflow.providers.common.ai.durable.airflow.approvals import ApprovalsNotSupported

    with FakeOpenAIServer([]) as server:
        agent = support_agent(server, Counter()) if not arguments else Agent("test")
        monkeypatch.setattr(version_compat, "AIRFLOW_V_3_2_PLUS", False)
        with pytest.raises(ApprovalsNotSupported) as refused:
            AgentOperator(task_id="t", prompt="p", agent=agent, durable=True, **arguments)
    assert str(refused.value) == (
        f"AgentOperator 't': approvals ({named}) need Airflow's human-in-the-loop support, which Airflow 3.2 "
        f"and later have, not Airflow {airflow.__version__}: upgrade Airflow, or let the tools run without approval"
    )
