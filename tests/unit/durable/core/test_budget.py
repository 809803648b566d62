"""A budget over all tries of a task instance (R-58): counted live, free on replay, refused before sending."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from agents import Agent, ModelSettings, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow.providers.common.ai.durable.core.budget import BUDGET_KEY
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.core.usage import durable_usage
from airflow.providers.common.ai.durable.openai_agents import (
    UsageBudget,
    run_durably,
    run_durably_streamed,
    run_durably_sync,
)

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


def journal_of_try(storage: InMemoryStorage, try_number: int, first_try: int = 1) -> DurableJournal:
    return DurableJournal(storage, host=current_host().for_try(try_number, budget_first_try=first_try))


def weather_agent(model: ScriptedModel, runs: list[str], **settings) -> Agent:
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    return Agent(name="a", model=model, tools=[weather], model_settings=ModelSettings(**settings))


def three_requests_failing_on_the_third() -> list:
    return [
        [function_call("weather", {"city": "Paris"}, call_id="c1")],
        [function_call("weather", {"city": "Rome"}, call_id="c2")],
        ModelStep.raise_error(ConnectionError("the model server went away")),
        [assistant_message("Sunny in both.")],
    ]


def test_every_live_request_of_every_try_counts_and_a_replayed_one_costs_nothing():
    storage, runs = InMemoryStorage(), []
    model = ScriptedModel(three_requests_failing_on_the_third(), default_usage=USAGE)
    budget = UsageBudget(max_requests=4, max_total_tokens=1_000)

    with journal_scope(journal_of_try(storage, 1)), pytest.raises(ConnectionError):
        run_durably_sync(weather_agent(model, runs), "Weather?", budget=budget)
    with journal_scope(journal_of_try(storage, 2)):
        run_durably_sync(weather_agent(model, runs), "Weather?", budget=budget)
        usage = durable_usage()

    # Try 1: two answers and the request that failed (sent, so counted; its tokens unknown); try 2:
    # the two answers replayed, one request.
    assert (len(model.calls), runs) == (4, ["Paris", "Rome"])
    assert usage is not None and usage.budget == {
        "first_try": 1,
        "limits": {"requests": 4, "total_tokens": 1_000},
        "spent": {"requests": 4, "total_tokens": 360},
        "left": {"requests": 0, "total_tokens": 640},
    }
    assert json.loads(storage.entries[BUDGET_KEY])["tries"] == {
        "1": {"requests": 3, "input_tokens": 200, "output_tokens": 40, "total_tokens": 240, "cost_usd": 0},
        "2": {"requests": 1, "input_tokens": 100, "output_tokens": 20, "total_tokens": 120, "cost_usd": 0},
    }


def test_a_request_that_would_pass_the_budget_is_not_sent_and_fails_the_task_naming_the_limit_and_each_try():
    storage, runs = InMemoryStorage(), []
    script = [
        [function_call("weather", {"city": "Paris"}, call_id="c1")],
        ModelStep.raise_error(ConnectionError("the model server went away")),
        [function_call("weather", {"city": "Rome"}, call_id="c2")],
        [assistant_message("Sunny in both.")],
    ]
    model = ScriptedModel(script, default_usage=USAGE)
    budget = UsageBudget(max_requests=2)

    with journal_scope(journal_of_try(storage, 1)), pytest.raises(ConnectionError):
        run_durably_sync(weather_agent(model, runs), "Weather?", budget=budget)
    sent_in_try_1 = len(model.calls)
    with journal_scope(journal_of_try(storage, 2)), pytest.raises(AirflowFailException) as refused:
        run_durably_sync(weather_agent(model, runs), "Weather?", budget=budget)

    # Try 1 sent two requests (one answered, one failed); try 2 replayed the answer and its tool
    # call for free, and its first live request was refused before it was sent.
    assert (sent_in_try_1, len(model.calls), runs) == (2, 2, ["Paris"])
    message = str(refused.value)
    assert "the request to model 'ScriptedModel' at 1.3 was not sent" in message
    assert "max_requests=2. Its tries spent 2 (try 1: 2, try 2: 0)." in message
    assert "raise UsageBudget(max_requests=...)" in message and "clear" in message


def test_a_request_whose_max_tokens_would_pass_the_output_limit_is_refused_before_it_is_sent():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    budget = UsageBudget(max_output_tokens=100)
    agent = Agent(name="a", model=model, model_settings=ModelSettings(max_tokens=100))
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(agent, "first", budget=budget)  # at most 100 of 100: sent, used 20
        with pytest.raises(AirflowFailException, match=r"spent 20 \(try 1: 20\) and this request may add up to 100"):
            run_durably_sync(agent, "second", budget=budget)
    assert len(model.calls) == 1


def test_a_streamed_run_is_cut_at_the_same_point():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    budget = UsageBudget(max_requests=1)

    async def stream(prompt: str) -> list:
        result = run_durably_streamed(Agent(name="a", model=model), prompt, budget=budget)
        return [event async for event in result.stream_events()]

    with journal_scope(journal_of_try(storage, 1)):
        asyncio.run(stream("first"))
        with pytest.raises(AirflowFailException, match="max_requests=1"):
            asyncio.run(stream("second"))
    assert len(model.calls) == 1


def test_a_clear_of_a_finished_task_instance_starts_a_new_budget():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    budget = UsageBudget(max_requests=1)
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)
    # Cleared after try 1 finished: the budget counts from try 2.
    with journal_scope(journal_of_try(storage, 2, first_try=2)):
        run_durably_sync(Agent(name="a", model=model), "second", budget=budget)
        usage = durable_usage()
    assert len(model.calls) == 2
    assert usage is not None and usage.budget["spent"] == {"requests": 1}
    assert set(json.loads(storage.entries[BUDGET_KEY])["tries"]) == {"1", "2"}  # what try 1 spent stays shown


def test_a_try_resumed_after_waiting_counts_what_it_spent_before():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    budget = UsageBudget(max_requests=1)
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)
    # The same try, resumed in a new process (a deferred task): what it spent before still counts.
    with journal_scope(journal_of_try(storage, 1)), pytest.raises(AirflowFailException, match=r"\(try 1: 1\)"):
        run_durably_sync(Agent(name="a", model=model), "second", budget=budget)
    assert len(model.calls) == 1


@pytest.mark.parametrize("limit", ["max_requests", "max_total_tokens"])
def test_concurrent_runs_never_together_pass_the_budget_by_more_than_one_request(limit):
    storage = InMemoryStorage()
    models = [ScriptedModel([[assistant_message(f"answer {n}")]], default_usage=USAGE) for n in range(4)]
    budget = UsageBudget(**{limit: 2 if limit == "max_requests" else 150})

    async def four_agents() -> list:
        runs = [
            run_durably(Agent(name=f"a{n}", model=model), f"question {n}", durable_key=f"run {n}", budget=budget)
            for n, model in enumerate(models)
        ]
        return await asyncio.gather(*runs, return_exceptions=True)

    with journal_scope(journal_of_try(storage, 1)):
        results = asyncio.run(four_agents())
        spent = durable_usage().budget["spent"]
    sent = sum(len(model.calls) for model in models)
    refused = [result for result in results if isinstance(result, AirflowFailException)]
    # Requests are counted before they are sent: exactly the limit. Tokens are known only once a
    # request returns: the second request is sent once the first returned 120 of 150.
    assert (sent, len(refused)) == (2, 2)
    assert spent == ({"requests": 2} if limit == "max_requests" else {"total_tokens": 240})


def test_several_agents_of_one_task_share_its_budget_and_a_second_budget_is_refused():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(Agent(name="a", model=model), "first", budget=UsageBudget(max_requests=1))
        with pytest.raises(AirflowFailException, match="max_requests=1"):
            run_durably_sync(Agent(name="b", model=model), "second", budget=UsageBudget(max_requests=1))
        with pytest.raises(ValueError, match="a task instance has one budget"):
            run_durably_sync(Agent(name="b", model=model), "third", budget=UsageBudget(max_requests=5))
    assert len(model.calls) == 1


def test_a_money_limit_counts_at_the_models_price_and_refuses_a_model_of_unknown_price(monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", json.dumps({"house-model": {"input": 1000, "output": 5000}}))
    storage = InMemoryStorage()
    priced = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=USAGE)
    priced.model = "house-model"  # 100 input tokens at $1000/M + 20 output at $5000/M: $0.2 a request
    unpriced = ScriptedModel([[assistant_message("three")]], default_usage=USAGE)
    unpriced.model = "a-model-no-table-knows"
    budget = UsageBudget(max_cost_usd=0.3)
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(Agent(name="a", model=priced), "first", budget=budget)
        run_durably_sync(Agent(name="a", model=priced), "second", budget=budget)  # $0.2 spent < $0.3
        with pytest.raises(AirflowFailException, match=r"max_cost_usd=0.3\. Its tries spent \$0.4"):
            run_durably_sync(Agent(name="a", model=priced), "third", budget=budget)
    with (
        journal_scope(journal_of_try(InMemoryStorage(), 1)),
        pytest.raises(AirflowFailException, match=r"price of model 'a-model-no-table-knows' is unknown.*model_prices"),
    ):
        run_durably_sync(Agent(name="a", model=unpriced), "fourth", budget=budget)
    assert (len(priced.calls), len(unpriced.calls)) == (2, 0)


def test_the_clean_up_after_success_deletes_what_the_budget_spent():
    storage = InMemoryStorage()
    model = ScriptedModel([[assistant_message("one")]], default_usage=USAGE)
    journal = journal_of_try(storage, 1)
    with journal_scope(journal):
        run_durably_sync(Agent(name="a", model=model), "first", budget=UsageBudget(max_requests=3))
    assert BUDGET_KEY in storage.entries
    keys = list(journal_of_try(storage, 2)._stored_keys())
    assert BUDGET_KEY in keys and "0" in keys  # found through the index, by a try that used no budget


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "limits nothing"),
        ({"max_requests": 0}, "above zero"),
        ({"max_total_tokens": -5}, "above zero"),
        ({"max_cost_usd": float("nan")}, "above zero"),
        ({"max_requests": 2.5}, "whole number"),
        ({"max_output_tokens": True}, "whole number"),
        ({"max_cost_usd": "1"}, "must be a number"),
        ({"max_cost_usd": 10**400}, r"max_cost_usd\) is larger than an amount can be counted"),
        ({"max_total_tokens": 10**400}, r"max_total_tokens\) is larger than"),
        ({"max_cost_usd": float("inf")}, r"max_cost_usd\) is larger than"),
    ],
)
def test_a_budget_that_limits_nothing_or_by_no_positive_number_is_refused(arguments, error):
    with pytest.raises((TypeError, ValueError), match=error):
        UsageBudget(**arguments)


def test_a_budget_that_is_not_a_usage_budget_is_refused_before_anything_runs():
    model = ScriptedModel([[assistant_message("one")]])
    with journal_scope(journal_of_try(InMemoryStorage(), 1)), pytest.raises(TypeError, match="UsageBudget"):
        run_durably_sync(Agent(name="a", model=model), "first", budget={"max_requests": 1})
    assert len(model.calls) == 0


def test_a_store_that_cannot_read_what_the_budget_spent_fails_the_try_so_that_a_retry_reads_it_again():
    from airflow.providers.common.ai.durable.core.budget import BudgetUnreadable

    class Unreadable(InMemoryStorage):
        def read(self, key: str):
            if key == BUDGET_KEY:
                raise ConnectionError("the API server is gone")
            return super().read(key)

    model = ScriptedModel([[assistant_message("one")]], default_usage=USAGE)
    with (
        journal_scope(journal_of_try(Unreadable(), 1)),
        pytest.raises(BudgetUnreadable, match="the API server is gone"),
    ):
        run_durably_sync(Agent(name="a", model=model), "first", budget=UsageBudget(max_requests=3))
    assert len(model.calls) == 0  # not AirflowFailException: the next try may read it


def test_a_successful_try_whose_budget_cannot_be_read_still_deletes_its_journal(caplog):
    class Unreadable(InMemoryStorage):
        broken = False

        def read(self, key: str):
            if key == BUDGET_KEY and self.broken:
                raise ConnectionError("the API server is gone")
            return super().read(key)

    storage, budget = Unreadable(), UsageBudget(max_requests=3)
    model = ScriptedModel([[assistant_message("one")]], default_usage=USAGE)
    with journal_scope(journal_of_try(storage, 1)):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)
    storage.broken = True

    # The retry replays the answer, so it never needed what the budget spent, until its summary.
    retry = journal_of_try(storage, 2)
    with journal_scope(retry):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)
    with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable.core"):
        retry.finish(succeeded=True)

    assert len(model.calls) == 1
    assert storage.entries == {}
    assert "budget: what its tries spent cannot be read" in caplog.text
