"""
Runs of one task that make their calls at once, killed in the middle of one call, on each storage
a worker uses (segments appended on local disk, stored whole in an object store and in the task
state store): the retry replays every call whose result was stored, runs again only the calls the
kill left in flight (their policy, ``rerun`` by default, with the same idempotency key), and
never one twice more (R-4, R-12, R-56).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import defaultdict

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from durable_backends import make_storage
from tries import WorkerDied

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key, run_durably

RUNS, TURNS = 5, 4


@pytest.mark.parametrize("kind", ["file", "fsspec-memory", "task-state-store"])
@pytest.mark.parametrize("seed", range(6))
def test_runs_killed_in_the_middle_of_one_call_replay_what_they_stored_and_rerun_what_was_in_flight(
    kind, seed, tmp_path
):
    # The call the worker dies in: a run and a turn of it, by the seed.
    chance = random.Random(seed)
    killed_in = (chance.randrange(RUNS), chance.randrange(TURNS))
    dying, on_try = True, 1
    lock = threading.Lock()
    # The tries each call ran in, and the idempotency key it ran with.
    ran: defaultdict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)

    @function_tool
    def work(run: int, turn: int) -> str:
        """Does a turn's work."""
        if dying and (run, turn) == killed_in:
            raise WorkerDied()
        with lock:
            ran[(run, turn)].append((on_try, current_idempotency_key()))
        return f"done {run}.{turn}"

    def agent(run: int) -> Agent:
        script = [[function_call("work", {"run": run, "turn": turn}, call_id=f"c{turn}")] for turn in range(TURNS)]
        return Agent(name=f"a{run}", model=ScriptedModel([*script, [assistant_message(f"ok {run}")]]), tools=[work])

    async def runs() -> list:
        return await asyncio.gather(*(run_durably(agent(n), f"go {n}", durable_key=f"run {n}") for n in range(RUNS)))

    storage = make_storage(kind, tmp_path)
    with journal_scope(DurableJournal(storage)), pytest.raises(WorkerDied):
        asyncio.run(runs())
    dying, on_try = False, 2
    # A new worker: a new storage over the same place (the task state store's fake is the one store).
    retry = DurableJournal(storage if kind == "task-state-store" else make_storage(kind, tmp_path))
    with journal_scope(retry):
        results = asyncio.run(runs())

    assert [result.final_output for result in results] == [f"ok {n}" for n in range(RUNS)]
    assert sorted(ran) == [(run, turn) for run in range(RUNS) for turn in range(TURNS)]
    assert all([t for t, _ in tries] in ([1], [2], [1, 2]) for tries in ran.values()), ran
    assert all(len({key for _, key in tries}) == 1 for tries in ran.values()), ran
    # The calls left in flight (marked, then the worker died before their result was stored) ran
    # in try 2 with the same key: the killed one, any that ran in try 1 too, and any the kill
    # stopped before they started, which no try can tell from those that did.
    in_flight = {call["idempotency_key"]: call["outcome"] for call in retry.stats.in_flight}
    assert set(in_flight.values()) == {"ran again with the same idempotency key"}
    key_of = {call: tries[0][1] for call, tries in ran.items()}
    in_try_2 = {call for call, tries in ran.items() if tries[-1][0] == 2}
    twice = {call for call, tries in ran.items() if len(tries) == 2}
    assert {key_of[call] for call in twice | {killed_in}} <= set(in_flight) <= {key_of[call] for call in in_try_2}
    # Every call try 1 ran and stored replayed, and nothing else did.
    assert retry.stats.replayed["tool"] == len(ran) - len(in_try_2)
    assert retry.stats.ran_live["tool"] == len(in_try_2)
