"""
The current journal and the running step of this thread or task (context variables).

The core knows no task machinery: inside a running task, the journal bound to it comes from
:data:`journal_provider` and :data:`bound_journal_provider`, which the binding of the system the
journal runs in installs (the Airflow binding: :mod:`airflow.providers.common.ai.durable.airflow.binding`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.steps import JournalStep

_scoped_journal: ContextVar[DurableJournal | None] = ContextVar("durable_scoped_journal", default=None)
_running_step: ContextVar[JournalStep | None] = ContextVar("durable_running_step", default=None)

#: The journal bound to the running task, opened if need be; installed by the binding of the task system.
journal_provider: Callable[[], DurableJournal | None] | None = None
#: The journal bound to the running task if one was opened in this try; never opens one.
bound_journal_provider: Callable[[], DurableJournal | None] | None = None


@contextlib.contextmanager
def journal_scope(journal: DurableJournal) -> Iterator[DurableJournal]:
    """Make ``journal`` the current journal inside this block (for this thread or task)."""
    token = _scoped_journal.set(journal)
    try:
        yield journal
    finally:
        _scoped_journal.reset(token)


def current_journal() -> DurableJournal | None:
    """
    The current journal: the one of an enclosing :func:`journal_scope`, else, inside a running
    Airflow task, the one bound to that task instance; ``None`` outside a task.

    Raises an ``AirflowConfigException`` inside a task on Airflow before 3.3 when
    ``[common.ai] durable_cache_path`` is not set.
    """
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    return journal_provider() if journal_provider is not None else None


def journal_in_use() -> DurableJournal | None:
    """The current journal if one was opened in this context or task try; never opens one."""
    journal = _scoped_journal.get()
    if journal is not None:
        return journal
    return bound_journal_provider() if bound_journal_provider is not None else None


def running_step() -> JournalStep | None:
    """The live step whose call is running in this context, if any."""
    return _running_step.get()
