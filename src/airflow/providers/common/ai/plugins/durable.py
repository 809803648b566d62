"""
The plugin that ends each durable try: it logs the try's summary, keeps it for the journal page
and, once the task instance is done (succeeded, or skipped itself), deletes its journal.

A listener, not code in the agent helpers, because the journal belongs to the task: a ``@task``
that runs two agents and fails in the second must replay the first as well, so nothing may be
deleted before Airflow knows the whole task succeeded. Airflow calls these hooks in the process
that ran the try, after the task's outcome is known.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from airflow.providers.common.compat.sdk import hookimpl

from airflow.providers.common.ai.durable.summaries import FAILED, SUCCESS, write_summary
from airflow.providers.common.ai.durable.task_instance import take_journal, take_summary_store
from airflow.providers.common.ai.plugins.journal_page import EXTERNAL_VIEWS, FASTAPI_APPS

log = logging.getLogger(__name__)


def _finish(task_instance: Any, *, succeeded: bool) -> None:
    journal = take_journal(task_instance)
    summaries = take_summary_store(task_instance)
    if journal is None:
        return
    if summaries is not None:
        # Before the journal is deleted: the summary is what the journal page shows after success.
        outcome = SUCCESS if succeeded else FAILED
        write_summary(summaries, journal, try_number=task_instance.try_number, outcome=outcome)
    try:
        journal.finish(succeeded=succeeded)
    except Exception:
        log.exception("Durable: could not delete the journal; it is left for the clean-up described in the docs")


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    _finish(task_instance, succeeded=True)


@hookimpl
def on_task_instance_skipped(previous_state: Any, task_instance: Any) -> None:
    # A task that skipped itself (AirflowSkipException) after its agent ran will not run again
    # unless cleared, like a successful one: a clear then starts over.
    _finish(task_instance, succeeded=True)


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any = None) -> None:
    # Up for retry or failed for good: the journal stays, so a retry or a later clear replays it.
    _finish(task_instance, succeeded=False)


class DurableJournalPlugin(AirflowPlugin):
    """Registers the listener that ends durable tries, and the journal page (``plugins/journal_page.py``)."""

    name = "common_ai_durable"
    listeners = [sys.modules[__name__]]
    fastapi_apps = FASTAPI_APPS
    external_views = EXTERNAL_VIEWS
