"""
The Pydantic AI runs the golden journals of ``golden/pydantic_ai_runs/`` hold, as ``scenarios.py``
holds those of the OpenAI Agents SDK: each scenario records a journal with the Pydantic AI adapter
and replays it on a next try, with the same agent, tools and answers. ``record.py --pydantic-ai``
writes what each recording left in storage (``scenarios.recorded``, under ``scenarios.FERNET_KEY``); ``tests/unit/durable/pydantic_ai/test_pydantic_ai_journal_format.py``
checks it writes the checked-in files byte for byte, and replays them.

The model is Pydantic AI's own ``FunctionModel`` answering from a script, with a fixed timestamp on
every answer (the journal stores an answer whole) and a name no price table knows (a cost is
recorded with an answer whose model has a price, which a new table would change).
Every try counts what ran live: the model requests and the runs of each tool.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import StreamedResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from airflow.providers.common.ai.durable.core.approvals import Answer, AwaitingAnswer, Decision, answering_approvals
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import current_idempotency_key, run_durably_sync

#: When every scripted answer was made.
MOMENT = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
MODEL_NAME = "golden-model"
USAGE = RequestUsage(input_tokens=100, output_tokens=20)


class StreamCutOff(ConnectionError):
    """The model's stream broke off mid-answer."""


class ScriptedModel(FunctionModel):
    """Pydantic AI's ``FunctionModel`` with answers made at :data:`MOMENT`, streamed or not."""

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(*args, **kwargs) as streamed:
            streamed._timestamp = MOMENT  # type: ignore[attr-defined]  # FunctionModel's streams stamp "now"
            yield streamed


#: An answer of the script: the parts of a whole answer, or, streamed, the text or tool-call deltas
#: to send (a ``StreamCutOff`` among them breaks the stream off there).
Script = list[Any]


class Try:
    """One try of the task instance: a new journal over the stored entries, and what ran live."""

    def __init__(self, storage: InMemoryStorage, *answers: Script) -> None:
        self.journal = DurableJournal(storage)
        self.answers = list(answers)
        #: Requests that reached the model.
        self.model_requests = 0
        self.tool_runs: Counter[str] = Counter()
        #: The idempotency key each live tool run saw, in run order.
        self.idempotency_keys: list[str] = []
        #: The events a streamed run handed its handler.
        self.events: list[AgentStreamEvent] = []
        self.output: Any = None

    def tool_ran(self, name: str) -> None:
        self.tool_runs[name] += 1
        self.idempotency_keys.append(current_idempotency_key())

    def _next_answer(self) -> Script:
        self.model_requests += 1
        return self.answers.pop(0)

    def model(self) -> ScriptedModel:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return ModelResponse(parts=self._next_answer(), usage=USAGE, timestamp=MOMENT)

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            for delta in self._next_answer():
                if isinstance(delta, BaseException):
                    raise delta
                yield delta

        return ScriptedModel(answer, stream_function=stream, model_name=MODEL_NAME)

    async def _handle(self, ctx: RunContext[Any], events: AsyncIterator[AgentStreamEvent]) -> None:
        async for event in events:
            self.events.append(event)

    def run(self, agent: Agent[Any, Any], prompt: str, *, streamed: bool = False) -> Any:
        with journal_scope(self.journal):
            handler = {"event_stream_handler": self._handle} if streamed else {}
            self.output = run_durably_sync(agent, prompt, **handler).output
        return self.output


@dataclass(frozen=True)
class Scenario:
    """A journal a recording leaves, and the next try (or tries) that replay it."""

    name: str
    record: Callable[[InMemoryStorage], None]
    #: Runs the next tries against the storage holding the golden journal; returns each of them.
    replay: Callable[[InMemoryStorage], list[Try]]
    #: The kind and state of each entry the recording leaves.
    entries: dict[str, tuple[str, str]] = field(default_factory=dict)


# A plain run: the model asks for a function tool, then answers.

_WEATHER = [ToolCallPart("weather", {"city": "Paris"}, tool_call_id="call_1")]
_SUNNY = [TextPart("Sunny in Paris.")]


def _weather_agent(attempt: Try) -> Agent[None, str]:
    agent = Agent(attempt.model(), instructions="Be brief.", name="assistant")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        attempt.tool_ran("weather")
        return f"sunny in {city}"

    return agent


def _plain_try(storage: InMemoryStorage) -> Try:
    attempt = Try(storage, _WEATHER, _SUNNY)
    attempt.run(_weather_agent(attempt), "What is the weather in Paris?")
    return attempt


# A streamed run (``run_durably`` with an ``event_stream_handler``): the first answer streams whole,
# the tool runs, and the second answer's stream breaks off, so it is not recorded and the next try
# asks it again while the first answer streams from the journal.

_WEATHER_STREAMED = [{0: DeltaToolCall(name="weather", json_args='{"city": "Paris"}', tool_call_id="call_1")}]
_SUNNY_STREAMED = ["Sunny ", "in Paris."]


def _record_streamed(storage: InMemoryStorage) -> None:
    cut_off = ["Sunny ", StreamCutOff("the connection dropped mid-answer")]
    attempt = Try(storage, _WEATHER_STREAMED, cut_off)
    try:
        attempt.run(_weather_agent(attempt), "What is the weather in Paris?", streamed=True)
    except StreamCutOff:
        return
    raise AssertionError("the streamed scenario's recording try must be cut off in its second answer")


def _replay_streamed(storage: InMemoryStorage) -> list[Try]:
    attempt = Try(storage, _SUNNY_STREAMED)
    attempt.run(_weather_agent(attempt), "What is the weather in Paris?", streamed=True)
    return [attempt]


# A tool that asks for an approval itself (it raises ApprovalRequired unless the call is approved),
# in a try that can wait for a person (an approval desk, as AgentOperator runs it): the recording
# asks, records that the call asked, and the request at the approval step. The next try finds the
# request asked and not answered and waits for it, sending nothing; the try resumed with the
# approval replays the call that asked, runs the approved call once and asks the model the rest.

_PAY = [ToolCallPart("pay", {"amount": 50}, tool_call_id="call_pay")]
_PAID = [TextPart("Paid 50.")]
APPROVED = Decision(approved=True, by="alice")


def _payer_agent(attempt: Try) -> Agent[None, str]:
    agent = Agent(attempt.model(), instructions="Pay what is due.", name="payer")

    @agent.tool
    def pay(ctx: RunContext[None], amount: int) -> str:
        """Pays an amount; a large one needs a person's approval."""
        if amount > 10 and not ctx.tool_call_approved:
            attempt.tool_ran("asked")
            raise ApprovalRequired(metadata={"reason": "large"})
        attempt.tool_ran("pay")
        return f"paid {amount}"

    return agent


def _approval_try(storage: InMemoryStorage, answer: Answer | None, *answers: Script) -> tuple[Try, Any]:
    """A try inside the task's approval desk: the try, and what it waits for (``None`` if it ended)."""
    attempt = Try(storage, *answers)
    with answering_approvals(answer) as desk:
        try:
            attempt.run(_payer_agent(attempt), "Pay invoice INV-7.")
        except AwaitingAnswer:
            pass
        finally:
            if desk.pending is not None and not desk.pending.asked:
                desk.record_asked()
    return attempt, desk.pending


def _record_approval(storage: InMemoryStorage) -> None:
    _, pending = _approval_try(storage, None, _PAY)
    if pending is None:
        raise AssertionError("the approval scenario's recording try must stop for a person")


def _replay_approval(storage: InMemoryStorage) -> list[Try]:
    waiting, pending = _approval_try(storage, None)
    assert pending is not None and pending.asked, "the next try waits for the request asked before"
    answer = Answer(pending.step_key, pending.fingerprint, APPROVED)
    resumed, still_pending = _approval_try(storage, answer, _PAID)
    assert still_pending is None
    return [waiting, resumed]


def _recording_of(run_try: Callable[[InMemoryStorage], Try]) -> Callable[[InMemoryStorage], None]:
    def record(storage: InMemoryStorage) -> None:
        run_try(storage)

    return record


SCENARIOS = [
    Scenario(
        "plain",
        record=_recording_of(_plain_try),
        replay=lambda storage: [_plain_try(storage)],
        entries={"1.1": ("model", "done"), "1.2": ("tool", "done"), "1.3": ("model", "done")},
    ),
    Scenario(
        "streamed",
        record=_record_streamed,
        replay=_replay_streamed,
        # The answer cut off left nothing: it was never complete.
        entries={"1.1": ("model", "done"), "1.2": ("tool", "done")},
    ),
    Scenario(
        "asked_for_approval",
        record=_record_approval,
        replay=_replay_approval,
        entries={"1.1": ("model", "done"), "1.2": ("tool", "done"), "1.3": ("approval", "done")},
    ),
]
SCENARIOS_BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
