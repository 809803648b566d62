"""
What the journal page shows of a task instance, as data (its JSON API answers the same): the
journal now, read through the task instance's stores (``journal_access.stores_of``), and its
tries' summaries; and what of the task instance Airflow does not know, for a 404.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.durable.core.journal_file import forked_from_of
from airflow.providers.common.ai.durable.core.journal_view import as_json, journal_view
from airflow.providers.common.ai.durable.core.masking import masked_text
from airflow.providers.common.ai.plugins.journal_page_actions import step_keys


def map_index_of(value: str) -> int:
    """The map index a request names (its ``map_index``); -1 where that is no number."""
    # The UI leaves "{MAP_INDEX}" as it is for a task that is not mapped.
    try:
        return int(value)
    except ValueError:
        return -1


def what_is_not_found(dag_id: str, run_id: str, task_id: str) -> str | None:
    """
    What of the task instance a page is asked for Airflow does not know (the DAG, its run, the
    task in that run), for a 404; ``None`` when it knows them, or when the database cannot say.
    """
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    try:
        with create_session() as session:
            if session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == dag_id)) is None:
                return f"No DAG {dag_id!r} is known to Airflow"
            if session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)) is None:
                return f"DAG {dag_id!r} has no run {run_id!r}"
            found = select(TaskInstance.task_id).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id
            )
            if session.scalar(found.limit(1)) is None:
                return f"Run {run_id!r} of DAG {dag_id!r} has no task {task_id!r}"
    except Exception:
        return None  # the page itself says what it can read
    return None


def journal_of(dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
    """What the page shows for a task instance, as JSON: its journal now, and its tries' summaries."""
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId, stores_of

    now = datetime.datetime.now(tz=datetime.timezone.utc)
    entries: dict[str, str] = {}
    summaries: dict[int, str] = {}
    problem = None
    try:
        stores = stores_of(TaskInstanceId(dag_id, run_id, task_id, map_index))
        # None: no journal is kept here (no durable_cache_path before Airflow 3.3), so none to show.
        if stores is not None:
            entries, summaries = stores.journal.stored_texts(), stores.summaries.read_all()
    except Exception as error:
        # A store that cannot be reached is the page's news, not a server error.
        entries, summaries = {}, {}
        problem = f"the journal's store could not be read: {type(error).__name__}: {masked_text(str(error))[:300]}"
    kept, forked_from, kept_keys = _kept_and_origin(dag_id, run_id, task_id, map_index, entries, problem)
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "map_index": map_index,
        "problem": problem,
        "journal": as_json(journal_view(entries)),
        "tries": read_summaries(summaries, now=now),
        # What the page's actions work on: the working journal, else the one kept after success.
        "kept": kept,
        "forked_from": forked_from,
        "fork_steps": step_keys(entries) or kept_keys,
    }


def _kept_and_origin(
    dag_id: str, run_id: str, task_id: str, map_index: int, entries: dict[str, str], problem: str | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """
    The journal kept after success (when the working one holds no step), the run a fork of the
    journal shown came from, and the kept journal's step keys.
    """
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId
    from airflow.providers.common.ai.durable.airflow.kept_journals import kept_journal

    if problem is not None or step_keys(entries):
        return None, forked_from_of(entries), []
    try:
        found = kept_journal(TaskInstanceId(dag_id, run_id, task_id, map_index))
    except Exception:
        return None, None, []  # the page shows the working journal's news; the export names the problem
    if found is None:
        return None, None, []
    kept = {
        "kept_at": found.get("kept_at"),
        "kept_until": found.get("kept_until"),
        "journal": as_json(journal_view(found["entries"])),
    }
    return kept, forked_from_of(found["entries"]), step_keys(found["entries"])


# The page: plain HTML, every value escaped.
