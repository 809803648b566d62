"""
The host's secret masker (Airflow's, inside Airflow) over what the journal stores: texts, and
JSON values string by string.

A secret the masker knows is replaced wherever it shows: in plain, and in the forms a text may
hold it in, JSON-escaped or URL-encoded, up to three layers deep (a password in the arguments of a
tool call sits JSON-escaped inside a JSON string).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, unquote_plus

from airflow.providers.common.ai.durable.core.host import current_host

# In a group, so that splitting a text by it keeps each escape between the pieces around it.
_JSON_ESCAPE = re.compile(r"(\\(?:u[0-9a-fA-F]{4}|[\"\\/bfnrt]))")

# Between the strings of a value joined to be checked at once: no decoding reads a character
# beyond it, so each string decodes there as it does alone.
_BETWEEN_STRINGS = "\0"


def _json_unescaped(text: str) -> str:
    # Split and joined, not re.sub with a function: a large output holds millions of escapes, and a
    # Python call for each cost seconds. The few distinct escapes are each decoded once.
    pieces = _JSON_ESCAPE.split(text)
    pieces[1::2] = map(_unescaped, pieces[1::2])
    return "".join(pieces)


@functools.cache
def _unescaped(escape: str) -> str:
    # At most 65,536 + 8 distinct escapes.
    return json.loads(f'"{escape}"')


def _decoded_once(text: str) -> Iterator[str]:
    # Only the decodings that change the text: without a "%" unquote is the text itself, and
    # without a "+" unquote_plus is unquote.
    if "\\" in text:
        yield _json_unescaped(text)
    if "%" in text:
        yield unquote(text)
    if "+" in text:
        yield unquote_plus(text)


def _decoded_forms(text: str, *, depth: int = 3) -> Iterator[str]:
    """``text`` read as JSON-escaped and as URL-encoded, up to ``depth`` times: forms a secret may hide in."""
    # Each form once: a form two decodings reach alike is not decoded further twice.
    seen, layer = {text}, [text]
    for _ in range(depth):
        decoded: list[str] = []
        for item in layer:
            for form in _decoded_once(item):
                if form not in seen:
                    seen.add(form)
                    decoded.append(form)
                    yield form
        layer = decoded


def _holds_a_secret(text: str) -> bool:
    """Whether ``text``, or a form of it that :func:`_decoded_forms` reads, holds a secret the masker knows."""
    return _redact(text) != text or any(_redact(form) != form for form in _decoded_forms(text))


def masked_text(text: str) -> str:
    """``text`` with every secret the masker knows replaced, also where it sits escaped or encoded."""
    masked = _redact(text)
    for _ in range(4):
        # A secret that only shows once decoded: the decoded form is stored, masked.
        revealing = next((form for form in _decoded_forms(masked) if _redact(form) != form), None)
        if revealing is None:
            return masked
        masked = _redact(revealing)
    return masked


def _strings_of(value: Any) -> list[str]:
    # A loop, not recursion: a value nested deeper than Python's recursion limit is read too. Level
    # by level, not a generator: a large output holds millions of values.
    strings: list[str] = []
    level = [value]
    while level:
        deeper: list[Any] = []
        for item in level:
            if isinstance(item, str):
                strings.append(item)
            elif isinstance(item, dict):
                deeper.extend(item)
                deeper.extend(item.values())
            elif isinstance(item, (list, tuple)):
                deeper.extend(item)
        level = deeper
    return strings


def masked(value: Any) -> tuple[Any, bool]:
    """
    ``value`` with every secret Airflow's masker knows replaced in its strings and keys, and whether
    there was one. Without one, ``value`` itself: it is checked as one text, not copied.
    """
    if not _holds_a_secret(_BETWEEN_STRINGS.join(_strings_of(value))):
        return value, False
    return _masked_copy(value)


def renders_without_a_secret(value: Any) -> bool:
    """
    Whether :func:`masked` finds no secret in ``value``'s canonical JSON rendering loaded back,
    told from ``value`` itself without rendering or parsing it: ``False`` where ``value`` holds
    anything but JSON's own types (dicts with string keys, lists, tuples, strings, numbers,
    booleans, None), whose strings in the rendering are not its own; ask the rendering then.
    """
    strings = _rendered_strings_of(value)
    return strings is not None and not _holds_a_secret(_BETWEEN_STRINGS.join(strings))


_JSON_ATOMS = frozenset({int, float, bool, type(None)})


def _rendered_strings_of(value: Any) -> list[str] | None:
    # What _strings_of reads in the rendering loaded back, in its order (a dict's keys sorted, as
    # the rendering sorts them); None where a type would render as something else.
    strings: list[str] = []
    level = [value]
    while level:
        deeper: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str:
                strings.append(item)
            elif kind is dict:
                if any(type(key) is not str for key in item):
                    return None
                keys = sorted(item)
                deeper.extend(keys)
                deeper.extend(map(item.__getitem__, keys))
            elif kind is list or kind is tuple:
                deeper.extend(item)
            elif kind not in _JSON_ATOMS:
                return None
        level = deeper
    return strings


def _masked_copy(value: Any) -> tuple[Any, bool]:
    # Not redact(value) on the whole structure: it also hides every value under a key that looks
    # sensitive, and a recorded answer's "input_tokens" would come back as "***".
    changed = False

    def masked_string(text: str) -> str:
        nonlocal changed
        result = masked_text(text)
        changed = changed or result != text
        return result

    root: list[Any] = [value]
    pending: list[tuple[Any, Any]] = [(root, 0)]
    while pending:
        container, index = pending.pop()
        item = container[index]
        if isinstance(item, dict):
            copied: dict[Any, Any] = {}
            for position, (key, child) in enumerate(item.items()):
                name = masked_string(key) if isinstance(key, str) else key
                while name in copied:  # two keys masked alike: the second is told apart by its position
                    name = f"{name}#{position}"
                copied[name] = child
            container[index] = copied
            pending.extend((copied, key) for key in copied)
        elif isinstance(item, (list, tuple)):
            container[index] = list(item)
            pending.extend((container[index], position) for position in range(len(item)))
        elif isinstance(item, str):
            container[index] = masked_string(item)
    return root[0], changed


def _redact(text: str) -> str:
    # The current host's masker (Airflow's, inside Airflow); a str comes back a str.
    return current_host().redact(text)


#: The longest arguments text a person is shown; longer ones are cut, saying so.
MAX_ARGUMENTS_SHOWN = 4000


def shown_arguments(arguments: str) -> str:
    """
    A tool call's arguments (JSON text) as a request to a person shows them: pretty-printed,
    masked as the task log masks them, cut at :data:`MAX_ARGUMENTS_SHOWN`, in a Markdown fence
    longer than any run of backticks in them, so that they cannot close it.
    """
    try:
        pretty = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        pretty = arguments
    shown = masked_text(pretty)
    if len(shown) > MAX_ARGUMENTS_SHOWN:
        shown = f"{shown[:MAX_ARGUMENTS_SHOWN]}\n... ({len(shown)} characters in all)"
    longest = current = 0
    for character in shown:
        current = current + 1 if character == "`" else 0
        longest = max(longest, current)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{shown}\n{fence}"
