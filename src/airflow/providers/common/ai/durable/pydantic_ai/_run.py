"""
The journaled runs of a Pydantic AI agent, :func:`run_durably` and :func:`run_durably_sync`, and
the streamed ones, :func:`run_stream_durably` and :func:`iter_durably`: the running task's journal
(the core's ``current_journal``), one journal run per agent run, and the run's capability
(``_agent_run``) added first to the run's capabilities.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior

from airflow.providers.common.ai.durable.core.adapter import checked_run_options, kept
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import current_journal
from airflow.providers.common.ai.durable.pydantic_ai._agent_run import DurableCapability
from airflow.providers.common.ai.durable.pydantic_ai._tools import policies_of


def _checked(
    agent: Any, durable_key: Any, budget: Any, entry_point: str = "run_durably"
) -> tuple[str | None, UsageBudget | None]:
    if not isinstance(agent, Agent):
        raise TypeError(
            f"durable.pydantic_ai.{entry_point} runs a pydantic_ai.Agent, not {type(agent).__name__}; an OpenAI "
            "Agents SDK agent runs with airflow.providers.common.ai.durable.openai_agents.run_durably"
        )
    return checked_run_options(durable_key, budget, key_argument="durable_key")


@contextlib.contextmanager
def _journaled(
    journal: DurableJournal,
    agent: Agent[Any, Any],
    kwargs: dict[str, Any],
    durable_key: str | None,
    budget: UsageBudget | None,
) -> Iterator[dict[str, Any]]:
    """The run's arguments with its capability, inside one run of ``journal``."""
    if budget is not None:
        journal.use_budget(budget)
    with journal.run(key=durable_key) as run:
        capability = DurableCapability(run, policies_of([*agent.toolsets, *(kwargs.get("toolsets") or [])]))
        try:
            # First in the list: it wraps outermost, so a replayed request reaches no other wrapper.
            yield {**kwargs, "capabilities": [capability, *(kwargs.get("capabilities") or [])]}
        except UnexpectedModelBehavior as error:
            capability.discard_last_answer(error)
            raise
        finally:
            capability.ended()


async def run_durably(
    agent: Agent[Any, Any],
    user_prompt: Any = None,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> Any:
    """
    ``agent.run(user_prompt, **kwargs)``, journaled in the running task instance's journal.

    On a retry the model requests and tool calls the failed try completed return their recorded
    results; the rest run live. Outside an Airflow task it is exactly ``agent.run``.
    With an ``event_stream_handler`` each model request is streamed: a completed stream is
    recorded, and a replayed request hands the handler its recorded answer as events.

    ``durable_key`` names a run on every try, to tell apart runs that ask the same and start
    concurrently. ``budget``: a :class:`UsageBudget` over all tries of the task instance, shared by
    every run of the task: a live request that would pass it is not sent, and the task fails
    without retry. ``keep_journal``: keep the journal when the task instance succeeds.
    """
    _checked(agent, durable_key, budget)
    # Bound off the event loop: a storage's set-up may run an event loop of its own (s3fs does).
    journal = kept(await asyncio.to_thread(current_journal), keep_journal)
    if journal is None:
        return await agent.run(user_prompt, **kwargs)
    with _journaled(journal, agent, kwargs, durable_key, budget) as journaled_kwargs:
        return await agent.run(user_prompt, **journaled_kwargs)


def run_durably_sync(
    agent: Agent[Any, Any],
    user_prompt: Any = None,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> Any:
    """:func:`run_durably` for synchronous code, as ``agent.run_sync`` is to ``agent.run``."""
    _checked(agent, durable_key, budget)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # Bound before the loop runs: a storage's set-up may run an event loop of its own (s3fs does).
        journal = kept(current_journal(), keep_journal)
    else:
        journal = None  # run_sync refuses a running event loop, with Pydantic AI's own error
    if journal is None:
        return agent.run_sync(user_prompt, **kwargs)
    with _journaled(journal, agent, kwargs, durable_key, budget) as journaled_kwargs:
        return agent.run_sync(user_prompt, **journaled_kwargs)


@contextlib.asynccontextmanager
async def _opened_durably(
    open_run: Callable[..., Any],
    agent: Agent[Any, Any],
    user_prompt: Any,
    durable_key: str | None,
    budget: UsageBudget | None,
    keep_journal: bool | None,
    kwargs: dict[str, Any],
) -> AsyncIterator[Any]:
    """What ``open_run(user_prompt, **kwargs)`` (an async context manager of ``agent``) yields, journaled."""
    journal = kept(await asyncio.to_thread(current_journal), keep_journal)
    if journal is None:
        async with open_run(user_prompt, **kwargs) as opened:
            yield opened
        return
    with _journaled(journal, agent, kwargs, durable_key, budget) as journaled_kwargs:
        async with open_run(user_prompt, **journaled_kwargs) as opened:
            yield opened


def run_stream_durably(
    agent: Agent[Any, Any],
    user_prompt: Any = None,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> contextlib.AbstractAsyncContextManager[Any]:
    """
    ``agent.run_stream(user_prompt, **kwargs)``, journaled as :func:`run_durably` is: use it as
    ``async with run_stream_durably(agent, prompt) as result:``. Each model request's answer is
    recorded once its stream ends complete; on a retry a recorded answer streams from the journal
    (its parts whole, no request sent), and a stream cut off or left before its end runs again.
    Outside an Airflow task it is exactly ``agent.run_stream``.
    """
    _checked(agent, durable_key, budget, "run_stream_durably")  # refused at the call, before ``async with``
    return _opened_durably(agent.run_stream, agent, user_prompt, durable_key, budget, keep_journal, kwargs)


def iter_durably(
    agent: Agent[Any, Any],
    user_prompt: Any = None,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> contextlib.AbstractAsyncContextManager[Any]:
    """
    ``agent.iter(user_prompt, **kwargs)``, journaled as :func:`run_durably` is: use it as
    ``async with iter_durably(agent, prompt) as agent_run:``, and drive its nodes as with
    ``agent.iter``; a node streamed with ``node.stream(...)`` is journaled as
    :func:`run_stream_durably` journals a stream. Outside an Airflow task it is exactly ``agent.iter``.
    """
    _checked(agent, durable_key, budget, "iter_durably")  # refused at the call, before ``async with``
    return _opened_durably(agent.iter, agent, user_prompt, durable_key, budget, keep_journal, kwargs)
