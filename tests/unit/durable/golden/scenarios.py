"""
The agent runs the golden journals hold: each scenario records a journal with ``run_durably_sync``
and replays it on a next try, with the same agents, tools and answers.

``record.py`` writes what each scenario's recording left in storage as the golden files;
``tests/unit/durable/core/test_journal_format.py`` loads those files and replays them. Both take the
scenarios from here, so that what was recorded and what is replayed cannot drift apart.

Every try counts what ran live: the model calls of each agent and the runs of each tool.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from agents import (
    Agent,
    MaxTurnsExceeded,
    RunResult,
    ToolCallOutputItem,
    ToolOutputImage,
    Usage,
    UserError,
    function_tool,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from airflow.providers.common.ai.durable.core import steps
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import (
    current_idempotency_key,
    run_durably,
    run_durably_sync,
)

#: The ``[core] fernet_key`` every recording and replay runs with, so fingerprints are the same
#: bytes on every recording (a real Fernet key: 32 bytes, URL-safe base64).
FERNET_KEY = base64.urlsafe_b64encode(b"golden journals of format two...").decode()

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


class WorkerDied(BaseException):
    """The try ends here as if its process were killed."""


class Invoice(BaseModel):
    """A tool's declared output type, replayed through its adapter."""

    number: str
    amount: decimal.Decimal
    due: datetime.date
    lines: list[tuple[str, int]]


INVOICE = Invoice(
    number="INV-7", amount=decimal.Decimal("1250.40"), due=datetime.date(2026, 12, 31), lines=[("chairs", 4)]
)
#: A tool output without a declared type: a dict whose values the journal tags by their types.
LEDGER = {
    "rows": 3,
    7: ("x", None),
    "closed": datetime.date(2026, 11, 29),
    "total": decimal.Decimal("12.50"),
    "checksum": b"\x00\x01\xfe\xff",
}
CHART = ToolOutputImage(image_url="data:image/png;base64,iVBORw0KGgo=", detail="low")


class Try:
    """One try of the task instance: a new journal over the stored entries, and what ran live."""

    def __init__(self, storage: InMemoryStorage) -> None:
        self.journal = DurableJournal(storage)
        self.models: dict[str, ScriptedModel] = {}
        self.tool_runs: Counter[str] = Counter()
        #: The idempotency key each live tool run saw, in run order.
        self.idempotency_keys: list[str] = []
        self.result: RunResult | None = None
        #: What runs started inside tools returned, in the order they returned.
        self.nested_outputs: list[Any] = []

    def model(self, agent: str, *answers: Any) -> ScriptedModel:
        """The scripted model of ``agent`` in this try; it answers in order, one answer a call."""
        self.models[agent] = ScriptedModel(list(answers), default_usage=USAGE)
        return self.models[agent]

    @property
    def model_calls(self) -> Counter[str]:
        """Live model calls by agent name."""
        return +Counter({agent: len(model.calls) for agent, model in self.models.items()})

    def tool_ran(self, name: str) -> None:
        self.tool_runs[name] += 1
        self.idempotency_keys.append(current_idempotency_key())

    def run(self, agent: Agent, prompt: str, **kwargs: Any) -> RunResult:
        with journal_scope(self.journal):
            self.result = run_durably_sync(agent, prompt, **kwargs)
        return self.result

    @property
    def tool_outputs(self) -> list[Any]:
        """The value each tool call handed the SDK (replayed or live), in the model's order."""
        assert self.result is not None
        return [item.output for item in self.result.new_items if isinstance(item, ToolCallOutputItem)]


@dataclass(frozen=True)
class Scenario:
    """A journal a recording leaves, and the next try that replays it."""

    name: str
    #: Runs the recording try (or tries) against the storage; what it leaves there is the golden journal.
    record: Callable[[InMemoryStorage], None]
    #: Runs the next try against the storage holding the golden journal.
    replay: Callable[[InMemoryStorage], Try]
    #: The state of each entry the recording leaves (the index entry "0" has kind "index").
    states: dict[str, str] = field(default_factory=dict)


def recorded(scenario: Scenario) -> dict[str, str]:
    """The entries ``scenario``'s recording leaves, by key, as stored (JSON text)."""
    storage = InMemoryStorage()
    # An in-flight mark says when its call started (format 5): the same moment on every recording.
    with mock.patch.object(steps, "started_now", return_value={"started": "2026-01-01T00:00:00+00:00"}):
        scenario.record(storage)
    return dict(storage.entries)


# A plain run: the model asks for a function tool, then answers. Scenarios whose journal holds
# every call replay with the recording's answers: a replay that went live would run through and
# show in the counts.


def _weather_agent(attempt: Try, *answers: Any, **kwargs: Any) -> Agent:
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        attempt.tool_ran("weather")
        return f"sunny in {city}"

    return Agent(
        name="assistant",
        instructions="Be brief.",
        model=attempt.model("assistant", *answers),
        tools=[weather],
        **kwargs,
    )


def _plain_try(storage: InMemoryStorage) -> Try:
    attempt = Try(storage)
    answers = [function_call("weather", {"city": "Paris"}, call_id="call_1")], [assistant_message("Sunny in Paris.")]
    attempt.run(_weather_agent(attempt, *answers), "What is the weather in Paris?")
    return attempt


# Function tools with structured outputs: a declared pydantic output type, a dict of tagged values
# (tuple, date, Decimal, bytes, an int key), and the SDK's ToolOutputImage, called in one answer.


def _office_agent(attempt: Try) -> Agent:
    def invoice(number: str) -> Invoice:
        """Looks an invoice up."""
        attempt.tool_ran("invoice")
        return INVOICE.model_copy(update={"number": number})

    @function_tool
    def ledger() -> object:
        """Closes the ledger."""
        attempt.tool_ran("ledger")
        return LEDGER

    @function_tool
    def chart() -> ToolOutputImage:
        """Draws the month's chart."""
        attempt.tool_ran("chart")
        return CHART

    answers = (
        [
            function_call("invoice", {"number": "INV-7"}, call_id="call_invoice"),
            function_call("ledger", {}, call_id="call_ledger"),
            function_call("chart", {}, call_id="call_chart"),
        ],
        [assistant_message("Invoice INV-7 is due on 2026-12-31.")],
    )
    return Agent(
        name="clerk",
        instructions="Close the month.",
        model=attempt.model("clerk", *answers),
        tools=[function_tool(invoice, output_type=Invoice), ledger, chart],
    )


def _structured_try(storage: InMemoryStorage) -> Try:
    attempt = Try(storage)
    attempt.run(_office_agent(attempt), "Close November.")
    return attempt


# A nested run: a tool starts an agent run of its own, whose entries are keyed under the tool's
# step (1.2.1.1) and named in the index entry "0". The recording's tool fails after its nested run
# completed, so that the replay runs the tool again and its nested run replays.


def _boss_agent(attempt: Try, boss_answers: tuple[Any, ...], *, tool_fails: bool) -> Agent:
    async def delegate(topic: str) -> str:
        """Asks a helper agent about a topic."""
        attempt.tool_ran("delegate")
        helper = Agent(
            name="helper",
            instructions="Answer in one line.",
            model=attempt.model("helper", [assistant_message(f"{topic}: all green.")]),
        )
        result = await run_durably(helper, topic)
        attempt.nested_outputs.append(result.final_output)
        if tool_fails:
            raise RuntimeError("the outbox was full")
        return result.final_output

    return Agent(
        name="boss",
        instructions="Delegate.",
        model=attempt.model("boss", *boss_answers),
        tools=[function_tool(delegate, failure_error_function=None)],
    )


_DELEGATE = [function_call("delegate", {"topic": "backups"}, call_id="call_delegate")]
_BOSS_DONE = [assistant_message("Backups: all green.")]


def _record_nested(storage: InMemoryStorage) -> None:
    attempt = Try(storage)
    try:
        attempt.run(_boss_agent(attempt, (_DELEGATE, _BOSS_DONE), tool_fails=True), "How are the backups?")
    except UserError as error:  # the SDK's wrapping of a tool's exception without a failure_error_function
        if isinstance(error.__cause__, RuntimeError):
            return
        raise
    raise AssertionError("the nested scenario's recording try must fail in its tool")


def _replay_nested(storage: InMemoryStorage) -> Try:
    attempt = Try(storage)
    attempt.run(_boss_agent(attempt, (_BOSS_DONE,), tool_fails=False), "How are the backups?")
    return attempt


# An in-flight entry: the worker is killed while a tool runs, so the tool's in-flight mark is what
# the journal holds for it. A killed worker leaves what storage held at that moment, taken here as
# the tool runs: a BaseException raised out of the tool instead is marked failed on its way out.


def _mailer_agent(attempt: Try, *answers: Any, on_send: Callable[[], None] = lambda: None) -> Agent:
    @function_tool
    def send_mail(to: str) -> str:
        """Sends the report by e-mail."""
        attempt.tool_ran("send_mail")
        on_send()
        return f"sent to {to}"

    return Agent(
        name="mailer", instructions="Send the report.", model=attempt.model("mailer", *answers), tools=[send_mail]
    )


_SEND = [function_call("send_mail", {"to": "ops@example.com"}, call_id="call_mail")]
_SENT = [assistant_message("Sent to ops@example.com.")]


def _record_in_flight(storage: InMemoryStorage) -> None:
    at_death: dict[str, str] = {}

    def worker_dies() -> None:
        at_death.update(storage.entries)
        raise WorkerDied("the worker was killed while the mail went out")

    attempt = Try(storage)
    try:
        attempt.run(_mailer_agent(attempt, _SEND, _SENT, on_send=worker_dies), "Mail the report.")
    except WorkerDied:
        storage.entries = at_death
        return
    raise AssertionError("the in-flight scenario's recording try must die in its tool")


def _replay_in_flight(storage: InMemoryStorage) -> Try:
    attempt = Try(storage)
    attempt.run(_mailer_agent(attempt, _SENT), "Mail the report.")
    return attempt


# A discarded entry: the run ends in MaxTurnsExceeded, so the answer that would end it the same way
# again is discarded; the next try (allowed more turns) asks the model that call again.


_PARIS = [function_call("weather", {"city": "Paris"}, call_id="call_paris")]
_OSLO = [function_call("weather", {"city": "Oslo"}, call_id="call_oslo")]


def _record_discarded(storage: InMemoryStorage) -> None:
    attempt = Try(storage)
    try:
        attempt.run(_weather_agent(attempt, _PARIS, _OSLO), "Weather in Paris and Oslo?", max_turns=2)
    except MaxTurnsExceeded:
        return
    raise AssertionError("the discarded scenario's recording try must exceed its turns")


def _replay_discarded(storage: InMemoryStorage) -> Try:
    attempt = Try(storage)
    answer = [assistant_message("Sunny in Paris; Oslo I did not get to.")]
    attempt.run(_weather_agent(attempt, answer), "Weather in Paris and Oslo?", max_turns=2)
    return attempt


def _recording_of(run_try: Callable[[InMemoryStorage], Try]) -> Callable[[InMemoryStorage], None]:
    def record(storage: InMemoryStorage) -> None:
        run_try(storage)

    return record


SCENARIOS = [
    Scenario(
        "plain",
        record=_recording_of(_plain_try),
        replay=_plain_try,
        states={"1.1": "done", "1.2": "done", "1.3": "done"},
    ),
    Scenario(
        "structured_tool_outputs",
        record=_recording_of(_structured_try),
        replay=_structured_try,
        states={"1.1": "done", "1.2": "done", "1.3": "done", "1.4": "done", "1.5": "done"},
    ),
    Scenario(
        "nested_run",
        record=_record_nested,
        replay=_replay_nested,
        states={"0": "index", "1.1": "done", "1.2": "failed", "1.2.1.1": "done"},
    ),
    Scenario(
        "in_flight",
        record=_record_in_flight,
        replay=_replay_in_flight,
        states={"1.1": "done", "1.2": "in_flight"},
    ),
    Scenario(
        "discarded",
        record=_record_discarded,
        replay=_replay_discarded,
        states={"1.1": "done", "1.2": "done", "1.3": "discarded", "1.4": "done"},
    ),
]
SCENARIOS_BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def golden_files(entries: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Each entry as a golden file: its name and its text, exactly as the journal stored it."""
    for key in sorted(entries):
        yield f"{key}.json", entries[key]
