"""
The summary of each try of a durable task instance, written as the try ends and kept after the
journal is gone.

What a try did (what replayed, ran live or could not be recorded, the usage and the tokens the
replay saved, the divergences and why), encrypted like the journal's entries, kept for
``[common.ai] try_summary_retention_days`` days beside the journal (:mod:`.summary_stores`): keys
of the task state store on Airflow 3.3+, else objects next to the journal's folder under
``durable_cache_path``, which the documented clean-up removes with the rest of the DAG run's
folder. The journal page reads them (:mod:`.summary_reading`).
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from airflow.providers.common.ai.durable.airflow.summary_stores import SummaryStore
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_view import key_order
from airflow.providers.common.ai.durable.core.masking import masked_text
from airflow.providers.common.ai.durable.core.stats import JournalStats

log = logging.getLogger(__name__)

SUMMARY_FORMAT = 1
#: The most steps a summary lists, and the most items of a list or names of a mapping the page shows of one.
MAX_ITEMS = 200
#: The longest step name a summary keeps: enough to tell a model or tool apart on the page.
_MAX_NAME = 100
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
    :func:`steps_of`) the first ``MAX_ITEMS`` are kept and the number of the others is
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
        "steps": steps[:MAX_ITEMS],
        **({"steps_not_listed": len(steps) - MAX_ITEMS} if len(steps) > MAX_ITEMS else {}),
        **({"budget": stats.budget} if stats.budget is not None else {}),
    }


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
