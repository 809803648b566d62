"""The journal page's HTML: everything it shows is escaped, whatever the names and ids hold."""

from __future__ import annotations

import datetime
import json

import pytest

from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.plugins.journal_page import EXTERNAL_VIEWS
from airflow.providers.common.ai.plugins.journal_page_data import map_index_of
from airflow.providers.common.ai.plugins.journal_page_html import render_page

HOSTILE = "<img src=x onerror=alert(1)>"


def view(**changes):
    step = {
        "key": "1.1",
        "position": 1,
        "kind": "tool",
        "name": HOSTILE,
        "state": "recorded",
        "size": 10,
        "tokens": None,
        "runs": [],
    }
    stored = {
        "format": 1,
        "outcome": "failed",
        "written_at": "2026-11-30T12:00:00+00:00",
        "usage": {
            "replayed": {},
            "live": {"tool": 1},
            "not_recorded": {"tool": 1},
            "saved": {"requests": 0, "tokens": 0},
        },
        "divergences": [{"key": "1.1", "step": f"tool {HOSTILE!r} at 1.1", "reason": f"argument '{HOSTILE}' changed"}],
        "not_recorded": [f"tool {HOSTILE!r} at 1.1: the store refused it"],
        "approvals": [],
    }
    [summary] = read_summaries({1: json.dumps(stored)}, now=datetime.datetime.now(tz=datetime.timezone.utc))
    return {
        "dag_id": "d",
        "run_id": "manual__ünïcode/\u202e",
        "task_id": "t",
        "map_index": -1,
        "journal": [{"run": "1", "steps": [step]}],
        "tries": [summary],
        **changes,
    }


def test_names_reasons_and_ids_are_escaped():
    page = render_page(view())
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "manual__ünïcode/" in page


def test_a_summary_that_cannot_be_read_says_so_in_its_row():
    page = render_page(view(tries=[{"try_number": 4, "problem": "this summary cannot be read"}]))
    assert "this summary cannot be read" in page


def test_the_tab_is_on_every_task_instance_and_a_task_that_is_not_mapped_is_map_index_minus_1():
    [tab] = EXTERNAL_VIEWS
    assert (tab["destination"], tab["url_route"]) == ("task_instance", "agent_journal")
    assert "{DAG_ID}" in tab["href"] and "{RUN_ID}" in tab["href"] and "{TASK_ID}" in tab["href"]
    assert [map_index_of(value) for value in ("{MAP_INDEX}", "3", "-1")] == [-1, 3, -1]


def test_a_cache_path_that_cannot_be_read_is_said_on_the_page_not_a_server_error(monkeypatch, tmp_path):
    from airflow.providers.common.ai.plugins import journal_page_data

    monkeypatch.setattr("airflow.providers.common.ai.durable.airflow.journal_access.AIRFLOW_V_3_3_PLUS", False)
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", "nosuchscheme://bucket/journals")
    shown = journal_page_data.journal_of("d", "r", "t", -1)
    assert shown["problem"].startswith("the journal's store could not be read: ")
    assert "store could not be read: " in render_page(shown)


def test_under_the_cache_path_the_page_reads_the_journal_and_the_summaries_of_a_task_instance(monkeypatch, tmp_path):
    from upath import UPath

    from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
    from airflow.providers.common.ai.durable.airflow.summaries import write_summary
    from airflow.providers.common.ai.durable.airflow.summary_stores import ObjectStorageSummaries
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.plugins import journal_page_data

    monkeypatch.setattr("airflow.providers.common.ai.durable.airflow.journal_access.AIRFLOW_V_3_3_PLUS", False)
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{tmp_path}")
    ids = {"dag_id": "d", "run_id": "r/1", "task_id": "t", "map_index": 2}
    journal = DurableJournal(ObjectStorageStorage(UPath(f"file://{tmp_path}"), **ids))
    with journal.run() as run:
        run.claim("tool", "lookup", "asks").record({"value": "x"})
    write_summary(ObjectStorageSummaries(UPath(f"file://{tmp_path}"), **ids), journal, try_number=1, outcome="failed")

    shown = journal_page_data.journal_of("d", "r/1", "t", 2)
    assert [step["name"] for run in shown["journal"] for step in run["steps"]] == ["lookup"]
    assert [summary["outcome"] for summary in shown["tries"]] == ["failed"]
    assert journal_page_data.journal_of("d", "r/1", "t", -1)["journal"] == []  # another map index


def test_on_airflow_3_the_plugin_registers_the_api_server_app_and_tab_and_nothing_of_the_webserver():
    import sys

    from airflow.providers.common.ai.plugins.durable import DurableJournalPlugin
    from airflow.providers.common.ai.plugins.journal_page import FASTAPI_APPS
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

    if not AIRFLOW_V_3_0_PLUS:
        pytest.skip("Airflow 2.11 gets the webserver's view: tests/unit/plugins/test_journal_page_fab.py")
    assert (DurableJournalPlugin.fastapi_apps, DurableJournalPlugin.external_views) == (FASTAPI_APPS, EXTERNAL_VIEWS)
    assert DurableJournalPlugin.appbuilder_views == [] and DurableJournalPlugin.global_operator_extra_links == []
    assert "airflow.providers.common.ai.plugins.journal_page_fab" not in sys.modules


def test_each_call_found_in_flight_shows_in_its_step_row_and_in_its_tries_row_escaped():
    step = {**view()["journal"][0]["steps"][0], "in_flight": f"verify: {HOSTILE}"}
    stored = {
        "format": 1,
        "outcome": "success",
        "written_at": "2026-11-30T12:00:00+00:00",
        "usage": {
            "in_flight": [
                {"step": "1.1", "tool": "refund", "idempotency_key": "durable-k", "policy": "ask", "outcome": HOSTILE}
            ]
        },
    }
    [summary] = read_summaries({2: json.dumps(stored)}, now=datetime.datetime.now(tz=datetime.timezone.utc))
    page = render_page(view(journal=[{"run": "1", "steps": [step]}], tries=[summary]))
    assert HOSTILE not in page
    assert "<td class=in-flight>verify: &lt;img" in page
    assert "<li>refund at 1.1 (key durable-k, ask): &lt;img" in page


@pytest.mark.db
def test_a_dag_airflow_does_not_know_is_what_the_page_names_as_not_found():
    from airflow.providers.common.ai.plugins.journal_page_data import what_is_not_found
    from airflow.providers.common.ai.plugins.journal_page_html import render_not_found

    not_found = what_is_not_found("nowhere", "r", "t")
    assert not_found == "No DAG 'nowhere' is known to Airflow"
    assert "Not found: No DAG &#x27;nowhere&#x27; is known to Airflow." in render_not_found(not_found)
