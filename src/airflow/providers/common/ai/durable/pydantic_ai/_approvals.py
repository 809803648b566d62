"""
Approvals of deferred tool calls in a journaled Pydantic AI run (R-39, R-40, R-65): a call of a
tool that requires approval (``requires_approval=True``) is answered by the approval desk of the
task (``core/approvals.py``), as the OpenAI Agents SDK's ``needs_approval`` calls are. The run's
capability hands Pydantic AI's ``handle_deferred_tool_calls`` hook here: a recorded decision, or the
answer the task resumed with, becomes a ``DeferredToolResults`` (an approval runs the tool, a
rejection hands the model Pydantic AI's ``ToolDenied`` message); with neither, the run stops with
the core's :class:`~airflow.providers.common.ai.durable.core.approvals.AwaitingAnswer` and the
desk's ``pending`` says what to ask. Without a desk (a plain ``@task``) nothing is answered here:
the run ends as Pydantic AI ends it.

A tool may also ask for an approval itself, raising ``ApprovalRequired`` (before it does anything),
and Pydantic AI calls it again once the call is approved. Its step records that it asked
(:func:`record_asked_for_approval`), so that a replay asks again without running it and the
decision replays at the same position; the approved call is a step of its own, after the decision
(:func:`approved_call_step`).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.toolsets import FunctionToolset

from airflow.providers.common.ai.durable.core.approvals import ApprovalRequest, AwaitingAnswer, approval_desk
from airflow.providers.common.ai.durable.core.divergence import tool_call_parts
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep

#: What a tool step records when its call raised ``ApprovalRequired`` (a storage format: a rename is a migration).
ASKED_FOR_APPROVAL = "asked_for_approval"


def _arguments(call: ToolCallPart) -> str:
    return call.args if isinstance(call.args, str) else call.args_as_json_str()


def approval_request(agent: str, call: ToolCallPart) -> ApprovalRequest:
    """What a person is asked about one deferred ``call`` of the agent named ``agent``."""
    return ApprovalRequest(agent=agent, tool=call.tool_name, arguments=_arguments(call), call_id=call.tool_call_id)


def answered_approvals(run: DurableRun, ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults | None:
    """
    The decisions on the calls of ``requests`` that wait for an approval, or ``None`` when the task
    has no approval desk (or none waits). Raises ``AwaitingAnswer`` when no person has answered yet.
    Calls for external execution are left to Pydantic AI.
    """
    desk = approval_desk()
    if desk is None or not requests.approvals:
        return None
    agent = getattr(getattr(ctx, "agent", None), "name", None) or "agent"
    decisions = desk.decide(run, [approval_request(agent, call) for call in requests.approvals])
    if decisions is None:
        tools = ", ".join(dict.fromkeys(call.tool_name for call in requests.approvals))
        raise AwaitingAnswer(f"Durable: a person approves or rejects {tools}")
    return DeferredToolResults(
        approvals={
            call.tool_call_id: True if decision.approved else ToolDenied()
            for call, decision in zip(requests.approvals, decisions, strict=True)
        }
    )


def is_waiting_for_approval(output: Any) -> bool:
    """
    Whether a run's ``output`` is Pydantic AI's ``DeferredToolRequests`` with calls that wait for an
    approval: the run ended with them unanswered, as it does where no approval desk answers them.
    """
    return isinstance(output, DeferredToolRequests) and bool(output.approvals)


def tools_needing_approval(agent: Any) -> list[str]:
    """
    The function tools of ``agent`` declared with ``requires_approval=True``, as ``<agent>.<tool>``.
    A tool that raises ``ApprovalRequired`` itself, or a toolset that asks for approvals, is known
    only when it asks.
    """
    needing: list[str] = []

    def visit(toolset: Any) -> None:
        if isinstance(toolset, FunctionToolset):
            needing.extend(name for name, tool in toolset.tools.items() if tool.requires_approval)

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return [f"{agent.name or 'agent'}.{name}" for name in needing]


def record_asked_for_approval(step: JournalStep, asked: ApprovalRequired) -> None:
    """Record that the call of ``step`` asked for an approval instead of completing."""
    step.record({ASKED_FOR_APPROVAL: True, "metadata": asked.metadata})


def replayed_request_for_approval(step: JournalStep) -> ApprovalRequired | None:
    """The ``ApprovalRequired`` a replayed ``step`` recorded its call raised, to raise again; else ``None``."""
    result = step.result
    if not isinstance(result, dict) or result.get(ASKED_FOR_APPROVAL) is not True:
        return None
    metadata = result.get("metadata")
    return ApprovalRequired(metadata if isinstance(metadata, dict) else None)


def approved_call_step(run: DurableRun, call: ToolCallPart) -> JournalStep:
    """The step of ``call`` run again once approved, after it asked for the approval itself."""
    arguments = _arguments(call)
    return run.claim(
        "tool",
        call.tool_name,
        fingerprint(
            {"name": call.tool_name, "arguments": arguments, "call_id": call.tool_call_id, "approved": True},
            what=f"tool {call.tool_name!r}",
        ),
        parts=tool_call_parts(call.tool_name, arguments, call.tool_call_id),
    )
