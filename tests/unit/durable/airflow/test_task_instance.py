from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from airflow.exceptions import AirflowConfigException
from durable_backends import FakeTaskStateStore

from airflow.providers.common.ai.durable.airflow.object_storage import LocalSegments
from airflow.providers.common.ai.durable.airflow.task_instance import storage_for_task
from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage
from airflow.providers.common.ai.durable.core.segments import SegmentedStorage

TI = SimpleNamespace(dag_id="dag", run_id="manual__1", task_id="agent", map_index=-1, try_number=1)


def test_before_airflow_3_3_durable_execution_without_a_cache_path_fails_naming_the_option(monkeypatch):
    monkeypatch.delenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", raising=False)
    with pytest.raises(AirflowConfigException) as raised:
        storage_for_task({"ti": TI})
    assert "[common.ai] durable_cache_path" in str(raised.value)
    assert "file:///tmp/airflow_durable_cache" in str(raised.value)


def test_before_airflow_3_3_the_journal_lives_under_the_cache_path(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{tmp_path}")
    storage = storage_for_task({"ti": TI})
    assert isinstance(storage.place, LocalSegments)
    storage.write("1.1", "{}")
    assert list(tmp_path.rglob("map_index=-1/segment-1.log"))


def test_with_a_task_state_store_the_journal_lives_there_and_a_cache_path_is_ignored_with_a_log_line(
    monkeypatch, tmp_path, caplog
):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{tmp_path}")
    with caplog.at_level(logging.INFO):
        storage = storage_for_task({"ti": TI, "task_state_store": FakeTaskStateStore()})
    assert isinstance(storage, SegmentedStorage) and isinstance(storage.place.legacy, TaskStateStoreStorage)
    assert storage.identity == "dag/manual__1/agent/-1"
    assert "durable_cache_path is only used on Airflow before 3.3" in caplog.text
