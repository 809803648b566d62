"""
Why a call no longer lines up with its recorded entry, in words: what changed.

Next to a call's fingerprint the journal stores a short keyed digest of each part of what the
call asked (:func:`model_call_parts`, :func:`tool_call_parts`): the model, the instructions, each
input item, each settings field, each tool, ... When the fingerprints differ, comparing the parts
names what changed (:func:`what_changed`): "input item 3 of 4 differs", "tool 'refund' was added".
The digests are keyed as fingerprints are, so that a short secret in one part cannot be guessed
from the journal; they only explain, a call is matched by its whole fingerprint.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.providers.common.ai.durable.fingerprint import fingerprint, why_fingerprints_differ
from airflow.providers.common.ai.durable.masking import masked_text

# Enough to tell parts apart in an explanation, small enough for a part per input item.
_DIGEST_LENGTH = 12

#: How a model call's parts are digested: each item of a list, each field of a mapping, each
#: entry of a list of named entries (tools, handoffs); any other part as a whole.
_ITEMS, _FIELDS, _NAMED = "items", "fields", "named"
_MODEL_CALL_SHAPE = {"input": _ITEMS, "settings": _FIELDS, "tools": _NAMED, "handoffs": _NAMED}

#: What each part is called in an explanation.
_LABELS = {
    "model": "the model",
    "instructions": "the instructions",
    "input": "the input",
    "settings": "the model settings",
    "tools": "the tools",
    "output_schema": "the output schema",
    "handoffs": "the handoffs",
    "prompt": "the prompt template",
    "name": "the name",
    "arguments": "the arguments",
    "call_id": "the model's call id",
}
_ENTRY_NOUNS = {"settings": "settings field", "tools": "tool", "handoffs": "handoff", "arguments": "argument"}


def _digest(value: Any) -> str:
    digest = fingerprint(value, what="a part of a call")
    return digest.rpartition(":")[2][:_DIGEST_LENGTH] if digest is not None else ""


def _by_name(named: list[tuple[Any, Any]]) -> dict[str, str]:
    """The digest of each value by its name, masked; a name taken already is told apart by its position."""
    digests: dict[str, str] = {}
    for position, (name, value) in enumerate(named):
        key = masked_text(str(name)) if name is not None else f"#{position}"
        while key in digests:
            key = f"{key}#{position}"
        digests[key] = _digest(value)
    return digests


def _digested(value: Any, shape: str | None) -> Any:
    if shape == _ITEMS and isinstance(value, list):
        return [_digest(item) for item in value]
    if shape == _FIELDS and isinstance(value, dict):
        return _by_name(list(value.items()))
    if shape == _NAMED and isinstance(value, list):
        return _by_name([(entry.get("name") if isinstance(entry, dict) else None, entry) for entry in value])
    return _digest(value)


def model_call_parts(request: dict[str, Any]) -> dict[str, Any]:
    """The part digests of a model call described as ``{"model": ..., "input": [...], ...}``."""
    return {part: _digested(value, _MODEL_CALL_SHAPE.get(part)) for part, value in request.items()}


def tool_call_parts(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    """The part digests of a tool call: its name, each argument (when they are a JSON object), its call id."""
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError, RecursionError):
        parsed = None
    return {
        "name": _digest(name),
        "arguments": _digested(parsed, _FIELDS) if isinstance(parsed, dict) else _digest(arguments),
        "call_id": _digest(call_id),
    }


def _entries_changed(noun: str, recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    changes = [
        f"{noun} {name!r} was added" if name not in recorded else f"{noun} {name!r} changed"
        for name in current
        if recorded.get(name) != current[name]
    ]
    return changes + [f"{noun} {name!r} was removed" for name in recorded if name not in current]


def _items_changed(label: str, recorded: list[Any], current: list[Any]) -> str:
    for index, (was, now) in enumerate(zip(recorded, current, strict=False)):
        if was != now:
            return f"input item {index} differs (counting from 0; the input has {len(current)} items)"
    return f"{label} has {len(current)} items where the recorded call had {len(recorded)}, the first {min(len(current), len(recorded))} the same"


def _part_changed(part: str, recorded: Any, current: Any) -> list[str]:
    label = _LABELS.get(part, f"part {part!r}")
    if isinstance(recorded, list) and isinstance(current, list):
        return [_items_changed(label, recorded, current)]
    if isinstance(recorded, dict) and isinstance(current, dict):
        changes = _entries_changed(_ENTRY_NOUNS.get(part, part), recorded, current)
        return changes or [f"{label} changed"]
    return [f"{label} changed"]


def what_changed(recorded: Any, current: dict[str, Any] | None) -> str | None:
    """
    What differs between a recorded call's part digests and the current call's, in words
    (several changes joined by "; "); ``None`` when either has none (an entry of an older
    format) or when no part differs.
    """
    if not isinstance(recorded, dict) or current is None:
        return None
    parts = [*current, *(part for part in recorded if part not in current)]
    changes = [
        change
        for part in parts
        if recorded.get(part) != current.get(part)
        for change in _part_changed(part, recorded.get(part), current.get(part))
    ]
    return "; ".join(changes) if changes else None


def why_calls_differ(entry: dict[str, Any], fingerprint: str, parts: dict[str, Any] | None) -> str:
    """Why the recorded ``entry`` does not match a call with ``fingerprint`` and ``parts``, naming what changed."""
    recorded = entry.get("fingerprint")
    # Digests under another key cannot be compared: the fingerprints' own reason names the key.
    same_key = isinstance(recorded, str) and recorded.rpartition(":")[0] == fingerprint.rpartition(":")[0]
    changed = what_changed(entry.get("parts"), parts) if same_key else None
    if changed:
        return f"it asks something other than the recorded call: {changed}"
    return why_fingerprints_differ(recorded, fingerprint)
