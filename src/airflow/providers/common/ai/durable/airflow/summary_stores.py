"""
Where the summaries of a task instance's tries are kept, each store with what a worker writes and
what the journal page reads: keys of the task state store on Airflow 3.3+ (written through the
task's own store, read outside it), else objects next to the journal's folder under
``[common.ai] durable_cache_path`` (``<task instance folder>.summaries/try=<n>.json``).
"""

from __future__ import annotations

import datetime
from abc import ABC, abstractmethod
from typing import Any

from airflow.providers.common.ai.durable.airflow.object_storage import task_instance_folder
from airflow.providers.common.ai.durable.airflow.task_state_store_rows import TaskStateStoreRows

#: Every summary key in the task state store starts with this (the journal's keys do not).
SUMMARY_KEY_PREFIX = "airflow.providers.common.ai.durable.summary/"
#: The folder of a task instance's summaries is its journal's folder with this suffix.
SUMMARY_FOLDER_SUFFIX = ".summaries"


def try_number_of(text: str) -> int | None:
    """The try number a summary's key or file name ends with, or ``None`` for one no try has."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


class SummaryStore(ABC):
    """Where the try summaries of one task instance are kept; texts are stored as given."""

    @abstractmethod
    def write(self, try_number: int, text: str, *, days: int) -> None:
        """Store ``text`` as the summary of try ``try_number``, to be kept ``days`` days."""

    @abstractmethod
    def read_all(self) -> dict[int, str]:
        """Every summary stored (expired ones may be among them), by try number."""


class TaskStateStoreSummaries(SummaryStore):
    """Summaries as task state store keys whose retention is the configured days (Airflow 3.3+, in a task)."""

    def __init__(self, accessor: Any) -> None:
        self._accessor = accessor

    def write(self, try_number: int, text: str, *, days: int) -> None:
        self._accessor.set(f"{SUMMARY_KEY_PREFIX}{try_number}", text, retention=datetime.timedelta(days=days))

    def read_all(self) -> dict[int, str]:
        raise NotImplementedError("a task reads no summaries; the journal page reads them outside it")


class TaskStateStoreSummaryRows(SummaryStore):
    """
    The same summaries from outside the worker (the journal page): rows of the task state store
    whose retention has not passed. A value that is not a JSON text reads as ``""``, a summary that
    cannot be read; a key that names no try is left out.
    """

    def __init__(self, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> None:
        self._rows = TaskStateStoreRows(
            dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, prefix=SUMMARY_KEY_PREFIX
        )

    def write(self, try_number: int, text: str, *, days: int) -> None:
        self._rows.write(str(try_number), text, retention=datetime.timedelta(days=days))

    def read_all(self) -> dict[int, str]:
        numbered = {try_number_of(key): text for key, text in self._rows.stored_texts().items()}
        return {number: text for number, text in numbered.items() if number is not None}


class ObjectStorageSummaries(SummaryStore):
    """Summaries as ``<task instance folder>.summaries/try=<n>.json`` under ``durable_cache_path``."""

    def __init__(self, base: Any, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> None:
        self._fs = base.fs
        folder = task_instance_folder(dag_id, run_id, task_id, map_index)
        self._folder = f"{str(base.path).rstrip('/')}/{folder}{SUMMARY_FOLDER_SUFFIX}"

    def write(self, try_number: int, text: str, *, days: int) -> None:
        self._fs.makedirs(self._folder, exist_ok=True)
        self._fs.pipe_file(f"{self._folder}/try={try_number}.json", text.encode())

    def read_all(self) -> dict[int, str]:
        try:
            paths = self._fs.ls(self._folder, detail=False)
        except FileNotFoundError:
            return {}
        summaries = {}
        for path in paths:
            name = str(path).rsplit("/", 1)[-1]
            number = try_number_of(name.removeprefix("try=").removesuffix(".json"))
            if name.startswith("try=") and name.endswith(".json") and number is not None:
                # Bytes that are not UTF-8 make a summary that cannot be read, not a page that fails.
                summaries[number] = self._fs.cat_file(path).decode(errors="replace")
        return summaries
