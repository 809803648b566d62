"""
A function tool's return value as JSON, and back, so that a replay hands the SDK the same value.

The SDK shows the model structured content for its ToolOutputText/Image/FileContent and
``str(value)`` for most other values, but hooks and ``stop_on_first_tool`` see the value itself,
so a replay must return an equal value of the same type. What is stored:

* A tool with a declared output type (``function_tool(..., output_type=Invoice)``):
  ``{"declared": ...}``, the value as that type dumps it in JSON mode; replayed by validating it
  with that type. An output that does not come back equal is not recorded.
* Otherwise ``{"value": ...}``: None, bool, int, str, finite floats and lists as JSON has them;
  tuples, dicts (any keys), sets, frozensets, bytes, bytearrays, Decimals, non-finite floats,
  dates, times and datetimes (naive or at a fixed offset), timedeltas, UUIDs and the SDK's tool
  outputs as one-key objects whose key names the type in a fixed table. Types are matched exactly:
  a subclass (an IntEnum, a Counter, a namedtuple, a str subclass) is not taken for its base.
* Anything else raises :class:`ToolOutputNotRecordable`, and so does text that is not valid
  Unicode (a lone surrogate) or JSON nested deeper than 200 levels: the step runs live next try.

Nothing is rebuilt by importing a name from the journal: a type comes from the tool's own
declaration or from the table here. Earlier releases stored ``{"text": ...}``, the text the model
saw, for values outside the table; such an entry replays as that text.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from agents import ToolOutputFileContent, ToolOutputImage, ToolOutputText
from pydantic import BaseModel

_MAX_NESTING = 200

_TOOL_OUTPUTS: dict[str, type[BaseModel]] = {
    "text": ToolOutputText,
    "image": ToolOutputImage,
    "file": ToolOutputFileContent,
}
_COLLECTIONS: dict[str, type] = {"tuple": tuple, "set": set, "frozenset": frozenset}
# tag: (type, its JSON form, the value back from that form)
_SCALARS: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {
    "float": (float, repr, float),  # only nan, inf and -inf, which JSON has no number for
    "decimal": (decimal.Decimal, str, decimal.Decimal),
    "bytes": (bytes, lambda b: base64.b64encode(b).decode(), lambda s: base64.b64decode(s, validate=True)),
    "bytearray": (
        bytearray,
        lambda b: base64.b64encode(b).decode(),
        lambda s: bytearray(base64.b64decode(s, validate=True)),
    ),
    "datetime": (datetime.datetime, datetime.datetime.isoformat, datetime.datetime.fromisoformat),
    "date": (datetime.date, datetime.date.isoformat, datetime.date.fromisoformat),
    "time": (datetime.time, datetime.time.isoformat, datetime.time.fromisoformat),
    "timedelta": (datetime.timedelta, lambda d: [d.days, d.seconds, d.microseconds], lambda v: datetime.timedelta(*v)),
    "uuid": (uuid.UUID, str, uuid.UUID),
}
_SCALAR_TAGS = {kind: tag for tag, (kind, _, _) in _SCALARS.items()}


class ToolOutputNotRecordable(Exception):
    """A tool's output cannot be recorded so that a replay returns the same value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        #: Why, and what the tool's author can do about it, in one sentence.
        self.reason = reason


class _NotRebuildable(TypeError):
    def __init__(self, value: Any) -> None:
        self.value = value


def _encode(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, str) or (kind is float and math.isfinite(value)):
        return value
    if kind is list:
        return [_encode(item) for item in value]
    # Every other value is a one-key object, so none can be mistaken for another.
    if kind is dict:
        return {"dict": [[_encode(key), _encode(item)] for key, item in value.items()]}
    if kind in _COLLECTIONS.values():
        return {kind.__name__: [_encode(item) for item in value]}
    if kind in _SCALAR_TAGS:
        if isinstance(value, (datetime.datetime, datetime.time)) and not _has_fixed_offset(value):
            raise ToolOutputNotRecordable(
                f"its output holds a {kind.__name__} in time zone {value.tzinfo}, which a replay could only rebuild "
                "at a fixed UTC offset; return it with a datetime.timezone offset"
            )
        tag = _SCALAR_TAGS[kind]
        return {tag: _SCALARS[tag][1](value)}
    if kind in _TOOL_OUTPUTS.values():
        return {"tool_output": value.model_dump(mode="json", exclude_unset=True) | {"type": value.type}}
    raise _NotRebuildable(value)


def _has_fixed_offset(value: datetime.datetime | datetime.time) -> bool:
    return value.tzinfo is None or type(value.tzinfo) is datetime.timezone


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    ((tag, inner),) = value.items()
    if tag == "dict":
        return {_decode(key): _decode(item) for key, item in inner}
    if tag in _COLLECTIONS:
        return _COLLECTIONS[tag](_decode(item) for item in inner)
    if tag in _SCALARS:
        return _SCALARS[tag][2](inner)
    if tag == "tool_output":
        return _TOOL_OUTPUTS[inner["type"]].model_validate(inner)
    raise ValueError(f"unknown recorded value {tag!r}")


def _levels(value: Any) -> Iterator[list[Any]]:
    """
    The values inside a JSON value (dict keys included), level by level from ``[value]``, without
    recursion. Not value by value, with its depth: a generator step per value of a large output cost seconds.
    """
    level = [value]
    while level:
        yield level
        deeper: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                deeper.extend(item)
                deeper.extend(item.values())
            elif isinstance(item, list):
                deeper.extend(item)
        level = deeper


def _is_deeper_than(value: Any, levels: int) -> bool:
    return any(depth > levels for depth, _ in enumerate(_levels(value), start=1))


def _check_storable(stored: Any) -> None:
    for depth, level in enumerate(_levels(stored), start=1):
        if depth > _MAX_NESTING:
            raise ToolOutputNotRecordable(f"its output is nested deeper than {_MAX_NESTING} levels")
        for value in level:
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode()
                except UnicodeEncodeError as error:
                    raise ToolOutputNotRecordable(
                        f"its output holds text that is not valid Unicode ({error.reason}: "
                        f"{error.object[error.start : error.end]!r}), which the journal cannot store"
                    ) from None


def _validated(stored: Any, declared: Any) -> Any:
    # Through JSON text, not validate_python: a strict model accepts a datetime's string there only.
    return declared.validate_json(json.dumps(stored, ensure_ascii=False))


def _declared_form(output: Any, declared: Any) -> Any:
    problem: Exception | None = None
    # Field aliases: a model may validate its dump by alias or only by name.
    for by_alias in (True, False):
        try:
            stored = declared.dump_python(output, mode="json", by_alias=by_alias, exclude_computed_fields=True)
            _check_storable(stored)
            if _validated(stored, declared) == output:
                return stored
        except (ValueError, RecursionError) as error:  # pydantic's errors are ValueErrors
            problem = error
    detail = f": {problem}" if problem is not None else ""
    raise ToolOutputNotRecordable(
        f"its output of type {type(output).__name__} does not come back equal through its declared output type{detail}"
    )


def _not_rebuildable_reason(value: Any, output: Any) -> str:
    name = type(value).__name__
    if value is output and (isinstance(value, BaseModel) or dataclasses.is_dataclass(value)):
        return f"its output of type {name} cannot be rebuilt on replay; declare output_type={name} on the tool"
    return (
        f"its output holds a value of type {name}, which cannot be rebuilt on replay; declare the tool's "
        "output_type as a pydantic model, dataclass or TypedDict that holds it"
    )


def encode_tool_output(output: Any, declared: Any = None) -> dict[str, Any]:
    """
    ``output`` as JSON that :func:`decode_tool_output` turns back into an equal value of its type.

    ``declared`` is the pydantic ``TypeAdapter`` of the tool's declared output type, if any.
    Raises :class:`ToolOutputNotRecordable` when no such JSON exists.
    """
    if declared is not None:
        return {"declared": _declared_form(output, declared)}
    try:
        stored = _encode(output)
    except _NotRebuildable as error:
        raise ToolOutputNotRecordable(_not_rebuildable_reason(error.value, output)) from None
    except RecursionError:
        raise ToolOutputNotRecordable(f"its output is nested deeper than {_MAX_NESTING} levels") from None
    _check_storable(stored)
    return {"value": stored}


def decode_tool_output(recorded: Any, declared: Any = None) -> Any:
    """The value :func:`encode_tool_output` recorded; ``ValueError`` if it cannot be read."""
    try:
        if _is_deeper_than(recorded, _MAX_NESTING + 1):
            raise ValueError(f"it is nested deeper than {_MAX_NESTING} levels")
        if "declared" in recorded:
            if declared is None:
                raise ValueError("it was recorded through a declared output type the tool no longer has")
            return _validated(recorded["declared"], declared)
        value = _decode(recorded["value"]) if "value" in recorded else str(recorded["text"])
        # As the SDK validates a live output against the tool's declared type.
        return value if declared is None else declared.validate_python(value)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as error:
        raise ValueError(f"unreadable tool output: {error!r}") from error
