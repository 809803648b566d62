"""
The plugin that ends each durable try: it logs the try's summary, keeps it for the journal page
and, once the task instance is done (succeeded, or skipped itself), deletes its journal.

A listener, not code in the agent helpers, because the journal belongs to the task: a ``@task``
that runs two agents and fails in the second must replay the first as well, so nothing may be
deleted before Airflow knows the whole task succeeded. Airflow calls these hooks in the process
that ran the try, after the task's outcome is known.

A failed try's summary is the exception: it is written inside the try, as the task's execution
raises, because Airflow 3.3 refuses a write to the task state store from a try that failed with
retries left once it has reported the failure (the next try owns the task instance by then).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from airflow.providers.common.compat.sdk import hookimpl

from airflow.providers.common.ai.durable.airflow.kept_journals import keep_journal
from airflow.providers.common.ai.durable.airflow.summaries import FAILED, SUCCESS, write_summary
from airflow.providers.common.ai.durable.airflow.task_instance import (
    journal_left_by_earlier_tries,
    keep_summary_of_failed_try,
    take_journal,
    take_summary_store,
)
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

if AIRFLOW_V_3_0_PLUS:
    from airflow.providers.common.ai.plugins.journal_page import EXTERNAL_VIEWS, FASTAPI_APPS
else:  # 2.11's webserver: a Flask-AppBuilder view and an extra link, not an api-server app and a tab
    from airflow.providers.common.ai.plugins.journal_page_fab import APPBUILDER_VIEWS, GLOBAL_OPERATOR_EXTRA_LINKS

log = logging.getLogger(__name__)

# The exceptions with which a task's execution ends its try without failing it: it waits
# (deferred, awaiting input, rescheduled), skipped itself, or is done another way.
_NOT_FAILURES = (
    "TaskDeferred",
    "TaskAwaitingInput",
    "AirflowRescheduleException",
    "AirflowSkipException",
    "DownstreamTasksSkipped",
    "DagRunTriggerException",
)


def _fails_the_try(error: BaseException) -> bool:
    try:
        from airflow.sdk import exceptions
    except ImportError:  # Airflow 2.11
        from airflow import exceptions  # type: ignore[no-redef]

    not_failures = tuple(getattr(exceptions, name) for name in _NOT_FAILURES if hasattr(exceptions, name))
    return not isinstance(error, not_failures)


class _KeepingAFailure:
    """A try's ``execute`` or ``resume_execution``: when it fails the try, the try's summary is kept as failed."""

    def __init__(self, call: Callable[..., Any], task_instance: Any) -> None:
        functools.update_wrapper(self, call)
        self._call = call
        self._task_instance = task_instance
        #: Whether the task runner called it in this try.
        self.called = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.called = True
        try:
            return self._call(*args, **kwargs)
        except BaseException as error:
            if _fails_the_try(error):
                try:
                    keep_summary_of_failed_try(self._task_instance)
                except Exception:  # the task's own error is what the try ends with
                    log.exception("Durable: could not keep the summary of this failed try")
            elif not AIRFLOW_V_3_0_PLUS and type(error).__name__ == "AirflowSkipException":
                # Airflow 2.11 tells listeners nothing of a task that skipped itself.
                on_task_instance_skipped(None, self._task_instance)
            raise


def _resumed(task_instance: Any) -> bool:
    """Whether this try ran on after it waited (deferred, or awaiting input)."""
    resume = getattr(getattr(task_instance, "task", None), "resume_execution", None)
    return isinstance(resume, _KeepingAFailure) and resume.called


def _finish(task_instance: Any, *, succeeded: bool) -> None:
    journal = take_journal(task_instance)
    summaries = take_summary_store(task_instance)
    try:
        if journal is None:
            # A try that ran no agent: on success, the journal an earlier try (or this try before it
            # waited) left is deleted all the same. A first try that never waited had none to leave.
            if succeeded and (task_instance.try_number > 1 or _resumed(task_instance)):
                left = journal_left_by_earlier_tries(task_instance)
                if left is not None:
                    _keep_if_asked(left, task_instance)
                    left.delete()
            return
        journal.settle()
        if summaries is not None:
            # Before the journal is deleted: the summary is what the journal page shows after success.
            outcome = SUCCESS if succeeded else FAILED
            write_summary(summaries, journal, try_number=task_instance.try_number, outcome=outcome)
        if succeeded:
            _keep_if_asked(journal, task_instance)
        journal.finish(succeeded=succeeded)
    except Exception:
        log.exception("Durable: could not delete the journal; it is left for the clean-up described in the docs")


def _keep_if_asked(journal: Any, task_instance: Any) -> None:
    # A copy that could not be kept never keeps the journal from its clean-up: the task succeeded.
    try:
        keep_journal(journal, task_instance)
    except Exception:
        log.exception("Durable: could not keep the journal of this successful task instance; it is deleted")


@hookimpl
def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
    # The task is this try's own copy (prepare_for_execution), which the task runner calls next.
    task = getattr(task_instance, "task", None)
    if task is None:
        return
    task.execute = _KeepingAFailure(task.execute, task_instance)
    task.resume_execution = _KeepingAFailure(task.resume_execution, task_instance)


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
    """
    Registers the listener that ends durable tries, and the journal page: on Airflow 3 the
    api-server's app and tab of ``plugins/journal_page.py``, on 2.11 the webserver's view and extra
    link of ``plugins/journal_page_fab.py``.
    """

    name = "common_ai_durable"
    listeners = [sys.modules[__name__]]
    if AIRFLOW_V_3_0_PLUS:
        fastapi_apps = FASTAPI_APPS
        external_views = EXTERNAL_VIEWS
    else:
        appbuilder_views = APPBUILDER_VIEWS
        global_operator_extra_links = GLOBAL_OPERATOR_EXTRA_LINKS
