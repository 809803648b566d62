"""
The one alias kept at a path from before the layout: a deferred task's trigger stored as
``airflow.providers.common.ai.durable.approval_trigger.ApprovalTrigger`` (before the trigger
serialized its real class path) is imported from here by the triggerer, and resumes. Nothing else
is imported from this module; new triggers are stored under ``durable.airflow.approval_trigger``.
"""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.approval_trigger import ApprovalTrigger

__all__ = ["ApprovalTrigger"]
