"""
A task that ends skipped after its agent ran is done, as a successful one is (R-21, R-29): its
try logs the summary and the journal goes, with what every try recorded.
"""

from __future__ import annotations

from dag_runs import TEST_DAGS, durable_env, journal_entries, latest_run_id, run_dag_file, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


def test_a_task_that_skips_itself_after_its_agent_ran_logs_the_summary_and_deletes_its_journal(tmp_path):
    script = [
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-1"}, "call_1")),
        reply.text("Duplicate."),
    ]
    with FakeOpenAIServer(script) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_skipped.py",
            {
                **durable_env(server, tmp_path),
                "FAKE_OPENAI_BASE_URL": server.base_url,
                "DURABLE_TEST_OUT": str(tmp_path),
            },
        )
    run_id = latest_run_id("durable_skipped")
    assert task_states("durable_skipped", run_id) == {("triage", -1): ("skipped", 2)}, run.output[-5000:]

    # Try 1 ran the agent and failed after it; try 2 replayed it whole, then skipped.
    assert len(server.requests) == 2
    assert (tmp_path / "tool_runs.txt").read_text().splitlines() == ["lookup_ticket T-1 try 1"]
    try_1, try_2 = run.tries("triage")
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1), could not record 0" in try_1
    assert "Durable: journal deleted" not in try_1
    assert "Durable: replayed 3 (model 2, tool 1), ran live 0, could not record 0" in try_2
    assert "Durable: journal deleted" in try_2
    assert journal_entries("durable_skipped", run_id, tmp_path) == []
