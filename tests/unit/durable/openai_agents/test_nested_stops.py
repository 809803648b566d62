"""
A stop inside a nested run (a call in flight whose policy fails the task, a verify function that
raised, a budget refusal) passes every tool boundary above it: a function tool whatever its
``failure_error_function``, ``Agent.as_tool()``, an agent handed off to, an MCP tool. Each test
counts what ran and what reached each model in each try, ends each try as Airflow's listener does
(the journal is deleted when a try succeeds), and checks what the stop left in the journal.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ModelSettings, Usage, function_tool, handoff
from agents.mcp import MCPServer
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import AirflowFailException
from mcp.types import CallToolResult, GetPromptResult, ListPromptsResult, TextContent
from mcp.types import Tool as MCPTool
from tries import Task, WorkerDied

from airflow.providers.common.ai.durable.core.budget import BUDGET_KEY
from airflow.providers.common.ai.durable.core.in_flight import Happened
from airflow.providers.common.ai.durable.core.in_flight_calls import InFlightNotVerified
from airflow.providers.common.ai.durable.openai_agents import UsageBudget, in_flight, run_durably

REFUND = function_call("refund", {"order": "A-1"}, call_id="c1")
ASK_CLERK = function_call("clerk", {"request": "refund A-1"}, call_id="b1")
USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


class EndedTask(Task):
    """Tries ended as Airflow's listener ends them: a try that succeeded deletes the journal."""

    def ended_attempt(self, agent: Agent, **kwargs: Any) -> Any:
        succeeded = False
        try:
            result = self.attempt(agent, **kwargs)
            succeeded = True
            return result
        finally:
            assert self.journal is not None
            self.journal.finish(succeeded=succeeded)

    def entries(self) -> dict[str, dict[str, Any]]:
        return {key: json.loads(text) for key, text in self.storage.entries.items()}


class Refunds:
    """A refund tool without idempotency; the worker dies in its first call."""

    def __init__(self) -> None:
        self.made = 0
        self.verified = 0

    def tool(self, policy: Any) -> Any:
        @function_tool
        def refund(order: str) -> str:
            """Refund an order."""
            self.made += 1
            if self.made == 1:
                raise WorkerDied("killed after the refund")
            return f"refunded {order}"

        return policy(refund)

    def made_it(self, key: str, arguments: Any) -> Happened:
        self.verified += 1
        return Happened("refund already made")


def clerk_tool(clerk_model: ScriptedModel, refunds: Refunds, policy: Any, handling: str) -> Any:
    """A function tool that runs the clerk, an agent of its own, as a nested durable run."""

    async def clerk(request: str) -> str:
        """Ask the clerk to refund an order."""
        agent = Agent(name="clerk", model=clerk_model, tools=[refunds.tool(policy)])
        if handling == "caught by the tool":
            try:
                return str((await run_durably(agent, request)).final_output)
            except Exception:
                return "the clerk could not do it"
        return str((await run_durably(agent, request)).final_output)

    if handling == "failure_error_function=None":
        return function_tool(clerk, failure_error_function=None)
    if handling == "a failure_error_function of its own":
        return function_tool(clerk, failure_error_function=lambda context, error: "the clerk is away")
    return function_tool(clerk)


class ClerkServer(MCPServer):
    """An MCP server in this process whose one tool, ``clerk``, runs the clerk as a nested durable run."""

    def __init__(self, clerk_model: ScriptedModel, refunds: Refunds, policy: Any) -> None:
        super().__init__()
        self.clerk = Agent(name="clerk", model=clerk_model, tools=[refunds.tool(policy)])

    @property
    def name(self) -> str:
        return "clerks"

    async def connect(self) -> None:
        pass

    async def cleanup(self) -> None:
        pass

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[MCPTool]:
        schema = {"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]}
        return [MCPTool(name="clerk", description="Ask the clerk.", inputSchema=schema)]

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None, meta: Any = None) -> CallToolResult:
        result = await run_durably(self.clerk, (arguments or {})["request"])
        return CallToolResult(content=[TextContent(type="text", text=str(result.final_output))])

    async def list_prompts(self) -> ListPromptsResult:
        return ListPromptsResult(prompts=[])

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> GetPromptResult:
        raise NotImplementedError


BOUNDARIES = [
    "the SDK's default error handling",
    "failure_error_function=None",
    "a failure_error_function of its own",
    "caught by the tool",
    "after a handoff",
    "an MCP tool",
]


def boss_agent(boss_model: ScriptedModel, clerk_model: ScriptedModel, refunds: Refunds, policy: Any, boundary: str):
    """The agent the task runs, which reaches the clerk across ``boundary``."""
    if boundary == "an MCP tool":
        return Agent(name="boss", model=boss_model, mcp_servers=[ClerkServer(clerk_model, refunds, policy)])
    handling = "the SDK's default error handling" if boundary == "after a handoff" else boundary
    clerk = clerk_tool(clerk_model, refunds, policy, handling)
    if boundary == "after a handoff":
        specialist = Agent(name="specialist", model=boss_model, tools=[clerk])
        return Agent(name="boss", model=boss_model, handoffs=[handoff(specialist)])
    return Agent(name="boss", model=boss_model, tools=[clerk])


def first_answers(boundary: str) -> list[list[Any]]:
    if boundary == "after a handoff":
        return [[function_call("transfer_to_specialist", {}, call_id="h1")], [ASK_CLERK]]
    return [[ASK_CLERK]]


def died_in_the_nested_refund(task: EndedTask, refunds: Refunds, policy: Any, boundary: str) -> str:
    """Try 1: the worker dies inside the clerk's refund; return the key of the refund's step."""
    with pytest.raises(WorkerDied):
        task.attempt(
            boss_agent(ScriptedModel(first_answers(boundary)), ScriptedModel([[REFUND]]), refunds, policy, boundary)
        )
    refund_step = "1.3.1.2" if boundary == "after a handoff" else "1.2.1.2"
    assert task.entries()[refund_step]["state"] == "in_flight"
    return refund_step


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_call_in_flight_whose_policy_fails_the_task_fails_it_for_good_across_every_boundary(boundary):
    task, refunds = EndedTask(), Refunds()
    refund_step = died_in_the_nested_refund(task, refunds, in_flight("fail"), boundary)

    boss, clerk = ScriptedModel([[assistant_message("All done.")]]), ScriptedModel([[assistant_message("Done.")]])
    with pytest.raises(AirflowFailException, match="its tool's policy is 'fail'"):
        task.ended_attempt(boss_agent(boss, clerk, refunds, in_flight("fail"), boundary))

    # Try 2 replayed every answer before the refund: no request reached either model, the refund
    # never ran again, and the boss was never told the clerk's failure as a tool output.
    assert (len(boss.calls), len(clerk.calls), refunds.made) == (0, 0, 1)
    entries = task.entries()
    assert entries[refund_step]["state"] == "in_flight"
    # The call that started the nested run failed: the next try runs it again, and its run replays.
    assert entries[refund_step.rsplit(".", 2)[0]]["state"] == "failed"

    # A clear with the policy that fits resolves the call the stop kept in flight: it never runs.
    verified = in_flight("verify", verify=refunds.made_it)
    boss = ScriptedModel([[assistant_message("All done.")]])
    task.ended_attempt(boss_agent(boss, ScriptedModel([[assistant_message("Done.")]]), refunds, verified, boundary))
    assert (refunds.made, refunds.verified, len(boss.calls)) == (1, 1, 1)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_verify_function_that_raised_in_a_nested_run_fails_the_try_and_keeps_the_call_in_flight(boundary):
    task, refunds = EndedTask(), Refunds()
    refund_step = died_in_the_nested_refund(task, refunds, in_flight("fail"), boundary)

    def service_down(key: str, arguments: Any) -> Happened:
        raise ConnectionError("the payment service is down")

    boss, clerk = ScriptedModel([[assistant_message("All done.")]]), ScriptedModel([[assistant_message("Done.")]])
    down = in_flight("verify", verify=service_down)
    with pytest.raises(InFlightNotVerified, match="stays in flight for the next try"):
        task.ended_attempt(boss_agent(boss, clerk, refunds, down, boundary))
    assert (len(boss.calls), len(clerk.calls), refunds.made) == (0, 0, 1)
    assert task.entries()[refund_step]["state"] == "in_flight"

    # The next try asks again, and the refund is not made twice.
    boss = ScriptedModel([[assistant_message("All done.")]])
    verified = in_flight("verify", verify=refunds.made_it)
    task.ended_attempt(boss_agent(boss, ScriptedModel([[assistant_message("Done.")]]), refunds, verified, boundary))
    assert (refunds.made, refunds.verified, len(boss.calls)) == (1, 1, 1)


def archivist_run(archivist_model: ScriptedModel, runs: list[str]) -> Any:
    """A function tool that runs an agent whose requests may add up to 90 output tokens, as a nested durable run."""

    @function_tool
    async def archive(note: str) -> str:
        """Archive a note."""
        runs.append(note)
        agent = Agent(name="archivist", model=archivist_model, model_settings=ModelSettings(max_tokens=90))
        return str((await run_durably(agent, note)).final_output)

    return archive


@pytest.mark.parametrize(
    "boundary",
    [
        "a function tool",
        "Agent.as_tool()",
        "the agent of Agent.as_tool() itself",
        # With on_stream the tool streams its agent's run: its requests are streamed ones.
        "the agent of Agent.as_tool(on_stream=...) itself",
    ],
)
def test_a_budget_refusal_inside_a_tool_fails_the_task_for_good_and_keeps_what_the_tries_spent(boundary):
    """
    Each request adds 20 output tokens, of a budget of 100; the archivist's may add up to 90, so
    the budget refuses it. The boss, whose requests' most is not known, could go on, but must not.
    """
    task, runs = EndedTask(), []
    # Agent.as_tool() makes a tool whose one argument is named input.
    arguments = {"note": "n1"} if boundary == "a function tool" else {"input": "n1"}
    boss = ScriptedModel(
        [[function_call("archive", arguments, call_id="b1")], [assistant_message("Done.")]], default_usage=USAGE
    )
    archivist = ScriptedModel([[assistant_message("archived")]], default_usage=USAGE)
    researcher = ScriptedModel(
        [[function_call("archive", {"note": "n1"}, call_id="r1")], [assistant_message("Researched.")]],
        default_usage=USAGE,
    )
    if boundary == "a function tool":
        agent = Agent(name="boss", model=boss, tools=[archivist_run(archivist, runs)])
    else:
        if boundary == "Agent.as_tool()":
            tools, settings = [archivist_run(archivist, runs)], ModelSettings()
        else:
            tools, settings = [], ModelSettings(max_tokens=90)
        streamed = {"on_stream": lambda event: None} if "on_stream" in boundary else {}
        research = Agent(name="researcher", model=researcher, tools=tools, model_settings=settings).as_tool(
            tool_name="archive", tool_description="Research and archive.", **streamed
        )
        agent = Agent(name="boss", model=boss, tools=[research])

    with pytest.raises(AirflowFailException, match="it would pass this task's budget, max_output_tokens=100"):
        task.ended_attempt(agent, budget=UsageBudget(max_output_tokens=100))

    # No request was sent after the refusal, by the boss or by the agent between.
    assert (len(boss.calls), len(archivist.calls)) == (1, 0)
    expected_researcher_calls = 1 if boundary == "Agent.as_tool()" else 0
    assert len(researcher.calls) == expected_researcher_calls
    assert runs == ([] if boundary.startswith("the agent of") else ["n1"])
    # What the try spent is kept, with the journal, for the next try's budget.
    spent = json.loads(task.storage.entries[BUDGET_KEY])["tries"]["1"]
    assert (spent["requests"], spent["output_tokens"]) == (
        1 + expected_researcher_calls,
        20 * (1 + expected_researcher_calls),
    )
    assert task.entries()["1.1"]["state"] == "done"
