"""
A tool's output is recorded so that a replay returns an equal value of the same type, or not at
all: an output the plain SDK accepts but the journal cannot record runs live on the next try, and
nothing crashes a try (R-9, R-26).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections import Counter
from typing import Any

import pytest
import tries
from agents import Agent, RunHooks, ToolOutputFileContent, ToolOutputImage, ToolOutputText, UserError, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

from airflow.providers.common.ai.durable.openai_agents._tool_output import (
    ToolOutputNotRecordable,
    decode_tool_output,
    encode_tool_output,
)


class Color(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    SMALL = 1


class Invoice(BaseModel):
    number: str = Field(alias="invoiceNumber")
    amount: decimal.Decimal
    due: datetime.date
    color: Color
    lines: list[tuple[str, int]] = []


class StrictInvoice(BaseModel):
    model_config = ConfigDict(strict=True)
    amount: decimal.Decimal
    issued: datetime.datetime
    payload: bytes


@dataclasses.dataclass
class Receipt:
    total: decimal.Decimal
    tags: frozenset[str]


class Row(TypedDict):
    id: uuid.UUID
    size: Size


class Node(BaseModel):
    children: list[Node] = []


class Loose(BaseModel):
    anything: Any


Point = collections.namedtuple("Point", "x y")


class Name(str):
    pass


class FixedTimeZone(datetime.tzinfo):
    """A time zone other than datetime.timezone, as zoneinfo's are."""

    def utcoffset(self, dt):
        return datetime.timedelta(hours=1)

    def dst(self, dt):
        return datetime.timedelta(0)


def nested_list(depth: int) -> list:
    outer = inner = []
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return outer


def nested_node(depth: int) -> Node:
    outer = inner = Node()
    for _ in range(depth - 1):
        inner.children.append(Node())
        inner = inner.children[0]
    return outer


def through_the_journal(recorded: Any) -> Any:
    """What a later try reads: the journal stores JSON as its writer does."""
    return json.loads(json.dumps(recorded, ensure_ascii=False, allow_nan=False))


def assert_same_value(replayed: Any, original: Any) -> None:
    # repr shows the type of every part (True, not 1; (2,), not [2]; Decimal('1.10'), not Decimal('1.1')).
    assert (type(replayed), repr(replayed)) == (type(original), repr(original))


BUILTIN_VALUES = {
    "none": None,
    "bool": True,
    "int": 10**30,
    "float": 1.5,
    "nan": float("nan"),
    "inf": float("-inf"),
    "str": "naïve ✓",
    "list": [1, "a", None],
    "tuple": (1, (2,), []),
    "dict": {"rows": 3, 7: ("x", None), (1, 2): {True: 1.0}, None: b"\x00"},
    "dict with a tag's name as key": {"tuple": [1]},
    "set": {1, 2, 3},
    "frozenset": frozenset({"a"}),
    "bytes": b"\x00\xffbinary",
    "bytearray": bytearray(b"abc"),
    "decimal": decimal.Decimal("1.10"),
    "decimal nan": decimal.Decimal("NaN"),
    "datetime": datetime.datetime(2026, 11, 29, 10, 0, 0, 5),
    "datetime at an offset": datetime.datetime(
        2026, 11, 29, 10, tzinfo=datetime.timezone(datetime.timedelta(hours=-3))
    ),
    "date": datetime.date(2026, 11, 29),
    "time": datetime.time(10, 30, tzinfo=datetime.timezone.utc),
    "timedelta": datetime.timedelta(days=-2, seconds=5, microseconds=7),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "tool output text": ToolOutputText(text="a"),
    "tool output image": ToolOutputImage(image_url="data:image/png;base64,AAAA", detail="low"),
    "tool output file": ToolOutputFileContent(file_id="file-1"),
    "list of tool outputs": [ToolOutputText(text="a"), ToolOutputImage(file_id="file-1")],
    "nested 150 deep": nested_list(150),
}


@pytest.mark.parametrize("value", BUILTIN_VALUES.values(), ids=BUILTIN_VALUES.keys())
def test_a_builtin_value_replays_as_an_equal_value_of_the_same_type(value):
    replayed = decode_tool_output(through_the_journal(encode_tool_output(value)))
    assert_same_value(replayed, value)


DECLARED = {
    "pydantic model with an alias": (
        Invoice,
        Invoice(invoiceNumber="A-1", amount="12.50", due="2026-12-01", color="red", lines=[("x", 1)]),
    ),
    "strict pydantic model": (
        StrictInvoice,
        StrictInvoice(amount=decimal.Decimal("3.0"), issued=datetime.datetime(2026, 1, 1), payload=b"\x01"),
    ),
    "dataclass": (Receipt, Receipt(total=decimal.Decimal("9.99"), tags=frozenset({"paid"}))),
    "typed dict": (Row, Row(id=uuid.UUID(int=7), size=Size.SMALL)),
}


@pytest.mark.parametrize("declared_type, value", DECLARED.values(), ids=DECLARED.keys())
def test_an_output_of_a_declared_type_replays_through_that_type(declared_type, value):
    declared = TypeAdapter(declared_type)
    recorded = through_the_journal(encode_tool_output(value, declared))
    assert "declared" in recorded
    assert_same_value(decode_tool_output(recorded, declared), value)


def test_a_declared_output_that_does_not_come_back_equal_is_not_recordable():
    # An Any field holding a Decimal is dumped as a string and would come back as one.
    with pytest.raises(ToolOutputNotRecordable, match="Loose does not come back equal"):
        encode_tool_output(Loose(anything=decimal.Decimal("1")), TypeAdapter(Loose))


NOT_REBUILDABLE = {
    "pydantic model": (Invoice(invoiceNumber="A", amount=1, due="2026-01-01", color="red"), "Invoice"),
    "dataclass": (Receipt(total=decimal.Decimal(1), tags=frozenset()), "Receipt"),
    "enum": (Color.RED, "Color"),
    "int enum": (Size.SMALL, "Size"),
    "counter": (Counter(a=1), "Counter"),
    "ordered dict": (collections.OrderedDict(a=1), "OrderedDict"),
    "namedtuple": (Point(1, 2), "Point"),
    "str subclass": (Name("x"), "Name"),
    "object": (object(), "object"),
    "model inside a list": ([1, Receipt(total=decimal.Decimal(1), tags=frozenset())], "Receipt"),
    "enum as a dict key": ({Color.RED: 1}, "Color"),
}


@pytest.mark.parametrize("value, type_name", NOT_REBUILDABLE.values(), ids=NOT_REBUILDABLE.keys())
def test_a_value_that_cannot_be_rebuilt_without_a_declared_type_is_not_recordable(value, type_name):
    with pytest.raises(ToolOutputNotRecordable, match=f"type {type_name}\\b.*declare") as raised:
        encode_tool_output(value)
    assert raised.value.reason == str(raised.value)


def test_a_model_returned_without_a_declared_type_names_the_declaration_that_fixes_it():
    with pytest.raises(ToolOutputNotRecordable) as raised:
        encode_tool_output(Receipt(total=decimal.Decimal(1), tags=frozenset()))
    assert raised.value.reason == (
        "its output of type Receipt cannot be rebuilt on replay; declare output_type=Receipt on the tool"
    )


def test_a_datetime_in_a_time_zone_that_is_not_a_fixed_offset_is_not_recordable():
    with pytest.raises(ToolOutputNotRecordable, match="time zone"):
        encode_tool_output(datetime.datetime(2026, 1, 1, tzinfo=FixedTimeZone()))


@pytest.mark.parametrize(
    "value, declared",
    [
        (nested_list(900), None),
        (nested_list(100_000), None),
        ({"k": nested_list(198)}, None),  # a dict is three JSON levels
        (nested_node(900), TypeAdapter(Node)),
    ],
    ids=["list 900 deep", "list 100000 deep", "dict of a deep list", "declared model 900 deep"],
)
def test_an_output_nested_too_deep_is_not_recordable_and_nothing_crashes(value, declared):
    with pytest.raises(ToolOutputNotRecordable, match=r"nested deeper than|declared output type"):
        encode_tool_output(value, declared)


@pytest.mark.parametrize(
    "value, declared",
    [("\ud800", None), ({"\udfff": 1}, None), (Loose(anything="a\ud800"), TypeAdapter(Loose))],
    ids=["text", "dict key", "declared model field"],
)
def test_text_with_a_lone_surrogate_is_not_recordable(value, declared):
    with pytest.raises(ToolOutputNotRecordable, match="not valid Unicode"):
        encode_tool_output(value, declared)


@pytest.mark.parametrize(
    "recorded, declared",
    [
        ({"value": {"unknown": 1}}, None),
        ({"value": {"tuple": [1], "set": [2]}}, None),
        ({"value": {"decimal": "not a number"}}, None),
        ({"value": {"bytes": "!!not base64"}}, None),
        ({"value": {"set": [[1]]}}, None),
        ({"value": {"dict": [[[1], 2]]}}, None),
        ({"value": {"timedelta": "soon"}}, None),
        ({"value": {"tool_output": {"type": "video"}}}, None),
        ({"declared": {"total": "1", "tags": []}}, None),
        ({"declared": {"total": "x"}}, TypeAdapter(Receipt)),
        ({"value": "not a receipt"}, TypeAdapter(Receipt)),
        ({"value": nested_list(250)}, None),
        ({"value": nested_list(100_000)}, None),
        ({}, None),
        (None, None),
        ("text", None),
    ],
)
def test_a_recorded_output_that_cannot_be_read_raises_value_error(recorded, declared):
    with pytest.raises(ValueError, match="unreadable tool output"):
        decode_tool_output(recorded, declared)


@pytest.mark.parametrize(
    "recorded, expected",
    [
        ({"text": "Counter({'a': 1})"}, "Counter({'a': 1})"),
        (
            {"value": [{"tuple": [1, {"dict": [["due", {"date": "2026-11-29"}], [7, None]]}]}]},
            [(1, {"due": datetime.date(2026, 11, 29), 7: None})],
        ),
        (
            {"value": {"datetime": "2026-11-29T10:00:00+00:00"}},
            datetime.datetime(2026, 11, 29, 10, tzinfo=datetime.timezone.utc),
        ),
        ({"value": {"tool_output": {"type": "text", "text": "a"}}}, ToolOutputText(text="a")),
    ],
    ids=["text", "tuple of dict of date", "datetime", "tool output"],
)
def test_outputs_recorded_by_an_earlier_release_still_replay(recorded, expected):
    assert_same_value(decode_tool_output(recorded), expected)


def test_an_output_recorded_before_the_tool_declared_its_type_replays_validated_by_it():
    recorded = {"value": {"dict": [["id", str(uuid.UUID(int=7))], ["size", 1]]}}
    assert_same_value(decode_tool_output(recorded, TypeAdapter(Row)), Row(id=uuid.UUID(int=7), size=Size.SMALL))


# End to end: two tries of one task through run_durably_sync and a scripted model.


class HookFailed(Exception):
    pass


class ToolResults(RunHooks):
    """Collects what the SDK handed on as each tool's result; can fail the try right after."""

    def __init__(self, fail: bool = False) -> None:
        self.results: list[Any] = []
        self.fail = fail

    async def on_tool_end(self, context, agent, tool, result):
        self.results.append(result)
        if self.fail:
            raise HookFailed("the try fails after the tool's output was recorded")


class Task(tries.Task):
    prompt = "Go."


def producing_tool(output: Any, declared_type: Any, runs: Counter):
    def produce() -> Any:
        """Produces the output."""
        runs["produce"] += 1
        return output

    return function_tool(produce, output_type=declared_type)


E2E_OUTPUTS = {
    "decimal": (None, decimal.Decimal("12.50")),
    "bytes": (None, b"\x00\xff"),
    "set": (None, {1, 2}),
    "tuple holding a dict": (None, ("x", {1: datetime.date(2026, 1, 1)})),
    "list 199 deep": (None, nested_list(199)),
    "pydantic model": DECLARED["pydantic model with an alias"],
    "dataclass": DECLARED["dataclass"],
    "typed dict": DECLARED["typed dict"],
}


@pytest.mark.parametrize("declared_type, output", E2E_OUTPUTS.values(), ids=E2E_OUTPUTS.keys())
def test_a_replayed_tool_hands_the_sdk_what_the_tool_returned(declared_type, output):
    task, runs = Task(), Counter()
    tool = producing_tool(output, declared_type, runs)
    first, first_hooks = ScriptedModel([[function_call("produce", {}, call_id="c1")]]), ToolResults(fail=True)
    with pytest.raises(UserError, match="recorded"):  # the SDK wraps what a hook raises
        task.attempt(
            Agent(name="a", model=first, tools=[tool], tool_use_behavior="stop_on_first_tool"), hooks=first_hooks
        )

    second, second_hooks = ScriptedModel([]), ToolResults()
    task.attempt(
        Agent(name="a", model=second, tools=[tool], tool_use_behavior="stop_on_first_tool"), hooks=second_hooks
    )

    assert (runs["produce"], len(first.calls), len(second.calls)) == (1, 1, 0)
    assert task.journal.stats.replayed == {"model": 1, "tool": 1}
    assert_same_value(second_hooks.results[0], first_hooks.results[0])


def test_a_replayed_declared_output_is_what_the_model_saw_the_first_time():
    task, runs = Task(), Counter()
    declared_type, output = DECLARED["pydantic model with an alias"]
    tool = producing_tool(output, declared_type, runs)
    first = ScriptedModel([[function_call("produce", {}, call_id="c1")], RuntimeError("provider outage")])
    with pytest.raises(RuntimeError):
        task.attempt(Agent(name="a", model=first, tools=[tool]))

    second = ScriptedModel([[assistant_message("done")]])
    assert task.attempt(Agent(name="a", model=second, tools=[tool])).final_output == "done"
    assert (runs["produce"], len(first.calls), len(second.calls)) == (1, 2, 1)
    assert second.calls[0].input[-1] == first.calls[1].input[-1]


@pytest.mark.parametrize(
    "output, reason",
    [(Counter(a=1), "type Counter"), (nested_list(900), "nested deeper"), ("a\ud800b", "not valid Unicode")],
    ids=["counter", "list 900 deep", "lone surrogate"],
)
def test_a_tool_output_that_cannot_be_recorded_runs_live_next_try_and_is_named(output, reason, no_collection_at_depth):
    task, runs = Task(), Counter()
    tool = producing_tool(output, None, runs)
    first, first_hooks = ScriptedModel([[function_call("produce", {}, call_id="c1")], RuntimeError()]), ToolResults()
    with pytest.raises(RuntimeError):
        task.attempt(Agent(name="a", model=first, tools=[tool]), hooks=first_hooks)
    assert "produce" in task.journal.stats.summary() and reason in task.journal.stats.summary()

    second, second_hooks = ScriptedModel([[assistant_message("done")]]), ToolResults()
    assert task.attempt(Agent(name="a", model=second, tools=[tool]), hooks=second_hooks).final_output == "done"
    assert (runs["produce"], len(first.calls), len(second.calls)) == (2, 2, 1)
    assert second_hooks.results[0] is output and first_hooks.results[0] is output
    assert second.calls[0].input[-1] == first.calls[1].input[-1]


# An output the plain SDK accepts never crashes a try, recorded or not.


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


def deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "output",
    ["lone \ud800 surrogate", deep_list(900), {"nested": deep_list(900)}],
    ids=["lone-surrogate", "900-deep", "900-deep-in-a-dict"],
)
def test_an_output_the_plain_sdk_accepts_runs_durably_on_every_try(output, no_collection_at_depth):
    runs = Counter()
    task, produce = tries.task_failed_after_a_tool(output, runs)
    second = scripted([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[produce]))
    # The tool either replayed or ran again, named as not recorded: nothing crashed.
    assert len(second.calls) == 1
    assert runs["produce"] == 1 or task.journal.stats.not_recorded
    third = scripted([assistant_message("done")])
    task.attempt(Agent(name="a", model=third, tools=[produce]))
    assert len(third.calls) <= 1
