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
import json
from typing import Any

from airflow.providers.common.ai.durable.airflow.summaries import (
    SUMMARY_KEY_PREFIX,
    ObjectStorageSummaries,
    read_summaries,
    try_number_of,
)
from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX
from airflow.providers.common.ai.durable.core.journal_view import as_json, journal_view
from airflow.providers.common.ai.durable.core.masking import masked_text
from airflow.providers.common.ai.plugins.journal_page_lanes import STYLE as LANES_STYLE
from airflow.providers.common.ai.plugins.journal_page_lanes import budget, lanes, tokens_and_cost, totals
from airflow.providers.common.ai.plugins.journal_page_look import head, time_element

#: Where the plugin's FastAPI app is mounted on the api-server.
URL_PREFIX = "/common-ai"


def _map_index(value: str) -> int:
    # The UI leaves "{MAP_INDEX}" as it is for a task that is not mapped.
    try:
        return int(value)
    except ValueError:
        return -1


_Stored = tuple[dict[str, str], dict[int, str]]


def _from_task_state_store(dag_id: str, run_id: str, task_id: str, map_index: int, now: datetime.datetime) -> _Stored:
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    entries: dict[str, str] = {}
    summaries: dict[int, str] = {}
    with create_session() as session:
        rows = session.execute(
            select(TaskStateStoreModel.key, TaskStateStoreModel.value, TaskStateStoreModel.expires_at).where(
                TaskStateStoreModel.dag_id == dag_id,
                TaskStateStoreModel.run_id == run_id,
                TaskStateStoreModel.task_id == task_id,
                TaskStateStoreModel.map_index == map_index,
            )
        ).all()
    for key, value, expires_at in rows:
        if expires_at is not None and expires_at <= now:
            continue
        try:
            text = json.loads(value)
        except (ValueError, RecursionError):
            text = None
        if key.startswith(KEY_PREFIX):
            # A value that is no text shows as an entry that cannot be read.
            entries[key.removeprefix(KEY_PREFIX)] = text if isinstance(text, str) else ""
        elif key.startswith(SUMMARY_KEY_PREFIX):
            number = try_number_of(key.removeprefix(SUMMARY_KEY_PREFIX))
            if number is not None:
                summaries[number] = text if isinstance(text, str) else ""
    return entries, summaries


def _from_cache_path(dag_id: str, run_id: str, task_id: str, map_index: int) -> _Stored:
    from airflow.providers.common.ai.durable.airflow.object_storage import task_instance_folder
    from airflow.providers.common.ai.durable.airflow.task_instance import cache_path_base, configured_cache_path

    if not configured_cache_path():
        return {}, {}
    base = cache_path_base(configured_cache_path())
    fs = base.fs
    folder = f"{str(base.path).rstrip('/')}/{task_instance_folder(dag_id, run_id, task_id, map_index)}"
    entries = {}
    try:
        paths = fs.ls(folder, detail=False)
    except FileNotFoundError:
        paths = []
    for path in paths:
        name = str(path).rsplit("/", 1)[-1]
        if name.endswith(".json") and not name.startswith("."):
            entries[name.removesuffix(".json")] = fs.cat_file(path).decode(errors="replace")
    summaries = ObjectStorageSummaries(base, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    return entries, summaries.read_all()


def journal_of(dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
    """What the page shows for a task instance, as JSON: its journal now, and its tries' summaries."""
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

    now = datetime.datetime.now(tz=datetime.timezone.utc)
    problem = None
    try:
        if AIRFLOW_V_3_3_PLUS:
            entries, summaries = _from_task_state_store(dag_id, run_id, task_id, map_index, now)
        else:
            entries, summaries = _from_cache_path(dag_id, run_id, task_id, map_index)
    except Exception as error:
        # A store that cannot be reached is the page's news, not a server error.
        entries, summaries = {}, {}
        problem = f"the journal's store could not be read: {type(error).__name__}: {masked_text(str(error))[:300]}"
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "map_index": map_index,
        "problem": problem,
        "journal": as_json(journal_view(entries)),
        "tries": read_summaries(summaries, now=now),
    }


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
    requests = _cell(usage.get("requests"))
    return f"{tokens_and_cost(usage.get('total_tokens'), usage.get('cost_usd'))} ({requests} requests){each}"


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
            f"({_cell(saved.get('requests'))} requests replayed)</td>"
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


def render_page(view: dict[str, Any], *, zone: str = "UTC", airflow_2: bool = False) -> str:
    """
    The journal page of one task instance, as HTML: times in ``zone`` until the page's script
    shows them in the UI's timezone, and as the UI of Airflow 2.11 writes them with ``airflow_2``.
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
    return (
        f"{head('Agent journal', zone=zone, airflow_2=airflow_2, style=_STYLE + LANES_STYLE)}"
        f"<body><h2>Agent journal of {_e(where)}</h2><h3>Tries</h3>{summaries}"
        f"<h3>Journal now</h3>{journal}</body></html>"
    )


def create_app() -> Any:
    """The FastAPI app of the journal page and its JSON API, each route behind Airflow's DAG access check."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI
    from fastapi.responses import HTMLResponse

    app = FastAPI(title="Durable agent journal", docs_url=None, redoc_url=None, openapi_url=None)
    can_read = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))]

    @app.get("/journal/{dag_id}", response_class=HTMLResponse, dependencies=can_read)
    def journal_page(dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> str:
        return render_page(journal_of(dag_id, run_id, task_id, _map_index(map_index)))

    @app.get("/api/journal/{dag_id}", dependencies=can_read)
    def journal_api(dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> dict[str, Any]:
        return journal_of(dag_id, run_id, task_id, _map_index(map_index))

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
