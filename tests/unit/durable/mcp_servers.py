"""
A real MCP server for the tests: the ``mcp`` package's ``MCPServer`` (FastMCP before mcp 2), run
in its own process over stdio (``python mcp_servers.py stdio``), streamable HTTP or SSE on
127.0.0.1 (``python mcp_servers.py streamable-http|sse PORT``).

Every tool call the server receives appends one JSON line to the file named by ``MCP_CALLS``: the
tool, its arguments, and the idempotency key the request's ``_meta`` carried. Tools:

* ``add(a, b)``: the sum.
* ``send_mail(to, text)``: a side effect that a repeated idempotency key does not repeat.
* ``flaky(text)``: its first call ever (in ``MCP_CALLS``) raises, which the server answers with an
  ``isError`` result; later calls succeed.
* ``broken(text)``: its first call ever raises an ``MCPError``, which the client raises; later
  calls succeed.
* ``image()``: a PNG, as an image content block.
* ``multiply(a, b)``: only when ``MCP_EXTRA_TOOL`` is set, so its tool list changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ImageContent

#: The ``_meta`` key the adapter sends (durable/_mcp.py), spelled out: the server is another program.
KEY_META = "airflow.apache.org/idempotency-key"
SERVER = Path(__file__).resolve()
#: Seconds a client waits for the server to answer, connecting and after: the SDKs' default of 5 s
#: is less than a new Python process takes to start and answer on a loaded CI machine.
CONNECT_TIMEOUT = 60
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def read_calls(calls: Path) -> list[dict[str, Any]]:
    """The tool calls the server received, in order."""
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def tools_called(calls: Path) -> list[str]:
    return [call["tool"] for call in read_calls(calls)]


def stdio_params(calls: Path, **env: str) -> dict[str, Any]:
    """``MCPServerStdio`` parameters that start this server in a new process."""
    return {"command": sys.executable, "args": [str(SERVER), "stdio"], "env": {"MCP_CALLS": str(calls), **env}}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HttpServer:
    """This server over ``streamable-http`` or ``sse`` on 127.0.0.1, in its own process."""

    def __init__(self, transport: str, calls: Path, **env: str) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"
        self.log = calls.with_suffix(f".{transport}.log")
        with self.log.open("a") as output:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), transport, str(port)],
                env={**os.environ, "MCP_CALLS": str(calls), **env},
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_for(port, self.process, self.log)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End the server's process (it no longer answers), and wait for it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def http_server(transport: str, calls: Path, **env: str) -> Iterator[HttpServer]:
    """This server over ``streamable-http`` or ``sse`` while the block runs."""
    server = HttpServer(transport, calls, **env)
    try:
        yield server
    finally:
        server.stop()


def _wait_for(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the MCP server did not listen on port {port}: {log.read_text()[-2000:]}")


def build_server() -> MCPServer:
    calls = Path(os.environ["MCP_CALLS"])
    server = MCPServer("durable-test")

    def note(ctx: Context, tool: str, **fields: Any) -> dict[str, Any]:
        meta = dict(ctx.request_context.meta or {})
        call = {"tool": tool, **fields, "key": meta.get(KEY_META), "user_meta": meta.get("user")}
        with calls.open("a") as file:
            file.write(json.dumps(call) + "\n")
        return call

    def first_call_of(tool: str) -> bool:
        return tool not in tools_called(calls)

    @server.tool()
    def add(a: int, b: int, ctx: Context) -> str:
        """Add two numbers."""
        note(ctx, "add", a=a, b=b)
        return str(a + b)

    @server.tool()
    def send_mail(to: str, text: str, ctx: Context) -> str:
        """Send a mail."""
        key = dict(ctx.request_context.meta or {}).get(KEY_META)
        repeated = key is not None and any(c["tool"] == "send_mail" and c["key"] == key for c in read_calls(calls))
        note(ctx, "send_mail", to=to, text=text, sent=not repeated)
        return f"already sent to {to}" if repeated else f"sent to {to}"

    @server.tool()
    def flaky(text: str, ctx: Context) -> str:
        """Fails on its first call."""
        first = first_call_of("flaky")
        note(ctx, "flaky", text=text)
        if first:
            raise ToolError("flaky is down")
        return f"flaky: {text}"

    @server.tool()
    def broken(text: str, ctx: Context) -> str:
        """A protocol error on its first call."""
        first = first_call_of("broken")
        note(ctx, "broken", text=text)
        if first:
            raise MCPError(-32603, "broken is down")
        return f"broken: {text}"

    @server.tool()
    def image(ctx: Context) -> ImageContent:
        """A tiny picture."""
        note(ctx, "image")
        return ImageContent(type="image", data=PNG, mime_type="image/png")

    if os.environ.get("MCP_EXTRA_TOOL"):

        @server.tool()
        def multiply(a: int, b: int, ctx: Context) -> str:
            """Multiply two numbers."""
            note(ctx, "multiply", a=a, b=b)
            return str(a * b)

    return server


if __name__ == "__main__":
    transport = sys.argv[1]
    if transport == "stdio":
        build_server().run("stdio")
    else:
        build_server().run(transport, host="127.0.0.1", port=int(sys.argv[2]))
