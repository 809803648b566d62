"""
The journal page's picture of the tries and what they cost: one lane per try, one mark per step
coloured (and shaped) by what became of it, the tokens and US dollars each try spent and its
replay saved, the totals over the tries, and the task instance's budget (R-58, R-59).

Plain HTML and CSS, no script: each mark has its step's key, kind, name, outcome, tokens and cost
(and why it has no result, where known) as its title and as text a screen reader reads; under each
lane, the steps of the try that have no result are listed with the reason. Every value is escaped.
"""

from __future__ import annotations

import html
from typing import Any

from airflow.providers.common.ai.durable.core.plural import counted
from airflow.providers.common.ai.durable.core.prices import format_usd

#: What each outcome of a step is called in the legend and in a mark's text.
OUTCOMES = {
    "replayed": "replayed (nothing spent)",
    "live": "ran live",
    "failed": "failed (runs again)",
    "not_recorded": "ran, not recorded (runs again)",
    "resolved": "found in flight, resolved as done",
    "unfinished": "no result (in flight or waiting)",
}

STYLE = """
#lanes { margin: 0 0 16px; }
.lane { display: flex; align-items: center; gap: 12px; padding: 6px 0; border-bottom: 1px solid var(--border); }
.lane-label { flex: none; width: 9em; }
.as-of { white-space: nowrap; }
.lane-usage { flex: none; width: 22em; color: var(--muted); font-variant-numeric: tabular-nums; }
.marks { display: flex; flex-wrap: wrap; gap: 4px; list-style: none; margin: 0; padding: 0; flex: 1; }
.mark { display: inline-block; width: 16px; height: 16px; box-sizing: border-box; flex: none; }
.mark.replayed { background: var(--replayed); border-radius: 50%; }
.mark.live { background: var(--live); border-radius: 2px; }
.mark.failed { background: var(--failed); transform: rotate(45deg) scale(0.8); }
.mark.not_recorded { background: var(--not-recorded); clip-path: polygon(50% 0, 100% 100%, 0 100%); }
.mark.resolved { background: var(--resolved); border-radius: 50% 50% 2px 2px; }
.mark.unfinished { border: 2px solid var(--unfinished); border-radius: 2px; }
.reasons { margin: 0; padding: 2px 0 6px calc(31em + 24px); list-style: none; color: var(--muted); border-bottom: 1px solid var(--border); }
.lane:has(+ .reasons) { border-bottom: none; }
caption { text-align: left; padding: 3px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 16px; list-style: none; padding: 0; margin: 6px 0 0; color: var(--muted); }
.legend .mark { vertical-align: -2px; margin-right: 4px; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _is_amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def money(value: Any, unknown: str = "(cannot be read)") -> str:
    """US dollars as the log writes them, or ``unknown`` for an amount the summary does not hold."""
    return format_usd(value) if _is_amount(value) else unknown


def tokens_and_cost(tokens: Any, cost: Any, unknown: str = "(cannot be read)") -> str:
    """``15 tokens, $0.00006``, escaped; ``unknown`` for a cost the summary does not hold."""
    shown = counted(tokens, "token") if _is_amount(tokens) else "(cannot be read) tokens"
    return f"{_e(shown)}, {_e(money(cost, unknown))}"


def _mark(step: dict[str, Any]) -> str:
    outcome = step["outcome"] if step["outcome"] in OUTCOMES else "unfinished"
    about = f"{step['key']} {step['kind']} {step['name']}: {OUTCOMES[outcome]}"
    if step["tokens"] is not None:
        about += f", {step['tokens']} tokens"
    if step["cost_usd"] is not None:
        about += f", {money(step['cost_usd'])}"
    if step.get("reason"):
        about += f": {step['reason']}"
    return f'<li class="mark {outcome}" data-key="{_e(step["key"])}" title="{_e(about)}"><span class=sr>{_e(about)}</span></li>'


def _lane(summary: dict[str, Any]) -> str:
    number = _e(summary["try_number"])
    if "problem" in summary:
        return f'<div class=lane data-try="{number}"><div class=lane-label><b>Try {number}</b></div>{_e(summary["problem"])}</div>'
    usage = summary["usage"] or {}
    saved = usage.get("saved") or {}
    steps = summary.get("steps")
    marks = "".join(_mark(step) for step in steps or [])
    more = summary.get("steps_not_listed")
    if more:
        marks += f"<li class=note>and {_e(counted(more, 'more step'))}, not listed</li>"
    if steps is None:
        marks = "<li class=note>steps not listed: this summary was written by an earlier release</li>"
    outcome = summary["outcome"] or "(cannot be read)"
    return (
        f'<div class=lane data-try="{number}" data-outcome="{_e(outcome)}">'
        f"<div class=lane-label><b>Try {number}</b> {_e(outcome)}</div>"
        f"<div class=lane-usage>spent {tokens_and_cost(usage.get('total_tokens'), usage.get('cost_usd'))}"
        f"<br>saved {tokens_and_cost(saved.get('tokens'), saved.get('cost_usd'))}"
        f"{'<br>price unknown: ' + _e(', '.join(usage['unknown_prices'])) if usage.get('unknown_prices') else ''}</div>"
        f'<ol class=marks aria-label="Steps of try {number}">{marks}</ol></div>{_reasons(summary)}'
    )


def _reasons(summary: dict[str, Any]) -> str:
    """The steps of a try that have no result, each with why: a failure, a refusal, a cut-off call."""
    why = "".join(
        f'<li data-key="{_e(step["key"])}">{_e(step["key"])} {_e(step["kind"])} {_e(step["name"])}: '
        f"{_e(OUTCOMES.get(step['outcome'], OUTCOMES['unfinished']))}: {_e(step['reason'])}</li>"
        for step in summary.get("steps") or []
        if step.get("reason")
    )
    number = _e(summary["try_number"])
    return (
        f'<ul class=reasons data-try="{number}" aria-label="Why steps of try {number} have no result">{why}</ul>'
        if why
        else ""
    )


def lanes(tries: list[dict[str, Any]]) -> str:
    """The picture: one lane per try, one mark per step, and the legend."""
    legend = "".join(f'<li><span class="mark {outcome}"></span>{_e(name)}</li>' for outcome, name in OUTCOMES.items())
    return (
        f'<figure id=lanes aria-label="Each try\'s steps">{"".join(_lane(summary) for summary in tries)}'
        f"<figcaption><ul class=legend>{legend}</ul></figcaption></figure>"
    )


def totals(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """What the tries shown spent and saved, in tokens and US dollars (of models of known price)."""
    sums: dict[str, Any] = {"tokens": 0, "cost_usd": 0.0, "saved_tokens": 0, "saved_cost_usd": 0.0}
    for summary in tries:
        usage = summary.get("usage") or {}
        saved = usage.get("saved") or {}
        for name, value in (
            ("tokens", usage.get("total_tokens")),
            ("cost_usd", usage.get("cost_usd")),
            ("saved_tokens", saved.get("tokens")),
            ("saved_cost_usd", saved.get("cost_usd")),
        ):
            # Tokens stay whole numbers, of any size (read_summaries reads no cost past a float).
            sums[name] += value if _is_amount(value) else 0
    return sums


#: The budget's names as the page calls them.
_BUDGET_NAMES = {
    "requests": "requests",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
    "total_tokens": "total tokens",
    "cost_usd": "cost",
}


def _amount(name: str, value: Any) -> str:
    if not _is_amount(value):
        return "" if value is None else "(cannot be read)"
    if name == "cost_usd":
        return money(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def budget(tries: list[dict[str, Any]]) -> str:
    """
    The task instance's budget as its latest try left it (limits, spent, left), and what each
    earlier budget spent (a clear of a finished task instance starts a new one); empty without one.
    """
    budgets = {}
    for summary in tries:
        kept = summary.get("budget")
        if isinstance(kept, dict) and kept.get("first_try") is not None:
            budgets[kept["first_try"]] = kept  # the latest try's, for each budget
    if not budgets:
        return ""
    *earlier, (first_try, latest) = sorted(budgets.items())
    limits, spent, left = (latest.get(part) or {} for part in ("limits", "spent", "left"))
    rows = "".join(
        f'<tr data-name="{_e(name)}"><th>{_e(_BUDGET_NAMES.get(name, name))}</th>'
        f"<td class=number>{_e(_amount(name, limits.get(name)))}</td>"
        f"<td class=number>{_e(_amount(name, spent.get(name)))}</td>"
        f"<td class=number>{_e(_amount(name, left.get(name)))}</td></tr>"
        for name in [*limits, *(name for name in spent if name not in limits)]
    )
    before = "".join(
        f"<li>The budget from try {_e(start)} (before the task instance was cleared) spent "
        + _e(", ".join(f"{_BUDGET_NAMES.get(n, n)} {_amount(n, v)}" for n, v in (kept.get("spent") or {}).items()))
        + "</li>"
        for start, kept in earlier
    )
    return (
        f"<table id=budget><caption>Budget, counting tries from try {_e(first_try)}</caption>"
        f"<tr><th></th><th>Limit</th><th>Spent</th><th>Left</th></tr>{rows}</table>"
        + (f"<ul class=note id=earlier-budgets>{before}</ul>" if before else "")
    )
