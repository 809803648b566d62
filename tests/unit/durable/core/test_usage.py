"""durable_usage(): what a @task's durable runs used in this try, and what replaying saved (R-42)."""

from __future__ import annotations

import pytest
from agents import Agent, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.core.usage import ModelUsage, TryUsage, durable_usage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


def weather_agent(name: str, model: ScriptedModel, runs: list[str]) -> Agent:
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    return Agent(name=name, model=model, tools=[weather])


def test_outside_a_task_there_is_no_durable_usage():
    assert durable_usage() is None


def test_a_task_running_two_agents_reads_the_usage_of_both_per_model_and_what_the_retry_saved():
    storage, runs = InMemoryStorage(), []
    planner = ScriptedModel(
        [[function_call("weather", {"city": "Paris"}, call_id="c1")], [assistant_message("Paris: sunny")]],
        default_usage=USAGE,
    )
    planner.model = "planner-model"
    writer = ScriptedModel([ModelStep.raise_error(ConnectionError("down")), [assistant_message("Done.")]])
    writer.model = "writer-model"
    writer.set_default_usage(Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15))

    def task_try() -> TryUsage | None:
        with journal_scope(DurableJournal(storage)):
            try:
                run_durably_sync(weather_agent("planner", planner, runs), "Plan.")
                run_durably_sync(Agent(name="writer", model=writer), "Write.")
            finally:
                usage = durable_usage()
        return usage

    with pytest.raises(ConnectionError):
        task_try()
    usage = task_try()

    assert (len(planner.calls), len(writer.calls), runs) == (2, 2, ["Paris"])
    assert usage is not None
    assert usage.models == {
        "writer-model": ModelUsage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15, cost_usd=None)
    }
    assert (usage.saved_requests, usage.saved_tokens) == (2, 240)
    assert (usage.replayed, usage.live, usage.not_recorded) == ({"model": 2, "tool": 1}, {"model": 1}, {})
    assert (usage.requests, usage.total_tokens) == (1, 15)


class Receipt:
    """A tool output the journal has no JSON for."""

    def __str__(self) -> str:
        return "receipt 42"


def test_a_call_that_could_not_be_recorded_is_counted_live_and_not_recorded_by_kind():
    @function_tool
    def pay() -> object:
        """Pays the invoice."""
        return Receipt()

    model = ScriptedModel([[function_call("pay", {}, call_id="c1")], [assistant_message("Paid.")]], default_usage=USAGE)
    with journal_scope(DurableJournal(InMemoryStorage())):
        run_durably_sync(Agent(name="a", model=model, tools=[pay]), "Pay it.")
        usage = durable_usage()
    assert usage is not None
    assert (usage.live, usage.not_recorded) == ({"model": 2, "tool": 1}, {"tool": 1})
    assert usage.models["ScriptedModel"] == ModelUsage(
        requests=2, input_tokens=200, output_tokens=40, total_tokens=240, cost_usd=None
    )


def test_usage_as_json_names_totals_models_savings_and_counts():
    usage = TryUsage(
        models={"b": ModelUsage(1, 2, 3, 5, None), "a": ModelUsage(2, 10, 1, 11, 0.25)},
        saved_requests=3,
        saved_tokens=300,
        saved_cost_usd=0.5,
        unknown_prices=["b"],
        replayed={"tool": 1, "model": 3},
        live={"model": 3},
        not_recorded={"tool": 1},
    )
    assert usage.to_dict() == {
        "requests": 3,
        "input_tokens": 12,
        "output_tokens": 4,
        "total_tokens": 16,
        "cost_usd": 0.25,
        "models": {
            "a": {"requests": 2, "input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "cost_usd": 0.25},
            "b": {"requests": 1, "input_tokens": 2, "output_tokens": 3, "total_tokens": 5, "cost_usd": None},
        },
        "saved": {"requests": 3, "tokens": 300, "cost_usd": 0.5},
        "unknown_prices": ["b"],
        "replayed": {"model": 3, "tool": 1},
        "live": {"model": 3},
        "not_recorded": {"tool": 1},
        "in_flight": [],
    }
