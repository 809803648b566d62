"""
Records and replays N steps of ~1 KB through the journal on each storage backend; prints the
per-step time, the bytes written against the journal's final size, and the store calls.

Run by hand, not in CI:  python benchmarks/journal.py
The task state store is the in-process fake of the tests (it counts calls; a real store adds a
round trip to the API server per call, so the call counts are what carries over).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "unit" / "durable"))

from durable_backends import FakeTaskStateStore  # noqa: E402
from upath import UPath  # noqa: E402

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage  # noqa: E402
from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage  # noqa: E402
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint  # noqa: E402
from airflow.providers.common.ai.durable.core.journal import DurableJournal  # noqa: E402
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage, JournalStorage  # noqa: E402

PAYLOAD = "x" * 1000


class Counting(JournalStorage):
    """Counts the bytes written through another storage, and its final size."""

    def __init__(self, inner: JournalStorage, make_inner=None) -> None:
        self.inner, self.identity = inner, inner.identity
        # Makes the inner storage again, as each try does (a storage in segments reads them on first use).
        self.make_inner = make_inner
        self.whole_journal_at_once = inner.whole_journal_at_once
        self.bytes_written = 0
        self.sizes: dict[str, int] = {}

    def fresh(self) -> Counting:
        if self.make_inner is not None:
            self.inner = self.make_inner()
        return self

    def read(self, key):
        return self.inner.read(key)

    def read_many(self, keys):
        return self.inner.read_many(keys)

    def write(self, key, text):
        size = len(text.encode())
        self.bytes_written += size
        self.sizes[key] = size
        self.inner.write(key, text)

    def delete_all(self, keys):
        self.inner.delete_all(keys)

    def seal(self):
        self.inner.seal()


def run_steps(journal: DurableJournal, n: int) -> None:
    with journal.run() as run:
        for i in range(n):
            kind = "tool" if i % 2 else "model"
            step = run.claim(kind, "step", fingerprint({"i": i, "asks": PAYLOAD[:100]}))
            if step.replayed:
                continue
            with step.running(mark_in_flight=kind == "tool"):
                result = {"i": i, "text": PAYLOAD}
            step.record(result)


def backends(folder: str):
    ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
    yield "memory", InMemoryStorage(), None
    yield "file://", ObjectStorageStorage(UPath(f"file://{folder}/cache"), **ids), None
    accessor = FakeTaskStateStore()
    yield "task state store", TaskStateStoreStorage(accessor, "bench/r/t/-1"), accessor


def main() -> None:
    print(
        f"{'backend':<17}{'N':>6}{'record µs/step':>16}{'replay µs/step':>16}{'written/final':>15}"
        f"{'store sets':>11}{'delete calls':>13}"
    )
    for n in (10, 100, 1000):
        with tempfile.TemporaryDirectory() as folder:
            for name, inner, accessor in backends(folder):
                storage = Counting(inner)
                started = time.perf_counter()
                run_steps(DurableJournal(storage), n)
                recorded = time.perf_counter() - started
                sets = accessor.calls.count("set") if accessor else None
                replaying = DurableJournal(storage)
                started = time.perf_counter()
                run_steps(replaying, n)
                replayed = time.perf_counter() - started
                if accessor:
                    accessor.calls.clear()
                replaying.delete()  # as after the successful try
                clean_up = f"{len(accessor.calls)}" if accessor else "1"
                ratio = storage.bytes_written / sum(storage.sizes.values())
                print(
                    f"{name:<17}{n:>6}{recorded / n * 1e6:>16.1f}{replayed / n * 1e6:>16.1f}{ratio:>15.2f}"
                    f"{sets if sets is not None else '-':>11}{clean_up:>13}"
                )


if __name__ == "__main__":
    main()
