"""
The journal page: a tab "Agent journal" on every task instance in the Airflow UI (3.1+).

It shows the task instance's durable journal as it is now (each agent run, its steps with
position, kind, name, state, size and tokens, nested runs under their step) and the summary of
each try (what replayed, ran live, could not be recorded, tokens used and saved, divergences and
why), which outlive the journal for ``[common.ai] try_summary_retention_days`` days.

An ``external_views`` entry, not a ``react_apps`` one: the UI of Airflow 3.2 and 3.3 both render
an external view with destination ``task_instance`` as a tab that loads ``href`` in an iframe,
filling in the dag, run and task ids, and the page is plain HTML served by this plugin's FastAPI
app on the api-server, with no JavaScript bundle to build against each UI's React version.
Every route depends on Airflow's own ``requires_access_dag("GET", TASK_INSTANCE)``: only a user
whom the auth manager lets read that DAG's task instances gets an answer, others get 403.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.ai.plugins.journal_page_actions import download, fork
from airflow.providers.common.ai.plugins.journal_page_data import journal_of, map_index_of, what_is_not_found
from airflow.providers.common.ai.plugins.journal_page_html import URL_PREFIX, render_not_found, render_page


def create_app() -> Any:
    """The FastAPI app of the journal page and its JSON API, each route behind Airflow's DAG access check."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
    from fastapi import Body, Depends, FastAPI, Header
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId

    app = FastAPI(title="Durable agent journal", docs_url=None, redoc_url=None, openapi_url=None)
    can_read = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))]
    # A fork writes the journal and clears the task instance: what "clear" asks of a user in Airflow's UI.
    can_edit = [Depends(requires_access_dag(method="PUT", access_entity=DagAccessEntity.TASK_INSTANCE))]
    signed_in, json_body, content_type_header = Depends(get_user), Body(None), Header("")

    @app.get("/journal/{dag_id}", response_class=HTMLResponse, dependencies=can_read)
    def journal_page(dag_id: str, run_id: str, task_id: str, map_index: str = "-1", user: Any = signed_in) -> Any:
        if (not_found := what_is_not_found(dag_id, run_id, task_id)) is not None:
            return HTMLResponse(render_not_found(not_found), status_code=404)
        editor = get_auth_manager().is_authorized_dag(
            method="PUT", access_entity=DagAccessEntity.TASK_INSTANCE, details=DagDetails(id=dag_id), user=user
        )
        return render_page(journal_of(dag_id, run_id, task_id, map_index_of(map_index)), can_edit=editor)

    @app.get("/api/journal/{dag_id}/export", dependencies=can_read)
    def journal_export(dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> Any:
        if (not_found := what_is_not_found(dag_id, run_id, task_id)) is not None:
            return JSONResponse({"detail": f"Not found: {not_found}"}, status_code=404)
        status, text, name = download(TaskInstanceId(dag_id, run_id, task_id, map_index_of(map_index)))
        headers = {"Content-Disposition": f'attachment; filename="{name}"'} if status == 200 else {}
        return Response(text, status_code=status, media_type="application/json", headers=headers)

    @app.post("/api/journal/{dag_id}/fork", dependencies=can_edit)
    def journal_fork(
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = "-1",
        content_type: str = content_type_header,
        body: Any = json_body,
    ) -> Any:
        if (not_found := what_is_not_found(dag_id, run_id, task_id)) is not None:
            return JSONResponse({"detail": f"Not found: {not_found}"}, status_code=404)
        # Only the page's script sends JSON: a form of another site cannot, with the UI's cookie.
        if not content_type.startswith("application/json"):
            return JSONResponse({"detail": 'send the fork as JSON: {"step": N}'}, status_code=415)
        status, answer = fork(TaskInstanceId(dag_id, run_id, task_id, map_index_of(map_index)), body)
        return JSONResponse(answer, status_code=status)

    @app.get("/api/journal/{dag_id}", dependencies=can_read)
    def journal_api(dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> Any:
        if (not_found := what_is_not_found(dag_id, run_id, task_id)) is not None:
            return JSONResponse({"detail": f"Not found: {not_found}"}, status_code=404)
        return journal_of(dag_id, run_id, task_id, map_index_of(map_index))

    return app


class _BuiltOnFirstRequest:
    """An ASGI app that builds the page's FastAPI app when the api-server first calls it, not when
    a worker loads this plugin for the listeners of the other one."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            self._app = create_app()
        await self._app(scope, receive, send)


#: What the plugin registers: the page's app on the api-server, and its tab on every task instance.
FASTAPI_APPS = [{"app": _BuiltOnFirstRequest(), "url_prefix": URL_PREFIX, "name": "Agent journal"}]
EXTERNAL_VIEWS = [
    {
        "name": "Agent journal",
        "href": f"{URL_PREFIX}/journal/{{DAG_ID}}?run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}",
        "destination": "task_instance",
        "url_route": "agent_journal",
    }
]
