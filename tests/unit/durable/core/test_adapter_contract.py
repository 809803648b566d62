"""
The adapter contract (``core/adapter.py``) pinned by a toy adapter written against it alone, on the
core's plain host (no Airflow, no agent SDK): a journal found through the host, a run, claimed
steps replayed or recorded, the idempotency key, a call marked in flight, and the budget asked
before each live model call and settled after.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from airflow.providers.common.ai.durable.core.adapter import admitted_by_budget, current_idempotency_key, settled
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.host import PLAIN_HOST, hosting
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import current_journal
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.core.usage import ModelUsage


class Killed(BaseException):
    """The worker dies inside the tool: nothing after it runs, as under SIGKILL."""


class ToyFramework:
    """A framework's calls to the world: a model that answers, a tool with a side effect."""

    def __init__(self, fail_after_tool: bool = False, die_in_tool: bool = False) -> None:
        self.model_calls: list[str] = []
        self.tool_calls: list[tuple[str, str]] = []
        self.fail_after_tool, self.die_in_tool = fail_after_tool, die_in_tool

    def model(self, prompt: str) -> str:
        self.model_calls.append(prompt)
        return f"send {prompt!r}"

    def send(self, text: str) -> str:
        self.tool_calls.append((text, current_idempotency_key()))
        if self.die_in_tool:
            raise Killed
        return f"sent {text}"


async def toy_adapter_run(framework: ToyFramework, prompt: str) -> str:
    """What an adapter does around one agent run, with only the names the contract gives it."""
    journal = current_journal()
    assert journal is not None
    with journal.run() as run:
        step = run.claim("model", "toy-model", fingerprint([prompt]))
        if step.replayed:
            answer = step.result
            step.handed_out()
        else:
            admission = await admitted_by_budget(journal, "toy-model", step.key, None)
            with step.running():
                answer = framework.model(prompt)
            settled(
                admission, ModelUsage.of_call("toy-model", requests=1, input_tokens=3, output_tokens=2, total_tokens=5)
            )
            step.record(answer)
        step = run.claim("tool", "send", fingerprint({"text": answer}))
        if step.replayed:
            sent = step.result
            step.handed_out()
        else:
            with step.running(mark_in_flight=True):
                sent = framework.send(answer)
            step.record(sent)
        if framework.fail_after_tool:
            raise ConnectionError("the framework's next request failed")
        return sent


def try_of(
    storage: InMemoryStorage,
    number: int,
    framework: ToyFramework,
    budget: UsageBudget | None = None,
    prompt: str = "hello",
) -> str:
    journal = DurableJournal(storage, host=PLAIN_HOST.for_try(number))
    host = dataclasses.replace(PLAIN_HOST, journal_of_running_task=lambda: journal)
    with hosting(host):
        if budget is not None:
            journal.use_budget(budget)
        return asyncio.run(toy_adapter_run(framework, prompt))


def test_a_toy_adapter_written_against_the_contract_alone_replays_a_failed_trys_calls_with_the_same_key():
    storage = InMemoryStorage()
    first = ToyFramework(fail_after_tool=True)
    with pytest.raises(ConnectionError):
        try_of(storage, 1, first)
    assert first.model_calls == ["hello"]
    [(text, key)] = first.tool_calls

    second = ToyFramework()
    assert try_of(storage, 2, second) == f"sent {text}"
    assert (second.model_calls, second.tool_calls) == ([], [])  # both replayed, nothing ran again
    assert key.startswith("durable-")


def test_a_tool_call_the_worker_died_in_runs_again_on_the_next_try_with_the_same_idempotency_key():
    storage = InMemoryStorage()
    first = ToyFramework(die_in_tool=True)
    with pytest.raises(Killed):
        try_of(storage, 1, first)
    second = ToyFramework()
    try_of(storage, 2, second)
    assert second.model_calls == []  # the model call replays
    assert [key for _, key in second.tool_calls] == [key for _, key in first.tool_calls]  # the tool again, same key


def test_the_budget_the_contract_asks_before_a_live_model_call_counts_every_try_and_refuses_before_sending():
    storage, budget = InMemoryStorage(), UsageBudget(max_requests=1)
    with pytest.raises(ConnectionError):
        try_of(storage, 1, ToyFramework(fail_after_tool=True), budget)
    # Try 2 asks something else: its model call is live, and try 1 spent the one request allowed.
    framework = ToyFramework()
    with pytest.raises(PLAIN_HOST.failing_error, match="request"):
        try_of(storage, 2, framework, budget, prompt="bonjour")
    assert framework.model_calls == []  # refused before it was sent


def test_the_idempotency_key_is_refused_outside_a_tool_call_of_a_durable_run():
    with pytest.raises(RuntimeError, match="only works inside"):
        current_idempotency_key()
