"""@task.agent: the decorated function writes the prompt; the agent's answer is the result."""

from __future__ import annotations

from datetime import datetime

import pytest
from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import DAG, task

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage


class PushedXComs:
    """A running task instance as far as the operator uses it: it pushes its usage."""

    def __init__(self) -> None:
        self.xcoms: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcoms[key] = value


def test_the_function_returns_the_prompt_and_the_agents_answer_is_the_result():
    model = ScriptedModel([[assistant_message("Login problem, urgent.")]])

    @task.agent(agent=Agent(name="triage", model=model))
    def triage(ticket: str) -> str:
        return f"Triage this ticket: {ticket}"

    with DAG("decorated", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        triage("I cannot log in")
    op = dag.get_task("triage")

    assert op.execute({"ti": PushedXComs()}) == "Login problem, urgent."
    assert model.first_call.input == [{"content": "Triage this ticket: I cannot log in", "role": "user"}]


def test_the_decorator_takes_the_operators_arguments_and_refuses_what_it_refuses():
    with (
        pytest.raises(ValueError, match="max_turns must be a whole number of at least 1"),
        DAG("decorated_refused", schedule=None, start_date=datetime(2026, 1, 1)),
    ):

        @task.agent(agent=Agent(name="a"), max_turns=0)
        def ask() -> str:
            return "p"

        ask()


def test_a_durable_decorated_task_replays_on_its_retry():
    runs = []

    @function_tool
    def lookup(ticket_id: str) -> str:
        """The ticket's text."""
        runs.append(ticket_id)
        return "cannot log in"

    model = ScriptedModel(
        [
            [function_call("lookup", {"ticket_id": "T-1"}, call_id="c1")],
            ModelStep.raise_error(ConnectionError("the model provider is down")),
            [assistant_message("Login problem.")],
        ]
    )

    @task.agent(agent=Agent(name="a", model=model, tools=[lookup]), durable=True, retries=1)
    def triage(ticket_id: str) -> str:
        return f"Triage ticket {ticket_id}."

    with DAG("decorated_durable", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        triage("T-1")
    op, storage = dag.get_task("triage"), InMemoryStorage()

    with pytest.raises(ConnectionError), journal_scope(DurableJournal(storage)):
        op.execute({"ti": PushedXComs()})
    assert (len(model.calls), runs) == (2, ["T-1"])

    retry = DurableJournal(storage)
    with journal_scope(retry):
        assert op.execute({"ti": PushedXComs()}) == "Login problem."
    # Try 2 sent only the request that failed, with the recorded lookup's result in it.
    assert (len(model.calls), runs) == (3, ["T-1"])
    assert model.calls[2].input == model.calls[1].input
    assert model.calls[2].input[-1]["output"] == "cannot log in"
    assert retry.stats.replayed == {"model": 1, "tool": 1}
