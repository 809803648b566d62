"""The import path kept for this module: its code now lives in ``durable/airflow/approval_trigger.py``; the triggerer imports ``ApprovalTrigger`` from here, the class path it is stored under."""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.approval_trigger import CANNOT_READ_ANSWERS, ApprovalTrigger

__all__ = ["CANNOT_READ_ANSWERS", "ApprovalTrigger"]
