"""
What a real task run leaves in the journal's store when ``[core] fernet_key`` is set (R-47): the
rows of the task state store table (3.3+) or the files under ``durable_cache_path`` (3.2), read
past Airflow and the provider, hold no plain text. Runs on every line, with ``dag.test()``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cryptography.fernet import Fernet
from dag_runs import TEST_DAGS, durable_env, latest_run_id, run_dag_file, segment_records, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

PLAIN_TEXTS = ("T-5", "charged twice", "lookup_ticket", "triage", "fingerprint", '"state"')


def stored_texts(dag_id: str, run_id: str, cache: Path) -> dict[str, str]:
    """Every row or file the provider stored for the DAG run, as stored."""
    if AIRFLOW_V_3_3_PLUS:
        from airflow.models.task_state_store import TaskStateStoreModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.execute(
                select(TaskStateStoreModel.key, TaskStateStoreModel.value).where(
                    TaskStateStoreModel.dag_id == dag_id, TaskStateStoreModel.run_id == run_id
                )
            )
            # The store keeps each value as JSON: an encrypted entry is a JSON string.
            return {key: json.loads(value) for key, value in rows}
    return {str(path.relative_to(cache)): path.read_text() for path in cache.rglob("*") if path.is_file()}


def test_the_journal_a_failed_task_leaves_in_the_store_holds_no_plain_text(tmp_path):
    with FakeOpenAIServer(
        [reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup"))], fail_requests={2}
    ) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_cleared.py",
            {
                **durable_env(server, tmp_path),
                "DURABLE_TEST_OUT": str(tmp_path),
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            },
        )
    run_id = latest_run_id("durable_cleared")
    # retries=0: the failed try keeps its journal, for a clear to replay.
    assert task_states("durable_cleared", run_id) == {("triage", -1): ("failed", 1)}, run.output[-5000:]

    # Every record of the journal's segments, superseded ones too, and the try summaries beside them.
    stored = {
        f"{key}#{entry}": text
        for key, entry, text in segment_records(stored_texts("durable_cleared", run_id, tmp_path / "durable_cache"))
    }
    journal = {key.rsplit("#", 1)[1] for key in stored if "summar" not in key}
    assert journal == {"1.1", "1.2"}, stored  # the model's answer and the tool's output
    for key, text in stored.items():
        # One Fernet token and nothing beside it. A short plain text (the ticket id) is not looked
        # for in the token: base64 holds "T-5" now and then by chance.
        assert re.fullmatch(r"fernet:[A-Za-z0-9_-]+=*", text), key
        for plain in PLAIN_TEXTS:
            assert len(plain) < 6 or plain not in text, (key, plain)
