"""
Runs that run concurrently (R-12): a retry matches each run of a task with what the runs ask (its
``durable_key``, its input), never with the order they start in. Runs that ask the same and are in
flight together cannot be told apart: they run live on every try, the try's summary counts them
and one warning says to give each its own ``durable_key``; run one after the other, they replay in
their order.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
from agents import Agent, RunContextWrapper, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


class AllStarted:
    """
    The runs of one try, in flight together for sure: each run's first live model call waits until
    every run has made one. Without it, on a loaded machine a run could end before the next one
    started, and runs one after the other replay in their order, as they should.
    """

    def __init__(self, runs: int) -> None:
        self.waiting, self.event = runs, asyncio.Event()

    async def arrive(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), timeout=60)


class Gated(ScriptedModel):
    """A scripted model whose first live call waits at ``gate`` (:class:`AllStarted`)."""

    def __init__(self, steps, gate: AllStarted) -> None:
        super().__init__(steps)
        self.gate: AllStarted | None = gate

    async def get_response(self, *args, **kwargs):
        gate, self.gate = self.gate, None
        if gate is not None:
            await gate.arrive()
        return await super().get_response(*args, **kwargs)


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
        """One try: the customers' runs in flight together, started in ``order``; ``prompt`` gives each its input."""
        models: dict[str, ScriptedModel] = {}

        async def one(customer: str) -> None:
            key = {"durable_key": customer} if keyed else {}
            agent = Agent(name="teller", model=models[customer], tools=[self.balance])
            await run_durably(agent, prompt(customer), context=customer, **key)

        async def together() -> None:
            gate = AllStarted(len(order))
            models.update({customer: Gated(list(steps), gate) for customer in order})
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
        gate = AllStarted(3)
        agents = [Agent(name="a", model=Gated([[assistant_message("hi")]], gate), tools=[noop]) for _ in range(3)]
        await asyncio.gather(*(run_durably(agent, "same prompt") for agent in agents))

    with caplog.at_level(logging.WARNING), journal_scope(DurableJournal(InMemoryStorage())):
        asyncio.run(three())
    assert caplog.text.count("give each its own durable_key") == 1
