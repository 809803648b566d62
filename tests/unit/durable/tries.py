"""The tries of one task instance, for tests that run agents through run_durably_sync."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from agents import Agent, FunctionTool, function_tool
from agents.testing import ScriptedModel, function_call

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage, JournalStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in the SDK or the journal catches it."""


class LoopTries:
    """
    One storage, and a new journal per try, as a new worker has; each try runs ``run()``, a
    coroutine function of any framework, on an event loop of its own.
    """

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, run: Any) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return asyncio.run(run())

    def stored(self) -> str:
        """Every stored entry's text, in one string to look for what must not be stored."""
        return json.dumps([text or "" for text in self.storage.stored_texts().values()])


class Task:
    """One storage, and a new journal per try, as a new worker has; ``prompt`` is each try's input."""

    prompt: Any = "What is the weather in Paris?"

    def __init__(self, storage: JournalStorage | None = None) -> None:
        self.storage = storage if storage is not None else InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent, prompt: Any = None, **kwargs: Any) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, self.prompt if prompt is None else prompt, **kwargs)

    def failing_attempt(self, agent: Agent, error: type[BaseException] = Exception, **kwargs: Any) -> None:
        with pytest.raises(error):
            self.attempt(agent, **kwargs)

    @property
    def replayed(self) -> Counter[str]:
        assert self.journal is not None
        return self.journal.stats.replayed

    @property
    def ran_live(self) -> Counter[str]:
        assert self.journal is not None
        return self.journal.stats.ran_live


def task_failed_after_a_tool(output: Any, runs: Counter[str], prompt: Any = "go") -> tuple[Task, FunctionTool]:
    """A task whose try 1 ran the tool ``produce`` (returning ``output``, counted in ``runs``) and then failed."""

    @function_tool
    def produce() -> object:
        """Produces something."""
        runs["produce"] += 1
        return output

    task = Task()
    task.prompt = prompt
    model = ScriptedModel([[function_call("produce", {}, call_id="c1")], RuntimeError()])
    task.failing_attempt(Agent(name="a", model=model, tools=[produce]), RuntimeError)
    return task, produce
