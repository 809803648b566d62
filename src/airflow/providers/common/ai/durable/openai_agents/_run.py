"""
The journaled runs behind the package's names: ``run_durably``, ``run_durably_sync`` and
``run_durably_streamed`` find the running task's journal through the process's host, and
:func:`journaled` gives a run its durable run config, with the SDK hooks in place while it runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

from agents import (
    Agent,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    OutputGuardrailTripwireTriggered,
    Runner,
    RunResult,
    RunResultStreaming,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
)
from agents.run import AgentRunner
from agents.run_state import RunState

from airflow.providers.common.ai.durable.core.adapter import checked_run_options, kept
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import current_journal, running_step
from airflow.providers.common.ai.durable.openai_agents._agent_run import SDK_HOOKS, DurableAgentRun
from airflow.providers.common.ai.durable.openai_agents._model import (
    DurableModelProvider,
    refuse_server_side_conversation,
)
from airflow.providers.common.ai.durable.openai_agents._sdk_private import (
    close_runner_owned_model_provider,
    ensure_model_provider_cleanup,
)
from airflow.providers.common.ai.durable.openai_agents._sessions import rewind_session
from airflow.providers.common.ai.durable.openai_agents._stops import RunStopped
from airflow.providers.common.ai.durable.openai_agents._telemetry import send_sdk_traces_to_the_tracer_provider

log = logging.getLogger(__name__)

# Failures caused by the model's answers: replaying those answers would fail the same way.
_ANSWER_FAILURES = (
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    OutputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
)


def _task_journal() -> DurableJournal | None:
    """The journal of an enclosing journal scope, else the one the process's host binds to the running task."""
    return current_journal()


async def _run(
    journal: DurableJournal | None,
    durable_key: str | None,
    agent: Agent,
    input: Any,
    kwargs: dict[str, Any],
    budget: UsageBudget | None = None,
) -> RunResult:
    with journaled(journal, durable_key, kwargs, input, budget) as (kwargs, durable):
        provider = getattr(kwargs.get("run_config"), "model_provider", None)
        if durable is not None and (session := kwargs.get("session")) is not None:
            await rewind_session(session, durable.run, input, kwargs["run_config"])
        try:
            result = await Runner.run(agent, input, **kwargs)
            if durable is not None:
                result = await durable.continued_past_approvals(agent, result, kwargs)
                durable.stops.check()
        except Exception:
            if durable is not None:
                # A tool, its failure_error_function or the SDK made a stop inside a call into another error.
                durable.stops.check()
            raise
        finally:
            if isinstance(provider, DurableModelProvider) and provider.owned:
                # The SDK would have created and closed this provider itself: closed as it does.
                await close_runner_owned_model_provider(provider.wrapped)
    parent = running_step()
    if journal is not None and result.interruptions and parent is not None and parent.run.journal is journal:
        parent.keep_live("a run it started stopped for an approval, so the call did not complete")
    return result


async def run_durably(
    agent: Agent,
    input: Any,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> RunResult:
    """
    ``Runner.run(agent, input, **kwargs)``, journaled in the running task instance's journal.

    On a retry the model and function-tool calls the failed try completed return their recorded
    results; the rest run live. Outside an Airflow task it is exactly ``Runner.run``. Inside one,
    refuses ``previous_response_id``, ``conversation_id`` and ``auto_previous_response_id`` with a
    ``ValueError``. With a ``session``, a retry first removes from the session what the failed
    try added to it, so the session holds the conversation once.

    A run is matched to its recorded run by what its first model call asks. Runs that ask the
    same and start concurrently (``asyncio.gather``, a thread pool) are told apart by
    ``durable_key``: a string that names the run, the same on every try (``durable_key="alice"``).

    ``budget``: a :class:`UsageBudget` over all tries of the task instance, shared by every run
    of the task: a live model request that would pass it is not sent and the task fails without
    retry. A task has one budget: another one given to a later run of the same try is refused.
    Outside a task there are no tries to count and the budget is not applied.

    ``keep_journal``: keep the task instance's journal when it succeeds (archived for ``[common.ai]
    kept_journal_retention_days``, to export, replay in a test or fork), or not, over ``[common.ai]
    keep_journals``. One run of the task asking for it keeps the whole journal.
    """
    durable_key, budget = checked_run_options(durable_key, budget, key_argument="durable_key")
    # Bound off the event loop: a storage's set-up may run an event loop of its own (s3fs does).
    journal = kept(await asyncio.to_thread(_task_journal), keep_journal)
    return await _run(journal, durable_key, agent, input, kwargs, budget)


class _DurableRunner(AgentRunner):
    """The SDK's runner, whose ``run_sync`` drives the journaled run: its loop, cancellation and errors."""

    def __init__(self, journal: DurableJournal | None, durable_key: str | None, budget: UsageBudget | None) -> None:
        self.journal = journal
        self.durable_key = durable_key
        self.budget = budget

    async def run(self, starting_agent: Agent, input: Any, **kwargs: Any) -> RunResult:
        return await _run(self.journal, self.durable_key, starting_agent, input, kwargs, self.budget)


def run_durably_sync(
    agent: Agent,
    input: Any,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> RunResult:
    """:func:`run_durably` for synchronous code, as ``Runner.run_sync`` is to ``Runner.run``."""
    durable_key, budget = checked_run_options(durable_key, budget, key_argument="durable_key")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # Bound before the loop runs: a storage's set-up may run an event loop of its own (s3fs does).
        journal = kept(_task_journal(), keep_journal)
    else:
        journal = None  # run_sync refuses to run inside a running event loop, with the SDK's own error
    if journal is None:
        return Runner.run_sync(agent, input, **kwargs)
    return _DurableRunner(journal, durable_key, budget).run_sync(agent, input, **kwargs)


def _off_the_loop(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a thread of its own, in this context: the running event loop must not run it."""
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(context.run, function, *args).result()


def run_durably_streamed(
    agent: Agent,
    input: Any,
    *,
    durable_key: str | None = None,
    budget: UsageBudget | None = None,
    keep_journal: bool | None = None,
    **kwargs: Any,
) -> RunResultStreaming:
    """
    ``Runner.run_streamed(agent, input, **kwargs)``, journaled as :func:`run_durably` is.

    Each model call is recorded when its stream completes. On a retry a replayed call passes on
    its recorded answer as one ``response.completed`` event: ``stream_events()`` yields the same
    run-item events (messages, tool calls, tool outputs, handoffs), but not the raw token deltas of
    replayed calls. A stream cut off mid-call was never recorded, and runs again. A request the
    ``budget`` refuses ends the stream with the error that fails the task.
    """
    durable_key, budget = checked_run_options(durable_key, budget, key_argument="durable_key")
    # Bound, and a session put back, off the event loop: a storage's set-up may run an event loop
    # of its own (s3fs does), and the run must not start before the session is back.
    journal = kept(_off_the_loop(_task_journal), keep_journal)
    if journal is None:
        return Runner.run_streamed(agent, input, **kwargs)
    run = contextlib.ExitStack()
    try:
        kwargs, durable = run.enter_context(journaled(journal, durable_key, kwargs, input, budget))
        if durable is not None and (session := kwargs.get("session")) is not None:
            _off_the_loop(asyncio.run, rewind_session(session, durable.run, input, kwargs["run_config"]))
        result = Runner.run_streamed(agent, input, **kwargs)
    except BaseException:
        run.__exit__(*sys.exc_info())  # journaled records what the error means; it never swallows it
        raise
    provider = getattr(kwargs.get("run_config"), "model_provider", None)
    if isinstance(provider, DurableModelProvider) and provider.owned:
        # The SDK would have created this provider, and closed it when the stream's run ends.
        ensure_model_provider_cleanup(result, lambda: close_runner_owned_model_provider(provider.wrapped))

    def ended(_task: asyncio.Task[Any]) -> None:
        error = result.run_loop_exception
        if error is None and result.max_turns is not None and result.current_turn > result.max_turns:
            error = MaxTurnsExceeded(f"Max turns ({result.max_turns}) exceeded")
        if error is None:
            run.close()
        else:
            run.__exit__(type(error), error, error.__traceback__)

    assert result.run_loop_task is not None  # set by run_streamed
    result.run_loop_task.add_done_callback(ended)
    return result


@contextlib.contextmanager
def journaled(
    journal: DurableJournal | None,
    durable_key: str | None,
    kwargs: dict[str, Any],
    input: Any,
    budget: UsageBudget | None = None,
) -> Iterator[tuple[dict[str, Any], DurableAgentRun | None]]:
    """
    The ``Runner.run`` arguments to run, and the journaled run: durable inside a task, the user's
    outside. The SDK hooks are in place for as long as the journaled run is.
    """
    if journal is None:
        yield kwargs, None
        return
    refuse_server_side_conversation(kwargs)
    if budget is not None:
        journal.use_budget(budget)
    if isinstance(input, RunState):
        log.warning(
            "Durable: this run is not journaled and runs live on every try: a resumed RunState carries its own history"
        )
        yield kwargs, None
        return
    send_sdk_traces_to_the_tracer_provider()
    with SDK_HOOKS.installed(), journal.run(key=durable_key) as run:
        durable = DurableAgentRun(run)
        try:
            yield {**kwargs, "run_config": durable.run_config(kwargs.get("run_config"))}, durable
        except RunStopped as stopped:
            raise stopped.error from None
        except _ANSWER_FAILURES as error:
            durable.discard_last_answer(error)
            raise
        except ToolOutputGuardrailTripwireTriggered as error:
            durable.discard_tool_outputs(error)
            raise
        finally:
            durable.progress.flush()  # the replayed steps not logged yet, however the run ends
        durable.ended()
