"""The import path kept for this module: its code now lives in ``durable/core/storage.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.core.storage import InMemoryStorage, JournalStorage

__all__ = ["InMemoryStorage", "JournalStorage"]
