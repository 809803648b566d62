"""
``run_durably`` and ``run_durably_sync`` as the SDK's runner (R-20, R-49): outside a task they are
``Runner.run`` (the default runner the user set, the options a task refuses); inside one they
refuse, before any call, what a retry could not replay (a server-side conversation, a
``durable_key`` that names nothing), and a run ends as ``Runner.run`` ends it: with its own error,
cancelled when interrupted, with the SDK's error inside a running event loop.
"""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, Model
from agents.models.multi_provider import MultiProvider
from agents.testing import ScriptedModel, assistant_message
from tries import Task

from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync
from airflow.providers.common.ai.durable.openai_agents._sdk_private import has_sdk_feature


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


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


@pytest.mark.parametrize("bad", ["", "  ", 7, b"alice"])
def test_a_durable_key_that_is_not_a_non_empty_string_is_refused_before_anything_runs(bad):
    model = scripted([assistant_message("hi")])
    with pytest.raises(ValueError, match="durable_key must be a non-empty string"):
        run_durably_sync(Agent(name="a", model=model), "hi", durable_key=bad)
    assert not model.calls


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
