"""
No secret reaches the store in what a step records (R-25): a secret the masker knows is masked in
a recorded answer or tool output in whatever escaped or encoded form it takes there, and a step
recorded masked is never replayed as ``***``: its call runs again, and a tool call it asked for
reaches the tool with the real secret.
"""

from __future__ import annotations

import json
from collections import Counter
from urllib.parse import quote, quote_plus

import pytest
import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import mask_secret
from secret_forms import ENCODINGS, SECRET

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


class Task(tries.Task):
    prompt = "go"


@pytest.mark.parametrize(
    "password",
    ['pa"ss\\word-4711', "p@ss w/rd&x=1%2F", "plain-secret-4711"],
    ids=["json-escaped", "url-encoded", "plain"],
)
def test_a_tool_call_whose_arguments_held_a_secret_reaches_the_tool_with_the_real_secret_on_retry(password):
    mask_secret(password)
    received: list[str] = []

    @function_tool
    def log_in(user: str, password: str) -> str:
        """Logs in."""
        received.append(password)
        return "logged in"

    task = Task()
    answer = function_call("log_in", {"user": "ops", "password": password}, call_id="c1")
    first = scripted([answer], RuntimeError("provider outage"))
    task.failing_attempt(Agent(name="a", model=first, tools=[log_in]), RuntimeError)
    stored = json.dumps(task.storage.entries, ensure_ascii=False)
    # Not in plain, not JSON-escaped (as in the arguments string), not URL-encoded.
    for form in {password, json.dumps(password)[1:-1], quote(password), quote_plus(password)}:
        assert form not in stored, form

    second = scripted([answer], [assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[log_in]))
    # The answer that held the secret was stored masked: it is asked again, never replayed as ***;
    # the tool call it asks for is the recorded one (the real arguments' fingerprint), so it replays.
    assert len(second.calls) == 2
    assert received == [password]
    assert task.journal.stats.replayed == {"tool": 1}
    assert any("held a secret" in line for line in task.journal.stats.not_recorded)


def test_a_secret_url_encoded_inside_a_tool_output_is_masked_and_the_tool_runs_again():
    mask_secret("t0ken/with+plus")
    runs = Counter()

    @function_tool
    def callback_url() -> str:
        """Returns the URL to call back."""
        runs["callback_url"] += 1
        return "https://example.com/cb?token=t0ken%2Fwith%2Bplus&x=1"

    task = Task()
    task.failing_attempt(
        Agent(
            name="a",
            model=scripted([function_call("callback_url", {}, call_id="c1")], RuntimeError()),
            tools=[callback_url],
        ),
        RuntimeError,
    )
    assert "t0ken%2Fwith%2Bplus" not in json.dumps(task.storage.entries)
    task.attempt(Agent(name="a", model=scripted([assistant_message("ok")]), tools=[callback_url]))
    assert runs["callback_url"] == 2


@ENCODINGS
def test_a_secret_in_an_escaped_or_encoded_form_never_reaches_storage_and_the_step_is_not_replayed(encode):
    mask_secret(SECRET)
    storage = InMemoryStorage()
    with DurableJournal(storage).run() as run:
        step = run.claim("tool", "config", "f")
        assert not step.record({"text": f"the config is {encode(SECRET)} and more"})
    stored = storage.entries["1.1"]
    assert json.loads(stored)["state"] == "masked"
    for form in (SECRET, encode(SECRET), json.dumps(SECRET)[1:-1], quote(SECRET), quote_plus(SECRET)):
        assert form not in stored and form not in json.loads(stored)["result"]["text"]
    with DurableJournal(storage).run() as run:
        assert not run.claim("tool", "config", "f").replayed
