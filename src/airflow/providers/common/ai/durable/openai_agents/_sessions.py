"""
A session put back, on a retry, to what the first try of the run found (R-35).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from agents import (
    RunConfig,
    Session,
)
from agents.tracing import custom_span

from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.openai_agents._sdk_private import (
    masks_tracing_from_the_start_of_an_untraced_run,
)

log = logging.getLogger(__name__)

#: As many session items as a session can hold: the whole history, whatever its settings' limit.
_ALL_ITEMS = 2**62


async def rewind_session(session: Session, run: DurableRun, input: Any, run_config: RunConfig) -> None:
    """
    Put ``session`` back to what the first try of this run found (R-35), so that the SDK adds the
    input once and the model calls ask what they asked then. The first try records how many items
    the session held and their digest; a retry removes the items added after those, unless the
    earlier items changed since (another writer): then it leaves the session alone and the run
    goes live, warning why. With the run's tracing disabled, the session's own spans are too,
    where the SDK disables those of its own reads.
    """
    masked = run_config.tracing_disabled and masks_tracing_from_the_start_of_an_untraced_run()
    with custom_span("durable session", disabled=True) if masked else contextlib.nullcontext():
        await _put_back(session, run, input)


async def _put_back(session: Session, run: DurableRun, input: Any) -> None:
    items = await session.get_items(limit=_ALL_ITEMS)
    found = {"items": len(items), "digest": fingerprint(items, what="the session's items")}
    step = run.claim(
        "session",
        type(session).__name__,
        fingerprint({"session_id": session.session_id, "input": input}, what="the session's run"),
    )
    if step.replayed:
        recorded = step.result if isinstance(step.result, dict) else {}
        held = recorded.get("items")
        added = len(items) - held if isinstance(held, int) and 0 <= held <= len(items) else None
        digest = fingerprint(items[: len(items) - added], what="the session's items") if added is not None else None
        if added is None or digest is None or digest != recorded.get("digest"):
            step.refuse_replay(
                "the session's items before this run changed since the failed try (another writer?): "
                "the session is left as it is, so it may hold the failed try's items as well"
            )
        else:
            for _ in range(added):
                await session.pop_item()
            if added:
                log.info("Durable: removed the %d items the failed try added to the session", added)
            return
    step.record(found)
