"""What a model call costs in US dollars (R-59): the maintained table, a deployment's prices, unknown prices."""

from __future__ import annotations

import json

import pytest
from agents import Agent, Usage
from agents.testing import ModelStep, ScriptedModel, assistant_message
from airflow.exceptions import AirflowConfigException
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.prices import MOST_USD, ModelPrice, cost_usd, format_usd, price_of
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync


def test_a_model_the_table_knows_is_priced_per_million_input_cached_and_output_tokens():
    assert price_of("gpt-4.1-mini") == ModelPrice(input=0.4, output=1.6, cached_input=0.1)
    # 1,000 input tokens of which 200 were cached, 500 output tokens.
    assert cost_usd("gpt-4.1-mini", input_tokens=1000, output_tokens=500, cached_input_tokens=200) == pytest.approx(
        (800 * 0.4 + 200 * 0.1 + 500 * 1.6) / 1e6
    )


def test_a_model_no_table_knows_has_an_unknown_price_not_a_guess():
    assert price_of("my-llama-3-finetune") is None
    assert cost_usd("my-llama-3-finetune", input_tokens=10, output_tokens=10) is None


def test_a_deployments_price_adds_a_model_and_overrides_the_tables(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW__COMMON_AI__MODEL_PRICES",
        json.dumps(
            {
                "my-llama": {"input": 0.2, "output": 0.6},
                "gpt-4.1-mini": {"input": 0.1, "output": 0.2, "cached_input": 0},
            }
        ),
    )
    assert price_of("my-llama") == ModelPrice(input=0.2, output=0.6)
    assert cost_usd("my-llama", input_tokens=100, output_tokens=100, cached_input_tokens=50) == pytest.approx(80 / 1e6)
    assert price_of("gpt-4.1-mini") == ModelPrice(input=0.1, output=0.2, cached_input=0.0)


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        '["my-llama"]',
        '{"my-llama": {"input": 0.2}}',
        '{"my-llama": {"input": 0.2, "output": 0.6, "per_request": 1}}',
        '{"my-llama": {"input": -1, "output": 0.6}}',
        '{"my-llama": {"input": "0.2", "output": 0.6}}',
        '{"my-llama": {"input": true, "output": 0.6}}',
        '{"my-llama": {"input": 1e999, "output": 0.6}}',
        '{"my-llama": {"input": Infinity, "output": 0.6}}',
        '{"my-llama": {"input": 0.2, "output": NaN}}',
    ],
)
def test_prices_in_another_shape_are_refused_with_an_example(monkeypatch, value):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", value)
    with pytest.raises(AirflowConfigException, match=r"model_prices must map model names.*for example"):
        price_of("gpt-4.1-mini")


def test_prices_in_another_shape_fail_a_durable_run_for_good_before_any_request_is_sent(monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", '{"my-llama": {"input": 0.2}}')
    model = ScriptedModel([[assistant_message("one")]])
    with (
        journal_scope(DurableJournal(InMemoryStorage())),
        pytest.raises(AirflowFailException, match=r"model_prices must map.*No model request is sent.*clear the task"),
    ):
        run_durably_sync(Agent(name="a", model=model), "first")
    assert len(model.calls) == 0


def test_prices_in_another_shape_are_refused_when_an_agent_operator_is_parsed(monkeypatch):
    from airflow.providers.common.ai.operators.agent import AgentOperator

    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", "not json")
    with pytest.raises(AirflowConfigException, match=r"model_prices must map model names.*for example"):
        AgentOperator(task_id="triage", agent=Agent(name="a"), prompt="Triage it.")


def test_a_retry_reports_what_it_spent_and_what_the_replay_saved_in_dollars(monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", json.dumps({"house": {"input": 2, "output": 10}}))
    storage = InMemoryStorage()
    usage = Usage(requests=1, input_tokens=1000, output_tokens=100, total_tokens=1100)  # $0.002 + $0.001
    model = ScriptedModel(
        [[assistant_message("one")], ModelStep.raise_error(ConnectionError("down")), [assistant_message("two")]],
        default_usage=usage,
    )
    model.model = "house"

    with journal_scope(DurableJournal(storage)) as first, pytest.raises(ConnectionError):
        run_durably_sync(Agent(name="a", model=model), "first")
        run_durably_sync(Agent(name="b", model=model), "second")
    with journal_scope(DurableJournal(storage)) as second:
        run_durably_sync(Agent(name="a", model=model), "first")
        run_durably_sync(Agent(name="b", model=model), "second")
    spent_1, spent_2 = first.stats.usage(), second.stats.usage()

    assert len(model.calls) == 3  # try 2 replayed the first agent's answer
    assert (spent_1.cost_usd, spent_1.saved_cost_usd) == (pytest.approx(0.003), 0)
    assert (spent_2.cost_usd, spent_2.saved_cost_usd) == (pytest.approx(0.003), pytest.approx(0.003))
    assert second.stats.summary().endswith(", spent $0.003, saved $0.003")
    assert spent_2.to_dict()["models"]["house"]["cost_usd"] == pytest.approx(0.003)


def test_a_model_of_unknown_price_is_named_in_the_usage_and_the_summary():
    model = ScriptedModel(
        [[assistant_message("one")]], default_usage=Usage(requests=1, input_tokens=5, output_tokens=5, total_tokens=10)
    )
    model.model = "my-llama-3-finetune"
    with journal_scope(DurableJournal(InMemoryStorage())) as journal:
        run_durably_sync(Agent(name="a", model=model), "first")
    usage = journal.stats.usage().to_dict()
    assert (usage["cost_usd"], usage["models"]["my-llama-3-finetune"]["cost_usd"]) == (0, None)
    assert usage["unknown_prices"] == ["my-llama-3-finetune"]
    assert journal.stats.summary().endswith(", spent and saved: price unknown (my-llama-3-finetune)")


@pytest.mark.parametrize("amount", [float("inf"), float("nan"), -1.0])
def test_a_price_that_is_not_a_finite_amount_of_0_or_more_is_refused(amount):
    with pytest.raises(ValueError, match="not a price of 0 or more"):
        ModelPrice(input=0.2, output=amount)


def test_a_cost_beyond_what_a_float_holds_counts_as_the_most_it_holds_never_infinity():
    price = ModelPrice(input=1.7e308, output=1.7e308)
    assert price.cost(input_tokens=1000, output_tokens=1000) == MOST_USD
    assert ModelPrice(input=1.0, output=1.0).cost(input_tokens=10**400, output_tokens=0) == MOST_USD


def test_a_price_near_the_float_maximum_is_recorded_counted_and_refused_by_the_budget_never_as_infinity(monkeypatch):
    from airflow.providers.common.ai.durable.core.budget import BUDGET_KEY
    from airflow.providers.common.ai.durable.core.usage import durable_usage
    from airflow.providers.common.ai.durable.openai_agents import UsageBudget

    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", json.dumps({"house": {"input": 1.7e308, "output": 1e308}}))
    storage, budget = InMemoryStorage(), UsageBudget(max_cost_usd=1e300)
    usage = Usage(requests=1, input_tokens=1000, output_tokens=100, total_tokens=1100)
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]], default_usage=usage)
    model.model = "house"

    first = DurableJournal(storage)
    with journal_scope(first):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)
        spent = durable_usage()
    assert spent is not None
    xcom = json.loads(json.dumps(spent.to_dict(), allow_nan=False))
    assert (xcom["cost_usd"], xcom["models"]["house"]["cost_usd"]) == (MOST_USD, MOST_USD)
    assert first.stats.recorded["model"] == 1  # the answer is recorded: the next try replays it
    assert json.loads(storage.entries[BUDGET_KEY])["tries"]["1"]["cost_usd"] == MOST_USD

    retry = DurableJournal(storage, host=current_host().for_try(2))
    with journal_scope(retry), pytest.raises(AirflowFailException, match="max_cost_usd"):
        run_durably_sync(Agent(name="a", model=model), "first", budget=budget)  # replayed: free
        run_durably_sync(Agent(name="b", model=model), "second", budget=budget)  # what try 1 spent is remembered
    assert len(model.calls) == 1
    assert retry.stats.usage().saved_cost_usd == MOST_USD


@pytest.mark.parametrize(("value", "shown"), [(0, "$0"), (0.000285, "$0.000285"), (12.5, "$12.5"), (0.0000001, "$0")])
def test_money_is_written_in_dollars_to_the_millionth(value, shown):
    assert format_usd(value) == shown
