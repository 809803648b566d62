"""Fingerprints of what a journaled call asked: SHA-256 over one canonical JSON rendering."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import hashlib
import json
import logging
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any

log = logging.getLogger(__name__)


class UnrenderableValueError(TypeError):
    """A value has no rendering that is the same in every process."""


def _canonical(value: Any) -> Any:
    # Called by json.dumps for anything it cannot render itself; what it returns is rendered again.
    if isinstance(value, (set, frozenset)):
        return sorted(canonical_json(item) for item in value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, (Decimal, uuid.UUID, PurePath)):
        return str(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Field by field, not dataclasses.asdict: asdict deep-copies every nested value first.
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    raise UnrenderableValueError(f"{type(value).__qualname__} has no canonical JSON rendering")


def canonical_json(value: Any) -> str:
    """
    Render ``value`` as JSON that is identical in every process for equal values.

    Keys are sorted, sets are ordered by their items' renderings, tuples render as lists, and
    enums, dates, bytes, pydantic models and dataclasses by their values. Anything else (a function,
    an object whose only rendering is its address) raises :class:`UnrenderableValueError`.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_canonical)
    except UnrenderableValueError:
        raise
    except (TypeError, ValueError, RecursionError) as error:
        # json raises TypeError for mixed key types under sort_keys and ValueError for cycles.
        raise UnrenderableValueError(str(error)) from error


def fingerprint(value: Any, *, what: str = "a call") -> str | None:
    """
    Return the SHA-256 hex digest of ``value``'s canonical JSON, or ``None`` with a warning.

    A call without a fingerprint cannot be matched against a recorded one, so it runs live; it
    never fails the task.
    """
    try:
        rendered = canonical_json(value)
    except UnrenderableValueError as error:
        log.warning("Durable: cannot fingerprint %s, so it runs live: %s", what, error)
        return None
    return hashlib.sha256(rendered.encode()).hexdigest()
