"""
Tools of a real MCP server (``mcp_servers.py``, in its own process over stdio) through Pydantic AI's
``MCPToolset``, journaled like function tools, with the real ``OpenAIChatModel`` against the local
OpenAI-compatible server: what reaches the MCP server in each try, and the idempotency key it gets.

``pydantic_ai.mcp`` needs the FastMCP client (``fastmcp-slim[client]``, Pydantic AI's ``[mcp]``
extra): where it is not installed these tests are skipped.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)
# Pydantic AI's own module is there without its client: it raises an ImportError naming the extra.
pytest.importorskip(
    "pydantic_ai.mcp",
    reason="pydantic_ai.mcp needs the FastMCP client (pydantic-ai-slim[mcp]), not installed here",
    exc_type=ImportError,
)

from fastmcp.client.transports import StdioTransport
from mcp_servers import CONNECT_TIMEOUT, KEY_META, SERVER, read_calls, tools_called
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import (
    Happened,
    in_flight,
    run_durably_sync,
    send_idempotency_key,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


class Tries:
    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent, prompt: str) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, prompt)


def _mcp(calls, process_tool_call: Any = send_idempotency_key) -> MCPToolset:
    transport = StdioTransport(command=sys.executable, args=[str(SERVER), "stdio"], env={"MCP_CALLS": str(calls)})
    return MCPToolset(transport, id="durable-test", process_tool_call=process_tool_call, init_timeout=CONNECT_TIMEOUT)


def _agent(server: FakeOpenAIServer, toolset: MCPToolset) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    return Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), toolsets=[toolset])


def test_a_completed_mcp_call_replays_without_reaching_the_server_which_got_the_idempotency_key(tmp_path):
    calls = tmp_path / "calls.jsonl"
    script = [reply.tool_calls(("send_mail", {"to": "ops", "text": "hi"}, "call_1")), reply.text("Sent.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_agent(server, _mcp(calls)), "Mail ops.")
        result = tries.attempt(_agent(server, _mcp(calls)), "Mail ops.")

    assert result.output == "Sent."
    received = read_calls(calls)
    assert [(c["tool"], c["sent"]) for c in received] == [("send_mail", True)]
    assert received[0]["key"].startswith("durable-")
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


def test_an_mcp_tool_that_answered_with_an_error_runs_again_next_try_with_the_same_key(tmp_path):
    calls = tmp_path / "calls.jsonl"
    # flaky's first call ever answers isError, which Pydantic AI hands the model to retry
    script = [
        reply.tool_calls(("flaky", {"text": "x"}, "call_1")),
        reply.tool_calls(("flaky", {"text": "x"}, "call_2")),
        reply.text("Done."),
    ]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_agent(server, _mcp(calls)), "Flaky.")
        assert tools_called(calls) == ["flaky", "flaky"]
        tries.attempt(_agent(server, _mcp(calls)), "Flaky.")

    received = read_calls(calls)
    # try 2 called the failed one again (same call, same key); the one that succeeded was not reached
    assert tools_called(calls) == ["flaky", "flaky", "flaky"]
    assert received[2]["key"] == received[0]["key"] != received[1]["key"]
    assert tries.journal.stats.replayed == {"model": 1}


def test_an_mcp_servers_policy_verifies_a_call_found_in_flight_and_it_is_not_sent_again(tmp_path):
    calls = tmp_path / "calls.jsonl"
    verified = []

    def mail_sent(key: str, arguments: dict) -> Happened | None:
        verified.append(arguments)
        sent = [c for c in read_calls(calls) if c["tool"] == "send_mail" and c["key"] == key]
        return Happened(f"sent to {arguments['to']}") if sent else None

    async def dies_after_the_call(ctx, call_tool, name, args):
        await send_idempotency_key(ctx, call_tool, name, args)
        raise WorkerDied

    policy = in_flight("verify", verify=mail_sent)
    script = [reply.tool_calls(("send_mail", {"to": "ops", "text": "hi"}, "call_1")), reply.text("Sent.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(_agent(server, policy(_mcp(calls, dies_after_the_call))), "Mail ops.")
        result = tries.attempt(_agent(server, policy(_mcp(calls))), "Mail ops.")

    assert result.output == "Sent."
    assert tools_called(calls) == ["send_mail"]  # once, in try 1
    assert verified == [{"to": "ops", "text": "hi"}]
    assert read_calls(calls)[0]["key"].startswith("durable-")
    assert KEY_META == "airflow.apache.org/idempotency-key"
    assert tries.journal.stats.in_flight[0]["outcome"] == "it happened"
    assert server.requests[1].body["messages"][-1]["content"] == "sent to ops"
