"""
The summary of each try of a durable task instance, kept after the journal is gone.

When a try ends, the worker writes what it did (what replayed, ran live or could not be
recorded, the usage and the tokens the replay saved, the divergences and why) beside the
journal, encrypted like the journal's entries, for ``[common.ai] try_summary_retention_days``
days: as keys of the task state store with that retention on Airflow 3.3+, else as objects
next to the journal's folder under ``durable_cache_path`` (``<task instance folder>.summaries/``),
which the documented clean-up removes with the rest of the DAG run's folder. The journal page
reads them.
"""

from __future__ import annotations

import datetime
import json
import logging
from abc import ABC, abstractmethod
from typing import Any

from airflow.providers.common.ai.durable.journal import DurableJournal, JournalStats, masked_text

log = logging.getLogger(__name__)

#: Every summary key in the task state store starts with this (the journal's keys do not).
SUMMARY_KEY_PREFIX = "airflow.providers.common.ai.durable.summary/"
#: The folder of a task instance's summaries is its journal's folder with this suffix.
SUMMARY_FOLDER_SUFFIX = ".summaries"
SUMMARY_FORMAT = 1
DEFAULT_RETENTION_DAYS = 7


def retention_days() -> int:
    """``[common.ai] try_summary_retention_days``: 0 keeps no summaries; refuses a negative or non-number."""
    from airflow.configuration import conf
    from airflow.exceptions import AirflowConfigException

    value = conf.get("common.ai", "try_summary_retention_days", fallback=str(DEFAULT_RETENTION_DAYS))
    try:
        days = int(str(value).strip())
    except ValueError:
        days = -1
    if days < 0:
        raise AirflowConfigException(
            f"[common.ai] try_summary_retention_days must be a whole number of days, 0 or more, not {value!r}: "
            f"for example {DEFAULT_RETENTION_DAYS}"
        )
    return days


#: A try's outcome in its summary. A summary kept while the try runs says "unfinished"; the end of
#: the try replaces it, except where Airflow has already moved on to the next try (a try that
#: fails with retries left can no longer write to its task state store rows on Airflow 3.3).
SUCCESS, FAILED, UNFINISHED = "success", "failed", "unfinished"


def approvals_of(journal: DurableJournal) -> list[dict[str, Any]]:
    """The approval steps this try reached: which tools, and the decision (replayed, given now, or none yet)."""
    from airflow.providers.common.ai.durable.approvals import APPROVAL_STEP, Decision

    approvals = []
    for step in journal.claimed_steps():
        if step.kind != APPROVAL_STEP:
            continue
        recorded = step.result if step.replayed else step.recorded
        try:
            decision = Decision(**recorded).describe() if isinstance(recorded, dict) else "waiting for an answer"
        except TypeError:
            decision = "recorded in a form this release does not read"
        approvals.append(
            {
                "key": step.key,
                "tools": masked_text(step.name),
                "decision": masked_text(decision),
                "replayed": step.replayed,
            }
        )
    return approvals


def try_summary(
    stats: JournalStats,
    *,
    try_number: int,
    outcome: str,
    now: datetime.datetime,
    days: int,
    approvals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What one try did, as JSON; every free text passed through Airflow's masker."""
    return {
        "format": SUMMARY_FORMAT,
        "try_number": try_number,
        "outcome": outcome,
        "written_at": now.isoformat(),
        "expires_at": (now + datetime.timedelta(days=days)).isoformat(),
        "usage": stats.usage().to_dict(),
        "divergences": [
            {"key": key, "step": masked_text(step), "reason": masked_text(reason)}
            for key, step, reason in stats.divergences
        ],
        "not_recorded": [masked_text(what) for what in stats.not_recorded],
        "approvals": approvals or [],
    }


class SummaryStore(ABC):
    """Where the try summaries of one task instance are kept; texts are stored as given."""

    @abstractmethod
    def write(self, try_number: int, text: str, *, days: int) -> None:
        """Store ``text`` as the summary of try ``try_number``, to be kept ``days`` days."""

    @abstractmethod
    def read_all(self) -> dict[int, str]:
        """Every summary stored (expired ones may be among them), by try number."""


class TaskStateStoreSummaries(SummaryStore):
    """Summaries as task state store keys whose retention is the configured days (Airflow 3.3+, in a task)."""

    def __init__(self, accessor: Any) -> None:
        self._accessor = accessor

    def write(self, try_number: int, text: str, *, days: int) -> None:
        self._accessor.set(f"{SUMMARY_KEY_PREFIX}{try_number}", text, retention=datetime.timedelta(days=days))

    def read_all(self) -> dict[int, str]:
        raise NotImplementedError("a task reads no summaries; the journal page reads them from the database")


class ObjectStorageSummaries(SummaryStore):
    """Summaries as ``<task instance folder>.summaries/try=<n>.json`` under ``durable_cache_path``."""

    def __init__(self, base: Any, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> None:
        from airflow.providers.common.ai.durable.object_storage import task_instance_folder

        self._fs = base.fs
        folder = task_instance_folder(dag_id, run_id, task_id, map_index)
        self._folder = f"{str(base.path).rstrip('/')}/{folder}{SUMMARY_FOLDER_SUFFIX}"

    def write(self, try_number: int, text: str, *, days: int) -> None:
        self._fs.makedirs(self._folder, exist_ok=True)
        self._fs.pipe_file(f"{self._folder}/try={try_number}.json", text.encode())

    def read_all(self) -> dict[int, str]:
        try:
            paths = self._fs.ls(self._folder, detail=False)
        except FileNotFoundError:
            return {}
        summaries = {}
        for path in paths:
            name = str(path).rsplit("/", 1)[-1]
            number = name.removeprefix("try=").removesuffix(".json")
            if name.startswith("try=") and name.endswith(".json") and number.isdigit():
                summaries[int(number)] = self._fs.cat_file(path).decode()
        return summaries


def write_summary(store: SummaryStore, journal: DurableJournal, *, try_number: int, outcome: str) -> None:
    """Keep this try's summary for the configured days (none with 0); a failure is logged, never raised."""
    try:
        days = retention_days()
        if days == 0:
            return
        from airflow.providers.common.ai.durable.encryption import encrypt_text

        now = datetime.datetime.now(tz=datetime.timezone.utc)
        summary = try_summary(
            journal.stats, try_number=try_number, outcome=outcome, now=now, days=days, approvals=approvals_of(journal)
        )
        store.write(try_number, encrypt_text(json.dumps(summary, ensure_ascii=False)), days=days)
    except Exception as error:
        log.warning("Durable: could not keep this try's summary for the journal page reason=%r", str(error))


def read_summaries(texts: dict[int, str], *, now: datetime.datetime) -> list[dict[str, Any]]:
    """The summaries of ``texts`` that have not expired, by try number; one that cannot be read says why."""
    summaries = []
    for try_number, text in sorted(texts.items()):
        summary = _readable(text)
        if summary is None:
            summaries.append({"try_number": try_number, "problem": "this summary cannot be read"})
            continue
        expires = summary.get("expires_at")
        try:
            expired = isinstance(expires, str) and datetime.datetime.fromisoformat(expires) <= now
        except ValueError:
            expired = False
        if not expired:
            summaries.append(summary)
    return summaries


def _readable(text: str) -> dict[str, Any] | None:
    from airflow.providers.common.ai.durable.encryption import ENCRYPTED_PREFIX, decrypt_text

    try:
        plain = decrypt_text(text) if text.startswith(ENCRYPTED_PREFIX) else text
        value = json.loads(plain)
    except Exception:
        return None
    return value if isinstance(value, dict) else None
