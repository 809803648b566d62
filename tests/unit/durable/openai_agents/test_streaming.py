"""
``run_durably_streamed`` is the durable ``Runner.run_streamed``: each model call is recorded when
its stream completes, and a retry's consumer of ``stream_events()`` sees the same run items,
without the raw deltas of replayed calls (R-36).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import tries
from agents import Agent, MaxTurnsExceeded, Runner, RunResultStreaming, SQLiteSession, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.openai_agents import run_durably_streamed

PROMPT = "What is the weather in Paris?"
TOOL_CALL = [function_call("weather", {"city": "Paris"}, call_id="c1")]
ANSWER = [assistant_message("It is sunny in Paris.")]


class Task(tries.Task):
    def streamed(self, agent: Agent, prompt: str = PROMPT, **kwargs) -> tuple[RunResultStreaming, list]:
        """One try of a streamed run, consumed to its end: the result and every event it streamed."""
        self.journal = DurableJournal(self.storage)

        async def consume():
            with journal_scope(self.journal):
                result = run_durably_streamed(agent, prompt, **kwargs)
                events = [event async for event in result.stream_events()]
                return result, events

        return asyncio.run(consume())


def weather_tool(runs: Counter[str]):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        return f"sunny in {city}"

    return weather


def run_items(events: list) -> list[tuple[str, str]]:
    return [(event.name, event.item.type) for event in events if event.type == "run_item_stream_event"]


def raw_types(events: list) -> list[str]:
    return [event.data.type for event in events if event.type == "raw_response_event"]


def plain_run_items() -> list[tuple[str, str]]:
    """The run items the SDK's own Runner.run_streamed streams for the same conversation."""

    async def consume():
        agent = Agent(name="a", model=ScriptedModel([TOOL_CALL, ANSWER]), tools=[weather_tool(Counter())])
        result = Runner.run_streamed(agent, PROMPT)
        return [event async for event in result.stream_events()]

    return run_items(asyncio.run(consume()))


def test_a_retry_replays_the_completed_streams_and_streams_the_same_run_items():
    runs: Counter[str] = Counter()
    task = Task()
    first = ScriptedModel([TOOL_CALL, RuntimeError("provider outage")])
    with pytest.raises(RuntimeError):
        task.streamed(Agent(name="a", model=first, tools=[weather_tool(runs)]))
    assert (len(first.calls), runs["weather"]) == (2, 1)

    again = ScriptedModel([ANSWER])
    result, events = task.streamed(Agent(name="a", model=again, tools=[weather_tool(runs)]))

    assert result.final_output == "It is sunny in Paris."
    # Only the request that failed reached the model; the tool did not run again.
    assert (len(again.calls), runs["weather"]) == (1, 1)
    assert again.calls[0].streamed
    assert task.replayed == {"model": 1, "tool": 1}
    assert run_items(events) == plain_run_items()
    # The replayed call streamed one completed event and no deltas; the live one its own events.
    replayed, live = raw_types(events)[0], raw_types(events)[1:]
    assert replayed == "response.completed"
    assert live[-1] == "response.completed" and "response.output_text.delta" in live
    assert result.context_wrapper.usage.requests == 1


def test_a_stream_cut_off_mid_call_is_not_recorded_and_runs_again():
    runs: Counter[str] = Counter()
    task = Task()

    opening = _events_of(ANSWER)[:3]

    async def cut_off(call):
        for event in opening:
            yield event
        raise ConnectionResetError("the stream broke mid-answer")

    first = ScriptedModel([TOOL_CALL, ModelStep.stream(cut_off)])
    with pytest.raises(ConnectionResetError):
        task.streamed(Agent(name="a", model=first, tools=[weather_tool(runs)]))

    again = ScriptedModel([ANSWER])
    result, _ = task.streamed(Agent(name="a", model=again, tools=[weather_tool(runs)]))
    assert result.final_output == "It is sunny in Paris."
    assert (len(again.calls), runs["weather"]) == (1, 1)


def _events_of(output):
    """The stream events a scripted model sends for an answer."""

    async def collect():
        model = ScriptedModel([output])
        agent = Agent(name="a", model=model)
        result = Runner.run_streamed(agent, "x")
        return [event.data async for event in result.stream_events() if event.type == "raw_response_event"]

    return asyncio.run(collect())


def test_a_streamed_run_that_exceeded_its_turns_asks_the_model_again_for_its_last_answer():
    runs: Counter[str] = Counter()
    task = Task()
    first = ScriptedModel([TOOL_CALL])
    with pytest.raises(MaxTurnsExceeded):
        task.streamed(Agent(name="a", model=first, tools=[weather_tool(runs)]), max_turns=1)

    again = ScriptedModel([ANSWER])
    result, _ = task.streamed(Agent(name="a", model=again, tools=[weather_tool(runs)]), max_turns=1)
    # The answer that made the run exceed its turns is asked again, not replayed into the same failure.
    assert result.final_output == "It is sunny in Paris."
    assert len(again.calls) == 1


def test_a_streamed_run_with_a_session_puts_the_session_back_on_retry(tmp_path):
    runs: Counter[str] = Counter()
    task = Task()

    def session():
        return SQLiteSession("ada", str(tmp_path / "s.db"))

    first = ScriptedModel([TOOL_CALL, RuntimeError("provider outage")])
    with pytest.raises(RuntimeError):
        task.streamed(Agent(name="a", model=first, tools=[weather_tool(runs)]), session=session())
    again = ScriptedModel([ANSWER])
    task.streamed(Agent(name="a", model=again, tools=[weather_tool(runs)]), session=session())

    assert (len(again.calls), runs["weather"]) == (1, 1)
    items = asyncio.run(session().get_items())
    assert [item.get("role") or item["type"] for item in items] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
    ]


def test_outside_a_task_it_is_exactly_runner_run_streamed():
    async def consume():
        model = ScriptedModel([ANSWER])
        result = run_durably_streamed(Agent(name="a", model=model), PROMPT)
        return result, [event async for event in result.stream_events()], model

    result, events, model = asyncio.run(consume())
    assert type(result) is RunResultStreaming
    assert result.final_output == "It is sunny in Paris."
    assert "response.output_text.delta" in raw_types(events) and len(model.calls) == 1
