"""
A task instance's task state store from outside its worker (Airflow 3.3+), on a real metadata
database: what the journal page and ``airflow common-ai journal`` read and write.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="the task state store arrived in Airflow 3.3"),
]

DAG_ID, TASK_ID = "support", "triage"
_runs = itertools.count()


@pytest.fixture
def run_id() -> str:
    """A DAG run of its own for each test: the store keeps rows only of a run Airflow knows."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    # The process in it too: a database another run of these tests left rows in holds none of these.
    run_id = f"manual__rows_{os.getpid()}_{next(_runs)}"
    with create_session() as session:
        session.add(DagRun(dag_id=DAG_ID, run_id=run_id, run_type="manual", state="failed"))
    return run_id


def rows(run_id: str, prefix: str, map_index: int = -1):
    from airflow.providers.common.ai.durable.airflow.task_state_store_rows import TaskStateStoreRows

    return TaskStateStoreRows(dag_id=DAG_ID, run_id=run_id, task_id=TASK_ID, map_index=map_index, prefix=prefix)


def store_raw(run_id: str, key: str, value: str) -> None:
    """A row as no worker writes it."""
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        dag_run_id = session.scalar(select(DagRun.id).where(DagRun.dag_id == DAG_ID, DagRun.run_id == run_id))
        session.add(
            TaskStateStoreModel(
                dag_run_id=dag_run_id, dag_id=DAG_ID, run_id=run_id, task_id=TASK_ID, key=key, value=value
            )
        )


def test_the_rows_under_the_prefix_are_listed_by_key_and_nothing_else_of_the_task_instance(run_id):
    journal = rows(run_id, "journal/")
    journal.write("1.1", '{"a": 1}')
    journal.write("1.2.1.1", "fernet:token")
    rows(run_id, "journal/", map_index=0).write("1.1", "another map index")
    rows(run_id, "the task's own/").write("job_id", "42")

    assert journal.stored_texts() == {"1.1": '{"a": 1}', "1.2.1.1": "fernet:token"}
    assert (journal.read("1.2.1.1"), journal.read("1.3")) == ("fernet:token", None)


def test_a_row_whose_retention_passed_is_not_there_though_airflow_has_not_deleted_it(run_id):
    journal = rows(run_id, "journal/")
    journal.write("1.1", "kept")
    journal.write("1.2", "expired", retention=datetime.timedelta(seconds=-1))
    assert journal.stored_texts() == {"1.1": "kept"}
    assert journal.read("1.2") is None


def test_a_value_that_is_not_a_json_text_reads_as_an_entry_that_cannot_be_read(run_id):
    for key, value in {"1.1": "{{{", "1.2": '{"a": 1}', "1.3": "[" * 100_000 + "]" * 100_000}.items():
        store_raw(run_id, f"journal/{key}", value)
    assert rows(run_id, "journal/").stored_texts() == {"1.1": "", "1.2": "", "1.3": ""}


def test_deleting_the_journal_deletes_every_row_under_its_prefix_and_leaves_the_tasks_own(run_id):
    journal, own = rows(run_id, "journal/"), rows(run_id, "own/")
    journal.write("1.1", "a")
    journal.write("1.2", "b", retention=datetime.timedelta(seconds=-1))
    own.write("job_id", "42")
    journal.delete_all([])
    assert (journal.stored_texts(), journal._rows(None)) == ({}, [])
    assert own.stored_texts() == {"job_id": "42"}


def test_a_storage_of_every_row_is_refused_the_tasks_own_keys_are_not_the_journals(run_id):
    with pytest.raises(ValueError, match="under a key prefix"):
        rows(run_id, "")


def test_the_summaries_are_read_by_try_number_and_a_key_that_names_no_try_is_left_out(run_id):
    from airflow.providers.common.ai.durable.airflow.summary_stores import SUMMARY_KEY_PREFIX, TaskStateStoreSummaryRows

    summaries = TaskStateStoreSummaryRows(dag_id=DAG_ID, run_id=run_id, task_id=TASK_ID, map_index=-1)
    summaries.write(1, '{"outcome": "failed"}', days=1)
    summaries.write(2, '{"outcome": "success"}', days=1)
    store_raw(run_id, f"{SUMMARY_KEY_PREFIX}²", json.dumps("{}"))
    store_raw(run_id, f"{SUMMARY_KEY_PREFIX}3", "{{{")
    assert summaries.read_all() == {1: '{"outcome": "failed"}', 2: '{"outcome": "success"}', 3: ""}


def test_a_fork_replaces_the_journal_the_cli_and_the_page_read(run_id):
    from airflow.providers.common.ai.durable.airflow.journal_access import (
        TaskInstanceId,
        replace_journal,
        stored_journal,
    )
    from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX
    from airflow.providers.common.ai.durable.core.encryption import decrypt_text

    ti = TaskInstanceId(DAG_ID, run_id, TASK_ID)
    rows(run_id, KEY_PREFIX).write("1.9", "an entry of the journal replaced")
    rows(run_id, "own/").write("job_id", "42")
    replace_journal(ti, {"1.1": '{"a": 1}'})
    # As stored: encrypted as the workers encrypt.
    assert {key: decrypt_text(text) for key, text in stored_journal(ti).items()} == {"1.1": '{"a": 1}'}
    assert rows(run_id, "own/").stored_texts() == {"job_id": "42"}


def test_the_page_shows_the_journal_and_the_summaries_of_the_task_state_store(run_id):
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId, stores_of
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.plugins.journal_page_data import journal_of

    stores = stores_of(TaskInstanceId(DAG_ID, run_id, TASK_ID))
    assert stores is not None
    journal = DurableJournal(stores.journal)
    with journal.run() as run:
        run.claim("tool", "lookup", "asks").record({"value": "x"})
    stores.summaries.write(1, json.dumps({"outcome": "failed", "expires_at": "2999-01-01T00:00:00"}), days=1)

    shown = journal_of(DAG_ID, run_id, TASK_ID, -1)
    assert shown["problem"] is None
    assert [step["name"] for run in shown["journal"] for step in run["steps"]] == ["lookup"]
    assert [summary["outcome"] for summary in shown["tries"]] == ["failed"]
    assert journal_of(DAG_ID, run_id, TASK_ID, 0)["journal"] == []  # another map index


def test_a_kept_journal_is_read_and_forgotten_through_its_row(run_id):
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId
    from airflow.providers.common.ai.durable.airflow.kept_journals import (
        KEPT_KEY,
        KEPT_SCHEMA,
        forget_kept_journal,
        kept_journal,
    )

    ti = TaskInstanceId(DAG_ID, run_id, TASK_ID)
    document = {
        "schema": KEPT_SCHEMA,
        "version": 1,
        "kept_until": "2999-01-01T00:00:00+00:00",
        "entries": {"1.1": "{}"},
    }
    store_raw(run_id, KEPT_KEY, json.dumps(json.dumps(document)))
    assert kept_journal(ti) == document
    forget_kept_journal(ti)
    assert kept_journal(ti) is None
