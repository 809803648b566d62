"""
Calls found in flight, on the SDK's side (R-56): a call an earlier try started and never finished
is resolved by its tool's policy (``_tools.policy_of``). ``fail`` and ``ask`` are resolved when the
answer that asked for the call is handed out, before any tool of it starts; ``rerun`` and
``verify`` when the call is invoked. How each was resolved goes with its entry, into the log and
into the try's summary.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from airflow.providers.common.ai.durable.core import in_flight
from airflow.providers.common.ai.durable.core.approvals import AwaitingAnswer, approval_desk
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.openai_agents._tools import policy_of

# The adapter's logger: log settings name it.
log = logging.getLogger("airflow.providers.common.ai.durable.openai_agents")


class RunStopped(BaseException):
    """
    Carries ``error`` out of the SDK's run loop, which neither retries nor wraps a ``BaseException``:
    a call in flight that fails the task or waits for a person. ``_agent_run._journaled`` raises ``error``.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class InFlightMarkNotStored(Exception):
    """A call whose policy needs its in-flight mark in the store did not run: the store refused the mark."""


class InFlightNotVerified(Exception):
    """A ``verify`` function raised or answered neither ``Happened`` nor ``None``: the call stays in flight."""


def _resolve(step: JournalStep, policy: str, outcome: str) -> None:
    """
    Say how a call found in flight was resolved: in the log, with its entry (``step.resolution``)
    and in the try's summary, usage and page.
    """
    step.resolution = f"{policy}: {outcome}"
    log.info("Durable: %s was in flight when a try died; %s", step.describe(), step.resolution)
    step.run.journal.stats.in_flight.append(
        {
            "step": step.key,
            "tool": step._stored_name,
            "idempotency_key": step.idempotency_key,
            "policy": policy,
            "outcome": outcome,
        }
    )


def _unresolved(step: JournalStep, arguments: str, why: str) -> Exception:
    step.left_in_flight(why)
    return in_flight.unresolved(step.name, step.key, step.idempotency_key, arguments, why)


async def _verified(step: JournalStep, policy: in_flight.InFlightPolicy, arguments: str) -> in_flight.Happened | None:
    """
    What the tool's verify function says of a call found in flight. It runs off the event loop
    (a coroutine function on it); an error, or an answer that is neither ``Happened`` nor ``None``,
    fails the try and leaves the call in flight for the next.
    """
    verify = policy.verify
    assert verify is not None  # InFlightPolicy checks it goes with "verify"
    key, loaded = step.idempotency_key, in_flight.arguments_of(arguments)
    try:
        if inspect.iscoroutinefunction(verify):
            verified = await verify(key, loaded)
        else:
            verified = await asyncio.to_thread(verify, key, loaded)
            if inspect.isawaitable(verified):
                verified = await verified
    except Exception as error:
        step.left_in_flight(f"its verify function raised {type(error).__name__}")
        raise InFlightNotVerified(
            f"Durable: verify of {step.describe()}, in flight, raised {type(error).__name__}: {error}; the call "
            "stays in flight for the next try"
        ) from error
    if verified is not None and not isinstance(verified, in_flight.Happened):
        step.left_in_flight(f"its verify function returned {type(verified).__name__}")
        raise InFlightNotVerified(
            f"Durable: verify of {step.describe()} returned {type(verified).__name__}: it must return "
            "Happened(output) when the call took effect, or None when it did not; the call stays in flight"
        )
    return verified


def resolve_before_tools(step: JournalStep, tool: Any, arguments: str, resolved_outputs: dict[str, str]) -> None:
    """
    Resolve a call found in flight whose policy is ``fail`` or ``ask`` before any tool of its
    answer starts: the task fails, or waits for a person, with none of them half done.
    """
    policy = policy_of(tool).policy
    if policy == in_flight.FAIL:
        _resolve(step, policy, "the task failed for good")
        raise RunStopped(_unresolved(step, arguments, "its tool's policy is 'fail'"))
    if policy != in_flight.ASK:
        return
    desk = approval_desk()
    if desk is None:
        raise RunStopped(
            _unresolved(
                step,
                arguments,
                "its tool's policy is 'ask', which only AgentOperator(durable=True) can ask a person about",
            )
        )
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
        raise RunStopped(AwaitingAnswer(f"Durable: a person decides about {step.describe()}, in flight"))
    _resolve(step, policy, decision.describe())
    if decision.choice == in_flight.FAIL_TASK:
        step.mark_in_flight(asked=False)  # the request is spent: a clear asks anew
        step.run.journal.settle()
        raise RunStopped(_unresolved(step, arguments, f"a person chose to fail the task ({decision.describe()})"))
    if decision.choice == in_flight.HAPPENED:
        resolved_outputs[step.key] = decision.output


async def resolved_as_invoked(
    step: JournalStep, policy: in_flight.InFlightPolicy, context: Any, resolved_outputs: dict[str, str]
) -> in_flight.Happened | None:
    """
    How a call found in flight is resolved as it is invoked: the output that says it happened
    (a person's, or its verify function's), or ``None`` when it runs again.
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
        _resolve(step, policy.policy, "ran again with the same idempotency key")
        return None
    verified = await _verified(step, policy, getattr(context, "tool_arguments", "") or "")
    _resolve(step, policy.policy, "it happened" if verified is not None else "it did not happen, ran again")
    return verified
