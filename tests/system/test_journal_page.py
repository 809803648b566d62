"""
The journal page (R-44) and usage in XCom (R-42) of task instances that ran under a real scheduler:
``kept`` failed for good (its journal stays), ``replayed`` failed once and replayed (its journal
is gone, its tries' summaries stay). On Airflow 3 the page and its API are asked through Airflow's
own FastAPI app, as the api-server serves them, with Airflow's auth: a user who may not read the
DAG gets 403. On 2.11 they are asked of the real webserver, as users signed in through its login
form: one who may not read the DAG is sent to the home page, as 2.11's own views do.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
from airflow_services import AirflowServices
from dag_runs import TEST_DAGS, durable_env
from journal_page_auth import USERS, create_webserver_users, log_in

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS

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
        env = {
            **durable_env(server, out),
            "DURABLE_TEST_OUT": str(out),
            "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY,
            # The connection form's Test button, which the browser test presses.
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        }
        with AirflowServices(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
            run_id = services.trigger(DAG_ID)
            kept = services.wait_for_task(DAG_ID, run_id, "kept")
            replayed = services.wait_for_task(DAG_ID, run_id, "replayed", try_number=2)
            services.wait_for_task(DAG_ID, run_id, "adversarial")
            assert (kept["state"], replayed["state"], replayed["try_number"]) == ("failed", "success", 2), (
                services.service_log("scheduler")[-4000:]
            )
            assert len(server.requests) == 9
            yield services, run_id, env


class JournalPageClient:
    """Asks for the page or its API as one user (None: no one signed in)."""

    def __init__(self, run_id: str, ask) -> None:
        self.run_id = run_id
        self._ask = ask

    def get(self, user: str | None, path: str, task_id: str):
        params = {"run_id": self.run_id, "task_id": task_id, "map_index": "{MAP_INDEX}"}
        return self._ask(user, f"/common-ai/{path}/{DAG_ID}", params)


@pytest.fixture(scope="module")
def webserver_users(finished_run):
    """On 2.11: the users of journal_page_auth.USERS on the services' webserver (Airflow 3: none needed)."""
    if not AIRFLOW_V_3_0_PLUS:
        create_webserver_users(finished_run[0])


@pytest.fixture(scope="module")
def api(finished_run, webserver_users, monkeypatch_module):
    """A client of the page as Airflow serves it, under which "reader" reads the DAG and "outsider" does not."""
    # This process shares the workers' configuration, as the api-server does (and the tests that
    # store summaries need): the key they encrypted with, and on Airflow before 3.3 the cache path
    # the journals and summaries are under.
    for name, value in finished_run[2].items():
        if name.startswith(("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__COMMON_AI__")):
            monkeypatch_module.setenv(name, value)
    if AIRFLOW_V_3_0_PLUS:
        yield from _api_server_in_this_process(finished_run, monkeypatch_module)
    else:
        yield from _webserver_of_the_services(finished_run)


def _webserver_of_the_services(finished_run):
    """On 2.11: the services' webserver, asked by a session per user signed in through its login form."""
    import requests

    services, run_id, _ = finished_run
    sessions = {None: requests.Session()}
    for name in USERS:
        sessions[name] = requests.Session()
        log_in(sessions[name], services.url, name)

    def ask(user, path, params):
        return sessions[user].get(f"{services.url}{path}", params=params, allow_redirects=False, timeout=60)

    yield JournalPageClient(run_id, ask)
    for session in sessions.values():
        session.close()


def _api_server_in_this_process(finished_run, monkeypatch_module):
    """Airflow's FastAPI app in this process, with an auth manager under which "outsider" reads no DAG."""
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

        def ask(user, path, params):
            headers = {} if user is None else {"Authorization": f"Bearer {tokens[user]}"}
            return client.get(path, params=params, headers=headers)

        yield JournalPageClient(finished_run[1], ask)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def get(api: JournalPageClient, user: str | None, path: str, task_id: str):
    return api.get(user, path, task_id)


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
    # Money at the price table's prices: the replay saved two gpt-4.1-mini calls.
    assert try_2["usage"]["saved"] == {"requests": 2, "tokens": 30, "cost_usd": pytest.approx(2 * 0.000012)}
    assert try_2["usage"]["models"] == {
        "gpt-4.1": {
            "requests": 1,
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "cost_usd": pytest.approx(0.00006),
        }
    }
    assert try_2["usage"]["unknown_prices"] == []
    # Each step each try touched, for the page's lanes: the nested run's only in try 1, whose
    # tool call try 2 replayed.
    assert [(step["key"], step["outcome"], step["tokens"]) for step in try_1["steps"]] == [
        ("1.1", "live", 15),
        ("1.2", "live", None),
        ("1.2.1.1", "live", 15),
        ("1.3", "live", 15),
        ("2.1", "live", 15),
    ]
    # The writer, diverged, runs as a new run (3) beside the recorded one (2).
    assert [(step["key"], step["outcome"], step["tokens"]) for step in try_2["steps"]] == [
        ("1.1", "replayed", 15),
        ("1.2", "replayed", None),
        ("1.3", "replayed", 15),
        ("3.1", "live", 15),
    ]
    [divergence] = try_2["divergences"]
    assert divergence["step"] == "model 'gpt-4.1' at 3.1"
    assert divergence["reason"].endswith("input item 0 differs (counting from 0; the input has 1 item)")


def test_an_ordinary_failed_try_logs_no_durable_warning(finished_run):
    services, run_id, _ = finished_run
    for task_id in ("kept", "replayed"):
        log = services.task_log(DAG_ID, run_id, task_id, 1)
        assert "Durable: replayed 0, ran live 5 (model 4, tool 1)" in log
        assert durable_warnings(log) == []


def durable_warnings(log: str) -> list[str]:
    """The lines of a task log that warn about durability: JSON lines on Airflow 3, text lines on 2.11."""
    if not AIRFLOW_V_3_0_PLUS:
        return [line for line in log.splitlines() if " WARNING - " in line and "Durable:" in line]
    return [
        line
        for line in log.splitlines()
        if line.startswith("{") and json.loads(line).get("level") == "warning" and "Durable:" in line
    ]


def test_the_page_shows_the_same_as_html(api):
    response = get(api, "reader", "journal", "kept")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "ask_expert" in response.text and "gpt-4.1-nano" in response.text
    assert 'data-key="1.2.1.1"' in response.text


@pytest.mark.parametrize("path", ["journal", "api/journal"])
def test_a_dag_run_or_task_that_does_not_exist_is_404_naming_what_was_not_found(api, path):
    asked = {
        "No DAG 'nowhere' is known to Airflow": ("nowhere", api.run_id, "kept"),
        f"DAG '{DAG_ID}' has no run 'nope'": (DAG_ID, "nope", "kept"),
        f"Run '{api.run_id}' of DAG '{DAG_ID}' has no task 'nobody'": (DAG_ID, api.run_id, "nobody"),
    }
    for not_found, (dag_id, run_id, task_id) in asked.items():
        response = api._ask("reader", f"/common-ai/{path}/{dag_id}", {"run_id": run_id, "task_id": task_id})
        assert response.status_code == 404, (not_found, response.status_code, response.text[:500])
        if path == "api/journal":
            assert response.json() == {"detail": f"Not found: {not_found}"}
        else:
            assert f"Not found: {html.escape(not_found)}." in response.text and "No journal" not in response.text


@pytest.mark.parametrize("path", ["journal", "api/journal"])
def test_a_user_who_may_not_read_the_dag_is_refused_and_gets_nothing_of_the_journal(api, path):
    response = get(api, "outsider", path, "kept")
    if AIRFLOW_V_3_0_PLUS:
        assert response.status_code == 403
    else:  # 2.11's webserver sends them to the home page, with its "access denied" message
        assert response.status_code == 302
        assert urlparse(response.headers["Location"]).path == "/home"
    assert "ask_expert" not in response.text


@pytest.mark.parametrize("path", ["journal", "api/journal"])
def test_without_signing_in_the_page_is_refused(api, path):
    response = get(api, None, path, "kept")
    if AIRFLOW_V_3_0_PLUS:
        assert response.status_code == 401
    else:  # 2.11's webserver sends them to its login page
        assert response.status_code == 302
        assert urlparse(response.headers["Location"]).path == "/login/"
    assert "ask_expert" not in response.text


def test_a_task_that_runs_agents_reads_its_usage_with_durable_usage(finished_run):
    usage = xcom_value(finished_run[1], "replayed", "durable_usage")
    assert usage["saved"] == {"requests": 2, "tokens": 30, "cost_usd": pytest.approx(2 * 0.000012)}
    assert usage["replayed"] == {"model": 2, "tool": 1}
    assert json.dumps(usage)


def xcom_value(run_id: str, task_id: str, key: str):
    """The value a task instance of the DAG pushed under ``key``, as Airflow reads it back."""
    if not AIRFLOW_V_3_0_PLUS:
        from airflow.models.xcom import XCom

        return XCom.get_one(run_id=run_id, dag_id=DAG_ID, task_id=task_id, key=key)
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalar(
            select(XComModel).where(
                XComModel.dag_id == DAG_ID,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.key == key,
            )
        )
        return XComModel.deserialize_value(row)


#: Summaries as another release, a hand edit or an attacker may have left them: every field of
#: another type, nested junk, odd unicode, huge values, texts that are no summary at all.
ADVERSARIAL_SUMMARIES = {
    1: {
        "format": "1",
        "try_number": "one",
        "outcome": 3,
        "written_at": [],
        "expires_at": {},
        "usage": "lots",
        "divergences": {"1.1": "changed"},
        "not_recorded": 4,
        "approvals": "yes",
    },
    2: {
        "outcome": "failed \ud800\u202e<script>alert(1)</script>\x00 🙂",
        "expires_at": "2999-01-01T00:00:00",
        "usage": {
            "requests": float("nan"),
            "total_tokens": 10**4000,
            "models": {"gpt-4.1": {"requests": True, "input_tokens": 1.5}, "\udfff": []},
            "saved": {"requests": None, "tokens": "10"},
            "replayed": {"model": 2, "tool": {"x": 1}},
            "live": [[[[[[["deep"]]]]]]],
        },
        "divergences": [
            None,
            "text",
            {"key": 1, "step": ["x"]},
            {"step": "model 'gpt' at 1.1", "reason": "it changed"},
        ],
        "approvals": [{"replayed": "yes", "tools": None}],
        "junk": json.loads("[" * 500 + "]" * 500),
    },
    3: {
        "outcome": "x" * 2_000_000,
        "not_recorded": ["step"] * 100_000,
        "usage": {"live": {str(n): n for n in range(10_000)}},
    },
    4: [1, 2],
    5: "fernet:not-a-token",
}


def store_adversarial_summaries(run_id: str, task_id: str, env: dict[str, str]) -> None:
    """Stores ADVERSARIAL_SUMMARIES (encrypted where they are JSON objects) and raw junk where summaries are kept."""
    from airflow.providers.common.ai.durable.airflow.summary_stores import SUMMARY_KEY_PREFIX
    from airflow.providers.common.ai.durable.core.encryption import encrypt_text

    texts = {
        number: value if isinstance(value, str) else encrypt_text(json.dumps(value, allow_nan=True))
        for number, value in ADVERSARIAL_SUMMARIES.items()
    }
    if AIRFLOW_V_3_3_PLUS:
        from airflow.models.dagrun import DagRun
        from airflow.models.task_state_store import TaskStateStoreModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        rows = {f"{SUMMARY_KEY_PREFIX}{number}": json.dumps(text) for number, text in texts.items()}
        # Rows no worker writes: a value that is not JSON, JSON that is no text, JSON nested past
        # what a parser takes, a try number in other digits.
        rows |= {
            f"{SUMMARY_KEY_PREFIX}6": "{{{",
            f"{SUMMARY_KEY_PREFIX}7": '{"a": 1}',
            f"{SUMMARY_KEY_PREFIX}8": "[" * 100_000 + "]" * 100_000,
            f"{SUMMARY_KEY_PREFIX}²": json.dumps("{}"),
            "9": json.dumps(texts[2]),  # a key of the task's own, no summary
        }
        with create_session() as session:
            dag_run_id = session.scalar(select(DagRun.id).where(DagRun.dag_id == DAG_ID, DagRun.run_id == run_id))
            for key, value in rows.items():
                session.add(
                    TaskStateStoreModel(
                        dag_run_id=dag_run_id, dag_id=DAG_ID, run_id=run_id, task_id=task_id, key=key, value=value
                    )
                )
        return
    from upath import UPath

    from airflow.providers.common.ai.durable.airflow.summary_stores import ObjectStorageSummaries

    summaries = ObjectStorageSummaries(
        UPath(env["AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH"]),
        dag_id=DAG_ID,
        run_id=run_id,
        task_id=task_id,
        map_index=-1,
    )
    for number, text in texts.items():
        summaries.write(number, text, days=1)
    folder = Path(summaries._folder)
    (folder / "try=6.json").write_bytes(b"\xff\xfe not UTF-8")
    (folder / "try=\u00b2.json").write_text("{}")


def test_summaries_of_other_types_show_what_can_be_read_and_say_what_cannot(api, finished_run):
    store_adversarial_summaries(finished_run[1], "adversarial", finished_run[2])

    response = get(api, "reader", "api/journal", "adversarial")
    assert response.status_code == 200, response.text[:3000]
    assert len(response.content) < 1_000_000
    tries = {summary["try_number"]: summary for summary in response.json()["tries"]}
    unreadable = [4, 5, 6, 7, 8] if AIRFLOW_V_3_3_PLUS else [4, 5, 6]
    assert sorted(tries) == [1, 2, 3, *unreadable]
    for number in unreadable:
        assert tries[number]["problem"] == "this summary cannot be read"

    every_field = tries[1]
    assert every_field["unreadable"] == [
        "format",
        "outcome",
        "written_at",
        "expires_at",
        "usage",
        "divergences",
        "not_recorded",
        "approvals",
    ]
    nested = tries[2]
    assert nested["outcome"] == "failed \\ud800\u202e<script>alert(1)</script>\x00 🙂"
    assert nested["usage"]["replayed"] == {"model": 2}
    assert nested["usage"]["total_tokens"] == 10**4000
    assert nested["divergences"] == [
        {"key": None, "step": None, "reason": None},
        {"key": None, "step": "model 'gpt' at 1.1", "reason": "it changed"},
    ]
    assert "usage.requests" in nested["unreadable"] and "divergences[0]" in nested["unreadable"]
    assert "junk" not in nested
    huge = tries[3]
    assert len(huge["outcome"]) < 3000 and len(huge["not_recorded"]) == 200

    page = get(api, "reader", "journal", "adversarial")
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.text
    assert "model &#x27;gpt&#x27; at 1.1: it changed" in page.text
    assert "Parts of this summary this release cannot read: format, outcome" in page.text
    # Said in its lane and in its row of the table.
    assert page.text.count("this summary cannot be read") == 2 * len(unreadable)
