"""
The stored form of a journal entry: its format version, its states, the keys of the index and of
snapshots, and how a recorded entry is read back and written as JSON.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future
from typing import Any

from airflow.providers.common.ai.durable.core.fingerprint import recorded_digest_is, recorded_form

log = logging.getLogger(__name__)

#: The format version every entry carries. A change to the entry's fields is a new version.
#: Format 3 added "parts" (the digests that name what changed); format 4 stores, for a model call
#: after the first of its run, only the digests of the input items it added; format 5 keeps in an
#: in-flight mark when the call started and how a call found in flight was resolved (``meta``).
#: Format 6: a model call's ``meta`` also holds its input and output tokens and, where the model's
#: price is known, its cost in US dollars (what a replay of it saves, R-59).
#: Format 7: an in-flight mark's ``meta`` also names the in-flight policy its tool had (``policy``),
#: so that a call whose run changed and whose tool no longer has its name is resolved as it allowed.
#: Format 8 stores less of the same: a fingerprint's and ``follows``'s first 128 bits, a model
#: call's parts but its input only where the call before it had them otherwise, no ``meta`` when
#: there is none, and a model answer without its usage (a replay reports none, R-7; ``meta``
#: keeps its tokens and cost) or the fields it left empty.
#: Formats 2 to 7 replay as they are: their fingerprints are the ones this release computes.
FORMAT_VERSION = 8
READABLE_FORMATS = frozenset({2, 3, 4, 5, 6, 7, 8})

#: The states of an entry: only a done one replays. A started entry holds a new run's number; an
# in-flight one marks a call that an idempotency key guards; a masked one held a secret.
DONE, IN_FLIGHT, STARTED, FAILED, DISCARDED, MASKED = (
    "done",
    "in_flight",
    "started",
    "failed",
    "discarded",
    "masked",
)
#: The entry naming every step that runs were started under, for clean-up (no run is numbered 0).
INDEX_KEY = "0"
#: What sets a run's snapshot aside: a snapshot of no entries.
NO_SNAPSHOT = json.dumps({"format": FORMAT_VERSION, "kind": "snapshot", "entries": {}}, separators=(",", ":"))


#: A recorded entry as read (``None`` if there is none), or why it could not be read.
Lookup = tuple[dict[str, Any] | None, str | None]


def lookup_of(read: Future[str | None]) -> Lookup:
    """The entry a read found (``None`` if there is none), or why it cannot be read."""
    text, problem = text_of(read)
    return (None, problem) if text is None else parsed_entry(text)


def text_of(read: Future[str | None]) -> tuple[str | None, str | None]:
    """The text a read found (``None`` if there is none), or why the store could not read it."""
    try:
        return read.result(), None
    except Exception as error:
        return None, f"the store could not read it: {error}"


def parsed_entry(text: str) -> Lookup:
    """The entry ``text`` holds, or why it cannot be read."""
    try:
        entry = json.loads(text)
    except (ValueError, RecursionError) as error:
        return None, f"the recorded entry is not JSON: {type(error).__name__}: {str(error)[:200]}"
    if not isinstance(entry, dict):
        return None, "the recorded entry is not a JSON object"
    if entry.get("format") not in READABLE_FORMATS:
        return None, (
            f"the recorded entry has format {entry.get('format')!r} (an earlier release wrote it), "
            f"this release reads formats {', '.join(map(str, sorted(READABLE_FORMATS)))}"
        )
    return entry, None


# Built once: json.dumps with options builds an encoder on each call, and each step writes JSON.
_UTF8_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ASCII_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def json_text(value: Any) -> str:
    """``value`` as compact JSON, kept in UTF-8 but for a lone surrogate, which only loads back escaped."""
    text = _UTF8_JSON.encode(value)
    if text.isascii():  # the common case, known without encoding the text
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        text = _ASCII_JSON.encode(value)
    return text


def snapshot_key(path: str) -> str:
    """The key of the snapshot of the top-level run ``path``: every entry of the run, beside the index."""
    return f"{INDEX_KEY}.{path}"


def is_snapshot_key(key: str) -> bool:
    """Whether ``key`` holds a run's snapshot rather than an entry."""
    return key.startswith(f"{INDEX_KEY}.")


def snapshot_entries_of(read: Future[str | None]) -> dict[int, str]:
    """The entries of the snapshot a read found, by position; none if there is none or it cannot be read."""
    entry, problem = lookup_of(read)
    entries = entry.get("entries") if entry is not None and entry.get("kind") == "snapshot" else None
    if not isinstance(entries, dict) or not all(isinstance(text, str) for text in entries.values()):
        if problem or entry is not None:
            reason = problem or "it holds no entries by position"
            log.info("Durable: the snapshot of a run cannot be read; its entries are read one by one reason=%r", reason)
        return {}
    return {int(position): text for position, text in entries.items() if position.isascii() and position.isdigit()}


def why_another_call(entry: dict[str, Any], kind: str) -> str:
    """Why a recorded call of another kind or name is not this call of ``kind``."""
    if entry.get("kind") == kind:
        return f"the {kind} changed: the recorded call there is {kind} {entry.get('name')!r}"
    return f"the recorded call there is {entry.get('kind')} {entry.get('name')!r}"


def run_starts_with(entry: dict[str, Any] | None, identity: tuple[str, str, str | None, str]) -> bool:
    """
    Whether a recorded run whose first entry is ``entry`` starts with the call ``identity`` names,
    as :meth:`DurableJournal.number_run` compares them: its fingerprint under any key of ``[core] fernet_key``.
    """
    if entry is None:
        return False
    kind, name, fingerprint, follows = identity
    return (
        (entry.get("kind"), entry.get("name")) == (kind, name)
        and recorded_digest_is(entry.get("follows"), follows)
        and recorded_form(entry.get("fingerprint"), fingerprint) is not None
    )
