"""A scripted, OpenAI-compatible HTTP server for tests and demos (standard library only).

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` from a script, plain or
streamed, so the real ``openai`` client and the Agents SDK's ``OpenAIChatCompletionsModel`` /
``OpenAIResponsesModel`` (``Runner.run`` and ``Runner.run_streamed``) can run against it::

    from openai import AsyncOpenAI
    from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

    script = [
        reply.tool_calls(("get_weather", {"city": "Paris"}, "call_1")),
        reply.text("It is sunny in Paris."),
    ]
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ...  # run the agent
        assert len(server.requests) == 2
        assert server.requests[1].body["messages"][-1]["role"] == "tool"

Behaviour:

- Every POST is numbered from 1, across both endpoints, and recorded in ``server.requests``
  (``RecordedRequest(number, path, body, status, headers, cut)``; ``.streamed`` says whether
  it asked for ``"stream": true``), whatever the answer.
- Each answered request consumes the next reply of the script, in order. A request the
  server fails (``fail_requests``, ``fail_next``) or cuts off (``cut_requests``, ``cut_next``)
  consumes no reply, so a retry of it gets the reply it would have got.
- ``fail_requests={3}`` fails request number 3 with HTTP 500; ``server.fail_next(n)`` fails
  the next ``n`` requests; ``server.fail_later(2)`` fails the request after the next one.
- A request beyond the end of the script gets HTTP 500 naming the request and the script
  length; an unknown path gets 404.
- Every reply reports usage (10 input, 5 output tokens unless ``usage=`` says otherwise).
- ``reasoning="..."`` (``reply.text``, ``reply.tool_calls``) starts a Responses answer with a
  reasoning item ``rs_<n>`` of that summary, with ``encrypted_content`` when the request's
  ``include`` asks for ``reasoning.encrypted_content``; a Chat Completions request for such a
  reply gets HTTP 500 naming it.
- ``server.add(*replies)`` extends the script; ``server.remaining_replies`` counts what is left.
- ``GET /v1/models`` lists the models ``FakeOpenAIServer(models=...)`` names (``["fake-model"]``
  unless given), as the real API's model list; a GET is not numbered, not recorded in
  ``server.requests`` and consumes no reply: ``server.get_paths`` lists the paths of the GETs
  received, in order. Any other GET gets 404.
- ``FakeOpenAIServer(api_key="sk-...")`` answers HTTP 401 (``invalid_api_key``, without
  echoing the key) to any request, GET or POST, whose ``Authorization: Bearer`` key is another
  one; a refused POST is numbered and recorded with status 401 and consumes no reply. Without
  ``api_key`` every key is accepted.

Streams (``"stream": true``) are server-sent events, as the real API sends them:

- Chat Completions: ``chat.completion.chunk`` events: the role, the text in several
  ``content`` deltas, each tool call as index-keyed deltas (its id and name first, then argument
  fragments), a chunk with ``finish_reason``, a usage chunk (empty ``choices``) when
  ``stream_options.include_usage`` is true, then ``data: [DONE]``.
- Responses: ``response.created``, ``response.in_progress``, then per output item
  ``response.output_item.added``, for a message ``response.content_part.added``, several
  ``response.output_text.delta``, ``response.output_text.done``, ``response.content_part.done``,
  for a function call ``response.function_call_arguments.delta`` (several) and ``.done``, for a
  reasoning item ``response.reasoning_summary_part.added``, several
  ``response.reasoning_summary_text.delta``, ``.done`` and ``response.reasoning_summary_part.done``, then
  ``response.output_item.done``; last ``response.completed`` with the whole response and usage.
  Every event has its ``sequence_number``.
- A stream assembles to exactly the answer the same reply gives unstreamed.
- ``cut_requests={2}``, ``server.cut_next(n)`` and ``server.cut_later(2)`` cut off answers as
  a dying connection would: a stream stops after ``after_events`` events (half of them unless
  given; never its last one) and the connection closes mid-body, so the client raises
  ``openai.APIConnectionError`` while it reads; an unstreamed answer stops after half its bytes.
  Failures win over cuts: a request both failed and cut gets the HTTP 500.

What the server does not implement is refused with HTTP 400 naming it, never answered wrongly:
``n`` other than 1, audio (``modalities``, ``audio``), log probabilities (``logprobs``,
``top_logprobs``, ``include`` of logprobs), ``background`` responses, ``stream`` other than a
boolean, and ``stream_options`` without ``"stream": true`` or with options other than
``include_usage`` (Chat Completions only) and ``include_obfuscation``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "ToolCall", "reply"]

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str
    call_id: str


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: a text, or a list of function calls, after a reasoning summary if given."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 10
    output_tokens: int = 5
    #: The summary of a reasoning item the answer starts with (the Responses API only).
    reasoning: str | None = None


class reply:
    """Builders for script entries."""

    @staticmethod
    def text(content: str, *, usage: tuple[int, int] = (10, 5), reasoning: str | None = None) -> Reply:
        return Reply(text=content, input_tokens=usage[0], output_tokens=usage[1], reasoning=reasoning)

    @staticmethod
    def tool_calls(
        *calls: tuple[str, dict[str, Any] | str, str], usage: tuple[int, int] = (10, 5), reasoning: str | None = None
    ) -> Reply:
        """Each call is ``(name, arguments as a dict or a JSON string, call_id)``."""
        if not calls:
            raise ValueError("reply.tool_calls needs at least one (name, arguments, call_id)")
        return Reply(
            tool_calls=tuple(
                ToolCall(
                    name=name,
                    arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                    call_id=call_id,
                )
                for name, arguments, call_id in calls
            ),
            input_tokens=usage[0],
            output_tokens=usage[1],
            reasoning=reasoning,
        )


@dataclass(frozen=True)
class RecordedRequest:
    number: int
    path: str
    body: Any
    status: int
    #: The request's HTTP headers, names in lower case.
    headers: dict[str, str] = field(default_factory=dict)
    #: The server cut the answer off mid-body (``cut_requests``, ``cut_next``, ``cut_later``).
    cut: bool = False

    @property
    def streamed(self) -> bool:
        """The request asked for a stream (``"stream": true``)."""
        return isinstance(self.body, dict) and self.body.get("stream") is True


@dataclass
class _Script:
    replies: list[Reply]
    fail_requests: set[int]
    #: Request number -> how many events its stream sends before the cut (None: half of them).
    cut_requests: dict[int, int | None]
    fail_next: int = 0
    #: The only key accepted (``Authorization: Bearer <key>``); None accepts any.
    api_key: str | None = None
    #: The ids ``GET /v1/models`` lists.
    models: list[str] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    get_paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: dict[str, Any] | None = None
    #: A stream's server-sent events, each complete with its blank line.
    events: list[bytes] | None = None
    #: Set when the answer is cut off: how many events a stream sends first (None: half).
    cut_after: int | None = None
    cut: bool = False


class FakeOpenAIServer:
    """Serves the script on ``127.0.0.1`` at ``port`` (a free one by default); use as a context manager."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        fail_requests: Iterable[int] = (),
        cut_requests: Iterable[int] = (),
        api_key: str | None = None,
        models: Iterable[str] = ("fake-model",),
        port: int = 0,
    ) -> None:
        self._script = _Script(
            replies=list(replies),
            fail_requests=set(fail_requests),
            cut_requests=dict.fromkeys(cut_requests),
            api_key=api_key,
            models=list(models),
        )
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self._script))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        # After bind, an AF_INET server's address is getsockname()'s (str, int); typeshed types it as
        # every address bind() accepts, bytes included.
        return f"http://{host}:{port}/v1"  # type: ignore[str-bytes-safe]

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._script.lock:
            return list(self._script.requests)

    @property
    def get_paths(self) -> list[str]:
        """The paths of the GET requests received, in order (they are not in :attr:`requests`)."""
        with self._script.lock:
            return list(self._script.get_paths)

    @property
    def remaining_replies(self) -> int:
        with self._script.lock:
            return len(self._script.replies)

    def add(self, *replies: Reply) -> None:
        with self._script.lock:
            self._script.replies.extend(replies)

    def fail_next(self, n: int = 1) -> None:
        with self._script.lock:
            self._script.fail_next += n

    def fail_later(self, *numbers_from_now: int) -> None:
        """Fail the requests that come ``n`` requests from now, for each ``n`` (1 is the next one)."""
        with self._script.lock:
            self._script.fail_requests.update(len(self._script.requests) + n for n in numbers_from_now)

    def cut_next(self, n: int = 1, *, after_events: int | None = None) -> None:
        """Cut off the answers to the next ``n`` requests; see :meth:`cut_later`."""
        self.cut_later(*range(1, n + 1), after_events=after_events)

    def cut_later(self, *numbers_from_now: int, after_events: int | None = None) -> None:
        """
        Cut off the answers to the requests that come ``n`` requests from now (1 is the next one).

        A streamed answer sends its first ``after_events`` events (half of them by default,
        never the last one) and the connection closes mid-body; the reply is not consumed.
        """
        if after_events is not None and (type(after_events) is not int or after_events < 0):
            raise ValueError(f"after_events must be a count of events, 0 or more, not {after_events!r}")
        with self._script.lock:
            for n in numbers_from_now:
                self._script.cut_requests[len(self._script.requests) + n] = after_events

    def start(self) -> FakeOpenAIServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="FakeOpenAIServer", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _handler_for(script: _Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _refused_key(self) -> bool:
            """The server has an ``api_key`` and the request brings another one (or none)."""
            if script.api_key is None:
                return False
            return self.headers.get("Authorization") != f"Bearer {script.api_key}"

        def do_GET(self) -> None:
            with script.lock:
                script.get_paths.append(self.path)
            if self._refused_key():
                answer = _Answer(401, _error("FakeOpenAIServer: incorrect API key provided", "invalid_api_key"))
            elif self.path == MODELS_PATH:
                created = int(time.time())
                models = [{"id": m, "object": "model", "created": created, "owned_by": "fake"} for m in script.models]
                answer = _Answer(200, {"object": "list", "data": models})
            else:
                answer = _Answer(404, _error(f"FakeOpenAIServer: GET {self.path}: unknown path", "not_found"))
            self._send(answer, request_id="req_get")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")

            with script.lock:
                number = len(script.requests) + 1
                answer = self._answer(number, body)
                script.requests.append(
                    RecordedRequest(
                        number=number,
                        path=self.path,
                        body=body,
                        status=answer.status,
                        headers={name.lower(): value for name, value in self.headers.items()},
                        cut=answer.cut,
                    )
                )
            if answer.events is not None:
                self._send_stream(answer, request_id=f"req_{number}")
            else:
                self._send(answer, request_id=f"req_{number}")

        def _answer(self, number: int, body: Any) -> _Answer:
            where = f"request #{number} (POST {self.path})"
            if self._refused_key():
                return _Answer(401, _error(f"FakeOpenAIServer: {where}: incorrect API key provided", "invalid_api_key"))
            if self.path not in (CHAT_COMPLETIONS_PATH, RESPONSES_PATH):
                return _Answer(404, _error(f"FakeOpenAIServer: {where}: unknown path", "not_found"))
            if not isinstance(body, dict):
                return _Answer(400, _error(f"FakeOpenAIServer: {where}: body is not a JSON object"))
            refusal = _unsupported(self.path, body)
            if refusal:
                return _Answer(400, _error(f"FakeOpenAIServer: {where}: {refusal}"))
            if number in script.fail_requests or script.fail_next > 0:
                if number not in script.fail_requests:
                    script.fail_next -= 1
                return _Answer(500, _error(f"FakeOpenAIServer: injected failure of {where}", "server_error"))
            if not script.replies:
                answered = sum(1 for r in script.requests if r.status == 200 and not r.cut)
                return _Answer(
                    500,
                    _error(
                        f"FakeOpenAIServer: {where} has no scripted reply: all {answered} replies of the script were used",
                        "server_error",
                    ),
                )
            if script.replies[0].reasoning is not None and self.path == CHAT_COMPLETIONS_PATH:
                return _Answer(
                    500,
                    _error(
                        f"FakeOpenAIServer: {where}: its scripted reply has reasoning, which only {RESPONSES_PATH} answers",
                        "server_error",
                    ),
                )
            cut = number in script.cut_requests
            # A cut-off answer leaves its reply in the script, for the retry of the request.
            scripted = script.replies[0] if cut else script.replies.pop(0)
            model = str(body.get("model") or "fake-model")
            created = int(time.time())
            cut_after = script.cut_requests.get(number)
            if self.path == CHAT_COMPLETIONS_PATH:
                completion = _chat_completion(scripted, model, number, created)
                if body.get("stream") is True:
                    include_usage = (body.get("stream_options") or {}).get("include_usage") is True
                    events = _sse(_chat_chunks(completion, include_usage))
                    return _Answer(200, events=[*events, b"data: [DONE]\n\n"], cut_after=cut_after, cut=cut)
                return _Answer(200, completion, cut_after=cut_after, cut=cut)
            encrypted = "reasoning.encrypted_content" in (body.get("include") or ())
            response = _response(scripted, model, number, created, encrypted_reasoning=encrypted)
            if body.get("stream") is True:
                return _Answer(200, events=_sse(_response_events(response)), cut_after=cut_after, cut=cut)
            return _Answer(200, response, cut_after=cut_after, cut=cut)

        def _send(self, answer: _Answer, *, request_id: str) -> None:
            data = json.dumps(answer.payload).encode("utf-8")
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", request_id)
            self.end_headers()
            # A cut answer promises the whole length and closes after half of it.
            self.wfile.write(data[: len(data) // 2] if answer.cut else data)

        def _send_stream(self, answer: _Answer, *, request_id: str) -> None:
            events = answer.events or []
            if answer.cut:
                wanted = len(events) // 2 if answer.cut_after is None else answer.cut_after
                events = events[: min(wanted, len(events) - 1)]
            # Chunked encoding needs HTTP/1.1; the server closes the connection after the
            # stream, so a cut leaves the client with an incomplete chunked body, as a dying
            # connection does.
            self.protocol_version = "HTTP/1.1"
            self.close_connection = True
            self.send_response(answer.status)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.send_header("x-request-id", request_id)
            self.end_headers()
            try:
                for event in events:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                if not answer.cut:
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # The client stopped reading: its business, not a server error.

    return Handler


def _error(message: str, type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": None}}


def _unsupported(path: str, body: dict[str, Any]) -> str | None:
    """What of the request the server does not implement, said as the refusal, or None."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return f'"stream" must be true or false, not {stream!r}'
    stream_options = body.get("stream_options")
    if stream_options is not None:
        if stream is not True:
            return '"stream_options" is only allowed with "stream": true'
        known = {"include_usage", "include_obfuscation"} if path == CHAT_COMPLETIONS_PATH else {"include_obfuscation"}
        if not isinstance(stream_options, dict) or set(stream_options) - known:
            return f'"stream_options" {stream_options!r} is not supported, only {sorted(known)}'
    if body.get("n") not in (None, 1):
        return f'"n": {body["n"]!r} is not supported: the server answers with one choice'
    if body.get("audio") is not None or "audio" in (body.get("modalities") or ()):
        return "audio output is not supported: the server answers with text and tool calls"
    if body.get("logprobs") or body.get("top_logprobs"):
        return "log probabilities are not supported (logprobs, top_logprobs)"
    if any("logprobs" in str(item) for item in body.get("include") or ()):
        return f'"include": {body["include"]!r} is not supported: the server has no log probabilities'
    if body.get("background"):
        return '"background": true is not supported: the server answers in the request'
    return None


def _pieces(text: str) -> list[str]:
    """``text`` in the small pieces a stream sends it in: words of up to 6 characters."""
    return re.findall(r"\s*\S{1,6}|\s+", text)


def _sse(payloads: Iterable[dict[str, Any]]) -> list[bytes]:
    """Server-sent events; an event with a ``type`` is named by it, as the Responses API does."""
    events = []
    for payload in payloads:
        data = f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
        if "type" in payload:
            data = f"event: {payload['type']}\n{data}"
        events.append(data.encode("utf-8"))
    return events


def _chat_completion(scripted: Reply, model: str, n: int, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": scripted.text}
    if scripted.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in scripted.tool_calls
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if scripted.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": scripted.input_tokens,
            "completion_tokens": scripted.output_tokens,
            "total_tokens": scripted.input_tokens + scripted.output_tokens,
        },
    }


def _chat_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events that stream ``completion``."""
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "" if message["content"] is not None else None}]
    deltas += [{"content": piece} for piece in _pieces(message["content"] or "")]
    for index, call in enumerate(message.get("tool_calls", ())):
        function = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in _pieces(function["arguments"])
        ]
    head = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    if include_usage:
        # The real API sends "usage": null on every chunk before the usage chunk.
        head["usage"] = None
    chunks = [
        head | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]} for delta in deltas
    ]
    chunks.append(
        head | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]}
    )
    if include_usage:
        chunks.append(head | {"choices": [], "usage": completion["usage"]})
    return chunks


def _response(scripted: Reply, model: str, n: int, created: int, *, encrypted_reasoning: bool) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if scripted.reasoning is not None:
        reasoning = {
            "type": "reasoning",
            "id": f"rs_{n}",
            "summary": [{"type": "summary_text", "text": scripted.reasoning}],
        }
        if encrypted_reasoning:
            reasoning["encrypted_content"] = f"encrypted-reasoning-{n}"
        output.append(reasoning)
    if scripted.text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": scripted.text, "annotations": []}],
            }
        )
    for index, call in enumerate(scripted.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{index}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "usage": {
            "input_tokens": scripted.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": scripted.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": scripted.input_tokens + scripted.output_tokens,
        },
    }


def _response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses API events that stream ``response``, numbered by ``sequence_number``."""
    started = response | {"status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for output_index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": output_index}
        if item["type"] == "message":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": output_index,
                    "item": item | {"status": "in_progress", "content": []},
                }
            )
            for content_index, part in enumerate(item["content"]):
                at_part = at | {"content_index": content_index}
                events.append({"type": "response.content_part.added", **at_part, "part": part | {"text": ""}})
                events += [
                    {"type": "response.output_text.delta", **at_part, "delta": piece, "logprobs": []}
                    for piece in _pieces(part["text"])
                ]
                events.append({"type": "response.output_text.done", **at_part, "text": part["text"], "logprobs": []})
                events.append({"type": "response.content_part.done", **at_part, "part": part})
        elif item["type"] == "reasoning":
            events.append(
                {"type": "response.output_item.added", "output_index": output_index, "item": item | {"summary": []}}
            )
            for summary_index, part in enumerate(item["summary"]):
                at_part = at | {"summary_index": summary_index}
                events.append({"type": "response.reasoning_summary_part.added", **at_part, "part": part | {"text": ""}})
                events += [
                    {"type": "response.reasoning_summary_text.delta", **at_part, "delta": piece}
                    for piece in _pieces(part["text"])
                ]
                events.append({"type": "response.reasoning_summary_text.done", **at_part, "text": part["text"]})
                events.append({"type": "response.reasoning_summary_part.done", **at_part, "part": part})
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": output_index,
                    "item": item | {"status": "in_progress", "arguments": ""},
                }
            )
            events += [
                {"type": "response.function_call_arguments.delta", **at, "delta": piece}
                for piece in _pieces(item["arguments"])
            ]
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": output_index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [event | {"sequence_number": number} for number, event in enumerate(events)]
