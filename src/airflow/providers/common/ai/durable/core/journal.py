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
import functools
import itertools
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from airflow.providers.common.ai.durable.core import prices
from airflow.providers.common.ai.durable.core.budget import BUDGET_KEY, BudgetLedger, UsageBudget
from airflow.providers.common.ai.durable.core.divergence import why_calls_differ
from airflow.providers.common.ai.durable.core.entries import (
    FORMAT_VERSION,
    IN_FLIGHT,
    INDEX_KEY,
    NO_SNAPSHOT,
    Lookup,
    json_text,
    lookup_of,
    run_starts_with,
    snapshot_key,
    text_of,
    why_another_call,
)
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint_key_pinned, recorded_digest_is
from airflow.providers.common.ai.durable.core.host import Host, current_host
from airflow.providers.common.ai.durable.core.journal_io import READ_AHEAD, JournalIO
from airflow.providers.common.ai.durable.core.runs import CallLeftInFlight, DurableRun
from airflow.providers.common.ai.durable.core.scope import running_step
from airflow.providers.common.ai.durable.core.stats import JournalStats
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.core.storage import JournalStorage

log = logging.getLogger(__name__)


class DurableJournal:
    """
    The journal of one task instance: what each agent run's calls returned on earlier tries.

    ``storage`` keeps the entries (the task state store, ``durable_cache_path``, or memory).
    ``host``: what the journal asks of the system it runs in, for its try (by default the current
    host, see ``core/host.py``). With ``clean_up_after_run``, the journal deletes itself when a
    top-level run completes; inside Airflow it is instead deleted when the task instance succeeds.

    An adapter starts runs (:meth:`run`) and claims their steps; a run takes its number from the
    journal (:meth:`number_run`), and the calls an earlier try left in flight where it no longer
    lines up with what was recorded (:meth:`calls_taken_over`, :meth:`calls_left_in_flight`).
    """

    def __init__(self, storage: JournalStorage, *, host: Host | None = None, clean_up_after_run: bool = False) -> None:
        self.storage = storage
        self.host = host or current_host()
        #: The journal's calls to its store, in one queue: its runs, steps and budget read and write through it.
        self.io = JournalIO(storage)
        #: Whether a top-level run keeps a snapshot of its entries: where each read is a round trip
        #: and the storage does not read the whole journal at once.
        self.keeps_snapshots = self.io.in_background and not storage.whole_journal_at_once
        self.clean_up_after_run = clean_up_after_run
        self.stats = JournalStats(tell_runs_apart=self.host.wording.tell_runs_apart)
        # Numbering and the index are shared by runs that run in threads of one task.
        self._lock = threading.RLock()
        self._runs: dict[str, DurableRun] = {}
        self._runs_under: dict[str, _Runs] = {}
        # The steps any try started runs under (read from the index entry once), None until needed.
        self._parents: set[str] | None = None
        self._index_stored = False
        # False once an index this journal read could not be read: runs may be under any step.
        self._index_complete = True
        # Whether the index says a try kept what its budget spent (under BUDGET_KEY), for the clean-up.
        self._budget_noted = False
        self._warned_of_identical_runs = False
        #: What the tries of the task instance's budget spent, once a run gave it a budget (R-58).
        self.budget: BudgetLedger | None = None
        #: Whether the journal is kept (archived) when the task instance succeeds; None: as configured.
        self.keep_after_success: bool | None = None

    def use_budget(self, budget: UsageBudget) -> BudgetLedger:
        """Count every live model request of this task instance against ``budget``; one budget a task."""
        with self._lock:
            if self.budget is None:
                self.budget = BudgetLedger(
                    self.io, self.host, budget, try_number=self.host.try_number, first_try=self.host.budget_first_try
                )
                self.stats.ledger = self.budget
                self._note_in_index(budget=True)
            elif self.budget.budget != budget:
                raise ValueError(
                    f"a task instance has one budget, which all of its agents share: {self.budget.budget} was "
                    f"given first, and this run gives {budget}; give every run the same budget"
                )
            return self.budget

    @contextlib.contextmanager
    def run(self, *, key: str | None = None) -> Iterator[DurableRun]:
        """
        Start an agent run: top-level, or nested under the step running in this context.

        ``key`` names the run on every try, to tell apart runs that otherwise ask the same. Fails
        the task for good before any call when the deployment's model prices cannot be read.
        """
        prices.check_price_overrides(self.host)
        parent = running_step()
        if parent is not None and parent.run.journal is not self:
            parent = None
        run = DurableRun(self, parent, key=key)
        try:
            with fingerprint_key_pinned():
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
                if self.host.after_each_run is not None:
                    # Through the I/O thread as well: the journal's store calls never come from two threads.
                    self.io.call(functools.partial(self.host.after_each_run, self))
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
        self.io.settle()

    def has_pending_writes(self) -> bool:
        """Whether :meth:`settle` would wait."""
        return self.io.has_pending_calls()

    def finish(self, *, succeeded: bool) -> None:
        """Log this try's summary; once the task instance succeeded, delete the journal, whatever the summary says."""
        self.settle()
        try:
            log.info(self.stats.summary())
            self.io.call(self.storage.seal)
        finally:
            if succeeded:
                self.delete()

    def stored_keys(self) -> list[str]:
        """Every key any try stored, for a copy of the journal (kept after success, forked)."""
        return list(self._stored_keys())

    def delete(self) -> None:
        """Delete every entry any try recorded."""
        keys = list(self._stored_keys())
        self.io.call(lambda: self.storage.delete_all(keys))
        self._runs.clear()
        self._runs_under.clear()
        self._parents = None
        self._index_stored = False
        self._index_complete = True
        if keys:
            log.info("Durable: journal deleted")

    def number_run(
        self, run: DurableRun, kind: str, name: str, fingerprint: str | None, parts: dict[str, Any] | None = None
    ) -> tuple[Lookup | None, str | None]:
        """
        Give ``run`` its number from what its first call asks, among the runs under its parent of
        every try. Return the first entry of the recorded run it matched (``None`` for a new
        number), and why it matched none of the recorded runs left, if any were.
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
            matching = [n for n in untaken if run_starts_with(runs.recorded[n - 1][0], identity)]
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
                self.stats.count_indistinct_runs(1 + len(told_apart_until_now))
        log.debug("Durable: run %s started", run.path)
        if twins:
            self._warn_of_identical_runs(name)
            if matching and run.reads:
                return (
                    None,
                    f"it cannot be told apart from another run that asks the same: {self.stats.tell_runs_apart}",
                )
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
                return None, f"{reason}; the first call of recorded run {n}: {why_another_call(entry, kind)}"
        return None, reason

    def calls_taken_over(self, run: DurableRun) -> list[CallLeftInFlight]:
        """
        The calls left in flight in the recorded runs ``run``, just numbered, takes over: those under
        its parent, started the same way (with its ``durable_key``) and numbered before it, that no
        run of this try took. A deploy that changed a run's first call leaves it one of them.
        """
        if not run.reads:
            return []
        parent = run.parent.key if run.parent is not None else ""
        with self._lock:
            runs = self._runs_under[parent]
            numbers = [
                number
                for number, (entry, _) in enumerate(runs.recorded[: run.number - 1], start=1)
                if number not in runs.taken | runs.taken_over
                and entry is not None
                and recorded_digest_is(entry.get("follows"), run.follows)
            ]
            runs.taken_over.update(numbers)
        paths = [f"{parent}.{number}" if parent else str(number) for number in numbers]
        return [call for path in paths for call in self.calls_left_in_flight(path, 1)]

    def calls_left_in_flight(self, path: str, start: int) -> list[CallLeftInFlight]:
        """
        The calls an earlier try left in flight in the recorded run ``path`` from position ``start``
        on, and in the runs under its steps there: a run that no longer lines up with them hands
        them to its adapter, which resolves each by its policy (R-56).
        """
        with self._lock:
            under = sorted(
                parent
                for parent in self._stored_parents()
                if parent.startswith(f"{path}.") and int(parent[len(path) + 1 :].split(".")[0]) >= start
            )
        calls = self._marks_of(path, start) or []
        for parent in under:  # every level: the index names each step runs started under
            for number in count(1):
                nested = self._marks_of(f"{parent}.{number}", 1)
                if nested is None:
                    break
                calls += nested
        return calls

    def _marks_of(self, path: str, start: int) -> list[CallLeftInFlight] | None:
        """The calls in flight in the recorded run ``path`` from ``start`` on; ``None`` if no such run is recorded."""
        entries: list[dict[str, Any]] = []
        while len(entries) % READ_AHEAD == 0:  # a batch of reads at a time, to the first gap
            keys = [f"{path}.{n}" for n in range(len(entries) + 1, len(entries) + 1 + READ_AHEAD)]
            found = itertools.takewhile(lambda lookup: lookup[0] is not None, map(lookup_of, self.io.reads_later(keys)))
            read = [entry for entry, _ in found if entry is not None]
            entries += read
            if not read:
                break
        if not entries:
            return None
        return [
            CallLeftInFlight(self, f"{path}.{position}", entry, entries[: position - 1])
            for position, entry in enumerate(entries, start=1)
            if position >= start and entry.get("state") == IN_FLIGHT
        ]

    def replace_mark(self, key: str, entry: dict[str, Any]) -> None:
        """Write ``entry`` over the in-flight mark under ``key``, unless a step of this try holds the key now."""
        path, _, position = key.rpartition(".")
        run = self._runs.get(path)
        if run is not None and int(position) <= len(run.steps):
            return
        problem = run.fence() if run is not None and run.snapshots else None
        if problem is None and run is None and "." not in path and self.keeps_snapshots:
            # The run's snapshot holds the mark: set it aside, as a try that writes an entry of its run does.
            self.io.write(snapshot_key(path), NO_SNAPSHOT, functools.partial(_mark_replaced, key))
        if problem is not None:
            _mark_replaced(key, problem)
            return
        self.io.write(key, json_text(entry), functools.partial(_mark_replaced, key))

    def _recorded_runs(self, parent: str) -> Iterator[Lookup]:
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
            self.stats.tell_runs_apart,
            name,
        )

    def _note_parent(self, parent: str) -> None:
        """Write down, once, that runs started under step ``parent``, so that clean-up finds them."""
        parents = self._stored_parents()
        if parent in parents:
            return
        parents.add(parent)
        self._note_in_index()

    def _note_in_index(self, *, budget: bool = False) -> None:
        """Write the index: the steps runs started under, and whether a budget's spending is kept."""
        parents = self._stored_parents()
        if budget and self._budget_noted:
            return
        self._budget_noted = self._budget_noted or budget
        entry: dict[str, Any] = {"format": FORMAT_VERSION, "kind": "index", "parents": sorted(parents)}
        if self._budget_noted:
            entry["budget"] = True
        if not self._index_complete:
            # The parents an unreadable index named are lost: the clean-up looks under every step.
            entry["complete"] = False
        self._index_stored = True
        self.io.write(INDEX_KEY, json.dumps(entry, separators=(",", ":")), _index_written)

    def _stored_parents(self) -> set[str]:
        if self._parents is None:
            entry, problem = self._read_entry(INDEX_KEY)
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
            # An index that cannot be read may have named a budget: the clean-up looks for it.
            self._budget_noted = problem is not None or (entry is not None and entry.get("budget") is True)
            self._parents = {p for p in parents if isinstance(p, str)} if isinstance(parents, list) else set()
        return self._parents

    def _read_entry(self, key: str) -> Lookup:
        """The entry under ``key`` (``None`` if there is none), or why it cannot be read."""
        return lookup_of(self.io.read_later(key))

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
                    read = run.take_read_ahead(position) if run is not None else None
                    if lookup_of(read or self.io.read_later(f"{path}.{position}")) == (None, None):
                        break
                    keys.append(f"{path}.{position}")
                if not keys:
                    break
                if not parent and self.keeps_snapshots:
                    # A snapshot first: once it is gone, what is left of the run is read entry by entry.
                    stored = run.snapshot_in_store() if run is not None else None
                    if stored is None:
                        stored = text_of(self.io.read_later(snapshot_key(path))) != (None, None)
                    if stored:
                        yield snapshot_key(path)
                yield from keys
                if not self._index_complete:
                    parents.extend(key for key in keys if key not in looked_under)
                    looked_under.update(keys)
        if self._index_stored:
            yield INDEX_KEY
        if self._budget_noted:
            yield BUDGET_KEY


@dataclass
class _Runs:
    """The runs under one parent (the journal, or a step): those recorded, and those of this try."""

    #: The first entry of each recorded run, read in number order: entries 1, 2, ... of ``recorded[n - 1]``.
    recorded: list[Lookup]
    taken: set[int] = field(default_factory=set)
    #: The recorded runs a run of this try took the calls left in flight of (see :meth:`DurableJournal.calls_taken_over`).
    taken_over: set[int] = field(default_factory=set)
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


def _mark_replaced(key: str, error: BaseException | str | None) -> None:
    if error is not None:
        log.warning(
            "Durable: could not record how a call left in flight was resolved; a later try resolves it again "
            "step=%s reason=%r",
            key,
            str(error),
        )


def _index_written(error: BaseException | None) -> None:
    if error is not None:
        log.warning("Durable: could not write the journal's index; clean-up may leave entries reason=%r", str(error))
