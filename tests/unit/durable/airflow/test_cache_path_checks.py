"""
``[common.ai] durable_cache_path`` is refused at the start of the task, before any model call,
when a worker cannot use it (R-2, R-28): a scheme whose filesystem is not installed, or a local
path that each worker would resolve against its own working directory.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from types import SimpleNamespace

import pytest
from agents import Agent
from agents.testing import ScriptedModel, assistant_message
from airflow.exceptions import AirflowConfigException

from airflow.providers.common.ai.durable.airflow import task_instance
from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
from airflow.providers.common.ai.durable.airflow.task_instance import storage_for_task
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync

TI = SimpleNamespace(dag_id="dag", run_id="manual__1", task_id="agent", map_index=-1, try_number=1)
S3_INSTALLED = importlib.util.find_spec("airflow.providers.amazon") is not None
GCS_INSTALLED = importlib.util.find_spec("airflow.providers.google") is not None


def refusal(monkeypatch, cache_path: str) -> str:
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", cache_path)
    with pytest.raises(AirflowConfigException) as raised:
        storage_for_task({"ti": TI})
    return str(raised.value)


@pytest.mark.parametrize(
    ("cache_path", "scheme", "install"),
    [
        pytest.param(
            "s3://aws_default@bucket/durable",
            "s3://",
            "apache-airflow-providers-amazon[s3fs]",
            marks=pytest.mark.skipif(S3_INSTALLED, reason="the amazon provider is installed here"),
        ),
        pytest.param(
            "gs://google_cloud_default@bucket/durable",
            "gs://",
            "apache-airflow-providers-google",
            marks=pytest.mark.skipif(GCS_INSTALLED, reason="the google provider is installed here"),
        ),
    ],
)
def test_a_cache_path_whose_filesystem_is_not_installed_is_refused_naming_the_option_the_scheme_and_the_package(
    monkeypatch, cache_path, scheme, install
):
    message = refusal(monkeypatch, cache_path)
    assert "[common.ai] durable_cache_path" in message
    assert scheme in message
    assert install in message


def test_a_cache_path_with_a_scheme_nothing_knows_is_refused_naming_the_option_and_the_scheme(monkeypatch):
    message = refusal(monkeypatch, "nosuchfs://bucket/durable")
    assert "[common.ai] durable_cache_path" in message
    assert "nosuchfs://" in message
    assert "provider" in message


@pytest.mark.parametrize(
    "cache_path",
    ["file:relative/dir", "file://relative", "file://relative/dir", "relative/dir", "file:~/durable"],
)
def test_a_relative_local_cache_path_is_refused_instead_of_being_resolved_against_the_workers_directory(
    monkeypatch, tmp_path, cache_path
):
    monkeypatch.chdir(tmp_path)
    message = refusal(monkeypatch, cache_path)
    assert "[common.ai] durable_cache_path" in message
    assert repr(cache_path) in message
    assert "file:///" in message


def test_a_local_cache_path_with_a_host_is_refused_as_it_would_be_read_as_a_relative_folder(monkeypatch):
    message = refusal(monkeypatch, "file://localhost/tmp/durable")
    assert "[common.ai] durable_cache_path" in message
    assert "file:///" in message


@pytest.mark.parametrize("form", ["file://{}", "file:{}", "local://{}", "{}"])
def test_absolute_local_cache_paths_are_accepted_in_each_form(monkeypatch, tmp_path, form):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", form.format(tmp_path / "cache"))
    storage = storage_for_task({"ti": TI})
    storage.write("1.1", "{}")
    assert [path.name for path in (tmp_path / "cache").rglob("*") if path.is_file()] == ["segment-1.log"]


@pytest.mark.skipif(not S3_INSTALLED, reason="needs the amazon provider and s3fs (AIRFLOW_LINE=3.2-s3)")
def test_an_s3_cache_path_with_a_connection_is_accepted_where_the_amazon_provider_is_installed(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_DURABLE_S3", '{"conn_type": "aws", "login": "testing", "password": "testing"}')
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", "s3://durable_s3@bucket/durable")
    storage = storage_for_task({"ti": TI})
    assert isinstance(storage.place.legacy, ObjectStorageStorage)


@pytest.mark.skipif(not S3_INSTALLED, reason="needs the amazon provider (AIRFLOW_LINE=3.2-s3)")
def test_an_s3_cache_path_whose_provider_is_installed_without_s3fs_is_refused_naming_the_option(monkeypatch):
    # A worker with apache-airflow-providers-amazon but without its s3fs extra: s3fs cannot import.
    monkeypatch.setitem(sys.modules, "s3fs", None)
    monkeypatch.setenv("AIRFLOW_CONN_NO_S3FS", '{"conn_type": "aws"}')
    message = refusal(monkeypatch, "s3://no_s3fs@bucket/durable")
    assert "[common.ai] durable_cache_path uses s3://" in message
    assert "apache-airflow-providers-amazon[s3fs]" in message


@pytest.fixture
def running_task(monkeypatch):
    """A running task instance whose cache path has no filesystem here."""
    monkeypatch.setattr(task_instance, "_journals", {})
    monkeypatch.setattr(task_instance, "_running_task_context", lambda: {"ti": TI})
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", "nosuchfs://bucket/durable")


def test_run_durably_sync_refuses_a_cache_path_without_a_filesystem_before_any_model_call(running_task):
    model = ScriptedModel([[assistant_message("Done.")]])
    with pytest.raises(AirflowConfigException, match="durable_cache_path"):
        run_durably_sync(Agent(name="triage", model=model), "Triage T-1.")
    assert len(model.calls) == 0


def test_run_durably_refuses_a_cache_path_without_a_filesystem_before_any_model_call(running_task):
    model = ScriptedModel([[assistant_message("Done.")]])
    with pytest.raises(AirflowConfigException, match="durable_cache_path"):
        asyncio.run(run_durably(Agent(name="triage", model=model), "Triage T-1."))
    assert len(model.calls) == 0
