"""
Runs DAG files as their users do, ``python <file>`` (``dag.test()``, real retries), against a
local OpenAI-compatible server, and reads back what the runs left in Airflow's database.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from airflow.providers.common.ai.testing import FakeOpenAIServer
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS

ROOT = Path(__file__).parents[2]
EXAMPLE_DAGS = ROOT / "example_dags"
TEST_DAGS = Path(__file__).parent / "dags"


def openai_connection(server: FakeOpenAIServer) -> str:
    """An ``openai`` connection to ``server``, as an ``AIRFLOW_CONN_...`` value."""
    return json.dumps(
        {
            "conn_type": "openai",
            "host": server.base_url,
            "password": "sk-test-key",
            # The client's own retries would hide an injected failure from Airflow.
            "extra": {"openai_client_kwargs": {"max_retries": 0}},
        }
    )


def durable_env(server: FakeOpenAIServer, tmp_path: Path) -> dict[str, str]:
    """What every durable run here needs: the connection, and on Airflow before 3.3 a cache path."""
    env = {"AIRFLOW_CONN_OPENAI_DEFAULT": openai_connection(server), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    if not AIRFLOW_V_3_3_PLUS:
        env["AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH"] = f"file://{tmp_path / 'durable_cache'}"
    return env


@dataclass
class DagFileRun:
    returncode: int
    output: str

    def tries(self, task_id: str, map_index: int = -1) -> list[str]:
        """The log of each try of one task instance, in order."""
        task = rf"task_id={re.escape(task_id)} map_index={map_index}\b"
        # Airflow 2.11 logs no end of a try that failed: the next try's start, or the output's end, ends it.
        pattern = re.compile(
            rf"\[DAG TEST\] starting {task}.*?(?:\[DAG TEST\] end task {task}|(?=\[DAG TEST\] starting {task})|\Z)",
            re.DOTALL,
        )
        return pattern.findall(self.output)


def run_dag_file(path: Path, env: dict[str, str], *, timeout: float = 600) -> DagFileRun:
    """
    ``python <path>`` with the DAG's folder as the DAGS folder; returns its exit code and output.
    The timeout only stops a run that hangs: on a loaded CI (load 10 to 30 on 2 cores) a dag.test()
    of two tasks and their retries, ~40 s alone, took 274 s.
    """
    environ = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    # One stream, in the order it was written: Airflow 3.1's dag.test() writes an operator's own
    # log lines (self.log) to stdout, and the [DAG TEST] lines that delimit each try, with every
    # other logger's, to stderr.
    result = subprocess.run(
        [sys.executable, str(path)],
        env={**environ, "AIRFLOW__CORE__DAGS_FOLDER": str(path.parent), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    return DagFileRun(result.returncode, result.stdout)


def latest_run_id(dag_id: str) -> str:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1))


def task_states(dag_id: str, run_id: str) -> dict[tuple[str, int], tuple[str, int]]:
    """(task id, map index) -> (state, try number) of each task instance of a DAG run."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state, TaskInstance.try_number).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id
            )
        )
        return {(task_id, map_index): (str(state), tries) for task_id, map_index, state, tries in rows}


def xcom_return_value(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
    return xcom_value(dag_id, run_id, task_id, "return_value", map_index=map_index)


def xcom_value(dag_id: str, run_id: str, task_id: str, key: str, *, map_index: int = -1) -> Any:
    """The value a task instance pushed to XCom under ``key``, or ``None``."""
    from airflow.utils.session import create_session

    try:
        from airflow.models.xcom import XComModel
    except ImportError:  # Airflow 2.11: XCom rows are BaseXCom, which deserializes the row too
        from airflow.models.xcom import BaseXCom as XComModel
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalar(
            select(XComModel).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.map_index == map_index,
                XComModel.key == key,
            )
        )
        if row is None:
            return None
        # Airflow 2.11 deserializes the value as it loads the row.
        return XComModel.deserialize_value(row) if AIRFLOW_V_3_0_PLUS else row.value


def journal_entries(dag_id: str, run_id: str, tmp_path: Path) -> list[str]:
    """
    What is stored of the journals of a DAG run: task state store keys (3.3+), or cache files. The
    try summaries kept beside them for the journal page (R-44) are not journal entries.
    """
    return [entry for entry in _stored(dag_id, run_id, tmp_path) if not is_try_summary(entry)]


def journal_keys(dag_id: str, run_id: str, task_id: str, tmp_path: Path, map_index: int = -1) -> list[str]:
    """
    The keys of one task instance's journal entries as the journal names them (``1.2.1.1``), read
    from its segments by the provider's own reader, as the journal page and the CLI read them.
    """
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId, stored_journal

    cache = (
        {} if AIRFLOW_V_3_3_PLUS else {"AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH": f"file://{tmp_path / 'durable_cache'}"}
    )
    with mock.patch.dict(os.environ, cache):
        return sorted(stored_journal(TaskInstanceId(dag_id, run_id, task_id, map_index)))


def segment_records(stored: dict[str, str]) -> list[tuple[str, str, str]]:
    """
    Every record of the journal segments among ``stored`` (rows or objects by key, files by path,
    each as stored), superseded ones too, in segment order: (where it is stored, entry key, text).
    What is stored beside the segments (a try summary) is passed on as (its key, "", its text).
    """
    from airflow.providers.common.ai.durable.core.segments import records_of, segment_number

    def number(key: str) -> int | None:
        return segment_number(key.rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".log"))

    found: list[tuple[str, str, str]] = []
    for key in sorted(stored, key=lambda key: (key.rsplit("/", 1)[0], number(key) or 0)):
        if number(key) is None:
            found.append((key, "", stored[key]))
            continue
        segment = stored[key].encode("utf-8", "surrogatepass")
        found += [(key, entry_key, text) for entry_key, text in records_of(segment)[0]]
    return found


def is_try_summary(entry: str) -> bool:
    """Whether a stored key or file is a try summary, kept on purpose after success."""
    from airflow.providers.common.ai.durable.airflow.summary_stores import SUMMARY_FOLDER_SUFFIX, SUMMARY_KEY_PREFIX

    return SUMMARY_KEY_PREFIX in entry or f"{SUMMARY_FOLDER_SUFFIX}/" in entry


def _stored(dag_id: str, run_id: str, tmp_path: Path) -> list[str]:
    if AIRFLOW_V_3_3_PLUS:
        from airflow.models.task_state_store import TaskStateStoreModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        # Airflow 3.4 keys the store by region: map_index became region_index.
        index = getattr(TaskStateStoreModel, "region_index", None)
        index = TaskStateStoreModel.map_index if index is None else index
        with create_session() as session:
            rows = session.execute(
                select(TaskStateStoreModel.task_id, index, TaskStateStoreModel.key).where(
                    TaskStateStoreModel.dag_id == dag_id, TaskStateStoreModel.run_id == run_id
                )
            )
            return sorted(f"{task_id}[{map_index}] {key}" for task_id, map_index, key in rows)
    cache = tmp_path / "durable_cache"
    return sorted(str(path.relative_to(cache)) for path in cache.rglob("*") if path.is_file())
