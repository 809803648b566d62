"""
Pydantic AI runs journaled with its real ``OpenAIResponsesModel`` (the Responses API,
``/v1/responses``) against the local OpenAI-compatible server: which requests reach the server in
each try and what they send, how often the tool runs, and that the request after a replayed answer
is the one the plain run sends, also where it continues from the answer's stored response
(``openai_previous_response_id``).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import logging
from collections import Counter
from typing import Any

import pytest

# A module of the real package: without Pydantic AI, "pydantic_ai" alone would import this test folder
# as a namespace package (the durable tests' conftest puts tests/unit/durable on sys.path).
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.openai import OpenAIProvider
from secret_forms import ENCODINGS, SECRET
from tries import LoopTries

from airflow.providers.common.ai.durable.pydantic_ai import run_durably, run_durably_sync, run_stream_durably
from airflow.providers.common.ai.durable.pydantic_ai._requests import history_digests
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

PROMPT = "Weather in Paris?"
TOOL_THEN_TEXT = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
TOOLS = [
    {
        "type": "function",
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "type": "object",
        },
        "strict": True,
    }
]
#: Continue each request from the stored response of the one before (the server keeps the history).
CONTINUED = {"openai_previous_response_id": "auto"}


class UserCodeFailed(Exception):
    """The task's own code failed after the run: the try fails."""


def _weather_agent(
    server: FakeOpenAIServer,
    runs: Counter,
    settings: dict[str, Any] | None = None,
    model_name: str = "gpt-4o",
    history_digest_key: bytes | None = None,
    wrapped: bool = False,
    **options: Any,
) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    model = OpenAIResponsesModel(
        model_name,
        provider=OpenAIProvider(openai_client=client),
        settings=settings,
        history_digest_key=history_digest_key,
    )
    agent = Agent(WrapperModel(model) if wrapped else model, instructions="Be brief.", **options)

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        return f"sunny in {city}"

    return agent


def _run(agent: Agent, prompt: str = PROMPT):
    return lambda: run_durably(agent, prompt)


def _streamed_with_a_handler(agent: Agent, prompt: str = PROMPT):
    async def handler(ctx: Any, stream: Any) -> None:
        async for _ in stream:
            pass

    return lambda: run_durably(agent, prompt, event_stream_handler=handler)


def _streamed(agent: Agent, prompt: str = PROMPT):
    async def streamed() -> Any:
        async with run_stream_durably(agent, prompt) as result:
            output = await result.get_output()
        return type("Result", (), {"output": output})()

    return streamed


WAYS = pytest.mark.parametrize(
    "way", [_run, _streamed_with_a_handler, _streamed], ids=["run", "event_stream_handler", "run_stream"]
)


def _inputs(server: FakeOpenAIServer) -> list[tuple[int, str, int, bool, list[Any]]]:
    return [(r.number, r.path, r.status, r.streamed, r.body["input"]) for r in server.requests]


FIRST_INPUT = [{"role": "user", "content": PROMPT}]
SECOND_INPUT = [
    {"role": "user", "content": PROMPT},
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"},
]


@WAYS
def test_a_retry_after_a_failed_second_request_replays_the_first_and_the_tool_call(way):
    runs = Counter()
    tries = LoopTries()
    streamed = way is not _run
    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(way(_weather_agent(server, runs)))
        # try 1: a model call and a tool call completed, then the second request failed
        assert _inputs(server) == [
            (1, "/v1/responses", 200, streamed, FIRST_INPUT),
            (2, "/v1/responses", 500, streamed, SECOND_INPUT),
        ]
        assert server.requests[0].body["tools"] == TOOLS
        assert server.requests[0].body["instructions"] == "Be brief."
        assert runs == {"weather": 1}

        result = tries.attempt(way(_weather_agent(server, runs)))

    assert result.output == "Sunny in Paris."
    # try 2 sent only the request that failed, asking exactly what it asked then
    assert _inputs(server)[2:] == [(3, "/v1/responses", 200, streamed, SECOND_INPUT)]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    assert tries.journal.stats.ran_live == {"model": 1}
    # the task succeeded: the journal is deleted
    assert tries.storage.stored_texts()
    tries.journal.finish(succeeded=True)
    assert tries.storage.stored_texts() == {}


def test_a_changed_prompt_runs_live_from_the_first_request_and_names_what_changed(caplog):
    runs = Counter()
    # A failed request takes no reply: the second tool call answers try 2's first request.
    script = [TOOL_THEN_TEXT[0], reply.tool_calls(("weather", {"city": "Paris"}, "call_2")), TOOL_THEN_TEXT[1]]
    tries = LoopTries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_run(_weather_agent(server, runs)))
        with caplog.at_level(logging.WARNING):
            result = tries.attempt(_run(_weather_agent(server, runs), "Weather in Paris, please?"))
    assert result.output == "Sunny in Paris."
    # try 2 replayed nothing: both its requests and its tool call ran live, with the new prompt
    assert [(number, status, body_input[0]) for number, _, status, _, body_input in _inputs(server)[2:]] == [
        (3, 200, {"role": "user", "content": "Weather in Paris, please?"}),
        (4, 200, {"role": "user", "content": "Weather in Paris, please?"}),
    ]
    assert server.requests[3].body["input"][1]["call_id"] == "call_2"
    assert runs == {"weather": 2}
    assert tries.journal.stats.replayed == {}
    assert tries.journal.stats.ran_live == {"model": 2, "tool": 1}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("input item 0 differs" in warning and "recorded run 1" in warning for warning in warnings), warnings


@WAYS
def test_a_replayed_reasoning_item_is_sent_back_with_its_id_and_encrypted_content_as_the_plain_run_does(way):
    runs = Counter()
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1"), reasoning="Paris weather: ask the tool."),
        reply.text("Sunny in Paris."),
    ]
    with FakeOpenAIServer(script) as server:
        asyncio.run(way(_weather_agent(server, runs, model_name="gpt-5"))())
    plain = [r.body for r in server.requests]
    # a reasoning model's next request hands back the reasoning item and the call under their ids
    assert plain[1]["include"] == ["reasoning.encrypted_content"]
    assert plain[1]["input"][1:3] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Paris weather: ask the tool."}],
            "encrypted_content": "encrypted-reasoning-1",
        },
        {**SECOND_INPUT[1], "id": "fc_1_0"},
    ]

    tries = LoopTries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(way(_weather_agent(server, runs, model_name="gpt-5")))
        tries.attempt(way(_weather_agent(server, runs, model_name="gpt-5")))
    assert [r.body for r in server.requests] == [plain[0], plain[1], plain[1]]
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


@WAYS
def test_a_replayed_answer_lets_the_next_request_continue_from_its_stored_response_as_the_plain_run_does(way):
    runs = Counter()
    with FakeOpenAIServer(TOOL_THEN_TEXT) as server:
        asyncio.run(way(_weather_agent(server, runs, CONTINUED))())
    plain = [r.body for r in server.requests]
    # the plain run's second request sends only the tool's output, after the first response
    assert plain[1]["previous_response_id"] == "resp_1"
    assert plain[1]["input"] == [SECOND_INPUT[-1]]

    tries = LoopTries()
    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(way(_weather_agent(server, runs, CONTINUED)))
        assert tries.attempt(way(_weather_agent(server, runs, CONTINUED))).output == "Sunny in Paris."
    # try 1 asked as the plain run asks; so does try 2 after the replayed answer, not the whole history
    assert [r.body for r in server.requests] == [plain[0], plain[1], plain[1]]
    assert runs == {"weather": 2}  # once in the plain run, once in try 1
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


@pytest.mark.parametrize("wrapped", [False, True], ids=["the model", "a model wrapping it"])
def test_a_replayed_answer_of_a_model_with_a_history_digest_key_is_continued_from_too(wrapped):
    runs = Counter()
    tries = LoopTries()

    def agent(server: FakeOpenAIServer) -> Agent:
        return _weather_agent(server, runs, CONTINUED, history_digest_key=b"digest-key", wrapped=wrapped)

    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_run(agent(server)))
        tries.attempt(_run(agent(server)))
    assert server.requests[2].body == server.requests[1].body
    assert server.requests[2].body["previous_response_id"] == "resp_1"


def test_a_replayed_answer_whose_earlier_history_a_later_request_changed_is_not_continued_from():
    runs = Counter()

    def redacted_once_the_tool_answered(messages: list[ModelMessage]) -> list[ModelMessage]:
        # Changes what came before the first response, once the tool answered: the server's copy
        # of that history is not the one sent now, so the plain run sends the whole history.
        if not any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
            return messages
        return [
            ModelRequest(parts=[UserPromptPart("[redacted]")])
            if any(isinstance(part, UserPromptPart) for part in message.parts)
            else message
            for message in messages
        ]

    def agent(server: FakeOpenAIServer) -> Agent:
        return _weather_agent(server, runs, CONTINUED, capabilities=[ProcessHistory(redacted_once_the_tool_answered)])

    with FakeOpenAIServer(TOOL_THEN_TEXT) as server:
        agent(server).run_sync(PROMPT)
    plain = [r.body for r in server.requests]
    assert "previous_response_id" not in plain[1]
    assert plain[1]["input"][0] == {"role": "user", "content": "[redacted]"}

    tries = LoopTries()
    with FakeOpenAIServer(TOOL_THEN_TEXT, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_run(agent(server)))
        tries.attempt(_run(agent(server)))
    assert [r.body for r in server.requests] == [plain[0], plain[1], plain[1]]
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


@ENCODINGS
@pytest.mark.parametrize("way", [_run, _streamed], ids=["run", "run_stream"])
def test_a_secret_in_an_answer_is_never_stored_and_the_request_runs_again(encode, way):
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)
    runs = Counter()
    tries = LoopTries()
    answer = f"The password is {encode(SECRET)} now."

    def failing_after(run: Any):
        async def then_fail() -> Any:
            await run()
            raise UserCodeFailed("the task failed after the run")

        return then_fail

    with FakeOpenAIServer([reply.text(answer), reply.text(answer)]) as server:
        with pytest.raises(UserCodeFailed):
            tries.attempt(failing_after(way(_weather_agent(server, runs), "Password?")))
        stored = tries.stored()
        assert stored and SECRET not in stored and encode(SECRET) not in stored
        assert json.dumps(SECRET)[1:-1] not in stored
        # stored masked, never replayed as ***: the request runs again and the run gets the real answer
        assert tries.attempt(way(_weather_agent(server, runs), "Password?")).output == answer
    assert [(r.number, r.status, r.body["input"]) for r in server.requests] == [
        (1, 200, [{"role": "user", "content": "Password?"}]),
        (2, 200, [{"role": "user", "content": "Password?"}]),
    ]
    assert tries.journal.stats.replayed == {}


def test_the_history_digest_of_an_answer_a_secret_went_into_is_never_stored():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)
    runs = Counter()
    tries = LoopTries()
    results = []

    def agent(server: FakeOpenAIServer) -> Agent:
        built = _weather_agent(server, runs, CONTINUED)

        @built.tool_plain
        def fetch_credential() -> str:
            """The credential."""
            runs["fetch_credential"] += 1
            return f"it is {SECRET}"

        return built

    def failing_after(run: Any):
        async def then_fail() -> Any:
            results.append(await run())
            raise UserCodeFailed("the task failed after the run")

        return then_fail

    script = [reply.tool_calls(("fetch_credential", {}, "call_1")), reply.text("Ok.")]
    with FakeOpenAIServer(script) as server:
        with pytest.raises(UserCodeFailed):
            tries.attempt(failing_after(_run(agent(server), "Password?")))
        # Pydantic AI's digest of the history before each answer is an unkeyed hash of it, the
        # tool's output with the secret included: the journal keeps none of them
        digests = [m.history_digest for m in results[0].all_messages() if isinstance(m, ModelResponse)]
        assert len(digests) == 2 and all(digests)
        stored = tries.stored()
        assert stored and not any(digest in stored for digest in digests)
        assert SECRET not in stored
        # the answers still replay; the tool, whose output was stored masked, runs again
        assert tries.attempt(_run(agent(server), "Password?")).output == "Ok."
    assert [r.number for r in server.requests] == [1, 2]
    assert runs == {"fetch_credential": 2}
    assert tries.journal.stats.replayed == {"model": 2}


def test_outside_a_task_it_is_exactly_the_agents_run():
    with FakeOpenAIServer([reply.text("Hello.")]) as server:
        result = run_durably_sync(_weather_agent(server, Counter()), "Hi")
    assert result.output == "Hello."
    assert [(r.path, r.body["input"]) for r in server.requests] == [
        ("/v1/responses", [{"role": "user", "content": "Hi"}])
    ]


def test_the_private_names_of_pydantic_ai_a_replay_relies_on_are_still_there():
    """``_requests.continued_from_this_history`` takes a replayed answer's history digest with them."""
    version = importlib.metadata.version("pydantic-ai-slim")
    missing = []
    if history_digests() is None:
        missing.append("continuation_digest and history_hasher (models._history_digest, 2.78; models.openai's, 2.68)")
    model = OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(api_key="x"), history_digest_key=b"key")
    if getattr(model, "_history_digest_key", None) != b"key":
        missing.append("OpenAIResponsesModel._history_digest_key")
    assert not missing, (
        f"pydantic-ai-slim {version} no longer has {missing}: a replayed Responses answer would make the next "
        "request send the whole history instead of continuing from its response (openai_previous_response_id)"
    )
