"""
The Pydantic AI side of one journaled agent run: a capability, added to the run, that wraps the
model serving each request (a ``WrapperModel`` whose ``request`` and ``request_stream`` go through
the journal) and each tool execution of any toolset (``wrap_tool_execute``); calls that wait for an
approval go to the task's approval desk (``handle_deferred_tool_calls``, ``_approvals``). The
user's agent and tools are never copied. A call it cannot tell apart on a retry (two under one id)
runs live, named in a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.toolsets import AbstractToolset

from airflow.providers.common.ai.durable.core import in_flight
from airflow.providers.common.ai.durable.core.adapter import (
    BudgetAdmission,
    admitted_by_budget,
    after_earlier_writes,
    marked_in_flight,
    settled,
)
from airflow.providers.common.ai.durable.core.call_threads import call_threads, run_to_its_end
from airflow.providers.common.ai.durable.core.divergence import ModelCalls, tool_call_parts
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.in_flight import InFlightPolicy
from airflow.providers.common.ai.durable.core.in_flight_calls import VerifiedCalls, stop_before_tools
from airflow.providers.common.ai.durable.core.progress import ProgressLog
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.scope import running_step
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.core.usage import ModelUsage
from airflow.providers.common.ai.durable.pydantic_ai._approvals import (
    answered_approvals,
    approved_call_step,
    record_asked_for_approval,
    replayed_request_for_approval,
)
from airflow.providers.common.ai.durable.pydantic_ai._in_flight import (
    output_without_running,
    resolve_left_in_flight,
    resolve_verified_as_the_run_ends,
)
from airflow.providers.common.ai.durable.pydantic_ai._requests import (
    NotDescribable,
    asked_by,
    call_arguments,
    continued_from_this_history,
    described_request,
    recorded_answer,
    replayed_answer,
    usage_of,
)
from airflow.providers.common.ai.durable.pydantic_ai._tools import why_not_recordable
from airflow.providers.common.ai.durable.pydantic_ai._toolsets import ToolsOffered, policy_found

log = logging.getLogger(__name__)


class _DurableModel(WrapperModel):
    """The model serving one request attempt of a journaled run: its requests, streamed or not, go through the journal."""

    def __init__(self, wrapped: Model, durable: DurableCapability) -> None:
        super().__init__(wrapped)
        self.durable = durable

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: Any,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self.durable.model_response(self.wrapped, messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: Any,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        async with self.durable.streamed_response(
            self.wrapped, messages, model_settings, model_request_parameters, run_context
        ) as streamed:
            yield streamed


@dataclass
class DurableCapability(AbstractCapability[Any]):
    """The capability of one journaled run: its model requests and tool calls go through ``run``."""

    run: DurableRun
    #: The in-flight policy of each function tool that names one, by tool name (a toolset's are found as the run lists them).
    policies: dict[str, InFlightPolicy]
    #: The run's lines in the task log as its steps complete (R-38).
    progress: ProgressLog = field(default_factory=lambda: ProgressLog(log), init=False, repr=False)
    # Tool steps of the latest model answer, claimed in the model's order, by tool call id.
    _tool_steps: dict[str, JournalStep] = field(default_factory=dict, init=False, repr=False)
    # The model step whose request raised: a retry of it in this try keeps its position.
    _failed_model_step: JournalStep | None = field(default=None, init=False, repr=False)
    _model_calls: ModelCalls = field(default_factory=ModelCalls, init=False, repr=False)
    # Outputs a person gave for calls found in flight (policy "ask"), by step key.
    _resolved_outputs: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _verified: VerifiedCalls = field(default_factory=dict, init=False, repr=False)
    # Calls that raised ApprovalRequired themselves: once approved, they run again at a step of their own.
    _asked_for_approval: set[str] = field(default_factory=set, init=False, repr=False)
    # The toolset each tool offered to the model comes from, by name, where its policy is found.
    _tool_origins: dict[str, AbstractToolset[Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.run.progress = self.progress

    def get_wrapper_model(self, model: Model) -> Model | None:
        return None if isinstance(model, _DurableModel) else _DurableModel(model, self)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return ToolsOffered(toolset, self._tool_origins)

    def _is_inside_a_call(self) -> bool:
        # A request made while one of this run's tools runs belongs to that tool's call.
        step = running_step()
        return step is not None and step.run is self.run

    def _policy(self, name: str) -> InFlightPolicy:
        return self._policy_named(name) or in_flight.DEFAULT_POLICY

    def _policy_named(self, name: str) -> InFlightPolicy | None:
        """The in-flight policy of the tool the model calls ``name``; ``None`` if no tool has that name now."""
        origin = self._tool_origins.get(name)
        if origin is None:
            return self.policies.get(name)
        return policy_found(origin, name) or self.policies.get(name, in_flight.DEFAULT_POLICY)

    # --- model requests ---

    async def model_response(
        self, model: Model, messages: list[ModelMessage], settings: Any, parameters: ModelRequestParameters
    ) -> ModelResponse:
        if self._is_inside_a_call():
            log.debug(
                "Durable: a request to model %r inside a tool call runs live, as part of that call", model.model_name
            )
            return await model.request(messages, settings, parameters)
        step = self._model_step(model.model_name, messages, settings, parameters)
        response = self._replayed(step, model, messages) if step.replayed else None
        if response is None:
            response = await self._live_response(step, model, messages, settings, parameters)
        else:
            step.handed_out()
        self.progress.step_done(step)
        self._claim_tool_calls(response, parameters)
        return response

    def _model_step(
        self, name: str, messages: list[ModelMessage], settings: Any, parameters: ModelRequestParameters
    ) -> JournalStep:
        what = f"model {name!r}"
        try:
            request = described_request(name, messages, settings, parameters)
        except NotDescribable as error:
            log.warning("Durable: cannot fingerprint %s, so it runs live: %s", what, error)
            fingerprinted, parts = None, None
        else:
            fingerprinted, parts = self._model_calls.fingerprint_and_parts(request, what=what)
        step = self._failed_model_step
        if step is None or fingerprinted is None or step.fingerprint != fingerprinted:
            step = self.run.claim("model", name, fingerprinted, parts=parts)
        self._failed_model_step = None
        return step

    @staticmethod
    def _replayed(step: JournalStep, model: Model, messages: list[ModelMessage]) -> ModelResponse | None:
        response = replayed_answer(step.result)
        if response is None:
            step.refuse_replay("the recorded answer no longer loads")
            return None
        return continued_from_this_history(response, model, messages)

    async def _live_response(
        self,
        step: JournalStep,
        model: Model,
        messages: list[ModelMessage],
        settings: Any,
        parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Send the request, inside the task's budget, and record its answer."""
        admission = await self._admitted(step, settings)
        try:
            response = await model.request(messages, settings, parameters)
        except BaseException as error:
            settled(admission, None)
            self._request_failed(step, error)
            raise
        settled(admission, self._recorded(step, response))
        return response

    async def _admitted(self, step: JournalStep, settings: Any) -> BudgetAdmission | None:
        """What must hold before a live request is sent: calls left in flight resolved, writes stored, the budget."""
        self.progress.flush()
        await resolve_left_in_flight(self.run, self._policy_named, self._verified)
        await after_earlier_writes(step)
        max_tokens = (settings or {}).get("max_tokens")
        return await admitted_by_budget(
            self.run.journal, step.name, step.key, max_tokens if isinstance(max_tokens, int) else None
        )

    def _request_failed(self, step: JournalStep, error: BaseException) -> None:
        # A request Pydantic AI or a capability sends again in this try keeps its position.
        self._failed_model_step = step
        step.attempt_failed(error)

    @staticmethod
    def _recorded(step: JournalStep, response: ModelResponse) -> ModelUsage:
        """Record a live answer; what it used."""
        used = step.used(usage_of(step.name, response.usage))
        try:
            recorded = recorded_answer(response)
        except (ValueError, TypeError) as error:
            step.not_recordable(f"the answer cannot be stored as JSON: {type(error).__name__}")
        else:
            step.record(recorded)
        return used

    # --- streamed model requests ---

    @asynccontextmanager
    async def streamed_response(
        self,
        model: Model,
        messages: list[ModelMessage],
        settings: Any,
        parameters: ModelRequestParameters,
        run_context: Any,
    ) -> AsyncIterator[StreamedResponse]:
        """
        A streamed model request: a replayed one is its recorded answer as a stream of the events
        that build it (no request is sent); a live one is recorded when its stream ends complete,
        before the tools its answer asks for run. A stream cut off, or left before its end, is not
        recorded: the request runs again on the next try.
        """
        if self._is_inside_a_call():
            async with model.request_stream(messages, settings, parameters, run_context) as streamed:
                yield streamed
            return
        step = self._model_step(model.model_name, messages, settings, parameters)
        response = self._replayed(step, model, messages) if step.replayed else None
        if response is not None:
            step.handed_out()
            self.progress.step_done(step)
            self._claim_tool_calls(response, parameters)
            yield CompletedStreamedResponse(response, model_request_parameters=parameters, replay_events=True)
            return
        admission = await self._admitted(step, settings)
        used: ModelUsage | None = None
        try:
            async with model.request_stream(messages, settings, parameters, run_context) as streamed:
                yield streamed
            response = streamed.get()
            if response.state != "complete":
                step.fail(f"its stream ended {response.state}, before the whole answer arrived")
                return
            used = self._recorded(step, response)
        except BaseException as error:
            self._request_failed(step, error)
            raise
        finally:
            settled(admission, used)
        self.progress.step_done(step)
        self._claim_tool_calls(response, parameters)

    def _claim_tool_calls(self, response: ModelResponse, parameters: ModelRequestParameters) -> None:
        """Claim the function-tool calls of an answer in the order the model listed them."""
        # An "unapproved" tool is a function tool that runs once a person approves the call.
        journaled = {
            tool.name
            for tool in parameters.function_tools
            if tool.kind in ("function", "unapproved") and not _kept_out(tool)
        }
        calls = [part for part in response.parts if isinstance(part, ToolCallPart) and part.tool_name in journaled]
        # Two calls under one id cannot be told apart on the retry: they run live.
        repeated = {call_id for call_id, n in Counter(call.tool_call_id for call in calls).items() if n > 1}
        self._tool_steps = {}
        for call in calls:
            if call.tool_call_id in repeated:
                continue
            arguments = call_arguments(call)
            step = self.run.claim(
                "tool",
                call.tool_name,
                fingerprint(asked_by(call), what=f"tool {call.tool_name!r}"),
                parts=tool_call_parts(call.tool_name, arguments, call.tool_call_id),
                # Pydantic AI may not make a call it was asked for (the run ended first).
                counted_when_handed_out=True,
            )
            self._tool_steps[call.tool_call_id] = step
        for call in calls:
            claimed = self._tool_steps.get(call.tool_call_id)
            if claimed is not None and claimed.interrupted:
                policy = self._policy(call.tool_name).policy
                stop = stop_before_tools(claimed, policy, call_arguments(call), self._resolved_outputs)
                if stop is not None:
                    raise stop

    # --- tool calls ---

    async def wrap_tool_execute(self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any) -> Any:
        step = None if self._is_inside_a_call() else self._tool_steps.pop(call.tool_call_id, None)
        if step is None and call.tool_call_id in self._asked_for_approval and getattr(ctx, "tool_call_approved", False):
            self._asked_for_approval.discard(call.tool_call_id)
            step = approved_call_step(self.run, call)
        if step is None:
            if not self._is_inside_a_call():
                self.progress.flush()  # the replayed steps before it, logged before it is
                if _kept_out(tool_def):
                    log.info(
                        "Durable: tool %r runs live, not journaled: its durable=False keeps it out", call.tool_name
                    )
                else:
                    log.info(
                        "Durable: tool %r (%s) runs live, not journaled: a retry could not tell its call apart "
                        "(another call of the answer has its id) or its kind is not journaled",
                        call.tool_name,
                        getattr(tool_def, "kind", "tool"),
                    )
            return await handler(args)
        if step.replayed:
            step.handed_out()
            self.progress.step_done(step)
            if (asked := replayed_request_for_approval(step)) is not None:
                self._asked_for_approval.add(call.tool_call_id)
                raise asked
            return step.result.get("output") if isinstance(step.result, dict) else step.result
        self.progress.flush()
        policy = self._policy(call.tool_name)
        await resolve_left_in_flight(self.run, self._policy_named, self._verified)
        happened = await output_without_running(
            step, policy, call_arguments(call), self._resolved_outputs, self._verified
        )
        if happened is not None:  # the core logged how it was resolved: it did not run live
            return happened.output
        await marked_in_flight(step, policy.policy)
        try:
            with step.running():
                try:
                    output, stopped = await _handled_to_its_end(handler, args, step.describe())
                    if stopped:  # ran to its end; left in flight for the next try's policy, which now sees its effect
                        raise asyncio.CancelledError
                except ApprovalRequired as asked:
                    record_asked_for_approval(step, asked)
                    self._asked_for_approval.add(call.tool_call_id)
                    raise
        except Exception:
            self.progress.step_done(step)  # failed: it runs again next try
            raise
        why = why_not_recordable(output)
        if why is not None:
            step.not_recordable(why)
        else:
            step.record({"output": output})
        self.progress.step_done(step)
        return output

    # --- approvals ---

    async def handle_deferred_tool_calls(
        self, ctx: Any, *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        return answered_approvals(self.run, ctx, requests)

    # --- the run's end ---

    def ended(self) -> None:
        """The run ended: the replayed steps not logged yet are, and the calls left in flight it verified resolved."""
        self.progress.flush()
        resolve_verified_as_the_run_ends(self._verified)

    def discard_last_answer(self, error: BaseException) -> None:
        """After a failure caused by the model's answers, make the next try ask the model again."""
        answers = [step for step in self.run.steps if step.kind == "model"]
        if answers:
            answers[-1].discard(f"the run failed with {type(error).__name__}, which a replay would repeat")


async def _handled_to_its_end(handler: Any, args: Any, call: str) -> tuple[Any, bool]:
    """
    The tool's output, and whether the try was stopped while it ran. Pydantic AI runs a plain
    ``def`` tool in a thread of the executor ``Agent.using_thread_executor`` sets, here the one of
    ``call_threads``, so that a stopped try waits for the call to end (``run_to_its_end``).
    """
    with Agent.using_thread_executor(call_threads()):
        return await run_to_its_end(handler(args), call)


def _kept_out(tool_def: Any) -> bool:
    """
    Whether a tool's ``durable=False`` (pydantic-ai-slim 2.78 and later) keeps its calls out of the
    journal: they run live on every try, as a durable engine runs such a tool outside its durable unit.
    """
    return getattr(tool_def, "durable", None) is False
