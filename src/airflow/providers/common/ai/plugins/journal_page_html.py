"""
The journal page's HTML: the page of a task instance's journal and summaries (as
``journal_page_data.journal_of`` gives them), and the page of a 404. Every value is escaped.
"""

from __future__ import annotations

import html
from typing import Any

from airflow.providers.common.ai.durable.core.plural import counted
from airflow.providers.common.ai.plugins.journal_page_actions import action_urls, render_actions
from airflow.providers.common.ai.plugins.journal_page_lanes import STYLE as LANES_STYLE
from airflow.providers.common.ai.plugins.journal_page_lanes import budget, lanes, tokens_and_cost, totals
from airflow.providers.common.ai.plugins.journal_page_look import head, time_element

#: Where the plugin's FastAPI app is mounted on the api-server (the page's links start with it).
URL_PREFIX = "/common-ai"


def render_not_found(what: str, *, zone: str = "UTC", airflow_2: bool = False) -> str:
    """The page of a 404: what was not found, escaped."""
    return (
        f"{head('Agent journal', zone=zone, airflow_2=airflow_2, style=_STYLE)}"
        f"<body><h2>Agent journal</h2><p class=problem id=not-found>Not found: {_e(what)}.</p></body></html>"
    )


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
