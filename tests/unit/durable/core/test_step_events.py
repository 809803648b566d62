"""What the core tells the watchers of durable steps (R-60): one event per step, as it ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from agents import Agent, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from tries import WorkerDied

from airflow.providers.common.ai.durable.airflow.summaries import steps_of
from airflow.providers.common.ai.durable.core.host import current_host, hosting
from airflow.providers.common.ai.durable.core.in_flight import Happened
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import in_flight, run_durably_sync


@pytest.fixture
def heard() -> Iterator[list]:
    heard: list = []
    with hosting(dataclasses.replace(current_host(), listeners=(heard.append,))):
        yield heard


def test_each_step_is_heard_once_as_it_ends_also_a_model_request_that_failed(heard):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    usage = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)
    script = [
        [function_call("weather", {"city": "Paris"}, call_id="c1")],
        ModelStep.raise_error(ConnectionError("the model server went away")),
        [assistant_message("Sunny.")],
    ]
    model = ScriptedModel(script, default_usage=usage)
    storage = InMemoryStorage()
    with journal_scope(DurableJournal(storage)), pytest.raises(ConnectionError):
        run_durably_sync(Agent(name="a", model=model, tools=[weather]), "Weather?")
    try_1 = [(e.kind, e.key, e.outcome, e.total_tokens) for e in heard]
    heard.clear()
    with journal_scope(DurableJournal(storage)):
        run_durably_sync(Agent(name="a", model=model, tools=[weather]), "Weather?")
    try_2 = [(e.kind, e.key, e.outcome, e.total_tokens) for e in heard]

    assert try_1 == [("model", "1.1", "live", 120), ("tool", "1.2", "live", None), ("model", "1.3", "failed", None)]
    assert try_2 == [
        ("model", "1.1", "replayed", 120),
        ("tool", "1.2", "replayed", None),
        ("model", "1.3", "live", 120),
    ]
    assert all(e.started <= e.ended for e in heard)


def test_a_listener_that_raises_never_disturbs_the_run():
    def broken(event: object) -> None:
        raise RuntimeError("the exporter is down")

    host = dataclasses.replace(current_host(), listeners=(broken,))
    model = ScriptedModel([[assistant_message("ok")]])
    with journal_scope(DurableJournal(InMemoryStorage(), host=host)):
        assert run_durably_sync(Agent(name="a", model=model), "Hi").final_output == "ok"


def test_a_call_found_in_flight_and_resolved_as_done_is_heard_as_resolved_with_how(heard):
    refunds: list[str] = []
    dies = [True]

    def found(key: str, arguments: object) -> Happened | None:
        return Happened("refund already made") if key in refunds else None

    @in_flight("verify", verify=found)
    @function_tool
    def refund(order: str) -> str:
        """Refund an order."""
        from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key

        refunds.append(current_idempotency_key())
        if dies[0]:
            raise WorkerDied("killed after the refund")
        return "refunded"

    storage = InMemoryStorage()
    first = ScriptedModel([[function_call("refund", {"order": "A-1"}, call_id="c1")]])
    with journal_scope(DurableJournal(storage)), pytest.raises(WorkerDied):
        run_durably_sync(Agent(name="a", model=first, tools=[refund]), "Refund A-1")
    heard.clear()
    dies[0] = False
    second = ScriptedModel([[assistant_message("Refunded.")]])
    with journal_scope(journal := DurableJournal(storage)):
        run_durably_sync(Agent(name="a", model=second, tools=[refund]), "Refund A-1")

    assert len(refunds) == 1
    assert [(e.kind, e.key, e.outcome, e.resolution) for e in heard] == [
        ("model", "1.1", "replayed", None),
        ("tool", "1.2", "resolved", "verify: it happened"),
        ("model", "1.3", "live", None),
    ]
    # The try's summary lists it so, for the journal page's lanes.
    assert [(s["key"], s["outcome"]) for s in steps_of(journal)] == [
        ("1.1", "replayed"),
        ("1.2", "resolved"),
        ("1.3", "live"),
    ]


@pytest.mark.parametrize(
    "policy, reason",
    [
        (in_flight("fail"), "its tool's policy is 'fail'"),
        (in_flight("verify", verify=lambda key, arguments: 1 / 0), "its verify function raised ZeroDivisionError"),
    ],
    ids=["fail", "verify-raised"],
)
def test_a_call_found_in_flight_that_stays_unresolved_is_heard_as_failed_and_has_no_result(heard, policy, reason):
    runs: list[str] = []

    @function_tool
    def refund(order: str) -> str:
        """Refund an order."""
        runs.append(order)
        raise WorkerDied("killed in the refund")

    storage = InMemoryStorage()
    asked = [function_call("refund", {"order": "A-1"}, call_id="c1")]
    with journal_scope(DurableJournal(storage)), pytest.raises(WorkerDied):
        run_durably_sync(Agent(name="a", model=ScriptedModel([asked]), tools=[policy(refund)]), "Refund A-1")
    heard.clear()
    with journal_scope(journal := DurableJournal(storage)), pytest.raises(Exception, match="in flight"):
        run_durably_sync(Agent(name="a", model=ScriptedModel([]), tools=[policy(refund)]), "Refund A-1")

    assert runs == ["A-1"]
    assert [(e.kind, e.key, e.outcome, e.reason) for e in heard] == [
        ("model", "1.1", "replayed", None),
        ("tool", "1.2", "failed", reason),
    ]
    assert [(s["key"], s["outcome"]) for s in steps_of(journal)] == [("1.1", "replayed"), ("1.2", "unfinished")]
