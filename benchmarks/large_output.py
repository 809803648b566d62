"""
A function tool whose output is large (50 MB by default): one model call that asks for it, the
tool call, and the model call that reads it. Prints the wall-clock and CPU seconds of a plain
Runner.run_sync, a recording run_durably_sync and a replaying one (median of several interleaved
runs), with the journal encrypted as a task's is, on file:// (under TMPDIR) or in memory.

Outputs: "text" (a log of 50 MB: lines with URLs, JSON and escapes), "json" (a dict of 50 MB of
rows) and "secret" (the text with a secret the masker knows in it: recorded masked, so its replay
runs the tool again).

Run by hand, not in CI:
    TMPDIR=/dev/shm python benchmarks/large_output.py > /dev/shm/large.txt
    python benchmarks/large_output.py --outputs text --rounds 3 --mb 50
    python benchmarks/large_output.py --profile text         # cProfile of a recording and a replay
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
# A task's journal is encrypted: the cost of Fernet is part of what a try pays.
os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", "uLYMBmdlCWuU3dQCAvJT3qe-T9oaR3m8JJbPeXCzDpY=")
sys.path.insert(0, str(Path(__file__).parent))

from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import mask_secret
from journal import Counting
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
from airflow.providers.common.ai.durable.core.encryption import EncryptedStorage
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

SECRET = "hunter2-large-output-5519"
_LINE = (
    '2026-12-04T10:{minute:02d}:00+00:00 GET /items?id={i}&q=red%20shoes+size 200 {{"id": {i}, '
    '"note": "a \\"quoted\\" word\\n"}}\n'
)


def text_output(size: int) -> str:
    lines, total, i = [], 0, 0
    while total < size:
        line = _LINE.format(minute=i % 60, i=i)
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)[:size]


def json_output(size: int) -> dict[str, Any]:
    row = {"id": 0, "name": "red shoes", "url": "https://shop.example/items?q=red%20shoes", "tags": ["a", "b"]}
    count = size // (len(str(row)) + 8)
    return {"rows": [{**row, "id": i, "price": i / 100} for i in range(count)], "count": count}


def outputs(size: int) -> dict[str, Any]:
    text = text_output(size)
    return {
        "text": text,
        "json": json_output(size),
        "secret": text[: size // 2] + f" token={SECRET} " + text[size // 2 + len(SECRET) + 8 :],
    }


def agent(output: Any, *, answers: bool) -> Agent:
    @function_tool
    def fetch() -> Any:
        """Fetches the whole report."""
        return output

    steps = [[function_call("fetch", {}, call_id="call_1")], [assistant_message("done")]]
    return Agent(
        name="bench", instructions="Read the report.", model=ScriptedModel(steps if answers else []), tools=[fetch]
    )


def storage_of(name: str, folder: str) -> Counting:
    ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
    inner = InMemoryStorage() if name == "memory" else ObjectStorageStorage(UPath(f"file://{folder}/cache"), **ids)
    return Counting(inner)


def runs(output: Any, storage: Counting, *, secret: bool) -> dict:
    def durable(answers: bool):
        with journal_scope(DurableJournal(EncryptedStorage(storage))):
            return run_durably_sync(agent(output, answers=answers), "go")

    return {
        "plain": lambda: Runner.run_sync(agent(output, answers=True), "go"),
        "record": lambda: durable(True),
        # A masked output is not replayed: the tool runs again, and the model call after it is replayed.
        "replay": lambda: durable(secret),
    }


def timed(run) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    assert run().final_output == "done"
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(names: list[str], size: int, storage_name: str, rounds: int) -> None:
    print(
        f"{'output':<8}{'plain s':>9}{'record s':>10}{'replay s':>10}{'rec/plain':>11}{'rep/plain':>11}"
        f"{'plain cpu':>11}{'rec cpu':>9}{'rep cpu':>9}{'MB stored':>11}{'load':>7}",
        flush=True,
    )
    made = outputs(size)
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            storage = storage_of(storage_name, folder)
            times: dict[str, list[tuple[float, float]]] = {"plain": [], "record": [], "replay": []}
            for _ in range(rounds):
                for kind, run in runs(made[name], storage, secret=name == "secret").items():
                    if kind == "record":
                        storage.inner.delete_all(())
                        storage.bytes_written, storage.sizes = 0, {}
                    times[kind].append(timed(run))
            wall = {kind: statistics.median(t[0] for t in each) for kind, each in times.items()}
            cpu = {kind: statistics.median(t[1] for t in each) for kind, each in times.items()}
            print(
                f"{name:<8}{wall['plain']:>9.2f}{wall['record']:>10.2f}{wall['replay']:>10.2f}"
                f"{wall['record'] / wall['plain']:>11.2f}{wall['replay'] / wall['plain']:>11.2f}"
                f"{cpu['plain']:>11.2f}{cpu['record']:>9.2f}{cpu['replay']:>9.2f}"
                f"{sum(storage.sizes.values()) / 1e6:>11.1f}{os.getloadavg()[0]:>7.1f}",
                flush=True,
            )


# Where a durable run's time goes: the cumulative seconds of these functions (file, function), which
# may nest (masking runs inside the fingerprint and inside recording a step).
_PARTS = {
    "masking (all)": ("core/masking.py", "masked"),
    "  its decoded forms": ("core/masking.py", "_decoded_forms"),
    "  the masker's redact": ("core/masking.py", "_redact"),
    "model call fingerprint and digests": ("core/divergence.py", "fingerprint_and_parts"),
    "tool output encoded and checked": ("openai_agents/_tool_output.py", "encode_tool_output"),
    "tool output decoded": ("openai_agents/_tool_output.py", "decode_tool_output"),
    "entry written (JSON, encrypted, stored)": ("core/journal.py", "_write"),
    "  encrypted": ("core/encryption.py", "_encrypted"),
    "entry decrypted": ("core/encryption.py", "_decrypted"),
    "entry parsed": ("core/entries.py", "_parsed"),
}


def profile(name: str, size: int, storage_name: str, lines: int) -> None:
    """One run of each kind under cProfile: the seconds of each part of the journal's work, and the top functions."""
    output = outputs(size)[name]
    with tempfile.TemporaryDirectory() as folder:
        storage = storage_of(storage_name, folder)
        each = runs(output, storage, secret=name == "secret")
        for kind in ("plain", "record", "replay"):
            profiler = cProfile.Profile()
            profiler.runcall(each[kind])
            stats = pstats.Stats(profiler, stream=sys.stdout)
            print(f"\n{name} {kind}: {stats.total_tt:.2f} s under cProfile (load {os.getloadavg()[0]:.1f})")
            for part, (path, function) in _PARTS.items():
                seconds = sum(
                    row[3] for (file, _, func), row in stats.stats.items() if file.endswith(path) and func == function
                )
                if seconds:
                    print(f"  {part:<42}{seconds:>8.2f} s")
            if lines:
                stats.sort_stats("tottime").print_stats(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--outputs", default="text,json,secret", help="text, json, secret, comma-separated")
    parser.add_argument("--mb", type=float, default=50, help="the output's size in MB (10^6 characters)")
    parser.add_argument("--storage", default="file", choices=("file", "memory"))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of each kind; the median is printed")
    parser.add_argument("--profile", metavar="OUTPUT", help="profile one run of each kind of this output instead")
    parser.add_argument("--lines", type=int, default=0, help="functions a profile lists")
    arguments = parser.parse_args()
    mask_secret(SECRET)
    size = int(arguments.mb * 1e6)
    if arguments.profile:
        profile(arguments.profile, size, arguments.storage, arguments.lines)
    else:
        measure(arguments.outputs.split(","), size, arguments.storage, arguments.rounds)
