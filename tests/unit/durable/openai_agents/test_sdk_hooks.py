"""
The SDK functions a durable run replaces are in place only while one runs: importing the adapter
changes nothing in ``agents``, and the last durable run to end, however it ends, puts back what
the hooks replaced (``openai_agents/_sdk_hooks.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import subprocess
import sys
import threading
from collections import Counter

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_streamed
from airflow.providers.common.ai.durable.openai_agents._agent_run import SDK_HOOKS
from airflow.providers.common.ai.durable.openai_agents._sdk_hooks import Replacement, SDKHooks

#: Each SDK attribute a durable run replaces, as (module, owner's attribute path, attribute).
HOOKED = [
    ("agents.run_internal.run_loop", "", "get_model"),
    ("agents.run_internal.tool_execution", "", "_invoke_function_tool_with_metadata"),
    ("agents.tool", "", "maybe_invoke_function_tool_failure_error_function"),
    ("agents.mcp.util", "MCPUtil", "to_function_tool"),
    ("agents.mcp.util", "MCPUtil", "invoke_mcp_tool"),
]


def _sdk_objects() -> dict[str, object]:
    """What the SDK holds now under each hooked name (a class's raw attribute: the classmethod)."""
    import importlib

    found = {}
    for module_name, owner_name, attribute in HOOKED:
        owner = importlib.import_module(module_name)
        if owner_name:
            owner = getattr(owner, owner_name)
        found[f"{module_name}.{owner_name}.{attribute}"] = inspect.getattr_static(owner, attribute)
    return found


ORIGINALS = _sdk_objects()


def _hooks_in_place() -> bool:
    now = _sdk_objects()
    replaced = [name for name in ORIGINALS if now[name] is not ORIGINALS[name]]
    assert replaced in ([], list(ORIGINALS)), f"only some of the hooks are in place: {replaced}"
    return bool(replaced)


class Probe:
    """A function tool that notes, each time it runs, whether the hooks are in place."""

    def __init__(self, before=None) -> None:
        self.seen: list[bool] = []
        self.runs: Counter[str] = Counter()

        @function_tool
        def look(city: str) -> str:
            """Look at a city."""
            if before is not None:
                before()
            self.runs["look"] += 1
            self.seen.append(_hooks_in_place())
            return f"looked at {city}"

        self.tool = look


def agent(probe: Probe, *answers) -> Agent:
    scripted = ScriptedModel(
        list(answers) or [[function_call("look", {"city": "Paris"}, call_id="c1")], [assistant_message("done")]]
    )
    return Agent(name="looker", model=scripted, tools=[probe.tool])


def test_importing_the_adapter_changes_nothing_in_the_sdk():
    # A fresh interpreter: this one imported the adapter long ago.
    code = f"""
import importlib, inspect
HOOKED = {HOOKED!r}
def objects():
    found = {{}}
    for module_name, owner_name, attribute in HOOKED:
        owner = importlib.import_module(module_name)
        if owner_name:
            owner = getattr(owner, owner_name)
        found[(module_name, owner_name, attribute)] = inspect.getattr_static(owner, attribute)
    return found
before = objects()
import airflow.providers.common.ai.durable.openai_agents
after = objects()
changed = [key for key in before if after[key] is not before[key]]
assert changed == [], changed
print("unchanged")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("unchanged")


def test_the_hooks_are_in_place_during_a_durable_run_and_the_sdks_own_objects_are_back_after_it():
    assert not _hooks_in_place()
    probe, task = Probe(), Task()

    result = task.attempt(agent(probe))

    assert result.final_output == "done"
    assert probe.seen == [True]
    assert task.ran_live == {"model": 2, "tool": 1}
    assert not _hooks_in_place()
    assert not SDK_HOOKS.is_installed


def test_the_sdks_own_objects_are_back_after_a_durable_run_that_raised():
    probe, task = Probe(), Task()

    task.failing_attempt(
        agent(probe, [function_call("look", {"city": "Paris"}, call_id="c1")], RuntimeError("outage")), RuntimeError
    )

    assert probe.seen == [True]
    assert not _hooks_in_place()
    # The next try still journals: it replays the model call and the tool call the failed one completed.
    retry_probe = Probe()
    retry = task.attempt(agent(retry_probe, [assistant_message("done")]))
    assert (retry.final_output, task.replayed, retry_probe.runs["look"]) == ("done", {"model": 1, "tool": 1}, 0)
    assert not _hooks_in_place()


def test_outside_a_task_run_durably_is_runner_run_and_installs_nothing():
    probe = Probe()

    result = asyncio.run(run_durably(agent(probe), "Look at Paris"))

    assert (result.final_output, probe.seen) == ("done", [False])


def test_a_durable_run_nested_in_a_tool_of_another_leaves_the_hooks_to_the_outer_run():
    inner_probe = Probe()
    outer_task = Task()

    def run_the_inner_one() -> None:
        # In the tool's thread (a plain def tool): a run of its own, ended before the tool returns.
        Task().attempt(agent(inner_probe))

    outer = Probe(before=run_the_inner_one)

    result = outer_task.attempt(agent(outer))

    assert result.final_output == "done"
    # The inner run saw the hooks, and the outer tool saw them after the inner run had ended.
    assert (inner_probe.seen, outer.seen) == ([True], [True])
    assert not _hooks_in_place()


def test_two_durable_runs_in_threads_share_the_hooks_until_the_last_one_ends():
    first_is_in_its_tool = threading.Event()
    second_has_ended = threading.Event()

    def wait_for_the_second() -> None:
        first_is_in_its_tool.set()
        assert second_has_ended.wait(timeout=120)

    first, second = Probe(before=wait_for_the_second), Probe()
    tasks = [Task(), Task()]
    results: dict[str, object] = {}
    errors: list[BaseException] = []

    def run(name: str, task: Task, probe: Probe) -> None:
        try:
            results[name] = task.attempt(agent(probe)).final_output
        except BaseException as error:
            errors.append(error)

    first_thread = threading.Thread(target=run, args=("first", tasks[0], first))
    first_thread.start()
    assert first_is_in_its_tool.wait(timeout=120)
    run("second", tasks[1], second)
    # The second run ended while the first is inside its tool: the hooks stay for the first.
    second_has_ended.set()
    first_thread.join(timeout=120)

    assert errors == []
    assert results == {"first": "done", "second": "done"}
    assert (first.seen, second.seen) == ([True], [True])
    assert [task.ran_live for task in tasks] == [{"model": 2, "tool": 1}] * 2
    assert not _hooks_in_place()


def test_a_streamed_durable_run_keeps_the_hooks_until_its_stream_ends():
    probe, task = Probe(), Task()

    async def stream() -> list[bool]:
        result = run_durably_streamed(agent(probe), "Look at Paris")
        during = [_hooks_in_place()]
        async for _ in result.stream_events():
            pass
        await asyncio.sleep(0)  # the run loop task's done callback, which ends the journaled run
        return [*during, result.final_output == "done"]

    task.journal = DurableJournal(task.storage)
    with journal_scope(task.journal):
        seen = asyncio.run(stream())

    assert seen == [True, True]
    assert probe.seen == [True]
    assert not _hooks_in_place()


class Owner:
    """A stand-in for an SDK module."""

    value = "the original"


def test_a_replacement_something_else_replaced_again_is_left_to_it(caplog):
    hooks = SDKHooks(lambda: [Replacement(Owner, "value", "ours")])

    with caplog.at_level(logging.WARNING), hooks.installed():
        assert Owner.value == "ours"
        with hooks.installed():
            assert Owner.value == "ours"
        assert Owner.value == "ours"  # the outer user is still inside
        Owner.value = "theirs"

    assert Owner.value == "theirs"
    assert "was replaced during a durable run by something else" in caplog.text
    Owner.value = "the original"


def test_replacements_that_fail_half_way_are_put_back_and_the_error_raised():
    def replacements() -> list[Replacement]:
        return [Replacement(Owner, "value", "ours"), Replacement(object(), "cannot_be_set", 1)]

    hooks = SDKHooks(replacements)
    with pytest.raises(AttributeError), hooks.installed():
        pass

    assert (Owner.value, hooks.is_installed) == ("the original", False)
