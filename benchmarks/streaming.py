"""
The journal's cost on a streamed agent run (run_durably_streamed): N turns of one model call and
one tool call, against an instant scripted model that streams its answers. Prints the CPU time
of plain Runner.run_streamed, a recording run and a full replay, on file:// and in memory, each
consumed to the end of stream_events(), with ratios.

Run by hand, not in CI:  python benchmarks/streaming.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from upath import UPath  # noqa: E402

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage  # noqa: E402
from airflow.providers.common.ai.durable.core.journal import DurableJournal  # noqa: E402
from airflow.providers.common.ai.durable.core.scope import journal_scope  # noqa: E402
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage  # noqa: E402
from airflow.providers.common.ai.durable.openai_agents import run_durably_streamed  # noqa: E402


@function_tool
def lookup(i: int) -> str:
    """Looks up item i."""
    return f"item {i}: " + "x" * 200


def agent(n: int, *, answers: bool) -> Agent:
    steps = [[function_call("lookup", {"i": i}, call_id=f"call_{i}")] for i in range(n)]
    steps.append([assistant_message("done " + "word " * 50)])
    return Agent(
        name="bench", instructions="Look items up.", model=ScriptedModel(steps if answers else []), tools=[lookup]
    )


def cpu_seconds(start) -> float:
    async def consume():
        result = start()
        async for _ in result.stream_events():
            pass
        return result

    gc.collect()
    started = time.process_time()
    assert asyncio.run(consume()).final_output.startswith("done")
    return time.process_time() - started


def main() -> None:
    print(
        f"{'storage':<8}{'N':>5}{'streamed s':>12}{'record s':>10}{'replay s':>10}{'record/run':>12}{'replay/run':>12}"
    )
    for n in (10, 100):
        with tempfile.TemporaryDirectory() as folder:
            ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
            for name, storage in (
                ("memory", InMemoryStorage()),
                ("file://", ObjectStorageStorage(UPath(f"file://{folder}/cache"), **ids)),
            ):

                def durable(answers: bool):
                    journal = DurableJournal(storage)
                    with journal_scope(journal):
                        return run_durably_streamed(agent(n, answers=answers), "go", max_turns=n + 2)

                def record():
                    storage.delete_all(())
                    return durable(True)

                best = {"plain": float("inf"), "record": float("inf"), "replay": float("inf")}
                for _ in range(5):
                    for kind, start in (
                        ("plain", lambda: Runner.run_streamed(agent(n, answers=True), "go", max_turns=n + 2)),
                        ("record", record),
                        ("replay", lambda: durable(False)),
                    ):
                        best[kind] = min(best[kind], cpu_seconds(start))
                print(
                    f"{name:<8}{n:>5}{best['plain']:>12.3f}{best['record']:>10.3f}{best['replay']:>10.3f}"
                    f"{best['record'] / best['plain']:>12.2f}{best['replay'] / best['plain']:>12.2f}"
                )


if __name__ == "__main__":
    main()
