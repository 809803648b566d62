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
    as ``journal``, then each journaled run that returned or raised is run again as a retry over the same
    storage (a new ``DurableJournal``), as a new try of the task would run it: with the
    ``context`` as it was before the first run (a deep copy taken then; the SDK notes consumed
    approvals and completed calls in the one it is given), and with the test's scripted models
    (``agents.testing.ScriptedModel``) answering as a deterministic model does, by request
    (``_ScriptedModels``). The retry must show what the first run showed (final output, item
    types, interruptions, last agent by name), replay every call the first run recorded, and ask
    no model anything the first run did not; a retry that never ends (the timeout ends its test)
    is a mismatch too. Afterwards the scripted models are put back as the first run left them,
    and the test goes on with the first result.

``Runner`` is one class (``agents.Runner`` is ``agents.run.Runner``), so patching its two
classmethods covers every import path. ``run_durably`` itself calls ``Runner.run``: a context
variable set around the routed call sends that call, and any nested run inside it (an
``Agent.as_tool()``), to the original method, as it is in real use. Tests that call an
``AgentRunner`` directly, ``Runner.run_streamed``, or patch ``Runner.run`` themselves are not
routed, nor is any run nested inside those.

``--durable-results=FILE`` writes one JSON line per test (outcome, failure text, retry
comparisons); scripts/sdk_conformance/summarize.py reads it.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import functools
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

MODES = ("shipped", "outside", "journal", "retry")

# Set while a routed run runs: Runner.run inside it is the original (run_durably's own call, nested runs).
_routed: contextvars.ContextVar[bool] = contextvars.ContextVar("durable_conformance_routed", default=False)
_current_item: pytest.Item | None = None
# The scripted models of the routed run running now (mode retry).
_scripts: contextvars.ContextVar[_ScriptedModels | None] = contextvars.ContextVar(
    "durable_conformance_scripts", default=None
)


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

    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.scope import journal_scope
    from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
    from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync

    original_run = Runner.run
    original_run_sync = Runner.run_sync
    signature = inspect.signature(original_run)

    def split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        bound = signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        return arguments.pop("starting_agent"), arguments.pop("input"), arguments

    async def routed(agent: Any, input: Any, options: dict[str, Any]) -> Any:
        if mode == "outside":
            return await run_durably(agent, input, **options)
        storage = InMemoryStorage()
        scripts = _ScriptedModels()
        retry_options = _as_before(options) if mode == "retry" else options
        try:
            with journal_scope(DurableJournal(storage)), _noting_a_cut(mode), scripts.first_run():
                result = await run_durably(agent, input, **options)
        except Exception as error:
            if mode != "retry":
                raise
            result = error  # a retry follows a failed try: it is compared, then raised to the test
        if mode == "retry" and (reason := _not_retried(input, options)) is None:
            recorded = _recorded_calls(storage)
            retry = DurableJournal(storage)
            _note({"retry": "started"})  # a retry that hangs ends the test without a comparison
            with journal_scope(retry), scripts.retry():
                try:
                    retried = await run_durably(agent, input, **retry_options)
                except Exception as error:  # the comparison reports it
                    retried = error
            _note_retry(result, retried, retry, recorded, scripts)
        elif mode == "retry":
            _note({"retry": "skipped", "reason": reason})
        if isinstance(result, Exception):
            raise result
        return result

    def routed_sync(agent: Any, input: Any, options: dict[str, Any]) -> Any:
        if mode == "outside":
            return run_durably_sync(agent, input, **options)
        storage = InMemoryStorage()
        scripts = _ScriptedModels()
        retry_options = _as_before(options) if mode == "retry" else options
        try:
            with journal_scope(DurableJournal(storage)), _noting_a_cut(mode), scripts.first_run():
                result = run_durably_sync(agent, input, **options)
        except Exception as error:
            if mode != "retry":
                raise
            result = error  # a retry follows a failed try: it is compared, then raised to the test
        if mode == "retry" and (reason := _not_retried(input, options)) is None:
            recorded = _recorded_calls(storage)
            retry = DurableJournal(storage)
            _note({"retry": "started"})  # a retry that hangs ends the test without a comparison
            with journal_scope(retry), scripts.retry():
                try:
                    retried = run_durably_sync(agent, input, **retry_options)
                except Exception as error:  # the comparison reports it
                    retried = error
            _note_retry(result, retried, retry, recorded, scripts)
        elif mode == "retry":
            _note({"retry": "skipped", "reason": reason})
        if isinstance(result, Exception):
            raise result
        return result

    @functools.wraps(original_run)
    async def run(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if _routed.get():
            return await original_run(*args, **kwargs)
        agent, input, options = split(args, kwargs)
        token = _routed.set(True)
        try:
            return await routed(agent, input, options)
        finally:
            _routed.reset(token)

    @functools.wraps(original_run_sync)
    def run_sync(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if _routed.get():
            return original_run_sync(*args, **kwargs)
        agent, input, options = split(args, kwargs)
        token = _routed.set(True)
        try:
            return routed_sync(agent, input, options)
        finally:
            _routed.reset(token)

    Runner.run = classmethod(run)  # type: ignore[method-assign,assignment]
    Runner.run_sync = classmethod(run_sync)  # type: ignore[method-assign,assignment]
    _keep_nested_runs_unrouted()
    if mode == "retry":
        _answer_scripted_models_by_request()


def _keep_nested_runs_unrouted() -> None:
    """
    A run started inside any agent run (an ``Agent.as_tool()`` run inside a streamed run, or
    inside a run of an ``AgentRunner`` called directly) is part of that run, not a run of its own:
    it is not routed, as ``run_durably`` is never called for it in real use.
    """
    from agents.run import AgentRunner

    original_run = AgentRunner.run
    original_run_streamed = AgentRunner.run_streamed

    @functools.wraps(original_run)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _routed.set(True)
        try:
            return await original_run(self, *args, **kwargs)
        finally:
            _routed.reset(token)

    @functools.wraps(original_run_streamed)
    def run_streamed(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The streamed run's task is created in here, and takes this context with it.
        token = _routed.set(True)
        try:
            return original_run_streamed(self, *args, **kwargs)
        finally:
            _routed.reset(token)

    AgentRunner.run = run  # type: ignore[method-assign]
    AgentRunner.run_streamed = run_streamed  # type: ignore[method-assign]


def _answer_scripted_models_by_request() -> None:
    """Route ``ScriptedModel.get_response`` through the routed run's :class:`_ScriptedModels`."""
    from agents.testing import ScriptedModel

    original = ScriptedModel.get_response

    @functools.wraps(original)
    async def get_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        scripts = _scripts.get()
        if scripts is None or scripts.phase is None:
            return await original(self, *args, **kwargs)
        return await scripts.answer(self, original, args, kwargs)

    original_stream = ScriptedModel.stream_response

    @functools.wraps(original_stream)
    async def stream_response(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        # A nested streamed run (Agent.as_tool(on_stream=...)) inside a routed run streams.
        scripts = _scripts.get()
        if scripts is None or scripts.phase is None:
            async for event in original_stream(self, *args, **kwargs):
                yield event
            return
        async for event in scripts.stream(self, original_stream, args, kwargs):
            yield event

    ScriptedModel.get_response = get_response  # type: ignore[method-assign]
    ScriptedModel.stream_response = stream_response  # type: ignore[method-assign]


_SCRIPT_STATE = ("_steps", "_calls", "_retry_advice_by_error_id")


class _ScriptedModels:
    """
    The SDK tests' scripted models (``agents.testing.ScriptedModel``), for one routed run and
    its retry, made to answer as a deterministic model does: asked the same again, the same answer.

    A script answers its next step, whatever it is asked, and the first run has consumed the
    steps that a live call of the retry needs (a real model asked the same again would answer
    alike). So the first run notes each call's request and answer; in the retry a live call gets
    the answer the first run got for the same request (the first not yet given, among equal
    requests). A request the first run never made is noted, a mismatch (the retry asked the model
    something new), and answered by the script's next step. After the retry every model is put
    back as the first run left it: the test goes on as if there had been no retry.
    """

    def __init__(self) -> None:
        self.phase: str | None = None
        # id(model) -> [request, answer (a response or the exception raised), given in the retry]
        self.answers: dict[int, list[list[Any]]] = {}
        self.models: dict[int, Any] = {}
        # id(model) -> the state to put back after the retry
        self.states: dict[int, dict[str, Any]] = {}
        self.new_requests: list[str] = []

    @contextlib.contextmanager
    def first_run(self) -> Iterator[None]:
        token = _scripts.set(self)
        self.phase = "first"
        try:
            yield
        finally:
            self.phase = None
            _scripts.reset(token)
            self.states = {key: _script_state(model) for key, model in self.models.items()}

    @contextlib.contextmanager
    def retry(self) -> Iterator[None]:
        token = _scripts.set(self)
        self.phase = "retry"
        try:
            yield
        finally:
            self.phase = None
            _scripts.reset(token)
            for key, state in self.states.items():
                for name, value in state.items():
                    setattr(self.models[key], name, copy.copy(value))

    async def answer(self, model: Any, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        request = _request_key(args, kwargs)
        if self.phase == "first":
            self.models.setdefault(id(model), model)
            answers = self.answers.setdefault(id(model), [])
            try:
                response = await original(model, *args, **kwargs)
            except Exception as error:
                answers.append([request, error, False])
                raise
            answers.append([request, copy.deepcopy(response), False])
            return response
        if id(model) not in self.states:
            self.models[id(model)] = model
            self.states[id(model)] = _script_state(model)
        for noted in self.answers.get(id(model), []):
            if not noted[2] and noted[0] == request:
                noted[2] = True
                if isinstance(noted[1], BaseException):
                    raise noted[1]
                return copy.deepcopy(noted[1])
        self.new_requests.append(request[:400])
        return await original(model, *args, **kwargs)

    async def stream(
        self, model: Any, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """As :meth:`answer`, for a streamed call: the answer is the events it yielded."""
        request = "streamed " + _request_key(args, kwargs)
        if self.phase == "first":
            self.models.setdefault(id(model), model)
            events: list[Any] = []
            noted = [request, events, False]
            self.answers.setdefault(id(model), []).append(noted)
            try:
                async for event in original(model, *args, **kwargs):
                    events.append(copy.deepcopy(event))
                    yield event
            except Exception as error:
                noted[1] = (events, error)
                raise
            return
        if id(model) not in self.states:
            self.models[id(model)] = model
            self.states[id(model)] = _script_state(model)
        for noted in self.answers.get(id(model), []):
            if not noted[2] and noted[0] == request:
                noted[2] = True
                events, error = noted[1] if isinstance(noted[1], tuple) else (noted[1], None)
                for event in events:
                    yield copy.deepcopy(event)
                if error is not None:
                    raise error
                return
        self.new_requests.append(request[:400])
        async for event in original(model, *args, **kwargs):
            yield event


def _script_state(model: Any) -> dict[str, Any]:
    return {name: copy.copy(getattr(model, name)) for name in _SCRIPT_STATE}


def _request_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What a model call asks, as text: instructions, input, tools, handoffs and output schema."""
    from agents.testing import ScriptedModel

    call = inspect.signature(ScriptedModel.get_response).bind(None, *args, **kwargs).arguments
    schema = call["output_schema"]
    return json.dumps(
        {
            "instructions": call["system_instructions"],
            "input": call["input"],
            "tools": [getattr(tool, "name", type(tool).__name__) for tool in call["tools"]],
            "handoffs": [getattr(handoff, "tool_name", None) for handoff in call["handoffs"]],
            "output_schema": None if schema is None or schema.is_plain_text() else schema.json_schema(),
        },
        sort_keys=True,
        default=_plain,
    )


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return repr(value)


@contextlib.contextmanager
def _noting_a_cut(mode: str) -> Iterator[None]:
    """A first run cut off (a cancellation, a KeyboardInterrupt) is not retried: the test ends it."""
    try:
        yield
    except Exception:
        raise
    except BaseException as error:
        if mode == "retry":
            _note({"retry": "skipped", "reason": f"the first run was cut off by {type(error).__name__}"})
        raise


def _as_before(options: dict[str, Any]) -> dict[str, Any]:
    """
    The run's options for its retry: the ``context`` as it was before the first run.

    A retry is a new try of the task, whose code builds its context anew; the first run changes
    the one it was given (the SDK notes in it the approvals it consumed and the calls that
    completed), and a run given that context again is another run (``Runner.run`` twice shows it).
    A context that cannot be copied is given as it is.
    """
    if options.get("context") is None:
        return options
    try:
        return {**options, "context": copy.deepcopy(options["context"])}
    except Exception:
        return options


def _not_retried(input: Any, options: dict[str, Any]) -> str | None:
    """Why a run is not run again, or None: only journaled runs have a retry."""
    from agents.run_state import RunState

    if isinstance(input, RunState):
        return "a resumed RunState is not journaled"
    return None


def _outcome(result: Any) -> dict[str, Any]:
    """What a run showed: the exception it raised, or what the user sees of its result."""
    if isinstance(result, BaseException):
        try:
            text = str(result)[:300]
        except Exception:  # an exception whose __str__ raises (the SDK tests one)
            text = "(its __str__ raised)"
        return {"raised": f"{type(result).__name__}: {text}"}
    return {"raised": None, **_observed(result)}


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


def _recorded_calls(storage: Any) -> int:
    """How many calls the first run recorded as completed: the retry must replay each of them."""
    entries = (json.loads(text) for key, text in storage.entries.items() if key != "0")
    return sum(1 for entry in entries if entry.get("state") == "done")


def _note_retry(result: Any, retried: Any, retry: Any, recorded: int, scripts: _ScriptedModels) -> None:
    """
    Compare the retry with the first run: what the user sees of the result (or the exception it
    raised), that every call the first run recorded replayed, and that the retry asked no model
    anything the first run did not.
    """
    note: dict[str, Any] = {"ran_live": dict(retry.stats.ran_live)}
    if not isinstance(result, BaseException):
        # How many approvals the first run stopped for: such a retry must stop for the same ones.
        note["interruptions"] = len(result.interruptions or [])
    first, second = _outcome(result), _outcome(retried)
    replayed = sum(retry.stats.replayed.values())
    first["replayed"], second["replayed"] = recorded, replayed
    first["model_requests"], second["model_requests"] = [], scripts.new_requests
    fields = [name for name in dict.fromkeys([*first, *second]) if not _equal(first.get(name), second.get(name))]
    if fields:
        note.update(
            retry="mismatch",
            fields=fields,
            first={name: repr(first.get(name))[:300] for name in fields},
            second={name: repr(second.get(name))[:600] for name in fields},
        )
    else:
        note["retry"] = "same"
    _note(note)


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
