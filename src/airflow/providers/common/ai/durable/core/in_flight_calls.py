"""
Calls found in flight, resolved (R-56): what every adapter does once it found a call an earlier
try started and never finished, and the tool's policy for it (``core/in_flight.py``).

``fail`` and ``ask`` are resolved when the answer that asked for the call is handed out, before any
tool of it starts (:func:`stop_before_tools`); ``rerun`` and ``verify`` when the call is invoked
(:func:`resolved_as_invoked`). A call left in flight where its run no longer lines up with the
journal (a deploy changed what it asks) is resolved before the run's next live call, by the policy
of the tool that has its name now (:func:`resolve_left_in_flight`). How each was resolved goes with
its entry, into the log, the step's events and the try's summary.

The adapter finds the tool, the call's arguments and the policy (its framework's business); the
functions here hand back the error that stops the try rather than raising it, for the adapter to
carry out of its framework's run loop. A ``verify`` function that fails raises
:class:`InFlightNotVerified`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from airflow.providers.common.ai.durable.core import in_flight
from airflow.providers.common.ai.durable.core.approvals import AwaitingAnswer, approval_desk
from airflow.providers.common.ai.durable.core.fingerprint import canonical_json
from airflow.providers.common.ai.durable.core.masking import masked
from airflow.providers.common.ai.durable.core.runs import CallLeftInFlight, DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep

log = logging.getLogger(__name__)


class InFlightNotVerified(Exception):
    """A ``verify`` function raised or answered neither ``Happened`` nor ``None``: the call stays in flight."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def resolved(step: JournalStep, policy: str, outcome: str) -> None:
    """
    Say how a call found in flight was resolved: in the log, with its entry (``step.resolution``)
    and in the try's summary, usage and page.
    """
    step.resolution = f"{policy}: {outcome}"
    log.info("Durable: %s was in flight when a try died; %s", step.describe(), step.resolution)
    summarised(step.run, step.key, step.stored_name, step.idempotency_key, policy, outcome)


def summarised(run: DurableRun, key: str, tool: str, idempotency_key: str, policy: str, outcome: str) -> None:
    """Count a call found in flight, and how it was resolved, in the try's summary."""
    run.journal.stats.in_flight.append(
        {"step": key, "tool": tool, "idempotency_key": idempotency_key, "policy": policy, "outcome": outcome}
    )


def unresolved(step: JournalStep, arguments: str, why: str) -> Exception:
    """The error that fails the task for good over ``step``, found in flight; the step stays unresolved."""
    step.left_in_flight(why)
    return in_flight.unresolved(step.name, step.key, step.idempotency_key, arguments, why)


def stop_before_tools(
    step: JournalStep, policy: str, arguments: str, resolved_outputs: dict[str, str]
) -> Exception | None:
    """
    Resolve a call found in flight whose policy is ``fail`` or ``ask`` before any tool of its
    answer starts: the error that stops the try (the task fails, or waits for a person, with none
    of them half done), or ``None`` when the run goes on. A person's "it happened" puts the output
    to hand the model in ``resolved_outputs``, under the step's key.
    """
    if policy == in_flight.FAIL:
        resolved(step, policy, "the task failed for good")
        return unresolved(step, arguments, "its tool's policy is 'fail'")
    if policy != in_flight.ASK:
        return None
    desk = approval_desk()
    if desk is None:
        who = step.run.journal.host.wording.asks_a_person
        return unresolved(step, arguments, f"its tool's policy is 'ask', which only {who} can ask a person about")
    started = step.meta.get(in_flight.STARTED_META)
    question = in_flight.PendingInFlightQuestion(
        step.key,
        step.fingerprint or "",
        step.name,
        step.idempotency_key,
        arguments,
        started if isinstance(started, str) else None,
        asked=step.meta.get(in_flight.ASKED_META) is True,
    )
    decision = desk.decide_in_flight(step, question)
    if decision is None:
        return AwaitingAnswer(f"Durable: a person decides about {step.describe()}, in flight")
    resolved(step, policy, decision.describe())
    if decision.choice == in_flight.FAIL_TASK:
        step.mark_in_flight(asked=False)  # the request is spent: a clear asks anew
        step.run.journal.settle()
        return unresolved(step, arguments, f"a person chose to fail the task ({decision.describe()})")
    if decision.choice == in_flight.HAPPENED:
        resolved_outputs[step.key] = decision.output
    return None


async def resolved_as_invoked(
    step: JournalStep, policy: in_flight.InFlightPolicy, arguments: str, resolved_outputs: dict[str, str]
) -> in_flight.Happened | None:
    """
    How a call found in flight is resolved as it is invoked with ``arguments``: the output that
    says it happened (a person's, or its verify function's), or ``None`` when it runs again.
    """
    if step.key in resolved_outputs:  # a person said it happened
        return in_flight.Happened(resolved_outputs.pop(step.key))
    if step.resolution is not None:  # a person said to run it
        return None
    if policy.policy == in_flight.RERUN:
        (log.info if policy.safe_to_repeat else log.warning)(
            "Durable: a call an earlier try started and never finished runs again step=%s idempotency_key=%s",
            step.describe(),
            step.idempotency_key,
        )
        resolved(step, policy.policy, "ran again with the same idempotency key")
        return None
    try:
        verified = await answer_of_verify(policy, step.idempotency_key, arguments, step.describe())
    except InFlightNotVerified as error:
        step.left_in_flight(error.reason)
        raise
    resolved(step, policy.policy, "it happened" if verified is not None else "it did not happen, ran again")
    return verified


async def answer_of_verify(
    policy: in_flight.InFlightPolicy, key: str, arguments: str, call: str
) -> in_flight.Happened | None:
    """
    What the policy's verify function says of the call ``call`` found in flight. It runs off the
    event loop (a coroutine function on it); an error, or an answer that is neither ``Happened``
    nor ``None``, raises :class:`InFlightNotVerified`: the try fails and the call stays in flight.
    """
    verify = policy.verify
    assert verify is not None  # InFlightPolicy checks it goes with "verify"
    loaded = in_flight.arguments_of(arguments)
    try:
        if inspect.iscoroutinefunction(verify):
            verified = await verify(key, loaded)
        else:
            verified = await asyncio.to_thread(verify, key, loaded)
            if inspect.isawaitable(verified):
                verified = await verified
    except Exception as error:
        raise InFlightNotVerified(
            f"Durable: verify of {call}, in flight, raised {type(error).__name__}: {error}; the call "
            "stays in flight for the next try",
            reason=f"its verify function raised {type(error).__name__}",
        ) from error
    if verified is not None and not isinstance(verified, in_flight.Happened):
        raise InFlightNotVerified(
            f"Durable: verify of {call} returned {type(verified).__name__}: it must return "
            "Happened(output) when the call took effect, or None when it did not; the call stays in flight",
            reason=f"its verify function returned {type(verified).__name__}",
        )
    return verified


#: How a call left in flight that its verify function said happened is resolved.
VERIFIED_AS_HAPPENED = f"{in_flight.VERIFY}: it happened"

#: The calls left in flight that their verify function said happened, by :func:`same_call`: a call of
#: the changed run that asks the same is that call, and gets its output without running.
VerifiedCalls = dict[tuple[str, str], tuple[CallLeftInFlight, in_flight.Happened]]


def same_call(tool: str, arguments: str) -> tuple[str, str]:
    """What tells a call of ``tool`` with ``arguments`` from another: its tool's name and its arguments, as JSON."""
    return tool, canonical_json(in_flight.arguments_of(arguments))


async def resolve_left_in_flight(
    run: DurableRun,
    policy_named: Callable[[str], in_flight.InFlightPolicy | None],
    arguments_of: Callable[[CallLeftInFlight], str | None],
    verified: VerifiedCalls,
) -> Exception | None:
    """
    Before a live call of ``run``: resolve each call an earlier try left in flight where the run no
    longer lines up with the journal, by the policy of the tool that has its name now
    (``policy_named``, ``None`` for no tool), given the arguments the recorded answer that asked for
    it gave it (``arguments_of``, ``None`` when the journal no longer holds them). ``rerun``
    replaces its mark (the changed run's calls are its own, under their own keys); ``verify`` asks
    its function, and a call that happened goes into ``verified`` until a call that asks the same
    takes its output (:func:`take_verified`), or the run ends; ``fail`` and ``ask`` stop the try,
    and so does a call that no tool has the name of now: the error that stops it is returned, and
    names the call, which keeps its mark.
    """
    while run.calls_left_in_flight:
        call = run.calls_left_in_flight[0]
        arguments = arguments_of(call)
        policy = policy_named(call.name)
        changed = "its run changed since it was recorded (a deploy changed what it asks)"
        meta = call.entry.get("meta")
        if policy is None and isinstance(meta, dict) and meta.get(in_flight.POLICY_META) == in_flight.RERUN:
            # Its tool said a repeat was acceptable when it ran; the agent may offer it again later.
            policy = in_flight.DEFAULT_POLICY
        if policy is None:
            return _call_unresolved(
                call,
                arguments,
                f"{changed}, and no tool of the agent is named {call.name!r} now (renamed or removed), so no "
                "policy can resolve it",
                fix=f"give a tool of the agent the name {call.name!r} again, with the policy that fits, and "
                "clear the task",
            )
        if policy.policy == in_flight.FAIL:
            summarised(run, call.key, call.name, call.idempotency_key, policy.policy, "the task failed for good")
            return _call_unresolved(call, arguments, f"{changed}, and its tool's policy is 'fail'")
        if policy.policy == in_flight.ASK or (policy.policy == in_flight.VERIFY and arguments is None):
            cannot = (
                "a person is asked only about a call whose run still lines up with the journal"
                if policy.policy == in_flight.ASK
                else "the answer that asked for it is no longer in the journal"
            )
            return _call_unresolved(
                call,
                arguments,
                f"{changed}, and its tool's policy ('{policy.policy}') cannot resolve it: {cannot}",
                fix="give the tool the policy 'verify' or 'rerun', or deploy the run as it was, and clear the task",
            )
        if policy.policy == in_flight.RERUN:
            (log.info if policy.safe_to_repeat else log.warning)(
                "Durable: a call an earlier try left in flight is not run again: its run changed since, so the "
                "calls the changed run makes are its own, under their own keys step=%s idempotency_key=%s",
                call.describe(),
                call.idempotency_key,
            )
            outcome = "not run again, its run changed"
        else:
            assert arguments is not None
            happened = await answer_of_verify(policy, call.idempotency_key, arguments, call.describe())
            outcome = "it happened" if happened is not None else "it did not happen"
            if happened is not None:
                verified[same_call(call.name, arguments)] = (call, happened)
        resolution = f"{policy.policy}: {outcome}"
        log.info("Durable: %s was in flight when a try died and its run changed since; %s", call.describe(), resolution)
        summarised(run, call.key, call.name, call.idempotency_key, policy.policy, outcome)
        if outcome != "it happened":
            call.resolve(resolution)
        run.calls_left_in_flight.pop(0)
    return None


def _call_unresolved(
    call: CallLeftInFlight, arguments: str | None, why: str, fix: str = in_flight.GIVE_A_POLICY
) -> Exception:
    shown = arguments if arguments is not None else "(not in the journal)"
    return in_flight.unresolved(call.name, call.key, call.idempotency_key, shown, why, fix)


def take_verified(
    step: JournalStep, arguments: str, verified: VerifiedCalls
) -> tuple[CallLeftInFlight, in_flight.Happened] | None:
    """
    The call left in flight, verified as happened, that the live ``step`` asking ``arguments`` is
    (it asks the same), taken out of ``verified``: ``step`` does not run, its output is the call's.
    Record it, then resolve the call with what was recorded (``call.resolve(VERIFIED_AS_HAPPENED, ...)``).
    """
    if not verified:
        return None  # the common case, told without reading the arguments
    left = verified.pop(same_call(step.name, arguments), None)
    if left is not None:
        step.resolution = VERIFIED_AS_HAPPENED
        log.info(
            "Durable: %s is the call left in flight at %s, which happened: it does not run",
            step.describe(),
            left[0].key,
        )
    return left


def resolve_verified_as_the_run_ends(
    verified: VerifiedCalls, recorded_form: Callable[[CallLeftInFlight, Any], dict[str, Any] | None]
) -> None:
    """
    As a run ends: a call left in flight that happened, and that no call of the run asked again, is
    resolved with its output as ``recorded_form`` stores it for the call's tool; not one whose output
    cannot be recorded (``None``: its mark stays, a later try resolves it again), nor one that holds a
    secret (it would be stored masked).
    """
    for call, happened in verified.values():
        recorded = recorded_form(call, happened.output)
        if recorded is not None and not masked(recorded)[1]:
            call.resolve(VERIFIED_AS_HAPPENED, result=recorded, done=True)
    verified.clear()
