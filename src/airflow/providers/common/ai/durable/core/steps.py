"""
One call at one position of a run, replayed or live: :class:`JournalStep`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core import events
from airflow.providers.common.ai.durable.core.divergence import stored_parts
from airflow.providers.common.ai.durable.core.entries import (
    DISCARDED,
    DONE,
    FAILED,
    FORMAT_VERSION,
    IN_FLIGHT,
    MASKED,
    STARTED,
    json_text,
)
from airflow.providers.common.ai.durable.core.fingerprint import recorded_form, stored_digest, stored_fingerprint
from airflow.providers.common.ai.durable.core.in_flight import (
    ASKED_META,
    POLICY_META,
    RESOLUTION_META,
    STARTED_META,
    started_now,
)
from airflow.providers.common.ai.durable.core.masking import masked, masked_text
from airflow.providers.common.ai.durable.core.scope import step_scope
from airflow.providers.common.ai.durable.core.usage import ModelUsage

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.runs import DurableRun

log = logging.getLogger(__name__)


def idempotency_key_of(identity: str, key: str) -> str:
    """The idempotency key of the call at step ``key`` of the journal whose storage is ``identity``."""
    digest = hashlib.sha256(f"{identity}\0{key}".encode()).hexdigest()
    return f"durable-{digest[:32]}"


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
        *,
        counted_when_handed_out: bool = False,
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
        #: An earlier try started this very call and never finished it (``meta`` holds its in-flight mark's).
        self.interrupted = False
        #: How this call, found in flight, was resolved (R-56): recorded with its in-flight mark and its result.
        self.resolution: str | None = None
        #: What of this step's writes the store refused last (``"in-flight mark"``, ``"result"``, ...), if any.
        self.refused: str | None = None
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
        #: Why this step has no recorded result in this try, as its summary says: it failed, could
        #: not be recorded, was cut off during its call, or stayed in flight.
        self.no_result: str | None = None
        self._finished = False
        # Whether this replayed step is counted in the try's summary (see handed_out), and when.
        self._counted = False
        self._counted_when_handed_out = counted_when_handed_out
        #: When the step was claimed (its call started, or its entry was looked up), seconds since the epoch.
        self.started = events.now()
        #: What this live call reported with used(), recorded with its result: its total tokens,
        #: and its input and output tokens and cost in USD (where known).
        self.tokens: int | None = None
        self.usage: dict[str, Any] = {}
        #: What became of this step in this try (``events.LIVE``, ``events.FAILED``, ...), once it ended.
        self.outcome: str | None = None

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
        return idempotency_key_of(self.run.journal.storage.identity, self.key)

    def describe(self) -> str:
        return f"{self.kind} {self.name!r} at {self.key}"

    @contextlib.contextmanager
    def running(self, *, mark_in_flight: bool = False) -> Iterator[JournalStep]:
        """
        Run the live call of this step inside this block; with ``mark_in_flight`` it is written
        as in flight first (see :meth:`mark_in_flight`). An exception out of the block marks the
        step failed; a ``BaseException`` that is not an ``Exception`` (a task timeout, a
        cancellation) leaves it marked in flight.
        """
        if mark_in_flight:
            self.mark_in_flight()
        with step_scope(self):
            try:
                yield self
            except Exception as error:
                self.fail(f"it raised {type(error).__name__}")
                raise
            except BaseException as error:
                # Cut off (the task's timeout, a cancellation, the process exiting): the call may have
                # done its work, so its in-flight mark stays for the next try to resolve. It did
                # not run to its end: the summary names it apart from the calls that ran live.
                self._finished = True
                self.no_result = f"the try was cut off during the call ({type(error).__name__}); it stays in flight"
                self.run.journal.stats.cut_off.append(f"{self.describe()} ({type(error).__name__})")
                raise

    def mark_in_flight(self, *, asked: bool | None = None, policy: str | None = None) -> None:
        """
        Write this step as in flight, with when it started, the in-flight ``policy`` of its tool
        and how it came to run (its ``resolution``): a try that dies during the call leaves the
        next try a record that this call was interrupted. With ``asked`` the call found in flight
        does not run now: its mark keeps its start and policy and says whether a person was asked
        about it and not heard yet.
        """
        fields: dict[str, Any] = started_now()
        if policy is not None:
            fields[POLICY_META] = policy
        if asked is not None:
            fields.update({k: v for k, v in self.meta.items() if k in (STARTED_META, POLICY_META)})
            if asked:
                fields[ASKED_META] = True
        if self.resolution is not None:
            fields[RESOLUTION_META] = self.resolution
        self._mark(IN_FLIGHT, "in-flight mark", meta=fields)

    def record(self, result: Any, *, meta: dict[str, Any] | None = None, ran: bool = True) -> bool:
        """
        Record the result of this live step, masked; return whether a next try can replay it.

        A result that is not JSON, or a write the store refuses, is logged and named in the
        summary: the step runs again on the next try and nothing recorded before is touched. A
        result that held a secret is stored masked and runs live again: a replay must never hand
        on ``***`` in place of the secret. The write may still be on its way to the store (see
        :meth:`DurableJournal.settle`); a store that refuses it then is reported as above. A result
        the call did not produce (``ran=False``: a call in flight resolved as done) is not counted
        as a live call, and is not stored if it holds a secret: the call's in-flight mark stays, so
        that a later try resolves it again by its policy rather than running it.
        """
        if self._incomplete is not None:
            self.fail(self._incomplete)
            return False
        if ran:
            self._finish()
        else:
            self._finished = True
        stored, held_a_secret = masked(result)
        if held_a_secret and not ran:
            self._not_recorded(
                "result", "it held a secret, so the call stays in flight", then="its policy resolves it again"
            )
            self._emit(events.RESOLVED, self.usage)
            return False
        state = MASKED if held_a_secret else DONE
        meta = {
            **({"tokens": self.tokens} if self.tokens is not None else {}),
            **self.usage,
            **({RESOLUTION_META: self.resolution} if self.resolution is not None else {}),
            **(meta or {}),
        }
        written = self._write(self._entry(state, result=stored, **({"meta": meta} if meta else {})), what="result")
        if written:
            self.recorded = stored
        if written and held_a_secret:
            self._not_recorded("result", "it held a secret, which is stored masked")
        replayable = written and not held_a_secret
        self._emit(events.RESOLVED if not ran else events.LIVE if replayable else events.NOT_RECORDED, self.usage)
        return replayable

    def used(self, usage: ModelUsage) -> ModelUsage:
        """
        Count what this live call used (a model call's requests, tokens and cost) in the try's
        usage; tokens and cost are recorded with its result, so that a replay knows what it saved.
        """
        self.run.journal.stats.count_used(self.name, usage)
        self.tokens = usage.total_tokens
        self.usage = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            **({"cost_usd": usage.cost_usd} if usage.cost_usd is not None else {}),
        }
        return usage

    def keep_live(self, reason: str) -> None:
        """This call will return without having completed (a run it started stopped): never record it."""
        self._incomplete = reason

    def not_recordable(self, reason: str) -> None:
        """This live step completed, but its result cannot be recorded: it runs again next try."""
        self._finish()
        self.no_result = reason
        self._not_recorded("result", reason)
        self._mark(FAILED, "failure mark")
        self._emit(events.NOT_RECORDED, self.usage, reason=reason)

    def fail(self, reason: str = "it failed") -> None:
        """Mark this live step failed: it is not recorded and runs again on the next try."""
        if self._finished:
            return
        self._finish()
        self.failure = self.no_result = reason
        log.debug("Durable: step failed, so it runs live again next try step=%s reason=%r", self.describe(), reason)
        self._mark(FAILED, "failure mark")
        self._emit(events.FAILED, self.usage, reason=reason)

    def attempt_failed(self, error: BaseException) -> None:
        """
        A live call of this step raised and may be made again in this try (the SDK retries a model
        request on the same step): only its watchers hear of it; the step stays unrecorded.
        """
        if isinstance(error, Exception):
            self._emit(events.FAILED, self.usage, reason=f"it raised {type(error).__name__}")
        else:
            self.no_result = f"the try was cut off during the request ({type(error).__name__})"

    def left_in_flight(self, reason: str) -> None:
        """
        This call, found in flight, stays unresolved in this try (its policy or a person failed the
        task, or its verify function failed): its watchers hear it failed, and it has no result in
        this try. Its in-flight mark stays for the next try.
        """
        self._emit(events.FAILED, self.usage, reason=reason)
        self.outcome = None
        self.no_result = reason

    def handed_out(self) -> None:
        """Count this replayed step in the try's summary and usage: its recorded result was used."""
        if self.replayed and not self._counted:
            self._counted = True
            self.run.journal.stats.count_replayed(self.kind, self.name, self.meta)
            self._emit(events.REPLAYED, self.meta)

    def refuse_replay(self, reason: str) -> None:
        """
        The recorded result can no longer be used (for example its types no longer load): this
        step runs live, and so does every later step of its run.
        """
        if self._counted:
            self.run.journal.stats.uncount_replayed(self.kind, self.name, self.meta)
        self.replayed, self.result, self.meta, self._counted = False, None, {}, False
        self.run.diverge(self, reason)

    def discard(self, reason: str) -> None:
        """
        Keep the next try from replaying this step's recorded entry, for example a model answer
        that made the run fail and would fail it the same way again.
        """
        log.info("Durable: the next try runs this call live again step=%s reason=%r", self.describe(), reason)
        self._write(self._entry(DISCARDED), what="discard mark")

    def mark_started(self) -> None:
        """Write this step, the first of a run under a new number, as started: it holds the number from now on."""
        self._mark(STARTED, "start mark")

    def replay(self, entry: dict[str, Any]) -> None:
        """Replay ``entry``, this call's recorded one: counted now, or once handed out if claimed so."""
        self.replayed = True
        self.result = entry.get("result")
        self.meta = entry.get("meta") or {}
        if not self._counted_when_handed_out:
            self.handed_out()

    def _mark(self, state: str, what: str, **fields: Any) -> None:
        # A failure only replaces a mark this try wrote: with none, the next try runs it live anyway.
        if state == FAILED and not self._marked:
            return
        self._marked = self._write(self._entry(state, **fields), what=what) or self._marked

    def _write(self, entry: dict[str, Any], *, what: str) -> bool:
        """
        Queue ``entry`` as this step's entry; return whether it could be (it is JSON). A write the
        store refuses is reported when the store answers.
        """
        try:
            text = json_text(entry)
        except (TypeError, ValueError, RecursionError) as error:
            return self._not_recorded(what, f"it is not JSON: {type(error).__name__}: {str(error)[:200]}")
        run = self.run
        problem = run.fence() if run.snapshots else None
        if problem is not None:
            return self._not_recorded(what, problem)
        done = entry["state"] == DONE

        def stored(error: BaseException | None) -> None:
            run.note_stored(self.position, text if error is None else None)
            if error is not None:
                self.refused = what
                if what == "result":
                    self.recorded = None
                self._not_recorded(what, f"the store refused it: {error}")
            elif done:
                run.journal.stats.count_recorded(self.kind)

        run.journal.io.write(self.key, text, stored)
        return True

    def _not_recorded(self, what: str, reason: str, *, then: str = "it runs again") -> bool:
        log.warning(
            "Durable: could not record a step, so %s next try step=%s what=%s reason=%r",
            then,
            self.describe(),
            what,
            reason,
        )
        if what == "result":
            self.run.journal.stats.count_not_recorded(self.kind, self.describe(), reason)
        return False

    def _emit(self, outcome: str, used: dict[str, Any], reason: str | None = None) -> None:
        self.outcome = outcome
        host = self.run.journal.host
        if not host.listeners:
            return

        def number(name: str) -> Any:
            value = used.get(name)
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        host.emit(
            events.StepEvent(
                kind=self.kind,
                name=self.stored_name,
                key=self.key,
                outcome=outcome,
                started=self.started,
                ended=events.now(),
                input_tokens=number("input_tokens"),
                output_tokens=number("output_tokens"),
                total_tokens=number("tokens") if "tokens" in used else self.tokens,
                cost_usd=number("cost_usd"),
                resolution=self.resolution,
                reason=reason,
            )
        )

    def _finish(self) -> None:
        self._finished = True
        self.run.journal.stats.ran_live[self.kind] += 1

    @functools.cached_property
    def stored_name(self) -> str:
        """
        This call's name as its entries store it: masked if it holds a secret (it then matches no
        call and runs live). Masked once per step: a tool step writes its in-flight mark and its result.
        """
        return masked_text(self.name)

    def _entry(self, state: str, **fields: Any) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "kind": self.kind,
            "name": self.stored_name,
            "fingerprint": stored_fingerprint(self.fingerprint),
            "follows": stored_digest(self.follows),
            "state": state,
            **({"parts": stored_parts(self.parts)} if self.parts is not None else {}),
            **({"twins": sorted(self.run.twins)} if self.position == 1 and self.run.twins else {}),
            **fields,
        }
