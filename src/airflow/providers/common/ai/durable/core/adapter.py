"""
The contract of a framework adapter: what a package ``durable/<framework>/`` calls of the core to
make its framework's agent runs durable, and what it must never do. ``durable/openai_agents/`` is
one; every other is written against this module and the ones it names, never against another
adapter.

The journal
    The running task's journal is :func:`~.scope.current_journal` (``None`` outside a task: the
    run is not journaled). The adapter never builds one for a task: the host binds it
    (``core/host.py``), with the try it serves and the budget's first try.

A run
    ``with journal.run(key=...) as run:`` opens one agent run (:class:`~.runs.DurableRun`); a run
    opened while a step runs (a tool that runs an agent) nests under that step. ``key`` tells
    apart runs that ask the same; the adapter takes it from its user and passes it as it is,
    checked at the call with the run's budget by :func:`checked_run_options`; a run that asks to
    keep the journal after success marks it with :func:`kept`.

Steps, and the kinds they are claimed as
    Each call the framework makes to the world is claimed, in the order the run makes them, with
    ``run.claim(kind, name, fingerprint, parts=...)``: ``kind`` is a name written into the journal
    (``"model"``, ``"tool"``, ``"session"``; ``"approval"`` is the core's), claimed by the adapter
    that makes the call and pinned by a golden journal. Concurrent calls are claimed first, in the
    order they must keep on every try. The :class:`~.steps.JournalStep` then says what to do:

    * ``step.replayed``: hand ``step.result`` back instead of calling, then ``step.handed_out()``;
      a result that no longer loads is ``step.refuse_replay(reason)`` and the call runs live;
    * live: run the call inside ``with step.running():`` (an exception out of it fails the step),
      then ``step.record(result)``; or ``step.fail(reason)`` when it did not complete,
      ``step.not_recordable(reason)`` when its result cannot be stored, ``step.discard(reason)`` when
      a recorded answer made the run fail and would fail it again, ``step.attempt_failed(error)``
      when the framework retries the same call.

Calls found in flight (R-56)
    A tool call with side effects is marked before it starts (:func:`marked_in_flight`)
    and its tool's :class:`~.in_flight.InFlightPolicy` (declared with ``in_flight(...)``, attached
    with :func:`~.in_flight.attach_policy`) says what a retry does with it.
    ``core/in_flight_calls.py`` resolves it and says how (log, entry, summary, events): the adapter
    finds the tool, its arguments and its policy, and carries the stop it is handed out of its
    framework's run loop.

The task log (R-38)
    Each run's lines come from a :class:`~.progress.ProgressLog` on the adapter's logger, given to
    the run as ``run.progress``: the adapter hands it each step as it completes
    (``progress.step_done(step)``) and calls ``progress.flush()`` as a live call starts, before the
    call's own lines, and as the run ends, however it ends; the core flushes it before a line of
    its own about why a claimed call runs live.

The budget (R-58)
    Before each live model request the adapter awaits :func:`admitted_by_budget`, and once the
    request returned calls :func:`settled` with what it used (``ModelUsage.of_call``), or ``None``
    when it got no answer. A refusal is the error that fails the task for good.

The idempotency key
    A tool reads the key of the call running now with :func:`current_idempotency_key`; an adapter
    re-exports it from its public module. An MCP tool call sends it to the server in the request's
    ``_meta``, under :data:`MCP_IDEMPOTENCY_KEY_META`.

Never
    An adapter never imports another adapter, nor the Airflow binding (``durable/airflow/``): what
    it needs of the system comes through the host. It never reads a private name of the core, never
    writes a journal key of its own, never assigns a module global of the core, and never names its
    own entry points in a message the core raises: those words are the host's
    (:class:`~.host.HostWording`). Private names of its framework live in one module of its package.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.in_flight import RERUN
from airflow.providers.common.ai.durable.core.scope import running_step

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.budget import BudgetLedger
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.steps import JournalStep
    from airflow.providers.common.ai.durable.core.usage import ModelUsage


#: The ``_meta`` key under which a journaled MCP tool call sends its idempotency key to the server.
MCP_IDEMPOTENCY_KEY_META = "airflow.apache.org/idempotency-key"


def current_idempotency_key() -> str:
    """
    The idempotency key of the function-tool or MCP tool call running now: the same string on
    every try of the task instance for the same call, so a tool with side effects can recognise
    a repeat.

    Raises ``RuntimeError`` outside a function-tool or MCP tool call of a durable run.
    """
    step = running_step()
    if step is None:
        raise RuntimeError(f"current_idempotency_key() only works inside {current_host().wording.durable_tool_call}")
    return step.idempotency_key


@dataclass(frozen=True)
class BudgetAdmission:
    """A live request the task's budget let through: the ledger, and the most it can add, to settle."""

    ledger: BudgetLedger
    most: dict[str, float | None]


async def admitted_by_budget(
    journal: DurableJournal, model: str, key: str, max_output_tokens: int | None
) -> BudgetAdmission | None:
    """
    Wait until the task's budget lets a live request to ``model`` at step ``key`` be sent (``None``
    when the task has no budget); hand what it returns to :func:`settled` once the request returned.
    A refusal raises the error that fails the task for good, and the step's summary says why it
    has no result.
    """
    ledger = journal.budget
    if ledger is None:
        return None
    try:
        return BudgetAdmission(ledger, await ledger.admit(model, key, max_output_tokens))
    except Exception as refused:
        journal.stats.refusals[key] = str(refused)
        raise


def settled(admission: BudgetAdmission | None, used: ModelUsage | None) -> None:
    """The request :func:`admitted_by_budget` let through returned; ``used``: what it used, if it got an answer."""
    if admission is not None:
        admission.ledger.settled(admission.most, used)


def checked_run_options(key: Any, budget: Any, *, key_argument: str) -> tuple[str | None, UsageBudget | None]:
    """
    A run's key and budget as an adapter's entry point takes them, refused at the call when they
    are not a non-empty string and a :class:`~.budget.UsageBudget`; ``key_argument``: the entry
    point's name for the key, for the message.
    """
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise ValueError(f"{key_argument} must be a non-empty string that names this run on every try, not {key!r}")
    if budget is not None and not isinstance(budget, UsageBudget):
        raise TypeError(
            f"budget must be a UsageBudget, for example UsageBudget(max_total_tokens=100_000), not {budget!r}"
        )
    return key, budget


def kept(journal: DurableJournal | None, keep_journal: bool | None) -> DurableJournal | None:
    """``journal``, kept after the task succeeds if a run asks for it (``keep_journal``; one run asking is enough)."""
    if journal is not None and keep_journal is not None and journal.keep_after_success is not True:
        journal.keep_after_success = bool(keep_journal)
    return journal


class InFlightMarkNotStored(Exception):
    """A call whose policy needs its in-flight mark in the store did not run: the store refused the mark."""


async def after_earlier_writes(step: JournalStep) -> None:
    """
    Wait, off the event loop, until every entry written so far is in the store: the request about
    to be sent may carry a tool's result, and a try killed once it is sent must not run that tool again.
    """
    journal = step.run.journal
    if journal.has_pending_writes():
        await asyncio.to_thread(journal.settle)


async def marked_in_flight(step: JournalStep, policy: str) -> None:
    """
    Mark a tool call in flight before it starts. For a policy other than ``rerun`` its retry must
    find the mark, not nothing: wait until it is stored, and raise :class:`InFlightMarkNotStored`
    (the call does not run; the next try runs it) when the store refused it.
    """
    step.mark_in_flight(policy=policy)
    if policy != RERUN:
        await after_earlier_writes(step)
        if step.refused == "in-flight mark":
            raise InFlightMarkNotStored(
                f"Durable: the store refused the in-flight mark of {step.describe()} (policy "
                f"{policy!r}), so the call did not run; the next try runs it"
            )
