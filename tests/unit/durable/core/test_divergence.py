"""A divergence names what changed (R-43): the log line and the try's summary say which part of the call."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from agents import Agent, MaxTurnsExceeded, ModelSettings, function_tool, handoff
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from airflow.providers.common.ai.durable.core.divergence import model_call_parts, tool_call_parts, what_changed
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool
def refund(order: str) -> str:
    """Refunds an order."""
    return "refunded"


class Verdict(BaseModel):
    ok: bool


def agent(model: ScriptedModel, **overrides: Any) -> Agent:
    arguments: dict[str, Any] = {"name": "a", "instructions": "Be brief.", "model": model, "tools": [weather]}
    return Agent(**{**arguments, **overrides})


def divergences_of_a_retry(first: dict[str, Any], second: dict[str, Any], prompt: Any = "Hi", again: Any = None):
    """Run try 1 with ``first`` agent arguments, try 2 with ``second``; the divergences of try 2."""
    storage = InMemoryStorage()
    for overrides, text in ((first, prompt), (second, prompt if again is None else again)):
        journal = DurableJournal(storage)
        with journal_scope(journal):
            run_durably_sync(agent(ScriptedModel([[assistant_message('{"ok": true}')]]), **overrides), text)
    return [reason for _, _, reason in journal.stats.divergences]


CHANGED = "it asks something other than the recorded call: "


@pytest.mark.parametrize(
    ("first", "second", "reason"),
    [
        ({}, {"instructions": "Be very brief."}, "the instructions changed"),
        ({}, {"model_settings": ModelSettings(temperature=0.2)}, "settings field 'temperature' was added"),
        (
            {"model_settings": ModelSettings(temperature=0.2, top_p=0.5)},
            {"model_settings": ModelSettings(temperature=0.7, top_p=0.5)},
            "settings field 'temperature' changed",
        ),
        ({}, {"tools": [weather, refund]}, "tool 'refund' was added"),
        ({"tools": [weather, refund]}, {"tools": [refund]}, "tool 'weather' was removed"),
        ({}, {"output_type": Verdict}, "the output schema changed"),
        ({}, {"handoffs": [Agent(name="billing", instructions="Bills.")]}, "handoff 'transfer_to_billing' was added"),
        (
            {"handoffs": [handoff(Agent(name="billing"), tool_description_override="Billing questions.")]},
            {"handoffs": [handoff(Agent(name="billing"), tool_description_override="Refunds.")]},
            "handoff 'transfer_to_billing' changed",
        ),
    ],
)
def test_a_model_call_that_changed_names_the_part_that_changed(first, second, reason):
    # The first call of a run that matches no recorded run names what changed against it.
    assert divergences_of_a_retry(first, second) == [
        f"no recorded run starts with this call; the first call of recorded run 1: {CHANGED}{reason}"
    ]


def test_another_model_is_named_with_the_one_recorded():
    storage = InMemoryStorage()
    for name in ("gpt-4o", "gpt-4.1"):
        model = ScriptedModel([[assistant_message("ok")]])
        model.model = name
        journal = DurableJournal(storage)
        with journal_scope(journal):
            run_durably_sync(agent(model), "Hi")
    assert [reason for _, _, reason in journal.stats.divergences] == [
        "no recorded run starts with this call; the first call of recorded run 1: "
        "the model changed: the recorded call there is model 'gpt-4o'"
    ]


def test_a_changed_tool_description_names_the_tool():
    @function_tool(description_override="The weather, in Celsius.")
    def weather_in_celsius(city: str) -> str:
        return city

    weather_in_celsius.name = "weather"
    assert divergences_of_a_retry({}, {"tools": [weather_in_celsius]})[0].endswith("tool 'weather' changed")


def test_a_conversation_that_changed_names_the_first_input_item_that_differs():
    conversation = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    edited = [conversation[0], {"role": "assistant", "content": "Hello!"}, conversation[2]]
    assert divergences_of_a_retry({}, {}, conversation, edited)[0].endswith(
        "input item 1 differs (counting from 0; the input has 3 items)"
    )
    longer = [*conversation, {"role": "user", "content": "And Rome?"}]
    assert divergences_of_a_retry({}, {}, conversation, longer)[0].endswith(
        "the input has 4 items where the recorded call had 3, the first 3 the same"
    )


def test_a_later_model_call_whose_input_changed_is_named_at_its_position_in_the_log(caplog):
    # Try 1's tool fails (the SDK tells the model so) and is not recorded: try 2 runs it live, it
    # answers, and the model call after it asks with another tool output than recorded.
    storage, service_is_down = InMemoryStorage(), [True, False]

    @function_tool(name_override="weather")
    def flaky_weather(city: str) -> str:
        """The weather in a city."""
        if service_is_down.pop(0):
            raise ConnectionError("the weather service is down")
        return f"sunny in {city}"

    for _ in range(2):
        model = ScriptedModel([[function_call("weather", {"city": "Paris"}, call_id="c1")], [assistant_message("ok")]])
        with journal_scope(DurableJournal(storage)), caplog.at_level(logging.WARNING):
            run_durably_sync(agent(model, tools=[flaky_weather]), "Weather?")
    assert (
        "step=model 'ScriptedModel' at 1.3 reason='it asks something other than the recorded call: "
        "input item 2 differs (counting from 0; the input has 3 items)'" in caplog.text
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [(["Be brief.", "Be brief."], ["Be brief.", "Be kind."]), (["Be brief.", "Be kind."], ["Be brief.", "Be brief."])],
    ids=["recorded-as-the-call-before", "recorded-changed"],
)
def test_a_later_model_call_whose_instructions_changed_is_named_whether_its_entry_stored_them_or_not(
    first, second, caplog
):
    # Format 8: a later model call's entry leaves out the parts its run's call before had the same.
    storage = InMemoryStorage()
    stored_parts = []
    for texts in (first, second):
        calls: list[str] = []

        def instructions(context, agent) -> str:
            # The first model call of the try gets the first text, every later one the second.
            calls.append(texts[min(len(calls), 1)])  # noqa: B023 (each try's own, called within the try)
            return calls[-1]  # noqa: B023

        model = ScriptedModel([[function_call("weather", {"city": "Paris"}, call_id="c1")], [assistant_message("ok")]])
        with journal_scope(DurableJournal(storage)), caplog.at_level(logging.WARNING):
            run_durably_sync(agent(model, instructions=instructions), "Weather?")
        stored_parts.append(set(json.loads(storage.entries["1.3"])["parts"]))
    assert (
        "step=model 'ScriptedModel' at 1.3 reason='it asks something other than the recorded call: "
        "the instructions changed'" in caplog.text
    )
    # What try 1 and try 2 stored at 1.3: the input, and the instructions where they changed since 1.1.
    expected = (
        [{"input"}, {"input", "instructions"}] if first[0] == first[1] else [{"input", "instructions"}, {"input"}]
    )
    assert stored_parts == expected


def test_a_tool_call_asked_with_other_arguments_names_the_argument():
    # Try 1's last answer is discarded (MaxTurnsExceeded): try 2 asks the model again at 1.3, live
    # but not diverged, and its answer asks the tool at 1.4 with another city than recorded.
    storage = InMemoryStorage()
    paris, oslo, rome = (
        [function_call("weather", {"city": "Paris"}, call_id="c1")],
        [function_call("weather", {"city": "Oslo"}, call_id="c2")],
        [function_call("weather", {"city": "Rome", "unit": "C"}, call_id="c3")],
    )
    with journal_scope(DurableJournal(storage)), pytest.raises(MaxTurnsExceeded):
        run_durably_sync(agent(ScriptedModel([paris, oslo])), "Weather?", max_turns=2)
    journal = DurableJournal(storage)
    with journal_scope(journal):
        run_durably_sync(agent(ScriptedModel([rome, [assistant_message("ok")]])), "Weather?", max_turns=3)
    assert journal.stats.divergences == [
        (
            "1.4",
            "tool 'weather' at 1.4",
            "it asks something other than the recorded call: argument 'city' changed; "
            "argument 'unit' was added; the model's call id changed",
        )
    ]


def test_an_entry_of_format_2_has_no_parts_and_diverges_with_the_general_reason():
    storage = InMemoryStorage()
    with journal_scope(DurableJournal(storage)):
        run_durably_sync(agent(ScriptedModel([[assistant_message("ok")]])), "Hi")
    entry = json.loads(storage.entries["1.1"])
    del entry["parts"]
    storage.entries["1.1"] = json.dumps({**entry, "format": 2})
    journal = DurableJournal(storage)
    with journal_scope(journal):
        run_durably_sync(agent(ScriptedModel([[assistant_message("ok")]]), instructions="Other."), "Hi")
    assert journal.stats.divergences[0][2] == (
        "no recorded run starts with this call; the first call of recorded run 1: "
        "it asks something other than the recorded call"
    )


def test_parts_are_short_keyed_digests_that_hold_nothing_of_what_was_asked():
    secret = "PIN 4711"
    parts = model_call_parts(
        {"model": "m", "instructions": secret, "input": [secret], "settings": {"user": secret}, "tools": []}
    )
    rendered = json.dumps(parts) + json.dumps(tool_call_parts("t", json.dumps({"pin": secret}), "c"))
    # Not '"4711" not in rendered': a hex digest holds those four digits now and then.
    assert "PIN" not in rendered

    def values(item):
        if isinstance(item, dict):
            return [v for child in item.values() for v in values(child)]
        if isinstance(item, list):
            return [v for child in item for v in values(child)]
        return [item]

    digests = values(parts) + values(tool_call_parts("t", json.dumps({"pin": secret}), "c"))
    assert all(re.fullmatch(r"[0-9a-f]{12}", digest) for digest in digests), digests
    assert len(parts["instructions"]) == 12
    assert parts["instructions"] == parts["input"][0] == parts["settings"]["user"]


@pytest.mark.parametrize(
    ("recorded", "current", "reason"),
    [
        ({"a": "1"}, {"a": "1"}, None),
        (None, {"a": "1"}, None),
        ({"input": ["1", "2"]}, {"input": "3"}, "the input changed"),
        ({"arguments": "x"}, {"arguments": {"city": "y"}}, "the arguments changed"),
        (
            {"tools": {"a": "1", "b": "2"}},
            {"tools": {"b": "3", "c": "4"}},
            "tool 'b' changed; tool 'c' was added; tool 'a' was removed",
        ),
        ({"future_part": "1"}, {}, "part 'future_part' changed"),
    ],
)
def test_what_changed_reads_any_shape_of_parts(recorded, current, reason):
    assert what_changed(recorded, current) == reason
