"""
The journal page's actions in a real browser (issue 32): headless Chromium opens the "Agent
journal" tab of a task instance that ran under a real scheduler and kept its journal, downloads
the journal file with the page's link, and forks it at step 2 with the page's form; the
scheduler's next try then replays steps 1..2 and runs step 3 live, and the page names the run the
fork came from.

Run with: REQUIRE_BROWSER=1 AIRFLOW_LINE=3.3-prod bash scripts/test.sh tests/system/test_journal_page_actions_browser.py
(Selenium is in the 3.3-prod venv; Debian's chromium and chromium-driver). On Airflow 3 only: the
UI's users there are the simple auth manager's admins, who may edit; 2.11's form is tested through
its API in test_journal_page_actions.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from test_journal_page_actions import DAG_ID, TASK_ID, kept_run  # noqa: F401 - the module's fixture
from test_journal_page_browser import chromium

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

pytestmark = pytest.mark.skipif(not AIRFLOW_V_3_0_PLUS, reason="the 3.x tab; 2.11's view is tested through its API")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(kept_run, downloads):  # noqa: F811 - the fixture imported above
    driver = chromium()
    # Headless Chromium saves a download only where it is told to.
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    try:
        yield driver
    finally:
        driver.quit()


def open_tab(browser, kept_run):  # noqa: F811
    services, run_id = kept_run[0], kept_run[1]
    browser.get(f"{services.url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{TASK_ID}/plugin/agent_journal")
    wait = WebDriverWait(browser, 60)
    frame = wait.until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='Agent journal']"))
    )
    browser.switch_to.frame(frame)
    wait.until(expected_conditions.presence_of_element_located((By.ID, "tries")))
    return browser


def test_the_download_link_saves_the_journal_file(browser, kept_run, downloads):  # noqa: F811
    page = open_tab(browser, kept_run)
    try:
        page.find_element(By.ID, "download").click()
        deadline = time.monotonic() + 60
        while not (saved := list(downloads.glob("*.journal.json"))) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        page.switch_to.default_content()
    assert saved, list(downloads.iterdir())
    document = json.loads(saved[0].read_text(encoding="utf-8"))
    assert (document["schema"], document["source"]) == ("apache-airflow-providers-common-ai/journal", "kept")
    assert [step["key"] for step in document["steps"]] == ["1.1", "1.2", "1.3"]


def test_the_fork_form_forks_at_step_2_and_the_next_try_replays_1_and_2(browser, kept_run):  # noqa: F811
    services, run_id, _, server, out = kept_run
    page = open_tab(browser, kept_run)
    try:
        Select(page.find_element(By.CSS_SELECTOR, "#fork select[name=step]")).select_by_value("2")
        page.find_element(By.CSS_SELECTOR, "#fork button[type=submit]").click()
        answer = WebDriverWait(page, 60).until(
            lambda p: (e := p.find_element(By.ID, "fork-answer")).get_attribute("data-status") and e
        )
        assert answer.get_attribute("data-status") == "200", answer.text
        assert answer.text.startswith("Forked at step 2: the journal holds steps 1..2")
    finally:
        page.switch_to.default_content()

    instance = services.wait_for_task(DAG_ID, run_id, TASK_ID, try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2)
    assert len(server.requests) == 3  # try 1's two, and step 3 of try 2
    calls = [json.loads(line) for line in Path(out, "kept_tool_calls.jsonl").read_text().splitlines()]
    assert [call["try"] for call in calls] == [1]

    page = open_tab(browser, kept_run)
    try:
        assert f"/ {run_id} / {TASK_ID}" in page.find_element(By.ID, "forked-from").text
        assert "at step 2" in page.find_element(By.ID, "forked-from").text
    finally:
        page.switch_to.default_content()
