"""
The journal page on Airflow 2.11's webserver (``plugins/journal_page_fab.py``): the plugin
registers a Flask-AppBuilder view and an extra link instead of the api-server's app and tab; the
link leads to the page of its task instance; the page answers a user who may read the DAG, and
sends away one who may not and one who has not signed in, as 2.11's own views do.
"""

from __future__ import annotations

import functools
import html
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

if AIRFLOW_V_3_0_PLUS:
    pytest.skip(
        "the webserver view is Airflow 2.11's; Airflow 3 serves the page from the api-server", allow_module_level=True
    )

from airflow.providers.common.ai.plugins.durable import DurableJournalPlugin
from airflow.providers.common.ai.plugins.journal_page_fab import AgentJournalLink, AgentJournalView

PASSWORD = "unit-test-password"


def ti_key(**changes):
    return SimpleNamespace(
        **{"dag_id": "support", "task_id": "triage", "run_id": "manual__2026-12-01T10:00:00+00:00", "map_index": -1}
        | changes
    )


def test_on_airflow_2_the_plugin_registers_the_view_and_a_link_on_every_task_instance_not_the_api_server_app():
    assert [type(view["view"]) for view in DurableJournalPlugin.appbuilder_views] == [AgentJournalView]
    assert all("name" not in view for view in DurableJournalPlugin.appbuilder_views)  # no menu item
    assert [link.name for link in DurableJournalPlugin.global_operator_extra_links] == ["Agent journal"]
    assert not getattr(DurableJournalPlugin, "fastapi_apps", None)
    assert not getattr(DurableJournalPlugin, "external_views", None)


def test_the_link_leads_to_the_page_of_its_task_instance_with_every_id_quoted():
    url = urlparse(AgentJournalLink().get_link(None, ti_key=ti_key(map_index=3)))
    assert url.path == "/common-ai/journal/support"
    assert parse_qs(url.query) == {
        "run_id": ["manual__2026-12-01T10:00:00+00:00"],
        "task_id": ["triage"],
        "map_index": ["3"],
    }


@pytest.fixture(scope="module")
def app(airflow_db):
    from airflow.www.app import create_app

    app = create_app(testing=True)
    app.config["WTF_CSRF_ENABLED"] = False
    security = app.appbuilder.sm
    outsider = security.find_role("Outsider") or security.add_role("Outsider")
    for resource in ("Website", "Task Instances"):
        security.add_permission_to_role(outsider, security.get_permission("can_read", resource))
    for name, role in (("reader", security.find_role("Viewer")), ("outsider", outsider)):
        if not security.find_user(username=name):
            security.add_user(name, name, "test", f"{name}@example.com", role, password=PASSWORD)
    _task_instance_support_r_triage()
    return app


def _task_instance_support_r_triage() -> None:
    """The task instance the page is asked for, in the metadata database, as a DAG run leaves it."""
    import datetime

    from airflow.models.dag import DAG
    from airflow.operators.empty import EmptyOperator
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType

    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    with DAG("support", schedule=None, start_date=start) as dag:
        EmptyOperator(task_id="triage")
    dag.sync_to_db()
    if not dag.get_dagrun(run_id="r"):
        dag.create_dagrun(
            run_id="r",
            run_type=DagRunType.MANUAL,
            state=DagRunState.SUCCESS,
            execution_date=start,
            data_interval=(start, start),
        )


@functools.cache
def signed_in(app, username):
    """A client signed in as ``username``, once per user: 2.11 allows 5 logins in 40 s."""
    client = app.test_client()
    answer = client.post("/login/", data={"username": username, "password": PASSWORD})
    assert answer.status_code == 302 and "/login" not in answer.headers["Location"]
    return client


@pytest.fixture
def journal(monkeypatch, tmp_path):
    """A journal of task instance support/r/triage, with one recorded tool call, under a cache path."""
    from upath import UPath

    from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
    from airflow.providers.common.ai.durable.core.journal import DurableJournal

    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{tmp_path}")
    ids = {"dag_id": "support", "run_id": "r", "task_id": "triage", "map_index": -1}
    with DurableJournal(ObjectStorageStorage(UPath(f"file://{tmp_path}"), **ids)).run() as run:
        run.claim("tool", "lookup_order", "asks").record({"value": "x"})


PAGE = "/common-ai/journal/support?run_id=r&task_id=triage"


@pytest.mark.db
def test_a_user_who_may_read_the_dag_gets_the_page_and_the_api_of_the_task_instance(app, journal):
    client = signed_in(app, "reader")
    page = client.get(PAGE)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "lookup_order" in page.text and "Agent journal of support / r / triage" in page.text
    api = client.get(PAGE.replace("/journal/", "/api/journal/"))
    assert [step["name"] for run in api.json["journal"] for step in run["steps"]] == ["lookup_order"]


@pytest.mark.db
def test_the_link_built_in_the_webserver_is_the_page_of_the_view(app):
    with app.test_request_context():
        url = urlparse(AgentJournalLink().get_link(None, ti_key=ti_key(run_id="r", task_id="triage")))
    assert url.path == "/common-ai/journal/support"
    assert parse_qs(url.query) == {"run_id": ["r"], "task_id": ["triage"], "map_index": ["-1"]}


@pytest.mark.db
@pytest.mark.parametrize("path", [PAGE, PAGE.replace("/journal/", "/api/journal/")])
def test_a_user_who_may_not_read_the_dag_is_sent_to_the_home_page_with_nothing_of_the_journal(app, journal, path):
    answer = signed_in(app, "outsider").get(path)
    assert answer.status_code == 302 and urlparse(answer.headers["Location"]).path == "/home"
    assert "lookup_order" not in answer.text


@pytest.mark.db
def test_without_signing_in_the_page_sends_to_the_login_page(app, journal):
    answer = app.test_client().get(PAGE)
    assert answer.status_code == 302 and urlparse(answer.headers["Location"]).path == "/login/"
    assert "lookup_order" not in answer.text


@pytest.mark.db
def test_a_page_of_a_dag_run_or_task_that_does_not_exist_is_404_naming_what_was_not_found(app):
    asked = [
        ("nowhere?run_id=r&task_id=triage", "No DAG &#x27;nowhere&#x27; is known to Airflow"),
        ("support?run_id=nope&task_id=triage", "DAG &#x27;support&#x27; has no run &#x27;nope&#x27;"),
        (
            "support?run_id=r&task_id=nobody",
            "Run &#x27;r&#x27; of DAG &#x27;support&#x27; has no task &#x27;nobody&#x27;",
        ),
    ]
    client = signed_in(app, "reader")
    for path, not_found in asked:
        page = client.get(f"/common-ai/journal/{path}")
        assert (page.status_code, page.mimetype) == (404, "text/html")
        assert f"Not found: {not_found}." in page.text and "No journal" not in page.text
        api = client.get(f"/common-ai/api/journal/{path}")
        assert api.status_code == 404
        assert api.json == {"detail": f"Not found: {html.unescape(not_found)}"}


@pytest.mark.db
def test_a_page_asked_without_its_task_says_what_it_needs(app):
    answer = signed_in(app, "reader").get("/common-ai/journal/support?run_id=r")
    assert answer.status_code == 400 and "task_id" in answer.text


@pytest.mark.parametrize(
    ("ui_zone", "core_zone", "shown"),
    [("Asia/Tokyo", "utc", "Asia/Tokyo"), ("utc", "Europe/Paris", "UTC"), ("", "Europe/Paris", "Europe/Paris")],
)
def test_the_page_shows_times_in_the_ui_default_zone_as_2_11_reads_it(monkeypatch, ui_zone, core_zone, shown):
    from airflow.providers.common.ai.plugins.journal_page_fab import default_ui_timezone

    monkeypatch.setenv("AIRFLOW__WEBSERVER__DEFAULT_UI_TIMEZONE", ui_zone)
    monkeypatch.setenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", core_zone)
    assert default_ui_timezone() == shown


@pytest.mark.db
def test_the_page_is_written_as_2_11_writes_times_and_keeps_its_theme(app, journal, monkeypatch):
    monkeypatch.setenv("AIRFLOW__WEBSERVER__DEFAULT_UI_TIMEZONE", "Asia/Tokyo")
    page = signed_in(app, "reader").get(PAGE).text
    assert 'data-ui="2" data-zone="Asia/Tokyo"' in page
