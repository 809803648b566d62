"""A durable run logs each step as it completes, replayed or live, so the task log shows progress (R-38)."""

from __future__ import annotations

import logging

import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

LOGGER = "airflow.providers.common.ai.durable.openai_agents"


def test_each_step_is_logged_when_it_completes_replayed_or_live(caplog):
    seen_by_the_tool: list[list[str]] = []

    def progress() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name.startswith(LOGGER) and r.getMessage().startswith("Durable: ")
        ]

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        seen_by_the_tool.append(progress())
        return f"sunny in {city}"

    task = tries.Task()
    calls = [function_call("weather", {"city": "Paris"}, call_id="c1")]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        task.failing_attempt(Agent(name="a", model=ScriptedModel([calls, RuntimeError()]), tools=[weather]))
        # The model step was logged before its tool ran: the log shows progress while the run goes on.
        assert seen_by_the_tool == [["Durable: model 'ScriptedModel' at 1.1 ran live"]]
        assert progress()[-1] == "Durable: tool 'weather' at 1.2 ran live"
        caplog.clear()
        task.attempt(Agent(name="a", model=ScriptedModel([[assistant_message("ok")]]), tools=[weather]))

    assert progress() == [
        "Durable: model 'ScriptedModel' at 1.1 replayed",
        "Durable: tool 'weather' at 1.2 replayed",
        "Durable: model 'ScriptedModel' at 1.3 ran live",
    ]


def test_a_tool_whose_failure_the_sdk_passed_to_the_model_is_logged_as_failed(caplog):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        raise ConnectionError("the weather service is down")

    calls = [function_call("weather", {"city": "Paris"}, call_id="c1")]
    model = ScriptedModel([calls, [assistant_message("No weather today.")]])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        tries.Task().attempt(Agent(name="a", model=model, tools=[weather]))
    progress = [
        r.getMessage() for r in caplog.records if r.name.startswith(LOGGER) and r.getMessage().startswith("Durable: ")
    ]
    assert progress == [
        "Durable: model 'ScriptedModel' at 1.1 ran live",
        "Durable: tool 'weather' at 1.2 ran live and failed, so it runs again next try "
        'reason="the SDK passed the tool\'s failure to the model as text"',
        "Durable: model 'ScriptedModel' at 1.3 ran live",
    ]
