"""
The journal's cost on an agent run: N turns of one model call and one tool call, against an
instant scripted model. Prints the CPU time of plain Runner.run_sync, a recording run and a full
replay (interleaved, best of several), with ratios, and what the journal holds at the end: its
size and its bytes per step (a step is a model call or a tool call; a run of N turns has 2N + 1).

Run by hand, not in CI:
    python benchmarks/openai_agents.py                       # file://, N = 10, 100, 400, 1000
    python benchmarks/openai_agents.py --ns 10,100 --storages file,memory
    python benchmarks/openai_agents.py --profile 10          # where a recording run's time goes
    python benchmarks/openai_agents.py --attribute 10        # the same, measured without a profiler
    python benchmarks/openai_agents.py --budget --ns 10,100  # what a UsageBudget's check costs a step
    python benchmarks/openai_agents.py --console-logging     # log lines rendered for a console, not as a task's

Logging is configured as in a task's process on Airflow 3 (log_as_a_task()), where the INFO line of
each live step goes.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import functools
import gc
import logging
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
sys.path.insert(0, str(Path(__file__).parent))

from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from journal import Counting
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import UsageBudget, run_durably_sync


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


def log_as_a_task() -> None:
    """
    Configure logging as Airflow 3's task runner does in a task's process (task_runner.py's
    ``configure_logging(json_output=True, output=..., sending_to_supervisor=True)``): each record
    as a JSON line, unbuffered, to the supervisor's socket (here /dev/null), where the per-step INFO
    lines (R-38) of a durable run in a task go. Without it a process that imports Airflow renders
    them for a console, ~2x the CPU a record (--console-logging keeps that). Airflow 2.11: unchanged.
    """
    try:
        from airflow.sdk.log import configure_logging
    except ImportError:
        return
    output = open(os.devnull, "wb", buffering=0)  # noqa: SIM115 - open for the process, closed at exit
    atexit.register(output.close)
    configure_logging(json_output=True, output=output, sending_to_supervisor=True)


def cpu_seconds(run) -> float:
    gc.collect()
    started = time.process_time()
    assert run().final_output == "done"
    return time.process_time() - started


def emptied(storage: Counting) -> None:
    """Delete the journal, before a recording run and outside its time: each starts from an empty one."""
    storage.inner.delete_all(())
    storage.bytes_written, storage.sizes = 0, {}


def storage_of(name: str, folder: str) -> Counting:
    ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
    if name == "memory":
        return Counting(InMemoryStorage())
    make = functools.partial(cache_path_journal, UPath(f"file://{folder}/cache"), **ids)
    return Counting(make(), make)


def runs(n: int, storage: Counting) -> dict:
    """Each kind of run of N turns; a recording run expects an empty journal, which the replay reads."""

    def durable(answers: bool):
        with journal_scope(DurableJournal(storage.fresh())):
            return run_durably_sync(agent(n, answers=answers), "go", max_turns=n + 2)

    return {
        "plain": lambda: Runner.run_sync(agent(n, answers=True), "go", max_turns=n + 2),
        "record": lambda: durable(True),
        "replay": lambda: durable(False),
    }


def budget_cost(ns: list[int], storages: list[str]) -> None:
    """A recording run with and without a budget (all five limits, never reached): the check's CPU per model request."""
    limits = UsageBudget(
        max_requests=10**9, max_input_tokens=10**12, max_output_tokens=10**12, max_total_tokens=10**12, max_cost_usd=1e9
    )
    print(f"{'storage':<8}{'N':>6}{'record s':>10}{'budget s':>10}{'extra us/request':>18}{'load':>7}", flush=True)
    for n in ns:
        for name in storages:
            with tempfile.TemporaryDirectory() as folder:
                storage = storage_of(name, folder)

                def recorded(budget: UsageBudget | None):
                    emptied(storage)
                    model_agent = agent(n, answers=True)
                    model_agent.model.model = "gpt-4.1-mini"  # a price the table has: the money limit applies
                    with journal_scope(DurableJournal(storage)):
                        return run_durably_sync(model_agent, "go", max_turns=n + 2, budget=budget)

                best = {None: float("inf"), limits: float("inf")}
                for _ in range(25 if n <= 10 else 11 if n <= 100 else 3):
                    for budget in best:
                        best[budget] = min(best[budget], cpu_seconds(lambda budget=budget: recorded(budget)))
                extra = (best[limits] - best[None]) / (n + 1) * 1e6
                print(
                    f"{name:<8}{n:>6}{best[None]:>10.3f}{best[limits]:>10.3f}{extra:>18.1f}{os.getloadavg()[0]:>7.1f}",
                    flush=True,
                )


def measure(ns: list[int], storages: list[str]) -> None:
    print(
        f"{'storage':<8}{'N':>6}{'plain s':>10}{'record s':>10}{'replay s':>10}{'record/plain':>14}"
        f"{'replay/plain':>14}{'KiB stored':>12}{'bytes/step':>12}{'written/final':>15}{'KiB on disk':>13}"
        f"{'clean-up ms':>13}{'load':>7}",
        flush=True,
    )
    for n in ns:
        for name in storages:
            with tempfile.TemporaryDirectory() as folder:
                storage = storage_of(name, folder)
                # Interleaved, best of each: the machine's noise only ever adds time.
                best = {"plain": float("inf"), "record": float("inf"), "replay": float("inf")}
                # More rounds where a run is short: on a shared machine a short run is the noisier one.
                for _ in range(25 if n <= 10 else 11 if n <= 100 else 3 if n <= 400 else 1):
                    for kind, run in runs(n, storage).items():
                        if kind == "record":
                            emptied(storage)
                        best[kind] = min(best[kind], cpu_seconds(run))
                stored = sum(storage.sizes.values())
                on_disk, clean_up = stored_and_clean_up(n, storage, folder)
                print(
                    f"{name:<8}{n:>6}{best['plain']:>10.3f}{best['record']:>10.3f}{best['replay']:>10.3f}"
                    f"{best['record'] / best['plain']:>14.2f}{best['replay'] / best['plain']:>14.2f}"
                    f"{stored / 1024:>12.1f}{stored / (2 * n + 1):>12.0f}{storage.bytes_written / stored:>15.2f}"
                    f"{on_disk / 1024:>13.1f}{clean_up * 1000:>13.2f}"
                    # The machine's 1-minute load average as the row ends: other work on it only adds time.
                    f"{os.getloadavg()[0]:>7.1f}",
                    flush=True,
                )


def stored_and_clean_up(n: int, storage: Counting, folder: str) -> tuple[int, float]:
    """
    The bytes of a recorded journal on disk once its try ended (what a failed try leaves; memory:
    what was stored), then the wall time of its clean-up after a replaying try that succeeded.
    """
    emptied(storage)
    journal = DurableJournal(storage.fresh())
    with journal_scope(journal):
        run_durably_sync(agent(n, answers=True), "go", max_turns=n + 2)
    storage.seal()
    files = [path for path in Path(folder).rglob("*") if path.is_file()]
    on_disk = sum(path.stat().st_size for path in files) if files else sum(storage.sizes.values())
    journal = DurableJournal(storage.fresh())
    with journal_scope(journal):
        run_durably_sync(agent(n, answers=False), "go", max_turns=n + 2)
    started = time.perf_counter()
    journal.delete()
    return on_disk, time.perf_counter() - started


def profile(n: int, storages: list[str]) -> None:
    """cProfile of 20 plain runs and 20 recording ones: the totals, and the journal's functions."""
    for name in storages:
        with tempfile.TemporaryDirectory() as folder:
            storage = storage_of(name, folder)
            each = runs(n, storage)
            for kind in ("plain", "record"):
                each[kind]()  # untimed: imports and caches
                profiler = cProfile.Profile()
                for _ in range(20):
                    emptied(storage)
                    profiler.runcall(each[kind])
                stats = pstats.Stats(profiler, stream=sys.stdout)
                print(f"\n{name} {kind} N={n}: {stats.total_tt:.3f} s in 20 runs")
                if kind == "record":
                    stats.sort_stats("cumulative").print_stats(r"durable/|logging/__init__.py:\d+\(info\)", 40)


def attribute(n: int, rounds: int = 15) -> None:
    """
    Where a run's extra CPU goes, measured in place (no profiler, whose cost per Python call would
    inflate the journal's many small ones): the agent thread's CPU inside the storage's calls and
    inside the handlers of the per-step log line (R-38), the rest by difference. Best of each kind.
    """
    step_log = logging.getLogger("airflow.providers.common.ai.durable.openai_agents._agent_run")
    spent = {"storage": 0.0, "log line": 0.0}

    def timed(what: str, call):
        def wrapped(*args):
            started = time.thread_time()
            try:
                return call(*args)
            finally:
                spent[what] += time.thread_time() - started

        return wrapped

    with tempfile.TemporaryDirectory() as folder:
        storage = storage_of("file://", folder)
        storage.read, storage.write = timed("storage", storage.read), timed("storage", storage.write)
        step_log.handle = timed("log line", step_log.handle)  # type: ignore[method-assign]
        best: dict[str, dict[str, float]] = {}
        for _ in range(rounds):
            for kind, run in runs(n, storage).items():
                if kind == "record":
                    emptied(storage)
                spent.update({"storage": 0.0, "log line": 0.0})
                total = cpu_seconds(run)
                if total < best.get(kind, {}).get("total", float("inf")):
                    best[kind] = {"total": total, **spent}
    plain = best["plain"]["total"]
    print(f"N={n}, best of {rounds} interleaved runs on file://, ms of CPU a run (load {os.getloadavg()[0]:.1f})")
    print(f"plain {plain * 1000:.2f}")
    for kind in ("record", "replay"):
        parts = best[kind]
        extra = parts["total"] - plain
        rest = extra - parts["storage"] - parts["log line"]
        print(
            f"{kind} {parts['total'] * 1000:.2f} ({parts['total'] / plain:.2f}x): extra {extra * 1000:.2f} = "
            f"storage {parts['storage'] * 1000:.2f} + log lines {parts['log line'] * 1000:.2f} + rest {rest * 1000:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--ns", default="10,100,400,1000", help="numbers of turns, comma-separated")
    parser.add_argument("--storages", default="file", help="file, memory or both, comma-separated")
    parser.add_argument("--profile", type=int, metavar="N", help="profile N turns instead of measuring")
    parser.add_argument("--attribute", type=int, metavar="N", help="where N turns' extra CPU goes, on file://")
    parser.add_argument("--budget", action="store_true", help="what a UsageBudget's check costs each model request")
    parser.add_argument(
        "--console-logging", action="store_true", help="log as a process that imports Airflow does, not as a task"
    )
    arguments = parser.parse_args()
    if not arguments.console_logging:
        log_as_a_task()
    storages = ["file://" if name == "file" else name for name in arguments.storages.split(",")]
    if arguments.attribute:
        attribute(arguments.attribute)
    elif arguments.profile:
        profile(arguments.profile, storages)
    elif arguments.budget:
        budget_cost([int(n) for n in arguments.ns.split(",")], storages)
    else:
        measure([int(n) for n in arguments.ns.split(",")], storages)
