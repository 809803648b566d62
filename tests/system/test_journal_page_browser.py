"""
The journal page in a real browser: headless Chromium (Debian's ``chromium``, driven by Selenium
through Debian's ``chromium-driver``) opens the Airflow UI of a real api-server, goes to the
"Agent journal" tab of task instances that ran under a real scheduler, and reads what the page
shows inside the UI's iframe. Takes the screenshots the docs show.

On Airflow 2.11 the same in the form its UI takes: the browser signs in through the webserver's
login form, opens the task instance in the grid, clicks its "Agent journal" extra link and reads
the page it opens; and a user who may not read the DAG, opening the page's address, is sent to
the home page with 2.11's "access denied" message.

Run with: AIRFLOW_LINE=3.3-prod (or 3.2-prod, or 2.11) bash scripts/test.sh tests/system/test_journal_page_browser.py
after ``apt-get install -y chromium chromium-driver``; UPDATE_SCREENSHOTS=1 writes the docs'
screenshots (docs/img/journal_page*.png), REQUIRE_BROWSER=1 (CI) fails instead of skipping
when the browser or Selenium is missing.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import struct
import time
import zlib
from pathlib import Path
from urllib.parse import quote, urlparse
from zoneinfo import ZoneInfo

import pytest
from journal_page_auth import PASSWORD
from test_journal_page import DAG_ID, finished_run, webserver_users  # noqa: F401 - the module's fixtures

from airflow.providers.common.ai.plugins.journal_page_lanes import OUTCOMES
from airflow.providers.common.ai.plugins.journal_page_look import COLOURS
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

#: CI sets it: a missing browser or Selenium is then an error, not a skip.
REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
#: Where the screenshots go: the docs' with UPDATE_SCREENSHOTS=1, else a temporary folder.
SCREENSHOTS = Path(__file__).parents[2] / "docs" / "img" if os.environ.get("UPDATE_SCREENSHOTS") == "1" else None
#: The screenshots of 2.11's page are its own, beside those of the 3.x tab.
SHOT_SUFFIX = "" if AIRFLOW_V_3_0_PLUS else "_airflow_2"

if not REQUIRED:
    pytest.importorskip(
        "selenium.webdriver", reason="needs Selenium: AIRFLOW_LINE=3.3-prod (constraints/packages-3.3-prod.txt)"
    )
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException,
    NoSuchShadowRootException,
    StaleElementReferenceException,
    TimeoutException,
)
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


def chromium():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1500,1000",
        # Pixels as the CSS names them, for the tests that read colours off the screenshot.
        "--force-color-profile=srgb",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))


def sign_in(driver, url: str, username: str) -> None:
    """On 2.11: sign in through the webserver's login form (Flask-AppBuilder's), as a person does."""
    for _attempt in range(3):  # turned down on a busy machine once in a while: a person tries again
        driver.get(f"{url}/login/")
        driver.find_element(By.ID, "username").send_keys(username)
        driver.find_element(By.ID, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        with contextlib.suppress(TimeoutException):
            WebDriverWait(driver, 20).until(lambda page: urlparse(page.current_url).path != "/login/")
            return
        time.sleep(5)
    raise AssertionError(f"{username} could not sign in: {driver.page_source[:500]}")


@pytest.fixture(scope="module")
def browser(finished_run, webserver_users):  # noqa: F811 - the fixtures imported above
    driver = chromium()
    try:
        if not AIRFLOW_V_3_0_PLUS:
            sign_in(driver, finished_run[0].url, "reader")
        yield driver
    finally:
        driver.quit()


def extra_link(name: str):
    """On 2.11, for a wait: the task instance's extra link ``name`` once the grid shows it.

    The grid draws into a shadow root of ``#root`` (2.11 isolates its styles so), which a
    search of the page does not enter."""

    def shown(page):
        try:
            links = page.find_element(By.ID, "root").shadow_root.find_elements(By.CSS_SELECTOR, "a")
            return next((link for link in links if link.text == name and link.is_displayed()), False)
        except (NoSuchElementException, NoSuchShadowRootException, StaleElementReferenceException):
            return False

    return shown


def open_journal_tab(browser, finished_run, task_id: str):  # noqa: F811
    services, run_id, _ = finished_run
    wait = WebDriverWait(browser, 60)
    if not AIRFLOW_V_3_0_PLUS:
        # 2.11: the task instance in the grid, and its "Agent journal" extra link.
        browser.get(f"{services.url}/dags/{DAG_ID}/grid?dag_run_id={quote(run_id, safe='')}&task_id={task_id}")
        wait.until(extra_link("Agent journal")).click()
        wait.until(expected_conditions.presence_of_element_located((By.ID, "tries")))
        return browser
    browser.get(f"{services.url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{task_id}/plugin/agent_journal")
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
        assert [row[:4] for row in steps] == [
            ["1.1", "model", "gpt-4.1-mini", "recorded"],
            ["1.2", "tool", "ask_expert", "recorded"],
            ["1.2.1.1", "model", "gpt-4.1-nano", "recorded"],
            ["1.3", "model", "gpt-4.1-mini", "recorded"],
            ["2.1", "model", "gpt-4.1", "recorded"],
        ]
        assert [row[5] for row in steps] == ["15", "", "15", "15", "15"]
        [try_1] = cells(page, "#tries tr.try")
        assert try_1[:2] == ["1", "failed"]
        assert try_1[4] == "5 (model 4, tool 1)"
    finally:
        page.switch_to.default_content()
    browser.save_screenshot(str(screenshots / f"journal_page{SHOT_SUFFIX}.png"))


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
        assert try_2[6] == "15 tokens, $0.00006 (1 requests)"
        assert try_2[7] == "30 tokens, $0.000024 (2 requests replayed)"
        assert "model 'gpt-4.1' at 3.1" in try_2[8] and "input item 0 differs" in try_2[8]
    finally:
        page.switch_to.default_content()
    browser.save_screenshot(str(screenshots / f"journal_page_tries{SHOT_SUFFIX}.png"))


#: The timezone the tests choose in the UI, as a user does; not the browser's nor the server's (UTC).
CHOSEN_ZONE = "Asia/Tokyo"


def choose_in_the_ui(browser, services, mode: str) -> None:
    """Keep ``mode`` and CHOSEN_ZONE where the UI keeps the colour mode and timezone a user picks."""
    browser.get(f"{services.url}/" if AIRFLOW_V_3_0_PLUS else f"{services.url}/home")
    if AIRFLOW_V_3_0_PLUS:  # next-themes' "theme"; the timezone as JSON text
        kept = {"theme": mode, "timezone": f'"{CHOSEN_ZONE}"'}
    else:
        kept = {"darkTheme": "true" if mode == "dark" else "false", "selected-timezone": CHOSEN_ZONE}
    for key, value in kept.items():
        browser.execute_script("localStorage.setItem(arguments[0], arguments[1])", key, value)


def pixels(png: bytes) -> tuple[int, list[bytes]]:
    """A screenshot's width and rows of RGB(A) bytes: PNG decoded by hand (8-bit RGB or RGBA, as Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        (length,), kind = struct.unpack(">I", png[at : at + 4]), png[at + 4 : at + 8]
        chunks[kind] = chunks.get(kind, b"") + png[at + 8 : at + 8 + length]
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    size = 3 if colour == 2 else 4
    data, stride, rows, previous = zlib.decompress(chunks[b"IDAT"]), width * size, [], bytes(width * size)
    for y in range(height):
        kind, line = data[y * (stride + 1)], bytearray(data[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - size] if x >= size else 0
            up, up_left = previous[x], previous[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - up_left
                nearest = min(
                    (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - up_left), 2, up_left)
                )
                line[x] = (line[x] + nearest[2]) & 255
        rows.append(bytes(line))
        previous = line
    return size, rows


def colour_at(shot: tuple[int, list[bytes]], x: float, y: float) -> str:
    size, rows = shot
    row = rows[round(y)]
    return "#" + row[round(x) * size : round(x) * size + 3].hex()


def is_close(shown: str, expected: str) -> bool:
    return all(abs(int(shown[i : i + 2], 16) - int(expected[i : i + 2], 16)) <= 3 for i in (1, 3, 5))


#: Where on the screen the test reads colours: the page's background (beside its title, where no
#: text is) and the middle of the first mark of each outcome, in the page's own CSS pixels.
WHERE = """
const title = document.querySelector("h2").getBoundingClientRect();
const where = {bg: [title.right - 10, title.top + 2]};
for (const mark of document.querySelectorAll("#lanes .marks .mark")) {
  const box = mark.getBoundingClientRect(), outcome = mark.classList[1];
  where[outcome] = where[outcome] || [box.left + box.width / 2, box.top + box.height / 2];
}
return where;
"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_the_lanes_of_each_try_in_the_ui_theme_and_timezone_as_the_screenshot_shows_them(
    browser,
    finished_run,  # noqa: F811 - the fixture imported above
    screenshots,
    mode,
):
    choose_in_the_ui(browser, finished_run[0], mode)
    page = open_journal_tab(browser, finished_run, "replayed")
    try:
        WebDriverWait(page, 30).until(lambda p: p.execute_script("return document.documentElement.dataset.shownZone"))
        assert page.execute_script("return document.documentElement.classList.contains('dark')") == (mode == "dark")
        assert page.execute_script("return document.documentElement.dataset.shownZone") == CHOSEN_ZONE
        lanes = page.find_elements(By.CSS_SELECTOR, "#lanes .lane")
        assert [(lane.get_attribute("data-try"), lane.get_attribute("data-outcome")) for lane in lanes] == [
            ("1", "failed"),
            ("2", "success"),
        ]
        marks = [
            [mark.get_attribute("class").removeprefix("mark ") for mark in lane.find_elements(By.CSS_SELECTOR, ".mark")]
            for lane in lanes
        ]
        assert marks == [["live"] * 5, ["replayed"] * 3 + ["live"]]
        titles = [mark.get_attribute("title") for mark in lanes[1].find_elements(By.CSS_SELECTOR, ".mark")]
        assert titles[0] == "1.1 model gpt-4.1-mini: replayed (nothing spent), 15 tokens, $0.000012"
        usage = lanes[1].find_element(By.CSS_SELECTOR, ".lane-usage").text
        assert usage == "spent 15 tokens, $0.00006\nsaved 30 tokens, $0.000024"
        assert len(page.find_elements(By.CSS_SELECTOR, "#lanes .legend .mark")) == len(OUTCOMES)
        # Times in the zone chosen in the UI, written as the UI writes them.
        for time in page.find_elements(By.CSS_SELECTOR, "#tries td.as-of time"):
            moment = datetime.datetime.fromisoformat(time.get_attribute("datetime")).astimezone(ZoneInfo(CHOSEN_ZONE))
            assert time.text == moment.strftime("%Y-%m-%d %H:%M:%S" if AIRFLOW_V_3_0_PLUS else "%Y-%m-%d, %H:%M:%S")
        where = page.execute_script(WHERE)
    finally:
        page.switch_to.default_content()
    if AIRFLOW_V_3_0_PLUS:  # the page is in the UI's iframe: where it is on the screen
        left, top = browser.execute_script(
            "const f = document.querySelector(\"iframe[title='Agent journal']\"), r = f.getBoundingClientRect();"
            "return [r.left + f.clientLeft, r.top + f.clientTop];"
        )
    else:
        left, top = 0, 0
    png = browser.get_screenshot_as_png()
    (screenshots / f"journal_page_lanes_{mode}{SHOT_SUFFIX}.png").write_bytes(png)
    shot = pixels(png)
    colours = COLOURS[mode]
    for name, (x, y) in where.items():
        shown = colour_at(shot, left + x, top + y)
        assert is_close(shown, colours[name]), f"{name} in {mode} mode is {shown} on the screen, not {colours[name]}"
    assert set(where) == {"bg", "replayed", "live"}


@pytest.mark.skipif(
    AIRFLOW_V_3_0_PLUS,
    reason="on Airflow 3 the UI here runs with the simple auth manager's all-admins; "
    "test_journal_page.py checks the api-server's 403 for a user who may not read the DAG",
)
def test_a_user_who_may_not_read_the_dag_is_sent_away_from_the_page_and_sees_nothing_of_the_journal(
    finished_run,  # noqa: F811 - the fixture imported above
    webserver_users,  # noqa: F811
):
    services, run_id, _ = finished_run
    driver = chromium()
    try:
        sign_in(driver, services.url, "outsider")
        driver.get(f"{services.url}/common-ai/journal/{DAG_ID}?run_id={quote(run_id, safe='')}&task_id=kept")
        WebDriverWait(driver, 60).until(lambda page: urlparse(page.current_url).path == "/home")
        assert "Access is Denied" in driver.find_element(By.TAG_NAME, "body").text
        assert driver.find_elements(By.ID, "journal") == []
        assert "ask_expert" not in driver.page_source
    finally:
        driver.quit()
