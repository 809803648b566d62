"""
A journal as one self-contained JSON file (an export), and the entries a fork keeps.

The file's schema is versioned (:data:`SCHEMA`, :data:`VERSION`) and documented in
``docs/fixtures.rst``::

    {"schema": "apache-airflow-providers-common-ai/journal", "version": 1,
     "task_instance": {"dag_id": ..., "run_id": ..., "task_id": ..., "map_index": -1},
     "source": "journal" | "kept", "exported_at": ISO time, "kept_at": ISO time | null,
     "kept_until": ISO time | null, "forked_from": {...} | null,
     "fingerprint_key": "hmac-sha256:<key id>" | "sha256" | null,
     "steps": [{"key": "1.1", "entry": {...the entry, as recorded...}}, ...],
     "not_decrypted": [{"key": "1.2", "reason": ...}], "not_readable": [{"key": ..., "reason": ...}]}

A step's entry is the journal entry as the journal stored it (secrets masked as they were
recorded), decrypted; an entry no key decrypts is named under ``not_decrypted`` and left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.encryption import ENCRYPTED_PREFIX, UndecryptableTextError, decrypt_text
from airflow.providers.common.ai.durable.core.entries import (
    FORMAT_VERSION,
    INDEX_KEY,
    READABLE_FORMATS,
    is_snapshot_key,
    json_text,
    parsed_entry,
)
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal_view import key_order

#: What a journal file says it is, and the version of its schema this release writes and reads.
SCHEMA = "apache-airflow-providers-common-ai/journal"
VERSION = 1
_READABLE_VERSIONS = frozenset({1})


class JournalFileError(ValueError):
    """A journal file this release cannot use: truncated, of another schema or version, or of another task."""


@dataclass
class JournalFile:
    """A journal file read back: the task instance it came from and its steps, in the order they ran."""

    task_instance: dict[str, Any]
    steps: list[tuple[str, dict[str, Any]]]
    source: str = "journal"
    fingerprint_key: str | None = None
    forked_from: dict[str, Any] | None = None
    not_decrypted: list[dict[str, str]] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)

    def entries(self, up_to: int | None = None) -> dict[str, str]:
        """The stored form of the steps (the first ``up_to`` of them), by key, with an index naming their nested runs."""
        steps = self.steps if up_to is None else self.steps[:up_to]
        texts = {key: json_text(entry) for key, entry in steps}
        parents = sorted({key.rsplit(".", 1)[0].rsplit(".", 1)[0] for key, _ in steps if key.count(".") >= 3})
        index: dict[str, Any] = {"format": FORMAT_VERSION, "kind": "index", "parents": parents}
        if self.forked_from is not None:
            index["forked_from"] = self.forked_from
        texts[INDEX_KEY] = json.dumps(index, separators=(",", ":"))
        return texts


def is_step_key(key: str) -> bool:
    """Whether ``key`` holds a step's entry (not the index, a snapshot or a budget's spending)."""
    return key != INDEX_KEY and not is_snapshot_key(key) and "." in key


def fingerprint_key_of(fingerprint: Any) -> str | None:
    """The key a fingerprint was taken under, as it names it (``hmac-sha256:<key id>``, ``sha256``)."""
    return fingerprint.rpartition(":")[0] or None if isinstance(fingerprint, str) else None


def export_document(
    stored: dict[str, str],
    *,
    task_instance: dict[str, Any],
    source: str,
    exported_at: str,
    kept_at: str | None = None,
    kept_until: str | None = None,
) -> dict[str, Any]:
    """
    The journal file of a journal given as its stored texts by key (encrypted or not): each step
    decrypted with ``[core] fernet_key``; those no key decrypts, or that are no entry, are named.
    """
    steps: list[dict[str, Any]] = []
    not_decrypted: list[dict[str, str]] = []
    not_readable: list[dict[str, str]] = []
    forked_from = None
    for key in sorted(stored, key=key_order):
        if not is_step_key(key) and key != INDEX_KEY:
            continue
        try:
            text = decrypt_text(stored[key]) if stored[key].startswith(ENCRYPTED_PREFIX) else stored[key]
        except UndecryptableTextError as error:
            not_decrypted.append({"key": key, "reason": str(error)})
            continue
        entry, problem = parsed_entry(text)
        if entry is None:
            not_readable.append({"key": key, "reason": problem or "it is empty"})
        elif key == INDEX_KEY:
            forked_from = entry.get("forked_from")
        else:
            steps.append({"key": key, "entry": entry})
    named = (fingerprint_key_of(step["entry"].get("fingerprint")) for step in steps)
    keys = {name for name in named if name is not None}
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "task_instance": task_instance,
        "source": source,
        "exported_at": exported_at,
        "kept_at": kept_at,
        "kept_until": kept_until,
        "forked_from": forked_from if isinstance(forked_from, dict) else None,
        "fingerprint_key": sorted(keys)[0] if len(keys) == 1 else None,
        "steps": steps,
        "not_decrypted": not_decrypted,
        "not_readable": not_readable,
    }


def journal_file_text(document: dict[str, Any]) -> str:
    """A journal file's text as export writes it (the CLI's file, the page's download): JSON, one key a line."""
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def forked_from_of(stored: dict[str, str]) -> dict[str, Any] | None:
    """What the index of a journal given as its stored texts says it was forked from, or ``None``."""
    text = stored.get(INDEX_KEY)
    if not text:
        return None
    try:
        text = decrypt_text(text) if text.startswith(ENCRYPTED_PREFIX) else text
    except UndecryptableTextError:
        return None
    entry, _ = parsed_entry(text)
    forked_from = entry.get("forked_from") if isinstance(entry, dict) else None
    return forked_from if isinstance(forked_from, dict) else None


def read_journal_file(
    text: str, *, name: str = "the file", dag_id: str | None = None, task_id: str | None = None
) -> JournalFile:
    """
    The journal file ``text`` holds. Refuses, with :class:`JournalFileError` naming the fix, a file
    that is not complete JSON, of another schema or version, with a step this release cannot read,
    or (given ``dag_id`` and ``task_id``) of another task.
    """
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise JournalFileError(
            f"{name} is not complete JSON ({error}); it may be truncated: {current_host().wording.export_again}"
        ) from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise JournalFileError(
            f"{name} is not a journal file (its schema is {found!r}, not {SCHEMA!r}): {current_host().wording.export_again}"
        )
    if document.get("version") not in _READABLE_VERSIONS:
        raise JournalFileError(
            f"{name} is a journal file of version {document.get('version')!r}, and this release reads version "
            f"{', '.join(map(str, sorted(_READABLE_VERSIONS)))}: export it with this release"
        )
    task_instance = document.get("task_instance")
    steps = document.get("steps")
    if not isinstance(task_instance, dict) or not isinstance(steps, list):
        raise JournalFileError(
            f"{name} has no task_instance or no steps: it is not whole; {current_host().wording.export_again}"
        )
    for field_name, wanted in (("dag_id", dag_id), ("task_id", task_id)):
        if wanted is not None and task_instance.get(field_name) != wanted:
            raise JournalFileError(
                f"{name} is the journal of {field_name} {task_instance.get(field_name)!r}, not of {wanted!r}: "
                "a journal only replays in the task that recorded it; export that task's journal"
            )
    read: list[tuple[str, dict[str, Any]]] = []
    for position, step in enumerate(steps, start=1):
        key = step.get("key") if isinstance(step, dict) else None
        entry = step.get("entry") if isinstance(step, dict) else None
        if not isinstance(key, str) or not is_step_key(key) or not isinstance(entry, dict):
            raise JournalFileError(
                f"{name}: step {position} has no key or no entry; {current_host().wording.export_again}"
            )
        if entry.get("format") not in READABLE_FORMATS:
            raise JournalFileError(
                f"{name}: step {key} has entry format {entry.get('format')!r}, which this release does not read "
                f"(it reads {', '.join(map(str, sorted(READABLE_FORMATS)))})"
            )
        read.append((key, entry))
    read.sort(key=lambda step: key_order(step[0]))
    not_decrypted = document.get("not_decrypted")
    forked_from = document.get("forked_from")
    return JournalFile(
        task_instance=task_instance,
        steps=read,
        source=str(document.get("source")),
        fingerprint_key=document.get("fingerprint_key") if isinstance(document.get("fingerprint_key"), str) else None,
        forked_from=forked_from if isinstance(forked_from, dict) else None,
        not_decrypted=not_decrypted if isinstance(not_decrypted, list) else [],
        document=document,
    )


def check_fork_point(journal: JournalFile, step: int) -> None:
    """
    Refuse a fork at ``step`` (the number of steps kept, in the order they ran) that is not a step
    of the journal, or that falls inside a run nested under a step: that step would replay whole.
    """
    if not 0 <= step <= len(journal.steps):
        raise JournalFileError(
            f"step {step} is not a step of this journal: fork at a step from 0 to {len(journal.steps)}"
        )
    if step == 0 or step == len(journal.steps):
        return
    kept, following = journal.steps[step - 1][0], journal.steps[step][0]
    for key in (kept, following):
        if key.count(".") >= 3:
            parent = key.rsplit(".", 2)[0]
            if kept.startswith(f"{parent}.") and following.startswith(f"{parent}."):
                before = next(n for n, (k, _) in enumerate(journal.steps) if k == parent)
                after = max(n for n, (k, _) in enumerate(journal.steps, start=1) if k.startswith(f"{parent}."))
                raise JournalFileError(
                    f"step {step} is inside the run nested under step {parent}, which would replay whole: "
                    f"fork at step {before} (before it) or {after} (after its nested runs)"
                )
