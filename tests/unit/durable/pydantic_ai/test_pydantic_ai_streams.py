"""
Streamed Pydantic AI runs journaled (``run_durably`` with an ``event_stream_handler``,
``run_stream_durably``, ``iter_durably`` with streamed nodes), with the real ``OpenAIChatModel``
against the local OpenAI-compatible server, which streams as the real API does: which requests
reach the server in each try, how often each tool runs, and what the consumer sees.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError
from pydantic_ai.messages import FunctionToolCallEvent, PartDeltaEvent, PartStartEvent, TextPart, ToolCallPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from secret_forms import ENCODINGS, SECRET
from tries import LoopTries

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import (
    current_idempotency_key,
    iter_durably,
    run_durably,
    run_stream_durably,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

TOOL_THEN_TEXT = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris today.")]


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


class UserCodeFailed(Exception):
    """The task's own code failed after the run: the try fails."""


def _weather_agent(server: FakeOpenAIServer, runs: Counter, keys: list[str] | None = None) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), instructions="Brief.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        if keys is not None:
            keys.append(current_idempotency_key())
        return f"sunny in {city}"

    return agent


def _statuses(server: FakeOpenAIServer) -> list[tuple[int, int, bool, bool]]:
    return [(r.number, r.status, r.streamed, r.cut) for r in server.requests]


def test_a_streamed_run_with_an_event_stream_handler_replays_the_answer_it_completed_as_events():
    runs, keys = Counter(), []
    events: list[list[Any]] = [[], []]
    tries = LoopTries()

    def run(server: FakeOpenAIServer, seen: list[Any]):
        async def handler(ctx: Any, stream: Any) -> None:
            async for event in stream:
                seen.append(event)

        return lambda: run_durably(
            _weather_agent(server, runs, keys), "Weather in Paris?", event_stream_handler=handler
        )

    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(run(server, events[0]))
        assert _statuses(server) == [(1, 200, True, False), (2, 500, True, False)]
        assert runs == {"weather": 1}

        result = tries.attempt(run(server, events[1]))

    assert result.output == "Sunny in Paris today."
    # try 2 sent only the request that failed, streamed, asking exactly what it asked then
    assert _statuses(server) == [(1, 200, True, False), (2, 500, True, False), (3, 200, True, False)]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    assert tries.journal.stats.ran_live == {"model": 1}
    # the handler saw the recorded answer as a stream: its tool call whole, then the call itself
    replayed_parts = [e.part for e in events[1] if isinstance(e, PartStartEvent)]
    assert isinstance(replayed_parts[0], ToolCallPart) and replayed_parts[0].args_as_dict() == {"city": "Paris"}
    calls = [e.part.tool_call_id for e in events[1] if isinstance(e, FunctionToolCallEvent)]
    assert calls == ["call_1"]
    # the live answer still streams in deltas
    assert isinstance(replayed_parts[-1], TextPart)
    assert any(isinstance(e, PartDeltaEvent) for e in events[1])
    assert result.usage.input_tokens == 10


def test_a_stream_cut_off_mid_answer_is_not_recorded_and_its_request_is_sent_again():
    runs = Counter()
    tries = LoopTries()
    texts: list[list[str]] = [[], []]

    def run(server: FakeOpenAIServer, seen: list[str]):
        async def streamed() -> str:
            async with run_stream_durably(_weather_agent(server, runs), "Weather in Paris?") as result:
                async for text in result.stream_text(delta=True):
                    seen.append(text)
            return "".join(seen)

        return streamed

    # request 2 (the answer after the tool call) stops after 2 of its events, its connection dying
    with FakeOpenAIServer(TOOL_THEN_TEXT, cut_requests={2: 2}) as server:
        with pytest.raises(ModelAPIError):
            tries.attempt(run(server, texts[0]))
        assert runs == {"weather": 1}
        stored = tries.stored()
        assert "Sunny" not in stored  # the half answer is nowhere in the journal

        output = tries.attempt(run(server, texts[1]))

    assert output == "Sunny in Paris today."
    assert _statuses(server) == [(1, 200, True, False), (2, 200, True, True), (3, 200, True, False)]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    assert tries.journal.stats.ran_live == {"model": 1}


def test_a_first_stream_cut_off_records_nothing_and_the_retry_sends_every_request():
    runs = Counter()
    tries = LoopTries()

    def run(server: FakeOpenAIServer):
        async def streamed() -> str:
            async with run_stream_durably(_weather_agent(server, runs), "Weather in Paris?") as result:
                return await result.get_output()

        return streamed

    with FakeOpenAIServer(TOOL_THEN_TEXT, cut_requests={1: None}) as server:
        with pytest.raises(ModelAPIError):
            tries.attempt(run(server))
        assert runs == {}
        assert tries.attempt(run(server)) == "Sunny in Paris today."
    assert _statuses(server) == [(1, 200, True, True), (2, 200, True, False), (3, 200, True, False)]
    assert server.requests[1].body == server.requests[0].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {}
    assert tries.journal.stats.ran_live == {"model": 2, "tool": 1}


@pytest.mark.parametrize("how", ["break", "cancel"])
def test_a_stream_its_consumer_left_or_cancelled_before_the_end_is_not_recorded(how):
    runs = Counter()
    tries = LoopTries()

    def run(server: FakeOpenAIServer, leave_early: bool):
        async def streamed() -> str:
            async with run_stream_durably(_weather_agent(server, runs), "Weather in Paris?") as result:
                async for _ in result.stream_text(delta=True, debounce_by=None):
                    if leave_early:
                        if how == "cancel":
                            await result.cancel()
                        break
                else:
                    return await result.get_output()
            raise UserCodeFailed("the task failed after it stopped reading the answer")

        return streamed

    with FakeOpenAIServer(TOOL_THEN_TEXT) as server:
        with pytest.raises(UserCodeFailed):
            tries.attempt(run(server, leave_early=True))
        server.add(reply.text("Sunny in Paris today."))
        assert tries.attempt(run(server, leave_early=False)) == "Sunny in Paris today."
    # the answer whose stream was left is asked again; the tool call before it replays
    assert [r.number for r in server.requests] == [1, 2, 3]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


@ENCODINGS
def test_a_secret_in_a_streamed_answer_is_never_stored_and_the_request_runs_again(encode):
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)
    runs = Counter()
    tries = LoopTries()
    answer = f"The password is {encode(SECRET)} now."

    def run(server: FakeOpenAIServer, fail: bool):
        async def streamed() -> str:
            async with run_stream_durably(_weather_agent(server, runs), "Password?") as result:
                output = await result.get_output()
            if fail:
                raise UserCodeFailed("the task failed after the run")
            return output

        return streamed

    with FakeOpenAIServer([reply.text(answer), reply.text(answer)]) as server:
        with pytest.raises(UserCodeFailed):
            tries.attempt(run(server, fail=True))
        stored = tries.stored()
        assert stored and SECRET not in stored and encode(SECRET) not in stored
        assert json.dumps(SECRET)[1:-1] not in stored
        # stored masked, never replayed as ***: the request runs again and the consumer gets the real answer
        assert tries.attempt(run(server, fail=False)) == answer
    assert [r.number for r in server.requests] == [1, 2]
    assert tries.journal.stats.replayed == {}


def test_iter_durably_replays_a_streamed_node_and_runs_the_rest_live():
    runs = Counter()
    tries = LoopTries()
    kinds: list[list[str]] = [[], []]

    def run(server: FakeOpenAIServer, seen: list[str]):
        async def iterated() -> str:
            async with iter_durably(_weather_agent(server, runs), "Weather in Paris?") as agent_run:
                async for node in agent_run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(agent_run.ctx) as stream:
                            seen.extend([type(event).__name__ async for event in stream])
            assert agent_run.result is not None
            return agent_run.result.output

        return iterated

    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(run(server, kinds[0]))
        assert tries.attempt(run(server, kinds[1])) == "Sunny in Paris today."
    assert [(r.number, r.status, r.streamed) for r in server.requests] == [
        (1, 200, True),
        (2, 500, True),
        (3, 200, True),
    ]
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    # the replayed node streamed the recorded tool call whole: a start and an end, no deltas
    assert kinds[1][:2] == ["PartStartEvent", "PartEndEvent"]


def test_a_changed_prompt_streams_live_from_the_first_request_and_names_what_changed(caplog):
    runs = Counter()
    tries = LoopTries()
    script = [*TOOL_THEN_TEXT[:1], reply.tool_calls(("weather", {"city": "Paris"}, "call_2")), TOOL_THEN_TEXT[1]]

    def run(server: FakeOpenAIServer, prompt: str):
        async def streamed() -> str:
            async with run_stream_durably(_weather_agent(server, runs), prompt) as result:
                return await result.get_output()

        return streamed

    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(run(server, "Weather in Paris?"))
        with caplog.at_level(logging.WARNING):
            assert tries.attempt(run(server, "Weather in Paris, please?")) == "Sunny in Paris today."
    assert [r.number for r in server.requests] == [1, 2, 3, 4]
    assert runs == {"weather": 2}
    assert tries.journal.stats.replayed == {}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("input item 0 differs" in warning for warning in warnings), warnings


def test_outside_a_task_run_stream_durably_is_exactly_the_agents_run_stream():
    runs = Counter()

    async def streamed(server: FakeOpenAIServer) -> str:
        async with run_stream_durably(_weather_agent(server, runs), "Hi") as result:
            return await result.get_output()

    with FakeOpenAIServer([reply.text("Hello.")]) as server:
        assert asyncio.run(streamed(server)) == "Hello."
    assert _statuses(server) == [(1, 200, True, False)]


def test_a_streamed_request_that_would_pass_the_budget_is_not_sent_and_a_replayed_one_costs_nothing():
    from airflow.providers.common.ai.durable.core.host import current_host
    from airflow.providers.common.ai.durable.pydantic_ai import UsageBudget

    runs = Counter()
    storage = InMemoryStorage()
    budget = UsageBudget(max_requests=2)

    async def streamed(server: FakeOpenAIServer) -> str:
        async with run_stream_durably(_weather_agent(server, runs), "Weather in Paris?", budget=budget) as result:
            return await result.get_output()

    with FakeOpenAIServer(TOOL_THEN_TEXT, cut_requests={2: None}) as server:
        with journal_scope(DurableJournal(storage, host=current_host().for_try(1))), pytest.raises(ModelAPIError):
            asyncio.run(streamed(server))
        with (
            journal_scope(DurableJournal(storage, host=current_host().for_try(2))),
            pytest.raises(Exception, match=r"the request to model 'gpt-4o' at 1\.3 was not sent") as refused,
        ):
            asyncio.run(streamed(server))

    # try 1 streamed two requests (one completed, one cut off); try 2 replayed the first and the
    # tool call for free, and its first live request was refused before it was sent
    assert _statuses(server) == [(1, 200, True, False), (2, 200, True, True)]
    assert runs == {"weather": 1}
    assert "max_requests=2. Its tries spent 2 (try 1: 2, try 2: 0)." in str(refused.value)
    assert type(refused.value).__name__ == "AirflowFailException"


def test_a_fail_tool_found_in_flight_stops_the_try_as_its_streamed_answer_replays():
    from airflow.providers.common.ai.durable.pydantic_ai import in_flight

    runs = Counter()
    tries = LoopTries()

    def make_agent(server: FakeOpenAIServer) -> Agent:
        agent = _weather_agent(server, runs)

        @in_flight("fail")
        @agent.tool_plain
        def transfer(amount: int) -> str:
            """Transfer money."""
            runs["transfer"] += 1
            raise WorkerDied

        return agent

    def run(server: FakeOpenAIServer):
        async def streamed() -> str:
            async with run_stream_durably(make_agent(server), "Send 5.") as result:
                return await result.get_output()

        return streamed

    script = [reply.tool_calls(("transfer", {"amount": 5}, "call_1")), reply.text("Done.")]
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(run(server))
        with pytest.raises(Exception, match=r"tool 'transfer' was in flight at 1\.2") as failed:
            tries.attempt(run(server))
    assert type(failed.value).__name__ == "AirflowFailException"
    assert runs == {"transfer": 1}
    assert _statuses(server) == [(1, 200, True, False)]


@pytest.mark.parametrize("entry_point", [run_stream_durably, iter_durably], ids=["run_stream_durably", "iter_durably"])
def test_a_streamed_entry_point_refuses_what_is_no_pydantic_ai_agent_at_the_call(entry_point):
    with pytest.raises(
        TypeError, match=rf"durable\.pydantic_ai\.{entry_point.__name__} runs a pydantic_ai\.Agent, not str; "
    ):
        entry_point("not an agent", "Hi")
    with pytest.raises(ValueError, match=r"durable_key must be a non-empty string"):
        entry_point(Agent("test"), "Hi", durable_key=" ")
