"""The import path kept for this module: its code now lives in ``durable/airflow/task_state_store.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX, TaskStateStoreStorage

__all__ = ["KEY_PREFIX", "TaskStateStoreStorage"]
