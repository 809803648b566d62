"""
Calls found in flight, on Pydantic AI's side (R-56): the core resolves them
(``core/in_flight_calls.py``); this module finds what it needs in Pydantic AI's terms (the
arguments a recorded answer gave a call left in flight by a run that changed since) and records
the output of a live tool call that does not run, as a function tool's output is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ToolCallPart

from airflow.providers.common.ai.durable.core import in_flight_calls
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint, recorded_form
from airflow.providers.common.ai.durable.core.in_flight import Happened, InFlightPolicy
from airflow.providers.common.ai.durable.core.in_flight_calls import VerifiedCalls
from airflow.providers.common.ai.durable.core.runs import CallLeftInFlight, DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.pydantic_ai._requests import asked_by, call_arguments, replayed_answer
from airflow.providers.common.ai.durable.pydantic_ai._tools import why_not_recordable


async def resolve_left_in_flight(
    run: DurableRun, policy_named: Callable[[str], InFlightPolicy | None], verified: VerifiedCalls
) -> None:
    """
    Before a live call of ``run``: resolve each call an earlier try left in flight where the run no
    longer lines up with the journal, by the policy of the tool that has its name now
    (``policy_named``, ``None`` for no tool); raise the error that stops the try, if one does.
    """
    stop = await in_flight_calls.resolve_left_in_flight(run, policy_named, arguments_of, verified)
    if stop is not None:
        raise stop


def arguments_of(call: CallLeftInFlight) -> str | None:
    """The arguments the recorded model answer that asked for ``call`` gave it, if the journal still holds it."""
    for entry in reversed(call.earlier):
        answer = replayed_answer(entry.get("result")) if entry.get("kind") == "model" else None
        for part in answer.parts if answer is not None else []:
            if not isinstance(part, ToolCallPart) or part.tool_name != call.name:
                continue
            if recorded_form(call.entry.get("fingerprint"), fingerprint(asked_by(part), what=call.describe())):
                return call_arguments(part)
    return None


async def output_without_running(
    step: JournalStep,
    policy: InFlightPolicy,
    arguments: str,
    resolved_outputs: dict[str, str],
    verified: VerifiedCalls,
) -> Happened | None:
    """
    The output of a live tool call that does not run, recorded with it, or ``None`` when it runs:
    it was found in flight and is resolved as done, or it asks what a call left in flight where the
    run changed asked, and that call happened (it is that call; the call's mark is replaced once
    this one is recorded).
    """
    if step.interrupted:
        happened = await in_flight_calls.resolved_as_invoked(step, policy, arguments, resolved_outputs)
        if happened is not None:
            _recorded_without_running(step, happened.output)
        return happened
    left = in_flight_calls.take_verified(step, arguments, verified)
    if left is None:
        return None
    call, happened = left
    recorded = _recorded_without_running(step, happened.output)
    if recorded is not None:
        call.resolve(in_flight_calls.VERIFIED_AS_HAPPENED, result=recorded, done=True)
    return happened


def recorded_output(output: Any) -> dict[str, Any] | None:
    """A tool's output as its journal entry holds it, or ``None`` when it would not come back the same."""
    return {"output": output} if why_not_recordable(output) is None else None


def _recorded_without_running(step: JournalStep, output: Any) -> dict[str, Any] | None:
    """Record ``output`` as the result of ``step``, which did not run; what was stored, if a later try replays it."""
    recorded = recorded_output(output)
    if recorded is None:
        step.not_recordable(why_not_recordable(output) or "it cannot be recorded")
        return None
    return recorded if step.record(recorded, ran=False) else None


def resolve_verified_as_the_run_ends(verified: VerifiedCalls) -> None:
    """As a run ends: a call left in flight that happened, and that no call of the run asked again, is resolved."""
    in_flight_calls.resolve_verified_as_the_run_ends(verified, lambda call, output: recorded_output(output))
