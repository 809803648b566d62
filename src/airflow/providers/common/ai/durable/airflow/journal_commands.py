"""
What the journal commands do, for the CLI and the journal page: export a task instance's journal
(working or kept) as one journal file, and fork a journal file at a step into a task instance.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.providers.common.ai.durable.airflow.journal_access import (
    JournalAccessError,
    TaskInstanceId,
    clear_task_instance,
    refuse_if_running,
    replace_journal,
    stored_journal,
    task_instance_state,
)
from airflow.providers.common.ai.durable.airflow.kept_journals import kept_journal
from airflow.providers.common.ai.durable.core.journal_file import (
    check_fork_point,
    export_document,
    is_step_key,
    read_journal_file,
)

#: Which journal an export reads: the working one if it holds steps, else the kept one; or either alone.
SOURCES = ("auto", "journal", "kept")


def export_journal(ti: TaskInstanceId, *, source: str = "auto") -> dict[str, Any]:
    """
    The journal file of ``ti``: its working journal, or the one kept after it succeeded. Refuses,
    naming what to do, a task instance with neither.
    """
    task_instance_state(ti)
    now = datetime.datetime.now(tz=datetime.timezone.utc).isoformat()
    if source in ("auto", "journal"):
        stored = stored_journal(ti)
        if any(is_step_key(key) for key in stored) or source == "journal":
            return export_document(stored, task_instance=ti.as_dict(), source="journal", exported_at=now)
    kept = kept_journal(ti) if source in ("auto", "kept") else None
    if kept is None:
        raise JournalAccessError(
            f"task instance {ti} has no journal and no kept journal: a successful task keeps its journal only "
            "with keep_journal=True (or [common.ai] keep_journals = True), for [common.ai] "
            "kept_journal_retention_days"
        )
    return export_document(
        kept["entries"],
        task_instance=ti.as_dict(),
        source="kept",
        exported_at=now,
        kept_at=kept.get("kept_at"),
        kept_until=kept.get("kept_until"),
    )


def fork_journal(ti: TaskInstanceId, text: str, step: int, *, name: str = "the file", clear: bool = True) -> int:
    """
    Make the first ``step`` steps of the journal file ``text`` the journal of ``ti`` and (with
    ``clear``) clear ``ti``: its next try replays them and runs live from the step after. Steps in
    flight keep their marks. Refuses a file of another task, a step that is none of the file's, and
    a task instance that is running. Returns the number of steps kept.
    """
    journal = read_journal_file(text, name=name, dag_id=ti.dag_id, task_id=ti.task_id)
    check_fork_point(journal, step)
    refuse_if_running(ti)
    origin = journal.task_instance
    journal.forked_from = {
        "dag_id": origin.get("dag_id"),
        "run_id": origin.get("run_id"),
        "task_id": origin.get("task_id"),
        "map_index": origin.get("map_index"),
        "step": step,
        "key": journal.steps[step - 1][0] if step else None,
        "forked_at": datetime.datetime.now(tz=datetime.timezone.utc).isoformat(),
    }
    replace_journal(ti, journal.entries(up_to=step))
    if clear:
        clear_task_instance(ti)
    return step
