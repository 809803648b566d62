"""
Function tools in a journaled run: the idempotency key a tool call is given, and the failures a
tool's failure policy turned into text for the model while the call runs.
"""

from __future__ import annotations

import contextvars

from airflow.providers.common.ai.durable.core.scope import running_step

_TOOL_FAILURE = "_airflow_durable_tool_failure"

# The exceptions a tool's failure policy turned into text for the model, while that tool call runs.
_handled_failures: contextvars.ContextVar[list[BaseException] | None] = contextvars.ContextVar(
    "durable_handled_failures", default=None
)


def _note_failure(error: BaseException) -> None:
    if (failures := _handled_failures.get()) is not None:
        failures.append(error)


def current_idempotency_key() -> str:
    """
    The idempotency key of the function-tool or MCP tool call running now: the same string on
    every try of the task instance for the same call, so a tool with side effects can recognise
    a repeat.

    Raises ``RuntimeError`` outside a function-tool or MCP tool call of a durable run.
    """
    step = running_step()
    if step is None:
        raise RuntimeError(
            "current_idempotency_key() only works inside a function-tool or MCP tool call of a durable run "
            "(run_durably, run_durably_sync or AgentOperator(durable=True)) in an Airflow task"
        )
    return step.idempotency_key
