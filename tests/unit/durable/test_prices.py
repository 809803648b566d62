"""What a model call costs in US dollars (R-59): the maintained table, a deployment's prices, unknown prices."""

from __future__ import annotations

import json

import pytest
from agents import Agent, Usage
from agents.testing import ModelStep, ScriptedModel, assistant_message
from airflow.exceptions import AirflowConfigException

from airflow.providers.common.ai.durable.core.prices import ModelPrice, cost_usd, format_usd, price_of
from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.durable.storage import InMemoryStorage


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
    ],
)
def test_prices_in_another_shape_are_refused_with_an_example(monkeypatch, value):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__MODEL_PRICES", value)
    with pytest.raises(AirflowConfigException, match=r"model_prices must map model names.*for example"):
        price_of("gpt-4.1-mini")


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


@pytest.mark.parametrize(("value", "shown"), [(0, "$0"), (0.000285, "$0.000285"), (12.5, "$12.5"), (0.0000001, "$0")])
def test_money_is_written_in_dollars_to_the_millionth(value, shown):
    assert format_usd(value) == shown
