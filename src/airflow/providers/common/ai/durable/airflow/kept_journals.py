"""
Journals kept after their task instance succeeded (``keep_journal``): a copy of every entry as
stored (encrypted as the journal is), set aside before the journal is deleted, for
``[common.ai] kept_journal_retention_days`` days.

Where: under ``[common.ai] kept_journal_path`` (an ObjectStorage URI) when it is set; else beside
the journal: a key of the task state store with that retention on Airflow 3.3+, or
``<task instance folder>.kept.json`` under ``[common.ai] durable_cache_path``. An object's
retention is in the object: reads ignore it once it expired, and :func:`remove_expired` (the CLI's
``airflow common-ai journal clean-up``) deletes it.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from airflow.providers.common.ai.durable.airflow.journal_access import JournalAccessError, TaskInstanceId
from airflow.providers.common.ai.durable.airflow.object_storage import task_instance_folder
from airflow.providers.common.ai.durable.airflow.task_instance import cache_path_base, configured_cache_path
from airflow.providers.common.ai.durable.airflow.task_state_store_rows import TaskStateStoreRows
from airflow.providers.common.ai.durable.core.encryption import EncryptedStorage
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

log = logging.getLogger(__name__)

#: The task state store key of a kept journal; not under the journal's prefix, so the journal's clean-up leaves it.
KEPT_KEY = "airflow.providers.common.ai.kept-journal"
#: What a kept journal's object name ends with, beside the task instance's folder.
KEPT_SUFFIX = ".kept.json"
KEPT_SCHEMA = "apache-airflow-providers-common-ai/kept-journal"
DEFAULT_RETENTION_DAYS = 30


def keeps_journals() -> bool:
    """``[common.ai] keep_journals``: whether a successful task instance's journal is kept when its runs do not say."""
    from airflow.configuration import conf

    return conf.getboolean("common.ai", "keep_journals", fallback=False)


def retention_days() -> int:
    """``[common.ai] kept_journal_retention_days``; refuses a number of days that is not a whole number above 0."""
    from airflow.configuration import conf

    value = conf.get("common.ai", "kept_journal_retention_days", fallback=str(DEFAULT_RETENTION_DAYS))
    try:
        days = int(value)
    except ValueError:
        days = 0
    if days < 1:
        raise JournalAccessError(
            f"[common.ai] kept_journal_retention_days must be a whole number of days, 1 or more, not {value!r}: "
            f"for example {DEFAULT_RETENTION_DAYS}"
        )
    return days


def _kept_journal_path() -> str:
    from airflow.configuration import conf

    return (conf.get("common.ai", "kept_journal_path", fallback="") or "").strip()


def _object_path(ti: TaskInstanceId) -> tuple[Any, str] | None:
    """The filesystem and path of ``ti``'s kept journal as an object, or ``None`` where it is a task state store key."""
    where = _kept_journal_path() or ("" if AIRFLOW_V_3_3_PLUS else configured_cache_path())
    if not where:
        return None
    base = cache_path_base(where)
    folder = task_instance_folder(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
    return base.fs, f"{str(base.path).rstrip('/')}/{folder}{KEPT_SUFFIX}"


def _kept_row(ti: TaskInstanceId) -> TaskStateStoreRows:
    """The task state store row of ``ti``'s kept journal, read from outside its worker: the one key under :data:`KEPT_KEY`."""
    return TaskStateStoreRows(**ti.as_dict(), prefix=KEPT_KEY)


def _now() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.timezone.utc)


def keep_journal(journal: DurableJournal, task_instance: Any) -> None:
    """
    As ``task_instance`` succeeds, before its journal is deleted: keep a copy of every entry as
    stored, if its runs or ``[common.ai] keep_journals`` ask for it.
    """
    keep = journal.keep_after_success
    if not (keeps_journals() if keep is None else keep):
        return
    ti = TaskInstanceId(task_instance.dag_id, task_instance.run_id, task_instance.task_id, task_instance.map_index)
    journal.settle()
    keys = journal.stored_keys()
    # As stored: an encrypted entry stays encrypted in the copy.
    storage = journal.storage.storage if isinstance(journal.storage, EncryptedStorage) else journal.storage
    texts = dict(zip(keys, storage.read_many(keys), strict=True))
    entries = {key: text for key, text in texts.items() if isinstance(text, str)}
    if not entries:
        log.info("Durable: no journal to keep (nothing recorded, or Airflow cleared it with the task's state)")
        return
    days = retention_days()
    kept_at = _now()
    document = {
        "schema": KEPT_SCHEMA,
        "version": 1,
        "task_instance": ti.as_dict(),
        "kept_at": kept_at.isoformat(),
        "kept_until": (kept_at + datetime.timedelta(days=days)).isoformat(),
        "entries": entries,
    }
    text = json.dumps(document, separators=(",", ":"))
    found = _object_path(ti)
    if found is None:
        accessor = task_instance.get_template_context()["task_state_store"]
        accessor.set(KEPT_KEY, text, retention=datetime.timedelta(days=days))
        where = "the task state store"
    else:
        fs, path = found
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(path, text.encode())
        where = path
    log.info("Durable: journal kept steps=%d where=%s days=%d", len(entries), where, days)


def kept_journal(ti: TaskInstanceId) -> dict[str, Any] | None:
    """The kept journal of ``ti`` (its entries as stored, when it was kept, until when), or ``None``."""
    found = _object_path(ti)
    if found is None:
        text = _kept_row(ti).read("")
    else:
        fs, path = found
        try:
            text = fs.cat_file(path).decode()
        except FileNotFoundError:
            return None
    if not text:
        return None
    document = _read_kept(text)
    if document is None or _expired(document):
        return None
    return document


def _read_kept(text: str) -> dict[str, Any] | None:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("schema") != KEPT_SCHEMA or document.get("version") != 1:
        return None
    entries = document.get("entries")
    if not isinstance(entries, dict) or not all(isinstance(value, str) for value in entries.values()):
        return None
    return document


def _expired(document: dict[str, Any], now: datetime.datetime | None = None) -> bool:
    try:
        until = datetime.datetime.fromisoformat(str(document.get("kept_until")))
    except ValueError:
        return False
    return until <= (now or _now())


def remove_expired(now: datetime.datetime | None = None) -> list[str]:
    """
    Delete the kept journals kept as objects whose retention has passed; return their paths. (The
    task state store drops its own expired keys.)
    """
    where = _kept_journal_path() or configured_cache_path()
    if not where:
        return []
    base = cache_path_base(where)
    root = str(base.path).rstrip("/")
    removed = []
    for path in base.fs.glob(f"{root}/dag_id=*/run_id=*/task_id=*/map_index=*{KEPT_SUFFIX}"):
        try:
            document = _read_kept(base.fs.cat_file(path).decode())
        except FileNotFoundError:
            continue
        if document is not None and _expired(document, now):
            base.fs.rm(path)
            removed.append(str(path))
    return removed


def forget_kept_journal(ti: TaskInstanceId) -> None:
    """Delete the kept journal of ``ti``, wherever it is kept."""
    found = _object_path(ti)
    if found is None:
        _kept_row(ti).delete_all([])
        return
    fs, path = found
    if fs.exists(path):
        fs.rm(path)
