"""
The journal page as part of the UI: one lane per try and one mark per step, what each try spent
and saved in tokens and US dollars, the budget, the UI's colours in both modes and its times.
"""

from __future__ import annotations

import datetime
import html
import json
import re

import pytest

from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.plugins.journal_page_html import render_page
from airflow.providers.common.ai.plugins.journal_page_look import COLOURS, STYLE, time_element

HOSTILE = "<img src=x onerror=alert(1)>"
NOW = datetime.datetime.now(tz=datetime.timezone.utc)


def step(key, outcome, *, kind="model", name="gpt-4.1", tokens=None, cost=None):
    return {
        "key": key,
        "kind": kind,
        "name": name,
        "outcome": outcome,
        **({"tokens": tokens} if tokens is not None else {}),
        **({"cost_usd": cost} if cost is not None else {}),
    }


def usage(*, tokens, cost, saved_tokens=0, saved_cost=0.0, models=None, unknown=()):
    return {
        "requests": 1,
        "total_tokens": tokens,
        "cost_usd": cost,
        "models": models or {},
        "saved": {"requests": 2, "tokens": saved_tokens, "cost_usd": saved_cost},
        "unknown_prices": list(unknown),
        "replayed": {},
        "live": {},
        "not_recorded": {},
    }


def summary(outcome, steps, used, **fields):
    return {
        "format": 1,
        "outcome": outcome,
        "written_at": "2026-11-30T12:00:00+00:00",
        "usage": used,
        "divergences": [],
        "not_recorded": [],
        "approvals": [],
        **({"steps": steps} if steps is not None else {}),
        **fields,
    }


BUDGET = {
    "first_try": 1,
    "limits": {"requests": 10, "cost_usd": 0.01},
    "spent": {"requests": 5, "cost_usd": 0.0003},
    "left": {"requests": 5, "cost_usd": 0.0097},
}

TRY_1 = summary(
    "failed",
    [
        step("1.1", "live", tokens=15, cost=0.00006),
        step("1.2", "failed", kind="tool", name=HOSTILE),
        step("1.3", "not_recorded", kind="tool", name="pay"),
        step("1.4", "unfinished", kind="approval", name="refund"),
    ],
    usage(
        tokens=30,
        cost=0.00006,
        models={
            "gpt-4.1": {"requests": 1, "total_tokens": 15, "cost_usd": 0.00006},
            HOSTILE: {"requests": 1, "total_tokens": 15, "cost_usd": None},
        },
        unknown=[HOSTILE],
    ),
    budget={**BUDGET, "spent": {"requests": 2, "cost_usd": 0.00006}},
)
TRY_2 = summary(
    "success",
    [
        step("1.1", "replayed", tokens=15, cost=0.00006),
        step("1.2", "live", kind="tool", name="pay"),
        step("1.3", "resolved", kind="tool", name="refund"),
    ],
    usage(tokens=0, cost=0.0, saved_tokens=15, saved_cost=0.00006),
    budget=BUDGET,
)


def page(*stored, **render) -> str:
    tries = read_summaries({n: json.dumps(s) for n, s in enumerate(stored, start=1)}, now=NOW)
    view = {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1, "journal": [], "tries": tries}
    return render_page(view, **render)


def marks(shown: str) -> list[tuple[str, str, str]]:
    return re.findall(r'<li class="mark (\w+)" data-key="([^"]*)" title="([^"]*)"', shown)


def test_each_try_is_a_lane_with_one_mark_per_step_classed_by_what_became_of_it_and_titled_escaped():
    shown = page(TRY_1, TRY_2)
    assert re.findall(r'<div class=lane data-try="(\d+)" data-outcome="(\w+)"', shown) == [
        ("1", "failed"),
        ("2", "success"),
    ]
    assert [(outcome, key) for outcome, key, _ in marks(shown)] == [
        ("live", "1.1"),
        ("failed", "1.2"),
        ("not_recorded", "1.3"),
        ("unfinished", "1.4"),
        ("replayed", "1.1"),
        ("live", "1.2"),
        ("resolved", "1.3"),
    ]
    titles = [title for *_, title in marks(shown)]
    assert titles[0] == "1.1 model gpt-4.1: ran live, 15 tokens, $0.00006"
    assert titles[1] == "1.2 tool &lt;img src=x onerror=alert(1)&gt;: failed (runs again)"
    assert titles[4] == "1.1 model gpt-4.1: replayed (nothing spent), 15 tokens, $0.00006"
    assert titles[6] == "1.3 tool refund: found in flight, resolved as done"
    assert HOSTILE not in shown
    # The legend names every outcome a mark can have.
    assert re.findall(r'<li><span class="mark (\w+)"></span>', shown) == [
        "replayed",
        "live",
        "failed",
        "not_recorded",
        "resolved",
        "unfinished",
    ]


def test_a_lane_of_a_summary_from_an_earlier_release_says_its_steps_are_not_listed_and_a_long_try_how_many_more():
    shown = page(summary("failed", None, usage(tokens=0, cost=0.0)))
    assert "steps not listed: this summary was written by an earlier release" in shown
    assert marks(shown) == []
    shown = page(summary("failed", [step("1.1", "live")], usage(tokens=0, cost=0.0), steps_not_listed=250))
    assert "and 250 more steps, not listed" in shown


def test_each_try_and_all_tries_show_what_they_spent_and_saved_in_tokens_and_dollars_and_which_prices_are_unknown():
    shown = page(TRY_1, TRY_2)
    lanes = re.findall(r"<div class=lane-usage>(.*?)</div>", shown)
    assert lanes[0] == (
        "spent 30 tokens, $0.00006<br>saved 0 tokens, $0<br>price unknown: &lt;img src=x onerror=alert(1)&gt;"
    )
    assert lanes[1] == "spent 0 tokens, $0<br>saved 15 tokens, $0.00006"
    spent = re.findall(r"<td class=spent>(.*?)</td>", shown)
    assert spent[0].startswith("30 tokens, $0.00006 (1 request)<ul><li>gpt-4.1: 15 tokens, $0.00006</li>")
    assert "<li>&lt;img src=x onerror=alert(1)&gt;: 15 tokens, price unknown</li>" in spent[0]
    # The row of all tries: spent and saved summed.
    assert spent[2] == "30 tokens, $0.00006"
    assert re.findall(r"<td class=saved>(.*?)</td>", shown)[2] == "15 tokens, $0.00006"


def test_the_budget_shows_its_limits_what_was_spent_and_what_is_left_as_the_latest_try_left_it():
    shown = page(TRY_1, TRY_2)
    assert "counting tries from try 1" in shown
    rows = re.findall(
        r'<tr data-name="(\w+)"><th>[^<]*</th><td class=number>([^<]*)</td>'
        r"<td class=number>([^<]*)</td><td class=number>([^<]*)</td>",
        shown,
    )
    assert rows == [("requests", "10", "5", "5"), ("cost_usd", "$0.01", "$0.0003", "$0.0097")]
    assert "earlier-budgets" not in shown
    assert "id=budget" not in page(summary("failed", [], usage(tokens=0, cost=0.0)))


def test_a_budget_started_again_by_a_clear_shows_what_the_earlier_one_spent():
    cleared = {**TRY_2, "budget": {**BUDGET, "first_try": 3, "spent": {"requests": 1}}}
    shown = page(TRY_1, TRY_2, cleared)
    assert "counting tries from try 3" in shown
    assert "The budget from try 1 (before the task instance was cleared) spent requests 5, cost $0.0003" in shown


def test_times_are_shown_in_the_default_zone_as_the_ui_of_each_airflow_line_writes_them():
    three = time_element("2026-11-30T12:00:00+00:00", zone="Asia/Tokyo", airflow_2=False)
    assert three == (
        '<time datetime="2026-11-30T12:00:00+00:00" title="2026-11-30 12:00:00 UTC">2026-11-30 21:00:00</time>'
    )
    two = time_element("2026-11-30T12:00:00", zone="America/New_York", airflow_2=True)  # no zone: UTC
    assert two.endswith(">2026-11-30, 07:00:00</time>")
    assert time_element("2026-11-30T12:00:00+00:00", zone="Not/AZone", airflow_2=False).endswith(
        ">2026-11-30 12:00:00</time>"
    )
    assert time_element("next week", zone="UTC", airflow_2=False) is None
    shown = page(TRY_1, zone="Asia/Tokyo")
    assert '<td class=as-of><time datetime="2026-11-30T12:00:00+00:00"' in shown
    assert 'data-ui="3" data-zone="Asia/Tokyo"' in shown
    assert f'data-zone="{HOSTILE.replace("<", "&lt;").replace(">", "&gt;")}"' in page(TRY_1, zone=HOSTILE)


@pytest.mark.parametrize("written", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Etc/GMT+12"])
def test_a_time_at_the_calendars_edge_is_shown_as_written_not_a_failed_page(written, zone):
    assert time_element(written, zone=zone, airflow_2=False) is None
    shown = page({**TRY_1, "written_at": written}, zone=zone)
    assert f"<td class=as-of>{written}</td>" in shown


def test_the_page_has_the_colours_of_both_modes_of_the_ui_and_a_script_that_follows_the_ui():
    for mode, selector in (("light", ":root {"), ("dark", ":root.dark {")):
        block = STYLE.split(selector, 1)[1].split("}", 1)[0]
        for name, value in COLOURS[mode].items():
            assert f"--{name}: {value};" in block
        assert f"color-scheme: {mode};" in block
    shown = page(TRY_1, airflow_2=True)
    assert 'data-ui="2"' in shown
    for kept_by_the_ui in ('"darkTheme"', '"selected-timezone"', '"theme"', '"timezone"', "prefers-color-scheme"):
        assert kept_by_the_ui in shown


def test_the_steps_table_shows_each_thing_once():
    view = {
        "dag_id": "d",
        "run_id": "r",
        "task_id": "t",
        "map_index": -1,
        "tries": [],
        "journal": [
            {
                "run": "1",
                "steps": [
                    {
                        "key": "1.2",
                        "position": 2,
                        "kind": "tool",
                        "name": "ask",
                        "state": "recorded",
                        "size": 9,
                        "tokens": None,
                        "runs": [
                            {
                                "run": "1.2.1",
                                "steps": [
                                    {
                                        "key": "1.2.1.1",
                                        "position": 1,
                                        "kind": "model",
                                        "name": "m",
                                        "state": "recorded",
                                        "size": 9,
                                        "tokens": 15,
                                        "runs": [],
                                    }
                                ],
                            }
                        ],
                    },
                ],
            }
        ],
    }
    shown = render_page(view)
    header = re.search(r"<table id=journal><tr>(.*?)</tr>", shown).group(1)
    assert re.findall(r"<th>([^<]*)</th>", header) == [
        "Key",
        "Kind",
        "Name",
        "State",
        "Size (bytes)",
        "Tokens",
        "Found in flight",
    ]
    assert re.findall(r'<tr class="step" data-key="([^"]*)" data-depth="(\d)">', shown) == [
        ("1.2", "0"),
        ("1.2.1.1", "1"),
    ]


def test_amounts_past_any_float_show_as_unreadable_not_as_a_server_error():
    huge = summary("failed", [step("1.1", "live", tokens=10**400, cost=10**400)], usage(tokens=10**400, cost=10**400))
    shown = page(huge, {**huge, "budget": {**BUDGET, "spent": {"cost_usd": 10**400}}})
    assert f"spent {10**400} tokens, (cannot be read)" in shown
    assert f"<td class=spent>{10**400 * 2} tokens, $0</td>" in shown  # the total of all tries
    assert "usage.cost_usd, steps[0].cost_usd" in shown  # named as what this release cannot read


def test_each_step_without_a_result_says_why_in_its_mark_and_under_its_lane_escaped():
    refused = "Durable: the request to model 'gpt-4.1' at 1.2 was not sent: it would pass max_requests=1"
    shown = page(
        summary(
            "failed",
            [
                step("1.1", "failed", kind="tool", name=HOSTILE) | {"reason": f"it raised {HOSTILE}"},
                step("1.2", "unfinished") | {"reason": refused},
                step("1.3", "live", kind="tool", name="pay"),
            ],
            usage(tokens=0, cost=0.0),
        )
    )
    failed = f"1.1 tool {HOSTILE}: failed (runs again): it raised {HOSTILE}"
    unfinished = f"1.2 model gpt-4.1: no result (in flight or waiting): {refused}"
    titles = [title for *_, title in marks(shown)]
    assert titles == [html.escape(failed), html.escape(unfinished), "1.3 tool pay: ran live"]
    reasons = re.findall(r'<ul class=reasons data-try="1"[^>]*>(.*?)</ul>', shown)
    assert reasons == [
        f'<li data-key="1.1">{html.escape(failed)}</li><li data-key="1.2">{html.escape(unfinished)}</li>'
    ]
    assert HOSTILE not in shown


def test_a_try_whose_steps_all_have_results_lists_no_reasons():
    assert "class=reasons" not in page(TRY_2)


def test_counts_of_one_read_in_the_singular():
    shown = page(
        summary(
            "failed",
            [step("1.1", "live", tokens=1, cost=0.0)],
            usage(tokens=1, cost=0.0) | {"saved": {"requests": 1, "tokens": 1, "cost_usd": 0.0}},
            steps_not_listed=1,
        )
    )
    assert "and 1 more step, not listed" in shown
    assert re.findall(r"<td class=spent>(.*?)</td>", shown) == ["1 token, $0 (1 request)"]
    assert re.findall(r"<td class=saved>(.*?)</td>", shown) == ["1 token, $0 (1 request replayed)"]
    assert "spent 1 token, $0<br>saved 1 token, $0" in shown
