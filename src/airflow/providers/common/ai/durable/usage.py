"""The import path kept for this module: its code now lives in ``durable/core/usage.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.core.usage import USAGE_XCOM_KEY, ModelUsage, TryUsage, durable_usage

__all__ = ["USAGE_XCOM_KEY", "ModelUsage", "TryUsage", "durable_usage"]
