"""
The current journal and the running step of this thread or task (context variables).

The core knows no task machinery: inside a running task, the journal bound to it is the one the
host names (``Host.journal_of_running_task``); an entry point passes the host of its system (the
OpenAI Agents adapter passes the Airflow binding's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from airflow.providers.common.ai.durable.core.host import Host, current_host

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.steps import JournalStep

_scoped_journal: ContextVar[DurableJournal | None] = ContextVar("durable_scoped_journal", default=None)
_running_step: ContextVar[JournalStep | None] = ContextVar("durable_running_step", default=None)


@contextlib.contextmanager
def journal_scope(journal: DurableJournal) -> Iterator[DurableJournal]:
    """Make ``journal`` the current journal inside this block (for this thread or task)."""
    token = _scoped_journal.set(journal)
    try:
        yield journal
    finally:
        _scoped_journal.reset(token)


def current_journal(host: Host | None = None) -> DurableJournal | None:
    """
    The current journal: the one of an enclosing :func:`journal_scope`, else, inside a running
    task, the one ``host`` (by default the current host) binds to it; ``None`` outside a task.

    Inside an Airflow task on Airflow before 3.3, the Airflow host refuses to bind one when
    ``[common.ai] durable_cache_path`` is not set.
    """
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    return (host or current_host()).journal_of_running_task()


def journal_in_use(host: Host | None = None) -> DurableJournal | None:
    """The current journal if one was opened in this context or task try; never opens one."""
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    return (host or current_host()).bound_journal_of_running_task()


def running_step() -> JournalStep | None:
    """The live step whose call is running in this context, if any."""
    return _running_step.get()


@contextlib.contextmanager
def step_scope(step: JournalStep) -> Iterator[JournalStep]:
    """Make ``step`` the running step inside this block: runs started in it nest under it."""
    token = _running_step.set(step)
    try:
        yield step
    finally:
        _running_step.reset(token)
