"""
The journal of one task instance at the core (R-8): each try replays what an earlier one
completed and runs the rest live, numbers its runs and steps, masks and records what a call
returned, marks a call in flight, and is deleted when the task succeeds. A few tests run the
OpenAI adapter end to end, for what a try leaves for the next: an entry that cannot be read, a
call that failed, the stale nested runs of an older try.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections import Counter

import pytest
import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import WorkerDied

from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import current_journal, journal_scope, running_step
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably


class Agentish:
    """Runs a scripted list of calls through a journal, counting the ones that really ran."""

    def __init__(self) -> None:
        self.live_calls: Counter[str] = Counter()

    def call(self, run, kind: str, name: str, request, result=None, *, fail: bool = False):
        step = run.claim(kind, name, fingerprint(request))
        if step.replayed:
            return step.result
        with step.running(mark_in_flight=kind == "tool"):
            self.live_calls[name] += 1
            if fail:
                raise RuntimeError(f"{name} failed")
            value = result if result is not None else f"{name} answered {request}"
        step.record(value, meta={"tokens": 10} if kind == "model" else None)
        return value


def three_calls(agent: Agentish, journal: DurableJournal, *, prompt: str = "hello", fail_at: str | None = None):
    with journal.run() as run:
        answer = agent.call(run, "model", "gpt", [prompt])
        weather = agent.call(run, "tool", "weather", {"city": "Paris"}, fail=fail_at == "weather")
        return agent.call(run, "model", "gpt", [prompt, answer, weather], fail=fail_at == "final")


def test_a_retry_replays_what_the_failed_try_completed_and_runs_only_the_rest_live():
    storage = InMemoryStorage()
    first = Agentish()
    with pytest.raises(RuntimeError):
        three_calls(first, DurableJournal(storage), fail_at="final")
    assert first.live_calls == {"gpt": 2, "weather": 1}

    second, journal = Agentish(), DurableJournal(storage)
    output = three_calls(second, journal)

    assert second.live_calls == {"gpt": 1}
    assert output == str(["hello", "gpt answered ['hello']", "weather answered {'city': 'Paris'}"]).join(
        ("gpt answered ", "")
    )
    assert journal.stats.replayed == {"model": 1, "tool": 1}
    assert journal.stats.tokens_saved == 10


def test_the_first_call_that_differs_runs_live_with_every_call_after_it_and_replaces_the_stale_entries(caplog):
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage))

    changed = Agentish()
    with caplog.at_level(logging.WARNING):
        three_calls(changed, DurableJournal(storage), prompt="bonjour")
    assert changed.live_calls == {"gpt": 2, "weather": 1}
    # The run matches no recorded run by its first call: it takes a new number, and says why.
    assert "run diverged" in caplog.text and "model 'gpt' at 2.1" in caplog.text
    assert "no recorded run starts with this call" in caplog.text

    again = Agentish()
    three_calls(again, DurableJournal(storage), prompt="bonjour")
    assert again.live_calls == {}


def test_a_call_after_a_changed_one_runs_live_even_if_it_asks_the_same():
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage))

    journal, agent = DurableJournal(storage), Agentish()
    with journal.run() as run:
        agent.call(run, "model", "gpt", ["something else"])
        agent.call(run, "tool", "weather", {"city": "Paris"})
    assert agent.live_calls == {"gpt": 1, "weather": 1}


def test_an_entry_left_by_a_longer_older_try_is_never_taken_for_a_step_after_a_changed_one():
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage))  # positions 1..3
    with DurableJournal(storage).run() as run:  # a try that changed position 1 and died after it
        Agentish().call(run, "model", "gpt", ["other"])

    journal, agent = DurableJournal(storage), Agentish()
    with journal.run() as run:
        agent.call(run, "model", "gpt", ["other"])
        agent.call(run, "tool", "weather", {"city": "Paris"})  # position 2 was recorded after the old 1
    assert agent.live_calls == {"weather": 1}


def test_a_stale_entry_of_an_older_longer_try_never_replays_after_a_changed_step_even_where_its_call_coincides():
    storage = InMemoryStorage()

    def calls(agent: Agentish, journal: DurableJournal, second_city: str, *, die_at_third: bool = False) -> None:
        with journal.run() as run:
            agent.call(run, "model", "gpt", ["plan"])
            agent.call(run, "tool", "weather", {"city": second_city})
            step = run.claim("tool", "book", fingerprint({"seat": "1A"}))
            with step.running(mark_in_flight=True):
                agent.live_calls["book"] += 1
                if die_at_third:
                    raise WorkerDied
            step.record("booked 1A")
            # Numbered call ids make the next call coincide with the one try 1 recorded here.
            agent.call(run, "tool", "charge", {"amount": 5, "call_id": "call_4"})
            agent.call(run, "model", "gpt", ["plan", "done"])

    calls(Agentish(), DurableJournal(storage), "Paris")  # try 1 records positions 1..5
    with pytest.raises(WorkerDied):  # try 2 changes position 2 and dies in the call at 3
        calls(Agentish(), DurableJournal(storage), "Lyon", die_at_third=True)

    third, journal = Agentish(), DurableJournal(storage)
    calls(third, journal, "Lyon")
    # 1 and 2 replay (2 as try 2 recorded it); 3 was cut off; try 1's 4 and 5 followed another 2.
    assert third.live_calls == {"book": 1, "charge": 1, "gpt": 1}
    assert journal.stats.replayed == {"model": 1, "tool": 1}
    assert [key for key, _, _ in journal.stats.divergences] == ["1.4"]


@pytest.mark.parametrize(
    "damage",
    ["{not json", '"a string"', json.dumps({"format": 99, "state": "done"})],
    ids=["corrupt", "not-an-object", "unknown-format"],
)
def test_a_recorded_entry_that_cannot_be_read_runs_live_with_every_call_after_it(damage, caplog):
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage))
    storage.entries["1.2"] = damage

    agent = Agentish()
    with caplog.at_level(logging.WARNING):
        three_calls(agent, DurableJournal(storage))
    assert agent.live_calls == {"weather": 1, "gpt": 1}
    assert "tool 'weather' at 1.2" in caplog.text


def test_a_tool_call_that_failed_is_not_recorded_and_runs_again_on_retry():
    storage = InMemoryStorage()
    with pytest.raises(RuntimeError):
        three_calls(Agentish(), DurableJournal(storage), fail_at="weather")

    agent = Agentish()
    three_calls(agent, DurableJournal(storage))
    assert agent.live_calls == {"weather": 1, "gpt": 1}


def test_a_call_interrupted_mid_run_is_found_in_flight_with_its_start_and_the_same_idempotency_key():
    storage = InMemoryStorage()
    keys = []
    with DurableJournal(storage).run() as run:
        step = run.claim("tool", "send_mail", fingerprint({"to": "ops"}))
        with step.running(mark_in_flight=True):
            keys.append(running_step().idempotency_key)
        # the worker dies here: no record()

    with DurableJournal(storage).run() as run:
        step = run.claim("tool", "send_mail", fingerprint({"to": "ops"}))
        keys.append(step.idempotency_key)
    assert step.interrupted and not step.replayed
    assert keys[0] == keys[1]
    # When it started, for the person a policy of "ask" asks (UTC, to the second).
    assert datetime.datetime.fromisoformat(step.meta["started"]).tzinfo == datetime.timezone.utc


def test_idempotency_keys_differ_between_positions_and_task_instances():
    def key(identity, position):
        with DurableJournal(InMemoryStorage(identity)).run() as run:
            steps = [run.claim("tool", "t", "f") for _ in range(position)]
        return steps[-1].idempotency_key

    assert len({key("a", 1), key("a", 2), key("b", 1)}) == 3


def test_a_result_that_is_not_json_is_named_in_the_log_and_runs_again_while_the_rest_replays(caplog):
    storage = InMemoryStorage()
    journal = DurableJournal(storage)
    with journal.run() as run:
        Agentish().call(run, "model", "gpt", ["a"])
        step = run.claim("tool", "make_set", fingerprint({}))
        with caplog.at_level(logging.WARNING):
            assert step.record({1, 2}) is False
        Agentish().call(run, "model", "gpt", ["b"])
    assert "tool 'make_set' at 1.2" in caplog.text
    assert "could not record 1 (tool 'make_set' at 1.2" in journal.stats.summary()

    agent = Agentish()
    with DurableJournal(storage).run() as run:
        agent.call(run, "model", "gpt", ["a"])
        agent.call(run, "tool", "make_set", {})
        agent.call(run, "model", "gpt", ["b"])
    assert agent.live_calls == {"make_set": 1}


def test_a_write_the_store_refuses_leaves_what_was_recorded_intact():
    class RefusingStorage(InMemoryStorage):
        refuse = False

        def write(self, key, text):
            if self.refuse:
                raise OSError("quota exceeded")
            super().write(key, text)

    storage = RefusingStorage()
    three_calls(Agentish(), DurableJournal(storage))
    recorded = dict(storage.entries)

    storage.refuse = True
    journal = DurableJournal(storage)
    three_calls(Agentish(), journal, prompt="changed")
    assert storage.entries == recorded
    assert len(journal.stats.not_recorded) == 3
    assert "quota exceeded" in journal.stats.not_recorded[0]


def test_a_value_that_cannot_be_fingerprinted_runs_live_and_warns(caplog):
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage))
    with caplog.at_level(logging.WARNING), DurableJournal(storage).run() as run:
        step = run.claim("model", "gpt", fingerprint(object(), what="model 'gpt'"))
    assert not step.replayed
    assert "cannot fingerprint model 'gpt'" in caplog.text


def test_runs_are_numbered_in_start_order_and_each_replays_on_its_own():
    storage = InMemoryStorage()
    first = Agentish()
    journal = DurableJournal(storage)
    three_calls(first, journal, prompt="one")
    with pytest.raises(RuntimeError):
        three_calls(first, journal, prompt="two", fail_at="final")
    assert {key.split(".")[0] for key in storage.entries} == {"1", "2"}

    second = Agentish()
    journal = DurableJournal(storage)
    three_calls(second, journal, prompt="one")
    three_calls(second, journal, prompt="two")
    assert second.live_calls == {"gpt": 1}


def test_a_run_started_inside_a_step_is_journaled_under_it_and_replays_when_that_step_reruns():
    storage = InMemoryStorage()

    def outer(agent, *, fail: bool):
        journal = DurableJournal(storage)
        with journal.run() as run:
            agent.call(run, "model", "gpt", ["plan"])
            step = run.claim("tool", "research", fingerprint({"q": "x"}))
            if step.replayed:
                return step.result
            with step.running(mark_in_flight=True):
                inner = three_calls(agent, journal, prompt="research x")
                if fail:
                    raise RuntimeError("worker lost")
            step.record(inner)
            return inner

    first = Agentish()
    with pytest.raises(RuntimeError):
        outer(first, fail=True)
    assert {"1.2.1.1", "1.2.1.2", "1.2.1.3"} <= set(storage.entries)

    second = Agentish()
    outer(second, fail=False)
    assert second.live_calls == {}  # the research tool reran; the agent inside it replayed
    third = Agentish()
    outer(third, fail=False)
    assert third.live_calls == {}


def test_a_discarded_entry_runs_live_on_the_next_try():
    storage = InMemoryStorage()
    with DurableJournal(storage).run() as run:
        Agentish().call(run, "model", "gpt", ["a"])
        run.steps[-1].discard("the answer failed the output guardrail")

    agent = Agentish()
    with DurableJournal(storage).run() as run:
        agent.call(run, "model", "gpt", ["a"])
    assert agent.live_calls == {"gpt": 1}


def test_recorded_results_pass_through_the_secret_masker():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret("hunter2-connection-password")
    storage = InMemoryStorage()
    with DurableJournal(storage).run() as run:
        step = run.claim("tool", "lookup", fingerprint({}))
        step.record({"rows": ["user hunter2-connection-password"], "input_tokens": 3})
    stored = storage.entries["1.1"]
    assert "hunter2-connection-password" not in stored
    assert json.loads(stored)["result"] == {"rows": ["user ***"], "input_tokens": 3}


def test_the_summary_counts_replayed_and_live_steps_by_kind_and_the_tokens_saved():
    storage = InMemoryStorage()
    with pytest.raises(RuntimeError):
        three_calls(Agentish(), DurableJournal(storage), fail_at="final")
    journal = DurableJournal(storage)
    three_calls(Agentish(), journal)
    assert journal.stats.summary() == (
        "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0, saved 10 tokens by replaying, "
        "spent and saved: price unknown (gpt)"
    )


def test_finish_logs_one_summary_and_deletes_the_journal_only_on_success(caplog):
    storage = InMemoryStorage()
    journal = DurableJournal(storage)
    three_calls(Agentish(), journal)
    with caplog.at_level(logging.INFO):
        journal.finish(succeeded=False)
    assert storage.entries
    assert sum("Durable: replayed" in r.getMessage() for r in caplog.records) == 1

    journal.finish(succeeded=True)
    assert storage.entries == {}


def test_delete_removes_entries_of_every_try_nested_and_stale_ones_included():

    class ListingLessStorage(InMemoryStorage):
        """Deletes key by key, as the task state store must."""

        def delete_all(self, keys):
            for key in list(keys):
                del self.entries[key]

    storage = ListingLessStorage()
    three_calls(Agentish(), DurableJournal(storage))
    journal = DurableJournal(storage)
    with journal.run() as run:
        Agentish().call(run, "model", "gpt", ["changed"])
        step = run.claim("tool", "nested", "f")
        with step.running(mark_in_flight=True):
            three_calls(Agentish(), journal)
        # not recorded: the nested run must be found by probing under an unfinished step
    three_calls(Agentish(), journal, prompt="second run")
    # try 1: 1.1-1.3; try 2: 2.1-2.2, 2.2.1.1-2.2.1.3 under the unfinished 2.2, 3.1-3.3; the index "0"
    assert sorted(storage.entries) == sorted(
        ["0", "1.1", "1.2", "1.3", "2.1", "2.2", "2.2.1.1", "2.2.1.2", "2.2.1.3", "3.1", "3.2", "3.3"]
    )

    journal.delete()
    assert storage.entries == {}


def test_clean_up_after_run_deletes_the_journal_when_a_top_level_run_completes():
    storage = InMemoryStorage()
    three_calls(Agentish(), DurableJournal(storage, clean_up_after_run=True))
    assert storage.entries == {}


def test_current_journal_is_the_scoped_one_and_none_outside_a_task():
    assert current_journal() is None
    journal = DurableJournal(InMemoryStorage())
    with journal_scope(journal):
        assert current_journal() is journal
    assert current_journal() is None


# End to end through the OpenAI adapter: what a try leaves for the next (R-9, R-26, issue 8).


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


class Task(tries.Task):
    prompt = "go"


@pytest.mark.parametrize(
    "damage",
    ["[" * 100_000, '{"format": 2, "result": ' + "[" * 100_000 + "]" * 100_000 + "}", "\ud800", "null"],
    ids=["deep-unclosed", "deep-closed", "surrogate", "null"],
)
def test_an_entry_that_cannot_be_read_runs_live_and_is_overwritten_so_later_tries_and_clears_do_not_crash(damage):
    runs = Counter()
    task, produce = tries.task_failed_after_a_tool("value", runs)
    task.storage.entries["1.1"] = damage
    second = scripted([function_call("produce", {}, call_id="c1")], [assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[produce]))
    assert len(second.calls) == 2 and runs["produce"] == 2
    task.journal.delete()
    assert task.storage.entries == {}


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
