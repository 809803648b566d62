"""A retry never crashes, never replays the wrong thing, and never leaks a secret (issue 7)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from urllib.parse import quote, quote_plus

import pytest
import tries
from agents import (
    Agent,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrailTripwireTriggered,
    function_tool,
    tool_output_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import mask_secret
from tries import WorkerDied

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


class Task(tries.Task):
    prompt = "go"


# Secrets


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


SECRET = 'c0nn "pass\\word"/ü+%'


@pytest.mark.parametrize(
    "encode",
    [
        lambda secret: json.dumps(secret),
        lambda secret: json.dumps(json.dumps({"password": secret})),
        lambda secret: json.dumps(secret, ensure_ascii=True),
        lambda secret: quote(secret),
        lambda secret: quote_plus(secret),
        lambda secret: quote(json.dumps({"password": secret})),
    ],
    ids=["json", "json-in-json", "json-ascii", "url", "url-plus", "json-in-url"],
)
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


# Runs that run concurrently


class Tellers:
    """One teller agent per customer, run together; the customer is in the context, its balance in a tool."""

    balances = {"alice": 100, "bob": 7}

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

        @function_tool
        def balance(context: RunContextWrapper[str]) -> int:
            """The customer's balance."""
            self.calls[context.context] += 1
            return self.balances[context.context]

        self.balance = balance

    def attempt(
        self, journal: DurableJournal, order: list[str], *steps, prompt, keyed: bool
    ) -> dict[str, ScriptedModel]:
        """One try: the customers' runs started together in ``order``; ``prompt`` gives each its input."""
        models = {customer: scripted(*steps) for customer in order}

        async def one(customer: str) -> None:
            key = {"durable_key": customer} if keyed else {}
            agent = Agent(name="teller", model=models[customer], tools=[self.balance])
            await run_durably(agent, prompt(customer), context=customer, **key)

        async def together() -> None:
            await asyncio.gather(*(one(customer) for customer in order), return_exceptions=True)

        with journal_scope(journal):
            asyncio.run(together())
        return models


@pytest.mark.parametrize("keyed", [True, False], ids=["durable_key", "different-prompts"])
def test_concurrent_runs_are_matched_by_what_they_ask_not_by_the_order_they_start_in(keyed):
    tellers = Tellers()

    def prompt(customer: str) -> str:
        return "What is my balance?" if keyed else f"What is {customer}'s balance?"

    storage = InMemoryStorage()
    first = [function_call("balance", {}, call_id="c1")]
    tellers.attempt(DurableJournal(storage), ["alice", "bob"], first, RuntimeError(), prompt=prompt, keyed=keyed)
    assert tellers.calls == {"alice": 1, "bob": 1}

    # The retry starts them the other way round; each replays its own balance.
    journal = DurableJournal(storage)
    # Only the final answer is live.
    models = tellers.attempt(journal, ["bob", "alice"], [assistant_message("ok")], prompt=prompt, keyed=keyed)
    assert tellers.calls == {"alice": 1, "bob": 1}  # no tool ran again
    for customer, model in models.items():
        # Only the final request is live, and it carries the customer's own recorded balance.
        assert len(model.calls) == 1
        assert model.calls[0].input[-1]["output"] == str(Tellers.balances[customer])
    assert journal.stats.replayed == {"model": 2, "tool": 2}


@pytest.mark.parametrize("retry_order", [["bob", "alice"], ["alice", "bob"]], ids=["swapped", "same-order"])
def test_identical_runs_in_flight_together_without_a_durable_key_never_replay_each_others_results(retry_order, caplog):
    tellers = Tellers()

    def prompt(customer: str) -> str:
        return "My balance?"

    storage = InMemoryStorage()
    first_try = DurableJournal(storage)
    asks = [function_call("balance", {}, call_id="c1")]
    tellers.attempt(first_try, ["alice", "bob"], asks, RuntimeError(), prompt=prompt, keyed=False)
    assert tellers.calls == {"alice": 1, "bob": 1}
    assert "2 runs ran live that ask the same as another run in flight" in first_try.stats.summary()

    for retry in (1, 2):  # every later try too: the retry's entries are as indistinct as the first's
        journal = DurableJournal(storage)
        with caplog.at_level(logging.WARNING):
            models = tellers.attempt(journal, retry_order, asks, [assistant_message("ok")], prompt=prompt, keyed=False)
        assert tellers.calls == {"alice": 1 + retry, "bob": 1 + retry}
        for customer, model in models.items():
            assert len(model.calls) == 2  # nothing replayed
            assert model.calls[1].input[-1]["output"] == str(Tellers.balances[customer])
        assert journal.stats.replayed == {}
        assert "durable_key" in journal.stats.summary() and journal.stats.indistinct_runs == 2
        assert "give each its own durable_key" in caplog.text


def test_identical_runs_one_after_the_other_still_replay_in_their_order():
    task_runs = Counter()

    @function_tool
    def count() -> int:
        """Counts."""
        task_runs["count"] += 1
        return task_runs["count"]

    def attempt(journal: DurableJournal, *models: ScriptedModel) -> None:
        with journal_scope(journal):
            for model in models:
                run_durably_sync(Agent(name="a", model=model, tools=[count]), "same prompt")

    storage = InMemoryStorage()
    first, second = (
        scripted([function_call("count", {}, call_id="c1")], [assistant_message("one")]),
        scripted([function_call("count", {}, call_id="c1")], RuntimeError()),
    )
    with pytest.raises(RuntimeError):
        attempt(DurableJournal(storage), first, second)
    journal = DurableJournal(storage)
    again, last = scripted(), scripted([assistant_message("two")])
    attempt(journal, again, last)
    assert task_runs["count"] == 2 and not again.calls and len(last.calls) == 1
    assert last.calls[0].input[-1]["output"] == "2"
    assert journal.stats.replayed == {"model": 3, "tool": 2} and journal.stats.indistinct_runs == 0


def test_identical_runs_started_concurrently_without_a_durable_key_warn_once(caplog):
    @function_tool
    def noop() -> str:
        """Does nothing."""
        return "ok"

    async def three():
        agents = [Agent(name="a", model=scripted([assistant_message("hi")]), tools=[noop]) for _ in range(3)]
        await asyncio.gather(*(run_durably(agent, "same prompt") for agent in agents))

    with caplog.at_level(logging.WARNING), journal_scope(DurableJournal(InMemoryStorage())):
        asyncio.run(three())
    assert caplog.text.count("give each its own durable_key") == 1


@pytest.mark.parametrize("bad", ["", "  ", 7, b"alice"])
def test_a_durable_key_that_is_not_a_non_empty_string_is_refused_before_anything_runs(bad):
    model = scripted([assistant_message("hi")])
    with pytest.raises(ValueError, match="durable_key must be a non-empty string"):
        run_durably_sync(Agent(name="a", model=model), "hi", durable_key=bad)
    assert not model.calls


# Nothing crashes a retry


def weather_task_that_fails_after_the_tool(output, runs: Counter) -> tuple[Task, object]:
    @function_tool
    def produce() -> object:
        """Produces something."""
        runs["produce"] += 1
        return output

    task = Task()
    task.failing_attempt(
        Agent(name="a", model=scripted([function_call("produce", {}, call_id="c1")], RuntimeError()), tools=[produce]),
        RuntimeError,
    )
    return task, produce


def deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "output",
    ["lone \ud800 surrogate", deep_list(900), {"nested": deep_list(900)}],
    ids=["lone-surrogate", "900-deep", "900-deep-in-a-dict"],
)
def test_an_output_the_plain_sdk_accepts_runs_durably_on_every_try(output, no_collection_at_depth):
    runs = Counter()
    task, produce = weather_task_that_fails_after_the_tool(output, runs)
    second = scripted([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[produce]))
    # The tool either replayed or ran again, named as not recorded: nothing crashed.
    assert len(second.calls) == 1
    assert runs["produce"] == 1 or task.journal.stats.not_recorded
    third = scripted([assistant_message("done")])
    task.attempt(Agent(name="a", model=third, tools=[produce]))
    assert len(third.calls) <= 1


@pytest.mark.parametrize(
    "damage",
    ["[" * 100_000, '{"format": 2, "result": ' + "[" * 100_000 + "]" * 100_000 + "}", "\ud800", "null"],
    ids=["deep-unclosed", "deep-closed", "surrogate", "null"],
)
def test_an_entry_that_cannot_be_read_runs_live_and_is_overwritten_so_later_tries_and_clears_do_not_crash(damage):
    runs = Counter()
    task, produce = weather_task_that_fails_after_the_tool("value", runs)
    task.storage.entries["1.1"] = damage
    second = scripted([function_call("produce", {}, call_id="c1")], [assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[produce]))
    assert len(second.calls) == 2 and runs["produce"] == 2
    task.journal.delete()
    assert task.storage.entries == {}


# Tool output guardrails (R-10, like R-15)


def test_a_tool_output_guardrail_that_tripped_makes_the_tool_run_again_while_the_answer_replays():
    runs = Counter()
    outputs = iter(["SECRET-LEAK", "clean"])

    @tool_output_guardrail
    def no_leaks(data) -> ToolGuardrailFunctionOutput:
        if "LEAK" in str(data.output):
            return ToolGuardrailFunctionOutput.raise_exception(output_info="leak")
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_output_guardrails=[no_leaks])
    def fetch() -> str:
        """Fetches."""
        runs["fetch"] += 1
        return next(outputs)

    task = Task()
    first = scripted([function_call("fetch", {}, call_id="c1")], [assistant_message("never")])
    task.failing_attempt(Agent(name="a", model=first, tools=[fetch]), ToolOutputGuardrailTripwireTriggered)
    second = scripted([assistant_message("done")])
    result = task.attempt(Agent(name="a", model=second, tools=[fetch]))
    assert result.final_output == "done"
    assert runs["fetch"] == 2  # the tripped output was not replayed
    assert len(second.calls) == 1  # the answer that asked for the tool replayed
    assert task.journal.stats.replayed == {"model": 1}


# Failure marks and clean-up (issue 8's defects)


def test_a_tool_that_failed_cleanly_is_marked_failed_and_the_retry_does_not_call_it_interrupted(caplog):
    runs = Counter()

    @function_tool
    def flaky() -> str:
        """Fails the first time."""
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise ValueError("temporary")
        return "ok"

    task = Task()
    first = scripted([function_call("flaky", {}, call_id="c1")], RuntimeError("outage"))
    task.failing_attempt(Agent(name="a", model=first, tools=[flaky]), RuntimeError)
    assert json.loads(task.storage.entries["1.2"])["state"] == "failed"

    second = scripted([assistant_message("done")])
    with caplog.at_level(logging.INFO):
        task.attempt(Agent(name="a", model=second, tools=[flaky]))
    assert runs["flaky"] == 2
    assert "never finished" not in caplog.text and "idempotency_key" not in caplog.text
    assert "it failed on an earlier try" in caplog.text


def test_clean_up_key_by_key_removes_the_stale_nested_runs_of_an_older_try():
    class ListingLessStorage(InMemoryStorage):
        """Deletes key by key, as the task state store must."""

        def delete_all(self, keys):
            for key in list(keys):
                self.entries.pop(key, None)

    inner_runs = Counter()

    def delegate_tool(inner_prompts: list[str], fail: bool):
        @function_tool
        async def delegate() -> str:
            """Asks two helpers."""
            for prompt in inner_prompts:
                inner_runs[prompt] += 1
                await run_durably(Agent(name="helper", model=scripted([assistant_message("fine")])), prompt)
            if fail:
                raise WorkerDied("the worker died after the nested runs")
            return "done"

        return delegate

    task = Task(ListingLessStorage())
    # Try 1: the tool starts two nested runs, then the try dies.
    tool = delegate_tool(["first", "second"], fail=True)
    task.failing_attempt(
        Agent(
            name="a",
            model=scripted([function_call("delegate", {}, call_id="c1")]),
            tools=[tool],
            tool_use_behavior="stop_on_first_tool",
        ),
        WorkerDied,
    )
    assert {"1.2.1.1", "1.2.2.1"} <= set(task.storage.entries)
    # Try 2: the tool starts one nested run, which matches the first; the second is stale.
    tool = delegate_tool(["first"], fail=False)
    task.attempt(
        Agent(
            name="a",
            model=scripted([function_call("delegate", {}, call_id="c1")]),
            tools=[tool],
            tool_use_behavior="stop_on_first_tool",
        ),
    )
    assert "1.2.2.1" in task.storage.entries
    task.journal.finish(succeeded=True)
    assert task.storage.entries == {}
