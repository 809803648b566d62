"""
The task's budget (R-58) around a live model request of a journaled run: wait until it may be
sent, count what it used, and the usage of an SDK answer as the journal counts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import Usage

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
) -> Any:
    """
    Wait until the task's budget lets this live request to ``model`` be sent; what to hand to
    :func:`settled` once it returned. A refusal fails the task: carried out of the SDK's run loop
    (``carried``, converted back at the run's edge), or as it is (a streamed run hands the user its
    loop's exception as it is).
    """
    ledger = journal.budget
    if ledger is None:
        return None
    settings = call.get("model_settings")
    try:
        return ledger, await ledger.admit(model, key, getattr(settings, "max_tokens", None))
    except Exception as refused:
        journal.stats.refusals[key] = str(refused)  # the step's summary says why it has no result
        if carried:
            raise RunStopped(refused) from None
        stopping(refused)
        raise


def settled(admission: Any, used: ModelUsage | None) -> None:
    """The request :func:`admitted_by_budget` let through returned; ``used``: what it used, if it got an answer."""
    if admission is not None:
        ledger, most = admission
        ledger.settled(most, used)
