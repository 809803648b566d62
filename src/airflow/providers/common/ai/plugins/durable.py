"""
The plugin that ends each durable try: it logs the try's summary and, once the task instance
is done (succeeded, or skipped itself), deletes its journal.

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

from airflow.providers.common.ai.durable.task_instance import take_journal

log = logging.getLogger(__name__)


def _finish(task_instance: Any, *, succeeded: bool) -> None:
    journal = take_journal(task_instance)
    if journal is None:
        return
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
    """Registers the listener that ends durable tries."""

    name = "common_ai_durable"
    listeners = [sys.modules[__name__]]
