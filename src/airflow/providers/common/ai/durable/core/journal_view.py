"""
What a stored journal holds, as the journal page shows it: its runs, each run's steps in position
order, and the runs started under a step nested below it.

Read from the entries' texts alone (no agent SDK), and showing only an entry's key, kind, name,
state, size, recorded tokens and, for a call an earlier try left in flight, how it was resolved:
never a recorded result or request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.entries import INDEX_KEY, is_snapshot_key
from airflow.providers.common.ai.durable.core.in_flight import ASKED_META, RESOLUTION_META

#: How deep runs nest on the page; a run under more steps than that shows at the top, by its key.
_MAX_NESTING = 16

#: Each state an entry can hold, as the page names it.
STATE_NAMES = {
    "done": "recorded",
    "in_flight": "in flight",
    "started": "started, never finished",
    "failed": "failed",
    "discarded": "discarded",
    "masked": "held a secret (runs live)",
}


@dataclass
class StepView:
    key: str
    position: int
    kind: str
    name: str
    state: str
    size: int
    tokens: int | None
    #: How a call found in flight was resolved (R-56), or that a person was asked about it.
    in_flight: str | None = None
    runs: list[RunView] = field(default_factory=list)


@dataclass
class RunView:
    path: str
    steps: list[StepView] = field(default_factory=list)


def _number(part: str) -> int:
    """A key's part as a number; -1 for one that is not a plain number a position can be."""
    return int(part) if part.isascii() and part.isdigit() and len(part) < 19 else -1


def key_order(key: str) -> tuple[int, ...]:
    """A step's key as numbers, to sort steps as they ran: ``1.2`` before ``1.2.1.1`` before ``1.3``."""
    return tuple(_number(part) for part in key.split("."))


def _text(value: Any) -> str:
    """A name or kind as the page can show it: a text of at most 200 characters, a lone surrogate written out."""
    if not isinstance(value, str):
        return "?"
    shown = value if len(value) <= 200 else f"{value[:200]}…"
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


def _step(key: str, text: str) -> StepView:
    entry: Any = None
    plain = text
    try:
        from airflow.providers.common.ai.durable.core.encryption import ENCRYPTED_PREFIX, decrypt_text

        plain = decrypt_text(text) if text.startswith(ENCRYPTED_PREFIX) else text
        entry = json.loads(plain)
    except Exception:
        pass
    position = max(_number(key.rsplit(".", 1)[-1]), 0)
    size = len(plain.encode("utf-8", "surrogatepass"))
    if not isinstance(entry, dict):
        return StepView(key, position, "?", "?", "cannot be read", size, None)
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    tokens = meta.get("tokens")
    state = entry.get("state")
    resolution = meta.get(RESOLUTION_META)
    if meta.get(ASKED_META) is True:
        resolution = "a person was asked whether it took effect; no answer recorded yet"
    return StepView(
        key,
        position,
        _text(entry.get("kind")),
        _text(entry.get("name")),
        STATE_NAMES.get(state, _text(state)) if isinstance(state, str) else "cannot be read",
        size,
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        _text(resolution) if resolution is not None else None,
    )


def journal_view(entries: dict[str, str]) -> list[RunView]:
    """The top-level runs of a journal given as its stored entries (key to text), nested runs under their steps."""
    runs: dict[str, RunView] = {}
    steps: dict[str, StepView] = {}
    for key in sorted((key for key in entries if key != INDEX_KEY and not is_snapshot_key(key)), key=key_order):
        if "." not in key:
            continue
        path = key.rsplit(".", 1)[0]
        step = steps[key] = _step(key, entries[key])
        runs.setdefault(path, RunView(path)).steps.append(step)
    top_level = []
    for path, run in runs.items():
        parent = path.rsplit(".", 1)[0] if "." in path else None
        if parent is not None and parent in steps and path.count(".") < 2 * _MAX_NESTING:
            steps[parent].runs.append(run)
        else:
            top_level.append(run)
    return top_level


def as_json(runs: list[RunView]) -> list[dict[str, Any]]:
    """The view as plain JSON, for the page's API."""

    def step(view: StepView) -> dict[str, Any]:
        return {
            "key": _text(view.key),
            "position": view.position,
            "kind": view.kind,
            "name": view.name,
            "state": view.state,
            "size": view.size,
            "tokens": view.tokens,
            "in_flight": view.in_flight,
            "runs": as_json(view.runs),
        }

    return [{"run": _text(run.path), "steps": [step(s) for s in run.steps]} for run in runs]
