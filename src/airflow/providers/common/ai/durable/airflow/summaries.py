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
import math
from abc import ABC, abstractmethod
from typing import Any

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_view import key_order
from airflow.providers.common.ai.durable.core.masking import masked_text
from airflow.providers.common.ai.durable.core.stats import JournalStats

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
    from airflow.providers.common.ai.durable.core.approvals import APPROVAL_STEP, Decision

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


#: What became of a step in a try, as its summary lists it: its recorded result was handed out,
#: it ran and its result was recorded, it failed (it runs again next try), it ran but its result
#: could not be recorded (idem), it was found in flight and resolved as done without running (R-56),
#: or it has no result in this try (it was in flight when the try ended, or waits for a person's answer).
STEP_OUTCOMES = ("replayed", "live", "failed", "not_recorded", "resolved", "unfinished")
#: Why an approval step has no result in this try, when nothing else is known.
_WAITING = "waits for a person's answer"


def _why_no_result(journal: DurableJournal, step: Any, outcome: str) -> str | None:
    """Why a step of this try has no recorded result (its failure, a refusal, a cut-off), where known."""
    from airflow.providers.common.ai.durable.core.approvals import APPROVAL_STEP

    if outcome in ("replayed", "live", "resolved"):
        return None
    reason = journal.stats.refusals.get(step.key) or step.no_result
    if reason is None and outcome == "unfinished" and step.kind == APPROVAL_STEP:
        return _WAITING
    return reason


def steps_of(journal: DurableJournal) -> list[dict[str, Any]]:
    """
    Each step this try claimed, in the order of their keys (a nested run's steps under the step
    that started it), with what became of it and, where known, its tokens and cost in USD (for a
    replayed step what it had cost when it ran) and why it has no result (it failed, the budget
    refused it, the try was cut off during it).
    """
    listed = []
    for step in sorted(journal.claimed_steps(), key=lambda step: key_order(step.key)):
        if step.replayed:
            outcome, used, tokens = "replayed", step.meta, step.meta.get("tokens")
        else:
            used, tokens = step.usage, step.tokens
            outcome = step.outcome if step.outcome in STEP_OUTCOMES else "unfinished"
        cost = used.get("cost_usd")
        reason = _why_no_result(journal, step, outcome)
        entry: dict[str, Any] = {
            "key": step.key,
            "kind": masked_text(step.kind),
            "name": masked_text(step.name)[:_MAX_NAME],
            "outcome": outcome,
            # Left out when unknown (a tool call, a price not known), so the page reads no null.
            **({"tokens": tokens} if isinstance(tokens, int) and not isinstance(tokens, bool) else {}),
            **({"cost_usd": cost} if isinstance(cost, (int, float)) and not isinstance(cost, bool) else {}),
            **({"reason": masked_text(reason)} if reason is not None else {}),
        }
        listed.append(entry)
    return listed


def try_summary(
    stats: JournalStats,
    *,
    try_number: int,
    outcome: str,
    now: datetime.datetime,
    days: int,
    approvals: list[dict[str, Any]] | None = None,
    steps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """
    What one try did, as JSON; every free text passed through Airflow's masker. Of ``steps`` (see
    :func:`steps_of`) the first ``_MAX_ITEMS`` are kept and the number of the others is
    ``steps_not_listed``: the page draws the first ones and says how many more there were.
    """
    steps = steps or []
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
        "steps": steps[:_MAX_ITEMS],
        **({"steps_not_listed": len(steps) - _MAX_ITEMS} if len(steps) > _MAX_ITEMS else {}),
        **({"budget": stats.budget} if stats.budget is not None else {}),
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
        from airflow.providers.common.ai.durable.airflow.object_storage import task_instance_folder

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
            number = try_number_of(name.removeprefix("try=").removesuffix(".json"))
            if name.startswith("try=") and name.endswith(".json") and number is not None:
                # Bytes that are not UTF-8 make a summary that cannot be read, not a page that fails.
                summaries[number] = self._fs.cat_file(path).decode(errors="replace")
        return summaries


def try_number_of(text: str) -> int | None:
    """The try number a summary's key or file name ends with, or ``None`` for one no try has."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


def write_summary(store: SummaryStore, journal: DurableJournal, *, try_number: int, outcome: str) -> None:
    """Keep this try's summary for the configured days (none with 0); a failure is logged, never raised."""
    try:
        days = retention_days()
        if days == 0:
            return
        from airflow.providers.common.ai.durable.core.encryption import encrypt_text

        now = datetime.datetime.now(tz=datetime.timezone.utc)
        summary = try_summary(
            journal.stats,
            try_number=try_number,
            outcome=outcome,
            now=now,
            days=days,
            approvals=approvals_of(journal),
            steps=steps_of(journal),
        )
        store.write(try_number, encrypt_text(json.dumps(summary, ensure_ascii=False)), days=days)
    except Exception as error:
        log.warning("Durable: could not keep this try's summary for the journal page reason=%r", str(error))


#: What each field of a summary holds, as this release writes it: the page shows a field only in
#: this shape. ``str`` as a key stands for any name (a model, a kind of step).
#: ``_PRICED`` is an amount, or ``None`` where the price is unknown.
_COUNT, _TEXT, _FLAG, _AMOUNT, _PRICED = "count", "text", "flag", "amount", "priced"
_MODEL_USAGE = {
    "requests": _COUNT,
    "input_tokens": _COUNT,
    "output_tokens": _COUNT,
    "total_tokens": _COUNT,
    "cost_usd": _AMOUNT,
}
#: A budget's limits, what its tries spent and what is left, each as much of these as the budget limits.
_BUDGET_AMOUNTS = {str: _AMOUNT}
_SHAPE: dict[Any, Any] = {
    "format": _COUNT,
    "outcome": _TEXT,
    "written_at": _TEXT,
    "expires_at": _TEXT,
    "usage": {
        **_MODEL_USAGE,
        "models": {str: {**_MODEL_USAGE, "cost_usd": _PRICED}},
        "saved": {"requests": _COUNT, "tokens": _COUNT, "cost_usd": _AMOUNT},
        "unknown_prices": [_TEXT],
        "replayed": {str: _COUNT},
        "live": {str: _COUNT},
        "not_recorded": {str: _COUNT},
        "in_flight": [{"step": _TEXT, "tool": _TEXT, "idempotency_key": _TEXT, "policy": _TEXT, "outcome": _TEXT}],
    },
    "divergences": [{"key": _TEXT, "step": _TEXT, "reason": _TEXT}],
    "not_recorded": [_TEXT],
    "approvals": [{"key": _TEXT, "tools": _TEXT, "decision": _TEXT, "replayed": _FLAG}],
    # Summaries written before a release that listed steps have neither: the page says so.
    "steps": [
        {
            "key": _TEXT,
            "kind": _TEXT,
            "name": _TEXT,
            "outcome": _TEXT,
            "tokens": _COUNT,
            "cost_usd": _AMOUNT,
            "reason": _TEXT,
        }
    ],
    "steps_not_listed": _COUNT,
    "budget": {"first_try": _COUNT, "limits": _BUDGET_AMOUNTS, "spent": _BUDGET_AMOUNTS, "left": _BUDGET_AMOUNTS},
}
#: The longest text and the most items of a list or names of a mapping a summary shows.
_MAX_TEXT, _MAX_ITEMS = 2000, 200
#: The longest step name a summary keeps: enough to tell a model or tool apart on the page.
_MAX_NAME = 100


def read_summaries(texts: dict[int, str], *, now: datetime.datetime) -> list[dict[str, Any]]:
    """
    The summaries of ``texts`` that have not expired, by try number. Each holds the fields this
    release reads; one of another type (another release wrote it, or a hand edited it) is ``None``
    and named in ``"unreadable"``. A summary that cannot be read at all says so under ``"problem"``.
    """
    summaries = []
    for try_number, text in sorted(texts.items()):
        value = _readable(text)
        if value is None:
            summaries.append({"try_number": try_number, "problem": "this summary cannot be read"})
            continue
        unreadable: list[str] = []
        summary = {"try_number": try_number, **_in_shape(value, _SHAPE, "", unreadable), "unreadable": unreadable}
        expires = _moment(summary["expires_at"])
        if expires is None and summary["expires_at"] is not None:
            unreadable.append("expires_at")
        if expires is None or expires > now:
            summaries.append(summary)
    return summaries


def _in_shape(value: Any, shape: Any, path: str, unreadable: list[str]) -> Any:
    """
    ``value`` as far as it has ``shape``: a part of another type is ``None``, or left out of its list
    or mapping, and its path goes to ``unreadable``.
    """
    container = list if isinstance(shape, list) else dict if isinstance(shape, dict) else None
    if container is not None and not isinstance(value, container):
        unreadable.append(path)
        return None
    if isinstance(shape, dict) and str not in shape:
        prefix = f"{path}." if path else ""
        return {
            name: _in_shape(value[name], part, f"{prefix}{name}", unreadable) if name in value else None
            for name, part in shape.items()
        }
    if container is not None:
        return _items_in_shape(value, shape, path, unreadable)
    readable = {
        _COUNT: isinstance(value, int) and not isinstance(value, bool),
        _TEXT: isinstance(value, str),
        _FLAG: isinstance(value, bool),
        _AMOUNT: _is_amount(value),
        _PRICED: value is None or _is_amount(value),
    }[shape]
    if not readable:
        unreadable.append(path)
        return None
    return _shown(value) if shape == _TEXT else value


def _is_amount(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # a whole number past any float
        return False


def _items_in_shape(value: list[Any] | dict[str, Any], shape: Any, path: str, unreadable: list[str]) -> Any:
    """The items of a list, or the named items of a mapping, that have their shape: at most ``_MAX_ITEMS``."""
    items: list[tuple[str, str | None, Any]]
    if isinstance(value, list):
        items = [(f"{path}[{index}]", None, item) for index, item in enumerate(value[:_MAX_ITEMS])]
    else:
        items = [(f"{path}.{_shown(name)}", _shown(name), item) for name, item in list(value.items())[:_MAX_ITEMS]]
    if len(value) > _MAX_ITEMS:
        unreadable.append(f"{path} (not shown: {len(value) - _MAX_ITEMS} more)")
    part = shape[0] if isinstance(value, list) else shape[str]
    checked = [(name, _in_shape(item, part, item_path, unreadable)) for item_path, name, item in items]
    if isinstance(value, list):
        return [item for _, item in checked if item is not None]
    return {name: item for name, item in checked if item is not None}


def _shown(text: str) -> str:
    """``text`` as the page can send it: at most ``_MAX_TEXT`` characters, a lone surrogate written out."""
    if len(text) > _MAX_TEXT:
        text = f"{text[:_MAX_TEXT]}… ({len(text) - _MAX_TEXT} more characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _moment(text: str | None) -> datetime.datetime | None:
    """The moment an ISO text names (UTC if it names no zone), or ``None``."""
    try:
        moment = datetime.datetime.fromisoformat(text) if text is not None else None
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.timezone.utc) if moment is not None and moment.tzinfo is None else moment


def _readable(text: str) -> dict[str, Any] | None:
    from airflow.providers.common.ai.durable.core.encryption import ENCRYPTED_PREFIX, decrypt_text

    try:
        plain = decrypt_text(text) if text.startswith(ENCRYPTED_PREFIX) else text
        value = json.loads(plain)
    except Exception:
        return None
    return value if isinstance(value, dict) else None
