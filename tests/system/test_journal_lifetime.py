"""
The journal's lifetime through real Airflow retries (``dag.test()``): a try that succeeds deletes
what every earlier try recorded, also when it ran no agent itself (R-21, R-52); a try that fails
with retries left keeps its summary as failed, written before Airflow moved on (R-44, R-54).
"""

from __future__ import annotations

from cryptography.fernet import Fernet
from dag_runs import TEST_DAGS, durable_env, journal_entries, latest_run_id, run_dag_file, task_states

from airflow.providers.common.ai.plugins.journal_page_data import journal_of
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

DAG_ID = "durable_no_agent_on_retry"


def test_a_try_that_succeeds_without_running_an_agent_deletes_what_the_failed_try_recorded(tmp_path, monkeypatch):
    # One key for the DAG's process and this one, which reads the summary back (unit-test mode
    # would give each process a key of its own).
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    script = [
        reply.tool_calls(("ask_expert", {"question": "Was ada charged twice?"}, "call_expert")),
        reply.text("A duplicate authorisation."),
        reply.text("Refund one payment."),
    ]
    with FakeOpenAIServer(script) as server:
        # Before Airflow 3.3 this process reads the summaries from the DAG's cache path.
        for name, value in durable_env(server, tmp_path).items():
            monkeypatch.setenv(name, value)
        run = run_dag_file(TEST_DAGS / f"{DAG_ID}.py", {"FAKE_OPENAI_BASE_URL": server.base_url})
    run_id = latest_run_id(DAG_ID)
    assert task_states(DAG_ID, run_id) == {("triage", -1): ("success", 2)}, run.output[-5000:]
    assert [request.status for request in server.requests] == [200, 200, 200]  # all on try 1

    try_1, try_2 = run.tries("triage")
    assert "Durable: replayed 0, ran live 4 (model 3, tool 1), could not record 0" in try_1
    assert "Durable: journal deleted" not in try_1
    # An ordinary failed try: no warning (the summary was kept while the store still took it).
    assert [line for line in try_1.splitlines() if "Durable:" in line and "[warning" in line] == []
    assert "Durable: journal deleted" in try_2
    assert journal_entries(DAG_ID, run_id, tmp_path) == []

    # Try 1's summary outlives the journal and says how it ended.
    [summary] = journal_of(DAG_ID, run_id, "triage", -1)["tries"]
    assert (summary["try_number"], summary["outcome"]) == (1, "failed")
    assert summary["usage"]["live"] == {"model": 3, "tool": 1}
