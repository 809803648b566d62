"""
Why a call no longer lines up with its recorded entry, in words: what changed.

Next to a call's fingerprint the journal stores a short keyed digest of each part of what the
call asked (:func:`tool_call_parts`, :class:`ModelCalls`): the model, the instructions, each
input item, each settings field, each tool, ... When the fingerprints differ, comparing the parts
names what changed (:func:`what_changed`): "input item 3 of 4 differs", "tool 'refund' was added".
The digests are keyed as fingerprints are, and taken over the masked form of each part, so that
a short secret in one part cannot be guessed from the journal; they only explain, a call is
matched by its whole fingerprint.

A run's conversation is appended to: each model call's input starts with the input of the call
before it. :class:`ModelCalls` renders, masks and digests each input item once per run, hashes a
call's fingerprint on from where the call before it stopped, and stores with each call only the
digests of the items it added and a digest of the items before them; what a call stores and
computes does not grow with the conversation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow.providers.common.ai.durable.core.fingerprint import (
    FingerprintHasher,
    UnrenderableValueError,
    canonical_json,
    fingerprint,
    fingerprint_of_json,
    rendered_and_masked,
    why_fingerprints_differ,
)
from airflow.providers.common.ai.durable.core.masking import masked, renders_without_a_secret
from airflow.providers.common.ai.durable.core.plural import counted

log = logging.getLogger(__name__)

# Enough to tell parts apart in an explanation, small enough for a part per input item.
_DIGEST_LENGTH = 12

#: How a model call's parts are digested: each field of a mapping, each entry of a list of named
#: entries (tools, handoffs); the input item by item (see ModelCalls); any other part as a whole.
_FIELDS, _NAMED = "fields", "named"
_MODEL_CALL_SHAPE = {"settings": _FIELDS, "tools": _NAMED, "handoffs": _NAMED}

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


def _digest(masked_value: Any) -> str:
    """The part digest of a value whose secrets are masked already (a JSON value)."""
    return _short(fingerprint_of_json(canonical_json(masked_value)))


def _short(fingerprint: str) -> str:
    return fingerprint.rpartition(":")[2][:_DIGEST_LENGTH]


def _by_name(named: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """The digest of each value by its name; a name taken already is told apart by its position."""
    digests: dict[str, str] = {}
    for position, (name, value) in enumerate(named):
        key = str(name) if name is not None else f"#{position}"
        while key in digests:
            key = f"{key}#{position}"
        digests[key] = _digest(value)
    return digests


def _digested(masked_value: Any, shape: str | None) -> Any:
    """The digests of a part whose secrets (names included) are masked already."""
    if shape == _FIELDS and isinstance(masked_value, dict):
        return _by_name(masked_value.items())
    if shape == _NAMED and isinstance(masked_value, list):
        return _by_name((entry.get("name") if isinstance(entry, dict) else None, entry) for entry in masked_value)
    return _digest(masked_value)


def model_call_parts(request: dict[str, Any]) -> dict[str, Any]:
    """The part digests of a model call described as ``{"model": ..., "input": [...], ...}``, as the first of its run."""
    return ModelCalls().fingerprint_and_parts(request, what="a model call")[1] or {}


def tool_call_parts(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    """The part digests of a tool call: its name, each argument (when they are a JSON object), its call id."""
    # Masked once, names and values: each part is then digested as it is.
    [name, asked, call_id], _ = masked([name, _asked(arguments), call_id])
    return _tool_call_digests(name, asked, call_id)


def _asked(arguments: str) -> Any:
    """What a tool call's parts digest of its arguments: each argument when they are a JSON object, else the text."""
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError, RecursionError):
        parsed = None
    return parsed if isinstance(parsed, dict) else arguments


def _tool_call_digests(name: Any, asked: Any, call_id: Any) -> dict[str, Any]:
    return {"name": _digest(name), "arguments": _digested(asked, _FIELDS), "call_id": _digest(call_id)}


def tool_call_fingerprint_and_parts(name: str, arguments: str, call_id: str, *, what: str) -> tuple[str | None, Any]:
    """
    ``fingerprint({"name": name, "arguments": arguments, "call_id": call_id}, what=what)`` and
    :func:`tool_call_parts` of the same call, their strings checked for secrets at once: where
    none holds one, both are taken as they are; else each is masked on its own.
    """
    call = {"name": name, "arguments": arguments, "call_id": call_id}
    asked = _asked(arguments)
    try:
        if renders_without_a_secret([call, [name, asked, call_id]]):
            return fingerprint_of_json(canonical_json(call)), _tool_call_digests(name, asked, call_id)
    except UnrenderableValueError:
        pass  # fingerprint() says why, below
    return fingerprint(call, what=what), tool_call_parts(name, arguments, call_id)


def _copied(item: Any) -> Any:
    """``copy.deepcopy(item)``, faster where it is made of JSON's own types: dicts and lists copied, the rest shared."""
    kind = type(item)
    if kind is dict:
        return {key: _copied(value) for key, value in item.items()}
    if kind is list:
        return [_copied(value) for value in item]
    if kind in _SHARED:
        return item
    return copy.deepcopy(item)


#: What copy.deepcopy returns as it is.
_SHARED = frozenset({str, int, float, bool, type(None)})


def _prefix_digest(before: str, digest: str) -> str:
    return hashlib.sha256(f"{before}\0{digest}".encode()).hexdigest()[:_DIGEST_LENGTH]


@dataclass(frozen=True)
class InputDigests:
    """
    The digests of a model call's input items: the first ``length`` of ``digests``, and in
    ``prefixes[n]`` a digest of the first ``n`` of them. The call kept the input of the call before
    it up to item ``start``. (The lists are the run's, which only grow: a call reads its own part.)
    """

    digests: list[str]
    prefixes: list[str]
    length: int
    start: int

    def stored(self) -> list[str] | dict[str, Any]:
        """What the entry stores: every digest for a run's first input, else the ones added since the call before."""
        if self.start == 0:
            return self.digests[: self.length]
        return {
            "from": self.start,
            "prefix": self.prefixes[self.start],
            "added": self.digests[self.start : self.length],
        }

    def changed_from(self, recorded: Any) -> str | None:
        """How this input differs from the recorded one (either shape :meth:`stored` writes), or ``None``."""
        current = self.digests[: self.length]
        if isinstance(recorded, list):
            was = recorded
        elif (
            isinstance(recorded, dict)
            and isinstance(recorded.get("from"), int)
            and isinstance(recorded.get("added"), list)
        ):
            start, added = recorded["from"], recorded["added"]
            if not 0 <= start <= self.length or self.prefixes[start] != recorded.get("prefix"):
                # Both calls kept the input of the run's call before them, which lined up (else this
                # call would not be compared): this one kept less of it, up to where it differs.
                if self.start >= start:
                    return f"the input differs before item {start} (counting from 0; the input has {counted(self.length, 'item')})"
                if self.start < self.length:
                    return _item_differs(self.start, self.length)
                return _lengths_differ("the input", start + len(added), self.length)
            was = current[:start] + added
        else:
            return "the input changed"
        return None if was == current else _items_changed("the input", was, current)


class Parts(dict[str, Any]):
    """
    A model call's part digests, with its whole input's digests and the parts of the run's call
    before it (``None`` for the first), of which its entry stores only the parts that changed.
    """

    input_digests: InputDigests | None = None
    before: dict[str, Any] | None = None

    def stored(self) -> dict[str, Any]:
        """
        What the entry stores (format 8): the input, and each other part the call before did not
        have the same; a part the call before had and this one has not, as ``null``.
        """
        if self.before is None:
            return dict(self)
        stored = {
            part: digests for part, digests in self.items() if part == "input" or self.before.get(part) != digests
        }
        return stored | {part: None for part in self.before if part not in self}


def stored_parts(parts: dict[str, Any]) -> dict[str, Any]:
    """What an entry stores of a call's part digests."""
    return parts.stored() if isinstance(parts, Parts) else parts


def parts_in_full(steps: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """
    The part digests of each model call's entry in full, by key, from a journal's entries in the
    order of their positions: a format 8 entry leaves out those its run's model call before it had
    the same (see :meth:`Parts.stored`).
    """
    full: dict[str, dict[str, Any]] = {}
    before: dict[str, dict[str, Any]] = {}  # by run
    for key, entry in steps:
        parts, format_ = entry.get("parts"), entry.get("format")
        if entry.get("kind") != "model" or not isinstance(parts, dict):
            continue
        run = key.rpartition(".")[0]
        if isinstance(format_, int) and format_ >= 8 and run in before:
            parts = before[run] | parts
        before[run] = {part: digests for part, digests in parts.items() if part != "input"}
        full[key] = parts
    return full


class ModelCalls:
    """
    The model calls of one agent run, each fingerprinted and digested part by part as it comes
    (see the module's docstring). A call's fingerprint is :func:`fingerprint` of its request.
    """

    def __init__(self) -> None:
        # The latest call's value of each part but the input (as JSON, to compare), its field of
        # the request's masked JSON, and its digests.
        self._parts: dict[str, tuple[Any, str, Any]] = {}
        # The input items of the latest call (copies, to compare), their masked JSON and digests.
        self._items: list[Any] = []
        self._item_texts: list[str] = []
        self._digests: list[str] = []
        self._prefixes: list[str] = [""]
        # The fingerprint's hash of what comes before the input's items, and of the first
        # ``_hashed_items`` of them.
        self._head = ""
        self._hashed: FingerprintHasher | None = None
        self._hashed_items = 0
        # The parts but the input of the latest call, once there was one.
        self._before: dict[str, Any] | None = None

    def fingerprint_and_parts(self, request: dict[str, Any], *, what: str) -> tuple[str | None, Parts | None]:
        """
        The fingerprint and parts of a model call described as ``{"model": ..., "input": [...], ...}``;
        ``(None, None)``, with a warning, when it has no canonical rendering (it runs live).
        """
        try:
            return self._digested(request)
        except UnrenderableValueError as error:
            log.warning("Durable: cannot fingerprint %s, so it runs live: %s", what, error)
            return None, None

    def _digested(self, request: dict[str, Any]) -> tuple[str, Parts]:
        parts = Parts()
        parts.before = self._before
        fields: dict[str, str] = {}
        for part, value in request.items():
            if part == "input" and isinstance(value, list):
                parts.input_digests = self._input(value)
                parts[part] = parts.input_digests.stored()
            else:
                fields[part], parts[part] = self._part(part, value)
        self._before = {part: digests for part, digests in parts.items() if part != "input"}
        # The request's canonical JSON (keys sorted), its input's items hashed once per run.
        fields = dict(sorted(fields.items()))
        if parts.input_digests is None:
            self._forget_input()
            return fingerprint_of_json("{" + ",".join(fields.values()) + "}"), parts
        head = "{" + "".join(f"{field}," for part, field in fields.items() if part < "input") + '"input":['
        hasher = self._input_hashed(head).copy()
        hasher.update("]" + "".join(f",{field}" for part, field in fields.items() if part > "input") + "}")
        return hasher.fingerprint(), parts

    def _part(self, part: str, value: Any) -> tuple[str, Any]:
        """The field of the request's masked JSON of a part that is not the input, and its digests."""
        latest = self._parts.get(part)
        if latest is None or value != latest[0]:
            plain, text = rendered_and_masked(value)
            loaded = json.loads(plain)
            latest = self._parts[part] = (
                loaded,
                f"{canonical_json(part)}:{text}",
                # Read, never changed: the parsed rendering serves for both when nothing was masked.
                _digested(loaded if text is plain else json.loads(text), _MODEL_CALL_SHAPE.get(part)),
            )
        return latest[1], latest[2]

    def _input(self, items: list[Any]) -> InputDigests:
        """The digests of a call's input items, digesting only those the call before it did not send."""
        start = min(len(items), len(self._items))
        if items[:start] != self._items[:start]:
            # Equal items are taken as unchanged: the SDK builds each turn's input anew from the same run items.
            start = next(index for index in range(start) if items[index] != self._items[index])
        if start < len(self._items):
            # The conversation was rewritten (a handoff's input filter): new lists, a call's own part stays.
            self._forget_input(keep=start)
        for item in items[start:]:
            text = rendered_and_masked(item)[1]
            # A copy that shares the item's strings: the next call's items compare mostly by identity.
            self._items.append(_copied(item))
            self._item_texts.append(text)
            self._digests.append(_short(fingerprint_of_json(text)))
            self._prefixes.append(_prefix_digest(self._prefixes[-1], self._digests[-1]))
        return InputDigests(self._digests, self._prefixes, len(items), start)

    def _forget_input(self, keep: int = 0) -> None:
        self._items, self._item_texts = self._items[:keep], self._item_texts[:keep]
        self._digests, self._prefixes = self._digests[:keep], self._prefixes[: keep + 1]
        self._hashed = None

    def _input_hashed(self, head: str) -> FingerprintHasher:
        """The fingerprint's hash of ``head`` and the latest input's items, on from the latest call's."""
        if self._hashed is None or head != self._head:
            self._head, self._hashed, self._hashed_items = head, FingerprintHasher(), 0
            self._hashed.update(head)
        for index in range(self._hashed_items, len(self._item_texts)):
            self._hashed.update(("," if index else "") + self._item_texts[index])
        self._hashed_items = len(self._item_texts)
        return self._hashed


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
            return _item_differs(index, len(current))
    return _lengths_differ(label, len(recorded), len(current))


def _item_differs(index: int, length: int) -> str:
    return f"input item {index} differs (counting from 0; the input has {counted(length, 'item')})"


def _lengths_differ(label: str, recorded: int, current: int) -> str:
    return f"{label} has {counted(current, 'item')} where the recorded call had {recorded}, the first {min(current, recorded)} the same"


def _part_changed(part: str, recorded: Any, current: Any) -> list[str]:
    label = _LABELS.get(part, f"part {part!r}")
    if isinstance(recorded, list) and isinstance(current, list):
        return [_items_changed(label, recorded, current)]
    if isinstance(recorded, dict) and isinstance(current, dict):
        changes = _entries_changed(_ENTRY_NOUNS.get(part, part), recorded, current)
        return changes or [f"{label} changed"]
    return [f"{label} changed"]


def _recorded_parts(entry: dict[str, Any], current: dict[str, Any] | None, lined_up: bool) -> Any:
    """
    The part digests a recorded entry stands for. A model call's entry of format 8 stores only the
    parts the call before it did not have the same: that call lined up with the current call's
    before, so a part left out is as the current call's before has it. Where the entry does not
    line up, a part left out cannot be compared: it is taken as unchanged.
    """
    recorded = entry.get("parts")
    format_ = entry.get("format")
    before = getattr(current, "before", None)
    if not (isinstance(recorded, dict) and isinstance(format_, int) and format_ >= 8 and before is not None):
        return recorded
    left_out: dict[str, Any] = before if lined_up or current is None else current
    return {part: digests for part, digests in left_out.items() if part != "input"} | recorded


def what_changed(recorded: Any, current: dict[str, Any] | None) -> str | None:
    """
    What differs between a recorded call's part digests and the current call's, in words
    (several changes joined by "; "); ``None`` when either has none (an entry of an older
    format) or when no part differs.
    """
    if not isinstance(recorded, dict) or current is None:
        return None
    input_digests = getattr(current, "input_digests", None)
    changes: list[str] = []
    for part in [*current, *(part for part in recorded if part not in current)]:
        was, now = recorded.get(part), current.get(part)
        if part == "input" and input_digests is not None:
            changes += filter(None, [input_digests.changed_from(was)])
        elif was != now:
            changes += _part_changed(part, was, now)
    return "; ".join(changes) if changes else None


def why_calls_differ(
    entry: dict[str, Any], fingerprint: str, parts: dict[str, Any] | None, *, lined_up: bool = True
) -> str:
    """
    Why the recorded ``entry`` does not match a call with ``fingerprint`` and ``parts``, naming
    what changed; ``lined_up``: the entry follows the same calls as this one (its ``follows``).
    """
    recorded = entry.get("fingerprint")
    # Digests under another key cannot be compared: the fingerprints' own reason names the key.
    same_key = isinstance(recorded, str) and recorded.rpartition(":")[0] == fingerprint.rpartition(":")[0]
    changed = what_changed(_recorded_parts(entry, parts, lined_up), parts) if same_key else None
    if changed:
        return f"it asks something other than the recorded call: {changed}"
    return why_fingerprints_differ(recorded, fingerprint)
