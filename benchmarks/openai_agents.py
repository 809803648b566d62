"""
The journal's cost on an agent run: N turns of one model call and one tool call, against an
instant scripted model. Prints the CPU time of plain Runner.run_sync, a recording run and a full replay, on
file:// and in memory, with ratios and the bytes written against the journal's final size.

Run by hand, not in CI:  python benchmarks/openai_agents.py
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
sys.path.insert(0, str(Path(__file__).parent))

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from journal import Counting  # noqa: E402
from upath import UPath  # noqa: E402

from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope  # noqa: E402
from airflow.providers.common.ai.durable.object_storage import ObjectStorageStorage  # noqa: E402
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync  # noqa: E402
from airflow.providers.common.ai.durable.storage import InMemoryStorage  # noqa: E402


@function_tool
def lookup(i: int) -> str:
    """Looks up item i."""
    return f"item {i}: " + "x" * 200


def agent(n: int, *, answers: bool) -> Agent:
    steps = [[function_call("lookup", {"i": i}, call_id=f"call_{i}")] for i in range(n)]
    steps.append([assistant_message("done")])
    return Agent(
        name="bench", instructions="Look items up.", model=ScriptedModel(steps if answers else []), tools=[lookup]
    )


def cpu_seconds(run) -> float:
    gc.collect()
    started = time.process_time()
    assert run().final_output == "done"
    return time.process_time() - started


def main() -> None:
    print(
        f"{'storage':<8}{'N':>5}{'run_sync s':>12}{'record s':>10}{'replay s':>10}"
        f"{'record/run':>12}{'replay/run':>12}{'written/final':>15}"
    )
    for n in (10, 100, 400):
        with tempfile.TemporaryDirectory() as folder:
            ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
            for name, inner in (
                ("memory", InMemoryStorage()),
                ("file://", ObjectStorageStorage(UPath(f"file://{folder}/cache"), **ids)),
            ):
                storage = Counting(inner)

                def durable(answers: bool):
                    with journal_scope(DurableJournal(storage)):
                        return run_durably_sync(agent(n, answers=answers), "go", max_turns=n + 2)

                def record():
                    # Each recording run starts from an empty journal; the replay reads it.
                    storage.inner.delete_all(())
                    storage.bytes_written, storage.sizes = 0, {}
                    return durable(True)

                # Interleaved, best of each: the machine's noise only ever adds time.
                best = {"plain": float("inf"), "record": float("inf"), "replay": float("inf")}
                for _ in range(7 if n <= 100 else 2):
                    for kind, run in (
                        ("plain", lambda: Runner.run_sync(agent(n, answers=True), "go", max_turns=n + 2)),
                        ("record", record),
                        ("replay", lambda: durable(False)),
                    ):
                        best[kind] = min(best[kind], cpu_seconds(run))
                ratio = storage.bytes_written / sum(storage.sizes.values())
                print(
                    f"{name:<8}{n:>5}{best['plain']:>12.3f}{best['record']:>10.3f}{best['replay']:>10.3f}"
                    f"{best['record'] / best['plain']:>12.2f}{best['replay'] / best['plain']:>12.2f}{ratio:>15.2f}"
                )


if __name__ == "__main__":
    main()
