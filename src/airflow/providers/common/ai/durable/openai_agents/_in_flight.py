"""
Calls found in flight, on the SDK's side (R-56): the core resolves them
(``core/in_flight_calls.py``); this module finds what it needs in the SDK's terms (the tool and its
policy, ``_tools.policy_of``, the arguments a recorded answer gave a call), records the output of a
call that does not run as the SDK's tool output, and carries the error that stops the try through
the SDK's run loop (``RunStopped``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents import FunctionTool

from airflow.providers.common.ai.durable.core import in_flight_calls
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint, recorded_form
from airflow.providers.common.ai.durable.core.in_flight import Happened, InFlightPolicy
from airflow.providers.common.ai.durable.core.in_flight_calls import InFlightNotVerified, VerifiedCalls
from airflow.providers.common.ai.durable.core.runs import CallLeftInFlight, DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.openai_agents._sdk_private import declared_output_adapter
from airflow.providers.common.ai.durable.openai_agents._stops import RunStopped, stopping
from airflow.providers.common.ai.durable.openai_agents._tool_output import ToolOutputNotRecordable, encode_tool_output
from airflow.providers.common.ai.durable.openai_agents._tools import policy_of


def resolve_before_tools(step: JournalStep, tool: Any, arguments: str, resolved_outputs: dict[str, str]) -> None:
    """
    Resolve a call found in flight whose policy is ``fail`` or ``ask`` before any tool of its
    answer starts: the task fails, or waits for a person, with none of them half done.
    """
    stop = in_flight_calls.stop_before_tools(step, policy_of(tool).policy, arguments, resolved_outputs)
    if stop is not None:
        raise RunStopped(stop)


async def resolve_left_in_flight(
    run: DurableRun, tools: Iterable[Any], verified: VerifiedCalls, *, streamed: bool = False
) -> None:
    """
    Before a live call of ``run``: resolve each call an earlier try left in flight where the run no
    longer lines up with the journal, by the policy of the function tool among ``tools`` that has
    its name now (``in_flight_calls.resolve_left_in_flight``). A streamed run stops with the error
    itself: it hands the user its loop's exception as it is.
    """
    if not run.calls_left_in_flight:
        return  # the common case, told before the tools are looked at
    by_name = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)}

    def policy_named(name: str) -> InFlightPolicy | None:
        tool = by_name.get(name)
        return policy_of(tool) if tool is not None else None

    try:
        stop = await in_flight_calls.resolve_left_in_flight(run, policy_named, _arguments_of, verified)
    except InFlightNotVerified as error:
        stopping(error)  # the try fails: in a nested run, the call it runs in must not take it for a tool's failure
        raise
    if stop is not None:
        if streamed:
            raise stopping(stop)
        raise RunStopped(stop)


def _arguments_of(call: CallLeftInFlight) -> str | None:
    """The arguments the recorded model answer that asked for ``call`` gave it, if the journal still holds it."""
    for entry in reversed(call.earlier):
        result = entry.get("result")
        output = result.get("output") if isinstance(result, dict) else None
        for item in output if isinstance(output, list) else []:
            if not isinstance(item, dict) or item.get("type") != "function_call" or item.get("name") != call.name:
                continue
            asked = {"name": call.name, "arguments": item.get("arguments"), "call_id": item.get("call_id")}
            if recorded_form(call.entry.get("fingerprint"), fingerprint(asked, what=call.describe())) is not None:
                return str(item.get("arguments"))
    return None


async def output_without_running(
    step: JournalStep,
    policy: InFlightPolicy,
    context: Any,
    declared: Any,
    resolved_outputs: dict[str, str],
    durable: Any,
) -> Happened | None:
    """
    The output of a live tool call that does not run, recorded with it: it was found in flight and
    is resolved as done, or it asks what a call left in flight where the run changed asked, and that
    call happened (it is that call; the call's mark is replaced once this one is recorded).
    ``durable`` is the journaled run (``_agent_run.DurableAgentRun``).
    """
    await resolve_left_in_flight(step.run, durable.answer_tools.values(), durable.verified_left_in_flight)
    arguments = getattr(context, "tool_arguments", "") or ""
    if step.interrupted:
        try:
            resolved = await in_flight_calls.resolved_as_invoked(step, policy, arguments, resolved_outputs)
        except InFlightNotVerified as error:
            stopping(error)  # the try fails: in a nested run, the call it runs in must not take it for a tool's failure
            raise
        if resolved is not None:
            _recorded_without_running(step, resolved.output, declared)
        return resolved
    left = in_flight_calls.take_verified(step, arguments, durable.verified_left_in_flight)
    if left is None:
        return None
    call, happened = left
    recorded = _recorded_without_running(step, happened.output, declared)
    if recorded is not None:
        call.resolve(in_flight_calls.VERIFIED_AS_HAPPENED, result=recorded, done=True)
    return happened


def _recorded_without_running(step: JournalStep, output: Any, declared: Any) -> dict[str, Any] | None:
    """Record ``output`` as the result of ``step``, which did not run; what was stored, if a later try replays it."""
    try:
        recorded = encode_tool_output(output, declared)
    except ToolOutputNotRecordable as error:
        step.not_recordable(str(error))
        return None
    return recorded if step.record(recorded, ran=False) else None


def resolve_verified_as_the_run_ends(verified: VerifiedCalls, tools: dict[str, Any]) -> None:
    """As a run ends: a call left in flight that happened, and that no call of the run asked again, is resolved."""

    def tool_output(call: CallLeftInFlight, output: Any) -> dict[str, Any] | None:
        tool = tools.get(call.name)
        try:
            return encode_tool_output(output, declared_output_adapter(tool) if tool else None)
        except ToolOutputNotRecordable:
            return None

    in_flight_calls.resolve_verified_as_the_run_ends(verified, tool_output)
