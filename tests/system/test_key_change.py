"""
A Fernet key replaced (not rotated) between two tries, under a real scheduler: the workers of try 1
and of try 2 run with different keys, so try 2 reads nothing try 1 wrote, its journal's index
included, yet its success deletes every entry try 1 recorded, the nested run of an agent started
inside a tool among them (R-47, R-52).
"""

from __future__ import annotations

from airflow_services import AirflowServices
from cryptography.fernet import Fernet
from dag_runs import TEST_DAGS, durable_env, journal_entries, journal_keys

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

DAG_ID = "durable_journal_page"
#: What the researcher (whose tool asks an expert: a nested run) and the writer answer in one try.
ONE_TRY = [
    reply.tool_calls(("ask_expert", {"question": "Was ada charged twice?"}, "call_expert")),
    reply.text("A duplicate card authorisation."),
    reply.text("Duplicate authorisation; one refund due."),
    reply.text("We refunded one payment."),
]


def entries_of_kept(run_id: str, out) -> list[str]:
    return [
        entry for entry in journal_entries(DAG_ID, run_id, out) if entry.startswith("kept[") or "task_id=kept/" in entry
    ]


def test_success_after_the_key_was_replaced_deletes_the_nested_runs_try_1_recorded(tmp_path_factory, airflow_db):
    out = tmp_path_factory.mktemp("key_change")
    # kept try 1, replayed try 1 and its try 2 (the writer only), then kept try 2 after the clear.
    with FakeOpenAIServer([*ONE_TRY, *ONE_TRY, ONE_TRY[-1], *ONE_TRY]) as server:
        env = {**durable_env(server, out), "DURABLE_TEST_OUT": str(out)}
        with AirflowServices(
            TEST_DAGS,
            tmp_path_factory.mktemp("logs_1"),
            {**env, "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode()},
        ) as services:
            run_id = services.trigger(DAG_ID)
            kept = services.wait_for_task(DAG_ID, run_id, "kept")
            services.wait_for_task(DAG_ID, run_id, "replayed", try_number=2)
            assert kept["state"] == "failed", services.service_log("scheduler")[-4000:]
        assert "1.2.1.1" in journal_keys(DAG_ID, run_id, "kept", out)  # the expert's nested run
        first_requests = len(server.requests)

        # The workers come back with a new key; the user clears the task that failed for good.
        with AirflowServices(
            TEST_DAGS,
            tmp_path_factory.mktemp("logs_2"),
            {**env, "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode()},
        ) as services:
            services.clear(DAG_ID, run_id, "kept")
            kept = services.wait_for_task(DAG_ID, run_id, "kept", try_number=2)
            assert kept["state"] == "success", services.service_log("scheduler")[-4000:]
            try_2 = services.task_log(DAG_ID, run_id, "kept", 2)

    assert len(server.requests) - first_requests == 4  # nothing replayed: every call ran live again
    assert "the journal's index cannot be read; clean-up looks for nested runs under every step" in try_2
    assert "Durable: journal deleted" in try_2
    assert entries_of_kept(run_id, out) == []
