"""
The trigger a durable task waits on for a person's answer: Airflow's ``HITLTrigger``, which never
hands the answer back sooner than a moment after the task deferred.

Airflow (3.2, 3.3) fails a task that resumes before the scheduler has heard from the executor that
the workload that deferred it ended: it takes that report for the end of the resumed try ("...
finished with state success, but the task instance's state attribute is queued"). A worker on a
busy machine takes seconds to end and be reported, so an answer given before or just after the
task deferred would fail the try it resumes; waiting ``not_before`` (the deferral and
``[common.ai] approval_resume_delay``) lets the report come first (apache/airflow #66374, #67287,
#72716).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from airflow.providers.standard.triggers.hitl import HITLTrigger
from airflow.sdk.execution_time.hitl import get_hitl_detail_content_detail
from airflow.sdk.timezone import utcnow
from airflow.triggers.base import TriggerEvent
from asgiref.sync import sync_to_async

#: The ``error_type`` of the event of a trigger that cannot read answers where it runs: ``dag.test()``
#: runs it beside a stand-in for the triggerer's supervisor, which leaves the request unanswered.
CANNOT_READ_ANSWERS = "cannot_read_answers"


#: The class path the trigger is stored under, its own. One stored under its path before the
#: layout (``durable.approval_trigger``, the alias kept for it) resumes too.
CLASSPATH = "airflow.providers.common.ai.durable.airflow.approval_trigger.ApprovalTrigger"


class ApprovalTrigger(HITLTrigger):
    """``HITLTrigger`` that first waits until ``not_before``, then looks for the answer as it does."""

    def __init__(self, *, not_before: datetime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.not_before = not_before

    def serialize(self) -> tuple[str, dict[str, Any]]:
        _, kwargs = super().serialize()
        return CLASSPATH, {**kwargs, "not_before": self.not_before}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if await sync_to_async(get_hitl_detail_content_detail)(ti_id=self.ti_id) is None:
            yield TriggerEvent(
                {"error": "this process cannot read human-in-the-loop answers", "error_type": CANNOT_READ_ANSWERS}
            )
            return
        wait = (self.not_before - utcnow()).total_seconds()
        if wait > 0:
            await asyncio.sleep(wait)
        async for event in super().run():
            yield event
