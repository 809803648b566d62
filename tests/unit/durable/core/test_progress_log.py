"""
A durable run logs each live step as it completes, and each stretch of replayed steps as one line
when it ends, so the task log shows progress (R-38).
"""

from __future__ import annotations

import logging

import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

LOGGER = "airflow.providers.common.ai.durable.openai_agents"


def test_each_live_step_is_logged_when_it_completes_and_the_replayed_ones_before_it_as_one_line(caplog):
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
        "Durable: replayed steps 1.1 to 1.2: 1 model call ('ScriptedModel'), 1 tool call ('weather')",
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


def _progress_lines(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name.startswith(LOGGER) and r.getMessage().startswith("Durable: ")
    ]


def test_a_stretch_the_try_ends_in_is_logged_as_the_run_ends_and_one_replayed_step_keeps_its_own_line(caplog):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    def calls(n: int) -> list:
        return [function_call("weather", {"city": f"city-{n}"}, call_id=f"c{n}")]

    task = tries.Task()
    task.failing_attempt(Agent(name="a", model=ScriptedModel([calls(1), calls(2), RuntimeError()]), tools=[weather]))
    # Try 2 replays four steps and fails again before anything runs live: the stretch is still logged.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        task.failing_attempt(Agent(name="a", model=ScriptedModel([RuntimeError()]), tools=[weather]))
    assert _progress_lines(caplog) == [
        "Durable: replayed steps 1.1 to 1.4: 2 model calls ('ScriptedModel'), 2 tool calls ('weather')"
    ]


def test_a_divergence_is_logged_after_the_stretch_replayed_before_it(caplog):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    requests_of_try_2: list[int] = []

    def instructions(context, agent) -> str:
        # Try 2's second request asks with other instructions: the run diverges there.
        if on_try_2:
            requests_of_try_2.append(1)
        return "Be very brief." if len(requests_of_try_2) > 1 else "Be brief."

    def agent(model: ScriptedModel) -> Agent:
        return Agent(name="a", instructions=instructions, model=model, tools=[weather])

    def calls(n: int) -> list:
        return [function_call("weather", {"city": f"city-{n}"}, call_id=f"c{n}")]

    task, on_try_2 = tries.Task(), False
    task.failing_attempt(agent(ScriptedModel([calls(1), calls(2), RuntimeError()])))
    on_try_2 = True
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
        task.attempt(agent(ScriptedModel([[assistant_message("ok")]])))

    assert _durable_lines(caplog) == [
        "Durable: replayed steps 1.1 to 1.2: 1 model call ('ScriptedModel'), 1 tool call ('weather')",
        "Durable: run diverged; this call and every later call of run 1 run live step=model 'ScriptedModel' at 1.3 "
        "reason='it asks something other than the recorded call: the instructions changed'",
        "Durable: model 'ScriptedModel' at 1.3 ran live",
    ]


def test_a_step_that_failed_before_is_logged_as_running_live_after_the_stretch_replayed_before_it(caplog):
    down = [True]

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        if down[0]:
            raise ConnectionError("the weather service is down")
        return f"sunny in {city}"

    calls = [function_call("weather", {"city": "Paris"}, call_id="c1")]
    task = tries.Task()
    task.failing_attempt(Agent(name="a", model=ScriptedModel([calls, RuntimeError()]), tools=[weather]))
    down[0] = False
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
        task.attempt(Agent(name="a", model=ScriptedModel([[assistant_message("ok")]]), tools=[weather]))

    assert _durable_lines(caplog)[:3] == [
        "Durable: model 'ScriptedModel' at 1.1 replayed",
        "Durable: runs live step=tool 'weather' at 1.2 reason='it failed on an earlier try'",
        "Durable: tool 'weather' at 1.2 ran live",
    ]


def _durable_lines(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("Durable: ") and "fernet_key" not in r.getMessage()
    ]


def test_a_stretch_names_five_names_of_a_kind_and_counts_the_others():
    from airflow.providers.common.ai.durable.core.progress import ProgressLog

    class Step:
        def __init__(self, key: str, name: str) -> None:
            self.key, self.kind, self.name, self.replayed, self.failure = key, "tool", name, True, None

    lines: list[str] = []

    class Logger:
        def info(self, message: str, *args: object) -> None:
            lines.append(message % args)

    progress = ProgressLog(Logger())  # type: ignore[arg-type]
    for number in range(1, 8):
        progress.step_done(Step(f"1.{number}", f"t{number}"))  # type: ignore[arg-type]
    progress.step_done(Step("1.8", "t1"))  # type: ignore[arg-type]
    progress.flush()
    progress.flush()
    assert lines == ["Durable: replayed steps 1.1 to 1.8: 8 tool calls ('t1', 't2', 't3', 't4', 't5' and 2 more)"]
