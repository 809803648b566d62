"""
A task instance's journal reached from outside its worker (the CLI, the journal page): read as
stored, replaced by another one (a fork), and the task instance cleared so that its next try
replays it. The journal and the tries' summaries are where the worker keeps them, and
:func:`stores_of` is the one place that says where: the task state store on Airflow 3.3+, else
under ``[common.ai] durable_cache_path``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal
from airflow.providers.common.ai.durable.airflow.summary_stores import (
    ObjectStorageSummaries,
    SummaryStore,
    TaskStateStoreSummaryRows,
)
from airflow.providers.common.ai.durable.airflow.task_instance import (
    CACHE_PATH_EXAMPLE,
    cache_path_base,
    configured_cache_path,
)
from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX
from airflow.providers.common.ai.durable.airflow.task_state_store_rows import TaskStateStoreRows
from airflow.providers.common.ai.durable.core.encryption import encrypt_text
from airflow.providers.common.ai.durable.core.segments import KeyedSegments, SegmentedStorage
from airflow.providers.common.ai.durable.core.storage import JournalStorage
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

#: The states of a task instance that is running, or about to: its journal is not to be touched.
_RUNNING_STATES = frozenset({"running", "queued", "scheduled", "restarting", "deferred", "up_for_reschedule"})


class JournalAccessError(ValueError):
    """What a journal command cannot do, and what to do instead."""


class TaskInstanceRunningError(JournalAccessError):
    """The task instance is running or about to: its try owns its journal."""


@dataclass(frozen=True)
class TaskInstanceId:
    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f"{self.dag_id} / {self.run_id} / {self.task_id}"
        return where + (f" [{self.map_index}]" if self.map_index >= 0 else "")


def task_instance_state(ti: TaskInstanceId) -> str | None:
    """The state of ``ti``; refuses, naming what is missing, a DAG run or task instance Airflow does not know."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        if session.scalar(select(DagRun.id).where(DagRun.dag_id == ti.dag_id, DagRun.run_id == ti.run_id)) is None:
            raise JournalAccessError(f"DAG {ti.dag_id!r} has no run {ti.run_id!r}: give the run id the UI shows")
        found = session.execute(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == ti.dag_id,
                TaskInstance.run_id == ti.run_id,
                TaskInstance.task_id == ti.task_id,
                TaskInstance.map_index == ti.map_index,
            )
        ).first()
    if found is None:
        raise JournalAccessError(
            f"run {ti.run_id!r} of DAG {ti.dag_id!r} has no task instance {ti.task_id!r} with map index "
            f"{ti.map_index}: give --map-index for a mapped task"
        )
    return str(found[0].value if hasattr(found[0], "value") else found[0]) if found[0] is not None else None


@dataclass(frozen=True)
class TaskInstanceStores:
    """Where a task instance's journal and its tries' summaries are kept, as read from outside its worker."""

    journal: JournalStorage
    summaries: SummaryStore


def stores_of(ti: TaskInstanceId) -> TaskInstanceStores | None:
    """
    The stores of ``ti`` on this Airflow: its task state store on 3.3+, else its folder under
    ``[common.ai] durable_cache_path``; ``None`` before 3.3 when that option is not set here.
    """
    ids = ti.as_dict()
    if AIRFLOW_V_3_3_PLUS:
        return TaskInstanceStores(
            SegmentedStorage(KeyedSegments(TaskStateStoreRows(**ids, prefix=KEY_PREFIX))),
            TaskStateStoreSummaryRows(**ids),
        )
    if not configured_cache_path():
        return None
    base = cache_path_base(configured_cache_path())
    return TaskInstanceStores(cache_path_journal(base, **ids), ObjectStorageSummaries(base, **ids))


def _journal_storage_of(ti: TaskInstanceId) -> JournalStorage:
    stores = stores_of(ti)
    if stores is None:
        raise JournalAccessError(
            "journals are kept under [common.ai] durable_cache_path on Airflow before 3.3, which is not set "
            f"here: set it as the workers have it, for example {CACHE_PATH_EXAMPLE}"
        )
    return stores.journal


def stored_journal(ti: TaskInstanceId) -> dict[str, str]:
    """The journal of ``ti`` as stored (entries encrypted where the workers encrypt them), by key."""
    return _journal_storage_of(ti).stored_texts()


def replace_journal(ti: TaskInstanceId, entries: dict[str, str]) -> None:
    """
    Make ``entries`` (plain entry texts by key) the journal of ``ti``, each encrypted as the workers
    encrypt, in place of the one it has.
    """
    storage = _journal_storage_of(ti)
    storage.delete_all([])
    for key, text in entries.items():
        storage.write(key, encrypt_text(text))


def refuse_if_running(ti: TaskInstanceId) -> None:
    """Refuse to touch the journal of a task instance that is running or about to run."""
    state = task_instance_state(ti)
    if state in _RUNNING_STATES:
        raise TaskInstanceRunningError(
            f"task instance {ti} is {state}: its try owns its journal; fork it once the try has ended "
            "(or mark it failed first)"
        )


def clear_task_instance(ti: TaskInstanceId) -> None:
    """Clear ``ti`` as ``airflow tasks clear`` does, so that the scheduler runs a new try of it."""
    from airflow.models.taskinstance import TaskInstance, clear_task_instances
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == ti.dag_id,
                TaskInstance.run_id == ti.run_id,
                TaskInstance.task_id == ti.task_id,
                TaskInstance.map_index == ti.map_index,
            )
        ).all()
        clear_task_instances(list(found), session)
