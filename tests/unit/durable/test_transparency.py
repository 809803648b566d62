"""A durable run shows what Runner.run would have shown (R-20, R-49): the causes issue 14 found."""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter

import pytest
from agents import Agent, Model, RunConfig, RunContextWrapper, Runner, default_tool_error_function, function_tool
from agents.models.multi_provider import MultiProvider
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync
from airflow.providers.common.ai.durable.openai_agents._sdk_private import has_sdk_feature


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


def test_a_durable_result_its_run_state_and_a_tools_context_can_be_deep_copied():
    contexts = []

    @function_tool
    def remember(context: RunContextWrapper) -> str:
        """Keeps its context."""
        contexts.append(context)
        return "kept"

    model = scripted([function_call("remember", {}, call_id="c1")], [assistant_message("hi")])
    result = Task().attempt(Agent(name="a", model=model, tools=[remember]))
    assert copy.deepcopy(result).final_output == "hi"
    copy.deepcopy(result.to_state())
    copy.deepcopy(contexts[0])  # its run config carries the journaled run's provider


@pytest.mark.parametrize("option", ["previous_response_id", "conversation_id", "auto_previous_response_id"])
def test_outside_a_task_server_side_conversation_options_go_to_runner_run_unrefused(option):
    model = scripted([assistant_message("hi")])
    value = True if option == "auto_previous_response_id" else "resp_1"
    result = asyncio.run(run_durably(Agent(name="a", model=model), "hi", **{option: value}))
    assert result.final_output == "hi"
    if option != "auto_previous_response_id":
        assert getattr(model.calls[0], option) == "resp_1"


def test_inside_a_task_server_side_conversation_options_are_still_refused_before_any_call():
    model = scripted([assistant_message("hi")])
    with pytest.raises(ValueError, match="run_durably cannot use previous_response_id"):
        Task().attempt(Agent(name="a", model=model), previous_response_id="resp_1")
    assert not model.calls


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


def test_an_error_closing_the_model_provider_never_replaces_the_runs_own_error(monkeypatch, caplog):
    async def broken_close(self):
        raise RuntimeError("close failed")

    monkeypatch.setattr(MultiProvider, "aclose", broken_close)
    with pytest.raises(LookupError, match="the run's own error"):
        Task().attempt(Agent(name="a", model=scripted(LookupError("the run's own error"))))
    # Before 0.22.x the SDK never closes the provider it made, nor does a durable run (test_sdk_private).
    assert ("Failed to close model provider" in caplog.text) == has_sdk_feature("closes its model provider")


def test_run_durably_sync_cancels_its_run_when_interrupted_and_leaves_no_task_on_the_loop():
    class Interrupted(Model):
        async def get_response(self, *args, **kwargs):
            raise KeyboardInterrupt

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    with pytest.raises(KeyboardInterrupt):
        Task().attempt(Agent(name="a", model=Interrupted()))
    loop = asyncio.get_event_loop_policy().get_event_loop()
    assert not [task for task in asyncio.all_tasks(loop) if not task.done()]


def test_run_durably_sync_inside_a_running_loop_raises_the_sdks_own_error():
    async def inside():
        run_durably_sync(Agent(name="a", model=scripted([assistant_message("hi")])), "hi")

    with pytest.raises(RuntimeError, match="AgentRunner.run_sync\\(\\) cannot be called when an event loop"):
        asyncio.run(inside())


def approval_agent(runs: Counter) -> Agent:
    @function_tool(needs_approval=True)
    def wire_money(amount: int) -> str:
        """Wires money."""
        runs["wire_money"] += 1
        return "wired"

    inner = scripted([function_call("wire_money", {"amount": 5}, call_id="w1")], [assistant_message("done")])
    return Agent(name="payer", model=inner, tools=[wire_money])


def test_an_agent_used_as_a_tool_that_stopped_for_an_approval_is_not_recorded_as_a_completed_call():
    runs = Counter()
    payer = approval_agent(runs)
    outer = scripted([function_call("pay", {"input": "pay 5"}, call_id="c1")], [assistant_message("paid")])
    task = Task()
    boss = Agent(name="boss", model=outer, tools=[payer.as_tool(tool_name="pay", tool_description="Pays.")])
    result = task.attempt(boss)
    assert result.interruptions and runs["wire_money"] == 0
    assert json.loads(task.storage.entries["1.2"])["state"] != "done"

    # The retry does not replay the unfinished call into a final answer without the approval.
    payer_again = approval_agent(runs)
    boss_again = Agent(
        name="boss",
        model=scripted([assistant_message("paid")]),
        tools=[payer_again.as_tool(tool_name="pay", tool_description="Pays.")],
    )
    assert task.attempt(boss_again).interruptions
    # The payer was asked again, live; before 0.23 the SDK gives a run in the same process the
    # pending result of the first try's nested run instead, as it does Runner.run (a retry in a
    # new process has none to find).
    assert len(payer_again.model.calls) == (1 if runs_have_a_scope_of_their_own() else 0)
    assert runs["wire_money"] == 0


def runs_have_a_scope_of_their_own() -> bool:
    """Whether the SDK keeps the results of nested agent runs per run (0.23 on) or per process."""
    from agents.agent_tool_state import get_agent_tool_state_scope

    scopes = []

    @function_tool
    def note_scope(context: RunContextWrapper) -> str:
        """Notes the scope."""
        scopes.append(get_agent_tool_state_scope(context))
        return "noted"

    model = scripted([function_call("note_scope", {}, call_id="s1")], [assistant_message("ok")])
    Runner.run_sync(Agent(name="a", model=model, tools=[note_scope]), "go")
    return scopes[0] is not None


def test_a_function_tool_whose_nested_durable_run_stopped_for_an_approval_is_not_recorded():
    runs = Counter()

    @function_tool
    async def delegate() -> str:
        """Delegates the payment."""
        runs["delegate"] += 1
        nested = await run_durably(approval_agent(runs), "pay 5")
        return "waiting" if nested.interruptions else "paid"

    storage = InMemoryStorage()
    for _ in range(2):
        journal = DurableJournal(storage)
        with journal_scope(journal):
            run_durably_sync(
                Agent(
                    name="boss",
                    model=scripted([function_call("delegate", {}, call_id="c1")], [assistant_message("ok")]),
                    tools=[delegate],
                ),
                "go",
                run_config=RunConfig(),
            )
        assert json.loads(storage.entries["1.2"])["state"] == "failed"
    assert runs["delegate"] == 2


def test_outside_a_task_run_durably_sync_is_runner_run_sync_with_the_default_runner_the_user_set():
    from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

    calls = []

    class Custom(AgentRunner):
        def run_sync(self, starting_agent, input, **kwargs):
            calls.append(input)
            return super().run_sync(starting_agent, input, **kwargs)

    previous = get_default_agent_runner()
    set_default_agent_runner(Custom())
    try:
        result = run_durably_sync(Agent(name="a", model=scripted([assistant_message("hi")])), "hello")
    finally:
        set_default_agent_runner(previous)
    assert result.final_output == "hi" and calls == ["hello"]


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


def test_results_items_contexts_and_hooks_hold_the_users_own_agents_and_tools():
    from agents import RunHooks

    seen: dict[str, list] = {"hook agents": [], "hook tools": [], "context agents": [], "model tools": []}

    @function_tool
    def weather(context: RunContextWrapper, city: str) -> str:
        """The weather."""
        seen["context agents"].append(getattr(context, "agent", None))
        return "sunny"

    class Hooks(RunHooks):
        async def on_tool_start(self, context, agent, tool):
            seen["hook agents"].append(agent)
            seen["hook tools"].append(tool)

    class Spy(ScriptedModel):
        async def get_response(self, *args, **kwargs):
            seen["model tools"].extend(kwargs.get("tools", args[3] if len(args) > 3 else []))
            return await super().get_response(*args, **kwargs)

    specialist = Agent(
        name="specialist",
        model=Spy([[function_call("weather", {"city": "Oslo"}, call_id="c1")], [assistant_message("ok")]]),
        tools=[weather],
    )
    triage = Agent(
        name="triage",
        model=scripted([function_call("transfer_to_specialist", {}, call_id="h1")]),
        handoffs=[specialist],
    )
    result = Task().attempt(triage, hooks=Hooks())
    assert result.last_agent is specialist
    assert all(item.agent in (triage, specialist) for item in result.new_items)
    assert seen["hook agents"] == [specialist] and seen["hook tools"] == [weather]
    assert seen["context agents"] == [specialist]
    assert all(tool is weather for tool in seen["model tools"])
    assert result.to_state()._current_agent is specialist
