"""
A pytest plugin that runs the OpenAI Agents SDK's own tests through ``run_durably``.

Loaded by scripts/sdk_conformance.sh with ``-p durable_conformance`` and one mode:

``--durable-mode=shipped``
    nothing is patched: the SDK's tests as shipped.
``--durable-mode=outside``
    every top-level, non-streamed ``Runner.run`` / ``Runner.run_sync`` is ``run_durably`` /
    ``run_durably_sync`` with no journal in scope (outside a task, R-20).
``--durable-mode=journal``
    the same, inside a fresh ``DurableJournal(InMemoryStorage())`` per run (inside a task, R-49).
``--durable-mode=retry``
    as ``journal``, then each run that returned is run again as a retry over the same storage (a
    new ``DurableJournal``), and the retry's final output, item types, interruptions and last
    agent (by name) are compared with the first run's. The test goes on with the first result.

``Runner`` is one class (``agents.Runner`` is ``agents.run.Runner``), so patching its two
classmethods covers every import path. ``run_durably`` itself calls ``Runner.run``: a context
variable set around the routed call sends that call, and any nested run inside it (an
``Agent.as_tool()``), to the original method, as it is in real use. Tests that call an
``AgentRunner`` directly, ``Runner.run_streamed``, or patch ``Runner.run`` themselves are not routed.

``--durable-results=FILE`` writes one JSON line per test (outcome, failure text, retry
comparisons); scripts/sdk_conformance/summarize.py reads it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
from collections.abc import Iterator
from typing import Any

import pytest

MODES = ("shipped", "outside", "journal", "retry")

# Set while a routed run runs: Runner.run inside it is the original (run_durably's own call, nested runs).
_routed: contextvars.ContextVar[bool] = contextvars.ContextVar("durable_conformance_routed", default=False)
_current_item: pytest.Item | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durable-conformance", "the SDK's tests through run_durably")
    group.addoption("--durable-mode", choices=MODES, default="shipped", help="how Runner.run is routed")
    group.addoption("--durable-results", default=None, help="write one JSON line per test to this file")


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("durable_mode")
    if mode != "shipped":
        _route_runner(mode)
    path = config.getoption("durable_results")
    # Under xdist only the controller writes: every worker's reports reach it.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ResultWriter(path), "durable-conformance-results")


def _route_runner(mode: str) -> None:
    from agents import Runner

    from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope
    from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync
    from airflow.providers.common.ai.durable.storage import InMemoryStorage

    original_run = Runner.run
    original_run_sync = Runner.run_sync
    signature = inspect.signature(original_run)

    def split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        bound = signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        return arguments.pop("starting_agent"), arguments.pop("input"), arguments

    @functools.wraps(original_run)
    async def run(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if _routed.get():
            return await original_run(*args, **kwargs)
        agent, input, options = split(args, kwargs)
        token = _routed.set(True)
        try:
            if mode == "outside":
                return await run_durably(agent, input, **options)
            storage = InMemoryStorage()
            with journal_scope(DurableJournal(storage)), _noting_a_raise(mode):
                result = await run_durably(agent, input, **options)
            if mode == "retry" and (reason := _not_retried(input, options)) is None:
                retry = DurableJournal(storage)
                with journal_scope(retry):
                    try:
                        retried = await run_durably(agent, input, **options)
                    except Exception as error:  # the comparison reports it
                        retried = error
                _note_retry(result, retried, retry, storage)
            elif mode == "retry":
                _note({"retry": "skipped", "reason": reason})
            return result
        finally:
            _routed.reset(token)

    @functools.wraps(original_run_sync)
    def run_sync(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if _routed.get():
            return original_run_sync(*args, **kwargs)
        agent, input, options = split(args, kwargs)
        token = _routed.set(True)
        try:
            if mode == "outside":
                return run_durably_sync(agent, input, **options)
            storage = InMemoryStorage()
            with journal_scope(DurableJournal(storage)), _noting_a_raise(mode):
                result = run_durably_sync(agent, input, **options)
            if mode == "retry" and (reason := _not_retried(input, options)) is None:
                retry = DurableJournal(storage)
                with journal_scope(retry):
                    try:
                        retried = run_durably_sync(agent, input, **options)
                    except Exception as error:  # the comparison reports it
                        retried = error
                _note_retry(result, retried, retry, storage)
            elif mode == "retry":
                _note({"retry": "skipped", "reason": reason})
            return result
        finally:
            _routed.reset(token)

    Runner.run = classmethod(run)  # type: ignore[method-assign,assignment]
    Runner.run_sync = classmethod(run_sync)  # type: ignore[method-assign,assignment]


@contextlib.contextmanager
def _noting_a_raise(mode: str) -> Iterator[None]:
    """A first run that raised has no retry to compare: the model's answers may be discarded (R-15)."""
    try:
        yield
    except BaseException as error:
        if mode == "retry":
            _note({"retry": "skipped", "reason": f"the first run raised {type(error).__name__}"})
        raise


def _not_retried(input: Any, options: dict[str, Any]) -> str | None:
    """Why a run that returned is not run again, or None: only journaled runs have a retry."""
    from agents.run_state import RunState

    if isinstance(input, RunState):
        return "a resumed RunState is not journaled"
    if options.get("session") is not None:
        return "a run with a session is not journaled"
    return None


def _observed(result: Any) -> dict[str, Any]:
    """What the comparison looks at: final output, item types, interruptions, last agent by name."""
    return {
        "final_output": result.final_output,
        "item_types": [type(item).__name__ for item in result.new_items],
        "interruptions": [
            (type(item).__name__, getattr(item, "name", None), getattr(item, "call_id", None))
            for item in (getattr(result, "interruptions", None) or [])
        ],
        "last_agent": getattr(result.last_agent, "name", None),
    }


def _equal(first: Any, second: Any) -> bool:
    try:
        return bool(first == second)
    except Exception:  # objects that cannot compare are compared by repr
        return repr(first) == repr(second)


def _note_retry(result: Any, retried: Any, retry: Any, storage: Any) -> None:
    live = dict(retry.stats.ran_live)
    if isinstance(retried, BaseException):
        _note(
            {
                "retry": "mismatch",
                "fields": ["raised"],
                "retry_raised": f"{type(retried).__name__}: {str(retried)[:300]}",
                "ran_live": live,
                "entries": len(storage.entries),
            }
        )
        return
    first, second = _observed(result), _observed(retried)
    fields = [name for name in first if not _equal(first[name], second[name])]
    if not fields:
        _note({"retry": "same", "ran_live": live})
        return
    _note(
        {
            "retry": "mismatch",
            "fields": fields,
            "first": {name: repr(first[name])[:300] for name in fields},
            "second": {name: repr(second[name])[:300] for name in fields},
            "ran_live": live,
            "entries": len(storage.entries),
        }
    )


def _note(record: dict[str, Any]) -> None:
    # user_properties travel with the test's report, to the xdist controller as well.
    if _current_item is not None:
        _current_item.user_properties.append(("durable_retry", json.dumps(record, default=repr)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        return (yield)
    except KeyboardInterrupt as error:
        # Escaping the test it would end the whole session: a failure of this test instead.
        raise RuntimeError("KeyboardInterrupt escaped the test") from error


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    global _current_item
    _current_item = item
    try:
        yield
    finally:
        _current_item = None


class _ResultWriter:
    """One JSON line per test: its outcome over setup, call and teardown, and its retry notes."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed at session end
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(report.nodeid, {"test": report.nodeid, "outcome": "passed", "retry": []})
        if report.failed:
            test["outcome"] = "failed"
            test.setdefault("failure", f"[{report.when}] {report.longreprtext[-3000:]}")
        elif report.skipped and test["outcome"] == "passed":
            test["outcome"] = "skipped"
        if report.when == "teardown":
            test["retry"] = [json.loads(value) for name, value in report.user_properties if name == "durable_retry"]
            self.file.write(json.dumps(self.tests.pop(report.nodeid)) + "\n")

    def pytest_sessionfinish(self) -> None:
        for test in self.tests.values():
            self.file.write(json.dumps(test) + "\n")
        self.file.close()
