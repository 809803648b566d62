"""
A task instance's task state store reached from outside its worker (Airflow 3.3+): the journal
page on the api-server, and ``airflow common-ai journal`` commands.

A worker reaches its rows through ``context["task_state_store"]``; here there is no task, so
writes and deletes go through Airflow's state backend, and reads and listings, which the backend
cannot make (it has no listing, and reads rows whose retention passed), through its table in the
metadata database. This class is the only place that knows the table.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from typing import Any

from airflow.providers.common.ai.durable.core.storage import JournalStorage
from airflow.providers.common.ai.version_compat import task_state_store_rows_of


class TaskStateStoreRows(JournalStorage):
    """
    The rows of one task instance's task state store whose keys start with ``prefix``, each a JSON
    text as a worker stores it, by the rest of its key.

    A row whose retention passed is not there, though Airflow has not deleted it yet; a value that
    is not a JSON text reads as ``""``, an entry that cannot be read. The task's own keys are never
    under the prefix, so nothing here reads or deletes them.
    """

    def __init__(self, *, dag_id: str, run_id: str, task_id: str, map_index: int, prefix: str) -> None:
        if not prefix:
            raise ValueError("the task state store's rows are reached under a key prefix: the task's own keys are not")
        self._dag_id, self._run_id, self._task_id, self._map_index = dag_id, run_id, task_id, map_index
        self._prefix = prefix
        self.identity = f"{dag_id}/{run_id}/{task_id}/{map_index}"

    def read(self, key: str) -> str | None:
        return self._texts(self._rows(key)).get(key)

    def write(self, key: str, text: str, *, retention: datetime.timedelta | None = None) -> None:
        """Store ``text`` under ``key``, for ``retention`` (by default for ever)."""
        backend, scope = self._backend_and_scope()
        expires_at = datetime.datetime.now(tz=datetime.timezone.utc) + retention if retention is not None else None
        backend.set(scope, self._prefix + key, json.dumps(text), expires_at=expires_at)

    def delete_all(self, keys: Iterable[str]) -> None:
        # Listed, not named: every row under the prefix is this storage's, one whose retention
        # passed too.
        backend, scope = self._backend_and_scope()
        for stored_key, _, _ in self._rows(None):
            backend.delete(scope, stored_key)

    def stored_texts(self) -> dict[str, str]:
        return self._texts(self._rows(None))

    def _backend_and_scope(self) -> tuple[Any, Any]:
        from airflow.state import TaskScope, get_state_backend

        scope = TaskScope(dag_id=self._dag_id, run_id=self._run_id, task_id=self._task_id, map_index=self._map_index)
        return get_state_backend(), scope

    def _rows(self, key: str | None) -> list[Any]:
        """The key, value and expiry of every row under the prefix, or of the row of ``key``."""
        from airflow.models.task_state_store import TaskStateStoreModel as Model
        from airflow.utils.session import create_session
        from sqlalchemy import select

        every = Model.key.startswith(self._prefix, autoescape=True)
        which = every if key is None else Model.key == self._prefix + key
        with create_session() as session:
            return list(
                session.execute(
                    select(Model.key, Model.value, Model.expires_at).where(
                        Model.dag_id == self._dag_id,
                        Model.run_id == self._run_id,
                        Model.task_id == self._task_id,
                        *task_state_store_rows_of(Model, self._map_index),
                        which,
                    )
                ).all()
            )

    def _texts(self, rows: list[Any]) -> dict[str, str]:
        """The texts of ``rows`` whose retention has not passed, by key under the prefix."""
        now = datetime.datetime.now(tz=datetime.timezone.utc)
        texts = {}
        for stored_key, value, expires_at in rows:
            if expires_at is not None and expires_at <= now:
                continue
            try:
                text = json.loads(value)
            except (ValueError, RecursionError):
                text = None
            texts[stored_key.removeprefix(self._prefix)] = text if isinstance(text, str) else ""
        return texts
