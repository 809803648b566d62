"""
Tools of MCP servers in durable runs (R-34), against real MCP servers in their own processes
(``mcp_servers.py``): over stdio, streamable HTTP and SSE on 127.0.0.1.

Each try connects anew, as a new worker does, and gets a new ``ScriptedModel``, so its call count
is the number of requests that reached the model in that try; the server's call log says what
reached the server across all tries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, ToolCallOutputItem
from agents.mcp import MCPServer, MCPServerSse, MCPServerStdio, MCPServerStreamableHttp
from agents.mcp.util import MCPUtil
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from agents.version import __version__ as SDK_VERSION
from mcp_servers import CONNECT_TIMEOUT, KEY_META, PNG, SERVER, http_server, read_calls, stdio_params, tools_called
from tries import Task, WorkerDied

from airflow.providers.common.ai.durable.core.adapter import MCP_IDEMPOTENCY_KEY_META
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.openai_agents import (
    Happened,
    current_idempotency_key,
    in_flight,
    run_durably,
    run_durably_streamed,
)
from airflow.providers.common.ai.durable.openai_agents._mcp import (
    PRIVATE_ATTRIBUTES,
    RECORDED_CUSTOM_DATA,
    restore_custom_data,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

PROMPT = "Do the sums."


class ModelDown(Exception):
    """The model endpoint failed: the try fails here."""


def model(*steps: Any) -> ScriptedModel:
    return ScriptedModel(list(steps))


def text(answer: str) -> list[Any]:
    return [assistant_message(answer)]


def call(tool: str, call_id: str, **arguments: Any) -> Any:
    return function_call(tool, arguments, call_id=call_id)


@dataclass
class Servers:
    """One MCP server process (stdio: one per connection) and the log of the calls it received."""

    transport: str
    calls: Path
    url: str | None = None

    def connect(self, **kwargs: Any) -> MCPServer:
        """A new client for the server, as a new try creates: connected when the try starts."""
        kwargs.setdefault("client_session_timeout_seconds", CONNECT_TIMEOUT)
        if self.transport == "stdio":
            return MCPServerStdio(params=stdio_params(self.calls, **kwargs.pop("env", {})), name="tools", **kwargs)
        client = MCPServerSse if self.transport == "sse" else MCPServerStreamableHttp
        return client(params={"url": self.url}, name="tools", **kwargs)

    @property
    def received(self) -> list[str]:
        """The tools the server ran, sorted: calls of one answer run concurrently, in any order."""
        return sorted(tools_called(self.calls))

    @property
    def keys(self) -> list[str | None]:
        return [call["key"] for call in read_calls(self.calls)]


@contextlib.contextmanager
def started(transport: str, tmp_path: Path) -> Iterator[Servers]:
    calls = tmp_path / "calls.jsonl"
    if transport == "stdio":
        yield Servers(transport, calls)
        return
    with http_server(transport, calls) as server:
        yield Servers(transport, calls, server.url)


@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[Servers]:
    with started("stdio", tmp_path) as servers:
        yield servers


class McpTask(Task):
    """The tries of one task instance whose agent uses MCP servers, connected anew on every try."""

    def attempt(self, agent: Agent, prompt: Any = None, servers: tuple[MCPServer, ...] = (), **kwargs: Any) -> Any:
        async def run() -> Any:
            async with contextlib.AsyncExitStack() as stack:
                for server in servers:
                    await stack.enter_async_context(server)
                self.journal = DurableJournal(self.storage)
                with journal_scope(self.journal):
                    return await run_durably(agent, PROMPT if prompt is None else prompt, **kwargs)

        return asyncio.run(run())


def agent(scripted: ScriptedModel, *servers: MCPServer, **kwargs: Any) -> Agent:
    return Agent(name="calculator", model=scripted, mcp_servers=list(servers), **kwargs)


def tool_outputs(scripted: ScriptedModel) -> list[Any]:
    """The tool outputs in the input of the latest request the model received."""
    assert scripted.last_call is not None
    return [item["output"] for item in scripted.last_call.input if item.get("type") == "function_call_output"]


def output_texts(scripted: ScriptedModel) -> list[str]:
    """The text of each tool output the latest request of ``scripted`` showed the model."""
    return [
        output if isinstance(output, str) else "".join(part.get("text", "") for part in output)
        for output in tool_outputs(scripted)
    ]


# A completed call replays without reaching the server.


@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_a_completed_mcp_call_replays_on_retry_without_reaching_the_server(transport, tmp_path):
    mail = "naïve ☃ \u202eevil\u202c \U0001d518 \x00 " + "x" * 20_000
    with started(transport, tmp_path) as servers:
        task = McpTask()
        first = model(
            [call("add", "c1", a=2, b=3), call("send_mail", "c2", to="ops@example.com", text=mail)], ModelDown()
        )
        server = servers.connect()
        with pytest.raises(ModelDown):
            task.attempt(agent(first, server), servers=(server,))
        assert len(first.calls) == 2
        assert servers.received == ["add", "send_mail"]

        second = model(text("5, and the mail is sent."))
        server = servers.connect()
        result = task.attempt(agent(second, server), servers=(server,))

        assert result.final_output == "5, and the mail is sent."
        assert len(second.calls) == 1  # the first answer replayed
        assert servers.received == ["add", "send_mail"]  # neither reached the server again
        [sent] = [c for c in read_calls(servers.calls) if c["tool"] == "send_mail"]  # the two ran in any order
        assert sent["text"] == mail
        assert tool_outputs(second) == tool_outputs(first)
        assert task.replayed == {"model": 1, "tool": 2}
        assert task.ran_live == {"model": 1}


def test_an_image_answer_replays_as_the_same_tool_output(stdio):
    task = McpTask()
    first = model([call("image", "c1")], ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server), servers=(server,))

    second = model(text("A dot."))
    server = stdio.connect()
    task.attempt(agent(second, server), servers=(server,))

    assert stdio.received == ["image"]
    assert tool_outputs(second) == tool_outputs(first)
    assert PNG in json.dumps(tool_outputs(second))


# The idempotency key: current_idempotency_key() inside, and in the request's _meta.


def test_the_idempotency_key_travels_in_meta_beside_the_users_own(stdio):
    seen: list[str] = []

    def user_meta(context) -> dict[str, Any]:
        seen.append(current_idempotency_key())
        return {"user": f"mine {context.tool_name}", KEY_META: "the user's own"}

    task = McpTask()
    first = model([call("add", "c1", a=1, b=1), call("add", "c2", a=2, b=2)], text("2 and 4"))
    server = stdio.connect(tool_meta_resolver=user_meta)
    task.attempt(agent(first, server), servers=(server,))

    calls = read_calls(stdio.calls)
    assert MCP_IDEMPOTENCY_KEY_META == KEY_META
    assert [c["user_meta"] for c in calls] == ["mine add", "mine add"]
    # The journal's key wins over a resolver that sets the same _meta key.
    assert sorted(c["key"] for c in calls) == sorted(seen)  # the two calls reach the server in any order
    assert len(set(seen)) == 2
    assert all(key.startswith("durable-") for key in seen)


def test_a_call_cut_off_mid_call_runs_again_with_the_same_key_so_the_server_can_deduplicate(stdio, caplog):
    def worker_dies_after_the_server_answered(context):
        if context.tool_name == "send_mail":
            raise WorkerDied

    task = McpTask()
    first = model([call("send_mail", "c1", to="ops@example.com", text="Hi")])
    server = stdio.connect(custom_data_extractor=worker_dies_after_the_server_answered)
    with pytest.raises(WorkerDied):
        task.attempt(agent(first, server), servers=(server,))

    second = model(text("Sent."))
    server = stdio.connect()
    task.attempt(agent(second, server), servers=(server,))

    calls = read_calls(stdio.calls)
    assert [(c["tool"], c["sent"]) for c in calls] == [("send_mail", True), ("send_mail", False)]
    assert calls[0]["key"] == calls[1]["key"] is not None
    assert f"never finished runs again step=tool 'send_mail' at 1.2 idempotency_key={calls[0]['key']}" in caplog.text
    assert output_texts(second) == ["already sent to ops@example.com"]
    assert task.replayed == {"model": 1}
    assert task.ran_live == {"tool": 1, "model": 1}


def test_an_mcp_servers_in_flight_policy_resolves_a_cut_off_call_and_a_tools_own_policy_overrides_it(stdio, caplog):
    def dies_in(tool: str) -> Any:
        def worker_dies_after_the_server_answered(context):
            if context.tool_name == tool:
                raise WorkerDied

        return worker_dies_after_the_server_answered

    def sent(key: str, arguments: Any) -> Happened | None:
        # The outside system, asked by the key: the server's log of what it did.
        done = [call for call in read_calls(stdio.calls) if call["key"] == key and call.get("sent")]
        return Happened(f"already sent to {arguments['to']}") if done else None

    def connected(**kwargs: Any) -> MCPServer:
        return in_flight("verify", verify=sent, tools={"add": in_flight(safe_to_repeat=True)})(stdio.connect(**kwargs))

    mail, add = [call("send_mail", "c1", to="ops@example.com", text="Hi")], [call("add", "c2", a=1, b=2)]
    task = McpTask()
    server = connected(custom_data_extractor=dies_in("send_mail"))
    with pytest.raises(WorkerDied):
        task.attempt(agent(model(mail), server), servers=(server,))

    # Try 2: send_mail, in flight, is verified and not run again; then add is cut off.
    second = model(add)
    server = connected(custom_data_extractor=dies_in("add"))
    with pytest.raises(WorkerDied):
        task.attempt(agent(second, server), servers=(server,))
    assert output_texts(second) == ["already sent to ops@example.com"]
    assert [(c["tool"], c["policy"], c["outcome"]) for c in task.journal.stats.in_flight] == [
        ("send_mail", "verify", "it happened")
    ]

    # Try 3: add, safe to repeat by its own policy, runs again without a warning.
    third = model(text("Sent, and 3."))
    server = connected()
    with caplog.at_level("WARNING"):
        task.attempt(agent(third, server), servers=(server,))
    assert stdio.received == ["add", "add", "send_mail"]
    assert output_texts(third) == ["already sent to ops@example.com", "3"]
    assert [(c["tool"], c["policy"]) for c in task.journal.stats.in_flight] == [("add", "rerun")]
    assert "never finished" not in caplog.text


def test_a_replayed_call_carries_the_custom_data_the_servers_extractor_gave_its_live_call(stdio):
    def extract(context) -> dict[str, Any]:
        return {"server_said": context.tool_output, "note": "naïve ☃ \u202e", "nested": [[{"deep": None}]]}

    def custom_data(result) -> list[Any]:
        return [item.custom_data for item in result.new_items if isinstance(item, ToolCallOutputItem)]

    task = McpTask()
    first = model([call("add", "c1", a=1, b=2)], text("3"))
    server = stdio.connect(custom_data_extractor=extract)
    live = custom_data(task.attempt(agent(first, server), servers=(server,)))

    # The next try of the same task instance replays the run (it succeeded, but its journal is kept
    # until the task does): the recorded call is not made again, and its custom data comes back.
    second = model()
    server = stdio.connect(custom_data_extractor=extract)
    replayed = custom_data(task.attempt(agent(second, server), servers=(server,)))

    assert live == [
        {"server_said": {"type": "text", "text": "3"}, "note": "naïve ☃ \u202e", "nested": [[{"deep": None}]]}
    ]
    assert replayed == live
    assert stdio.received == ["add"]
    assert task.replayed == {"model": 2, "tool": 1}


def test_recorded_custom_data_that_is_not_an_object_does_not_load():
    context = ToolContext(context=None, tool_name="add", tool_call_id="c1", tool_arguments="{}")
    with pytest.raises(ValueError, match="its MCP custom data is a list"):
        restore_custom_data(context, {"value": "3", RECORDED_CUSTOM_DATA: ["not", "an", "object"]})
    restore_custom_data(context, {"value": "3"})
    assert context._custom_data is None


# Failed calls run again.


def test_a_call_answered_with_is_error_runs_again_on_retry(stdio):
    task = McpTask()
    first = model([call("flaky", "c1", text="hello")], ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server), servers=(server,))
    assert output_texts(first) == ["Error executing tool flaky: flaky is down"]

    second = model(text("Done."))
    server = stdio.connect()
    task.attempt(agent(second, server), servers=(server,))

    assert stdio.received == ["flaky", "flaky"]
    assert output_texts(second) == ["flaky: hello"]
    assert stdio.keys[0] == stdio.keys[1]
    assert task.replayed == {"model": 1}
    assert task.ran_live == {"tool": 1, "model": 1}


def test_a_call_that_raised_an_mcp_error_the_sdk_showed_the_model_runs_again_on_retry(stdio):
    task = McpTask()
    first = model([call("broken", "c1", text="hello")], ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server), servers=(server,))
    # The SDK's own text for a failed MCP call: before 0.24 it goes on with the error's message,
    # before 0.25 with "Please try again.".
    assert output_texts(first)[0].startswith("An error occurred while running the tool.")

    second = model(text("Done."))
    server = stdio.connect()
    task.attempt(agent(second, server), servers=(server,))

    assert stdio.received == ["broken", "broken"]
    assert output_texts(second) == ["broken: hello"]
    assert task.replayed == {"model": 1}
    assert task.ran_live == {"tool": 1, "model": 1}


def test_a_call_whose_error_fails_the_run_runs_again_on_retry_and_the_rest_replays(stdio):
    task = McpTask()
    first = model([call("add", "c1", a=1, b=2)], [call("broken", "c2", text="hi")])
    server = stdio.connect(failure_error_function=None)
    with pytest.raises(Exception, match="broken is down"):
        task.attempt(agent(first, server), servers=(server,))

    second = model(text("3, hi."))
    server = stdio.connect(failure_error_function=None)
    task.attempt(agent(second, server), servers=(server,))

    assert stdio.received == ["add", "broken", "broken"]
    assert len(second.calls) == 1
    assert task.replayed == {"model": 2, "tool": 1}
    assert task.ran_live == {"tool": 1, "model": 1}


def test_a_call_to_a_server_that_stopped_answering_runs_again_on_retry(tmp_path):
    calls = tmp_path / "calls.jsonl"
    task = McpTask()
    first = model([call("add", "c1", a=2, b=3)], ModelDown())
    with http_server("streamable-http", calls) as gone:

        def stop_the_server_before_the_call(context) -> None:
            gone.stop()

        # Tools listed once: the next turn reaches the model, not the stopped server.
        server = MCPServerStreamableHttp(
            params={"url": gone.url},
            name="tools",
            tool_meta_resolver=stop_the_server_before_the_call,
            cache_tools_list=True,
        )
        with pytest.raises(ModelDown):
            task.attempt(agent(first, server), servers=(server,))
    assert tools_called(calls) == []
    # The SDK's own text for a failed MCP call: before 0.24 it goes on with the error's message,
    # before 0.25 with "Please try again.".
    assert output_texts(first)[0].startswith("An error occurred while running the tool.")

    second = model(text("5"))
    with http_server("streamable-http", calls) as back:
        server = MCPServerStreamableHttp(params={"url": back.url}, name="tools")
        task.attempt(agent(second, server), servers=(server,))

    assert tools_called(calls) == ["add"]
    assert output_texts(second) == ["5"]
    assert task.replayed == {"model": 1}
    assert task.ran_live == {"tool": 1, "model": 1}


# Handoffs, agents as tools, several calls in one answer.


def test_mcp_tools_of_an_agent_reached_by_a_handoff_are_journaled(stdio):
    def agents(scripted: ScriptedModel, server: MCPServer) -> Agent:
        mailer = Agent(name="mailer", model=scripted, mcp_servers=[server])
        return Agent(name="triage", model=scripted, handoffs=[mailer])

    task = McpTask()
    first = model(
        [call("transfer_to_mailer", "h1")],
        [call("send_mail", "c1", to="ops@example.com", text="Hi")],
        ModelDown(),
    )
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agents(first, server), servers=(server,))

    second = model(text("Sent."))
    server = stdio.connect()
    result = task.attempt(agents(second, server), servers=(server,))

    assert result.last_agent.name == "mailer"
    assert stdio.received == ["send_mail"]
    assert len(second.calls) == 1
    assert task.replayed == {"model": 2, "tool": 1}


def test_parallel_mcp_calls_of_one_answer_each_have_their_own_key_and_replay(stdio):
    task = McpTask()
    answer = [call("add", f"c{n}", a=n, b=n) for n in range(5)]
    first = model(answer, ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server, model_settings=ModelSettings(parallel_tool_calls=True)), servers=(server,))
    assert sorted(stdio.received) == ["add"] * 5
    assert len(set(stdio.keys)) == 5

    second = model(text("Sums."))
    server = stdio.connect()
    task.attempt(agent(second, server, model_settings=ModelSettings(parallel_tool_calls=True)), servers=(server,))

    assert len(stdio.received) == 5
    assert output_texts(second) == [str(2 * n) for n in range(5)]
    assert task.replayed == {"model": 1, "tool": 5}


def test_concurrent_runs_sharing_one_server_replay_each_their_own_calls(stdio):
    def attempt(task: McpTask, answers: dict[str, list]) -> dict[str, ScriptedModel]:
        models = {name: model(*steps) for name, steps in answers.items()}

        async def run() -> None:
            async with stdio.connect() as server:
                task.journal = DurableJournal(task.storage)
                with journal_scope(task.journal):
                    await asyncio.gather(
                        *(run_durably(agent(m, server), PROMPT, durable_key=name) for name, m in models.items()),
                        return_exceptions=True,
                    )

        asyncio.run(run())
        return models

    task = McpTask()
    attempt(task, {name: [[call("add", "c1", a=n, b=n)], ModelDown()] for n, name in enumerate(["alice", "bob"])})
    assert stdio.received == ["add", "add"]
    assert len(set(stdio.keys)) == 2

    second = attempt(task, {"alice": [text("0")], "bob": [text("2")]})
    assert stdio.received == ["add", "add"]
    assert {name: output_texts(m) for name, m in second.items()} == {"alice": ["0"], "bob": ["2"]}
    assert task.replayed == {"model": 2, "tool": 2}


def test_two_servers_with_the_same_tools_under_their_server_names_are_journaled_apart(tmp_path):
    east, west = Servers("stdio", tmp_path / "east.jsonl"), Servers("stdio", tmp_path / "west.jsonl")

    def servers() -> tuple[MCPServer, MCPServer]:
        return (
            MCPServerStdio(
                params=stdio_params(east.calls), name="east", client_session_timeout_seconds=CONNECT_TIMEOUT
            ),
            MCPServerStdio(
                params=stdio_params(west.calls), name="west", client_session_timeout_seconds=CONNECT_TIMEOUT
            ),
        )

    def sums(scripted: ScriptedModel, both: tuple[MCPServer, MCPServer]) -> Agent:
        return agent(scripted, *both, mcp_config={"include_server_in_tool_names": True})

    task = McpTask()
    first = model([call("mcp_east__add", "c1", a=1, b=1), call("mcp_west__add", "c2", a=2, b=2)], ModelDown())
    both = servers()
    with pytest.raises(ModelDown):
        task.attempt(sums(first, both), servers=both)
    assert (east.received, west.received) == (["add"], ["add"])
    assert east.keys[0] != west.keys[0] and None not in east.keys + west.keys

    second = model(text("2 and 4"))
    both = servers()
    task.attempt(sums(second, both), servers=both)

    assert (east.received, west.received) == (["add"], ["add"])
    assert output_texts(second) == ["2", "4"]
    assert task.replayed == {"model": 1, "tool": 2}


def test_an_mcp_call_inside_an_agent_run_as_a_tool_is_part_of_that_call_and_sends_no_key_of_its_own(stdio):
    def outer(scripted: ScriptedModel, inner: ScriptedModel, server: MCPServer) -> Agent:
        helper = Agent(name="helper", model=inner, mcp_servers=[server])
        return Agent(name="boss", model=scripted, tools=[helper.as_tool("helper", "Adds.")])

    task = McpTask()
    inner = model([call("add", "i1", a=1, b=1), call("add", "i2", a=2, b=2)], text("2 and 4"))
    first = model([call("helper", "c1", input="add")], ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(outer(first, inner, server), servers=(server,))
    assert stdio.keys == [None, None]  # the two calls would share the agent tool's key

    second = model(text("2 and 4"))
    server = stdio.connect()
    task.attempt(outer(second, model(), server), servers=(server,))
    assert stdio.received == ["add", "add"]  # the agent tool replayed, with its MCP calls
    assert task.replayed == {"model": 1, "tool": 1}


def test_in_a_streamed_run_a_completed_mcp_call_replays_and_streams_the_same_items(stdio):
    def attempt(task: McpTask, scripted: ScriptedModel) -> list[str]:
        async def run() -> list[str]:
            async with stdio.connect() as server:
                task.journal = DurableJournal(task.storage)
                with journal_scope(task.journal):
                    result = run_durably_streamed(agent(scripted, server), PROMPT)
                    return [
                        event.item.type
                        async for event in result.stream_events()
                        if event.type == "run_item_stream_event"
                    ]

        return asyncio.run(run())

    task = McpTask()
    first = model([call("add", "c1", a=2, b=3), call("flaky", "c2", text="hi")], ModelDown())
    with pytest.raises(ModelDown):
        attempt(task, first)
    assert stdio.received == ["add", "flaky"]

    second = model(text("5"))
    items = attempt(task, second)

    assert items == [
        "tool_call_item",
        "tool_call_item",
        "tool_call_output_item",
        "tool_call_output_item",
        "message_output_item",
    ]
    assert stdio.received == ["add", "flaky", "flaky"]  # the isError call ran again, add replayed
    assert output_texts(second) == ["5", "flaky: hi"]
    assert len(second.calls) == 1
    assert task.replayed == {"model": 1, "tool": 1}


# The tool list is part of what the model is asked.


def test_a_server_whose_tool_list_changed_since_the_failed_try_makes_the_model_request_diverge(stdio, caplog):
    task = McpTask()
    first = model([call("add", "c1", a=2, b=3)], ModelDown())
    server = stdio.connect()
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server), servers=(server,))

    second = model([call("add", "c1", a=2, b=3)], text("5"))
    server = stdio.connect(env={"MCP_EXTRA_TOOL": "1"})
    task.attempt(agent(second, server), servers=(server,))

    assert "multiply" in [tool.name for tool in second.calls[0].tools]
    assert len(second.calls) == 2  # asked again: the recorded answer was to another tool list
    assert stdio.received == ["add", "add"]
    assert task.replayed == {}
    assert "no recorded run starts with this call" in caplog.text


# Through real Airflow retries.

MCP_DAG = Path(__file__).parents[1] / "mcp_dags" / "durable_mcp.py"


@pytest.mark.db
def test_through_a_real_airflow_retry_each_completed_mcp_call_reaches_its_server_once(tmp_path):
    script = [
        reply.tool_calls(("add", {"a": 2, "b": 3}, "c1")),
        reply.tool_calls(("transfer_to_mailer", {}, "h1")),
        reply.tool_calls(("send_mail", {"to": "ops@example.com", "text": "5"}, "c2")),
        reply.tool_calls(("broken", {"text": "report"}, "c3")),
        reply.text("Mailed 5."),
    ]
    stdio_calls, http_calls = tmp_path / "stdio.jsonl", tmp_path / "http.jsonl"
    with FakeOpenAIServer(script) as model, http_server("streamable-http", http_calls) as mail:
        env = {
            "AIRFLOW__CORE__DAGS_FOLDER": str(MCP_DAG.parent),
            "AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH": f"file://{tmp_path / 'cache'}",
            "FAKE_OPENAI_BASE_URL": model.base_url,
            "MCP_SERVER_SCRIPT": str(SERVER),
            "MCP_STDIO_CALLS": str(stdio_calls),
            "MCP_HTTP_URL": mail.url,
        }
        run = subprocess.run(
            [sys.executable, str(MCP_DAG)], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
        )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]

    # Try 1 asked the model 4 times and failed in broken; try 2 replayed those 4 and asked once.
    assert len(model.requests) == 5
    assert "broken: report" in json.dumps(model.requests[4].body["messages"][-1])
    assert tools_called(stdio_calls) == ["add"]
    assert tools_called(http_calls) == ["send_mail", "broken", "broken"]
    keys = [call["key"] for call in read_calls(http_calls)]
    assert keys[1] == keys[2] and len(set(keys)) == 2
    assert "Durable: replayed 6 (model 4, tool 2), ran live 2 (model 1, tool 1)" in output
    assert "Mailed 5." in output


# Outside a task, and servers the SDK's way.


def test_outside_a_task_mcp_calls_are_the_sdks_own(stdio):
    async def run() -> Any:
        server = stdio.connect()
        async with server:
            scripted = model([call("add", "c1", a=1, b=2), call("flaky", "c2", text="x")], text("3"))
            return await run_durably(agent(scripted, server), PROMPT)

    assert asyncio.run(run()).final_output == "3"
    assert stdio.received == ["add", "flaky"]
    assert stdio.keys == [None, None]


class NoMetaServer(MCPServerStdio):
    """A server written before the SDK passed ``_meta``: its ``call_tool`` takes none."""

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None) -> Any:  # type: ignore[override]
        return await super().call_tool(tool_name, arguments)


def test_a_server_whose_call_tool_takes_no_meta_is_called_as_the_sdk_calls_it_and_replays(stdio):
    task = McpTask()
    first = model([call("add", "c1", a=2, b=3)], ModelDown())
    server = NoMetaServer(params=stdio_params(stdio.calls), name="old", client_session_timeout_seconds=CONNECT_TIMEOUT)
    with pytest.raises(ModelDown):
        task.attempt(agent(first, server), servers=(server,))

    second = model(text("5"))
    server = NoMetaServer(params=stdio_params(stdio.calls), name="old", client_session_timeout_seconds=CONNECT_TIMEOUT)
    task.attempt(agent(second, server), servers=(server,))

    assert stdio.received == ["add"]
    assert stdio.keys == [None]
    assert task.replayed == {"model": 1, "tool": 1}


def test_the_sdk_still_has_the_private_attributes_the_mcp_hooks_use():
    missing = [name for name, owner in PRIVATE_ATTRIBUTES.items() if not hasattr(owner(), name)]
    assert not missing, f"openai-agents {SDK_VERSION} no longer has {missing}: see durable/_mcp.py"


def test_the_sdk_still_invokes_each_mcp_tool_through_mcputil_invoke_mcp_tool_read_from_the_class(monkeypatch):
    # The key in _meta and isError rely on it: durable/_mcp.py replaces invoke_mcp_tool on MCPUtil.
    from mcp.types import Tool as MCPTool

    reached: list[str] = []

    async def probe(cls: Any, server: Any, tool: Any, context: Any, input_json: str, **kwargs: Any) -> str:
        reached.append(tool.name)
        return "probed"

    monkeypatch.setattr(MCPUtil, "invoke_mcp_tool", classmethod(probe))
    tool = MCPUtil.to_function_tool(
        MCPTool(name="probe", input_schema={"type": "object"}), MCPServerStdio(params={"command": "unused"}), False
    )
    context = ToolContext(context=None, tool_name="probe", tool_call_id="c1", tool_arguments="{}")
    asyncio.run(tool.on_invoke_tool(context, "{}"))
    assert reached == ["probe"], (
        f"openai-agents {SDK_VERSION} no longer invokes an MCP tool through MCPUtil.invoke_mcp_tool: "
        "durable/_mcp.py cannot send the idempotency key or see an isError result"
    )
