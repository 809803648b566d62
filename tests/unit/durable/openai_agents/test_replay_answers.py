"""
Which calls a retry replays and which run live, counted per try with scripted models: a change of
one part of a request (R-6, R-8), an entry of an unknown format (R-33), the SDK's own retry of a
request (R-16), and runs that failed because of the model's answers (R-15).

Each try gets a new ``ScriptedModel``, so its call count is the number of requests that reached the
model in that try; a replayed call never reaches it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest
import tries
from agents import (
    Agent,
    GuardrailFunctionOutput,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    ModelRetrySettings,
    ModelSettings,
    OutputGuardrailTripwireTriggered,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailTripwireTriggered,
    Usage,
    function_tool,
    output_guardrail,
    tool_input_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal
from pydantic import BaseModel

from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)
PROMPT = "What is the weather in Paris?"


def model(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps), default_usage=USAGE)


def call(tool: str, call_id: str, **arguments) -> object:
    return function_call(tool, arguments, call_id=call_id)


def refusal(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_refusal",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputRefusal(type="refusal", refusal=text)],
    )


class Tools:
    """Function tools that count their real runs."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            self.runs[f"weather {city}"] += 1
            return f"sunny in {city}"

        @tool_input_guardrail
        def internal_only(data):
            to = json.loads(data.context.tool_arguments)["to"]
            if to.endswith("@example.com"):
                return ToolGuardrailFunctionOutput.allow()
            return ToolGuardrailFunctionOutput.raise_exception(output_info=to)

        @function_tool(tool_input_guardrails=[internal_only])
        def send_mail(to: str) -> str:
            """Send an e-mail."""
            self.runs[f"send_mail {to}"] += 1
            return f"sent to {to}"

        self.weather, self.send_mail = weather, send_mail


class Task(tries.Task):
    prompt = PROMPT


def agent(scripted: ScriptedModel, tools: list, **kwargs) -> Agent:
    return Agent(name="assistant", instructions="Be brief.", model=scripted, tools=tools, **kwargs)


# A change of only one part of a request runs that call live, and every call after it.


class Report(BaseModel):
    city: str
    sky: str


FIRST_TRY = {"tools": ("weather",), "output_type": None, "handoffs": ("billing",)}
SECOND_TRY = {
    "nothing": {},
    "tools": {"tools": ("weather", "send_mail")},
    "output-schema": {"output_type": Report},
    "handoffs": {"handoffs": ("support",)},
}


@pytest.mark.parametrize("changed", SECOND_TRY)
def test_a_change_of_only_the_tools_the_output_schema_or_the_handoffs_runs_every_call_live(changed, caplog):
    tools = Tools()

    def build(scripted: ScriptedModel, parts: dict) -> Agent:
        return agent(
            scripted,
            [getattr(tools, name) for name in parts["tools"]],
            output_type=parts["output_type"],
            handoffs=[Agent(name=name) for name in parts["handoffs"]],
        )

    task = Task()
    first = model([call("weather", "c1", city="Paris")], RuntimeError("provider outage"))
    task.failing_attempt(build(first, FIRST_TRY), RuntimeError)
    assert (len(first.calls), tools.runs) == (2, {"weather Paris": 1})

    answer = [assistant_message('{"city": "Paris", "sky": "sunny"}')]
    second = model(answer) if changed == "nothing" else model([call("weather", "c1", city="Paris")], answer)
    with caplog.at_level(logging.WARNING):
        task.attempt(build(second, {**FIRST_TRY, **SECOND_TRY[changed]}))

    if changed == "nothing":
        assert (len(second.calls), tools.runs) == (1, {"weather Paris": 1})
        assert (task.replayed, task.ran_live) == ({"model": 1, "tool": 1}, {"model": 1})
    else:
        assert (len(second.calls), tools.runs) == (2, {"weather Paris": 2})
        assert (task.replayed, task.ran_live) == ({}, {"model": 2, "tool": 1})
        assert "Durable: run diverged" in caplog.text


class RefusesToRecord(InMemoryStorage):
    """A store that refuses the write of some keys, as a full disk or a lost connection would."""

    def __init__(self, refused: set[str]) -> None:
        super().__init__()
        self.refused = refused

    def write(self, key: str, text: str) -> None:
        if key in self.refused:
            raise OSError(f"no space left for {key}")
        super().write(key, text)


@pytest.mark.parametrize(("call_id", "lyon_runs"), [("c2", 1), ("c2-asked-again", 2)], ids=["same", "changed"])
def test_a_tool_call_whose_call_id_changed_runs_live(call_id, lyon_runs):
    # The second answer could not be recorded, so the retry asks the model again; a model
    # asked again may answer the same tool call under another call id, and only that id differs.
    storage = RefusesToRecord({"1.3"})
    tools, task = Tools(), Task(storage)
    first = model([call("weather", "c1", city="Paris")], [call("weather", "c2", city="Lyon")], RuntimeError())
    task.failing_attempt(agent(first, [tools.weather]), RuntimeError)
    assert tools.runs == {"weather Paris": 1, "weather Lyon": 1}
    storage.refused.clear()

    second = model([call("weather", call_id, city="Lyon")], [assistant_message("Sunny.")])
    task.attempt(agent(second, [tools.weather]))

    assert len(second.calls) == 2
    assert second.calls[0].input == first.calls[1].input
    assert tools.runs == {"weather Paris": 1, "weather Lyon": lyon_runs}
    assert task.replayed == ({"model": 1, "tool": 2} if lyon_runs == 1 else {"model": 1, "tool": 1})


# The format version of an entry.


@pytest.mark.parametrize("stored_format", [FORMAT_VERSION, 99], ids=["current-format", "unknown-format"])
@pytest.mark.parametrize("answer", ["first", "second"])
def test_an_answer_that_matches_in_everything_but_an_unknown_format_runs_live(answer, stored_format, caplog):
    tools, task = Tools(), Task()
    first = model([call("weather", "c1", city="Paris")], [call("weather", "c2", city="Lyon")], RuntimeError())
    task.failing_attempt(agent(first, [tools.weather]), RuntimeError)
    # Kind, name, fingerprint and follows stay as recorded: only the format changes.
    key = {"first": "1.1", "second": "1.3"}[answer]
    entry = json.loads(task.storage.entries[key])
    assert (entry["format"], entry["kind"], entry["state"]) == (FORMAT_VERSION, "model", "done")
    task.storage.entries[key] = json.dumps({**entry, "format": stored_format})

    # From the unreadable answer on, everything runs live; before it, everything replays.
    live = 0 if stored_format == FORMAT_VERSION else {"first": 2, "second": 1}[answer]
    answers = [[call("weather", "c1", city="Paris")], [call("weather", "c2", city="Lyon")]]
    second = model(*answers[2 - live :], [assistant_message("Sunny.")])
    with caplog.at_level(logging.WARNING):
        assert task.attempt(agent(second, [tools.weather])).final_output == "Sunny."

    assert len(second.calls) == live + 1
    assert second.calls[0].input == first.calls[2 - live].input
    assert task.replayed == ({"model": 2 - live, "tool": 2 - live} if live < 2 else {})
    assert tools.runs == {"weather Paris": 1 + (live == 2), "weather Lyon": 1 + (live >= 1)}
    if live:
        assert "the recorded entry has format 99" in caplog.text


# The SDK's own retry of a request keeps its position.


def test_a_request_the_sdk_retried_keeps_its_position_so_the_next_try_replays_up_to_the_failure():
    tools, task = Tools(), Task()
    retry = ModelSettings(
        retry=ModelRetrySettings(max_retries=2, policy=lambda context: isinstance(context.error, ConnectionError))
    )
    first = model(
        [call("weather", "c1", city="Paris")],
        ModelStep.raise_error(ConnectionError("blip")),
        [call("weather", "c2", city="Lyon")],
        RuntimeError("outage"),
    )
    task.failing_attempt(agent(first, [tools.weather], model_settings=retry), RuntimeError)
    assert len(first.calls) == 4  # the second request was sent twice

    second = model([assistant_message("Sunny in Paris and Lyon.")])
    task.attempt(agent(second, [tools.weather], model_settings=retry))

    # Try 2 asked only the request that failed: the one after both tool results.
    assert len(second.calls) == 1
    assert second.calls[0].input == first.calls[3].input
    assert tools.runs == {"weather Paris": 1, "weather Lyon": 1}
    assert (task.replayed, task.ran_live) == ({"model": 2, "tool": 2}, {"model": 1})


# A run that failed because of the model's answers asks the model again from its last request.


@output_guardrail
def no_rain(context, agent, output):
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="rain" in output)


FAILING_ANSWERS = {
    "max-turns": ([call("weather", "c2", city="Lyon")], MaxTurnsExceeded, {"max_turns": 2}),
    "refusal": ([refusal("I cannot talk about the weather.")], ModelRefusalError, {}),
    "unknown-tool": ([call("no_such_tool", "c2")], ModelBehaviorError, {}),
    "tool-input-guardrail": (
        [call("send_mail", "c2", to="someone@elsewhere.test")],
        ToolInputGuardrailTripwireTriggered,
        {},
    ),
    "output-guardrail": ([assistant_message("rain")], OutputGuardrailTripwireTriggered, {}),
}


@pytest.mark.parametrize("failure", FAILING_ANSWERS)
def test_a_run_failed_by_the_models_last_answer_replays_up_to_the_last_request_and_asks_it_again(failure):
    failing_answer, error, run_kwargs = FAILING_ANSWERS[failure]
    tools, task = Tools(), Task()

    def build(scripted: ScriptedModel) -> Agent:
        return agent(scripted, [tools.weather, tools.send_mail], output_guardrails=[no_rain])

    first = model([call("weather", "c1", city="Paris")], failing_answer)
    task.failing_attempt(build(first), error, **run_kwargs)
    assert len(first.calls) == 2

    second = model([assistant_message("Sunny in Paris.")])
    assert task.attempt(build(second), **run_kwargs).final_output == "Sunny in Paris."

    # Only the last request reached the model again: the one that had the first tool's result.
    assert len(second.calls) == 1
    assert second.calls[0].input == first.calls[1].input
    assert second.calls[0].input[-1]["output"] == "sunny in Paris"
    assert (task.replayed, task.ran_live) == ({"model": 1, "tool": 1}, {"model": 1})
    assert tools.runs["weather Paris"] == 1
    assert not [name for name in tools.runs if name.startswith("send_mail")]


# Arguments the SDK refuses before the tool runs are the model's fault, not the tool's.

BAD_ARGUMENTS = {
    "not-json": '{"city": "Lyon"',
    "not-an-object": '["Lyon"]',
    "missing-parameter": "{}",
    "wrong-type": '{"city": {"name": "Lyon"}}',
}


def _reraise(context, error):
    raise error


@pytest.mark.parametrize("failure_error_function", [None, _reraise], ids=["none", "reraising"])
@pytest.mark.parametrize("arguments", BAD_ARGUMENTS)
def test_tool_arguments_the_sdk_refuses_make_the_retry_ask_the_model_again(arguments, failure_error_function):
    runs: Counter[str] = Counter()

    @function_tool(failure_error_function=failure_error_function)
    def forecast(city: str) -> str:
        """The forecast for a city."""
        runs[city] += 1
        return f"sunny in {city}"

    def build(scripted: ScriptedModel) -> Agent:
        return agent(scripted, [forecast])

    task = Task()
    first = model(
        [call("forecast", "c1", city="Paris")], [function_call("forecast", BAD_ARGUMENTS[arguments], call_id="c2")]
    )
    task.failing_attempt(build(first), ModelBehaviorError)
    assert len(first.calls) == 2

    second = model([call("forecast", "c3", city="Lyon")], [assistant_message("Sunny in Paris and Lyon.")])
    task.attempt(build(second))

    # The answer with the bad arguments is asked again; the one before it and its tool call replay.
    assert len(second.calls) == 2
    assert second.calls[0].input == first.calls[1].input
    assert runs == {"Paris": 1, "Lyon": 1}
    assert (task.replayed, task.ran_live) == ({"model": 1, "tool": 1}, {"model": 2, "tool": 1})
