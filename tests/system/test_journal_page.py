"""
The journal page (R-44) and usage in XCom (R-42) of task instances that ran under a real scheduler:
``kept`` failed for good (its journal stays), ``replayed`` failed once and replayed (its journal
is gone, its tries' summaries stay). The page and its API are asked through Airflow's own FastAPI
app, as the api-server serves them, with Airflow's auth: a user who may not read the DAG gets 403.
"""

from __future__ import annotations

import base64
import json

import pytest
from airflow_services import AirflowServices
from dag_runs import TEST_DAGS, durable_env

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

DAG_ID = "durable_journal_page"
FERNET_KEY = base64.urlsafe_b64encode(b"the journal page tests' key.....").decode()

RESEARCH = [
    reply.tool_calls(("ask_expert", {"question": "Was ada charged twice?"}, "call_expert")),
    reply.text("A duplicate card authorisation."),
    reply.text("Duplicate authorisation; one refund due."),
    reply.text("We refunded one payment."),
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, airflow_db):
    """The DAG run, once ``replayed`` succeeded on its second try; the services' URL and the run id."""
    out = tmp_path_factory.mktemp("journal_page")
    # kept: 4 requests; replayed try 1: 4; replayed try 2: only the writer, which diverged.
    with FakeOpenAIServer([*RESEARCH, *RESEARCH, reply.text("We refunded one payment.")]) as server:
        env = {**durable_env(server, out), "DURABLE_TEST_OUT": str(out), "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY}
        with AirflowServices(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
            run_id = services.trigger(DAG_ID)
            kept = services.wait_for_task(DAG_ID, run_id, "kept")
            replayed = services.wait_for_task(DAG_ID, run_id, "replayed", try_number=2)
            assert (kept["state"], replayed["state"], replayed["try_number"]) == ("failed", "success", 2), (
                services.service_log("scheduler")[-4000:]
            )
            assert len(server.requests) == 9
            yield services, run_id, env


@pytest.fixture(scope="module")
def api(finished_run, monkeypatch_module):
    """Airflow's FastAPI app in this process, with an auth manager under which "outsider" reads no DAG."""
    # The api-server shares the workers' configuration: the key they encrypted with, and on Airflow
    # before 3.3 the cache path the journals and summaries are under.
    for name, value in finished_run[2].items():
        if name.startswith(("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__COMMON_AI__")):
            monkeypatch_module.setenv(name, value)
    monkeypatch_module.setenv("AIRFLOW__CORE__AUTH_MANAGER", "journal_page_auth.OutsiderReadsNoDag")
    monkeypatch_module.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    app = create_app()
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    tokens = {
        name: get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=name, role="viewer"))
        for name in ("reader", "outsider")
    }
    with TestClient(app) as client:
        yield client, tokens, finished_run[1]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def get(api, user: str, path: str, task_id: str):
    client, tokens, run_id = api
    return client.get(
        f"/common-ai/{path}/{DAG_ID}",
        params={"run_id": run_id, "task_id": task_id, "map_index": "{MAP_INDEX}"},
        headers={"Authorization": f"Bearer {tokens[user]}"},
    )


def steps(runs: list[dict]) -> list[tuple]:
    return [
        row
        for run in runs
        for step in run["steps"]
        for row in [
            (run["run"], step["key"], step["kind"], step["name"], step["state"], step["tokens"]),
            *steps(step["runs"]),
        ]
    ]


def test_the_journal_of_a_task_that_failed_for_good_shows_its_runs_steps_and_nested_run(api):
    response = get(api, "reader", "api/journal", "kept")
    assert response.status_code == 200, response.text
    view = response.json()
    assert steps(view["journal"]) == [
        ("1", "1.1", "model", "gpt-4.1-mini", "recorded", 15),
        ("1", "1.2", "tool", "ask_expert", "recorded", None),
        ("1.2.1", "1.2.1.1", "model", "gpt-4.1-nano", "recorded", 15),
        ("1", "1.3", "model", "gpt-4.1-mini", "recorded", 15),
        ("2", "2.1", "model", "gpt-4.1", "recorded", 15),
    ]
    assert all(step["size"] > 0 for run in view["journal"] for step in run["steps"])
    [try_1] = view["tries"]
    assert (try_1["try_number"], try_1["outcome"]) == (1, "failed")
    assert try_1["usage"]["live"] == {"model": 4, "tool": 1}


def test_the_tries_of_a_task_that_replayed_outlive_its_journal_with_what_replayed_and_why_it_diverged(api):
    view = get(api, "reader", "api/journal", "replayed").json()
    assert view["journal"] == []  # deleted after success
    assert len(view["tries"]) == 2, view["tries"]
    try_1, try_2 = view["tries"]
    # Try 1 failed with a retry left: its summary was kept inside the try, before Airflow moved on to
    # try 2 (on 3.3 the store refuses a write of the failed try once it reported the failure).
    assert (try_1["outcome"], try_2["outcome"]) == ("failed", "success")
    assert try_1["usage"]["live"] == {"model": 4, "tool": 1}
    assert try_2["usage"]["replayed"] == {"model": 2, "tool": 1}
    assert try_2["usage"]["live"] == {"model": 1}
    assert try_2["usage"]["saved"] == {"requests": 2, "tokens": 30}
    assert try_2["usage"]["models"] == {
        "gpt-4.1": {"requests": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    }
    [divergence] = try_2["divergences"]
    assert divergence["step"] == "model 'gpt-4.1' at 3.1"
    assert divergence["reason"].endswith("input item 0 differs (counting from 0; the input has 1 items)")


def test_an_ordinary_failed_try_logs_no_durable_warning(finished_run):
    services, run_id, _ = finished_run
    for task_id in ("kept", "replayed"):
        log = services.task_log(DAG_ID, run_id, task_id, 1)
        assert "Durable: replayed 0, ran live 5 (model 4, tool 1)" in log
        warnings = [
            line
            for line in log.splitlines()
            if line.startswith("{") and json.loads(line).get("level") == "warning" and "Durable:" in line
        ]
        assert warnings == [], warnings


def test_the_page_shows_the_same_as_html(api):
    response = get(api, "reader", "journal", "kept")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "ask_expert" in response.text and "gpt-4.1-nano" in response.text
    assert 'data-key="1.2.1.1"' in response.text


@pytest.mark.parametrize("path", ["journal", "api/journal"])
def test_a_user_who_may_not_read_the_dag_gets_403_and_nothing_of_the_journal(api, path):
    response = get(api, "outsider", path, "kept")
    assert response.status_code == 403
    assert "ask_expert" not in response.text


def test_without_a_token_the_page_answers_401(api):
    client, _, run_id = api
    assert client.get(f"/common-ai/journal/{DAG_ID}", params={"run_id": run_id, "task_id": "kept"}).status_code == 401


def test_a_task_that_runs_agents_reads_its_usage_with_durable_usage(finished_run):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run_id = finished_run[1]
    with create_session() as session:
        row = session.scalar(
            select(XComModel).where(
                XComModel.dag_id == DAG_ID,
                XComModel.run_id == run_id,
                XComModel.task_id == "replayed",
                XComModel.key == "durable_usage",
            )
        )
        usage = XComModel.deserialize_value(row)
    assert usage["saved"] == {"requests": 2, "tokens": 30}
    assert usage["replayed"] == {"model": 2, "tool": 1}
    assert json.dumps(usage)
