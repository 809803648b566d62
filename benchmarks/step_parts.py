"""
One recorded step and one replayed step by part, each part beside its floor on this machine.

Runs N turns (one model call and one tool call each, against an instant scripted model) on
``file://`` in a folder on tmpfs, recorded and replayed, with the journal's parts timed in place
(the thread's CPU time around each call: no profiler, whose cost per Python call would inflate
the journal's many small ones). Then it takes what those runs handled (the model requests, the
entries, the texts written and read, the log lines) and times the floor of each part over the
same data: ``json.dumps`` of each entry, ``hashlib.sha256`` of the same bytes, an ``os.write``
append of them to an open file on tmpfs, a ``logging`` INFO record through a plain handler and
through the handler Airflow configured in this process. Every figure is the best of ``--rounds``.

Run by hand, not in CI, with the output (which holds the runs' log lines) sent to a file:
    python benchmarks/step_parts.py > /dev/shm/step_parts.log     # the table goes to stderr
    python benchmarks/step_parts.py --fernet > /dev/shm/step_parts.log   # encrypted, keyed fingerprints
"""

from __future__ import annotations

import argparse
import copy
import functools
import gc
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
if "--fernet" in sys.argv:
    os.environ["AIRFLOW__CORE__FERNET_KEY"] = "Z3Vlc3NhYmxlLWJlbmNobWFyay1rZXktbm90LXNlY3I="
sys.path.insert(0, str(Path(__file__).parent))

from agents import Runner
from openai_agents import agent
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal
from airflow.providers.common.ai.durable.core import divergence, encryption, entries, fingerprint, masking, steps
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.progress import ProgressLog
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.segments import SegmentedStorage
from airflow.providers.common.ai.durable.openai_agents import _agent_run, run_durably_sync

STEP_LOG = logging.getLogger(_agent_run.__name__)

spent: dict[str, int] = defaultdict(int)
calls: dict[str, int] = defaultdict(int)
_active: set[str] = set()
#: What the journal handled in the latest run, for the floors.
seen: dict[str, list] = defaultdict(list)


def timed(part: str, function, capture=None):
    """``function``, with its thread CPU time added to ``part`` (a call inside a call of the same part counts once)."""

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        if part in _active:
            return function(*args, **kwargs)
        _active.add(part)
        started = time.thread_time_ns()
        try:
            result = function(*args, **kwargs)
        finally:
            spent[part] += time.thread_time_ns() - started
            calls[part] += 1
            _active.discard(part)
        if capture is not None:
            capture(args, kwargs, result)
        return result

    return wrapped


def patch(owner, name: str, part: str, capture=None) -> None:
    # A name an older or newer provider does not have is left out (the script times either).
    if hasattr(owner, name):
        setattr(owner, name, timed(part, getattr(owner, name), capture))


def patch_everywhere(owner, name: str, part: str, capture=None) -> None:
    """``owner.name`` timed in every module of the provider that imported it by name."""
    original = getattr(owner, name)
    wrapped = timed(part, original, capture)
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("airflow.providers.common.ai.durable") and getattr(module, name, None) is original:
            setattr(module, name, wrapped)


class TimedResponses:
    """The adapter's TypeAdapter of a model answer, its dump and validation timed."""

    def __init__(self, adapter) -> None:
        self.dump_python = timed("the answer's pydantic dump", adapter.dump_python)
        self.validate_python = timed("the answer's pydantic validation", adapter.validate_python)


def instrument() -> None:
    # Where each function is looked up when called: the module that imported it by name.
    patch(
        divergence.ModelCalls,
        "fingerprint_and_parts",
        "model call: fingerprint and parts",
        lambda args, kwargs, result: seen["requests"].append(args[1]),
    )
    patch(
        _agent_run,
        "fingerprint",
        "tool call: fingerprint",
        lambda args, kwargs, result: seen["tool calls"].append(args[0]),
    )
    patch(_agent_run, "tool_call_parts", "tool call: parts")
    patch(
        _agent_run,
        "tool_call_fingerprint_and_parts",
        "tool call: fingerprint and parts",
        lambda args, kwargs, result: seen["tool calls"].append(
            {"name": args[0], "arguments": args[1], "call_id": args[2]}
        ),
    )
    for module in (fingerprint, divergence):
        patch(module, "canonical_json", "canonical JSON of calls")
        patch(module, "masked_json", "masking of calls' renderings")
        patch(module, "renders_without_a_secret", "masking of calls' renderings")
        patch(module, "fingerprint_of_json", "hashing")
    patch(fingerprint.FingerprintHasher, "update", "hashing")
    patch(fingerprint.FingerprintHasher, "fingerprint", "hashing")
    patch(divergence, "_prefix_digest", "hashing")
    patch(
        steps, "masked", "masking of stored values", lambda args, kwargs, result: seen["stored values"].append(args[0])
    )
    patch(steps, "masked_text", "masking of stored values")
    patch_everywhere(
        entries,
        "json_text",
        "entry JSON dump",
        lambda args, kwargs, result: (seen["entries"].append(args[0]), seen["entry texts"].append(result)),
    )
    patch(encryption, "_encrypted", "encryption")
    patch(encryption, "_decrypted", "decryption")
    # The storage's class: each try makes its own storage (a storage in segments reads them on first use).
    patch(
        SegmentedStorage,
        "write",
        "write (a record appended to the segment)",
        lambda args, kwargs, result: seen["written"].append(args[2]),
    )
    patch(SegmentedStorage, "read", "read", lambda args, kwargs, result: seen["read"].append(result))
    patch_everywhere(entries, "parsed_entry", "entry JSON parse")
    # Inside the parts above: what the fingerprints' and masking's time is made of.
    patch(fingerprint, "fingerprint_key", "of which: the key lookup (fingerprint_key)")
    patch(fingerprint, "_keying", "of which: the key lookup (fingerprint_key)")
    patch(masking, "_redact", "of which: Airflow's redact (in masking)")
    if hasattr(divergence, "_copied"):
        patch(divergence, "_copied", "of which: deep copy of new input items")
    else:
        divergence.copy = SimpleNamespace(deepcopy=timed("of which: deep copy of new input items", copy.deepcopy))
    divergence.json = SimpleNamespace(loads=timed("of which: json.loads in the parts", json.loads), dumps=json.dumps)
    patch(ProgressLog, "step_done", "log line: step_done and flush, all")
    patch(ProgressLog, "flush", "log line: step_done and flush, all")
    patch(
        STEP_LOG, "handle", "log line: the handlers", lambda args, kwargs, result: seen["log records"].append(args[0])
    )
    patch(DurableJournal, "_note_in_index", "index")
    _agent_run.RESPONSES = TimedResponses(_agent_run.RESPONSES)


def best_of(rounds: int, loop, repeat: int = 10) -> float:
    """The least thread CPU time, in ns, of ``loop`` over ``rounds`` rounds (each the mean of ``repeat`` calls)."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.thread_time_ns()
        for _ in range(repeat):
            loop()
        best = min(best, (time.thread_time_ns() - started) / repeat)
    return best


def floors(folder: str, rounds: int, fernet: bool) -> dict[str, float]:
    """The floor of each part, ns over what one recorded (or replayed) run handled."""
    requests, entries_, written, read = seen["requests"], seen["entries"], seen["written"], seen["read"]
    datas = [text.encode() for text in written]
    read_datas = [text.encode() for text in read if text is not None]
    # What json.loads reads: the entry, decrypted when the storage holds it encrypted.
    read_texts = [encryption.decrypt_text(text) if fernet else text for text in read if text is not None]
    result = {
        "json.dumps of each entry": best_of(rounds, lambda: [json.dumps(entry) for entry in entries_]),
        "json.dumps of each model request": best_of(
            rounds, lambda: [json.dumps(request, default=fingerprint._canonical) for request in requests]
        ),
        "json.dumps of each tool call": best_of(rounds, lambda: [json.dumps(call) for call in seen["tool calls"]]),
        "sha256 of each entry's bytes": best_of(rounds, lambda: [hashlib.sha256(data).hexdigest() for data in datas]),
        "sha256 of each request's JSON": best_of(
            rounds,
            lambda: [
                hashlib.sha256(json.dumps(request, default=fingerprint._canonical).encode()).hexdigest()
                for request in requests
            ],
        ),
        "redact of each entry's text, once": best_of(rounds, lambda: [current_host().redact(text) for text in written]),
        "json.loads of each entry read": best_of(rounds, lambda: [json.loads(text) for text in read_texts]),
    }
    appended = os.open(f"{folder}/appended", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    result["os.write append of each entry"] = best_of(rounds, lambda: [os.write(appended, data) for data in datas])
    os.close(appended)

    # A file an entry (the layout before segments): a new file, written, renamed into place.
    def created() -> None:
        for number, data in enumerate(datas):
            descriptor = os.open(f"{folder}/.{number}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            os.write(descriptor, data)
            os.close(descriptor)
            os.replace(f"{folder}/.{number}.tmp", f"{folder}/{number}.json")

    result["os.open, write, close, rename of each entry"] = best_of(rounds, created)
    with open(f"{folder}/appended", "rb") as opened:
        whole = opened.read()
    source = os.open(f"{folder}/appended", os.O_RDONLY)
    offsets, at = [], 0
    for data in read_datas:
        offsets.append((at, len(data)))
        at += len(data)
    result["os.pread of each entry read"] = best_of(
        rounds, lambda: [os.pread(source, size, at) for at, size in offsets]
    )
    os.close(source)
    del whole
    if fernet:
        from cryptography.fernet import Fernet

        key = Fernet(os.environ["AIRFLOW__CORE__FERNET_KEY"])
        plain_datas = [text.encode() for text in seen["entry texts"]]
        result["Fernet.encrypt of each entry"] = best_of(rounds, lambda: [key.encrypt(data) for data in plain_datas])
        tokens = [data[len(encryption.ENCRYPTED_PREFIX) :] for data in read_datas]
        result["Fernet.decrypt of each entry read"] = best_of(rounds, lambda: [key.decrypt(token) for token in tokens])
    # One record per line the run logged, as the journal's lines read.
    lines = [(record.msg, record.args) for record in seen["log records"]]
    plain = logging.getLogger("step_parts.plain")
    plain.propagate = False
    with open(f"{folder}/plain.log", "w") as log_file:
        handler = logging.StreamHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        plain.addHandler(handler)
        plain.setLevel(logging.INFO)
        result["logging INFO, plain handler to a tmpfs file"] = best_of(
            rounds, lambda: [plain.info(message, *args) for message, args in lines]
        )
        plain.removeHandler(handler)
    # A sibling of the journal's logger: the same handlers Airflow configured, none of the journal's code.
    airflow_logger = logging.getLogger(f"{_agent_run.__name__}_floor")
    result["logging INFO, Airflow's handler (this process)"] = best_of(
        rounds, lambda: [airflow_logger.info(message, *args) for message, args in lines]
    )
    result["log lines"] = len(lines)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--n", type=int, default=10, help="turns a run")
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind a round")
    parser.add_argument("--folder", default="/dev/shm", help="where the journal goes (tmpfs)")
    parser.add_argument("--fernet", action="store_true", help="a Fernet key set: entries encrypted, fingerprints keyed")
    arguments = parser.parse_args()
    n, steps_a_run = arguments.n, 2 * arguments.n + 1
    ids = {"dag_id": "bench", "run_id": "r", "task_id": "t", "map_index": -1}
    with tempfile.TemporaryDirectory(dir=arguments.folder) as folder:
        instrument()

        def storage():
            inner = cache_path_journal(UPath(f"file://{folder}/cache"), **ids)
            return encryption.EncryptedStorage(inner) if arguments.fernet else inner

        def durable(answers: bool):
            with journal_scope(DurableJournal(storage())):
                return run_durably_sync(agent(n, answers=answers), "go", max_turns=n + 2)

        kinds = {
            "plain": lambda: Runner.run_sync(agent(n, answers=True), "go", max_turns=n + 2),
            "record": lambda: durable(True),
            "replay": lambda: durable(False),
        }
        best: dict[str, dict[str, float]] = {}
        counted: dict[str, dict[str, float]] = {}
        kept: dict[str, dict[str, list]] = {}
        for kind in kinds:  # untimed: imports and caches
            if kind == "record":
                storage().delete_all(())
            kinds[kind]()
        for _ in range(arguments.rounds):
            totals: dict[str, dict[str, float]] = {kind: defaultdict(float) for kind in kinds}
            for _ in range(arguments.runs):
                for kind, run in kinds.items():
                    if kind == "record":
                        storage().delete_all(())
                    spent.clear()
                    calls.clear()
                    seen.clear()
                    gc.collect()
                    started = time.process_time_ns()
                    assert run().final_output == "done"
                    totals[kind]["whole run"] += time.process_time_ns() - started
                    for part, ns in spent.items():
                        totals[kind][part] += ns
                    counted[kind] = dict(calls)
                    kept[kind] = {what: list(values) for what, values in seen.items()}
            for kind, parts in totals.items():
                mine = best.setdefault(kind, {})
                for part, ns in parts.items():
                    mine[part] = min(mine.get(part, float("inf")), ns / arguments.runs)
        load = os.getloadavg()[0]
        measured = {}
        for kind in ("record", "replay"):
            seen.clear()
            seen.update(kept[kind])
            measured[kind] = floors(folder, arguments.rounds, arguments.fernet)
    out = sys.stderr
    print(
        f"N = {n} ({steps_a_run} steps a run), file:// on {arguments.folder}, best of {arguments.rounds} rounds of "
        f"{arguments.runs} runs (parts) and of {arguments.rounds} loops (floors), load {load:.1f}, "
        f"fernet {'on' if arguments.fernet else 'off'}",
        file=out,
    )
    plain = best["plain"]["whole run"]
    print(f"plain run: {plain / 1e6:.2f} ms, {plain / steps_a_run / 1e3:.1f} us a step", file=out)
    for kind in ("record", "replay"):
        whole = best[kind]["whole run"]
        print(
            f"\n{kind}: {whole / 1e6:.2f} ms a run ({whole / plain:.2f}x plain), "
            f"{(whole - plain) / steps_a_run / 1e3:.1f} us a step over plain",
            file=out,
        )
        print(f"{'part':<40}{'calls/run':>10}{'us/call':>10}{'us/step':>10}", file=out)
        for part, ns in sorted(best[kind].items(), key=lambda item: -item[1]):
            if part == "whole run":
                continue
            number = counted[kind].get(part, 0)
            print(f"{part:<40}{number:>10}{ns / max(number, 1) / 1e3:>10.1f}{ns / steps_a_run / 1e3:>10.1f}", file=out)
        print(f"{'floor, over the same data':<40}{'items':>10}{'us/item':>10}{'us/step':>10}", file=out)
        data = measured[kind]
        sizes = {
            "entry": len(kept[kind].get("entries", [])) if kind == "record" else len(kept[kind].get("read", [])),
            "written": len(kept[kind].get("written", [])),
            "request": len(kept[kind].get("requests", [])),
            "tool call": len(kept[kind].get("tool calls", [])),
        }
        for what, ns in data.items():
            if what == "log lines":
                continue
            items = (
                sizes["request"]
                if "request" in what
                else sizes["tool call"]
                if "tool call" in what
                else data["log lines"]
                if "logging" in what
                else len(kept[kind].get("read", []))
                if "read" in what
                else len(kept[kind].get("entries", []))
                if "of each entry" in what and "rename" not in what and "append" not in what and "sha256" not in what
                else sizes["written"]
            )
            print(f"{what:<40}{items:>10}{ns / max(items, 1) / 1e3:>10.1f}{ns / steps_a_run / 1e3:>10.1f}", file=out)


if __name__ == "__main__":
    main()
