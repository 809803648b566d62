"""
The task's budget (R-58) around a live model request of a journaled run, on the SDK's side: the
usage of an SDK answer as the journal counts it, and a refusal carried through the SDK's run loop.
The budget itself is the core's (``core/adapter.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import Usage

from airflow.providers.common.ai.durable.core import adapter
from airflow.providers.common.ai.durable.core.usage import ModelUsage
from airflow.providers.common.ai.durable.openai_agents._stops import RunStopped, stopping

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.journal import DurableJournal


def usage_of(model: str, usage: Usage) -> ModelUsage:
    """What a model answer's usage counts for, its cost at the model's price."""
    return ModelUsage.of_call(
        model,
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cached_input_tokens=getattr(usage.input_tokens_details, "cached_tokens", 0) or 0,
    )


async def admitted_by_budget(
    journal: DurableJournal, model: str, key: str, call: dict[str, Any], *, carried: bool
) -> adapter.BudgetAdmission | None:
    """
    :func:`adapter.admitted_by_budget` for the SDK's request ``call``. A refusal fails the task:
    carried out of the SDK's run loop (``carried``, converted back at the run's edge), or as it is
    (a streamed run hands the user its loop's exception as it is).
    """
    settings = call.get("model_settings")
    try:
        return await adapter.admitted_by_budget(journal, model, key, getattr(settings, "max_tokens", None))
    except Exception as refused:
        if carried:
            raise RunStopped(refused) from None
        stopping(refused)
        raise
