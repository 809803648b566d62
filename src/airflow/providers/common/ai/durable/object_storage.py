"""The import path kept for this module: its code now lives in ``durable/airflow/object_storage.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage, task_instance_folder

__all__ = ["ObjectStorageStorage", "task_instance_folder"]
