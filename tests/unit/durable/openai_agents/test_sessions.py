"""
A run with a ``session`` is journaled: a retry first puts the session back to what the failed try
found, then replays, so the session holds the conversation once (R-35).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
import tries
from agents import Agent, SQLiteSession, function_tool
from agents.extensions.memory import AdvancedSQLiteSession, EncryptedSession
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import WorkerDied

EARLIER = [
    {"role": "user", "content": "Hi, I am Ada."},
    {"role": "assistant", "content": "Hello Ada."},
]


def sqlite(path):
    return SQLiteSession("ada", str(path / "sessions.db"))


def advanced_sqlite(path):
    return AdvancedSQLiteSession(session_id="ada", db_path=str(path / "advanced.db"), create_tables=True)


def encrypted(path):
    return EncryptedSession("ada", SQLiteSession("ada", str(path / "encrypted.db")), encryption_key="k" * 32)


SESSIONS = {"sqlite": sqlite, "advanced-sqlite": advanced_sqlite, "encrypted": encrypted}


@pytest.fixture(params=SESSIONS)
def open_session(request, tmp_path):
    """Opens the session of one conversation: a new object on each call, as each try has."""
    return lambda: SESSIONS[request.param](tmp_path)


class Task(tries.Task):
    prompt = "What is the weather in Paris?"


def weather_tool(runs: Counter[str], *, dies: bool = False):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        if dies:
            raise WorkerDied
        return f"sunny in {city}"

    return weather


def items_of(session) -> list:
    return asyncio.run(session.get_items())


def started(open_session):
    session = open_session()
    asyncio.run(session.add_items(list(EARLIER)))
    return session


def contents(items: list) -> list:
    """Each item as its role and text, or its type and call id."""
    described = []
    for item in items:
        if item.get("role"):
            content = item["content"]
            text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
            described.append((item["role"], text))
        else:
            described.append((item["type"], item["call_id"]))
    return described


CONVERSATION = [
    ("user", "Hi, I am Ada."),
    ("assistant", "Hello Ada."),
    ("user", "What is the weather in Paris?"),
    ("function_call", "c1"),
    ("function_call_output", "c1"),
    ("assistant", "It is sunny in Paris."),
]


@pytest.mark.parametrize("failure", ["model error", "worker died in the tool"])
def test_a_retry_puts_the_session_back_then_replays_so_the_conversation_is_held_once(open_session, failure):
    runs: Counter[str] = Counter()
    task = Task()
    session = started(open_session)
    tool_call = [function_call("weather", {"city": "Paris"}, call_id="c1")]
    if failure == "model error":
        first = ScriptedModel([tool_call, RuntimeError("provider outage")])
        task.failing_attempt(Agent(name="a", model=first, tools=[weather_tool(runs)]), RuntimeError, session=session)
    else:
        first = ScriptedModel([tool_call])
        task.failing_attempt(
            Agent(name="a", model=first, tools=[weather_tool(runs, dies=True)]), WorkerDied, session=session
        )
    # The failed try left its input (and, after a model error, its first turn) in the session.
    assert len(items_of(open_session())) > len(EARLIER)

    again = ScriptedModel([[assistant_message("It is sunny in Paris.")]])
    result = task.attempt(Agent(name="a", model=again, tools=[weather_tool(runs)]), session=open_session())

    assert result.final_output == "It is sunny in Paris."
    assert contents(items_of(open_session())) == CONVERSATION
    # The first answer replayed; the one live request asked with the conversation as the first try had it.
    assert len(again.calls) == 1
    assert contents(again.calls[0].input) == CONVERSATION[:-1]
    assert runs["weather"] == (1 if failure == "model error" else 2)
    assert task.replayed["model"] == 1


def test_a_session_whose_earlier_items_changed_since_is_left_alone_and_the_run_goes_live(open_session, caplog):
    runs: Counter[str] = Counter()
    task = Task()
    tool_call = [function_call("weather", {"city": "Paris"}, call_id="c1")]
    first = ScriptedModel([tool_call, RuntimeError("provider outage")])
    task.failing_attempt(
        Agent(name="a", model=first, tools=[weather_tool(runs)]), RuntimeError, session=started(open_session)
    )
    # Another writer rewrote the conversation's beginning while the task waited for its retry.
    other = open_session()
    held = items_of(other)
    asyncio.run(other.clear_session())
    asyncio.run(other.add_items([{"role": "user", "content": "Hi, I am Grace."}, *held[1:]]))

    again = ScriptedModel([tool_call, [assistant_message("It is sunny in Paris.")]])
    with caplog.at_level(logging.WARNING):
        task.attempt(Agent(name="a", model=again, tools=[weather_tool(runs)]), session=open_session())

    assert "the session's items before this run changed since the failed try" in caplog.text
    # Nothing was removed from the session and nothing replayed: both requests and the tool ran live.
    assert contents(items_of(open_session()))[: len(held)] == [("user", "Hi, I am Grace."), *contents(held[1:])]
    assert (len(again.calls), runs["weather"], task.replayed["model"]) == (2, 2, 0)


def test_two_runs_sharing_a_session_in_one_task_both_replay_and_hold_their_turns_once(tmp_path):
    runs: Counter[str] = Counter()
    task = Task()
    open_session = lambda: sqlite(tmp_path)  # noqa: E731

    def both(first_model, second_model):
        task.journal = tries.DurableJournal(task.storage)
        with tries.journal_scope(task.journal):
            session = open_session()
            tries.run_durably_sync(Agent(name="a", model=first_model), "Hi", session=session)
            return tries.run_durably_sync(
                Agent(name="a", model=second_model, tools=[weather_tool(runs)]), "Weather?", session=session
            )

    with pytest.raises(RuntimeError):
        both(
            ScriptedModel([[assistant_message("Hello")]]),
            ScriptedModel([[function_call("weather", {"city": "Paris"}, call_id="c1")], RuntimeError()]),
        )
    first_again, second_again = ScriptedModel([]), ScriptedModel([[assistant_message("Sunny.")]])
    both(first_again, second_again)

    assert (len(first_again.calls), len(second_again.calls), runs["weather"]) == (0, 1, 1)
    assert contents(items_of(open_session())) == [
        ("user", "Hi"),
        ("assistant", "Hello"),
        ("user", "Weather?"),
        ("function_call", "c1"),
        ("function_call_output", "c1"),
        ("assistant", "Sunny."),
    ]
