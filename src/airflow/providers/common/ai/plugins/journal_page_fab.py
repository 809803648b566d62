"""
The journal page on Airflow 2.11: the page and JSON API of ``journal_page.py`` (its data and HTML), served by a
Flask-AppBuilder view of 2.11's webserver at the same paths as the 3.x api-server serves them
(``/common-ai/journal/<dag_id>`` and ``/common-ai/api/journal/<dag_id>``), and an "Agent journal"
extra link on every task instance that leads to it.

``plugins/durable.py`` imports this module only before Airflow 3.0: Flask, Flask-AppBuilder and
``airflow.www`` are the 2.x webserver's, and 3.x has none of them.

An extra link, not a menu item: the page belongs to one task instance, and 2.11's grid shows a
task instance's extra links as buttons in its details, the place its users look for what belongs
to that instance. A global link, since any task may run an agent durably (``run_durably`` in a
``@task``), as the 3.x tab is on every task instance. Each route is behind 2.11's own
``has_access_dag("GET", TASK_INSTANCE)``, the check of 2.11's own task instance views: a user who
is not logged in is sent to the login page, one who may not read the DAG's task instances is sent
to the home page with 2.11's "access denied" message, and neither gets anything of the journal.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from airflow.auth.managers.models.resource_details import DagAccessEntity, DagDetails  # type: ignore[import-untyped]
from airflow.providers.common.compat.sdk import BaseOperatorLink
from airflow.www.auth import has_access_dag  # type: ignore[import-untyped]
from flask import Response, has_request_context, jsonify, request, url_for  # type: ignore[import-not-found]
from flask_appbuilder import BaseView, expose  # type: ignore[import-not-found]
from flask_wtf.csrf import generate_csrf  # type: ignore[import-not-found]

from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId
from airflow.providers.common.ai.plugins.journal_page_actions import download, fork
from airflow.providers.common.ai.plugins.journal_page_data import journal_of, map_index_of, what_is_not_found
from airflow.providers.common.ai.plugins.journal_page_html import URL_PREFIX, render_not_found, render_page

#: The link's name: the button's text in the task instance's details, as the 3.x tab's.
LINK_NAME = "Agent journal"


def default_ui_timezone() -> str:
    """
    The timezone 2.11's UI shows times in until a user picks one: ``[webserver] default_ui_timezone``
    (``system``: the server's own), or when it is empty ``[core] default_timezone``, as 2.11 reads them.
    """
    from airflow.configuration import conf
    from pendulum.tz import local_timezone

    def named(zone: str) -> str:
        return local_timezone().name if zone == "system" else "UTC" if zone.lower() == "utc" else zone

    return named(conf.get("webserver", "default_ui_timezone", fallback="UTC")) or named(
        conf.get("core", "default_timezone", fallback="utc")
    )


def _task_instance_of_request() -> tuple[str, str, int] | Response:
    """The run id, task id and map index the request names, or the 400 a request that lacks one gets."""
    run_id = request.args.get("run_id")
    task_id = request.args.get("task_id")
    if not run_id or not task_id:
        return Response("run_id and task_id are required, as the task instance's extra link gives them", status=400)
    return run_id, task_id, map_index_of(request.args.get("map_index", "-1"))


def _may_edit(dag_id: str) -> bool:
    """Whether the signed-in user may edit the DAG's task instances (clear them): who sees the fork form."""
    from airflow.www.extensions.init_auth_manager import get_auth_manager  # type: ignore[import-untyped]

    return bool(
        get_auth_manager().is_authorized_dag(
            method="PUT", access_entity=DagAccessEntity.TASK_INSTANCE, details=DagDetails(id=dag_id)
        )
    )


class AgentJournalView(BaseView):
    """The journal page and its JSON API on 2.11's webserver, each route behind 2.11's DAG access check."""

    route_base = URL_PREFIX
    default_view = "journal_page"

    @expose("/journal/<string:dag_id>")
    @has_access_dag("GET", DagAccessEntity.TASK_INSTANCE)
    def journal_page(self, dag_id: str) -> Any:
        asked = _task_instance_of_request()
        if isinstance(asked, Response):
            return asked
        if (not_found := what_is_not_found(dag_id, *asked[:2])) is not None:
            page = render_not_found(not_found, zone=default_ui_timezone(), airflow_2=True)
            return Response(page, status=404, mimetype="text/html")
        page = render_page(
            journal_of(dag_id, *asked),
            zone=default_ui_timezone(),
            airflow_2=True,
            prefix=url_for(f"{AgentJournalView.__name__}.journal_page", dag_id="-").rsplit("/journal/", 1)[0],
            can_edit=_may_edit(dag_id),
            csrf_token=generate_csrf(),
        )
        return Response(page, mimetype="text/html")

    @expose("/api/journal/<string:dag_id>/export")
    @has_access_dag("GET", DagAccessEntity.TASK_INSTANCE)
    def journal_export(self, dag_id: str) -> Any:
        asked = _task_instance_of_request()
        if isinstance(asked, Response):
            return asked
        if (not_found := what_is_not_found(dag_id, *asked[:2])) is not None:
            return jsonify({"detail": f"Not found: {not_found}"}), 404
        status, text, name = download(TaskInstanceId(dag_id, *asked))
        headers = {"Content-Disposition": f'attachment; filename="{name}"'} if status == 200 else {}
        return Response(text, status=status, mimetype="application/json", headers=headers)

    @expose("/api/journal/<string:dag_id>/fork", methods=["POST"])
    @has_access_dag("PUT", DagAccessEntity.TASK_INSTANCE)
    def journal_fork(self, dag_id: str) -> Any:
        # The webserver's CSRF check (the page's script sends its token) runs before this view.
        asked = _task_instance_of_request()
        if isinstance(asked, Response):
            return asked
        if (not_found := what_is_not_found(dag_id, *asked[:2])) is not None:
            return jsonify({"detail": f"Not found: {not_found}"}), 404
        if not request.is_json:
            return jsonify({"detail": 'send the fork as JSON: {"step": N}'}), 415
        status, answer = fork(TaskInstanceId(dag_id, *asked), request.get_json(silent=True))
        return jsonify(answer), status

    @expose("/api/journal/<string:dag_id>")
    @has_access_dag("GET", DagAccessEntity.TASK_INSTANCE)
    def journal_api(self, dag_id: str) -> Any:
        asked = _task_instance_of_request()
        if isinstance(asked, Response):
            return asked
        if (not_found := what_is_not_found(dag_id, *asked[:2])) is not None:
            return jsonify({"detail": f"Not found: {not_found}"}), 404
        return jsonify(journal_of(dag_id, *asked))


class AgentJournalLink(BaseOperatorLink):
    """The "Agent journal" button of every task instance in 2.11's UI: it opens the journal page."""

    name = LINK_NAME

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        query = {"run_id": ti_key.run_id, "task_id": ti_key.task_id, "map_index": ti_key.map_index}
        if has_request_context():
            # Under the webserver's own prefix, when it serves under one ([webserver] base_url).
            return str(url_for(f"{AgentJournalView.__name__}.journal_page", dag_id=ti_key.dag_id, **query))
        return f"{URL_PREFIX}/journal/{quote(ti_key.dag_id, safe='')}?{urlencode(query)}"


#: What the plugin registers on 2.11: the view, with no menu item of its own, and the link.
APPBUILDER_VIEWS = [{"view": AgentJournalView()}]
GLOBAL_OPERATOR_EXTRA_LINKS = [AgentJournalLink()]
