"""
A function tool's return value as JSON, and back, so that a replay hands the SDK the same value.

The SDK turns ToolOutputText/Image/FileContent (alone, in a list, or as a dict with a ``type``) into
structured content and everything else into ``str(value)``; hooks and ``stop_on_first_tool`` see
the value itself. Plain JSON values, tuples, dicts with any keys, dates and the SDK's tool outputs
are rebuilt as they were. Any other value is recorded as the text the model saw, and replays as
that text. Nothing is rebuilt by importing a name from the journal.
"""

from __future__ import annotations

import datetime
from typing import Any

from agents import ToolOutputFileContent, ToolOutputImage, ToolOutputText

_TOOL_OUTPUTS = {"text": ToolOutputText, "image": ToolOutputImage, "file": ToolOutputFileContent}
_TIMES = {"datetime": datetime.datetime, "date": datetime.date, "time": datetime.time}


class _NotEncodable(TypeError):
    pass


def _encode(value: Any) -> Any:
    # Exact types: a subclass (an IntEnum, a Counter, a namedtuple) is shown to the model by its
    # own str(), which the base type would not rebuild.
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [_encode(item) for item in value]
    # Every other value is a one-key object, so none can be mistaken for another.
    if kind is tuple:
        return {"tuple": [_encode(item) for item in value]}
    if kind is dict:
        return {"dict": [[_encode(key), _encode(item)] for key, item in value.items()]}
    for tag, time_kind in _TIMES.items():
        if kind is time_kind:
            return {tag: value.isoformat()}
    if isinstance(value, (ToolOutputText, ToolOutputImage, ToolOutputFileContent)):
        return {"tool_output": value.model_dump(mode="json", exclude_unset=True) | {"type": value.type}}
    raise _NotEncodable(type(value).__qualname__)


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    ((tag, inner),) = value.items()
    if tag == "tuple":
        return tuple(_decode(item) for item in inner)
    if tag == "dict":
        return {_decode(key): _decode(item) for key, item in inner}
    if tag in _TIMES:
        return _TIMES[tag].fromisoformat(inner)
    if tag == "tool_output":
        return _TOOL_OUTPUTS[inner["type"]].model_validate(inner)
    raise ValueError(f"unknown recorded value {tag!r}")


def encode_tool_output(output: Any, declared: Any = None) -> dict[str, Any]:
    """``output`` as JSON: its value when it can be rebuilt, else the text the model saw."""
    try:
        return {"value": _encode(output)}
    except _NotEncodable:
        return {"text": str(output)}


def decode_tool_output(recorded: Any, declared: Any = None) -> Any:
    """The value :func:`encode_tool_output` recorded; ``ValueError`` if it cannot be read."""
    try:
        if "value" in recorded:
            return _decode(recorded["value"])
        return str(recorded["text"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"unreadable tool output: {error!r}") from error
