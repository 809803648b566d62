"""
A value's secrets are found from its own strings as from its rendering parsed back, and a tool
call's fingerprint and parts checked at once are those taken apart: the shortcuts a step takes to
check for secrets once change no stored byte and let no secret through (R-50).
"""

from __future__ import annotations

import datetime
import enum
import json

import pytest
from airflow.providers.common.compat.sdk import mask_secret
from secret_forms import ENCODINGS, SECRET

from airflow.providers.common.ai.durable.core.divergence import (
    tool_call_fingerprint_and_parts,
    tool_call_parts,
)
from airflow.providers.common.ai.durable.core.fingerprint import (
    canonical_json,
    fingerprint,
    masked_json,
    rendered_and_masked,
)
from airflow.providers.common.ai.durable.core.masking import masked, renders_without_a_secret


class Colour(enum.Enum):
    RED = "red"


def shapes(text: str) -> list[object]:
    """Values that hold ``text`` where a rendering puts strings: a value, a key, deep down, in a tuple."""
    return [
        text,
        {"output": text},
        {text: 1},
        [{"a": [1, {"b": (text, None, 2.5, True)}]}],
        {"z": "last", "a": {"k": text}, "m": ["x", text]},
    ]


@ENCODINGS
def test_a_secret_in_any_form_is_found_from_a_value_s_own_strings(encode):
    secret = f"{SECRET}-own-strings"
    mask_secret(secret)
    for value in shapes(encode(secret)):
        assert masked(json.loads(canonical_json(value)))[1]
        assert not renders_without_a_secret(value)
        rendered, text = rendered_and_masked(value)
        assert rendered == canonical_json(value)
        assert text == masked_json(rendered) != rendered


def test_a_value_without_a_secret_renders_as_it_is_and_one_of_other_types_is_left_to_its_rendering():
    for value in shapes('plain "text" with \\ escapes, %41 and + signs, \ud800 and ü'):
        assert renders_without_a_secret(value)
        rendered, text = rendered_and_masked(value)
        assert text is rendered == canonical_json(value)
    for value in [{1: "a"}, {"a": Colour.RED}, [datetime.date(2026, 1, 1)], {"a": b"bytes"}, {"k": {True: 1}}]:
        assert not renders_without_a_secret(value)
        rendered, text = rendered_and_masked(value)
        assert text == masked_json(canonical_json(value))


@pytest.mark.parametrize(
    ("name", "arguments", "call_id"),
    [
        ("lookup", '{"i": 0, "city": "Paris"}', "call_0"),
        ("lookup", '{"password": "SECRET"}', "call_1"),
        ("lookup", '{"SECRET": "name of an argument"}', "call_2"),
        ("lookup", "not JSON SECRET", "call_3"),
        ("lookup", '["a", "list"]', "call_SECRET"),
        ("tool SECRET", '{"i": 1}', "call_4"),
    ],
    ids=["none", "in-a-value", "in-a-name", "not-json", "in-the-call-id", "in-the-tool-name"],
)
def test_a_tool_call_s_fingerprint_and_parts_checked_at_once_are_those_taken_apart(name, arguments, call_id):
    secret = f"{SECRET}-tool-call"
    mask_secret(secret)
    name, call_id = name.replace("SECRET", secret), call_id.replace("SECRET", secret)
    arguments = arguments.replace("SECRET", json.dumps(secret)[1:-1])
    apart = (
        fingerprint({"name": name, "arguments": arguments, "call_id": call_id}, what="a tool call"),
        tool_call_parts(name, arguments, call_id),
    )
    assert tool_call_fingerprint_and_parts(name, arguments, call_id, what="a tool call") == apart
