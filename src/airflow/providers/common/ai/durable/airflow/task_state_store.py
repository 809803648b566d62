"""The journal in Airflow's task state store (Airflow 3.3+): no configuration, shared by all tries."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow.providers.common.ai.durable.core.storage import JournalStorage
from airflow.providers.common.ai.version_compat import NEVER_EXPIRE

log = logging.getLogger(__name__)

#: Every journal key starts with this; a task's own state store keys must not.
KEY_PREFIX = "airflow.providers.common.ai.durable/"


def _cleared_on_success() -> bool:
    from airflow.configuration import conf

    return conf.getboolean("state_store", "clear_on_success", fallback=False)


def _answers_in_process() -> bool:
    """
    Whether the store is answered in this process, as under ``dag.test()``: its comms hand answers
    back through one shared queue, so a call from another thread could take this thread's answer.
    A worker's comms to its supervisor lock each call, and each call is a round trip.
    """
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # Airflow 2.11 has no task runner, nor a task state store outside tests
        return False

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    # A private class of the Task SDK, named, not imported: only dag.test() loads it.
    return type(comms).__name__ == "InProcessSupervisorComms"


class TaskStateStoreStorage(JournalStorage):
    """
    Journal entries as keys of ``context["task_state_store"]``, one key per step.

    The store keeps the rows of one task instance (one map index) for all its tries. Keys live
    under :data:`KEY_PREFIX`, so the task's own keys are never read or deleted, and never expire:
    a journal must outlive the retry delay, however long.
    """

    def __init__(self, accessor: Any, identity: str) -> None:
        self._accessor = accessor
        self.identity = identity
        self.calls_in_background = not _answers_in_process()

    def read(self, key: str) -> str | None:
        text = self._accessor.get(KEY_PREFIX + key)
        return text if isinstance(text, str) else None

    def write(self, key: str, text: str) -> None:
        self._accessor.set(KEY_PREFIX + key, text, retention=NEVER_EXPIRE)

    def delete_all(self, keys: Iterable[str]) -> None:
        # The store's clear() would also drop the task's own keys; it has no listing, so the journal
        # names its entries and each one is one delete: one round trip each, one after the other,
        # as the Task SDK makes a worker's calls to its supervisor one at a time.
        keys = list(keys)
        if keys and _cleared_on_success() and self._accessor.get(KEY_PREFIX + keys[0]) is None:
            # Airflow cleared every key of the task instance as it succeeded (the first key is
            # this try's or was read by it); a skipped task's keys are still there.
            log.info("Durable: Airflow cleared the journal with the task's state ([state_store] clear_on_success)")
            return
        for key in keys:
            self._accessor.delete(KEY_PREFIX + key)
