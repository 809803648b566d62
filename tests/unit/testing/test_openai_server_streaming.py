"""FakeOpenAIServer speaks server-sent events as the real API does, for the openai client and the SDK."""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
)
from openai import APIConnectionError, AsyncOpenAI, InternalServerError
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

# What the client raises reading a cut-off stream: openai 3 wraps httpx's error, openai 2 (the
# client of openai-agents 0.20) lets it through.
CUT_OFF = (APIConnectionError, httpx.RemoteProtocolError)

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
TEXT = "It is sunny in Paris, 21 °C."
ODD_TEXTS = [
    "",
    "Done.",
    "line one\n\ndata: [DONE]\n\nevent: response.completed\r\n",
    "👩‍👩‍👧 é (e + U+0301) שלום \u202e \x00 \ud7ff \U0010ffff",
    "  leading and trailing spaces  ",
    # 2,000 deltas, a stream of ~300 KB. (The openai client copies its snapshot at each delta: at
    # 20,000 words each of these tests took 10 s, 80 s in a loaded CI.)
    "word " * 2_000,
]


def _post(server: FakeOpenAIServer, path: str, body: Any) -> tuple[int, str, str]:
    """(status, content type, body text) of a POST, sent with the standard library."""
    request = urllib.request.Request(
        server.base_url.removesuffix("/v1") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            try:
                body = response.read()
            except http.client.IncompleteRead as cut:
                body = cut.partial
            return response.status, response.headers["Content-Type"], body.decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def _sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event of a stream's body."""
    events = []
    for block in text.split("\n\n"):
        if block:
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            assert set(fields) <= {"event", "data"}, block
            events.append((fields.get("event"), fields["data"]))
    return events


def _call(call: Any) -> tuple[str, str, str, str]:
    return call.id, call.type, call.function.name, call.function.arguments


def _raw_chat_chunks(server: FakeOpenAIServer, **options: Any) -> list[ChatCompletionChunk]:
    status, content_type, text = _post(server, CHAT, {"model": "m", "messages": MESSAGES, "stream": True, **options})
    assert (status, content_type) == (200, "text/event-stream; charset=utf-8")
    events = _sse_events(text)
    assert events[-1] == (None, "[DONE]")
    assert all(name is None for name, _ in events)
    return [ChatCompletionChunk.model_validate_json(data, strict=True) for _, data in events[:-1]]


def _raw_response_events(server: FakeOpenAIServer) -> list[Any]:
    status, content_type, text = _post(server, RESPONSES, {"model": "m", "input": "Weather?", "stream": True})
    assert (status, content_type) == (200, "text/event-stream; charset=utf-8")
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    events = []
    for name, data in _sse_events(text):
        event = adapter.validate_json(data)
        assert name == event.type
        events.append(event)
    return events


def test_a_streamed_chat_completion_is_chunks_of_the_real_shape_ending_with_usage_and_done():
    with FakeOpenAIServer([reply.text(TEXT, usage=(7, 3))]) as server:
        chunks = _raw_chat_chunks(server, stream_options={"include_usage": True})

    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    assert deltas[0].role == "assistant"
    assert len(deltas) > 4
    assert "".join(delta.content or "" for delta in deltas) == TEXT
    assert [chunk.choices[0].finish_reason for chunk in chunks[:-1]] == [None] * (len(chunks) - 2) + ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (7, 3)
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert {chunk.id for chunk in chunks} == {"chatcmpl-1"}
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}


def test_a_streamed_chat_completion_has_no_usage_chunk_unless_asked():
    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        chunks = _raw_chat_chunks(server)

    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


def test_streamed_tool_calls_are_index_keyed_deltas_of_id_name_then_argument_fragments():
    script = [
        reply.tool_calls(("get_weather", {"city": "Paris"}, "call_1"), ("get_time", {"zone": "Europe/Paris"}, "call_2"))
    ]
    with FakeOpenAIServer(script) as server:
        chunks = _raw_chat_chunks(server)

    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks[1:-1]:
        (call,) = chunk.choices[0].delta.tool_calls or []
        if call.index not in calls:
            assert call.id is not None and call.function is not None and call.function.name is not None
            calls[call.index] = {"id": call.id, "name": call.function.name, "arguments": call.function.arguments}
        else:
            assert call.id is None and call.function is not None and call.function.name is None
            calls[call.index]["arguments"] += call.function.arguments
    assert calls == {
        0: {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        1: {"id": "call_2", "name": "get_time", "arguments": '{"zone": "Europe/Paris"}'},
    }
    assert chunks[0].choices[0].delta.content is None
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("text", ODD_TEXTS, ids=range(len(ODD_TEXTS)))
def test_the_openai_client_assembles_a_streamed_chat_completion_into_the_unstreamed_one(text):
    arguments = {"note": text[:1000], "n": 10**30}
    script = [reply.text(text), reply.tool_calls(("save", arguments, "call_1"))]

    async def both() -> list[Any]:
        with FakeOpenAIServer(script * 2) as server:
            client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            plain = [await client.chat.completions.create(model="m", messages=MESSAGES) for _ in script]
            streamed = []
            for _ in script:
                async with client.chat.completions.stream(
                    model="m", messages=MESSAGES, stream_options={"include_usage": True}
                ) as stream:
                    streamed.append(await stream.get_final_completion())
            assert [request.streamed for request in server.requests] == [False, False, True, True]
            return [plain, streamed]

    plain, streamed = asyncio.run(both())
    for unstreamed, assembled in zip(plain, streamed, strict=True):
        assert assembled.choices[0].message.content == unstreamed.choices[0].message.content
        assert assembled.choices[0].finish_reason == unstreamed.choices[0].finish_reason
        assert assembled.usage == unstreamed.usage
        assert [_call(call) for call in assembled.choices[0].message.tool_calls or []] == [
            _call(call) for call in unstreamed.choices[0].message.tool_calls or []
        ]
    assert json.loads(streamed[1].choices[0].message.tool_calls[0].function.arguments) == arguments


def test_a_streamed_response_is_the_real_event_sequence_with_sequence_numbers():
    script = [reply.text(TEXT, usage=(7, 3)), reply.tool_calls(("get_weather", {"city": "Paris"}, "call_1"))]
    with FakeOpenAIServer(script) as server:
        text_events = _raw_response_events(server)
        call_events = _raw_response_events(server)

    assert [event.type for event in text_events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * (len(text_events) - 8),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert len(text_events) - 8 > 3
    assert [event.type for event in call_events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * (len(call_events) - 6),
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert len(call_events) - 6 > 1
    for events in (text_events, call_events):
        assert [event.sequence_number for event in events] == list(range(len(events)))
        assert [events[0].response.status, events[0].response.output, events[0].response.usage] == [
            "in_progress",
            [],
            None,
        ]
        assert events[-1].response.status == "completed"
    deltas = [event.delta for event in text_events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == TEXT == text_events[-1].response.output[0].content[0].text
    assert text_events[-1].response.usage.input_tokens == 7
    arguments = "".join(e.delta for e in call_events if e.type == "response.function_call_arguments.delta")
    assert arguments == '{"city": "Paris"}' == call_events[-1].response.output[0].arguments
    assert call_events[2].item.status == "in_progress"
    assert call_events[-2].item.status == "completed"


@pytest.mark.parametrize("text", ODD_TEXTS, ids=range(len(ODD_TEXTS)))
def test_the_openai_client_assembles_a_streamed_response_into_the_unstreamed_one(text):
    script = [reply.text(text), reply.tool_calls(("save", {"note": text[:1000]}, "call_1"), ("log", "{}", "call_2"))]

    async def both() -> tuple[list[Any], list[Any], list[str]]:
        with FakeOpenAIServer(script * 2) as server:
            client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            plain = [await client.responses.create(model="m", input="hi") for _ in script]
            streamed, snapshots = [], []
            for _ in script:
                async with client.responses.stream(model="m", input="hi") as stream:
                    async for event in stream:
                        if event.type in ("response.output_text.delta", "response.function_call_arguments.delta"):
                            snapshots.append(event.snapshot)
                    streamed.append(await stream.get_final_response())
            return plain, streamed, snapshots

    plain, streamed, snapshots = asyncio.run(both())
    for unstreamed, assembled in zip(plain, streamed, strict=True):
        # The stream helper adds what it parsed: "parsed" and "parsed_arguments".
        item = {"id": True, "parsed_arguments": True, "content": {"__all__": {"parsed"}}}
        drop = {"id": True, "created_at": True, "output": {"__all__": item}}
        assert assembled.model_dump(exclude=drop) == unstreamed.model_dump(exclude=drop)
    # The client's own accumulation of the deltas ends at the final text and arguments.
    if text:
        assert text in snapshots
    assert '{"note": ' + json.dumps(text[:1000]) + "}" in snapshots


def test_a_reasoning_reply_starts_the_response_with_its_summary_streamed_as_the_real_api_streams_it():
    script = [reply.tool_calls(("get_weather", {"city": "Paris"}, "call_1"), reasoning="Ask the weather tool.")]

    async def both() -> tuple[Any, Any, list[str]]:
        with FakeOpenAIServer(script * 2) as server:
            client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            plain = await client.responses.create(model="m", input="hi", include=["reasoning.encrypted_content"])
            async with client.responses.stream(model="m", input="hi") as stream:
                types = [event.type async for event in stream]
                return plain, await stream.get_final_response(), types

    plain, streamed, types = asyncio.run(both())
    reasoning = plain.output[0]
    assert (reasoning.type, reasoning.id, reasoning.summary[0].text) == ("reasoning", "rs_1", "Ask the weather tool.")
    # encrypted only when the request's include asks for it, as the real API does
    assert reasoning.encrypted_content == "encrypted-reasoning-1"
    assert streamed.output[0].encrypted_content is None
    assert [item.type for item in streamed.output] == ["reasoning", "function_call"]
    drop = {"id": True, "created_at": True, "output": {0: {"id", "encrypted_content"}, 1: {"id", "parsed_arguments"}}}
    assert streamed.model_dump(exclude=drop) == plain.model_dump(exclude=drop)
    reasoning_events = [t for t in types if "reasoning" in t]
    assert reasoning_events[0] == "response.reasoning_summary_part.added"
    assert reasoning_events[-2:] == ["response.reasoning_summary_text.done", "response.reasoning_summary_part.done"]
    assert reasoning_events.count("response.reasoning_summary_text.delta") > 1


def test_a_reasoning_reply_asked_for_by_chat_completions_is_refused_and_waits_for_the_responses_api():
    with FakeOpenAIServer([reply.text("Done.", reasoning="Think.")]) as server:
        status, _, body = _post(server, CHAT, {"model": "m", "messages": MESSAGES})
        assert status == 500 and "only /v1/responses answers" in body
        assert server.remaining_replies == 1
        assert _post(server, RESPONSES, {"model": "m", "input": "hi"})[0] == 200


def _agent(model_class: type, server: FakeOpenAIServer, **kwargs: Any) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    return Agent(
        name="forecaster",
        instructions="Tell the weather.",
        model=model_class(model="gpt-4o", openai_client=client),
        # Usage chunks come only when asked, and the SDK asks only api.openai.com by default.
        model_settings=ModelSettings(include_usage=True),
        **kwargs,
    )


async def _run_streamed(agent: Agent, prompt: str) -> tuple[Any, list[Any]]:
    result = Runner.run_streamed(agent, prompt)
    return result, [event async for event in result.stream_events()]


MODEL_CLASSES = [OpenAIResponsesModel, OpenAIChatCompletionsModel]


@pytest.mark.parametrize("model_class", MODEL_CLASSES)
def test_run_streamed_calls_the_tool_then_streams_the_final_text_as_the_unstreamed_run_answers(model_class):
    runs = Counter()

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs[city] += 1
        return f"sunny in {city}"

    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text(TEXT)]
    with FakeOpenAIServer(script) as server:
        result, events = asyncio.run(_run_streamed(_agent(model_class, server, tools=[weather]), "Paris?"))
        requests = server.requests
    with FakeOpenAIServer(script) as server:
        unstreamed = Runner.run_sync(_agent(model_class, server, tools=[weather]), "Paris?")

    assert result.final_output == TEXT == unstreamed.final_output
    assert [item.to_input_item() for item in result.new_items] == [
        item.to_input_item() for item in unstreamed.new_items
    ]
    assert runs == {"Paris": 2}
    assert [(r.number, r.status, r.streamed) for r in requests] == [(1, 200, True), (2, 200, True)]
    assert result.context_wrapper.usage.requests == 2
    assert result.context_wrapper.usage.input_tokens == 20
    item_events = [event.name for event in events if event.type == "run_item_stream_event"]
    assert item_events == ["tool_called", "tool_output", "message_output_created"]
    raw = [event.data for event in events if event.type == "raw_response_event"]
    assert "".join(data.delta for data in raw if data.type == "response.output_text.delta") == TEXT
    assert "".join(data.delta for data in raw if data.type == "response.function_call_arguments.delta") == (
        '{"city": "Paris"}'
    )
    assert [data.type for data in raw].count("response.completed") == 2


@pytest.mark.parametrize("model_class", MODEL_CLASSES)
def test_run_streamed_follows_a_handoff_streamed_as_a_tool_call(model_class):
    with FakeOpenAIServer(
        [reply.tool_calls(("transfer_to_billing", {}, "call_1")), reply.text("Billing here.")]
    ) as server:
        billing = _agent(model_class, server)
        billing.name = "billing"
        triage = _agent(model_class, server, handoffs=[billing])
        result, events = asyncio.run(_run_streamed(triage, "My invoice?"))
        requests = server.requests

    assert result.final_output == "Billing here."
    assert result.last_agent is billing
    assert [event.name for event in events if event.type == "run_item_stream_event"] == [
        "handoff_requested",
        "handoff_occured",
        "message_output_created",
    ]
    assert [event.new_agent.name for event in events if event.type == "agent_updated_stream_event"] == [
        "forecaster",
        "billing",
    ]
    assert [r.streamed for r in requests] == [True, True]


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
def test_a_cut_off_stream_raises_in_the_client_and_its_reply_waits_for_the_retry(path):
    async def cut_then_retry(server: FakeOpenAIServer) -> list[Any]:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

        async def stream(seen: list[Any]) -> None:
            if path == CHAT:
                chunks = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            else:
                chunks = await client.responses.create(model="m", input="hi", stream=True)
            async for chunk in chunks:
                seen.append(chunk)

        server.cut_next(after_events=3)
        seen_before_the_cut: list[Any] = []
        with pytest.raises(CUT_OFF):
            await stream(seen_before_the_cut)
        seen_by_the_retry: list[Any] = []
        await stream(seen_by_the_retry)
        return [seen_before_the_cut, seen_by_the_retry]

    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        before, retry = asyncio.run(cut_then_retry(server))
        assert [(r.status, r.cut, r.streamed) for r in server.requests] == [(200, True, True), (200, False, True)]
        assert server.remaining_replies == 0
    assert len(before) == 3
    # The cut stream began the answer the retry then got whole.
    # Ids and the chunks' "created" (the second the server made them) differ between the two streams.
    unshared = {"id", "response", "item_id", "item", "created"}
    assert [event.model_dump(exclude=unshared) for event in before] == [
        event.model_dump(exclude=unshared) for event in retry[:3]
    ]


@pytest.mark.parametrize("model_class", MODEL_CLASSES)
def test_run_streamed_raises_when_its_second_model_stream_is_cut_off_mid_answer(model_class):
    runs = Counter()

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs[city] += 1
        return "sunny"

    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text(TEXT)]
    with FakeOpenAIServer(script, cut_requests={2}) as server:
        with pytest.raises(CUT_OFF):
            asyncio.run(_run_streamed(_agent(model_class, server, tools=[weather]), "Paris?"))
        assert [(r.number, r.cut) for r in server.requests] == [(1, False), (2, True)]
        assert server.remaining_replies == 1
    assert runs == {"Paris": 1}


def test_a_cut_off_stream_never_sends_its_last_event_however_late_the_cut():
    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        server.cut_next(after_events=10_000)
        status, _, text = _post(server, RESPONSES, {"model": "m", "input": "hi", "stream": True})
    assert status == 200
    assert [name for name, _ in _sse_events(text)][-1] == "response.output_item.done"


def test_an_unstreamed_answer_can_be_cut_off_too():
    async def cut(server: FakeOpenAIServer) -> None:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        await client.responses.create(model="m", input="hi")

    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        server.cut_later(1)
        with pytest.raises(APIConnectionError):
            asyncio.run(cut(server))
        assert [(r.cut, r.streamed) for r in server.requests] == [(True, False)]
        assert server.remaining_replies == 1


@pytest.mark.parametrize("after_events", [-1, True, "3"])
def test_a_cut_needs_a_count_of_events(after_events):
    with FakeOpenAIServer() as server, pytest.raises((ValueError, TypeError), match="after_events"):
        server.cut_next(after_events=after_events)


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
def test_an_injected_failure_of_a_streamed_request_is_an_http_500_and_consumes_no_reply(path):
    async def fail_then_stream(server: FakeOpenAIServer) -> str:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

        async def streamed_text() -> str:
            if path == CHAT:
                chunks = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                return "".join([chunk.choices[0].delta.content or "" async for chunk in chunks])
            events = await client.responses.create(model="m", input="hi", stream=True)
            return "".join([event.delta async for event in events if event.type == "response.output_text.delta"])

        server.fail_next()
        with pytest.raises(InternalServerError, match=f"injected failure of request #1 \\(POST {path}\\)"):
            await streamed_text()
        return await streamed_text()

    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        assert asyncio.run(fail_then_stream(server)) == TEXT
        assert [(r.status, r.streamed, r.path) for r in server.requests] == [(500, True, path), (200, True, path)]


def test_failures_win_over_cuts():
    with FakeOpenAIServer([reply.text(TEXT)], fail_requests={1}, cut_requests={1}) as server:
        status, _, _ = _post(server, CHAT, {"model": "m", "messages": MESSAGES, "stream": True})
        assert (status, server.requests[0].cut, server.remaining_replies) == (500, False, 1)


REFUSED = [
    (CHAT, {"n": 2}, '"n": 2 is not supported'),
    (CHAT, {"modalities": ["text", "audio"]}, "audio output is not supported"),
    (CHAT, {"audio": {"voice": "alloy", "format": "wav"}}, "audio output is not supported"),
    (CHAT, {"logprobs": True}, "log probabilities are not supported"),
    (CHAT, {"top_logprobs": 2}, "log probabilities are not supported"),
    (CHAT, {"stream": "yes"}, '"stream" must be true or false'),
    (CHAT, {"stream_options": {"include_usage": True}}, '"stream_options" is only allowed with "stream": true'),
    (
        CHAT,
        {"stream": True, "stream_options": {"chunk_size": 4}},
        "\"stream_options\" {'chunk_size': 4} is not supported",
    ),
    (
        RESPONSES,
        {"stream": True, "stream_options": {"include_usage": True}},
        "is not supported, only ['include_obfuscation']",
    ),
    (RESPONSES, {"top_logprobs": 3}, "log probabilities are not supported"),
    (RESPONSES, {"include": ["message.output_text.logprobs"]}, "\"include\": ['message.output_text.logprobs']"),
    (RESPONSES, {"background": True, "stream": True}, '"background": true is not supported'),
]


@pytest.mark.parametrize(("path", "options", "message"), REFUSED)
def test_what_the_server_does_not_implement_is_refused_with_a_400_naming_it(path, options, message):
    body = {"model": "m", "messages": MESSAGES} if path == CHAT else {"model": "m", "input": "hi"}
    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        status, content_type, text = _post(server, path, body | options)
        assert (status, content_type) == (400, "application/json")
        assert server.remaining_replies == 1
    error = json.loads(text)["error"]
    assert message in error["message"]
    assert error["message"].startswith(f"FakeOpenAIServer: request #1 (POST {path}): ")


@pytest.mark.parametrize(
    ("path", "options"),
    [
        (CHAT, {"n": 1, "stream": True, "stream_options": {"include_usage": False, "include_obfuscation": False}}),
        (CHAT, {"modalities": ["text"], "logprobs": False, "stream": False}),
        (RESPONSES, {"stream": True, "stream_options": {"include_obfuscation": True}, "background": False}),
        (RESPONSES, {"include": ["reasoning.encrypted_content"], "top_logprobs": 0}),
    ],
)
def test_options_the_server_implements_are_answered(path, options):
    body = {"model": "m", "messages": MESSAGES} if path == CHAT else {"model": "m", "input": "hi"}
    with FakeOpenAIServer([reply.text(TEXT)]) as server:
        status, _, _ = _post(server, path, body | options)
    assert status == 200


def test_concurrent_streams_each_get_one_whole_reply_of_the_script():
    texts = [f"Answer number {i}: {'ok ' * i}" for i in range(12)]

    async def together(server: FakeOpenAIServer) -> list[str]:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

        async def streamed_text() -> str:
            events = await client.responses.create(model="m", input="hi", stream=True)
            return "".join([event.delta async for event in events if event.type == "response.output_text.delta"])

        return await asyncio.gather(*(streamed_text() for _ in texts))

    with FakeOpenAIServer([reply.text(text) for text in texts]) as server:
        answers = asyncio.run(together(server))
        assert server.remaining_replies == 0
    assert sorted(answers) == sorted(texts)
