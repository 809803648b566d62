"""
A past run as a fixture (R-62, R-63), through real Airflow (on 2.11 the commands run as
``python -m airflow.providers.common.ai.cli.journal``, the journals under the cache path): a task
that succeeds with keep_journal leaves a kept journal, ``airflow common-ai journal export`` writes it as one file, the offline
replay helper replays every step of it with no server (and names the divergence when the
instructions change), and a fork at step N followed by a new try replays exactly 1..N.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from dag_runs import TEST_DAGS, durable_env, journal_entries, latest_run_id, run_dag_file, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.testing.replay import replay_offline
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

DAG_ID = "durable_kept"
#: One [core] fernet_key for the DAG's processes, the CLI's and this one (unit-test mode gives each its own).
FERNET_KEY = Fernet.generate_key().decode()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # Airflow 2.11 takes CLI commands only from executors and auth managers: the provider's run as python -m.
    if args[:2] == ("common-ai", "journal") and not AIRFLOW_V_3_2_PLUS:
        command = [sys.executable, "-m", "airflow.providers.common.ai.cli.journal", *args[2:]]
    else:
        command = [sys.executable, "-m", "airflow", *args]
    return subprocess.run(
        command,
        env={**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tool_calls(out: Path) -> list[dict]:
    path = out / "kept_tool_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _dag_module():
    spec = importlib.util.spec_from_file_location("durable_kept_dag", TEST_DAGS / f"{DAG_ID}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kept_run(airflow_db, tmp_path_factory):
    """
    A run of the DAG whose task succeeded with keep_journal=True, the journal file export wrote of
    it, and the folder the run wrote to (its cache path before 3.3, its tool's calls). Made once
    for the module (two Airflow processes, a minute on a loaded CI): the tests read it, and the
    fork's, which clears the task instance and runs it again, comes last.
    """
    out = tmp_path_factory.mktemp("kept_run")
    script = [reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_1")), reply.text("Billing, urgent.")]
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("DURABLE_TEST_OUT", str(out))
        monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", FERNET_KEY)
        with FakeOpenAIServer(script) as server:
            for name, value in durable_env(server, out).items():
                monkeypatch.setenv(name, value)
            run = run_dag_file(TEST_DAGS / f"{DAG_ID}.py", {})
        run_id = latest_run_id(DAG_ID)
        assert task_states(DAG_ID, run_id) == {("triage", -1): ("success", 1)}, run.output[-5000:]
        assert "Durable: journal kept steps=3" in run.output
        exported = out / "triage.json"
        result = _cli("common-ai", "journal", "export", DAG_ID, "triage", run_id, "-o", str(exported))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Exported 3 steps" in result.stdout and "(kept)" in result.stdout
        yield run_id, exported, out


def test_a_kept_journal_outlives_the_journal_and_exports_as_one_file(kept_run):
    run_id, exported, out = kept_run
    # The working journal is gone, as after every success; only the kept copy is left.
    assert [entry for entry in journal_entries(DAG_ID, run_id, out) if "kept" not in entry] == []
    document = json.loads(exported.read_text())
    assert (document["schema"], document["version"], document["source"]) == (
        "apache-airflow-providers-common-ai/journal",
        1,
        "kept",
    )
    assert [(step["key"], step["entry"]["kind"]) for step in document["steps"]] == [
        ("1.1", "model"),
        ("1.2", "tool"),
        ("1.3", "model"),
    ]
    assert document["not_decrypted"] == []


def test_the_exported_file_replays_offline_and_a_changed_instruction_is_named(kept_run):
    _, exported, out = kept_run
    dag_module = _dag_module()

    replay = replay_offline(dag_module.triage_agent(), "Triage ticket T-5.", exported, fernet_key=FERNET_KEY)
    assert replay.replayed_everything, replay
    assert replay.result.final_output == "Billing, urgent."

    changed = replay_offline(
        dag_module.triage_agent("Triage the ticket in one word."), "Triage ticket T-5.", exported, fernet_key=FERNET_KEY
    )
    assert changed.stopped and changed.divergence is not None
    assert "the instructions changed" in changed.divergence.reason
    assert [call["try"] for call in _tool_calls(out)] == [1]  # the tool ran on the task's try only


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": "apache-airflow-providers-common-ai/journal", "vers', "is not complete JSON"),
        ('{"schema": "something-else", "version": 1}', "is not a journal file"),
        ('{"schema": "apache-airflow-providers-common-ai/journal", "version": 9}', "of version 9"),
    ],
)
def test_a_file_that_is_truncated_or_of_another_schema_is_refused_naming_the_problem(
    kept_run, tmp_path, content, message
):
    run_id, _, _ = kept_run
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    refused = _cli("common-ai", "journal", "fork", DAG_ID, "triage", run_id, "--from", str(bad), "--step", "1")
    assert refused.returncode != 0 and message in refused.stderr, refused.stderr[-2000:]


def test_a_file_of_another_task_is_refused(kept_run, tmp_path):
    run_id, exported, _ = kept_run
    document = json.loads(exported.read_text())
    document["task_instance"]["task_id"] = "another_task"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(document))
    refused = _cli("common-ai", "journal", "fork", DAG_ID, "triage", run_id, "--from", str(other), "--step", "1")
    assert refused.returncode != 0
    assert "is the journal of task_id 'another_task', not of 'triage'" in refused.stderr


# Last: it clears the task instance the other tests read, and runs it again.
def test_a_fork_at_step_2_replays_steps_1_and_2_and_runs_step_3_live_on_the_next_try(kept_run):
    run_id, exported, out = kept_run
    forked = _cli("common-ai", "journal", "fork", DAG_ID, "triage", run_id, "--from", str(exported), "--step", "2")
    assert forked.returncode == 0, forked.stderr[-3000:]
    assert task_states(DAG_ID, run_id)[("triage", -1)][0] == "None"  # cleared

    with FakeOpenAIServer([reply.text("Billing, normal.")]) as server:
        rerun = _cli("tasks", "test", DAG_ID, "triage", run_id, env=durable_env(server, out))
    output = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, output[-5000:]
    assert "Durable: replayed steps 1.1 to 1.2: 1 model call ('gpt-4.1-mini'), 1 tool call ('lookup_ticket')" in output
    assert "Durable: model 'gpt-4.1-mini' at 1.3 ran live" in output
    assert len(server.requests) == 1  # step 3 only
    assert [call["try"] for call in _tool_calls(out)] == [1]  # the tool never ran again
