"""
Pydantic AI runs journaled with its real ``OpenAIChatModel`` against the local OpenAI-compatible
server: which requests reach the server in each try, and how often each tool runs.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import logging
from collections import Counter

import pytest

# A module of the real package: without Pydantic AI, "pydantic_ai" alone would import this test folder
# as a namespace package (the durable tests' conftest puts tests/unit/durable on sys.path).
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry, Tool
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import (
    Happened,
    current_idempotency_key,
    in_flight,
    run_durably_sync,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


def _model(server: FakeOpenAIServer) -> OpenAIChatModel:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))


class Tries:
    """One storage, and a new journal per try, as a new worker has."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent, prompt: str, **kwargs):
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, prompt, **kwargs)


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


def _weather_agent(server: FakeOpenAIServer, runs: Counter, keys: list[str], instructions: str = "Be brief."):
    agent = Agent(_model(server), instructions=instructions)

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        keys.append(current_idempotency_key())
        return f"sunny in {city}"

    return agent


def test_a_retry_after_a_failed_second_request_replays_the_first_and_the_tool_call():
    runs, keys = Counter(), []
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris?")
        # try 1: a model call and a tool call completed, then the second request failed
        assert [(r.number, r.path, r.status) for r in server.requests] == [
            (1, "/v1/chat/completions", 200),
            (2, "/v1/chat/completions", 500),
        ]
        assert runs == {"weather": 1}

        result = tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris?")

    assert result.output == "Sunny in Paris."
    # try 2 sent only the request that failed, asking exactly what it asked then
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"weather": 1}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    assert tries.journal.stats.ran_live == {"model": 1}
    assert keys[0].startswith("durable-")
    # the replayed answer costs nothing this try; the live one is counted
    assert result.usage.input_tokens == 10


def test_a_replay_is_one_line_in_the_task_log_and_each_live_step_is_one(caplog):
    runs, keys = Counter(), []
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris?")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
            tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris?")
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("Durable: ")]
    assert [line for line in lines if "replayed" in line] == [
        "Durable: replayed steps 1.1 to 1.2: 1 model call ('gpt-4o'), 1 tool call ('weather')"
    ], lines
    assert any(line.startswith("Durable: model 'gpt-4o' at 1.3") and line.endswith("ran live") for line in lines), lines


def test_a_changed_prompt_runs_live_from_the_first_request_and_names_what_changed(caplog):
    runs, keys = Counter(), []
    # A failed request takes no reply: the second tool call answers try 2's first request.
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.tool_calls(("weather", {"city": "Paris"}, "call_2")),
        reply.text("Sunny in Paris."),
    ]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris?")
        with caplog.at_level(logging.WARNING):
            result = tries.attempt(_weather_agent(server, runs, keys), "Weather in Paris, please?")
    assert result.output == "Sunny in Paris."
    assert server.requests[2].body["messages"][-1]["content"] == "Weather in Paris, please?"
    # try 2 replayed nothing: both its requests and its tool call ran live
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200), (4, 200)]
    assert runs == {"weather": 2}
    assert tries.journal.stats.replayed == {}
    assert tries.journal.stats.ran_live == {"model": 2, "tool": 1}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("input item 0 differs" in warning and "recorded run 1" in warning for warning in warnings), warnings


def test_a_verify_tool_found_in_flight_is_not_run_again_when_its_effect_happened(caplog):
    runs, verified = Counter(), []
    die = [True]

    def refund_issued(key: str, arguments: dict) -> Happened | None:
        verified.append((key, arguments))
        return Happened("refunded")

    def make_agent(server):
        agent = Agent(_model(server), instructions="Refund.")

        @in_flight("verify", verify=refund_issued)
        @agent.tool_plain
        def refund(order: str) -> str:
            """Refund an order."""
            runs["refund"] += 1
            if die and die.pop():
                raise WorkerDied
            return "refunded"

        return agent

    script = [reply.tool_calls(("refund", {"order": "A-1"}, "call_1")), reply.text("Done.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(make_agent(server), "Refund A-1.")
        assert runs == {"refund": 1}
        with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
            result = tries.attempt(make_agent(server), "Refund A-1.")

    assert result.output == "Done."
    # the tool ran once, in try 1; try 2 asked verify, which said it happened
    assert runs == {"refund": 1}
    assert [arguments for _, arguments in verified] == [{"order": "A-1"}]
    assert verified[0][0].startswith("durable-")
    assert [r.number for r in server.requests] == [1, 2]
    assert tries.journal.stats.in_flight[0]["outcome"] == "it happened"
    # the second request hands the model what verify said
    assert server.requests[1].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "refunded"}
    # the log says how the call was resolved, and not that it ran
    lines = [record.getMessage() for record in caplog.records if "tool 'refund' at 1.2" in record.getMessage()]
    assert lines == ["Durable: tool 'refund' at 1.2 was in flight when a try died; verify: it happened"]


def test_a_fail_tool_found_in_flight_fails_the_task_naming_the_call_and_its_key():
    runs = Counter()

    def make_agent(server):
        agent = Agent(_model(server))

        @in_flight("fail")
        @agent.tool_plain
        def transfer(amount: int) -> str:
            """Transfer money."""
            runs["transfer"] += 1
            raise WorkerDied

        return agent

    script = [reply.tool_calls(("transfer", {"amount": 5}, "call_1")), reply.text("Done.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(make_agent(server), "Send 5.")
        with pytest.raises(
            Exception, match=r"tool 'transfer' was in flight at 1\.2 .* idempotency key is durable-"
        ) as failed:
            tries.attempt(make_agent(server), "Send 5.")
    # the error that fails the task for good, without a retry
    assert type(failed.value).__name__ == "AirflowFailException"
    assert runs == {"transfer": 1}
    assert len(server.requests) == 1


def test_a_rerun_tool_found_in_flight_runs_again_with_the_same_idempotency_key():
    runs, keys = Counter(), []
    die = [True]

    def make_agent(server):
        agent = Agent(_model(server))

        @agent.tool_plain
        def notify(who: str) -> str:
            """Notify someone."""
            runs["notify"] += 1
            keys.append(current_idempotency_key())
            if die and die.pop():
                raise WorkerDied
            return "sent"

        return agent

    script = [reply.tool_calls(("notify", {"who": "ops"}, "call_1")), reply.text("Done.")]
    tries = Tries()
    with FakeOpenAIServer(script) as server:
        with pytest.raises(WorkerDied):
            tries.attempt(make_agent(server), "Notify ops.")
        tries.attempt(make_agent(server), "Notify ops.")
    assert runs == {"notify": 2}
    assert keys[0] == keys[1]
    assert [r.number for r in server.requests] == [1, 2]
    assert tries.journal.stats.in_flight[0]["outcome"] == "ran again with the same idempotency key"


def test_a_tool_that_asked_the_model_to_retry_runs_again_next_try_and_the_answers_replay():
    runs = []

    def make_agent(server):
        agent = Agent(_model(server))

        @agent.tool_plain
        def lookup(name: str) -> str:
            """Look a person up by full name."""
            runs.append(name)
            if " " not in name:
                raise ModelRetry("give the full name")
            return "found"

        return agent

    script = [
        reply.tool_calls(("lookup", {"name": "ada"}, "call_1")),
        reply.tool_calls(("lookup", {"name": "Ada Lovelace"}, "call_2")),
        reply.text("Found."),
    ]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(make_agent(server), "Find ada.")
        assert runs == ["ada", "Ada Lovelace"]
        tries.attempt(make_agent(server), "Find ada.")
    # try 2: the call that asked for a retry runs again (it failed); both answers and the call that
    # succeeded replay; only the failed request is sent again
    assert runs == ["ada", "Ada Lovelace", "ada"]
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200)]
    assert server.requests[3].body == server.requests[2].body
    assert tries.journal.stats.replayed == {"model": 2, "tool": 1}


def test_a_tool_output_that_would_not_come_back_the_same_is_not_recorded_and_runs_again():
    runs = Counter()

    def make_agent(server):
        agent = Agent(_model(server))

        @agent.tool_plain
        def pair() -> tuple:
            """A pair."""
            runs["pair"] += 1
            return (1, 2)

        return agent

    script = [reply.tool_calls(("pair", {}, "call_1")), reply.text("Got it.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(make_agent(server), "Pair?")
        tries.attempt(make_agent(server), "Pair?")
    assert runs == {"pair": 2}
    assert tries.journal.stats.replayed == {"model": 1}


def test_a_secret_in_a_tool_output_is_never_stored_and_the_call_runs_again():
    from airflow.providers.common.compat.sdk import mask_secret

    secret = "s3cr3t-p4ss-4711"
    mask_secret(secret)
    runs = Counter()

    def make_agent(server):
        agent = Agent(_model(server))

        @agent.tool_plain
        def fetch_credential() -> str:
            """The credential."""
            runs["fetch_credential"] += 1
            return f"it is {secret}"

        return agent

    script = [reply.tool_calls(("fetch_credential", {}, "call_1")), reply.text("Ok.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(make_agent(server), "Password?")
        stored = [text or "" for text in tries.storage.stored_texts().values()]
        assert stored and not any(secret in text for text in stored)
        tries.attempt(make_agent(server), "Password?")
    # stored masked, never replayed as ***: the tool runs again, the model gets the real value
    assert runs == {"fetch_credential": 2}
    assert secret in server.requests[2].body["messages"][-1]["content"]


def test_a_request_that_would_pass_the_budget_is_not_sent_and_a_replay_costs_nothing():
    from airflow.providers.common.ai.durable.core.host import current_host
    from airflow.providers.common.ai.durable.pydantic_ai import UsageBudget

    runs, keys = Counter(), []
    storage = InMemoryStorage()
    budget = UsageBudget(max_requests=2)
    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with journal_scope(DurableJournal(storage, host=current_host().for_try(1))), pytest.raises(ModelHTTPError):
            run_durably_sync(_weather_agent(server, runs, keys), "Weather in Paris?", budget=budget)
        with (
            journal_scope(DurableJournal(storage, host=current_host().for_try(2))),
            pytest.raises(Exception, match=r"the request to model 'gpt-4o' at 1\.3 was not sent") as refused,
        ):
            run_durably_sync(_weather_agent(server, runs, keys), "Weather in Paris?", budget=budget)

    # try 1 sent two requests (one answered, one failed); try 2 replayed the answer and the tool
    # call for free, and its first live request was refused before it was sent
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500)]
    assert runs == {"weather": 1}
    assert "max_requests=2. Its tries spent 2 (try 1: 2, try 2: 0)." in str(refused.value)
    assert type(refused.value).__name__ == "AirflowFailException"


def test_outside_a_task_it_is_exactly_the_agents_run():
    runs, keys = Counter(), []
    script = [reply.text("Hello.")]
    with FakeOpenAIServer(script) as server:
        result = run_durably_sync(_weather_agent(server, runs, keys), "Hi")
    assert result.output == "Hello."
    assert len(server.requests) == 1


_NEEDS_DURABLE_FALSE = pytest.mark.skipif(
    "durable" not in inspect.signature(Tool).parameters,
    reason=f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')} has no durable=False on tools (2.78+)",
)


def _agent_with_a_clock(server: FakeOpenAIServer, runs: Counter, keys: list[str], *, ticks: bool = True) -> Agent:
    """The weather agent with a ``clock`` tool marked ``durable=False``: ``tick <n>`` on its n-th call, or always ``noon``."""
    weather_agent = _weather_agent(server, runs, keys)

    @weather_agent.tool_plain(durable=False)
    async def clock() -> str:
        """The time now."""
        runs["clock"] += 1
        return f"tick {runs['clock']}" if ticks else "noon"

    return weather_agent


@_NEEDS_DURABLE_FALSE
def test_a_tool_with_durable_false_runs_live_on_every_try_and_the_others_replay(caplog):
    runs, keys = Counter(), []
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1"), ("clock", {}, "call_2")),
        reply.text("Sunny in Paris at noon."),
    ]

    def agent(server: FakeOpenAIServer) -> Agent:
        return _agent_with_a_clock(server, runs, keys)

    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(agent(server), "Weather in Paris?")
        with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
            result = tries.attempt(agent(server), "Weather in Paris?")

    assert result.output == "Sunny in Paris at noon."
    # try 2 replayed the answer and the weather call, ran the clock again, and sent the failed request again with its output
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert "tick 1" in json.dumps(server.requests[1].body)
    assert "tick 2" in json.dumps(server.requests[2].body)
    assert runs == {"weather": 1, "clock": 2}
    assert tries.journal.stats.replayed == {"model": 1, "tool": 1}
    assert "Durable: tool 'clock' runs live, not journaled: its durable=False keeps it out" in caplog.messages
    assert not [text for text in tries.storage.stored_texts().values() if text and "tick" in text]


@_NEEDS_DURABLE_FALSE
@pytest.mark.parametrize("changes", [False, True], ids=["same output each try", "output changes"])
def test_the_output_of_a_durable_false_tool_decides_whether_the_calls_after_it_replay(caplog, changes):
    runs, keys = Counter(), []
    # The failed request takes no answer: the retry's next live request takes the one after try 1's.
    script = [
        reply.tool_calls(("clock", {}, "call_0")),
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        *([reply.tool_calls(("weather", {"city": "Paris"}, "call_1"))] if changes else []),
        reply.text("Sunny in Paris at noon."),
    ]

    def agent(server: FakeOpenAIServer) -> Agent:
        return _agent_with_a_clock(server, runs, keys, ticks=changes)

    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(agent(server), "Weather in Paris?")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
            result = tries.attempt(agent(server), "Weather in Paris?")

    assert result.output == "Sunny in Paris at noon."
    lines = [message for message in caplog.messages if message.startswith("Durable: ") and "fernet_key" not in message]
    if changes:
        # The request that carries the clock's new output asks something else: it and every call after run live.
        assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200), (5, 200)]
        assert runs == {"clock": 2, "weather": 2}
        assert tries.journal.stats.replayed == {"model": 1}
        assert lines[:3] == [
            "Durable: model 'gpt-4o' at 1.1 replayed",
            "Durable: tool 'clock' runs live, not journaled: its durable=False keeps it out",
            "Durable: run diverged; this call and every later call of run 1 run live step=model 'gpt-4o' at 1.2 "
            "reason='it asks something other than the recorded call: input item 2 differs (counting from 0; "
            "the input has 3 items)'",
        ]
    else:
        # Only the clock and the request that failed run again.
        assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200)]
        assert runs == {"clock": 2, "weather": 1}
        assert tries.journal.stats.replayed == {"model": 2, "tool": 1}
        assert lines[:3] == [
            "Durable: model 'gpt-4o' at 1.1 replayed",
            "Durable: tool 'clock' runs live, not journaled: its durable=False keeps it out",
            "Durable: replayed steps 1.2 to 1.3: 1 model call ('gpt-4o'), 1 tool call ('weather')",
        ]


def test_a_tool_call_that_failed_before_is_logged_as_running_live_after_the_replayed_answer_that_asked_it(caplog):
    down, runs = [True], Counter()

    def agent(server: FakeOpenAIServer) -> Agent:
        built = Agent(_model(server))

        @built.tool_plain
        def weather(city: str) -> str:
            """The weather in a city."""
            runs[city] += 1
            if down[0]:
                raise ModelRetry("the weather service is down")
            return f"sunny in {city}"

        return built

    script = [reply.tool_calls(("weather", {"city": "Paris"}, "call_1")), reply.text("Sunny in Paris.")]
    tries = Tries()
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with pytest.raises(ModelHTTPError):
            tries.attempt(agent(server), "Weather in Paris?")
        down[0] = False
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="airflow.providers.common.ai.durable"):
            tries.attempt(agent(server), "Weather in Paris?")

    assert [r.number for r in server.requests] == [1, 2, 3]
    assert runs == {"Paris": 2}  # once in each try: its failure was not recorded, so it runs again
    lines = [message for message in caplog.messages if message.startswith("Durable: ") and "fernet_key" not in message]
    assert lines[:3] == [
        "Durable: model 'gpt-4o' at 1.1 replayed",
        "Durable: runs live step=tool 'weather' at 1.2 reason='it failed on an earlier try'",
        "Durable: tool 'weather' at 1.2 ran live",
    ]
