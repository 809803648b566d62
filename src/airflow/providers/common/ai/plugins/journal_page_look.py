"""
How the journal page looks as part of Airflow's UI: its colours in the UI's light and dark modes,
and its times in the UI's timezone and format.

The page is served from the UI's own origin (the api-server on 3.x, the webserver on 2.11), so a
small script in its head reads what the UI keeps in the browser, as the UI itself does:

- Airflow 3.2 and 3.3 (React and Chakra UI, next-themes): the colour mode is the ``dark`` or
  ``light`` class on the UI's ``<html>`` (the page is in an iframe of it), kept in localStorage
  ``theme`` (``light``, ``dark`` or ``system``, the default: the browser's preference). The
  timezone is localStorage ``timezone`` (JSON text), by default the browser's own: 3.x has no
  ``default_ui_timezone`` and does not show times in ``[core] default_timezone``. Times are
  ``YYYY-MM-DD HH:mm:ss``, with the time in UTC as their title.
- Airflow 2.11 (Flask-AppBuilder): the colour mode is localStorage ``darkTheme`` (``true`` for
  dark), the timezone localStorage ``selected-timezone``, by default ``[webserver]
  default_ui_timezone`` (``system``: the server's; empty: ``[core] default_timezone``). Times are
  ``YYYY-MM-DD, HH:mm:ss``.

The server writes each time in the default zone and the page in light colours (unless the
browser prefers dark); the script puts both right before the page is first drawn, and follows
the UI when its colour mode changes.
"""

from __future__ import annotations

import datetime
import html
from typing import Any
from zoneinfo import ZoneInfo

#: The UI's colours (Airflow 3's Chakra theme tokens), for each colour mode, and one per outcome
#: of a step. The names are the page's CSS variables; the tests compare the screenshot's pixels to them.
COLOURS = {
    "light": {
        "bg": "#ffffff",
        "fg": "#161d2d",
        "muted": "#3e5873",
        "border": "#c7cfd8",
        "head": "#edf0f4",
        "problem": "#dc2626",
        "replayed": "#2563eb",
        "live": "#16a34a",
        "failed": "#dc2626",
        "not-recorded": "#d97706",
        "resolved": "#7c3aed",
        "unfinished": "#778ba2",
    },
    "dark": {
        "bg": "#161d2d",
        "fg": "#f8fafd",
        "muted": "#a3afbe",
        "border": "#293c51",
        "head": "#07121e",
        "problem": "#f87171",
        "replayed": "#60a5fa",
        "live": "#4ade80",
        "failed": "#f87171",
        "not-recorded": "#fcd34d",
        "resolved": "#a78bfa",
        "unfinished": "#a3afbe",
    },
}


def _variables(mode: str) -> str:
    return " ".join(f"--{name}: {value};" for name, value in COLOURS[mode].items())


STYLE = f"""
:root {{ {_variables("light")} color-scheme: light; }}
:root.dark {{ {_variables("dark")} color-scheme: dark; }}
body {{ font-family: system-ui, sans-serif; font-size: 14px; margin: 12px; color: var(--fg); background: var(--bg); }}
table {{ border-collapse: collapse; margin-bottom: 16px; }}
th, td {{ border: 1px solid var(--border); padding: 3px 8px; text-align: left; vertical-align: top; }}
th {{ background: var(--head); }}
td.number {{ text-align: right; font-variant-numeric: tabular-nums; }}
ul {{ margin: 0; padding-left: 18px; }}
.empty, .note {{ color: var(--muted); }}
.problem {{ color: var(--problem); }}
.sr {{ position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }}
"""

#: Reads the UI's colour mode and timezone (see the module's docstring) and applies them.
_SCRIPT = """
(function () {
  var root = document.documentElement, airflow2 = root.dataset.ui === "2";
  function stored(key) { try { return localStorage.getItem(key); } catch (e) { return null; } }
  function ui() { try { return window.parent !== window ? window.parent.document.documentElement : null; } catch (e) { return null; } }
  function isDark() {
    if (airflow2) return stored("darkTheme") === "true";
    var page = ui();
    if (page && /\\b(dark|light)\\b/.test(page.className)) return page.classList.contains("dark");
    var theme = stored("theme") || "system";
    return theme === "dark" || (theme === "system" && matchMedia("(prefers-color-scheme: dark)").matches);
  }
  function followTheme() { root.classList.toggle("dark", isDark()); }
  function zone() {
    if (airflow2) return stored("selected-timezone") || root.dataset.zone;
    try { return JSON.parse(stored("timezone")) || Intl.DateTimeFormat().resolvedOptions().timeZone; }
    catch (e) { return Intl.DateTimeFormat().resolvedOptions().timeZone; }
  }
  function shown(moment, timeZone) {
    var part = {};
    new Intl.DateTimeFormat("en-US", {timeZone: timeZone, hourCycle: "h23", year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit"}).formatToParts(moment)
      .forEach(function (p) { part[p.type] = p.value; });
    return part.year + "-" + part.month + "-" + part.day + (airflow2 ? ", " : " ") +
      part.hour + ":" + part.minute + ":" + part.second;
  }
  function followTimezone() {
    var timeZone = zone();
    try { shown(new Date(), timeZone); } catch (e) { timeZone = root.dataset.zone; }
    root.dataset.shownZone = timeZone;
    document.querySelectorAll("time[datetime]").forEach(function (time) {
      var moment = new Date(time.getAttribute("datetime"));
      if (!isNaN(moment)) time.textContent = shown(moment, timeZone);
    });
  }
  followTheme();
  var page = ui();
  if (page && window.MutationObserver) new MutationObserver(followTheme).observe(page, {attributes: true, attributeFilter: ["class"]});
  window.addEventListener("storage", function () { followTheme(); followTimezone(); });
  document.addEventListener("DOMContentLoaded", followTimezone);
})();
"""


def head(title: str, *, zone: str, airflow_2: bool, style: str = "") -> str:
    """
    The page's ``<html>`` and ``<head>``: its colours and ``style``, and the script that follows
    the UI's theme and timezone.
    """
    return (
        f'<!doctype html><html data-ui="{2 if airflow_2 else 3}" data-zone="{html.escape(zone)}"><head>'
        f"<meta charset=utf-8><title>{html.escape(title)}</title><style>{STYLE}{style}</style>"
        f"<script>{_SCRIPT}</script></head>"
    )


def time_element(text: Any, *, zone: str, airflow_2: bool) -> str | None:
    """
    A moment given as ISO text, as the UI shows times: in ``zone`` (the script puts it in the
    user's), with the moment in UTC as its title; ``None`` for a text that names no moment, or one
    that UTC or ``zone`` puts outside the calendar (``0001-01-01T00:00:00+14:00``).
    """
    try:
        moment = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        moment = None
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    try:
        utc = moment.astimezone(datetime.timezone.utc)
        local = moment.astimezone(zone_info(zone))
    except OverflowError:
        return None
    shown = local.strftime("%Y-%m-%d, %H:%M:%S" if airflow_2 else "%Y-%m-%d %H:%M:%S")
    return f'<time datetime="{utc.isoformat()}" title="{utc:%Y-%m-%d %H:%M:%S} UTC">{shown}</time>'


def zone_info(zone: str) -> datetime.tzinfo:
    """The timezone ``zone`` names; UTC for a name it is not."""
    try:
        return ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        return datetime.timezone.utc
