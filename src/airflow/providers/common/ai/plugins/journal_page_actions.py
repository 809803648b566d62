"""
The journal page's actions, shared by the 3.x api-server app (``journal_page.py``) and 2.11's
view (``journal_page_fab.py``):

- **Download**: the task instance's journal file, the same file ``airflow common-ai journal
  export`` writes (its working journal, else the one kept after success), for any user who may
  read the DAG's task instances. Secrets stay masked as they were recorded.
- **Fork from step N**: the journal file's first N steps become the task instance's journal and
  the task instance is cleared (as ``airflow common-ai journal fork`` does), for users who may
  edit the DAG's task instances; refused (409) while the task instance is running.

The fork is a JSON ``POST`` sent by the page's script: a form of another site cannot send one
(a JSON body needs the browser's cross-origin check), so the UI's session cookie alone does not
let another page fork. On 2.11 the script also sends the webserver's CSRF token.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlencode

from airflow.providers.common.ai.durable.airflow.journal_access import (
    JournalAccessError,
    TaskInstanceId,
    TaskInstanceRunningError,
)
from airflow.providers.common.ai.durable.core.journal_file import JournalFileError, is_step_key, journal_file_text
from airflow.providers.common.ai.durable.core.journal_view import key_order

#: What a fork's answer says the page should show: a status and a message.
_Answer = tuple[int, dict[str, Any]]


def download(ti: TaskInstanceId) -> tuple[int, str, str]:
    """The journal file of ``ti`` as the download gives it: status, text and file name (404: why there is none)."""
    from airflow.providers.common.ai.durable.airflow.journal_commands import export_journal

    try:
        document = export_journal(ti)
    except JournalAccessError as error:
        return 404, json.dumps({"detail": str(error)}), ""
    return 200, journal_file_text(document), file_name(ti)


def file_name(ti: TaskInstanceId) -> str:
    """The download's file name: the task instance's ids, with what a file name should not hold replaced."""
    parts = [ti.dag_id, ti.run_id, ti.task_id] + ([str(ti.map_index)] if ti.map_index >= 0 else [])
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))[:200] + ".journal.json"


def fork(ti: TaskInstanceId, body: Any) -> _Answer:
    """
    Fork the journal file of ``ti`` at the step ``body`` names (``{"step": N}``) into ``ti`` and
    clear it. 400 for a step that is none of the journal's, 404 for a task instance with no
    journal, 409 while it is running.
    """
    from airflow.providers.common.ai.durable.airflow.journal_access import refuse_if_running
    from airflow.providers.common.ai.durable.airflow.journal_commands import export_journal, fork_journal

    step = body.get("step") if isinstance(body, dict) else None
    if isinstance(step, str) and step.strip().isdigit():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool):
        return 400, {"detail": 'give the step to fork from as a whole number: {"step": N}'}
    try:
        refuse_if_running(ti)
        document = export_journal(ti)
        fork_journal(ti, journal_file_text(document), step, name="the task instance's journal file")
    except TaskInstanceRunningError as error:
        return 409, {"detail": str(error)}
    except JournalFileError as error:
        return 400, {"detail": str(error)}
    except JournalAccessError as error:
        return 404, {"detail": str(error)}
    return 200, {
        "message": f"Forked at step {step}: the journal holds steps 1..{step} and the task instance is cleared; "
        f"its next try replays them and runs live from step {step + 1}",
        "step": step,
    }


def step_keys(entries: dict[str, str]) -> list[str]:
    """The keys of the steps in the order a fork counts them (the journal file's, the page's rows)."""
    return sorted((key for key in entries if is_step_key(key)), key=key_order)


def _e(value: Any) -> str:
    import html

    return html.escape("" if value is None else str(value))


def action_urls(prefix: str, dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, str]:
    """The download's and the fork's addresses under ``prefix`` (where the page is served)."""
    query = urlencode({"run_id": run_id, "task_id": task_id, "map_index": map_index})
    base = f"{prefix}/api/journal/{quote(dag_id, safe='')}"
    return {"download": f"{base}/export?{query}", "fork": f"{base}/fork?{query}"}


def render_actions(view: dict[str, Any], *, urls: dict[str, str], can_edit: bool, csrf_token: str | None) -> str:
    """The page's actions: where a fork came from, the download link, and (for an editor) the fork form."""
    parts = []
    origin = view.get("forked_from")
    if origin:
        where = f"{origin.get('dag_id')} / {origin.get('run_id')} / {origin.get('task_id')}"
        parts.append(
            f"<p id=forked-from>Forked from <b>{_e(where)}</b> at step {_e(origin.get('step'))} "
            f"({_e(origin.get('key'))}), {_e(origin.get('forked_at'))}.</p>"
        )
    keys = view.get("fork_steps") or []
    if not keys:
        return "".join(parts)
    kept = view.get("kept")
    source = f" (kept after success, until {_e(kept.get('kept_until'))})" if kept and not view.get("journal") else ""
    parts.append(
        f'<p class=actions><a id=download href="{_e(urls["download"])}" download>Download the journal file</a>'
        f"{source}</p><script>{_DOWNLOAD_SCRIPT}</script>"
    )
    if not can_edit:
        return "".join(parts)
    options = "".join(f'<option value="{n}">{n} (up to {_e(key)})</option>' for n, key in enumerate(keys, start=1))
    parts.append(
        f'<form id=fork data-url="{_e(urls["fork"])}" data-csrf="{_e(csrf_token or "")}">'
        f"<label>Fork from step <select name=step>{options}</select></label> "
        "<button type=submit>Fork and clear</button> <span class=hint>The next try replays steps 1..N and runs "
        "live from N+1.</span></form><p id=fork-answer></p>"
        f"<script>{_FORK_SCRIPT}</script>"
    )
    return "".join(parts)


#: Airflow 3.2 frames the page in a sandbox without ``allow-downloads``, where a download link does
#: nothing: a framed page hands the download to the UI's own document, which is of its origin.
_DOWNLOAD_SCRIPT = """
document.getElementById("download").addEventListener("click", (event) => {
  let outer = null;
  try { outer = window.parent !== window ? window.parent.document : null; } catch (error) { outer = null; }
  if (!outer) return;
  event.preventDefault();
  const link = outer.createElement("a");
  link.href = event.currentTarget.href; link.download = ""; link.style.display = "none";
  outer.body.appendChild(link); link.click(); link.remove();
});
"""

#: Sends the fork as JSON and shows the answer; on success the page shows the journal as forked.
_FORK_SCRIPT = """
document.getElementById("fork").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target, answer = document.getElementById("fork-answer");
  const headers = {"Content-Type": "application/json"};
  if (form.dataset.csrf) headers["X-CSRFToken"] = form.dataset.csrf;
  answer.className = ""; answer.textContent = "Forking...";
  try {
    const response = await fetch(form.dataset.url, {method: "POST", headers, credentials: "same-origin",
      body: JSON.stringify({step: Number(form.elements.step.value)})});
    const said = await response.json().catch(() => ({detail: response.statusText}));
    answer.className = response.ok ? "done" : "problem";
    answer.textContent = response.ok ? said.message : `Refused (${response.status}): ${said.detail}`;
    answer.dataset.status = String(response.status);
  } catch (error) {
    answer.className = "problem"; answer.textContent = `The fork could not be sent: ${error}`;
    answer.dataset.status = "0";
  }
});
"""
