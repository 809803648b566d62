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

import datetime
import html
from typing import Any

from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.durable.core.journal_file import forked_from_of
from airflow.providers.common.ai.durable.core.journal_view import as_json, journal_view
from airflow.providers.common.ai.durable.core.masking import masked_text
from airflow.providers.common.ai.durable.core.plural import counted
from airflow.providers.common.ai.plugins.journal_page_actions import (
    action_urls,
    download,
    fork,
    render_actions,
    step_keys,
)
from airflow.providers.common.ai.plugins.journal_page_lanes import STYLE as LANES_STYLE
from airflow.providers.common.ai.plugins.journal_page_lanes import budget, lanes, tokens_and_cost, totals
from airflow.providers.common.ai.plugins.journal_page_look import head, time_element

#: Where the plugin's FastAPI app is mounted on the api-server.
URL_PREFIX = "/common-ai"


def map_index_of(value: str) -> int:
    """The map index a request names (its ``map_index``); -1 where that is no number."""
    # The UI leaves "{MAP_INDEX}" as it is for a task that is not mapped.
    try:
        return int(value)
    except ValueError:
        return -1


def what_is_not_found(dag_id: str, run_id: str, task_id: str) -> str | None:
    """
    What of the task instance a page is asked for Airflow does not know (the DAG, its run, the
    task in that run), for a 404; ``None`` when it knows them, or when the database cannot say.
    """
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    try:
        with create_session() as session:
            if session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == dag_id)) is None:
                return f"No DAG {dag_id!r} is known to Airflow"
            if session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)) is None:
                return f"DAG {dag_id!r} has no run {run_id!r}"
            found = select(TaskInstance.task_id).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id
            )
            if session.scalar(found.limit(1)) is None:
                return f"Run {run_id!r} of DAG {dag_id!r} has no task {task_id!r}"
    except Exception:
        return None  # the page itself says what it can read
    return None


def render_not_found(what: str, *, zone: str = "UTC", airflow_2: bool = False) -> str:
    """The page of a 404: what was not found, escaped."""
    return (
        f"{head('Agent journal', zone=zone, airflow_2=airflow_2, style=_STYLE)}"
        f"<body><h2>Agent journal</h2><p class=problem id=not-found>Not found: {_e(what)}.</p></body></html>"
    )


def journal_of(dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
    """What the page shows for a task instance, as JSON: its journal now, and its tries' summaries."""
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId, stores_of

    now = datetime.datetime.now(tz=datetime.timezone.utc)
    entries: dict[str, str] = {}
    summaries: dict[int, str] = {}
    problem = None
    try:
        stores = stores_of(TaskInstanceId(dag_id, run_id, task_id, map_index))
        # None: no journal is kept here (no durable_cache_path before Airflow 3.3), so none to show.
        if stores is not None:
            entries, summaries = stores.journal.stored_texts(), stores.summaries.read_all()
    except Exception as error:
        # A store that cannot be reached is the page's news, not a server error.
        entries, summaries = {}, {}
        problem = f"the journal's store could not be read: {type(error).__name__}: {masked_text(str(error))[:300]}"
    kept, forked_from, kept_keys = _kept_and_origin(dag_id, run_id, task_id, map_index, entries, problem)
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "map_index": map_index,
        "problem": problem,
        "journal": as_json(journal_view(entries)),
        "tries": read_summaries(summaries, now=now),
        # What the page's actions work on: the working journal, else the one kept after success.
        "kept": kept,
        "forked_from": forked_from,
        "fork_steps": step_keys(entries) or kept_keys,
    }


def _kept_and_origin(
    dag_id: str, run_id: str, task_id: str, map_index: int, entries: dict[str, str], problem: str | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """
    The journal kept after success (when the working one holds no step), the run a fork of the
    journal shown came from, and the kept journal's step keys.
    """
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId
    from airflow.providers.common.ai.durable.airflow.kept_journals import kept_journal

    if problem is not None or step_keys(entries):
        return None, forked_from_of(entries), []
    try:
        found = kept_journal(TaskInstanceId(dag_id, run_id, task_id, map_index))
    except Exception:
        return None, None, []  # the page shows the working journal's news; the export names the problem
    if found is None:
        return None, None, []
    kept = {
        "kept_at": found.get("kept_at"),
        "kept_until": found.get("kept_until"),
        "journal": as_json(journal_view(found["entries"])),
    }
    return kept, forked_from_of(found["entries"]), step_keys(found["entries"])


# The page: plain HTML, every value escaped.

_STYLE = """
.nested td:first-child { padding-left: 24px; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _step_rows(runs: list[dict[str, Any]], depth: int = 0) -> list[str]:
    # The key says the run and the position (1.2.1.1: step 1 of the run under step 1.2); nested
    # runs are indented under the step that started them.
    rows = []
    for run in runs:
        for step in run["steps"]:
            rows.append(
                f'<tr class="step" data-key="{_e(step["key"])}" data-depth="{depth}">'
                f'<td style="padding-left:{8 + 24 * depth}px">{_e(step["key"])}</td>'
                f"<td>{_e(step['kind'])}</td><td>{_e(step['name'])}</td><td>{_e(step['state'])}</td>"
                f"<td class=number>{_e(step['size'])}</td><td class=number>{_e(step['tokens'])}</td>"
                f"<td class=in-flight>{_e(step.get('in_flight') or '')}</td></tr>"
            )
            rows.extend(_step_rows(step["runs"], depth + 1))
    return rows


#: What a cell shows for a value the summary holds in a form this release does not read.
_UNREADABLE = "(cannot be read)"


def _counts(counts: dict[str, int] | None) -> str:
    if counts is None:
        return _UNREADABLE
    total = sum(counts.values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
    return f"{total} ({kinds})" if kinds else "0"


def _cell(value: Any) -> str:
    """``value`` escaped, or what shows for one the summary holds in another form."""
    return _e(_UNREADABLE if value is None else value)


def _spent(usage: dict[str, Any]) -> str:
    """What a try spent: its tokens, requests and cost, and each model's when there are several or a price is unknown."""
    models = usage.get("models") or {}
    each = ""
    if len(models) > 1 or usage.get("unknown_prices"):
        each = (
            "<ul>"
            + "".join(
                f"<li>{_e(name)}: {tokens_and_cost(model['total_tokens'], model['cost_usd'], 'price unknown')}</li>"
                for name, model in models.items()
            )
            + "</ul>"
        )
    return f"{tokens_and_cost(usage.get('total_tokens'), usage.get('cost_usd'))} ({_requests(usage.get('requests'))}){each}"


def _requests(number: Any, what: str = "") -> str:
    """``1 request``, ``2 requests replayed``, escaped; what shows for a number the summary does not hold."""
    shown = counted(number, "request") if isinstance(number, int) else f"{_UNREADABLE} requests"
    return _e(f"{shown}{what}")


def _try_rows(tries: list[dict[str, Any]], *, zone: str, airflow_2: bool) -> list[str]:
    # Every field is in the shape read_summaries gives, or None where the summary holds another.
    rows = []
    for summary in tries:
        if "problem" in summary:
            rows.append(
                f"<tr class=try><td>{_e(summary['try_number'])}</td><td colspan=10>{_e(summary['problem'])}</td></tr>"
            )
            continue
        usage = summary["usage"] or {}
        saved = usage.get("saved") or {}
        divergences = "".join(
            f"<li>{_cell(d['step'])}: {_cell(d['reason'])}</li>" for d in summary["divergences"] or []
        )
        not_recorded = "".join(f"<li>{_e(what)}</li>" for what in summary["not_recorded"] or [])
        approvals = "".join(
            f"<li>{_cell(a['tools'])} at {_cell(a['key'])}: {_cell(a['decision'])}"
            f"{' (replayed)' if a['replayed'] else ''}</li>"
            for a in summary["approvals"] or []
        )
        in_flight = "".join(
            f"<li>{_cell(c['tool'])} at {_cell(c['step'])} (key {_cell(c['idempotency_key'])}, "
            f"{_cell(c['policy'])}): {_cell(c['outcome'])}</li>"
            for c in usage.get("in_flight") or []
        )
        written = summary["written_at"]
        rows.append(
            f'<tr class="try" data-try="{_e(summary["try_number"])}">'
            f"<td>{_e(summary['try_number'])}</td><td>{_cell(summary['outcome'])}</td>"
            f"<td class=as-of>{time_element(written, zone=zone, airflow_2=airflow_2) or _cell(written)}</td>"
            f"<td class=replayed>{_e(_counts(usage.get('replayed')))}</td>"
            f"<td class=live>{_e(_counts(usage.get('live')))}</td>"
            f"<td class=not-recorded>{_e(_counts(usage.get('not_recorded')))}<ul>{not_recorded}</ul></td>"
            f"<td class=spent>{_spent(usage)}</td>"
            f"<td class=saved>{tokens_and_cost(saved.get('tokens'), saved.get('cost_usd'))} "
            f"({_requests(saved.get('requests'), ' replayed')})</td>"
            f"<td class=divergences><ul>{divergences}</ul></td>"
            f"<td class=approvals><ul>{approvals}</ul></td>"
            f"<td class=in-flight><ul>{in_flight}</ul></td></tr>"
        )
        if summary["unreadable"]:
            rows.append(
                f"<tr class=unreadable><td></td><td colspan=10 class=problem>Parts of this summary this release "
                f"cannot read: {_e(', '.join(summary['unreadable']))}</td></tr>"
            )
    if len(tries) > 1:
        total = totals(tries)
        rows.append(
            "<tr class=total><td colspan=6>All tries shown</td>"
            f"<td class=spent>{tokens_and_cost(total['tokens'], total['cost_usd'])}</td>"
            f"<td class=saved>{tokens_and_cost(total['saved_tokens'], total['saved_cost_usd'])}</td>"
            "<td colspan=3></td></tr>"
        )
    return rows


def render_page(
    view: dict[str, Any],
    *,
    zone: str = "UTC",
    airflow_2: bool = False,
    prefix: str = URL_PREFIX,
    can_edit: bool = False,
    csrf_token: str | None = None,
) -> str:
    """
    The journal page of one task instance, as HTML: times in ``zone`` until the page's script
    shows them in the UI's timezone, and as the UI of Airflow 2.11 writes them with ``airflow_2``;
    its download link under ``prefix``, and its fork form for a user who ``can_edit``.
    """
    steps = _step_rows(view["journal"])
    tries = _try_rows(view["tries"], zone=zone, airflow_2=airflow_2)
    journal = (
        "<table id=journal><tr><th>Key</th><th>Kind</th><th>Name</th><th>State</th><th>Size (bytes)</th>"
        f"<th>Tokens</th><th>Found in flight</th></tr>{''.join(steps)}</table>"
        if steps
        else "<p class=empty id=journal>No journal: the task instance succeeded (its journal was deleted) or "
        "ran no durable agent.</p>"
    )
    summaries = (
        f"{lanes(view['tries'])}<table id=tries><tr><th>Try</th><th>Outcome</th><th>As of</th><th>Replayed</th>"
        "<th>Ran live</th><th>Could not record</th><th>Spent</th><th>Saved</th><th>Divergences</th>"
        f"<th>Approvals</th><th>Calls found in flight</th></tr>{''.join(tries)}</table>{budget(view['tries'])}"
        if tries
        else "<p class=empty id=tries>No try summaries kept for this task instance.</p>"
    )
    if view.get("problem"):
        journal = f"<p class=problem id=journal>{_e(view['problem'])}</p>"
    where = f"{view['dag_id']} / {view['run_id']} / {view['task_id']}" + (
        f" [{view['map_index']}]" if view["map_index"] >= 0 else ""
    )
    urls = action_urls(prefix, view["dag_id"], view["run_id"], view["task_id"], view["map_index"])
    actions = render_actions(view, urls=urls, can_edit=can_edit, csrf_token=csrf_token)
    kept = view.get("kept")
    if kept:
        journal += (
            f"<h3>Journal kept after success</h3><table id=kept-journal><tr><th>Key</th><th>Kind</th><th>Name</th>"
            "<th>State</th><th>Size (bytes)</th><th>Tokens</th><th>Found in flight</th></tr>"
            f"{''.join(_step_rows(kept['journal']))}</table>"
        )
    return (
        f"{head('Agent journal', zone=zone, airflow_2=airflow_2, style=_STYLE + LANES_STYLE)}"
        f"<body><h2>Agent journal of {_e(where)}</h2>{actions}<h3>Tries</h3>{summaries}"
        f"<h3>Journal now</h3>{journal}</body></html>"
    )


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
