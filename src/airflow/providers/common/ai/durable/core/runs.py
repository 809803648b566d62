"""
One agent run of a journal and the steps it claims in order: :class:`DurableRun`; and a call an
earlier try left in flight where no run of this try lines up with it: :class:`CallLeftInFlight`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core.divergence import why_calls_differ
from airflow.providers.common.ai.durable.core.entries import (
    DISCARDED,
    DONE,
    FAILED,
    FORMAT_VERSION,
    IN_FLIGHT,
    MASKED,
    NO_SNAPSHOT,
    STARTED,
    Lookup,
    json_text,
    parsed_entry,
    snapshot_entries_of,
    snapshot_key,
    text_of,
    why_another_call,
)
from airflow.providers.common.ai.durable.core.fingerprint import recorded_digest_is, recorded_form
from airflow.providers.common.ai.durable.core.in_flight import RESOLUTION_META
from airflow.providers.common.ai.durable.core.journal_io import READ_AHEAD
from airflow.providers.common.ai.durable.core.progress import ProgressLog
from airflow.providers.common.ai.durable.core.steps import JournalStep, idempotency_key_of

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.journal import DurableJournal

log = logging.getLogger(__name__)

# Why an entry in each other state runs live. Keyed by object: a state read from storage may be anything.
_WHY_LIVE: dict[object, str] = {
    MASKED: "its recorded result held a secret and is stored masked",
    FAILED: "it failed on an earlier try",
    DISCARDED: "an earlier try discarded it",
    STARTED: "an earlier try started it and never finished it",
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
        self._reads_ahead = journal.io.in_background
        #: Whether the run keeps a snapshot of its entries (see the module's docstring).
        self.snapshots = parent is None and journal.keeps_snapshots
        # The read of the snapshot of the recorded run this one took the number of, and its entries.
        self._snapshot_read: Future[str | None] | None = None
        self._snapshot: dict[int, str] | None = None
        # The text the store holds at each position, as far as this try knows: the next snapshot.
        self._stored: dict[int, str] = {}
        # Whether this try wrote the snapshot's key: True once it did, None if a write of it failed.
        self._wrote_snapshot: bool | None = False
        #: Calls an earlier try left in flight in recorded entries this run no longer lines up with:
        #: the adapter resolves each before the run's next live call (R-56).
        self.calls_left_in_flight: list[CallLeftInFlight] = []
        #: The run's lines in the task log (R-38), the adapter's: a claim that runs live logs why
        #: after the stretch of replayed steps before it.
        self.progress: ProgressLog | None = None

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
        found: Lookup | None = None
        if not self.path:
            found, unmatched = self.journal.number_run(self, kind, name, fingerprint, parts)
            new_run = self.numbered_new = found is None
            if self.snapshots:
                self._open_snapshot(found)
            self.calls_left_in_flight += self.journal.calls_taken_over(self)
        step = JournalStep(
            self,
            next(self._positions),
            kind,
            name,
            fingerprint,
            parts,
            counted_when_handed_out=counted_when_handed_out,
        )
        self.follows = step.digest
        self.steps.append(step)
        if fingerprint is None:
            self.diverge(step, "what it asks could not be fingerprinted")
        elif new_run:
            # Nothing was recorded under a new number: no need to look.
            self.reads = step.reads_nested_runs = False
            if unmatched:
                self.diverge(step, unmatched)
        elif self.reads:
            self._look_up(step, found)
        if new_run:
            # The first entry of a run under a new number holds that number from now on.
            step.mark_started()
        log.debug("Durable: claimed step=%s replayed=%s", step.describe(), step.replayed)
        return step

    def _look_up(self, step: JournalStep, found: Lookup | None) -> None:
        entry, problem = found if found is not None else self._recorded_entry(step.position)
        if problem:
            self.diverge(step, problem)
            return
        if entry is None:
            step.nothing_recorded = True
            return
        state = entry.get("state")
        if (entry.get("kind"), entry.get("name")) == (step.kind, step.name):
            step.take_recorded_fingerprint(entry.get("fingerprint"))
        if (entry.get("kind"), entry.get("name")) != (step.kind, step.name):
            self.diverge(step, why_another_call(entry, step.kind))
        elif recorded_form(entry.get("fingerprint"), step.fingerprint) is None:
            lined_up = recorded_digest_is(entry.get("follows"), step.follows)
            self.diverge(step, why_calls_differ(entry, step.fingerprint or "", step.parts, lined_up=lined_up))
        elif not recorded_digest_is(entry.get("follows"), step.follows):
            self.diverge(step, "an earlier call of this run changed since it was recorded")
        elif state == IN_FLIGHT:
            # Its outcome is unknown: the adapter resolves it by its tool's policy.
            step.interrupted = True
            meta = entry.get("meta")
            step.meta = meta if isinstance(meta, dict) else {}
        elif state == DONE:
            step.replay(entry)
        else:
            reason = _WHY_LIVE.get(state, f"its recorded state is {state!r}")
            self.flush_progress()
            log.info("Durable: runs live step=%s reason=%r", step.describe(), reason)

    def _open_snapshot(self, found: Lookup | None) -> None:
        """Read the snapshot of the recorded run this run took the number of; a new run has none."""
        if found is None:
            return
        self._snapshot_read = self.journal.io.read_later(snapshot_key(self.path))
        with contextlib.suppress(ValueError, RecursionError):  # then it keeps no snapshot
            self._stored[1] = json_text(found[0])

    def _snapshot_entries(self) -> dict[int, str]:
        if self._snapshot is None:
            self._snapshot = snapshot_entries_of(self._snapshot_read) if self._snapshot_read is not None else {}
        return self._snapshot

    def fence(self) -> str | None:
        """
        Before this try writes an entry of this run: set aside the snapshot an earlier try wrote,
        which would hold the entry it replaces. Return why it could not be, if it could not.
        """
        if self.numbered_new or self._wrote_snapshot or self.snapshot_in_store() is False:
            return None
        error = self._write_snapshot(NO_SNAPSHOT)
        return None if error is None else f"the snapshot of its run could not be set aside: {error}"

    def _write_snapshot(self, text: str) -> Exception | None:
        """Write ``text`` under the run's snapshot key; the error if the store refused it."""
        try:
            self.journal.io.call(functools.partial(self.journal.storage.write, snapshot_key(self.path), text))
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
        text, problem = text_of(self._snapshot_read)
        return None if problem else text is not None

    def store_snapshot(self) -> None:
        """As the run ends: store its snapshot, if it holds more than the one stored."""
        unchanged = self._wrote_snapshot is False and self._stored == self._snapshot_entries()
        # A run's first entry is read anyway, to number it: a snapshot of it alone saves nothing.
        if 1 not in self._stored or len(self._stored) < 2 or unchanged:
            return
        entries = {str(position): text for position, text in sorted(self._stored.items())}
        error = self._write_snapshot(json_text({"format": FORMAT_VERSION, "kind": "snapshot", "entries": entries}))
        if error is not None:
            # Only a retry's reads are at stake: it reads the run's entries one by one.
            log.info("Durable: could not store the snapshot of run %s reason=%r", self.path, str(error))

    def _recorded_entry(self, position: int) -> Lookup:
        """
        The entry recorded at ``position``. Where each read is a round trip, it comes from the run's
        snapshot, or the entries after it are read ahead, in the background: a replay claims them next.
        """
        text = self._snapshot_entries().get(position)
        if text is not None:
            self._stored[position] = text
            return parsed_entry(text)
        wanted = [position] if position not in self._ahead else []
        if self._reads_ahead:
            snapshot = self._snapshot_entries()
            wanted += [
                ahead
                for ahead in range(position + 1, position + 1 + READ_AHEAD)
                if ahead not in self._ahead and ahead not in snapshot
            ]
        reads = self.journal.io.reads_later([f"{self.path}.{n}" for n in wanted])
        self._ahead.update(zip(wanted, reads, strict=True))
        text, problem = text_of(self._ahead.pop(position))
        if text is not None and self.snapshots:
            self._stored[position] = text
        found = (None, problem) if text is None else parsed_entry(text)
        if found == (None, None):
            # The recorded run ends here (but for a step that could not be recorded): read on demand.
            self.stop_reading_ahead()
        return found

    def note_stored(self, position: int, text: str | None) -> None:
        """The store now holds ``text`` at ``position`` (``None``: this try does not know what), for the snapshot."""
        if not self.snapshots:
            return
        if text is None:
            self._stored.pop(position, None)
        else:
            self._stored[position] = text

    def take_read_ahead(self, position: int) -> Future[str | None] | None:
        """The read of ``position`` this run made ahead of its claims and never used, handed over (for clean-up)."""
        return self._ahead.pop(position, None)

    def stop_reading_ahead(self) -> None:
        """Drop the reads ahead not made yet; those made are kept for clean-up."""
        self._reads_ahead = False
        self._ahead = {position: read for position, read in self._ahead.items() if not read.cancel()}

    def flush_progress(self) -> None:
        """Log the stretch of replayed steps not logged yet: a line about a later step follows."""
        if self.progress is not None:
            self.progress.flush()

    def diverge(self, step: JournalStep, reason: str) -> None:
        """From ``step`` on, this run no longer lines up with what was recorded (``reason``): its calls run live."""
        if self.reads and not self.numbered_new:
            # What was recorded from here on is stale: a call it left in flight must still be resolved.
            self.calls_left_in_flight += self.journal.calls_left_in_flight(self.path, step.position)
        self.stop_reading_ahead()
        self.reads = False
        step.reads_nested_runs = False
        self.journal.stats.divergences.append((step.key, step.describe(), reason))
        self.flush_progress()
        log.warning(
            "Durable: run diverged; this call and every later call of run %s run live step=%s reason=%r",
            self.path,
            step.describe(),
            reason,
        )


@dataclass
class CallLeftInFlight:
    """
    A call an earlier try left in flight (R-56) in recorded entries that no run of this try lines up
    with any more: a deploy changed what its run asks. It is resolved by the policy of the tool that
    has its name now; its mark is replaced only once it is resolved.
    """

    journal: DurableJournal
    key: str
    entry: dict[str, Any]
    #: The entries of its run before it, in position order: the answer that asked for the call is one.
    earlier: list[dict[str, Any]]

    @property
    def name(self) -> str:
        return str(self.entry.get("name"))

    @property
    def idempotency_key(self) -> str:
        return idempotency_key_of(self.journal.storage.identity, self.key)

    def describe(self) -> str:
        return f"{self.entry.get('kind')} {self.name!r} at {self.key}"

    def resolve(self, resolution: str, *, result: Any = None, done: bool = False) -> None:
        """
        Replace its mark, saying how it was resolved: as a call done with ``result`` (a run that
        lines up with it again replays it), or else discarded (such a run makes the call live).
        """
        entry = {**self.entry, "format": FORMAT_VERSION, "state": DONE if done else DISCARDED}
        entry.pop("result", None)
        entry["meta"] = {RESOLUTION_META: resolution}
        if done:
            entry["result"] = result
        self.journal.replace_mark(self.key, entry)
