"""Journals per task instance: a mapped task keeps one per map index."""

from __future__ import annotations

import json

from dag_runs import TEST_DAGS, durable_env, journal_entries, latest_run_id, run_dag_file, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

PROMPTS = {0: "Ticket A: please refund my order", 1: "Ticket B: I cannot log in"}


def test_each_map_index_of_a_mapped_task_replays_its_own_journal(tmp_path):
    # Each map index asks for the tool, then its next request fails; the order in which the two
    # run does not matter, as their script entries are alike.
    script = [
        reply.tool_calls(("lookup_ticket", {}, "call_lookup")),
        reply.tool_calls(("lookup_ticket", {}, "call_lookup")),
        reply.text("Triaged."),
        reply.text("Triaged."),
    ]
    with FakeOpenAIServer(script, fail_requests={2, 4}) as server:
        run = run_dag_file(TEST_DAGS / "durable_agent_mapped.py", durable_env(server, tmp_path))
    assert run.returncode == 0, run.output[-5000:]
    run_id = latest_run_id("durable_agent_mapped")
    assert task_states("durable_agent_mapped", run_id) == {
        ("triage", 0): ("success", 2),
        ("triage", 1): ("success", 2),
    }

    assert [r.status for r in server.requests] == [200, 500, 200, 500, 200, 200]
    for map_index in (0, 1):
        try_1, try_2 = run.tries("triage", map_index)
        assert try_1.count(f"Tool lookup_ticket ran for map index {map_index} on try 1") == 1
        assert "Tool lookup_ticket ran" not in try_2
        assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0" in try_2
        assert "diverged" not in try_1 + try_2

    # Each retried request carries its own task instance's prompt and its own replayed tool result.
    retried = {}
    for request in server.requests[4:]:
        body = json.dumps(request.body["input"])
        [map_index] = [index for index, prompt in PROMPTS.items() if prompt in body]
        assert f"the ticket of map index {map_index}" in body
        retried[map_index] = body
    assert sorted(retried) == [0, 1]
    assert journal_entries("durable_agent_mapped", run_id, tmp_path) == []
