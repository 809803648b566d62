"""Storage backends for the journal tests: each made over a place the test owns."""

from __future__ import annotations

import json
import re
from typing import Any

from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage, cache_path_journal
from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage
from airflow.providers.common.ai.durable.core.segments import KeyedSegments, SegmentedStorage, records_of
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage


class FakeTaskStateStore:
    """``context["task_state_store"]`` of one task instance, as Airflow 3.3 behaves: JSON values, no None."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.retention: dict[str, Any] = {}
        self.calls: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        self.calls.append("get")
        return json.loads(self.rows[key]) if key in self.rows else default

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self.calls.append("set")
        if value is None:
            raise ValueError("Cannot set value as None")
        self.rows[key] = json.dumps(value)
        self.retention[key] = retention

    def delete(self, key: str) -> None:
        self.calls.append("delete")
        self.rows.pop(key, None)

    def clear(self) -> None:
        self.calls.append("clear")
        self.rows.clear()


def make_storage(kind: str, tmp_path: Any, accessor: FakeTaskStateStore | None = None):
    """
    The storage of ``kind`` as a worker makes it: in segments (``file``: appended on local disk;
    ``fsspec-memory``, ``task-state-store``: stored whole). ``...-entries``: one entry a key, as
    releases before journal segments stored them and as this one still reads them.
    """
    ids = {"dag_id": "dag", "run_id": "manual__2026-11-29", "task_id": "agent", "map_index": -1}
    if kind == "memory":
        return InMemoryStorage()
    if kind in ("file", "fsspec-memory"):
        scheme = "file" if kind == "file" else "memory"
        return cache_path_journal(UPath(f"{scheme}://{tmp_path}/cache"), **ids)
    if kind == "file-entries":
        return ObjectStorageStorage(UPath(f"file://{tmp_path}/cache"), **ids)
    if kind == "fsspec-memory-entries":
        return ObjectStorageStorage(UPath(f"memory://{tmp_path}/cache"), **ids)
    if kind == "task-state-store":
        return SegmentedStorage(KeyedSegments(make_storage("task-state-store-entries", tmp_path, accessor)))
    if kind == "task-state-store-entries":
        return TaskStateStoreStorage(accessor or FakeTaskStateStore(), identity="dag/run/agent/-1")
    raise ValueError(kind)


def records_in_store(accessor: FakeTaskStateStore) -> list[tuple[str, str]]:
    """Every record the journal's segments in the task state store hold, superseded ones too, as (key, text)."""
    return [
        record
        for row in accessor.rows.values()
        for record in records_of(json.loads(row).encode("utf-8", "surrogatepass"))[0]
    ]


def records_in_folder(folder: Any) -> list[tuple[str, str]]:
    """Every record of the journal's segments under ``folder`` (a cache path on local disk), as (key, text)."""
    return [record for path in sorted(folder.rglob("segment-*.log")) for record in records_of(path.read_bytes())[0]]


def assert_fernet_tokens_only(stored: list[tuple[str, str]], plain: tuple[str, ...]) -> None:
    """
    Each stored record is one Fernet token and nothing beside it, and none of ``plain`` shows in
    them (a token's base64 holds digits now and then, so look for words, not numbers).
    """
    tokens = [text for _, text in stored]
    assert all(re.fullmatch(r"fernet:[A-Za-z0-9_-]+=*", token) for token in tokens), tokens
    everything = "\n".join(tokens)
    for word in plain:
        assert word not in everything, word
