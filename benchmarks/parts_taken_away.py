"""
What a recording run costs without some of the journal's parts: openai_agents.py's workload (N turns
of one model call and one tool call against an instant scripted model, file://, logging as a task's
process does), a plain run, a recording run as it is, and recording runs with parts patched out in
this process (a measurement, not a change to the provider), interleaved round by round. Each is
the agent thread's CPU (time.thread_time); prints the tenth percentile and the best of each kind
over the rounds, the first five left out, and their ratios to the plain run's.

Run by hand, not in CI:
    python benchmarks/parts_taken_away.py                                  # N = 10, 150 rounds
    python benchmarks/parts_taken_away.py --n 1 --rounds 300 --without log+mask,all

Parts (joined with "+" into one variant, variants separated by ","):
    log     the INFO line of each live step (R-38): the adapter's logger disabled
    mask    the masker's checks of stored and hashed strings (R-50): nothing holds a secret
    mark    the in-flight mark before each tool call (R-56)
    write   the journal's writes: each reported stored at once, nothing appended
    fp      the fingerprints and part digests of model and tool calls: a counter instead
    dump    the model answer's pydantic dump: an empty answer recorded
    all     every part above
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from openai_agents import emptied, log_as_a_task, runs, storage_of

from airflow.providers.common.ai.durable.core import journal_io, masking, steps
from airflow.providers.common.ai.durable.openai_agents import _agent_run

PARTS = ("log", "mask", "mark", "write", "fp", "dump")
#: The first rounds, left out: imports, caches and the allocator settling.
WARM_UP = 5


@contextlib.contextmanager
def without(parts: list[str]) -> Iterator[None]:
    """The journal's ``parts`` patched out while inside."""
    undo: list[tuple[object, str, object]] = []

    def patch(owner: object, name: str, value: object) -> None:
        undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    numbers = itertools.count()

    async def no_mark(step, policy):
        return None

    for part in parts:
        if part == "log":
            patch(_agent_run.log, "disabled", True)
        elif part == "mask":
            patch(masking, "_holds_a_secret", lambda text: False)
            patch(masking, "masked_text", lambda text: text)
            patch(steps, "masked_text", lambda text: text)
        elif part == "mark":
            patch(_agent_run, "marked_in_flight", no_mark)
        elif part == "write":
            patch(journal_io.JournalIO, "write", lambda self, key, text, done: done(None))
        elif part == "fp":
            patch(
                _agent_run.ModelCalls, "fingerprint_and_parts", lambda self, request, what: (f"fp{next(numbers)}", None)
            )
            patch(_agent_run, "tool_call_fingerprint_and_parts", lambda *args, **kwargs: (f"fp{next(numbers)}", None))
        elif part == "dump":
            patch(_agent_run, "recorded_response", lambda response: {"output": []})
        else:
            raise SystemExit(f"no part {part!r}: {', '.join(PARTS)} or all")
    try:
        yield
    finally:
        for owner, name, value in reversed(undo):
            setattr(owner, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--n", type=int, default=10, help="turns a run")
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--without", default="log,mask,mark,write,fp,dump,log+mask+mark+write,all")
    arguments = parser.parse_args()
    log_as_a_task()
    variants = {"record": []} | {
        variant: list(PARTS) if variant == "all" else variant.split("+") for variant in arguments.without.split(",")
    }
    with tempfile.TemporaryDirectory() as folder:
        storage = storage_of("file://", folder)
        each = runs(arguments.n, storage)
        spent: dict[str, list[float]] = {"plain": [], **{variant: [] for variant in variants}}
        for _ in range(arguments.rounds):
            for kind in spent:
                if kind != "plain":
                    emptied(storage)
                with without(variants.get(kind, [])):
                    gc.collect()
                    started = time.thread_time()
                    each["plain" if kind == "plain" else "record"]()
                    spent[kind].append(time.thread_time() - started)
    ordered = {kind: sorted(times[WARM_UP:]) for kind, times in spent.items()}
    tenth = {kind: times[len(times) // 10] for kind, times in ordered.items()}
    print(f"N={arguments.n}, {arguments.rounds} rounds, ms of the agent thread's CPU (load {os.getloadavg()[0]:.1f})")
    print(f"{'run':<34}{'p10 ms':>9}{'best ms':>9}{'p10 x plain':>13}{'best x plain':>14}")
    for kind, times in ordered.items():
        name = kind if kind in ("plain", "record") else f"record without {kind}"
        print(
            f"{name:<34}{tenth[kind] * 1000:>9.2f}{times[0] * 1000:>9.2f}"
            f"{tenth[kind] / tenth['plain']:>13.3f}{times[0] / ordered['plain'][0]:>14.3f}"
        )


if __name__ == "__main__":
    main()
