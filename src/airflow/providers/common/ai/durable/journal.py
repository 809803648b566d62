"""
The durable journal of one task instance, neutral of any agent framework.

A journal holds agent runs; a run started while a step runs is numbered under that step. A run
takes its number at its first call: the number of the recorded run whose first call asked the
same, else a new one. A run holds steps at positions 1, 2, ... A step is claimed with
a kind, a name and a fingerprint of what it asks: it replays the matching recorded entry, or runs
live and is recorded when it completes, or fails and is not recorded. The first step of a run
that does not match its entry runs live, and so does every later step of that run.

Each entry is one JSON object under the key ``<run>.<position>`` (a nested run's key starts with
its step's key, as in ``1.3.1.2``). Entries are chained: each names the digest of the step before
it, so an entry left over from an older, longer try can never be taken for a step that follows
different ones.

Where each read is a round trip (the task state store on a worker, an object store), a top-level
run that ends also writes a snapshot: every entry of the run under the key ``0.<run>``, so a retry
reads the run in one call. A snapshot only ever holds what the entries' own keys hold: a try that
writes an entry of a run first sets the run's snapshot aside (an empty one), and writes a new one
when the run ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from airflow.providers.common.ai.durable.divergence import why_calls_differ
from airflow.providers.common.ai.durable.fingerprint import recorded_form
from airflow.providers.common.ai.durable.journal_io import JournalIO
from airflow.providers.common.ai.durable.masking import masked, masked_text
from airflow.providers.common.ai.durable.storage import JournalStorage
from airflow.providers.common.ai.durable.usage import ModelUsage, TryUsage

log = logging.getLogger(__name__)

#: The format version every entry carries. A change to the entry's fields is a new version.
#: Format 3 added "parts" (the digests that name what changed); format 4 stores, for a model call
#: after the first of its run, only the digests of the input items it added. Formats 2 and 3 replay
#: as they are: their fingerprints are the ones this release computes.
FORMAT_VERSION = 4
_READABLE_FORMATS = frozenset({2, 3, 4})

# The states of an entry: only a done one replays. A started entry holds a new run's number; an
# in-flight one marks a call that an idempotency key guards; a masked one held a secret.
_DONE, _IN_FLIGHT, _STARTED, _FAILED, _DISCARDED, _MASKED = (
    "done",
    "in_flight",
    "started",
    "failed",
    "discarded",
    "masked",
)
# Why an entry in each other state runs live. Keyed by object: a state read from storage may be anything.
_WHY_LIVE: dict[object, str] = {
    _MASKED: "its recorded result held a secret and is stored masked",
    _FAILED: "it failed on an earlier try",
    _DISCARDED: "an earlier try discarded it",
    _STARTED: "an earlier try started it and never finished it",
}
#: The entry naming every step that runs were started under, for clean-up (no run is numbered 0).
_INDEX_KEY = "0"
#: How many recorded entries a replaying run reads ahead of its claims, where reads are round trips.
_READ_AHEAD = 8
#: How to tell apart runs that ask the same.
_NAME_THE_RUNS = "give each its own durable_key (run_durably(..., durable_key=...))"
#: What sets a run's snapshot aside: a snapshot of no entries.
_NO_SNAPSHOT = json.dumps({"format": FORMAT_VERSION, "kind": "snapshot", "entries": {}}, separators=(",", ":"))

_scoped_journal: ContextVar[DurableJournal | None] = ContextVar("durable_scoped_journal", default=None)
_running_step: ContextVar[JournalStep | None] = ContextVar("durable_running_step", default=None)


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
    #: Requests the replayed steps had cost: one for each replayed step that recorded tokens.
    requests_saved: int = 0
    #: The steps that ran live but could not be recorded, by kind.
    not_recorded_kinds: Counter[str] = field(default_factory=Counter)
    #: What the live steps used, by step name (a model's name), as they reported it with ``used``.
    used: dict[str, ModelUsage] = field(default_factory=dict)
    #: Each divergence of this try: the step's key, the step, and why it did not line up.
    divergences: list[tuple[str, str, str]] = field(default_factory=list)
    #: Each decision on tool calls that needed approval, with who gave it ("issue_refund approved by alice").
    approvals: list[str] = field(default_factory=list)
    #: Runs that ran live because they could not be told apart from another run asking the same (R-51).
    indistinct_runs: int = 0

    def usage(self) -> TryUsage:
        """This try's usage so far, as ``AgentOperator`` pushes it to XCom."""
        return TryUsage(
            models={name: dataclasses.replace(usage) for name, usage in self.used.items()},
            saved_requests=self.requests_saved,
            saved_tokens=self.tokens_saved,
            replayed=dict(+self.replayed),
            live=dict(+self.ran_live),
            not_recorded=dict(+self.not_recorded_kinds),
        )

    def _count_saved(self, meta: dict[str, Any], sign: int = 1) -> None:
        tokens = meta.get("tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.tokens_saved += sign * tokens
            self.requests_saved += sign

    def summary(self) -> str:
        def by_kind(counter: Counter[str]) -> str:
            total = sum(counter.values())
            kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(counter.items()))
            return f"{total} ({kinds})" if kinds else "0"

        not_recorded = len(self.not_recorded)
        named = f" ({'; '.join(self.not_recorded)})" if not_recorded else ""
        approvals = f", approvals: {'; '.join(self.approvals)}" if self.approvals else ""
        indistinct = (
            f", {self.indistinct_runs} runs ran live that ask the same as another run in flight: {_NAME_THE_RUNS}"
            if self.indistinct_runs
            else ""
        )
        return (
            f"Durable: replayed {by_kind(self.replayed)}, ran live {by_kind(self.ran_live)}, "
            f"could not record {not_recorded}{named}, saved {self.tokens_saved} tokens by replaying{approvals}"
            f"{indistinct}"
        )


class JournalStep:
    """
    One call at one position of a run: replayed (``replayed`` and ``result`` are set) or live.

    A live step is recorded with :meth:`record` when it completes, or marked failed with
    :meth:`fail`; code that may start agent runs of its own, or ask for an idempotency key, runs
    inside :meth:`running`.
    """

    def __init__(
        self,
        run: DurableRun,
        position: int,
        kind: str,
        name: str,
        fingerprint: str | None,
        parts: dict[str, Any] | None = None,
    ) -> None:
        self.run = run
        self.position = position
        self.key = f"{run.path}.{position}"
        self.kind = kind
        self.name = name
        self.fingerprint = fingerprint
        #: Digests of each part of what the call asks, to name what changed when it diverges.
        self.parts = parts
        #: The digest of the step before this one in its run (of the parent step for a nested run's first).
        self.follows = run.follows
        self.digest = hashlib.sha256(f"{self.follows}\0{kind}\0{name}\0{fingerprint}".encode()).hexdigest()
        self.replayed = False
        #: The recorded result, when replayed.
        self.result: Any = None
        #: What was recorded beside the result, when replayed.
        self.meta: dict[str, Any] = {}
        #: What this try recorded for this live step (masked), once it did.
        self.recorded: Any = None
        #: An earlier try started this very call and never finished it.
        self.interrupted = False
        #: The journal was read at this step's position and held nothing there.
        self.nothing_recorded = False
        # Whether runs started inside this step may replay their own entries: not once the run
        # has diverged, since what was recorded under a different call is stale.
        self.reads_nested_runs = run.reads
        # Whether this try wrote a mark (in flight, started) that a result or a failure must replace.
        self._marked = False
        # Why this call, though it returned, did not complete and must not be recorded.
        self._incomplete: str | None = None
        #: Why this live step failed, once it did: it is not recorded and runs again next try.
        self.failure: str | None = None
        self._finished = False
        # Whether this replayed step is counted in the try's summary (see handed_out), and when.
        self._counted = False
        self._counted_when_handed_out = False
        # The tokens this live call reported with used(), recorded with its result.
        self._tokens: int | None = None

    def take_recorded_fingerprint(self, recorded: Any) -> None:
        """
        Take ``recorded`` as this step's fingerprint when it is this call's under an older key of
        ``[core] fernet_key`` (a rotation put a new key in front), so that the steps after it follow
        the chain that was recorded.
        """
        form = recorded_form(recorded, self.fingerprint)
        if form is None or form == self.fingerprint:
            return
        self.fingerprint = form
        self.digest = hashlib.sha256(f"{self.follows}\0{self.kind}\0{self.name}\0{form}".encode()).hexdigest()
        self.run.follows = self.digest

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
        the block marks the step failed; a ``BaseException`` that is not an ``Exception`` (a task
        timeout, a cancellation) leaves it marked in flight.
        """
        if mark_in_flight:
            self._mark(_IN_FLIGHT, "in-flight mark")
        token = _running_step.set(self)
        try:
            yield self
        except Exception as error:
            self.fail(f"it raised {type(error).__name__}")
            raise
        except BaseException:
            # Cut off (the task's timeout, a cancellation, the process exiting): the call may have
            # done its work, so its in-flight mark stays and the next try warns with its key.
            self._finish()
            raise
        finally:
            _running_step.reset(token)

    def record(self, result: Any, *, meta: dict[str, Any] | None = None) -> bool:
        """
        Record the result of this live step, masked; return whether a next try can replay it.

        A result that is not JSON, or a write the store refuses, is logged and named in the
        summary: the step runs again on the next try and nothing recorded before is touched. A
        result that held a secret is stored masked and runs live again: a replay must never hand
        on ``***`` in place of the secret. The write may still be on its way to the store (see
        :meth:`DurableJournal.settle`); a store that refuses it then is reported as above.
        """
        if self._incomplete is not None:
            self.fail(self._incomplete)
            return False
        self._finish()
        stored, held_a_secret = masked(result)
        state = _MASKED if held_a_secret else _DONE
        meta = {**({"tokens": self._tokens} if self._tokens is not None else {}), **(meta or {})}
        written = self.run.journal._write(self, self._entry(state, result=stored, meta=meta), what="result")
        if written:
            self.recorded = stored
        if written and held_a_secret:
            self.run.journal._not_recorded(self, "result", "it held a secret, which is stored masked")
        return written and not held_a_secret

    def used(self, *, requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> None:
        """
        Count what this live call used (a model call's requests and tokens) in the try's usage; its
        tokens are recorded with its result, so that a replay knows what it saved.
        """
        usage = self.run.journal.stats.used.setdefault(self.name, ModelUsage())
        usage.add(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total_tokens)
        self._tokens = total_tokens

    def keep_live(self, reason: str) -> None:
        """This call will return without having completed (a run it started stopped): never record it."""
        self._incomplete = reason

    def not_recordable(self, reason: str) -> None:
        """This live step completed, but its result cannot be recorded: it runs again next try."""
        self._finish()
        self.run.journal._not_recorded(self, "result", reason)
        self._mark(_FAILED, "failure mark")

    def fail(self, reason: str = "it failed") -> None:
        """Mark this live step failed: it is not recorded and runs again on the next try."""
        if self._finished:
            return
        self._finish()
        self.failure = reason
        log.debug("Durable: step failed, so it runs live again next try step=%s reason=%r", self.describe(), reason)
        self._mark(_FAILED, "failure mark")

    def handed_out(self) -> None:
        """Count this replayed step in the try's summary and usage: its recorded result was used."""
        if self.replayed and not self._counted:
            self._counted = True
            self.run.journal.stats.replayed[self.kind] += 1
            self.run.journal.stats._count_saved(self.meta)

    def refuse_replay(self, reason: str) -> None:
        """
        The recorded result can no longer be used (for example its types no longer load): this
        step runs live, and so does every later step of its run.
        """
        if self._counted:
            stats = self.run.journal.stats
            stats.replayed[self.kind] -= 1
            stats.replayed += Counter()  # drops the kind if nothing of it replayed
            stats._count_saved(self.meta, sign=-1)
        self.replayed, self.result, self.meta, self._counted = False, None, {}, False
        self.run._diverge(self, reason)

    def discard(self, reason: str) -> None:
        """
        Keep the next try from replaying this step's recorded entry, for example a model answer
        that made the run fail and would fail it the same way again.
        """
        log.info("Durable: the next try runs this call live again step=%s reason=%r", self.describe(), reason)
        self.run.journal._write(self, self._entry(_DISCARDED), what="discard mark")

    def _mark(self, state: str, what: str) -> None:
        # A failure only replaces a mark this try wrote: with none, the next try runs it live anyway.
        if state == _FAILED and not self._marked:
            return
        self._marked = self.run.journal._write(self, self._entry(state), what=what) or self._marked

    def _finish(self) -> None:
        self._finished = True
        self.run.journal.stats.ran_live[self.kind] += 1

    def _entry(self, state: str, **fields: Any) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "kind": self.kind,
            # A name that holds a secret is stored masked: it then matches no call and runs live.
            "name": masked_text(self.name),
            "fingerprint": self.fingerprint,
            "follows": self.follows,
            "state": state,
            **({"parts": self.parts} if self.parts is not None else {}),
            **({"twins": sorted(self.run.twins)} if self.position == 1 and self.run.twins else {}),
            **fields,
        }


class DurableRun:
    """
    One agent run in a journal: hands out its steps at positions 1, 2, ... in claim order.

    Its number is taken at its first claim, by what that first call asks: a run matches the
    recorded run whose first call asks the same (and carries the same ``key``), whatever order
    runs started in; among equal ones, the order of their first calls decides.
    """

    def __init__(self, journal: DurableJournal, parent: JournalStep | None, *, key: str | None) -> None:
        self.journal = journal
        self.parent = parent
        self.key = key
        #: ``<number>`` or ``<parent step key>.<number>``; set at the first claim.
        self.path = ""
        self.number = 0
        #: The numbers of the runs under the same parent this run cannot be told apart from (R-51).
        self.twins: set[int] = set()
        base = parent.digest if parent is not None else ""
        self.follows: str = base if key is None else hashlib.sha256(f"{base}\0durable_key\0{key}".encode()).hexdigest()
        #: Whether claims still look for recorded entries; off once the run has diverged.
        self.reads: bool = parent.reads_nested_runs if parent is not None else True
        self._positions = count(1)
        #: The steps claimed in this try, in position order.
        self.steps: list[JournalStep] = []
        #: Whether the run took a number no recorded run had: the store holds only this try's entries under it.
        self.numbered_new = False
        # Reads of recorded entries queued before their claims, by position (see _recorded_entry).
        self._ahead: dict[int, Future[str | None]] = {}
        self._reads_ahead = journal._io.in_background
        #: Whether the run keeps a snapshot of its entries (see the module's docstring).
        self.snapshots = parent is None and journal._io.in_background
        # The read of the snapshot of the recorded run this one took the number of, and its entries.
        self._snapshot_read: Future[str | None] | None = None
        self._snapshot: dict[int, str] | None = None
        # The text the store holds at each position, as far as this try knows: the next snapshot.
        self._stored: dict[int, str] = {}
        # Whether this try wrote the snapshot's key: True once it did, None if a write of it failed.
        self._wrote_snapshot: bool | None = False

    def claim(
        self,
        kind: str,
        name: str,
        fingerprint: str | None,
        *,
        parts: dict[str, Any] | None = None,
        counted_when_handed_out: bool = False,
    ) -> JournalStep:
        """
        Take the next position for a call of ``kind`` named ``name`` asking what ``fingerprint``
        digests, and say whether it replays. ``parts`` digests each part of what it asks, so that
        a divergence names the part that changed. A replayed step counts as replayed when claimed,
        or, with ``counted_when_handed_out``, once :meth:`JournalStep.handed_out` says its result
        was used (a call claimed ahead, which the caller may never make).

        Claims are numbered in the order they are made; a caller running calls concurrently
        claims them first, in the order it wants them to keep on every try.
        """
        new_run = False
        found: _Lookup | None = None
        if not self.path:
            found, unmatched = self.journal._number(self, kind, name, fingerprint, parts)
            new_run = self.numbered_new = found is None
            if self.snapshots:
                self._open_snapshot(found)
        step = JournalStep(self, next(self._positions), kind, name, fingerprint, parts)
        step._counted_when_handed_out = counted_when_handed_out
        self.follows = step.digest
        self.steps.append(step)
        if fingerprint is None:
            self._diverge(step, "what it asks could not be fingerprinted")
        elif new_run:
            # Nothing was recorded under a new number: no need to look.
            self.reads = step.reads_nested_runs = False
            if unmatched:
                self._diverge(step, unmatched)
        elif self.reads:
            self._look_up(step, found)
        if new_run:
            # The first entry of a run under a new number holds that number from now on.
            step._mark(_STARTED, "start mark")
        log.debug("Durable: claimed step=%s replayed=%s", step.describe(), step.replayed)
        return step

    def _look_up(self, step: JournalStep, found: _Lookup | None) -> None:
        entry, problem = found if found is not None else self._recorded_entry(step.position)
        if problem:
            self._diverge(step, problem)
            return
        if entry is None:
            step.nothing_recorded = True
            return
        state = entry.get("state")
        if (entry.get("kind"), entry.get("name")) == (step.kind, step.name):
            step.take_recorded_fingerprint(entry.get("fingerprint"))
        if (entry.get("kind"), entry.get("name")) != (step.kind, step.name):
            self._diverge(step, _another_call(entry, step.kind))
        elif entry.get("fingerprint") != step.fingerprint:
            self._diverge(step, why_calls_differ(entry, step.fingerprint or "", step.parts))
        elif entry.get("follows") != step.follows:
            self._diverge(step, "an earlier call of this run changed since it was recorded")
        elif state == _IN_FLIGHT:
            step.interrupted = True
            log.warning(
                "Durable: a call an earlier try started and never finished runs again step=%s idempotency_key=%s",
                step.describe(),
                step.idempotency_key,
            )
        elif state == _DONE:
            step.replayed = True
            step.result = entry.get("result")
            step.meta = entry.get("meta") or {}
            if not step._counted_when_handed_out:
                step.handed_out()
        else:
            reason = _WHY_LIVE.get(state, f"its recorded state is {state!r}")
            log.info("Durable: runs live step=%s reason=%r", step.describe(), reason)

    def _open_snapshot(self, found: _Lookup | None) -> None:
        """Read the snapshot of the recorded run this run took the number of; a new run has none."""
        if found is None:
            return
        self._snapshot_read = self.journal._io.read_later(_snapshot_key(self.path))
        with contextlib.suppress(ValueError, RecursionError):  # then it keeps no snapshot
            self._stored[1] = _json_text(found[0])

    def _snapshot_entries(self) -> dict[int, str]:
        if self._snapshot is None:
            self._snapshot = _snapshot_of(self._snapshot_read) if self._snapshot_read is not None else {}
        return self._snapshot

    def fence(self) -> str | None:
        """
        Before this try writes an entry of this run: set aside the snapshot an earlier try wrote,
        which would hold the entry it replaces. Return why it could not be, if it could not.
        """
        if self.numbered_new or self._wrote_snapshot or self.snapshot_in_store() is False:
            return None
        error = self._write_snapshot(_NO_SNAPSHOT)
        return None if error is None else f"the snapshot of its run could not be set aside: {error}"

    def _write_snapshot(self, text: str) -> Exception | None:
        """Write ``text`` under the run's snapshot key; the error if the store refused it."""
        try:
            self.journal._io.call(functools.partial(self.journal.storage.write, _snapshot_key(self.path), text))
        except Exception as error:
            self._wrote_snapshot = None
            return error
        self._wrote_snapshot = True
        return None

    def snapshot_in_store(self) -> bool | None:
        """Whether the store holds a snapshot of this run, if this try knows."""
        if self._wrote_snapshot is not False or self.numbered_new:
            return self._wrote_snapshot
        if self._snapshot_read is None:
            return None
        text, problem = _text_of(self._snapshot_read)
        return None if problem else text is not None

    def store_snapshot(self) -> None:
        """As the run ends: store its snapshot, if it holds more than the one stored."""
        unchanged = self._wrote_snapshot is False and self._stored == self._snapshot_entries()
        # A run's first entry is read anyway, to number it: a snapshot of it alone saves nothing.
        if 1 not in self._stored or len(self._stored) < 2 or unchanged:
            return
        entries = {str(position): text for position, text in sorted(self._stored.items())}
        error = self._write_snapshot(_json_text({"format": FORMAT_VERSION, "kind": "snapshot", "entries": entries}))
        if error is not None:
            # Only a retry's reads are at stake: it reads the run's entries one by one.
            log.info("Durable: could not store the snapshot of run %s reason=%r", self.path, str(error))

    def _recorded_entry(self, position: int) -> _Lookup:
        """
        The entry recorded at ``position``. Where each read is a round trip, it comes from the run's
        snapshot, or the entries after it are read ahead, in the background: a replay claims them next.
        """
        text = self._snapshot_entries().get(position)
        if text is not None:
            self._stored[position] = text
            return _parsed(text)
        wanted = [position] if position not in self._ahead else []
        if self._reads_ahead:
            snapshot = self._snapshot_entries()
            wanted += [
                ahead
                for ahead in range(position + 1, position + 1 + _READ_AHEAD)
                if ahead not in self._ahead and ahead not in snapshot
            ]
        reads = self.journal._io.reads_later([f"{self.path}.{n}" for n in wanted])
        self._ahead.update(zip(wanted, reads, strict=True))
        text, problem = _text_of(self._ahead.pop(position))
        if text is not None and self.snapshots:
            self._stored[position] = text
        found = (None, problem) if text is None else _parsed(text)
        if found == (None, None):
            # The recorded run ends here (but for a step that could not be recorded): read on demand.
            self.stop_reading_ahead()
        return found

    def stop_reading_ahead(self) -> None:
        """Drop the reads ahead not made yet; those made are kept for clean-up."""
        self._reads_ahead = False
        self._ahead = {position: read for position, read in self._ahead.items() if not read.cancel()}

    def _diverge(self, step: JournalStep, reason: str) -> None:
        self.stop_reading_ahead()
        self.reads = False
        step.reads_nested_runs = False
        self.journal.stats.divergences.append((step.key, step.describe(), reason))
        log.warning(
            "Durable: run diverged; this call and every later call of run %s run live step=%s reason=%r",
            self.path,
            step.describe(),
            reason,
        )


#: A recorded entry read ahead, or why it could not be read.
_Lookup = tuple[dict[str, Any] | None, str | None]


@dataclass
class _Runs:
    """The runs under one parent (the journal, or a step): those recorded, and those of this try."""

    #: The first entry of each recorded run, read in number order: entries 1, 2, ... of ``recorded[n - 1]``.
    recorded: list[_Lookup]
    taken: set[int] = field(default_factory=set)
    #: This try's runs under the parent that have not ended, with what their first call asked.
    active: dict[DurableRun, tuple[str, str, str | None, str]] = field(default_factory=dict)

    @functools.cached_property
    def indistinct(self) -> set[int]:
        """The recorded runs that could not be told apart from another run in flight in their try."""
        numbers: set[int] = set()
        for number, (entry, _) in enumerate(self.recorded, start=1):
            twins = entry.get("twins") if entry is not None else None
            if isinstance(twins, list) and twins:
                numbers |= {number, *(twin for twin in twins if isinstance(twin, int))}
        return numbers


class DurableJournal:
    """
    The journal of one task instance: what each agent run's calls returned on earlier tries.

    ``storage`` keeps the entries (the task state store, ``durable_cache_path``, or memory). With
    ``clean_up_after_run``, the journal deletes itself when a top-level run completes; inside
    Airflow it is instead deleted when the task instance succeeds.
    """

    def __init__(self, storage: JournalStorage, *, clean_up_after_run: bool = False) -> None:
        self.storage = storage
        self._io = JournalIO(storage)
        self.clean_up_after_run = clean_up_after_run
        self.stats = JournalStats()
        # Numbering and the index are shared by runs that run in threads of one task.
        self._lock = threading.RLock()
        # The counts the I/O thread updates as the store answers; never held while waiting on the store.
        self._stats_lock = threading.Lock()
        self._runs: dict[str, DurableRun] = {}
        self._runs_under: dict[str, _Runs] = {}
        # The steps any try started runs under (read from the index entry once), None until needed.
        self._parents: set[str] | None = None
        self._index_stored = False
        # False once an index this journal read could not be read: runs may be under any step.
        self._index_complete = True
        self._warned_of_identical_runs = False
        #: Called after each top-level run ends, however it ends (the task keeps its try's summary so far).
        self.after_each_run: Callable[[], None] | None = None

    @contextlib.contextmanager
    def run(self, *, key: str | None = None) -> Iterator[DurableRun]:
        """
        Start an agent run: top-level, or nested under the step running in this context.

        ``key`` names the run on every try, to tell apart runs that otherwise ask the same.
        """
        parent = _running_step.get()
        if parent is not None and parent.run.journal is not self:
            parent = None
        run = DurableRun(self, parent, key=key)
        try:
            yield run
        finally:
            run.stop_reading_ahead()
            with self._lock:
                self._runs_under.get(parent.key if parent else "", _Runs([])).active.pop(run, None)
            if parent is None:
                # However the run ended, its entries are in the store when it returns.
                self.settle()
                if run.snapshots and not self.clean_up_after_run:
                    run.store_snapshot()
                if self.after_each_run is not None:
                    # Through the I/O thread as well: the journal's store calls never come from two threads.
                    self._io.call(self.after_each_run)
        log.debug("Durable: run %s ended", run.path or "without calls")
        if self.clean_up_after_run and parent is None:
            self.delete()

    def claimed_steps(self) -> list[JournalStep]:
        """Every step this try claimed, run by run in the order the runs took their numbers."""
        with self._lock:
            return [step for run in self._runs.values() for step in run.steps]

    def settle(self) -> None:
        """
        Wait until every entry written so far is in the store (or its write was refused and reported).

        Writes go to the store behind the agent; a call that must not start before they are
        durable (a model request that carries a tool's result) settles the journal first.
        """
        self._io.settle()

    def has_pending_writes(self) -> bool:
        """Whether :meth:`settle` would wait."""
        return self._io.has_pending_calls()

    def finish(self, *, succeeded: bool) -> None:
        """Log this try's summary; once the task instance succeeded, delete the journal."""
        self.settle()
        log.info(self.stats.summary())
        if succeeded:
            self.delete()

    def delete(self) -> None:
        """Delete every entry any try recorded."""
        keys = list(self._stored_keys())
        self._io.call(lambda: self.storage.delete_all(keys))
        self._runs.clear()
        self._runs_under.clear()
        self._parents = None
        self._index_stored = False
        self._index_complete = True
        if keys:
            log.info("Durable: journal deleted")

    def _number(
        self, run: DurableRun, kind: str, name: str, fingerprint: str | None, parts: dict[str, Any] | None = None
    ) -> tuple[_Lookup | None, str | None]:
        """
        Give ``run`` its number from what its first call asks. Return the first entry of the
        recorded run it matched (``None`` for a new number), and why it matched none of the
        recorded runs left, if any were.
        """
        parent = run.parent.key if run.parent is not None else ""
        identity = (kind, name, fingerprint, run.follows)
        with self._lock:
            if run.parent is not None:
                self._note_parent(parent)
            runs = self._runs_under.get(parent)
            if runs is None:
                # Under a step no try recorded anything for (not even its in-flight mark, written
                # before any run it started), no run was recorded: nothing to read.
                recorded = [] if run.parent is not None and run.parent.nothing_recorded else self._recorded_runs(parent)
                runs = self._runs_under[parent] = _Runs(list(recorded))
            untaken = [n for n in range(1, len(runs.recorded) + 1) if n not in runs.taken]
            matching = [n for n in untaken if _starts_with(runs.recorded[n - 1][0], identity)]
            twins: set[int] = set()
            if run.key is None and fingerprint is not None:
                # Runs this one cannot be told apart from: those asking the same in flight now, and
                # the recorded ones that could not be told apart in their try.
                twins = {other.number for other, asked in runs.active.items() if asked == identity}
                twins |= set(matching) & runs.indistinct
            runs.active[run] = identity
            number = matching[0] if matching and run.reads and fingerprint is not None and not twins else None
            found = runs.recorded[number - 1] if number is not None else None
            if number is None:
                number = next(n for n in count(len(runs.recorded) + 1) if n not in runs.taken)
            runs.taken.add(number)
            run.number = number
            run.path = f"{parent}.{number}" if parent else str(number)
            self._runs[run.path] = run
            if twins:
                run.twins = twins
                told_apart_until_now = [other for other in runs.active if other.number in twins and not other.twins]
                for other in runs.active:
                    if other.number in twins:
                        other.twins.add(number)
                with self._stats_lock:
                    self.stats.indistinct_runs += 1 + len(told_apart_until_now)
        log.debug("Durable: run %s started", run.path)
        if twins:
            self._warn_of_identical_runs(name)
            if matching and run.reads:
                return None, f"it cannot be told apart from another run that asks the same: {_NAME_THE_RUNS}"
        if found is not None or not untaken or not run.reads:
            return found, None
        reason = "no recorded run starts with this call"
        for n in untaken:
            entry, problem = runs.recorded[n - 1]
            if problem:
                return None, f"{reason}; recorded run {n} cannot be read: {problem}"
            if fingerprint is not None and entry is not None and (entry.get("kind"), entry.get("name")) == (kind, name):
                differ = why_calls_differ(entry, fingerprint, parts)
                return None, f"{reason}; the first call of recorded run {n}: {differ}"
        # No recorded run starts with a call of this name: say what the first one called, if of this kind.
        for n in untaken:
            entry = runs.recorded[n - 1][0]
            if entry is not None and entry.get("kind") == kind:
                return None, f"{reason}; the first call of recorded run {n}: {_another_call(entry, kind)}"
        return None, reason

    def _recorded_runs(self, parent: str) -> Iterator[_Lookup]:
        """The first entries of the runs recorded under ``parent``, numbered without gaps."""
        for number in count(1):
            found = self._read_entry(f"{parent}.{number}.1" if parent else f"{number}.1")
            if found == (None, None):
                return
            yield found

    def _warn_of_identical_runs(self, name: str) -> None:
        if self._warned_of_identical_runs:
            return
        self._warned_of_identical_runs = True
        log.warning(
            "Durable: agent runs that ask the same started concurrently, so a retry cannot tell which recorded "
            "run is whose; they run live on every try: %s model=%r",
            _NAME_THE_RUNS,
            name,
        )

    def _note_parent(self, parent: str) -> None:
        """Write down, once, that runs started under step ``parent``, so that clean-up finds them."""
        parents = self._stored_parents()
        if parent in parents:
            return
        parents.add(parent)
        entry: dict[str, Any] = {"format": FORMAT_VERSION, "kind": "index", "parents": sorted(parents)}
        if not self._index_complete:
            # The parents an unreadable index named are lost: the clean-up looks under every step.
            entry["complete"] = False
        self._index_stored = True
        self._io.write(_INDEX_KEY, json.dumps(entry, separators=(",", ":")), _index_written)

    def _stored_parents(self) -> set[str]:
        if self._parents is None:
            entry, problem = self._read_entry(_INDEX_KEY)
            self._index_stored = (entry, problem) != (None, None)
            parents = entry.get("parents") if entry else None
            if entry is not None and not isinstance(parents, list):
                problem = "it names no parents"
            if problem:
                log.warning(
                    "Durable: the journal's index cannot be read; clean-up looks for nested runs under every step "
                    "reason=%r",
                    problem,
                )
            self._index_complete = problem is None and (entry is None or entry.get("complete") is not False)
            self._parents = {p for p in parents if isinstance(p, str)} if isinstance(parents, list) else set()
        return self._parents

    def _read_entry(self, key: str) -> _Lookup:
        """The entry under ``key`` (``None`` if there is none), or why it cannot be read."""
        return _looked_up(self._io.read_later(key))

    def _write(self, step: JournalStep, entry: dict[str, Any], *, what: str) -> bool:
        """
        Queue ``entry`` as ``step``'s entry; return whether it could be (it is JSON). A write the
        store refuses is reported when the store answers.
        """
        try:
            text = _json_text(entry)
        except (TypeError, ValueError, RecursionError) as error:
            return self._not_recorded(step, what, f"it is not JSON: {type(error).__name__}: {str(error)[:200]}")
        run = step.run
        problem = run.fence() if run.snapshots else None
        if problem is not None:
            return self._not_recorded(step, what, problem)
        done = entry["state"] == _DONE

        def stored(error: BaseException | None) -> None:
            if run.snapshots:
                if error is None:
                    run._stored[step.position] = text
                else:
                    run._stored.pop(step.position, None)
            if error is not None:
                if what == "result":
                    step.recorded = None
                self._not_recorded(step, what, f"the store refused it: {error}")
            elif done:
                with self._stats_lock:
                    self.stats.recorded[step.kind] += 1

        self._io.write(step.key, text, stored)
        return True

    def _not_recorded(self, step: JournalStep, what: str, reason: str) -> bool:
        log.warning(
            "Durable: could not record a step, so it runs again next try step=%s what=%s reason=%r",
            step.describe(),
            what,
            reason,
        )
        if what == "result":
            with self._stats_lock:
                self.stats.not_recorded.append(f"{step.describe()}: {reason}")
                self.stats.not_recorded_kinds[step.kind] += 1
        return False

    def _stored_keys(self) -> Iterator[str]:
        """
        Every key stored: the runs under the journal and under each step the index names (under
        every step, once an index could not be read), each numbered without gaps, each run's
        positions without gaps. Nothing this try knows is read again: not what it claimed, not what
        it read ahead, not past a run it numbered itself or the last run under a step it started
        runs under.
        """
        parents = ["", *sorted(self._stored_parents())]
        looked_under = set(parents)
        for parent in parents:  # and the steps appended to it on the way
            runs = self._runs_under.get(parent)
            last = max([len(runs.recorded), *runs.taken]) if runs is not None else None
            for number in count(1):
                if last is not None and number > last:
                    break
                path = f"{parent}.{number}" if parent else str(number)
                run = self._runs.get(path)
                known = len(run.steps) if run is not None else 0
                keys = [f"{path}.{position}" for position in range(1, known + 1)]
                for position in count(known + 1) if run is None or not run.numbered_new else ():
                    read = run._ahead.pop(position, None) if run is not None else None
                    if _looked_up(read or self._io.read_later(f"{path}.{position}")) == (None, None):
                        break
                    keys.append(f"{path}.{position}")
                if not keys:
                    break
                if not parent and self._io.in_background:
                    # A snapshot first: once it is gone, what is left of the run is read entry by entry.
                    stored = run.snapshot_in_store() if run is not None else None
                    if stored is None:
                        stored = _text_of(self._io.read_later(_snapshot_key(path))) != (None, None)
                    if stored:
                        yield _snapshot_key(path)
                yield from keys
                if not self._index_complete:
                    parents.extend(key for key in keys if key not in looked_under)
                    looked_under.update(keys)
        if self._index_stored:
            yield _INDEX_KEY


def _index_written(error: BaseException | None) -> None:
    if error is not None:
        log.warning("Durable: could not write the journal's index; clean-up may leave entries reason=%r", str(error))


def _looked_up(read: Future[str | None]) -> _Lookup:
    """The entry a read found (``None`` if there is none), or why it cannot be read."""
    text, problem = _text_of(read)
    return (None, problem) if text is None else _parsed(text)


def _text_of(read: Future[str | None]) -> tuple[str | None, str | None]:
    """The text a read found (``None`` if there is none), or why the store could not read it."""
    try:
        return read.result(), None
    except Exception as error:
        return None, f"the store could not read it: {error}"


def _parsed(text: str) -> _Lookup:
    """The entry ``text`` holds, or why it cannot be read."""
    try:
        entry = json.loads(text)
    except (ValueError, RecursionError) as error:
        return None, f"the recorded entry is not JSON: {type(error).__name__}: {str(error)[:200]}"
    if not isinstance(entry, dict):
        return None, "the recorded entry is not a JSON object"
    if entry.get("format") not in _READABLE_FORMATS:
        return None, (
            f"the recorded entry has format {entry.get('format')!r} (an earlier release wrote it), "
            f"this release reads formats {', '.join(map(str, sorted(_READABLE_FORMATS)))}"
        )
    return entry, None


# Built once: json.dumps with options builds an encoder on each call, and each step writes JSON.
_UTF8_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ASCII_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _json_text(value: Any) -> str:
    """``value`` as compact JSON, kept in UTF-8 but for a lone surrogate, which only loads back escaped."""
    text = _UTF8_JSON.encode(value)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = _ASCII_JSON.encode(value)
    return text


def _snapshot_key(path: str) -> str:
    return f"{_INDEX_KEY}.{path}"


def is_snapshot_key(key: str) -> bool:
    """Whether ``key`` holds a run's snapshot rather than an entry."""
    return key.startswith(f"{_INDEX_KEY}.")


def _snapshot_of(read: Future[str | None]) -> dict[int, str]:
    """The entries of the snapshot a read found, by position; none if there is none or it cannot be read."""
    entry, problem = _looked_up(read)
    entries = entry.get("entries") if entry is not None and entry.get("kind") == "snapshot" else None
    if not isinstance(entries, dict) or not all(isinstance(text, str) for text in entries.values()):
        if problem or entry is not None:
            reason = problem or "it holds no entries by position"
            log.info("Durable: the snapshot of a run cannot be read; its entries are read one by one reason=%r", reason)
        return {}
    return {int(position): text for position, text in entries.items() if position.isascii() and position.isdigit()}


def _another_call(entry: dict[str, Any], kind: str) -> str:
    """Why a recorded call of another kind or name is not this call of ``kind``."""
    if entry.get("kind") == kind:
        return f"the {kind} changed: the recorded call there is {kind} {entry.get('name')!r}"
    return f"the recorded call there is {entry.get('kind')} {entry.get('name')!r}"


def _starts_with(entry: dict[str, Any] | None, identity: tuple[str, str, str | None, str]) -> bool:
    """
    Whether a recorded run whose first entry is ``entry`` starts with the call ``identity`` names,
    as :meth:`DurableJournal._number` compares them: its fingerprint under any key of ``[core] fernet_key``.
    """
    if entry is None:
        return False
    kind, name, fingerprint, follows = identity
    return (entry.get("kind"), entry.get("name"), entry.get("follows")) == (kind, name, follows) and (
        recorded_form(entry.get("fingerprint"), fingerprint) is not None
    )


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


def journal_in_use() -> DurableJournal | None:
    """The current journal if one was opened in this context or task try; never opens one."""
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    from airflow.providers.common.ai.durable.task_instance import bound_journal_of_running_task

    return bound_journal_of_running_task()


def running_step() -> JournalStep | None:
    """The live step whose call is running in this context, if any."""
    return _running_step.get()
