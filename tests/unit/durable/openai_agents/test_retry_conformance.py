"""
What the retry pass of the SDK conformance run (``scripts/sdk_conformance.sh``,
``docs/conformance.rst``) checks, as unit tests of their own: the approval cases, a tool that
changes its own agent, and the one defect the pass found (an answer the ``openai`` client
accepted without validating it does not replay).

Each try builds its agent, tools, context and model anew, as a new worker does. A retry's model
answers by request where the request is all that decides the answer (``deterministic``), else
it is scripted with only what the failed try never got: the request counts of each try show
what replayed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import tries
from agents import (
    Agent,
    OpenAIResponsesModel,
    RunContextWrapper,
    ToolApprovalItem,
    ToolCallOutputItem,
    function_tool,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from tries import WorkerDied

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.testing import FakeOpenAIServer, RecordedRequest, reply

PAY = function_call("wire_money", {"amount": 5}, call_id="w1")
REPORT = function_call("report", {}, call_id="r1")


def deterministic(*answers: list[Any]) -> ScriptedModel:
    """A model whose answer depends on the request alone: the n-th answer once n - 1 tools answered."""

    def answer(call: Any) -> list[Any]:
        outputs = [item for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"]
        return answers[len(outputs)]

    return ScriptedModel([ModelStep.respond(answer) for _ in range(10)])


class Payer:
    """An agent that wires money (approval needed), then reports; counts the real runs of each tool."""

    def __init__(self, runs: Counter[str], model: ScriptedModel, *, report_dies: bool = False) -> None:
        @function_tool(needs_approval=True)
        def wire_money(amount: int) -> str:
            """Wires money."""
            runs["wire_money"] += 1
            return "wired"

        @function_tool
        def report() -> str:
            """Reports."""
            runs["report"] += 1
            if report_dies:
                raise WorkerDied
            return "reported"

        self.agent = Agent(name="payer", model=model, tools=[wire_money, report])

    def approved(self) -> RunContextWrapper:
        """A context in which the payment is approved, as an application passes it to the run."""
        context = RunContextWrapper(context=None)
        context.approve_tool(ToolApprovalItem(agent=self.agent, raw_item=PAY))
        return context


def test_a_retry_of_a_run_that_stopped_for_an_approval_stops_for_it_again_without_asking_the_model():
    runs: Counter[str] = Counter()
    task = tries.Task()
    first = task.attempt(Payer(runs, ScriptedModel([[PAY]])).agent)
    assert [item.raw_item.call_id for item in first.interruptions] == ["w1"]

    # The try fails after the run (the task raised); the retry is scripted with nothing.
    model = ScriptedModel([])
    second = task.attempt(Payer(runs, model).agent)

    assert [item.raw_item.call_id for item in second.interruptions] == ["w1"]
    assert model.calls == ()
    assert task.replayed == {"model": 1}
    assert runs == {}


def test_a_recorded_tool_output_is_not_handed_out_past_an_approval_the_retry_has_not_got():
    runs: Counter[str] = Counter()
    task = tries.Task()
    first = Payer(runs, ScriptedModel([[PAY], [REPORT]]), report_dies=True)
    task.failing_attempt(first.agent, WorkerDied, context=first.approved())
    assert runs == {"wire_money": 1, "report": 1}

    # The retry's context does not approve the payment: the recorded "wired" must not replay.
    model = ScriptedModel([])
    result = task.attempt(Payer(runs, model).agent, context=RunContextWrapper(context=None))

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert not [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert model.calls == ()
    assert runs == {"wire_money": 1, "report": 1}


def test_a_payment_approved_on_the_failed_try_and_rejected_on_the_retry_reaches_the_model_as_rejected():
    runs: Counter[str] = Counter()
    task = tries.Task()
    first = Payer(runs, ScriptedModel([[PAY], [REPORT]]), report_dies=True)
    task.failing_attempt(first.agent, WorkerDied, context=first.approved())

    second = Payer(runs, deterministic([PAY], [assistant_message("not paid")]))
    context = RunContextWrapper(context=None)
    context.reject_tool(ToolApprovalItem(agent=second.agent, raw_item=PAY), rejection_message="Denied")
    result = task.attempt(second.agent, context=context)

    assert result.final_output == "not paid"
    # The payment's answer replays; the request after the rejection is new, so it reaches the model.
    (request,) = second.agent.model.calls
    outputs = [item["output"] for item in request.input if item.get("type") == "function_call_output"]
    assert outputs == ["Denied"]
    assert runs == {"wire_money": 1, "report": 1}


@pytest.mark.parametrize("decision", ["rejected", "not given"])
def test_a_recorded_tool_output_the_retry_does_not_use_is_not_counted_as_replayed(decision):
    runs: Counter[str] = Counter()
    task = tries.Task()
    first = Payer(runs, ScriptedModel([[PAY], [REPORT]]), report_dies=True)
    task.failing_attempt(first.agent, WorkerDied, context=first.approved())

    second = Payer(runs, deterministic([PAY], [assistant_message("not paid")]))
    context = RunContextWrapper(context=None)
    if decision == "rejected":
        context.reject_tool(ToolApprovalItem(agent=second.agent, raw_item=PAY), rejection_message="Denied")
    task.attempt(second.agent, context=context)

    assert runs == {"wire_money": 1, "report": 1}
    assert task.replayed == {"model": 1}


def test_a_tool_that_adds_a_tool_to_its_agent_replays_without_adding_it_and_the_run_goes_live():
    runs: Counter[str] = Counter()

    def build(model: ScriptedModel, *, second_dies: bool = False) -> Agent:
        @function_tool
        def second() -> str:
            """The tool the first one adds."""
            runs["second"] += 1
            if second_dies:
                raise WorkerDied
            return "two"

        agent = Agent(name="grower", model=model)

        @function_tool
        def add_second() -> str:
            """Adds a tool."""
            runs["add_second"] += 1
            agent.tools.append(second)
            return "added"

        agent.tools.append(add_second)
        return agent

    def grower_model() -> ScriptedModel:
        # Asks for "second" once it is offered, then is done; before that, asks to add it.
        def answer(call: Any) -> list[Any]:
            if any(isinstance(item, dict) and item.get("call_id") == "s1" for item in call.input):
                return [assistant_message("done")]
            if "second" in [tool.name for tool in call.tools]:
                return [function_call("second", {}, call_id="s1")]
            return [function_call("add_second", {}, call_id=f"a{len(call.input)}")]

        return ScriptedModel([ModelStep.respond(answer) for _ in range(5)])

    task = tries.Task()
    task.failing_attempt(build(grower_model(), second_dies=True), WorkerDied)
    assert runs == {"add_second": 1, "second": 1}

    model = grower_model()
    result = task.attempt(build(model))

    # add_second replays without running, so the retry's agent lacks "second": its next request
    # lists other tools than the recorded one and reaches the model instead of replaying the
    # recorded answer, which asks for a tool this run does not have. The model asks to add it again.
    assert result.final_output == "done"
    assert [[tool.name for tool in call.tools] for call in model.calls] == [
        ["add_second"],
        ["add_second", "second"],
        ["add_second", "second"],
    ]
    assert runs == {"add_second": 2, "second": 2}
    assert task.replayed == {"model": 1, "tool": 1}


# An answer the openai client accepted without validating it (a field left out) is recorded,
# and replays as the client built it: unvalidated.


class WithoutMessageStatus(httpx.AsyncBaseTransport):
    """The local test server's answers with each message's status left out, as some OpenAI-compatible servers send them."""

    def __init__(self) -> None:
        self.transport = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.transport.handle_async_request(request)
        body = json.loads(await response.aread())
        for item in body.get("output", []):
            if item.get("type") == "message":
                del item["status"]
        return httpx.Response(response.status_code, json=body)

    async def aclose(self) -> None:
        await self.transport.aclose()


def test_an_answer_the_openai_client_accepted_without_validation_replays():
    runs: Counter[str] = Counter()

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs[city] += 1
        return "sunny"

    storage = InMemoryStorage()
    requests: list[list[RecordedRequest]] = []
    # Twice: a retry that asks the model again gets the same answers, and the request counts show it.
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "c1")), reply.text("Sunny in Paris.")] * 2
    with FakeOpenAIServer(script) as server:

        def attempt() -> Any:
            before = len(server.requests)
            client = AsyncOpenAI(
                base_url=server.base_url,
                api_key="sk-test",
                max_retries=0,
                http_client=httpx.AsyncClient(transport=WithoutMessageStatus(), trust_env=False),
            )
            agent = Agent(name="a", model=OpenAIResponsesModel("gpt-4.1", client), tools=[weather])
            journal = DurableJournal(storage)
            try:
                with journal_scope(journal):
                    return run_durably_sync(agent, "Weather in Paris?"), journal
            finally:
                requests.append(server.requests[before:])

        first, _ = attempt()
        assert first.final_output == "Sunny in Paris."
        # The task failed after the run; its retry replays the whole run.
        second, journal = attempt()

    assert second.final_output == "Sunny in Paris."
    assert [len(each) for each in requests] == [2, 0]
    assert journal.stats.replayed == {"model": 2, "tool": 1}
    assert runs == {"Paris": 1}


def status_less_message(text: str) -> ResponseOutputMessage:
    """A message as the openai client builds it from an answer without a status: not validated."""
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage.model_construct(id="msg_1", type="message", role="assistant", content=content)


def test_a_tool_that_completed_after_an_unvalidated_answer_does_not_run_again():
    runs: Counter[str] = Counter()
    answers: tuple[list[Any], ...] = ([status_less_message("I will pay."), PAY], [REPORT], [assistant_message("done")])

    def build(model: ScriptedModel, *, report_dies: bool = False) -> tuple[Agent, Callable[[], RunContextWrapper]]:
        payer = Payer(runs, model, report_dies=report_dies)
        return payer.agent, payer.approved

    task = tries.Task()
    agent, approved = build(deterministic(*answers), report_dies=True)
    task.failing_attempt(agent, WorkerDied, context=approved())

    model = deterministic(*answers)
    agent, approved = build(model)
    result = task.attempt(agent, context=approved())

    assert result.final_output == "done"
    # Only the request after the report, which died, reaches the model; the payment does not run again.
    assert len(model.calls) == 1
    assert runs == {"wire_money": 1, "report": 2}


# Found by the conformance run's journal mode (tests/test_runner_tracing_disabled.py of the SDK):
# putting a session back on a retry reads it before the run, on the first try too. That one
# read is the documented difference (docs/conformance.rst); the run's tracing settings hold for it.
@pytest.mark.parametrize("tracing_disabled", [True, False])
def test_a_journaled_run_reads_its_session_once_more_than_runner_run_and_under_the_runs_tracing(
    tmp_path, request, tracing_disabled
):
    from agents import RunConfig, Runner, SQLiteSession, set_tracing_disabled
    from agents.tracing import custom_span, get_current_span, set_trace_processors, trace
    from agents.tracing.processors import default_processor

    from airflow.providers.common.ai.durable.openai_agents._sdk_private import (
        masks_tracing_from_the_start_of_an_untraced_run,
    )

    # The test command disables tracing for the whole process: on for this test, exported nowhere.
    set_trace_processors([])
    set_tracing_disabled(False)
    request.addfinalizer(lambda: (set_tracing_disabled(True), set_trace_processors([default_processor()])))

    reads: list[tuple[str, bool]] = []

    class TracedSession(SQLiteSession):
        async def get_items(self, limit: int | None = None) -> list[Any]:
            with custom_span("session-read"):
                reads.append((self.session_id, type(get_current_span()).__name__ == "NoOpSpan"))
                return await super().get_items(limit)

    def agent() -> Agent:
        return Agent(name="a", model=ScriptedModel([[assistant_message("hi")]]))

    config = RunConfig(tracing_disabled=tracing_disabled)
    with trace("caller"):
        Runner.run_sync(agent(), "hello", session=TracedSession("plain", str(tmp_path / "p.db")), run_config=config)
        tries.Task().attempt(
            agent(), "hello", session=TracedSession("journaled", str(tmp_path / "j.db")), run_config=config
        )

    plain = [masked for session, masked in reads if session == "plain"]
    journaled = [masked for session, masked in reads if session == "journaled"]
    assert len(journaled) == len(plain) + 1
    # Each read of the journaled run is traced as the plain run's reads are: no span when disabled
    # (0.24 on); before, the SDK reads its session under the caller's trace.
    masked = tracing_disabled and masks_tracing_from_the_start_of_an_untraced_run()
    assert set(journaled) == set(plain) == {masked}


def test_a_recorded_answer_that_no_longer_fits_its_types_is_not_replayed_unvalidated():
    runs: Counter[str] = Counter()
    answers: tuple[list[Any], ...] = ([status_less_message("I will pay."), PAY], [REPORT], [assistant_message("done")])
    task = tries.Task()
    payer = Payer(runs, deterministic(*answers), report_dies=True)
    task.failing_attempt(payer.agent, WorkerDied, context=payer.approved())
    # The recorded message's text is no longer a string: a field of the wrong type, not a missing one.
    key = next(key for key, text in task.storage.entries.items() if "I will pay." in text)
    task.storage.entries[key] = task.storage.entries[key].replace('"I will pay."', "42")

    model = deterministic(*answers)
    payer = Payer(runs, model)
    assert task.attempt(payer.agent, context=payer.approved()).final_output == "done"
    # The answer is asked again, and so is everything after it.
    assert len(model.calls) == 3
