"""
Calls found in flight, on the SDK's side (R-56): a call an earlier try started and never finished
is resolved by its tool's policy (``_tools.policy_of``). ``fail`` and ``ask`` are resolved when the
answer that asked for the call is handed out, before any tool of it starts; ``rerun`` and
``verify`` when the call is invoked. A call left in flight where its run no longer lines up with
the journal (a deploy changed what it asks) is resolved before the run's next live call, by the
policy of the tool that has its name now. How each was resolved goes with its entry, into the log
and into the try's summary.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable
from typing import Any

from agents import FunctionTool

from airflow.providers.common.ai.durable.core import in_flight
from airflow.providers.common.ai.durable.core.approvals import AwaitingAnswer, approval_desk
from airflow.providers.common.ai.durable.core.fingerprint import canonical_json, fingerprint, recorded_form
from airflow.providers.common.ai.durable.core.masking import masked
from airflow.providers.common.ai.durable.core.runs import CallLeftInFlight, DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.openai_agents._sdk_private import declared_output_adapter
from airflow.providers.common.ai.durable.openai_agents._stops import RunStopped, stopping
from airflow.providers.common.ai.durable.openai_agents._tool_output import ToolOutputNotRecordable, encode_tool_output
from airflow.providers.common.ai.durable.openai_agents._tools import policy_of

log = logging.getLogger(__name__)


class InFlightMarkNotStored(Exception):
    """A call whose policy needs its in-flight mark in the store did not run: the store refused the mark."""


class InFlightNotVerified(Exception):
    """A ``verify`` function raised or answered neither ``Happened`` nor ``None``: the call stays in flight."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
        stopping(self)  # the try fails: in a nested run, the call it runs in must not take it for a tool's failure


def _resolve(step: JournalStep, policy: str, outcome: str) -> None:
    """
    Say how a call found in flight was resolved: in the log, with its entry (``step.resolution``)
    and in the try's summary, usage and page.
    """
    step.resolution = f"{policy}: {outcome}"
    log.info("Durable: %s was in flight when a try died; %s", step.describe(), step.resolution)
    _summarised(step.run, step.key, step.stored_name, step.idempotency_key, policy, outcome)


def _summarised(run: DurableRun, key: str, tool: str, idempotency_key: str, policy: str, outcome: str) -> None:
    run.journal.stats.in_flight.append(
        {"step": key, "tool": tool, "idempotency_key": idempotency_key, "policy": policy, "outcome": outcome}
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
    try:
        return await _answer_of_verify(policy, step.idempotency_key, arguments, step.describe())
    except InFlightNotVerified as error:
        step.left_in_flight(error.reason)
        raise


async def _answer_of_verify(
    policy: in_flight.InFlightPolicy, key: str, arguments: str, call: str
) -> in_flight.Happened | None:
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


#: The calls left in flight that their verify function said happened, by :func:`same_call`: a call of
#: the changed run that asks the same is that call, and gets its output without running.
VerifiedCalls = dict[tuple[str, str], tuple[CallLeftInFlight, in_flight.Happened]]


def same_call(tool: str, arguments: str) -> tuple[str, str]:
    """What tells a call of ``tool`` with ``arguments`` from another: its tool's name and its arguments, as JSON."""
    return tool, canonical_json(in_flight.arguments_of(arguments))


async def resolve_left_in_flight(
    run: DurableRun, tools: Iterable[Any], verified: VerifiedCalls, *, streamed: bool = False
) -> None:
    """
    Before a live call of ``run``: resolve each call an earlier try left in flight where the run no
    longer lines up with the journal, by the policy of the tool among ``tools`` that has its name
    now. ``rerun`` replaces its mark (the changed run's calls are its own, under their own keys);
    ``verify`` asks its function, and a call that happened goes into ``verified`` until a call that
    asks the same takes its output, or the run ends; ``fail`` and ``ask`` stop the try, and so
    does a call that no tool has the name of now. Every stop names the call and keeps its mark.
    A streamed run stops with the error itself: it hands the user its loop's exception as it is.
    """
    try:
        await _resolve_left_in_flight(run, tools, verified)
    except RunStopped as stopped:
        if streamed:
            raise stopped.error from None
        raise


async def _resolve_left_in_flight(run: DurableRun, tools: Iterable[Any], verified: VerifiedCalls) -> None:
    by_name = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)}
    while run.calls_left_in_flight:
        call = run.calls_left_in_flight[0]
        arguments = _arguments_of(call)
        tool: FunctionTool | in_flight.InFlightPolicy | None = by_name.get(call.name)
        changed = "its run changed since it was recorded (a deploy changed what it asks)"
        meta = call.entry.get("meta")
        if tool is None and isinstance(meta, dict) and meta.get(in_flight.POLICY_META) == in_flight.RERUN:
            # Its tool said a repeat was acceptable when it ran; the agent may offer it again later.
            tool = in_flight.DEFAULT_POLICY
        if tool is None:
            raise RunStopped(
                _call_unresolved(
                    call,
                    arguments,
                    f"{changed}, and no tool of the agent is named {call.name!r} now (renamed or removed), so no "
                    "policy can resolve it",
                    fix=f"give a tool of the agent the name {call.name!r} again, with the policy that fits, and "
                    "clear the task",
                )
            )
        policy = tool if isinstance(tool, in_flight.InFlightPolicy) else policy_of(tool)
        if policy.policy == in_flight.FAIL:
            _summarised(run, call.key, call.name, call.idempotency_key, policy.policy, "the task failed for good")
            raise RunStopped(_call_unresolved(call, arguments, f"{changed}, and its tool's policy is 'fail'"))
        if policy.policy == in_flight.ASK or (policy.policy == in_flight.VERIFY and arguments is None):
            cannot = (
                "a person is asked only about a call whose run still lines up with the journal"
                if policy.policy == in_flight.ASK
                else "the answer that asked for it is no longer in the journal"
            )
            raise RunStopped(
                _call_unresolved(
                    call,
                    arguments,
                    f"{changed}, and its tool's policy ('{policy.policy}') cannot resolve it: {cannot}",
                    fix="give the tool the policy 'verify' or 'rerun', or deploy the run as it was, and clear the task",
                )
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
            happened = await _answer_of_verify(policy, call.idempotency_key, arguments, call.describe())
            outcome = "it happened" if happened is not None else "it did not happen"
            if happened is not None:
                verified[same_call(call.name, arguments)] = (call, happened)
        resolution = f"{policy.policy}: {outcome}"
        log.info("Durable: %s was in flight when a try died and its run changed since; %s", call.describe(), resolution)
        _summarised(run, call.key, call.name, call.idempotency_key, policy.policy, outcome)
        if outcome != "it happened":
            call.resolve(resolution)
        run.calls_left_in_flight.pop(0)


def _call_unresolved(
    call: CallLeftInFlight, arguments: str | None, why: str, fix: str = in_flight.GIVE_A_POLICY
) -> Exception:
    shown = arguments if arguments is not None else "(not in the journal)"
    return in_flight.unresolved(call.name, call.key, call.idempotency_key, shown, why, fix)


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
    policy: in_flight.InFlightPolicy,
    context: Any,
    declared: Any,
    resolved_outputs: dict[str, str],
    durable: Any,
) -> in_flight.Happened | None:
    """
    The output of a live tool call that does not run, recorded with it: it was found in flight and
    is resolved as done, or it asks what a call left in flight where the run changed asked, and that
    call happened (it is that call; the call's mark is replaced once this one is recorded).
    ``durable`` is the journaled run (``_agent_run.DurableAgentRun``).
    """
    await resolve_left_in_flight(step.run, durable.answer_tools.values(), durable.verified_left_in_flight)
    if step.interrupted:
        resolved = await resolved_as_invoked(step, policy, context, resolved_outputs)
        if resolved is not None:
            _recorded_without_running(step, resolved.output, declared)
        return resolved
    arguments = getattr(context, "tool_arguments", "") or ""
    left = durable.verified_left_in_flight.pop(same_call(step.name, arguments), None)
    if left is None:
        return None
    call, happened = left
    step.resolution = f"{in_flight.VERIFY}: it happened"
    log.info("Durable: %s is the call left in flight at %s, which happened: it does not run", step.describe(), call.key)
    recorded = _recorded_without_running(step, happened.output, declared)
    if recorded is not None:
        call.resolve(step.resolution, result=recorded, done=True)
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
    for call, happened in verified.values():
        tool = tools.get(call.name)
        try:
            recorded = encode_tool_output(happened.output, declared_output_adapter(tool) if tool else None)
        except ToolOutputNotRecordable:
            continue  # its mark stays: a later try resolves it again
        if not masked(recorded)[1]:  # nor one that holds a secret: it would be stored masked
            call.resolve(f"{in_flight.VERIFY}: it happened", result=recorded, done=True)
    verified.clear()
