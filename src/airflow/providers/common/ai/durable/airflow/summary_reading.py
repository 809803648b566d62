"""
The try summaries as the journal page reads them: those whose retention has not passed, each
field in the shape this release writes it (:mod:`.summaries`), or named as one that cannot be
read. Whatever a summary holds (another release wrote it, a hand edited it), the page gets
bounded, escaped-ready values and never an error.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

from airflow.providers.common.ai.durable.airflow.summaries import MAX_ITEMS

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
#: The longest text of a summary the page shows.
_MAX_TEXT = 2000


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
    """The items of a list, or the named items of a mapping, that have their shape: at most ``MAX_ITEMS``."""
    items: list[tuple[str, str | None, Any]]
    if isinstance(value, list):
        items = [(f"{path}[{index}]", None, item) for index, item in enumerate(value[:MAX_ITEMS])]
    else:
        items = [(f"{path}.{_shown(name)}", _shown(name), item) for name, item in list(value.items())[:MAX_ITEMS]]
    if len(value) > MAX_ITEMS:
        unreadable.append(f"{path} (not shown: {len(value) - MAX_ITEMS} more)")
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
