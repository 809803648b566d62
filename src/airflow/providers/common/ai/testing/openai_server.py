"""A scripted, OpenAI-compatible HTTP server for tests and demos (standard library only).

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` (non-streaming) from a
script, so the real ``openai`` client and the Agents SDK's ``OpenAIChatCompletionsModel`` /
``OpenAIResponsesModel`` can run against it::

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
  (``RecordedRequest(number, path, body, status, headers)``), whatever the answer.
- Each answered request consumes the next reply of the script, in order. A request the
  server fails (``fail_requests``, ``fail_next``) consumes no reply, so a retry of it gets the
  reply it would have got.
- ``fail_requests={3}`` fails request number 3 with HTTP 500; ``server.fail_next(n)`` fails
  the next ``n`` requests; ``server.fail_later(2)`` fails the request after the next one.
- A request beyond the end of the script gets HTTP 500 naming the request and the script
  length; an unknown path gets 404; ``"stream": true`` gets HTTP 400, so a streamed run fails
  loudly instead of "succeeding" with nothing.
- Every reply reports usage (10 input, 5 output tokens unless ``usage=`` says otherwise).
- ``server.add(*replies)`` extends the script; ``server.remaining_replies`` counts what is left.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "ToolCall", "reply"]

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str
    call_id: str


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: a text, or a list of function calls."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 10
    output_tokens: int = 5


class reply:
    """Builders for script entries."""

    @staticmethod
    def text(content: str, *, usage: tuple[int, int] = (10, 5)) -> Reply:
        return Reply(text=content, input_tokens=usage[0], output_tokens=usage[1])

    @staticmethod
    def tool_calls(*calls: tuple[str, dict[str, Any] | str, str], usage: tuple[int, int] = (10, 5)) -> Reply:
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
        )


@dataclass(frozen=True)
class RecordedRequest:
    number: int
    path: str
    body: Any
    status: int
    #: The request's HTTP headers, names in lower case.
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Script:
    replies: list[Reply]
    fail_requests: set[int]
    fail_next: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeOpenAIServer:
    """Serves the script on ``127.0.0.1`` at a free port; use as a context manager."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        fail_requests: Iterable[int] = (),
    ) -> None:
        self._script = _Script(replies=list(replies), fail_requests=set(fail_requests))
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self._script))
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

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")

            with script.lock:
                number = len(script.requests) + 1
                status, payload = self._answer(number, body)
                script.requests.append(
                    RecordedRequest(
                        number=number,
                        path=self.path,
                        body=body,
                        status=status,
                        headers={name.lower(): value for name, value in self.headers.items()},
                    )
                )
            self._send(status, payload, request_id=f"req_{number}")

        def _answer(self, number: int, body: Any) -> tuple[int, dict[str, Any]]:
            where = f"request #{number} (POST {self.path})"
            if self.path not in (CHAT_COMPLETIONS_PATH, RESPONSES_PATH):
                return 404, _error(f"FakeOpenAIServer: {where}: unknown path", "not_found")
            if not isinstance(body, dict):
                return 400, _error(f"FakeOpenAIServer: {where}: body is not a JSON object")
            if body.get("stream"):
                return 400, _error(f'FakeOpenAIServer: {where}: streaming is not supported, send "stream": false')
            if number in script.fail_requests or script.fail_next > 0:
                if number not in script.fail_requests:
                    script.fail_next -= 1
                return 500, _error(f"FakeOpenAIServer: injected failure of {where}", "server_error")
            if not script.replies:
                answered = sum(1 for r in script.requests if r.status == 200)
                return 500, _error(
                    f"FakeOpenAIServer: {where} has no scripted reply: all {answered} replies of the script were used",
                    "server_error",
                )
            scripted = script.replies.pop(0)
            model = str(body.get("model") or "fake-model")
            if self.path == CHAT_COMPLETIONS_PATH:
                return 200, _chat_completion(scripted, model, number)
            return 200, _response(scripted, model, number)

        def _send(self, status: int, payload: dict[str, Any], *, request_id: str) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", request_id)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _error(message: str, type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": None}}


def _chat_completion(scripted: Reply, model: str, n: int) -> dict[str, Any]:
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
        "created": int(time.time()),
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


def _response(scripted: Reply, model: str, n: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
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
        "created_at": int(time.time()),
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
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": scripted.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": scripted.input_tokens + scripted.output_tokens,
        },
    }
