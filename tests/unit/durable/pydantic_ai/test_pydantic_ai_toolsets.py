"""
Tool calls through toolsets other than the agent's own function tools, journaled like function
tools, with Pydantic AI's real ``OpenAIChatModel`` against the local OpenAI-compatible server: a
toolset of the user's own (as a remote service's client is, an MCP server among them), a
``FunctionToolset`` given to the run, prefixed, renamed or wrapped; the in-flight policy of a tool
found on its toolset. What each try sends to the server and how often each tool runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import (
    Happened,
    current_idempotency_key,
    in_flight,
    run_durably_sync,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


class ServiceDown(Exception):
    """The remote service a toolset calls failed."""


class Tries:
    """One storage, and a new journal per try, as a new worker has."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent, prompt: str, **kwargs: Any) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, prompt, **kwargs)


def _agent(server: FakeOpenAIServer, **kwargs: Any) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    return Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), **kwargs)


@dataclass
class PaymentsService(AbstractToolset[Any]):
    """
    A toolset of the user's own, as the client of a remote service (an MCP server is one) is: it
    lists the service's tools when the run asks, and each call goes to the service. ``failures``:
    how many calls of a tool fail first (a ``ModelRetry``, as an MCP tool's error result is, or
    an exception); ``die``: the calls of a tool that kill the worker.
    """

    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    failures: dict[str, list[BaseException]] = field(default_factory=dict)
    die: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return "payments"

    async def get_tools(self, ctx: Any) -> dict[str, ToolsetTool[Any]]:
        schema = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
        return {
            name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(name=name, parameters_json_schema=schema, description=f"{name} an order"),
                max_retries=2,
                args_validator=SchemaValidator(core_schema.dict_schema()),
            )
            for name in ("charge", "balance")
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: ToolsetTool[Any]) -> Any:
        self.calls.append((name, tool_args, current_idempotency_key()))
        if self.failures.get(name):
            raise self.failures[name].pop(0)
        if name in self.die:
            self.die.discard(name)
            raise WorkerDied
        return f"{name} {tool_args['order']}: ok"


def test_a_call_of_a_toolset_of_the_users_own_replays_without_reaching_the_service():
    service = PaymentsService()
    script = [reply.tool_calls(("charge", {"order": "A-1"}, "call_1")), reply.text("Charged.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_agent(server, toolsets=[service]), "Charge A-1.")
        assert [call[:2] for call in service.calls] == [("charge", {"order": "A-1"})]
        result = tries.attempt(_agent(server, toolsets=[service]), "Charge A-1.")

    assert result.output == "Charged."
    # try 2 sent only the failed request, which carries the recorded result to the model
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert server.requests[2].body["messages"][-1]["content"] == "charge A-1: ok"
    assert len(service.calls) == 1
    assert service.calls[0][2].startswith("durable-")
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}


@pytest.mark.parametrize(
    "failure", [ModelRetry("the service answered with an error"), ServiceDown("503")], ids=["error-result", "raised"]
)
def test_a_toolset_call_that_failed_runs_again_next_try_and_the_answers_replay(failure):
    service = PaymentsService(failures={"charge": [failure]})
    tries = Tries()
    if isinstance(failure, ModelRetry):
        # Pydantic AI hands the model the error; the model asks again; the run then fails on a request.
        script = [
            reply.tool_calls(("charge", {"order": "A-1"}, "call_1")),
            reply.tool_calls(("charge", {"order": "A-1"}, "call_2")),
            reply.text("Charged."),
        ]
        fail_request, raised = 3, ModelHTTPError
    else:
        script = [reply.tool_calls(("charge", {"order": "A-1"}, "call_1")), reply.text("Charged.")]
        fail_request, raised = None, ServiceDown
    with FakeOpenAIServer(script, fail_requests={fail_request} if fail_request else set()) as server:
        with pytest.raises(raised):
            tries.attempt(_agent(server, toolsets=[service]), "Charge A-1.")
        first_try = len(service.calls)
        result = tries.attempt(_agent(server, toolsets=[service]), "Charge A-1.")

    assert result.output == "Charged."
    if isinstance(failure, ModelRetry):
        # try 1: the failed call and the one that succeeded; try 2 runs the failed call again, which
        # succeeds this time: the conversation goes another way, so the next request is live
        assert first_try == 2 and len(service.calls) == 3
        assert service.calls[2][2] == service.calls[0][2]  # the same call: the same idempotency key
        assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200)]
        assert server.requests[3].body["messages"][-1]["content"] == "charge A-1: ok"
        assert tries.journal.stats.replayed == {"model": 1}
        assert tries.journal.stats.ran_live == {"model": 1, "tool": 1}
    else:
        assert first_try == 1 and len(service.calls) == 2
        assert service.calls[1][2] == service.calls[0][2]
        # the answer that asked for the call replayed: try 2's only request is the next one
        assert [r.number for r in server.requests] == [1, 2]
        assert tries.journal.stats.replayed == {"model": 1}


def test_a_toolsets_policy_resolves_its_tools_found_in_flight_and_a_tools_own_overrides_it():
    verified = []

    def charged(key: str, arguments: dict) -> Happened | None:
        verified.append((key, arguments))
        return Happened("charge A-1: ok")

    def make_service(**kwargs: Any) -> PaymentsService:
        service = PaymentsService(**kwargs)
        return in_flight("verify", verify=charged, tools={"balance": in_flight("fail")})(service)

    script = [reply.tool_calls(("charge", {"order": "A-1"}, "call_1")), reply.text("Charged.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        first = make_service(die={"charge"})
        with pytest.raises(WorkerDied):
            tries.attempt(_agent(server, toolsets=[first]), "Charge A-1.")
        second = make_service()
        result = tries.attempt(_agent(server, toolsets=[second]), "Charge A-1.")

    assert result.output == "Charged."
    # the call in flight was verified as done: the service saw it once, in try 1
    assert [call[:2] for call in first.calls] == [("charge", {"order": "A-1"})] and second.calls == []
    assert verified == [(first.calls[0][2], {"order": "A-1"})]
    assert tries.journal.stats.in_flight[0]["outcome"] == "it happened"
    assert server.requests[1].body["messages"][-1]["content"] == "charge A-1: ok"

    # the override: 'balance' of the same toolset fails the task when found in flight
    tries = Tries()
    with FakeOpenAIServer([reply.tool_calls(("balance", {"order": "A-1"}, "call_1"))]) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(_agent(server, toolsets=[make_service(die={"balance"})]), "Balance?")
        with pytest.raises(Exception, match=r"tool 'balance' was in flight") as failed:
            tries.attempt(_agent(server, toolsets=[make_service()]), "Balance?")
    assert type(failed.value).__name__ == "AirflowFailException"
    assert verified == [(first.calls[0][2], {"order": "A-1"})]


@pytest.mark.parametrize("how", ["prefixed", "renamed", "wrapped"])
def test_a_function_tool_under_a_prefix_a_new_name_or_a_wrapper_keeps_its_policy(how):
    runs = Counter()

    def make_toolsets() -> list[AbstractToolset[Any]]:
        @in_flight("fail")
        def transfer(amount: int) -> str:
            """Transfer money."""
            runs["transfer"] += 1
            raise WorkerDied

        toolset: AbstractToolset[Any] = FunctionToolset([transfer])
        if how == "prefixed":
            toolset = toolset.prefixed("bank")
        elif how == "renamed":
            toolset = toolset.renamed({"send_money": "transfer"})
        else:
            toolset = WrapperToolset(toolset)
        return [toolset]

    name = {"prefixed": "bank_transfer", "renamed": "send_money", "wrapped": "transfer"}[how]
    script = [reply.tool_calls((name, {"amount": 5}, "call_1")), reply.text("Done.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(_agent(server, toolsets=make_toolsets()), "Send 5.")
        with pytest.raises(Exception, match=rf"tool '{name}' was in flight at 1\.2") as failed:
            tries.attempt(_agent(server, toolsets=make_toolsets()), "Send 5.")
    assert type(failed.value).__name__ == "AirflowFailException"
    assert runs == {"transfer": 1}
    assert len(server.requests) == 1


def test_in_flight_with_tools_applies_to_a_toolset_only():
    def lookup(name: str) -> str:
        return name

    with pytest.raises(TypeError, match=r"tools=\.\.\.\) applies to a toolset"):
        in_flight("fail", tools={"x": in_flight()})(lookup)
