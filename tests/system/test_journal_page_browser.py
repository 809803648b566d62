"""
The journal page in a real browser: headless Chromium (Debian's ``chromium``, driven by Selenium
through Debian's ``chromium-driver``) opens the Airflow UI of a real api-server, goes to the
"Agent journal" tab of task instances that ran under a real scheduler, and reads what the page
shows inside the UI's iframe. Takes the screenshots the docs show.

Run with: AIRFLOW_LINE=3.3-prod (or 3.2-prod) bash scripts/test.sh tests/system/test_journal_page_browser.py
after ``apt-get install -y chromium chromium-driver``; UPDATE_SCREENSHOTS=1 writes the docs'
screenshots (docs/img/journal_page*.png), REQUIRE_BROWSER=1 (CI) fails instead of skipping
when the browser or Selenium is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
from test_journal_page import DAG_ID, finished_run  # noqa: F401 - the module's fixture

#: CI sets it: a missing browser or Selenium is then an error, not a skip.
REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
#: Where the screenshots go: the docs' with UPDATE_SCREENSHOTS=1, else a temporary folder.
SCREENSHOTS = Path(__file__).parents[2] / "docs" / "img" if os.environ.get("UPDATE_SCREENSHOTS") == "1" else None

if not REQUIRED:
    pytest.importorskip(
        "selenium.webdriver", reason="needs Selenium: AIRFLOW_LINE=3.3-prod (constraints/packages-3.3-prod.txt)"
    )
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

if not REQUIRED and not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(
        "needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver",
        allow_module_level=True,
    )


@pytest.fixture
def screenshots(tmp_path) -> Path:
    return SCREENSHOTS or tmp_path


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def open_journal_tab(browser, finished_run, task_id: str):  # noqa: F811
    services, run_id, _ = finished_run
    browser.get(f"{services.url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{task_id}/plugin/agent_journal")
    wait = WebDriverWait(browser, 60)
    frame = wait.until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='Agent journal']"))
    )
    browser.switch_to.frame(frame)
    wait.until(expected_conditions.presence_of_element_located((By.ID, "tries")))
    return browser


def cells(browser, selector: str) -> list[list[str]]:
    return [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in browser.find_elements(By.CSS_SELECTOR, selector)
    ]


def test_the_tab_of_a_task_that_failed_for_good_shows_its_journal_with_the_nested_run(
    browser,
    finished_run,  # noqa: F811 - the fixture imported above
    screenshots,
):
    page = open_journal_tab(browser, finished_run, "kept")
    try:
        steps = cells(page, "#journal tr.step")
        assert [row[1:6] for row in steps] == [
            ["1.1", "1", "model", "gpt-4.1-mini", "recorded"],
            ["1.2", "2", "tool", "ask_expert", "recorded"],
            ["1.2.1.1", "1", "model", "gpt-4.1-nano", "recorded"],
            ["1.3", "3", "model", "gpt-4.1-mini", "recorded"],
            ["2.1", "1", "model", "gpt-4.1", "recorded"],
        ]
        assert [row[7] for row in steps] == ["15", "", "15", "15", "15"]
        [try_1] = cells(page, "#tries tr.try")
        assert try_1[:2] == ["1", "failed"]
        assert try_1[4] == "5 (model 4, tool 1)"
    finally:
        page.switch_to.default_content()
    browser.save_screenshot(str(screenshots / "journal_page.png"))


def test_the_tab_of_a_task_that_replayed_shows_what_each_try_did_after_its_journal_is_gone(
    browser,
    finished_run,  # noqa: F811 - the fixture imported above
    screenshots,
):
    page = open_journal_tab(browser, finished_run, "replayed")
    try:
        assert "No journal" in page.find_element(By.ID, "journal").text
        try_1, try_2 = cells(page, "#tries tr.try")
        assert try_1[:2] == ["1", "failed"]
        assert try_2[:2] == ["2", "success"]
        assert try_2[3] == "3 (model 2, tool 1)"
        assert try_2[4] == "1 (model 1)"
        assert try_2[6] == "15 used in 1 requests; 30 saved in 2 replayed requests"
        assert "model 'gpt-4.1' at 3.1" in try_2[7] and "input item 0 differs" in try_2[7]
    finally:
        page.switch_to.default_content()
    browser.save_screenshot(str(screenshots / "journal_page_tries.png"))
