"""
Journal writes behind the agent and reads ahead of it (R-48), on a store a round trip away: what
a try killed at any moment leaves, what a refused write becomes, and what a normal end flushes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task

from airflow.providers.common.ai.durable.airflow import task_state_store

try:
    from airflow.sdk.exceptions import AirflowTaskTerminated
except ImportError:  # Airflow 2.11
    from airflow.exceptions import AirflowTaskTerminated
from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.encryption import EncryptedStorage, UndecryptableTextError
from airflow.providers.common.ai.durable.core.host import PLAIN_HOST
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_io import JournalIO
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

IO_THREAD = "durable-journal-io"


class RemoteStorage(InMemoryStorage):
    """A store a round trip away: each call takes ``delay`` seconds; ``refuses`` picks the writes it fails."""

    calls_in_background = True
    reads_at_once = 8

    def __init__(self, delay: float = 0.03, refuses: Any = lambda key, text: False) -> None:
        super().__init__()
        self.delay, self.refuses = delay, refuses
        self.callers: Counter[str] = Counter()
        self.reads: list[str] = []
        self.batches: list[int] = []

    def read_many(self, keys: list[str]) -> list[str | Exception | None]:
        self.batches.append(len(keys))
        return super().read_many(keys)

    def read(self, key: str) -> str | None:
        self.callers[threading.current_thread().name] += 1
        self.reads.append(key)
        time.sleep(self.delay)
        return super().read(key)

    def write(self, key: str, text: str) -> None:
        self.callers[threading.current_thread().name] += 1
        time.sleep(self.delay)
        if self.refuses(key, text):
            raise OSError("the store is unavailable")
        super().write(key, text)


def entries(storage: InMemoryStorage) -> list[str]:
    """The keys of the entries a store holds, the runs' snapshots (``0.<run>``) left out."""
    return sorted(key for key in storage.entries if not key.startswith("0."))


def snapshot(storage: InMemoryStorage, run: int = 1) -> dict[str, str]:
    """The entries the snapshot of ``run`` holds, by key."""
    return {f"{run}.{position}": text for position, text in json.loads(storage.entries[f"0.{run}"])["entries"].items()}


class StoreWatchingModel(ScriptedModel):
    """A scripted model that keeps what the store held when each request reached it: what a try killed then leaves."""

    def __init__(self, steps: list[Any], storage: InMemoryStorage) -> None:
        super().__init__(steps)
        self.storage = storage
        self.store_at_request: list[dict[str, str]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.store_at_request.append(dict(self.storage.entries))
        return await super().get_response(*args, **kwargs)


class StoppedModel(ScriptedModel):
    """A scripted model that raises ``error`` once its answers are used up."""

    def __init__(self, steps: list[Any], error: type[BaseException]) -> None:
        super().__init__(steps)
        self.error = error

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        if not self.remaining_steps:
            raise self.error("stopped")
        return await super().get_response(*args, **kwargs)


def payments_agent(model: ScriptedModel, charged: list[int]) -> Agent:
    @function_tool
    def charge(invoice: int) -> str:
        """Charge an invoice."""
        charged.append(invoice)
        return f"charged invoice {invoice}"

    return Agent(name="payments", instructions="Charge the invoices.", model=model, tools=[charge])


def script() -> list[Any]:
    return [
        [function_call("charge", {"invoice": 1}, call_id="c1"), function_call("charge", {"invoice": 2}, call_id="c2")],
        [function_call("charge", {"invoice": 3}, call_id="c3")],
        [assistant_message("all charged")],
    ]


@pytest.mark.parametrize("killed_at_request", [2, 3])
def test_a_try_killed_once_a_model_request_was_sent_never_runs_again_the_tools_whose_results_it_carried(
    killed_at_request,
):
    storage = RemoteStorage()
    charged: list[int] = []
    model = StoreWatchingModel(script(), storage)
    assert Task(storage).attempt(payments_agent(model, charged)).final_output == "all charged"
    assert sorted(charged) == [1, 2, 3]  # 1 and 2, asked for in one answer, run side by side
    assert set(storage.callers) == {IO_THREAD}  # the writes were behind the agent

    # The retry of a try killed right after request N was sent finds what the store held then.
    left = InMemoryStorage()
    left.entries = model.store_at_request[killed_at_request - 1]
    retry_charged: list[int] = []
    retry_model = StoreWatchingModel(script()[killed_at_request - 1 :], InMemoryStorage())
    task = Task(left)
    assert task.attempt(payments_agent(retry_model, retry_charged)).final_output == "all charged"

    # Request N carried the results of every charge before it: none runs again, and every answer
    # before request N replays: the retry's first request is request N itself.
    carried = {2: [1, 2], 3: [1, 2, 3]}[killed_at_request]
    assert retry_charged == [invoice for invoice in (1, 2, 3) if invoice not in carried]
    assert len(retry_model.calls) == 3 - killed_at_request + 1
    assert task.replayed == Counter(model=killed_at_request - 1, tool=len(carried))


def test_a_write_the_store_refuses_in_the_background_is_named_in_the_summary_and_runs_again():
    # The store refuses the result of the charge of invoice 3 (at 1.5), not its in-flight mark.
    storage = RemoteStorage(refuses=lambda key, text: key == "1.5" and '"state":"done"' in text)
    charged: list[int] = []
    task = Task(storage)
    task.attempt(payments_agent(ScriptedModel(script()), charged))
    assert storage.callers[IO_THREAD] > 0

    stats = task.journal.stats
    assert stats.not_recorded == ["tool 'charge' at 1.5: the store refused it: the store is unavailable"]
    assert "could not record 1 (tool 'charge' at 1.5: the store refused it" in stats.summary()
    assert stats.recorded == Counter(model=3, tool=2)

    retry_charged: list[int] = []
    retry = Task(storage)
    retry_model = ScriptedModel([])
    retry.attempt(payments_agent(retry_model, retry_charged))
    assert (retry_charged, retry_model.calls) == ([3], ())
    # The answer that asked for it replays, and so does the next: the charge returned the same.
    assert retry.replayed == Counter(model=3, tool=2)


@pytest.mark.parametrize("error", [RuntimeError, AirflowTaskTerminated], ids=["failed", "terminated"])
def test_every_write_is_in_the_store_when_a_run_returns_and_when_it_fails(error):
    storage = RemoteStorage(delay=0.05)
    charged: list[int] = []
    Task(storage).attempt(payments_agent(ScriptedModel(script()), charged))
    # Nothing waited for the last answer's record before the run returned: it is there all the same,
    # and so is the run's snapshot, holding what the entries hold.
    assert entries(storage) == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]
    assert all('"state":"done"' in storage.entries[key] for key in entries(storage))
    assert snapshot(storage) == {key: storage.entries[key] for key in entries(storage)}

    failing = RemoteStorage(delay=0.05)
    # A model provider that is down, or Airflow's answer to SIGTERM, raised at the third request.
    Task(failing).failing_attempt(payments_agent(StoppedModel(script()[:2], error), []), error)
    assert entries(failing) == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    assert all('"state":"done"' in failing.entries[key] for key in entries(failing))
    assert snapshot(failing) == {key: failing.entries[key] for key in entries(failing)}


def full_replay(storage: RemoteStorage) -> Task:
    """A retry of the payments agent that replays it all: no request reaches the model, no invoice is charged."""
    retry, model, charged = Task(storage), ScriptedModel([]), []
    assert retry.attempt(payments_agent(model, charged)).final_output == "all charged"
    assert (model.calls, charged) == ((), [])
    return retry


def test_a_replay_reads_a_run_s_snapshot_in_one_call_and_clean_up_deletes_it_first():
    storage = RemoteStorage(delay=0.01)
    Task(storage).attempt(payments_agent(ScriptedModel(script()), []))
    storage.reads.clear()

    retry = full_replay(storage)
    assert retry.replayed == Counter(model=3, tool=3)
    # The first entry of each recorded run (to number the run), then the run's snapshot; nothing else.
    assert storage.reads == ["1.1", "2.1", "0.1"]
    # Nothing was written: the snapshot already held every entry.
    assert entries(storage) == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]

    deleted: list[str] = []
    storage.delete_all = deleted.extend
    retry.journal.finish(succeeded=True)
    assert deleted[:2] == ["0.1", "1.1"]
    assert sorted(deleted) == sorted(storage.entries)


def test_a_replay_with_no_snapshot_reads_its_entries_ahead_and_clean_up_reads_nothing_it_read():
    storage = RemoteStorage(delay=0.01)
    Task(storage).attempt(payments_agent(ScriptedModel(script()), []))
    del storage.entries["0.1"]  # as after a worker that was killed: its run never ended
    storage.reads.clear()
    storage.batches.clear()
    storage.callers.clear()

    retry = full_replay(storage)
    assert set(storage.callers) == {IO_THREAD}
    # The first entry of each recorded run (to number the run), the run's snapshot (none), then
    # the run's entries in order, read ahead of the claims; 1.1 is not read again.
    assert storage.reads[:8] == ["1.1", "2.1", "0.1", "1.2", "1.3", "1.4", "1.5", "1.6"]
    # Reads queued together are made in one call of the storage (concurrently, where it can).
    assert sum(storage.batches) == len(storage.reads)
    assert max(storage.batches) > 1
    reads_before_clean_up = len(storage.reads)

    retry.journal.finish(succeeded=True)
    assert storage.entries == {}
    # Clean-up reads the index and, unless the replay read it ahead, the position past the last
    # step; no key is read twice over the whole try.
    assert set(storage.reads[reads_before_clean_up:]) <= {"0", "1.7"}
    assert "0" in storage.reads[reads_before_clean_up:]
    assert len(storage.reads) == len(set(storage.reads))


def test_concurrent_runs_of_one_journal_share_its_io_thread_and_keep_their_entries_apart():
    storage = RemoteStorage(delay=0.005)
    journal = DurableJournal(storage)
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            with journal.run(key=name) as run:
                for position in range(1, 6):
                    run.claim("tool", name, f"{name}-{position}").record(f"{name} {position}")
        except BaseException as error:  # pragma: no cover - shown by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(f"r{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(entries(storage)) == 20
    assert sorted(set(storage.entries) - set(entries(storage))) == ["0.1", "0.2", "0.3", "0.4"]
    assert journal.stats.recorded == Counter(tool=20)


def test_the_task_state_store_of_dag_test_is_called_from_the_task_s_own_thread(monkeypatch):
    # dag.test() answers the store in this process, through one queue that is not safe across threads.
    task_runner = pytest.importorskip("airflow.sdk.execution_time.task_runner", reason="Airflow 3's task runner")
    in_process = type("InProcessSupervisorComms", (), {})()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", in_process, raising=False)
    assert TaskStateStoreStorage(object(), "t").calls_in_background is False
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", object(), raising=False)
    assert TaskStateStoreStorage(object(), "t").calls_in_background is True
    assert task_state_store._answers_in_process() is False


def test_a_nested_run_started_while_writes_are_on_their_way_does_not_wait_on_itself():
    # Numbering a nested run holds the journal's lock while it reads the store, behind writes
    # whose reports must not need that lock.
    storage = RemoteStorage(delay=0.05)
    journal = DurableJournal(storage)
    finished = threading.Event()

    def agent() -> None:
        with journal.run() as run:
            run.claim("model", "m", "f1").record("answer")
            tool = run.claim("tool", "t", "f2")
            with tool.running(), journal.run() as nested:
                nested.claim("model", "m", "f3").record("inner answer")
            tool.record("outer result")
        finished.set()

    threading.Thread(target=agent, daemon=True).start()
    assert finished.wait(timeout=60), "the journal waited on itself"
    assert journal.stats.recorded == Counter(model=2, tool=1)
    # A nested run's entries are in its top-level run's snapshot only by their step.
    assert sorted(storage.entries) == ["0", "0.1", "1.1", "1.2", "1.2.1.1"]
    assert list(snapshot(storage)) == ["1.1", "1.2"]


def test_a_call_the_io_thread_makes_reads_at_once_and_sees_the_writes_queued_before_it():
    # A try's summary, written by the I/O thread after a run, reads the budget: queued behind
    # itself, that read would wait for ever (a replayed try on Airflow 3.3 hung there).
    storage = RemoteStorage(delay=0.01)
    storage.entries["stored"] = "as stored"
    io = JournalIO(storage)
    go = threading.Event()

    def summary() -> tuple[Any, ...]:
        assert go.wait(timeout=60)
        return (
            io.read_later("queued").result(timeout=10),
            io.reads_later(["stored", "missing"])[0].result(timeout=10),
            io.call(lambda: threading.current_thread().name),
            io.settle(),
        )

    made = io.later(summary)
    io.write("queued", "written after the summary was queued", lambda error: None)
    go.set()

    assert made.result(timeout=60) == ("written after the summary was queued", "as stored", IO_THREAD, None)
    io.settle()
    assert storage.entries["queued"] == "written after the summary was queued"


def test_a_replayed_try_whose_summary_reads_its_budget_after_a_run_ends_does_not_wait_on_itself():
    storage = RemoteStorage(delay=0.005)
    budget = UsageBudget(max_requests=20)
    Task(storage).attempt(payments_agent(ScriptedModel(script()), []), "Charge invoices 1 to 3.", budget=budget)
    summaries: list[Any] = []
    journal = DurableJournal(
        storage, host=PLAIN_HOST.for_try(2, after_each_run=lambda journal: summaries.append(journal.stats.usage()))
    )
    charged: list[int] = []
    done = threading.Event()

    def retry() -> None:
        # Every call replays, so no request reads the budget: the summary, on the I/O thread, does.
        with journal_scope(journal):
            run_durably_sync(payments_agent(ScriptedModel([]), charged), "Charge invoices 1 to 3.", budget=budget)
        done.set()

    threading.Thread(target=retry, daemon=True).start()
    assert done.wait(timeout=60), "the summary's read of the budget waited on itself"
    assert (journal.stats.replayed, charged) == (Counter(model=3, tool=3), [])
    assert [summary.budget["spent"]["requests"] for summary in summaries] == [3]


def test_reads_made_together_each_get_their_own_entry_or_error(fernet_key):
    fernet_key("o0n0kq3Zk4mFJm0nQ8m2Xv5yq8cGq9m0b1xk3P2m4zU=")
    inner = RemoteStorage(delay=0)
    storage = EncryptedStorage(inner)
    storage.write("1.1", '{"a":1}')
    inner.entries["1.2"] = "fernet:not-a-token"
    io = JournalIO(storage)
    io.settle()
    with io._condition:  # queue the reads before the thread may take the first
        reads = [io.read_later(key) for key in ("1.1", "1.2", "1.3")]
    assert reads[0].result() == '{"a":1}'
    with pytest.raises(UndecryptableTextError, match="the entry cannot be decrypted"):
        reads[1].result()
    assert reads[2].result() is None
    assert inner.batches == [3]


def test_a_read_the_store_fails_in_the_background_runs_that_call_live_and_replays_the_rest_before_it():
    storage = RemoteStorage(delay=0.005)
    Task(storage).attempt(payments_agent(ScriptedModel(script()), []))

    class Failing(RemoteStorage):
        def read(self, key: str) -> str | None:
            if key == "1.4":  # the answer that asked for the charge of invoice 3
                raise OSError("the store timed out")
            return super().read(key)

    failing = Failing(delay=0.005)
    failing.entries = dict(storage.entries)
    del failing.entries["0.1"]  # the run's snapshot, which would answer without reading 1.4
    retry_charged: list[int] = []
    retry_model = ScriptedModel(script()[1:])
    retry = Task(failing)
    assert retry.attempt(payments_agent(retry_model, retry_charged)).final_output == "all charged"
    assert len(retry_model.calls) == 2  # the answer at 1.4 and every one after it ran live
    assert retry_charged == [3]
    assert retry.replayed == Counter(model=1, tool=2)
    [(key, _, reason)] = retry.journal.stats.divergences
    assert (key, reason) == ("1.4", "the store could not read it: the store timed out")


def record_abc(storage: InMemoryStorage) -> None:
    """Try 1: a run of three tool calls, recorded, that ends (so its snapshot is stored)."""
    journal = DurableJournal(storage)
    with journal.run() as run:
        for name in "abc":
            run.claim("tool", name, f"{name}-1").record(f"{name} first")
    journal.settle()


def test_a_try_that_replaces_an_entry_sets_the_run_s_snapshot_aside_first_so_a_retry_never_replays_the_old_one():
    storage = RemoteStorage(delay=0)
    record_abc(storage)
    assert list(snapshot(storage)) == ["1.1", "1.2", "1.3"]

    # Try 2 replays a and b; the answer at b made the run fail, so it is discarded, and the
    # worker dies before the run ends: no new snapshot is written.
    journal = DurableJournal(storage)
    run = journal.run().__enter__()
    a, b = run.claim("tool", "a", "a-1"), run.claim("tool", "b", "b-1")
    assert a.replayed and b.replayed
    b.discard("it made the run fail")
    journal.settle()
    assert snapshot(storage) == {}

    journal = DurableJournal(storage)
    with journal.run() as run:
        a, b = run.claim("tool", "a", "a-1"), run.claim("tool", "b", "b-1")
    assert (a.replayed, b.replayed) == (True, False)


def test_a_snapshot_the_store_will_not_set_aside_keeps_the_try_from_writing_over_what_it_holds():
    storage = RemoteStorage(delay=0)
    record_abc(storage)
    recorded = dict(storage.entries)
    storage.refuses = lambda key, text: key == "0.1"

    journal = DurableJournal(storage)
    with journal.run() as run:
        run.claim("tool", "a", "a-1")
        changed = run.claim("tool", "b", "b-2")  # the arguments changed: it runs live
        assert not changed.replayed
        assert changed.record("b second") is False
    assert journal.stats.not_recorded == [
        "tool 'b' at 1.2: the snapshot of its run could not be set aside: the store is unavailable"
    ]
    assert storage.entries == recorded


def test_a_snapshot_that_cannot_be_read_is_passed_over_and_the_entries_are_read_one_by_one():
    storage = RemoteStorage(delay=0)
    record_abc(storage)
    storage.entries["0.1"] = '{"format": 3, "kind": "snapshot", "entries": ["not", "a", "map"]}'
    storage.reads.clear()

    journal = DurableJournal(storage)
    with journal.run() as run:
        steps = [run.claim("tool", name, f"{name}-1") for name in "abc"]
    assert all(step.replayed for step in steps)
    assert storage.reads[:4] == ["1.1", "2.1", "0.1", "1.2"]
    assert "1.3" in storage.reads
    # The run ended having read every entry: its snapshot is whole again.
    assert list(snapshot(storage)) == ["1.1", "1.2", "1.3"]


def test_a_snapshot_the_store_refuses_loses_nothing_and_the_retry_reads_entry_by_entry(caplog):
    storage = RemoteStorage(delay=0, refuses=lambda key, text: key == "0.1")
    record_abc(storage)
    assert "could not store the snapshot of run 1" in caplog.text
    assert entries(storage) == ["1.1", "1.2", "1.3"] and "0.1" not in storage.entries

    storage.reads.clear()
    journal = DurableJournal(storage)
    with journal.run() as run:
        steps = [run.claim("tool", name, f"{name}-1") for name in "abc"]
    assert all(step.replayed for step in steps)
    assert journal.stats.not_recorded == []
    assert {"1.2", "1.3"} <= set(storage.reads)


def test_a_secret_a_tool_returned_reaches_neither_its_entry_nor_the_run_s_snapshot():
    from airflow.providers.common.compat.sdk import mask_secret

    secret = "s3cr3t-in-a-snapshot"
    mask_secret(secret)
    storage = RemoteStorage(delay=0)
    journal = DurableJournal(storage)
    with journal.run() as run:
        run.claim("tool", "a", "a-1").record("plain")
        run.claim("tool", "b", "b-1").record({"token": f"the token is {json.dumps(secret)}"})
    assert "1.2" in snapshot(storage)
    for key, text in storage.entries.items():
        assert secret not in text and secret not in json.loads(text).__repr__(), key


def test_odd_unicode_replays_from_a_snapshot_as_it_was_recorded():
    values = ["Zürich 東京 🌦", "a lone \ud800 surrogate", {"nested": [["\u0000", "\u2028"]] * 3}, "x" * 100_000]
    storage = RemoteStorage(delay=0)
    with DurableJournal(storage).run() as run:
        for position, value in enumerate(values):
            run.claim("tool", "t", f"f{position}").record(value)
    assert len(snapshot(storage)) == len(values)

    storage.reads.clear()
    with DurableJournal(storage).run() as run:
        replayed = [run.claim("tool", "t", f"f{position}") for position in range(len(values))]
    assert [step.result for step in replayed] == values
    assert storage.reads == ["1.1", "2.1", "0.1"]


def test_clean_up_deletes_a_snapshot_whose_read_failed_during_the_replay():
    storage = RemoteStorage(delay=0)
    record_abc(storage)
    failures = iter([OSError("the store timed out")])

    class FailingOnce(RemoteStorage):
        def read(self, key: str) -> str | None:
            if key == "0.1" and (failure := next(failures, None)) is not None:
                raise failure
            return super().read(key)

    flaky = FailingOnce(delay=0)
    flaky.entries = dict(storage.entries)
    journal = DurableJournal(flaky)
    with journal.run() as run:  # this try makes one call of the three: it writes no snapshot
        assert run.claim("tool", "a", "a-1").replayed
    deleted: list[str] = []
    flaky.delete_all = deleted.extend
    journal.finish(succeeded=True)
    assert sorted(deleted) == sorted(flaky.entries) and deleted[0] == "0.1"
