"""AgentOperator: an OpenAI Agents SDK or Pydantic AI agent as an Airflow task, optionally durable across retries."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

try:
    from agents import Agent, Model, ModelResponse, MultiProvider, RunConfig, RunContextWrapper, RunHooks, Runner
    from agents.models import get_default_model
    from agents.run_config import DEFAULT_MAX_TURNS
except ImportError as error:  # pragma: no cover - openai-agents is a dependency of this provider
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(error) from error

from airflow.providers.common.compat.sdk import BaseOperator
from pydantic_core import to_jsonable_python

from airflow.providers.common.ai.durable.airflow.binding import AIRFLOW_HOST
from airflow.providers.common.ai.durable.core import plural
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.usage import USAGE_XCOM_KEY, TryUsage
from airflow.providers.common.ai.durable.openai_agents._budget import usage_of

if TYPE_CHECKING:
    from datetime import timedelta

    from agents import RunResult
    from airflow.sdk import Context
    from airflow.sdk.bases.notifier import BaseNotifier
    from airflow.sdk.execution_time.hitl import HITLUser

    from airflow.providers.common.ai.durable.core.approvals import Answer


class AgentOperator(BaseOperator):
    """
    Run an OpenAI Agents SDK agent, or a Pydantic AI agent, on ``prompt``; the agent's final output
    is the task's return value (XCom), a pydantic or dataclass output as JSON-compatible data. Each try also pushes
    its usage to XCom under the key ``usage``, also when the try fails: the requests and tokens
    per model that reached a model in this try and, when durable, what the replay saved and how
    many calls of each kind replayed, ran live or could not be recorded (see
    :class:`~airflow.providers.common.ai.durable.core.usage.TryUsage`).

    With ``durable=True`` each model call and function-tool call the agent completes is recorded
    in the task instance's journal, and a retry replays them instead of calling the model or
    running the tool again (see the durable execution docs). Pair it with ``retries``.

    :param prompt: what the agent is asked: a string, or a list of Responses API input items.
        Templated.
    :param agent: an ``agents.Agent`` or a ``pydantic_ai.Agent`` (with the extra ``[pydantic-ai]``),
        or a callable without arguments that returns one, called in the worker at the start of each
        try (for an agent that is costly or unsafe to build while the DAG file is parsed).
    :param durable: journal the run, so that a retry replays the calls this try completes.
    :param max_turns: the most model calls the run may make before it fails with
        ``MaxTurnsExceeded`` (the SDK's default, 10, without it).
    :param run_config: an ``agents.RunConfig`` for the run (model, model settings, guardrails,
        ...).
    :param openai_conn_id: an Airflow connection of type ``openai`` (API key in the password,
        an optional base URL in the host) that serves the models the agents name
        (``Agent(model="gpt-4.1")``). Without it the SDK's default applies: the
        ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` of the worker's environment. Templated.
    :param assigned_users: who may answer an approval request (``{"id": ..., "name": ...}`` or a
        list of them), as in Airflow's ``HITLOperator``; anyone who may edit the DAG without it.
    :param response_timeout: how long an approval request waits for an answer; then ``defaults``
        is taken, or the task fails keeping its journal. No limit without it.
    :param defaults: ``"Approve"`` or ``"Reject"``, taken when ``response_timeout`` passes.
    :param notifiers: Airflow notifiers called with the task's context when an approval request
        is created, as in ``HITLOperator``.
    :param budget: a ``UsageBudget`` (``airflow.providers.common.ai.durable.openai_agents``): limits
        on requests, tokens and cost in US dollars over all tries of the task instance (needs
        ``durable=True``). Replayed calls cost nothing; a live request that would pass a limit
        is not sent and the task fails without retry, naming the limit and what each try spent.
    :param keep_journal: keep the journal when the task instance succeeds (archived, to export,
        replay in a test or fork; docs/fixtures.rst), or not, over ``[common.ai] keep_journals``.

    With ``durable=True``, a tool call that needs approval (``needs_approval``; of a Pydantic AI
    agent, ``requires_approval=True`` or ``ApprovalRequired``), or a call found in flight on a retry
    whose tool's policy is ``in_flight("ask")``, creates an Airflow human-in-the-loop request
    (subject: agent and tool; body: the masked arguments; options Approve and Reject) and the task
    defers to the triggerer until a person answers (run a triggerer). The task then resumes: the
    calls before the approval replay, the approved tool runs once, and the decision is recorded, so
    a later retry never asks again; a try that fails before it took a given answer leaves it to the
    next try (see the approvals docs).

    A Pydantic AI agent runs with ``agent.run_sync(prompt)``, or with ``durable=True`` with
    ``durable.pydantic_ai.run_durably_sync``; ``budget``, ``keep_journal`` and the approval options
    apply to it as well. The options that belong to the OpenAI Agents SDK (``run_config``,
    ``openai_conn_id``, ``max_turns``) are refused with it: give its model, provider and settings
    to the Pydantic AI agent itself.

    Refuses, when the DAG is parsed: an ``agent`` that is neither an ``Agent`` nor callable, an
    empty prompt, ``max_turns`` below 1, ``openai_conn_id`` together with a ``run_config``
    that brings its own model provider, a ``budget`` without ``durable=True``, a Pydantic AI agent
    with an option of the OpenAI Agents SDK, or without the extra ``[pydantic-ai]`` (an agent
    function's Pydantic AI agent: when the task starts), and on an Airflow line without
    human-in-the-loop (before 3.2) an approval option or a tool that needs approval.
    """

    template_fields: Sequence[str] = ("prompt", "openai_conn_id")
    template_fields_renderers = {"prompt": "md"}
    ui_color = "#e8f0fe"

    def __init__(
        self,
        *,
        prompt: str | list[Any],
        agent: Any,
        durable: bool = False,
        max_turns: int | None = None,
        run_config: RunConfig | None = None,
        openai_conn_id: str | None = None,
        assigned_users: HITLUser | list[HITLUser] | None = None,
        response_timeout: timedelta | None = None,
        defaults: str | list[str] | None = None,
        notifiers: Sequence[BaseNotifier] | BaseNotifier | None = None,
        budget: UsageBudget | None = None,
        keep_journal: bool | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow.providers.common.ai.durable.airflow.approvals import check_approvals_supported, check_defaults

        super().__init__(**kwargs)
        _check_prompt(prompt, self.task_id, when_rendered=False)
        if not isinstance(agent, Agent) and not _is_pydantic_ai_agent(agent) and not callable(agent):
            raise TypeError(
                f"AgentOperator {self.task_id!r}: agent must be an agents.Agent, a pydantic_ai.Agent or a "
                f"function that returns one, not {type(agent).__name__}"
            )
        if not isinstance(durable, bool):
            raise TypeError(f"AgentOperator {self.task_id!r}: durable must be True or False, not {durable!r}")
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise ValueError(
                f"AgentOperator {self.task_id!r}: max_turns must be a whole number of at least 1, not {max_turns!r}"
            )
        if run_config is not None and not isinstance(run_config, RunConfig):
            raise TypeError(
                f"AgentOperator {self.task_id!r}: run_config must be an agents.RunConfig, "
                f"not {type(run_config).__name__}"
            )
        if openai_conn_id and run_config is not None and type(run_config.model_provider) is not MultiProvider:
            raise ValueError(
                f"AgentOperator {self.task_id!r}: give either openai_conn_id or a run_config with its own "
                "model_provider, not both: the connection would replace that provider"
            )
        if budget is not None and not isinstance(budget, UsageBudget):
            raise TypeError(
                f"AgentOperator {self.task_id!r}: budget must be a UsageBudget, for example "
                f"UsageBudget(max_total_tokens=100_000), not {type(budget).__name__}"
            )
        if budget is not None and not durable:
            raise ValueError(
                f"AgentOperator {self.task_id!r}: a budget counts what every try spent, which the journal keeps: "
                "set durable=True"
            )
        if keep_journal and not durable:
            raise ValueError(
                f"AgentOperator {self.task_id!r}: keep_journal keeps the journal, which needs durable=True"
            )
        self.keep_journal = keep_journal
        # Each answer is priced: a malformed [common.ai] model_prices is refused now, not once a request is paid.
        AIRFLOW_HOST.price_overrides()
        self.budget = budget
        self.prompt = prompt
        self.agent = agent
        self.durable = durable
        self.max_turns = max_turns
        self.run_config = run_config
        self.openai_conn_id = openai_conn_id
        self.assigned_users = [assigned_users] if isinstance(assigned_users, dict) else assigned_users
        if response_timeout is not None and not isinstance(response_timeout, datetime.timedelta):
            raise TypeError(
                f"AgentOperator {self.task_id!r}: response_timeout must be a datetime.timedelta, "
                f"not {type(response_timeout).__name__}"
            )
        self.response_timeout = response_timeout
        self.defaults = check_defaults(defaults, self.task_id)
        self.notifiers = (
            [notifiers] if notifiers is not None and not isinstance(notifiers, Sequence) else notifiers or []
        )
        if _is_pydantic_ai_agent(agent):
            self._check_pydantic_ai_agent(agent)
        asked = [
            name
            for name, value in (
                ("assigned_users", assigned_users),
                ("response_timeout", response_timeout),
                ("defaults", defaults),
                ("notifiers", notifiers),
            )
            if value
        ]
        if asked:
            check_approvals_supported(self.task_id, " and ".join(asked))
        if needing := _tools_needing_approval(agent):
            option = "requires_approval" if _is_pydantic_ai_agent(agent) else "needs_approval"
            check_approvals_supported(self.task_id, f"{option} of {', '.join(needing)}")
        # The answer this execution resumed with (execute_complete), for the approval it was asked
        # for, and the moment the try may act on it.
        self._answer: Answer | None = None
        self._not_before: datetime.datetime | None = None

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any],
        step_key: str | None = None,
        fingerprint: str | None = None,
        not_before: datetime.datetime | None = None,
    ) -> Any:
        """Resume after a person answered an approval request (or its timeout passed): run again, replaying."""
        from airflow.providers.common.ai.durable.airflow.approvals import resumed_with

        self._answer = resumed_with(context, event, step_key, fingerprint, method_name="execute_complete")
        self._not_before = not_before
        # execute, not the run alone: @task.agent writes the prompt there.
        return self.execute(context)

    def execute(self, context: Context) -> Any:
        _check_prompt(self.prompt, self.task_id, when_rendered=True)
        if self.durable:
            from airflow.providers.common.ai.durable.airflow.approvals import approval_timing
            from airflow.providers.common.ai.durable.core.scope import current_journal

            # Binds the task instance's journal now: a missing durable_cache_path fails the task
            # before the agent is built or any model is called; so does a malformed approval option.
            current_journal(AIRFLOW_HOST)
            approval_timing()
            if not self.retries:
                self.log.warning(
                    "Durable: durable=True with retries=0 records calls that only a retry, or a clear "
                    "after the task failed, replays; set retries to let Airflow replay them"
                )
        # What counts the run's usage without a journal: the agent's framework's own.
        counted: Any = None
        try:
            agent = self._get_agent()
            if _is_pydantic_ai_agent(agent):
                # An agent function's agent is known only now: checked as an agent given to the operator is.
                self._check_pydantic_ai_agent(agent)
                from airflow.providers.common.ai.durable.pydantic_ai._usage import CountedUsage

                counted = CountedUsage()
                return self._run_pydantic_ai(context, agent, counted)
            run_config = self._get_run_config()
            counted = _CountedUsage(run_config)
            return self._run_openai_agents(context, agent, run_config, counted)
        finally:
            # Also when the try fails: what it used as far as it got.
            context["ti"].xcom_push(key=USAGE_XCOM_KEY, value=self._get_usage(counted).to_dict())

    def _run_openai_agents(
        self, context: Context, agent: Agent, run_config: RunConfig | None, counted: _CountedUsage
    ) -> Any:
        run_kwargs: dict[str, Any] = {
            "max_turns": DEFAULT_MAX_TURNS if self.max_turns is None else self.max_turns,
            "run_config": run_config,
            "hooks": counted,
        }
        if self.durable:
            from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

            run = functools.partial(
                run_durably_sync, agent, self.prompt, budget=self.budget, keep_journal=self.keep_journal, **run_kwargs
            )
        else:
            run = functools.partial(Runner.run_sync, agent, self.prompt, **run_kwargs)
        result: RunResult = self._run_answering_approvals(
            context, run, is_waiting=lambda result: bool(result.interruptions)
        )
        self._log_usage(result.last_agent.name, self._get_usage(counted))
        return to_jsonable_python(result.final_output)

    def _run_pydantic_ai(self, context: Context, agent: Any, counted: Any) -> Any:
        """``agent.run_sync(prompt)``, journaled with ``durable=True``; the run's output is the return value."""
        from airflow.providers.common.ai.durable.pydantic_ai._approvals import is_waiting_for_approval

        # Not inferred from this frame, where the agent's variable is always "agent".
        run_kwargs: dict[str, Any] = {"capabilities": [counted], "infer_name": False}
        if self.durable:
            from airflow.providers.common.ai.durable.pydantic_ai import run_durably_sync

            run = functools.partial(
                run_durably_sync, agent, self.prompt, budget=self.budget, keep_journal=self.keep_journal, **run_kwargs
            )
        else:
            run = functools.partial(agent.run_sync, self.prompt, **run_kwargs)
        result = self._run_answering_approvals(
            context, run, is_waiting=lambda result: is_waiting_for_approval(result.output)
        )
        self._log_usage(agent.name or "(no name)", self._get_usage(counted))
        return to_jsonable_python(result.output)

    def _run_answering_approvals(
        self, context: Context, run: Callable[[], Any], *, is_waiting: Callable[[Any], bool]
    ) -> Any:
        """
        The result of ``run()``, whichever framework's run it is. With ``durable=True`` it runs inside
        the task's approval desk, which answers its approvals, and its questions about calls found in
        flight, with the decisions recorded or the answer this execution resumed with. A run that
        stopped for a person (``AwaitingAnswer``, or a result that ``is_waiting`` for an approval)
        makes the task wait for the answer, and resume in ``execute_complete``: this never returns then.
        """
        from airflow.providers.common.ai.durable.core.approvals import AwaitingAnswer, answering_approvals

        desk = None
        result = None
        if self.durable:
            from airflow.providers.common.ai.durable.airflow.approvals import going_on_at

            with (
                answering_approvals(self._answer, going_on_at(self._not_before)) as desk,
                contextlib.suppress(AwaitingAnswer),
            ):
                result = run()
        else:
            result = run()
        if result is None or is_waiting(result):
            self._wait_for_approval(context, desk)
        return result

    def _check_pydantic_ai_agent(self, agent: Any) -> None:
        """Refuse what a Pydantic AI agent cannot take: an option of the OpenAI Agents SDK, a missing extra."""
        given = {"run_config": self.run_config, "openai_conn_id": self.openai_conn_id, "max_turns": self.max_turns}
        for name, value in given.items():
            if value is not None:
                raise ValueError(
                    f"AgentOperator {self.task_id!r}: {name} is an option of OpenAI Agents SDK agents, not of "
                    f"a Pydantic AI agent; {_INSTEAD_FOR_PYDANTIC_AI[name]}"
                )
        # Without the extra [pydantic-ai] (or with a Pydantic AI it cannot use) this raises, naming the extra.
        import airflow.providers.common.ai.durable.pydantic_ai  # noqa: F401

    def _wait_for_approval(self, context: Context, desk: Any) -> NoReturn:
        from airflow.providers.common.ai.durable.airflow.approvals import wait_for_answer

        if desk is None or desk.pending is None:
            raise RuntimeError(
                f"AgentOperator {self.task_id!r}: the agent stopped for an approval of a tool call; "
                "approvals need durable=True (and a journal) so that the task can wait for a person and resume"
            )
        wait_for_answer(
            self,
            context,
            desk,
            method_name="execute_complete",
            assigned_users=self.assigned_users,
            response_timeout=self.response_timeout,
            defaults=self.defaults,
            notifiers=self.notifiers,
        )

    def _get_usage(self, counted: Any) -> TryUsage:
        from airflow.providers.common.ai.durable.core.scope import journal_in_use

        # A durable run in a task has a journal, which also knows what replayed; outside a task
        # (or without durable) the run's hooks counted what reached the model.
        journal = journal_in_use(AIRFLOW_HOST) if self.durable else None
        if journal is not None:
            return journal.stats.usage()
        return counted.usage if counted is not None else TryUsage()

    def _get_agent(self) -> Any:
        if isinstance(self.agent, Agent) or _is_pydantic_ai_agent(self.agent):
            return self.agent
        agent = self.agent()
        if not isinstance(agent, Agent) and not _is_pydantic_ai_agent(agent):
            raise TypeError(
                f"AgentOperator {self.task_id!r}: the agent function {_name_of(self.agent)} returned "
                f"{type(agent).__name__}; it must return an agents.Agent or a pydantic_ai.Agent"
            )
        return agent

    def _get_run_config(self) -> RunConfig | None:
        if not self.openai_conn_id:
            return self.run_config
        from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook

        provider = OpenAIAgentsHook(self.openai_conn_id).get_model_provider()
        if self.run_config is None:
            return RunConfig(model_provider=provider)
        # A copy, not the user's RunConfig: the operator object lives on across tries.
        return dataclasses.replace(self.run_config, model_provider=provider)

    def _log_usage(self, agent_name: str, usage: TryUsage) -> None:
        self.log.info(
            "Agent %r answered: %s reached the model in this try, %s (%d input, %d output)",
            agent_name,
            plural.counted(usage.requests, "model request"),
            plural.counted(usage.total_tokens, "token"),
            usage.input_tokens,
            usage.output_tokens,
        )


class _CountedUsage(RunHooks):
    """Run hooks that count each model answer's usage by model name, for a run without a journal."""

    def __init__(self, run_config: RunConfig | None) -> None:
        self.run_config = run_config
        self.usage = TryUsage()

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        name = _model_name(self.run_config.model if self.run_config and self.run_config.model else agent.model)
        self.usage.count(name, usage_of(name, response.usage))
        self.usage.live["model"] = self.usage.live.get("model", 0) + 1

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Any, result: Any) -> None:
        self.usage.live["tool"] = self.usage.live.get("tool", 0) + 1


def _model_name(model: str | Model | None) -> str:
    """The name a durable run's journal gives the same model."""
    if model is None:
        return get_default_model()
    if isinstance(model, str):
        return model
    return str(getattr(model, "model", None) or type(model).__name__)


#: What a Pydantic AI agent takes instead of each option of the OpenAI Agents SDK.
_INSTEAD_FOR_PYDANTIC_AI = {
    "run_config": "give the model and its settings to the Pydantic AI Agent itself",
    "openai_conn_id": "give the Pydantic AI Agent a model whose provider has the key and base URL",
    "max_turns": "limit its requests with budget=UsageBudget(max_requests=...) and durable=True",
}


def _is_pydantic_ai_agent(agent: Any) -> bool:
    """
    Whether ``agent`` is a Pydantic AI agent, told by the modules of its classes: Pydantic AI is
    the optional extra [pydantic-ai], imported only once an agent of it is given.
    """
    return any(cls.__module__.partition(".")[0] == "pydantic_ai" for cls in type(agent).__mro__)


def _check_prompt(prompt: Any, task_id: str, *, when_rendered: bool) -> None:
    from airflow.providers.common.compat.sdk import SET_DURING_EXECUTION

    if prompt is SET_DURING_EXECUTION and not when_rendered:
        return  # @task.agent: the decorated function returns it when the task runs
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError(f"AgentOperator {task_id!r}: prompt is empty; give the agent something to do")
        return
    if isinstance(prompt, list):
        if not prompt:
            raise ValueError(f"AgentOperator {task_id!r}: prompt is an empty list; give at least one input item")
        return
    if not when_rendered and _is_resolved_at_run_time(prompt):
        return
    raise TypeError(
        f"AgentOperator {task_id!r}: prompt must be a string or a list of input items, not {type(prompt).__name__}"
    )


def _is_resolved_at_run_time(value: Any) -> bool:
    """An XComArg or another value Airflow resolves before ``execute``."""
    from airflow.providers.common.ai._airflow_private import ResolveMixin

    return isinstance(value, ResolveMixin)


def _tools_needing_approval(agent: Any) -> list[str]:
    """
    The function tools of ``agent`` that may need approval, as ``<agent>.<tool>``: of an OpenAI Agents
    SDK agent and the agents it hands off to, or of a Pydantic AI agent. None of an agent function.
    """
    if _is_pydantic_ai_agent(agent):
        from airflow.providers.common.ai.durable.pydantic_ai._approvals import tools_needing_approval

        return tools_needing_approval(agent)
    if not isinstance(agent, Agent):
        return []
    needing: list[str] = []
    seen: set[int] = set()
    agents = [agent]
    while agents:
        current = agents.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        needing += [f"{current.name}.{tool.name}" for tool in current.tools if getattr(tool, "needs_approval", False)]
        # A handoff() object keeps its agent privately: the check when the task runs covers those.
        agents += [handoff for handoff in current.handoffs if isinstance(handoff, Agent)]
    return needing


def _name_of(function: Any) -> str:
    return getattr(function, "__qualname__", None) or repr(function)
