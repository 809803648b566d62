"""The import path kept for this module: its code now lives in the journal core, ``durable/core/`` (the journal in ``journal.py``, its runs, steps, statistics and scope beside it)."""

from __future__ import annotations

from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION, is_snapshot_key
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.scope import current_journal, journal_in_use, journal_scope, running_step
from airflow.providers.common.ai.durable.core.stats import JournalStats
from airflow.providers.common.ai.durable.core.steps import JournalStep

__all__ = [
    "FORMAT_VERSION",
    "DurableJournal",
    "DurableRun",
    "JournalStats",
    "JournalStep",
    "current_journal",
    "is_snapshot_key",
    "journal_in_use",
    "journal_scope",
    "running_step",
]
