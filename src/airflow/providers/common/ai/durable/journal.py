"""
The durable journal of one task instance, neutral of any agent framework.

A journal holds agent runs, numbered in the order a try starts them; a run started while a step
runs is numbered under that step. A run holds steps at positions 1, 2, ... A step is claimed with
a kind, a name and a fingerprint of what it asks: it replays the matching recorded entry, or runs
live and is recorded when it completes, or fails and is not recorded. The first step of a run
that does not match its entry runs live, and so does every later step of that run.

Each entry is one JSON object under the key ``<run>.<position>`` (a nested run's key starts with
its step's key, as in ``1.3.1.2``). Entries are chained: each names the digest of the step before
it, so an entry left over from an older, longer try can never be taken for a step that follows
different ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from airflow.providers.common.ai.durable.storage import JournalStorage

log = logging.getLogger(__name__)

#: The format version every entry carries. A change to the entry's fields is a new version.
FORMAT_VERSION = 1
_READABLE_FORMATS = frozenset({1})

_DONE, _IN_FLIGHT, _DISCARDED = "done", "in_flight", "discarded"

_scoped_journal: ContextVar[DurableJournal | None] = ContextVar("durable_scoped_journal", default=None)
_running_step: ContextVar[JournalStep | None] = ContextVar("durable_running_step", default=None)


def _masked(value: Any) -> Any:
    """``value`` with every secret Airflow's masker knows replaced, walked string by string."""
    # Not redact(value) on the whole structure: it also hides every value under a key that looks
    # sensitive, and a recorded answer's "input_tokens" would come back as "***".
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(item) for item in value]
    return value


def _redact(text: str) -> str:
    from airflow.sdk._shared.secrets_masker import redact

    return redact(text)


@dataclass
class JournalStats:
    """What the steps of one journal did in this try, by kind (``"model"``, ``"tool"``, ...)."""

    replayed: Counter[str] = field(default_factory=Counter)
    ran_live: Counter[str] = field(default_factory=Counter)
    recorded: Counter[str] = field(default_factory=Counter)
    #: Steps that ran live but could not be recorded, each named with its position and why.
    not_recorded: list[str] = field(default_factory=list)
    #: Tokens the replayed steps had cost when they ran (from their recorded ``meta["tokens"]``).
    tokens_saved: int = 0

    def summary(self) -> str:
        def by_kind(counter: Counter[str]) -> str:
            total = sum(counter.values())
            kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(counter.items()))
            return f"{total} ({kinds})" if kinds else "0"

        not_recorded = len(self.not_recorded)
        named = f" ({'; '.join(self.not_recorded)})" if not_recorded else ""
        return (
            f"Durable: replayed {by_kind(self.replayed)}, ran live {by_kind(self.ran_live)}, "
            f"could not record {not_recorded}{named}, saved {self.tokens_saved} tokens by replaying"
        )


class JournalStep:
    """
    One call at one position of a run: replayed (``replayed`` and ``result`` are set) or live.

    A live step is recorded with :meth:`record` when it completes, or marked failed with
    :meth:`fail`; code that may start agent runs of its own, or ask for an idempotency key, runs
    inside :meth:`running`.
    """

    def __init__(self, run: DurableRun, position: int, kind: str, name: str, fingerprint: str | None) -> None:
        self.run = run
        self.key = f"{run.path}.{position}"
        self.kind = kind
        self.name = name
        self.fingerprint = fingerprint
        #: The digest of the step before this one in its run (of the parent step for a nested run's first).
        self.follows = run.follows
        self.digest = hashlib.sha256(f"{self.follows}\0{kind}\0{name}\0{fingerprint}".encode()).hexdigest()
        self.replayed = False
        #: The recorded result, when replayed.
        self.result: Any = None
        #: What was recorded beside the result, when replayed.
        self.meta: dict[str, Any] = {}
        #: An earlier try started this very call and never finished it.
        self.interrupted = False
        # Whether runs started inside this step may replay their own entries: not once the run
        # has diverged, since what was recorded under a different call is stale.
        self.reads_nested_runs = run.reads
        self._nested_runs = 0
        # What the journal held at this position before this try: None when it was not looked up.
        self._found_entry: bool | None = None
        self._recorded_runs = 0
        self._finished = False

    @property
    def idempotency_key(self) -> str:
        """The same string on every try for this task instance, run and position."""
        identity = f"{self.run.journal.storage.identity}\0{self.key}"
        return f"durable-{hashlib.sha256(identity.encode()).hexdigest()[:32]}"

    def describe(self) -> str:
        return f"{self.kind} {self.name!r} at {self.key}"

    @contextlib.contextmanager
    def running(self, *, mark_in_flight: bool = False) -> Iterator[JournalStep]:
        """
        Run the live call of this step inside this block.

        With ``mark_in_flight``, the step is written as started first, so a try that dies during
        the call leaves the next try a record that this call was interrupted. An exception out of
        the block marks the step failed.
        """
        if mark_in_flight:
            self.run.journal._write(self, self._entry(_IN_FLIGHT), what="in-flight mark")
        token = _running_step.set(self)
        try:
            yield self
        except BaseException as error:
            self.fail(f"it raised {type(error).__name__}")
            raise
        finally:
            _running_step.reset(token)

    def record(self, result: Any, *, meta: dict[str, Any] | None = None) -> bool:
        """
        Record the result of this live step, masked; return whether it was recorded.

        A result that is not JSON, or a write the store refuses, is logged and counted as not
        recorded: the step runs again on the next try and nothing recorded before is touched.
        """
        self._finish()
        entry = self._entry(_DONE, result=_masked(result), meta=meta or {}, runs=self._nested_runs)
        return self.run.journal._write(self, entry, what="result")

    def fail(self, reason: str = "it failed") -> None:
        """Mark this live step failed: it is not recorded and runs again on the next try."""
        if self._finished:
            return
        self._finish()
        log.debug("Durable: step failed, so it runs live again next try step=%s reason=%r", self.describe(), reason)

    def refuse_replay(self, reason: str) -> None:
        """
        The recorded result can no longer be used (for example its types no longer load): this
        step runs live, and so does every later step of its run.
        """
        stats = self.run.journal.stats
        stats.replayed[self.kind] -= 1
        stats.replayed += Counter()  # drops the kind if nothing of it replayed
        tokens = self.meta.get("tokens")
        stats.tokens_saved -= tokens if isinstance(tokens, int) else 0
        self.replayed, self.result, self.meta = False, None, {}
        self.run._diverge(self, reason)

    def discard(self, reason: str) -> None:
        """
        Keep the next try from replaying this step's recorded entry, for example a model answer
        that made the run fail and would fail it the same way again.
        """
        log.info("Durable: the next try runs this call live again step=%s reason=%r", self.describe(), reason)
        self.run.journal._write(self, self._entry(_DISCARDED), what="discard mark")

    def _finish(self) -> None:
        self._finished = True
        self.run.journal.stats.ran_live[self.kind] += 1

    def _entry(self, state: str, **fields: Any) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "kind": self.kind,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "follows": self.follows,
            "state": state,
            **fields,
        }


class DurableRun:
    """One agent run in a journal: hands out its steps at positions 1, 2, ... in claim order."""

    def __init__(self, journal: DurableJournal, path: str, *, follows: str, reads: bool) -> None:
        self.journal = journal
        self.path = path
        self.follows = follows
        #: Whether claims still look for recorded entries; off once the run has diverged.
        self.reads = reads
        self._positions = count(1)
        #: The steps claimed in this try, in position order.
        self.steps: list[JournalStep] = []

    def claim(self, kind: str, name: str, fingerprint: str | None) -> JournalStep:
        """
        Take the next position for a call of ``kind`` named ``name`` asking what ``fingerprint``
        digests, and say whether it replays.

        Claims are numbered in the order they are made; a caller running calls concurrently
        claims them first, in the order it wants them to keep on every try.
        """
        step = JournalStep(self, next(self._positions), kind, name, fingerprint)
        self.follows = step.digest
        self.steps.append(step)
        if fingerprint is None:
            self._diverge(step, "what it asks could not be fingerprinted")
        elif self.reads:
            self._look_up(step)
        log.debug("Durable: claimed step=%s replayed=%s", step.describe(), step.replayed)
        return step

    def _look_up(self, step: JournalStep) -> None:
        journal = self.journal
        entry, problem = journal._read_entry(step.key)
        step._found_entry = entry is not None
        if problem:
            self._diverge(step, problem)
            return
        if entry is None:
            return
        if (entry.get("kind"), entry.get("name")) != (step.kind, step.name):
            self._diverge(step, f"the recorded call there is {entry.get('kind')} {entry.get('name')!r}")
        elif entry.get("fingerprint") != step.fingerprint:
            self._diverge(step, "it asks something other than the recorded call")
        elif entry.get("follows") != step.follows:
            self._diverge(step, "an earlier call of this run changed since it was recorded")
        elif entry.get("state") == _IN_FLIGHT:
            step.interrupted = True
            log.warning(
                "Durable: a call an earlier try started and never finished runs again step=%s idempotency_key=%s",
                step.describe(),
                step.idempotency_key,
            )
        elif entry.get("state") == _DONE:
            step.replayed = True
            step.result = entry.get("result")
            step.meta = entry.get("meta") or {}
            step._recorded_runs = _recorded_runs(entry)
            journal.stats.replayed[step.kind] += 1
            tokens = step.meta.get("tokens")
            if isinstance(tokens, int):
                journal.stats.tokens_saved += tokens

    def _diverge(self, step: JournalStep, reason: str) -> None:
        self.reads = False
        step.reads_nested_runs = False
        log.warning(
            "Durable: run diverged; this call and every later call of run %s run live step=%s reason=%r",
            self.path,
            step.describe(),
            reason,
        )


class DurableJournal:
    """
    The journal of one task instance: what each agent run's calls returned on earlier tries.

    ``storage`` keeps the entries (the task state store, ``durable_cache_path``, or memory). With
    ``clean_up_after_run``, the journal deletes itself when a top-level run completes; inside
    Airflow it is instead deleted when the task instance succeeds.
    """

    def __init__(self, storage: JournalStorage, *, clean_up_after_run: bool = False) -> None:
        self.storage = storage
        self.clean_up_after_run = clean_up_after_run
        self.stats = JournalStats()
        self._top_level_runs = count(1)
        self._runs: dict[str, DurableRun] = {}

    @contextlib.contextmanager
    def run(self) -> Iterator[DurableRun]:
        """
        Start an agent run: top-level, or nested under the step running in this context.
        """
        parent = _running_step.get()
        if parent is not None and parent.run.journal is self:
            parent._nested_runs += 1
            path = f"{parent.key}.{parent._nested_runs}"
            run = DurableRun(self, path, follows=parent.digest, reads=parent.reads_nested_runs)
        else:
            run = DurableRun(self, str(next(self._top_level_runs)), follows="", reads=True)
        self._runs[run.path] = run
        log.debug("Durable: run %s started", run.path)
        yield run
        if self.clean_up_after_run and parent is None:
            self.delete()

    def finish(self, *, succeeded: bool) -> None:
        """Log this try's summary; once the task instance succeeded, delete the journal."""
        log.info(self.stats.summary())
        if succeeded:
            self.delete()

    def delete(self) -> None:
        """Delete every entry any try recorded."""
        self.storage.delete_all(self._stored_keys())
        log.info("Durable: journal deleted")

    def _read_entry(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """The entry under ``key`` (``None`` if there is none), or why it cannot be read."""
        try:
            text = self.storage.read(key)
        except Exception as error:
            return None, f"the store could not read it: {error}"
        if text is None:
            return None, None
        try:
            entry = json.loads(text)
        except ValueError as error:
            return None, f"the recorded entry is not JSON: {error}"
        if not isinstance(entry, dict):
            return None, "the recorded entry is not a JSON object"
        if entry.get("format") not in _READABLE_FORMATS:
            return None, f"the recorded entry has format {entry.get('format')!r}, this release reads {FORMAT_VERSION}"
        return entry, None

    def _write(self, step: JournalStep, entry: dict[str, Any], *, what: str) -> bool:
        try:
            text = json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            return self._not_recorded(step, what, f"it is not JSON: {error}")
        try:
            self.storage.write(step.key, text)
        except Exception as error:
            return self._not_recorded(step, what, f"the store refused it: {error}")
        if entry["state"] == _DONE:
            self.stats.recorded[step.kind] += 1
        return True

    def _not_recorded(self, step: JournalStep, what: str, reason: str) -> bool:
        log.warning(
            "Durable: could not record a step, so it runs again next try step=%s what=%s reason=%r",
            step.describe(),
            what,
            reason,
        )
        if what == "result":
            self.stats.not_recorded.append(f"{step.describe()}: {reason}")
        return False

    def _stored_keys(self) -> Iterator[str]:
        """
        Every key stored. Runs and positions are numbered without gaps, so what this try did not
        claim itself is found by reading on until a key is missing.
        """
        for number in count(1):
            path = str(number)
            if path in self._runs:
                yield from self._claimed_keys(self._runs[path])
            elif not (yield from self._stored_keys_of_run(path)):
                return

    def _claimed_keys(self, run: DurableRun) -> Iterator[str]:
        for step in run.steps:
            yield step.key
            for number in range(1, step._nested_runs + 1):
                yield from self._claimed_keys(self._runs[f"{step.key}.{number}"])
            if step.replayed:
                for number in range(1, step._recorded_runs + 1):
                    yield from self._stored_keys_of_run(f"{step.key}.{number}")
            elif step._found_entry is not False:
                # The entry this try replaced may have started more runs than this try did.
                yield from self._stored_runs_under(step.key, start=step._nested_runs + 1)
        yield from self._stored_keys_of_run(run.path, start=len(run.steps) + 1)

    def _stored_runs_under(self, key: str, *, start: int) -> Iterator[str]:
        for number in count(start):
            if not (yield from self._stored_keys_of_run(f"{key}.{number}")):
                return

    def _stored_keys_of_run(self, path: str, *, start: int = 1) -> Iterator[str]:
        """The stored keys of run ``path`` from position ``start`` on; returns whether there were any."""
        for position in count(start):
            key = f"{path}.{position}"
            entry, problem = self._read_entry(key)
            if entry is None and problem is None:
                return position > start
            yield key
            # A completed entry says how many runs it started; under an unfinished one they are probed.
            if entry is not None and entry.get("state") == _DONE:
                for number in range(1, _recorded_runs(entry) + 1):
                    yield from self._stored_keys_of_run(f"{key}.{number}")
            else:
                yield from self._stored_runs_under(key, start=1)


def _recorded_runs(entry: dict[str, Any]) -> int:
    runs = entry.get("runs")
    return runs if isinstance(runs, int) else 0


@contextlib.contextmanager
def journal_scope(journal: DurableJournal) -> Iterator[DurableJournal]:
    """Make ``journal`` the current journal inside this block (for this thread or task)."""
    token = _scoped_journal.set(journal)
    try:
        yield journal
    finally:
        _scoped_journal.reset(token)


def current_journal() -> DurableJournal | None:
    """
    The current journal: the one of an enclosing :func:`journal_scope`, else, inside a running
    Airflow task, the one bound to that task instance; ``None`` outside a task.

    Raises an ``AirflowConfigException`` inside a task on Airflow before 3.3 when
    ``[common.ai] durable_cache_path`` is not set.
    """
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    from airflow.providers.common.ai.durable.task_instance import journal_of_running_task

    return journal_of_running_task()


def running_step() -> JournalStep | None:
    """The live step whose call is running in this context, if any."""
    return _running_step.get()
