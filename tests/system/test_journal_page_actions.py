"""
The journal page's actions (issue 32) on a task instance that ran under a real scheduler and kept
its journal after success: the download gives the file ``airflow common-ai journal export``
writes, to any user who may read the DAG; the fork (only for a user who may edit the DAG's task
instances, refused while the task instance runs) writes steps 1..N and clears it, and the
scheduler's next try replays exactly 1..N and runs N+1 live; the page then names the run the fork
came from. On Airflow 3 the page is asked through Airflow's own FastAPI app with Airflow's auth,
as the api-server serves it; on 2.11 of the real webserver, as users signed in through its login form.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from airflow_services import AirflowServices
from dag_runs import TEST_DAGS, durable_env
from journal_page_auth import PASSWORD, USERS, create_webserver_users, log_in

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

DAG_ID = "durable_kept"
TASK_ID = "triage"
FERNET_KEY = base64.urlsafe_b64encode(b"the page actions tests' key.....").decode()
#: The first try's two answers, then the forked try's one (step 3, live).
SCRIPT = [
    reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_1")),
    reply.text("Billing, urgent."),
    reply.text("Billing, normal."),
]


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory, airflow_db):
    """The DAG run once its task succeeded and kept its journal: the services, the run id, the env, the server, out."""
    out = tmp_path_factory.mktemp("page_actions")
    with FakeOpenAIServer(SCRIPT) as server:
        env = {**durable_env(server, out), "DURABLE_TEST_OUT": str(out), "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY}
        with AirflowServices(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
            run_id = services.trigger(DAG_ID)
            instance = services.wait_for_task(DAG_ID, run_id, TASK_ID)
            assert instance["state"] == "success", services.service_log("scheduler")[-4000:]
            assert len(server.requests) == 2
            # A person forks a finished run, as they clear one: see AirflowServices.clear.
            services.wait_for_dag_run_finished(DAG_ID, run_id, timeout=300)
            yield services, run_id, env, server, out


class Client:
    """Asks the page, its download and its fork as one user (None: no one signed in)."""

    def __init__(self, run_id: str, get, post) -> None:
        self.run_id = run_id
        self._get, self._post = get, post

    def params(self) -> dict[str, str]:
        return {"run_id": self.run_id, "task_id": TASK_ID, "map_index": "{MAP_INDEX}"}

    def get(self, user: str | None, path: str):
        return self._get(user, f"/common-ai/{path}/{DAG_ID}", self.params())

    def download(self, user: str | None):
        return self._get(user, f"/common-ai/api/journal/{DAG_ID}/export", self.params())

    def fork(self, user: str | None, body, *, json_body: bool = True):
        return self._post(user, f"/common-ai/api/journal/{DAG_ID}/fork", self.params(), body, json_body)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def page(kept_run, monkeypatch_module):
    """A client of the page as Airflow serves it: "reader" reads the DAG, "editor" edits it, "outsider" neither."""
    for name, value in kept_run[2].items():
        if name.startswith(("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__COMMON_AI__")):
            monkeypatch_module.setenv(name, value)
    if AIRFLOW_V_3_0_PLUS:
        yield from _api_server_in_this_process(kept_run, monkeypatch_module)
    else:
        yield from _webserver_of_the_services(kept_run)


def _api_server_in_this_process(kept_run, monkeypatch_module):
    monkeypatch_module.setenv("AIRFLOW__CORE__AUTH_MANAGER", "journal_page_auth.OutsiderReadsNoDag")
    monkeypatch_module.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    app = create_app()
    roles = {"reader": "viewer", "editor": "user", "outsider": "user"}
    tokens = {
        name: get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=name, role=role))
        for name, role in roles.items()
    }

    def headers(user):
        return {} if user is None else {"Authorization": f"Bearer {tokens[user]}"}

    with TestClient(app) as client:

        def get(user, path, params):
            return client.get(path, params=params, headers=headers(user))

        def post(user, path, params, body, json_body):
            if json_body:
                return client.post(path, params=params, headers=headers(user), json=body)
            return client.post(path, params=params, headers=headers(user), data=body)

        yield Client(kept_run[1], get, post)


def _webserver_of_the_services(kept_run):
    import requests

    services = kept_run[0]
    create_webserver_users(services)
    services.create_user("editor", PASSWORD, "User")
    sessions = {None: requests.Session()}
    for name in [*USERS, "editor"]:
        sessions[name] = requests.Session()
        log_in(sessions[name], services.url, name)

    def get(user, path, params):
        return sessions[user].get(f"{services.url}{path}", params=params, allow_redirects=False, timeout=60)

    def post(user, path, params, body, json_body):
        # The page's script sends the webserver's CSRF token, read off the page; so does this.
        form = sessions[user].get(f"{services.url}/common-ai/journal/{DAG_ID}", params=params, timeout=60)
        token = re.search(r'data-csrf="([^"]*)"', form.text)
        headers = {"X-CSRFToken": token.group(1)} if token else {}
        send = {"json": body} if json_body else {"data": body}
        url = f"{services.url}{path}"
        return sessions[user].post(url, params=params, headers=headers, allow_redirects=False, timeout=120, **send)

    yield Client(kept_run[1], get, post)
    for session in sessions.values():
        session.close()


def refused(response) -> bool:
    """Airflow 3 answers 403; 2.11's webserver sends a user it refuses to its home page."""
    if AIRFLOW_V_3_0_PLUS:
        return response.status_code == 403
    return response.status_code == 302 and "/home" in response.headers["Location"]


def test_the_download_is_the_export_file_for_a_user_who_may_read_the_dag(page, kept_run):
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId
    from airflow.providers.common.ai.durable.airflow.journal_commands import export_journal
    from airflow.providers.common.ai.durable.core.journal_file import journal_file_text

    response = page.download("reader")
    assert response.status_code == 200, response.text[:2000]
    assert response.headers["content-disposition"] == (
        f'attachment; filename="{DAG_ID}__{re.sub(r"[^A-Za-z0-9._-]+", "_", page.run_id)}__{TASK_ID}.journal.json"'
    )
    downloaded = json.loads(response.text)
    assert (downloaded["schema"], downloaded["version"], downloaded["source"]) == (
        "apache-airflow-providers-common-ai/journal",
        1,
        "kept",
    )
    assert [step["key"] for step in downloaded["steps"]] == ["1.1", "1.2", "1.3"]
    # The CLI's file, byte for byte but the time it was written.
    exported = export_journal(TaskInstanceId(DAG_ID, page.run_id, TASK_ID), source="auto")
    exported["exported_at"] = downloaded["exported_at"]
    assert response.text == journal_file_text(exported)

    for user in ("outsider", None):
        response = page.download(user)
        assert response.status_code != 200 and "lookup_ticket" not in response.text


def test_the_page_shows_the_kept_journal_the_download_and_the_fork_form_only_to_an_editor(page):
    as_reader = page.get("reader", "journal").text
    assert 'id=download href="/common-ai/api/journal/durable_kept/export?' in as_reader
    assert "<table id=kept-journal>" in as_reader and 'data-key="1.3"' in as_reader
    assert "<form id=fork" not in as_reader
    as_editor = page.get("editor", "journal").text
    assert re.findall(r'<option value="(\d)">', as_editor) == ["1", "2", "3"]


def test_a_fork_is_refused_to_a_user_who_may_not_edit_the_dag(page):
    for user in ("reader", "outsider"):
        response = page.fork(user, {"step": 2})
        assert refused(response), (user, response.status_code, response.text[:500])


def test_a_fork_is_refused_while_the_task_instance_runs_naming_why(page):
    set_state(page.run_id, "running")
    try:
        response = page.fork("editor", {"step": 2})
    finally:
        set_state(page.run_id, "success")
    assert response.status_code == 409, response.text[:1000]
    assert response.json()["detail"] == (
        f"task instance {DAG_ID} / {page.run_id} / {TASK_ID} is running: its try owns its journal; fork it once "
        "the try has ended (or mark it failed first)"
    )


def test_a_fork_at_a_step_the_journal_has_not_or_not_as_json_is_refused(page):
    response = page.fork("editor", {"step": 7})
    assert response.status_code == 400
    assert response.json()["detail"] == "step 7 is not a step of this journal: fork at a step from 0 to 3"
    response = page.fork("editor", {"step": "two"})
    assert response.status_code == 400 and "whole number" in response.json()["detail"]
    response = page.fork("editor", {"step": "2"}, json_body=False)
    assert response.status_code in (400, 415), response.text[:500]


def test_a_fork_at_step_2_replays_1_and_2_on_the_next_try_and_runs_3_live(page, kept_run):
    services, run_id, _, server, out = kept_run
    response = page.fork("editor", {"step": 2})
    assert response.status_code == 200, response.text[:1000]
    assert response.json()["message"].startswith("Forked at step 2: the journal holds steps 1..2")

    instance = services.wait_for_task(DAG_ID, run_id, TASK_ID, try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2), services.service_log("scheduler")[-4000:]
    assert len(server.requests) == 3  # try 1's two, and step 3 of try 2
    log = services.task_log(DAG_ID, run_id, TASK_ID, 2)
    assert "Durable: replayed steps 1.1 to 1.2: 1 model call ('gpt-4.1-mini'), 1 tool call ('lookup_ticket')" in log
    assert "Durable: model 'gpt-4.1-mini' at 1.3 ran live" in log
    calls = [json.loads(line) for line in Path(out, "kept_tool_calls.jsonl").read_text().splitlines()]
    assert [call["try"] for call in calls] == [1]  # the tool never ran again

    # Try 2 kept its journal too: the page names the run its fork came from.
    view = page.get("reader", "api/journal").json()
    assert view["forked_from"]["run_id"] == run_id and view["forked_from"]["step"] == 2
    assert "Forked from <b>" in page.get("reader", "journal").text


def set_state(run_id: str, state: str) -> None:
    """The task instance's state, written as the scheduler writes it."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        session.execute(
            update(TaskInstance)
            .where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id, TaskInstance.task_id == TASK_ID)
            .values(state=state)
        )
