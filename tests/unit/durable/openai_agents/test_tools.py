"""
A function tool's failure policy in a journaled run is the SDK's, as without the journal (R-20,
R-49): a tool given the SDK's default failure function keeps the SDK's redaction of a failure's
detail, and a tool's ``failure_error_function`` wins over the run's ``tool_error_formatter``. The
call is recorded as failed and runs again on retry.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from agents import Agent, RunConfig, Runner, default_tool_error_function, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


def test_a_tool_given_the_default_failure_function_explicitly_keeps_the_sdks_redaction_and_runs_again():
    from agents.tool import resolve_function_tool_failure_error_function

    runs = Counter()

    @function_tool(failure_error_function=default_tool_error_function)
    def fragile() -> str:
        """Fails."""
        runs["fragile"] += 1
        raise ValueError("secret detail of the failure")

    seen: list = []

    class Spy(ScriptedModel):
        async def get_response(self, *args, **kwargs):
            tools = kwargs.get("tools", args[3] if len(args) > 3 else [])
            seen.extend(tool for tool in tools if tool.name == "fragile")
            return await super().get_response(*args, **kwargs)

    task = Task()
    first = Spy([[function_call("fragile", {}, call_id="c1")], [assistant_message("sorry")]])
    task.attempt(Agent(name="a", model=first, tools=[fragile]))
    # The SDK redacts a failure's detail from traces only when the tool's formatter is its default.
    assert all(resolve_function_tool_failure_error_function(tool) is default_tool_error_function for tool in seen)
    plain = scripted([function_call("fragile", {}, call_id="c1")], [assistant_message("sorry")])
    Runner.run_sync(Agent(name="a", model=plain, tools=[fragile]), "go")
    assert first.calls[1].input[-1]["output"] == plain.calls[1].input[-1]["output"]  # the SDK's own text
    assert json.loads(task.storage.entries["1.2"])["state"] == "failed"

    second = Spy([[assistant_message("sorry")]])  # the same model class: the same model name
    task.attempt(Agent(name="a", model=second, tools=[fragile]))
    # The failed call ran again; its text is the same, so the answer after it replays.
    assert task.journal.stats.replayed == {"model": 2} and not second.calls
    assert runs["fragile"] == 3  # try 1, the plain run, try 2


@pytest.mark.parametrize("explicit_default", [True, False], ids=["explicit-default", "custom"])
def test_a_tools_failure_policy_wins_over_the_runs_tool_error_formatter_as_without_the_journal(explicit_default):
    from agents import ToolErrorFormatterArgs

    @function_tool(failure_error_function=default_tool_error_function if explicit_default else (lambda c, e: "mine"))
    def fragile() -> str:
        """Fails."""
        raise ValueError("detail")

    original_invoker_callback = fragile.on_invoke_tool._on_handled_error

    def run_formatter(args: ToolErrorFormatterArgs) -> str:
        return "from the run"

    def attempt(runner) -> str:
        model = scripted([function_call("fragile", {}, call_id="c1")], [assistant_message("ok")])
        runner(
            Agent(name="a", model=model, tools=[fragile]),
            "go",
            run_config=RunConfig(tool_error_formatter=run_formatter),
        )
        return model.calls[1].input[-1]["output"]

    task = Task()
    assert attempt(task.attempt) == attempt(Runner.run_sync)
    assert json.loads(task.storage.entries["1.2"])["state"] == "failed"
    assert fragile.on_invoke_tool._on_handled_error is original_invoker_callback  # the user's tool is untouched
