"""
The journal grows with the run, not with its square (issue 20): a model call stores and computes
only what its run's conversation added since the call before it, and still names the first input
item that changed.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from agents import Agent, HandoffInputData, function_tool, handoff
from agents.extensions.handoff_filters import remove_all_tools
from agents.items import ItemHelpers
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import mask_secret

from airflow.providers.common.ai.durable.core import divergence
from airflow.providers.common.ai.durable.core.divergence import ModelCalls, model_call_parts, what_changed
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

KEY = "o0n0kq3Zk4mFJm0nQ8m2Xv5yq8cGq9m0b1xk3P2m4zU="


def request(items: list[Any], **overrides: Any) -> dict[str, Any]:
    return {
        "model": "gpt",
        "instructions": "Be brief.",
        "input": items,
        "settings": {"temperature": 0.2},
        "tools": [{"name": "lookup", "description": "Looks up."}],
        "output_schema": None,
        "handoffs": [],
        "prompt": None,
        **overrides,
    }


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("key", [KEY, ""], ids=["fernet-key", "no-fernet-key"])
def test_each_calls_fingerprint_is_the_fingerprint_of_its_whole_request_however_the_conversation_goes(key, fernet_key):
    fernet_key(key)
    mask_secret("conversation-secret-77")
    a, b, c, d = user("a"), user("b \u00fc \ud800"), user("conversation-secret-77"), user('"d"\\')
    calls = [
        request([a]),
        request([a, b]),  # appended
        request([a, b, c, d]),
        request([a, b, c, d], instructions="Other."),  # the same input, other parts
        request([a, b, c, d], handoffs=[{"name": "transfer"}]),  # what comes before the input changed
        request([a, d]),  # rewritten from item 1 (a handoff's input filter)
        request([a, d, b]),
        request([]),
        request("a string input"),
        request([a, b]),
        request([b, a], tools=[{"name": "other"}]),
    ]
    model_calls = ModelCalls()
    for call in calls:
        assert model_calls.fingerprint_and_parts(call, what="a call")[0] == fingerprint(call)


def recorded_run(turns: int) -> InMemoryStorage:
    """A run of ``turns`` turns of one model call and one tool call, and a final answer."""

    @function_tool
    def lookup(i: int) -> str:
        """Looks item i up."""
        return f"item {i}"

    steps = [[function_call("lookup", {"i": i}, call_id=f"call_{i}")] for i in range(turns)]
    storage = InMemoryStorage()
    with journal_scope(DurableJournal(storage)):
        agent = Agent(name="a", instructions="Look up.", model=ScriptedModel([*steps, [assistant_message("done")]]))
        run_durably_sync(agent.clone(tools=[lookup]), "go", max_turns=turns + 2)
    return storage


def test_the_stored_size_of_a_step_does_not_grow_with_the_number_of_earlier_turns():
    storage = recorded_run(40)
    model_steps = {int(key.split(".")[1]): text for key, text in storage.entries.items() if '"kind":"model"' in text}
    tool_steps = [text for text in storage.entries.values() if '"kind":"tool"' in text]
    assert len(model_steps) == 41 and len(tool_steps) == 40
    # Turns 2 to 40 store the same fields; only numbers ("from", "i", the call ids) gain a digit.
    # (Format 3 stored 15 bytes more a turn: two more item digests.)
    sizes = [len(model_steps[position]) for position in range(3, 80, 2)]
    assert max(sizes) - min(sizes) <= 6, sizes
    assert max(map(len, tool_steps)) - min(map(len, tool_steps)) <= 3
    last = json.loads(model_steps[79])["parts"]["input"]
    assert last["from"] == 77 and len(last["added"]) == 2  # the user's prompt and 2 items a turn before


def test_each_input_item_is_rendered_and_masked_once_per_run(monkeypatch):
    rendered = Counter()
    rendered_and_masked = divergence.rendered_and_masked

    def counted(value: Any) -> tuple[str, str]:
        texts = rendered_and_masked(value)
        rendered[texts[0]] += 1
        return texts

    monkeypatch.setattr(divergence, "rendered_and_masked", counted)
    model_calls = ModelCalls()
    items = [user("go")]
    renderings_per_call = []
    for turn in range(30):
        before = rendered.total()
        model_calls.fingerprint_and_parts(request(list(items)), what="a call")
        renderings_per_call.append(rendered.total() - before)
        items += [
            {"type": "function_call", "call_id": f"c{turn}"},
            {"type": "function_call_output", "output": f"x{turn}"},
        ]
    # The first call renders each part and its item; every later one its two new items only.
    assert renderings_per_call[2:] == [2] * 28
    assert [count for text, count in rendered.items() if '"type":"function_call' in text] == [
        1
    ] * 58  # all but the last turn's


def test_a_format_3_entry_that_held_every_input_digest_is_compared_item_by_item():
    items = [user("a"), user("b"), user("c"), user("d")]
    format_3 = model_call_parts(request(items))  # every item's digest, as format 3 stored it
    model_calls = ModelCalls()
    model_calls.fingerprint_and_parts(request(items[:2]), what="a call")
    _, parts = model_calls.fingerprint_and_parts(request([*items[:2], user("C"), items[3]]), what="a call")
    assert parts["input"]["from"] == 2
    assert what_changed(format_3, parts) == "input item 2 differs (counting from 0; the input has 4 items)"
    _, same = ModelCalls().fingerprint_and_parts(request(items), what="a call")
    assert what_changed(format_3, same) is None


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def edit_the_tool_call(data: HandoffInputData) -> HandoffInputData:
    """Keeps the history but for the first tool call's arguments."""
    history = ItemHelpers.input_to_new_input_list(data.input_history)
    items = [*history, *(item.to_input_item() for item in data.pre_handoff_items)]
    items[1] = {**items[1], "arguments": '{"city": "Oslo"}'}
    return data.clone(input_history=tuple(items), pre_handoff_items=(), new_items=data.new_items)


@pytest.mark.parametrize(
    ("input_filter", "reason"),
    [
        (remove_all_tools, "the input has 1 item where the recorded call had 5, the first 1 the same"),
        (edit_the_tool_call, "input item 1 differs (counting from 0; the input has 5 items)"),
    ],
    ids=["history-cut", "history-edited"],
)
def test_a_handoff_that_rewrites_the_history_names_the_first_input_item_that_differs(input_filter, reason):
    # The retry hands off with an input filter: the agent handed to asks with another history than
    # recorded, not one appended to its run's call before (which replays).
    storage = InMemoryStorage()
    for filtered in (False, True):
        billing = Agent(name="billing", model=ScriptedModel([[assistant_message("Billed.")]]))
        transfer = handoff(billing, input_filter=input_filter) if filtered else handoff(billing)
        steps = [
            [function_call("weather", {"city": "Paris"}, call_id="c1")],
            [function_call("transfer_to_billing", {}, call_id="h1")],
        ]
        triage = Agent(name="triage", model=ScriptedModel(steps), tools=[weather], handoffs=[transfer])
        journal = DurableJournal(storage)
        with journal_scope(journal):
            run_durably_sync(triage, "Weather, then billing.")
    assert journal.stats.replayed == {"model": 2, "tool": 1}
    assert [reason for _, _, reason in journal.stats.divergences] == [
        f"it asks something other than the recorded call: {reason}"
    ]


def test_a_recorded_input_whose_kept_items_match_none_of_this_calls_says_before_which_item_it_differs():
    model_calls = ModelCalls()
    model_calls.fingerprint_and_parts(request([user("a"), user("b")]), what="a call")
    _, parts = model_calls.fingerprint_and_parts(request([user("a"), user("b"), user("c")]), what="a call")
    recorded = {**parts, "input": {"from": 1, "prefix": "not-a-prefix", "added": ["x", "y"]}}
    assert what_changed(recorded, parts) == "the input differs before item 1 (counting from 0; the input has 3 items)"
