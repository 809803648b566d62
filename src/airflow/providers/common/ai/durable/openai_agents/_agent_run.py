"""
The SDK side of one journaled ``Runner.run``: the run hooks that send each model call and
function-tool call through the journal, the SDK's interruptions turned into approval requests,
and the arguments a journaled run runs with.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeGuard

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    RunResult,
    ToolOutputGuardrailTripwireTriggered,
    Usage,
)
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
)
from pydantic import ValidationError

from airflow.providers.common.ai.durable.core.adapter import (
    BudgetAdmission,
    after_earlier_writes,
    marked_in_flight,
    settled,
)
from airflow.providers.common.ai.durable.core.approvals import ApprovalRequest, approval_desk
from airflow.providers.common.ai.durable.core.divergence import ModelCalls, tool_call_fingerprint_and_parts
from airflow.providers.common.ai.durable.core.in_flight_calls import VerifiedCalls
from airflow.providers.common.ai.durable.core.progress import ProgressLog
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.scope import running_step
from airflow.providers.common.ai.durable.core.steps import JournalStep
from airflow.providers.common.ai.durable.core.usage import ModelUsage
from airflow.providers.common.ai.durable.openai_agents._budget import admitted_by_budget, usage_of
from airflow.providers.common.ai.durable.openai_agents._in_flight import (
    output_without_running,
    resolve_before_tools,
    resolve_left_in_flight,
    resolve_verified_as_the_run_ends,
)
from airflow.providers.common.ai.durable.openai_agents._mcp import custom_data_to_record, mcp_hooks, restore_custom_data
from airflow.providers.common.ai.durable.openai_agents._model import (
    RESPONSES,
    DurableModel,
    DurableModelProvider,
    as_the_client_built_it,
    completed_event,
    model_name_of,
    recorded_response,
    request_of,
    with_no_usage,
)
from airflow.providers.common.ai.durable.openai_agents._sdk_hooks import SDKHooks
from airflow.providers.common.ai.durable.openai_agents._sdk_private import (
    FAILED_RESPONSE_EVENTS,
    TERMINAL_USAGE,
    check_installed_sdk,
    declared_output_adapter,
    invocation_result,
    nested_agent_run_was_interrupted,
    run_hooks,
)
from airflow.providers.common.ai.durable.openai_agents._stops import RunStopped, RunStops
from airflow.providers.common.ai.durable.openai_agents._tool_output import (
    ToolOutputNotRecordable,
    decode_tool_output,
    encode_tool_output,
)
from airflow.providers.common.ai.durable.openai_agents._tools import (
    TOOL_FAILURE,
    invoked_to_its_end,
    note_failure,
    noting_failures,
    policy_of,
)

log = logging.getLogger(__name__)


def _durable_run_of(run_config: Any) -> DurableAgentRun | None:
    provider = getattr(run_config, "model_provider", None)
    return provider.durable if isinstance(provider, DurableModelProvider) else None


def _resolved_model(model: Model, run_config: Any) -> Model:
    """The model the SDK resolved for a turn: the durable one in a journaled run."""
    durable = _durable_run_of(run_config)
    return durable.model(model) if durable is not None and not isinstance(model, DurableModel) else model


async def _invoked_tool(invoke: Callable[..., Awaitable[Any]], **call: Any) -> Any:
    """The SDK's invocation of a function tool: through the journal in a journaled run."""
    durable = _durable_run_of(getattr(call["context"], "run_config", None))
    if durable is None or not _is_journaled(call["function_tool"]):
        return await invoke(**call)
    return await durable.tool_invocation(lambda: invoke(**call), call["function_tool"], call["context"])


def _is_journaled(tool: Any) -> TypeGuard[FunctionTool]:
    # Function tools and the FunctionTools the SDK makes of MCP tools. Hosted tools are replayed
    # inside their model call's answer; shell and computer tools act on a machine the journal
    # cannot see. A needs_approval function is the SDK's to call, live on every try.
    return isinstance(tool, FunctionTool)


class DurableAgentRun:
    """
    The SDK side of one journaled ``Runner.run``: its run config carries a durable model provider,
    by which the run hooks (``_sdk_private.run_hooks``) find it to journal each model call
    and function-tool call. The user's agents and tools are never copied.
    """

    def __init__(self, run: DurableRun) -> None:
        self.run = run
        #: The run's lines in the task log as its steps complete (R-38).
        self.progress = run.progress = ProgressLog(log)
        self._models: dict[int, DurableModel] = {}
        # Tool steps of the latest model answer, claimed in the model's order, by call id.
        self._tool_steps: dict[str, JournalStep] = {}
        # The model step whose call raised: the SDK's own retry of it keeps its position.
        self._failed_model_step: JournalStep | None = None
        # The fingerprints and part digests of the run's model calls, each input item digested once.
        self._model_calls = ModelCalls()
        # The journaled tools of the latest answer by name, and the steps of its calls that ran.
        self.answer_tools: dict[str, FunctionTool] = {}
        self._answer_tool_steps: list[JournalStep] = []
        # The outputs a person gave for calls found in flight that they said happened, by step key.
        self._resolved_outputs: dict[str, str] = {}
        self.stops = RunStops()
        #: Calls left in flight where the run changed that happened, until a call asks the same or the run ends.
        self.verified_left_in_flight: VerifiedCalls = {}

    def model(self, model: Model) -> DurableModel:
        """The durable wrapper of ``model`` (the same one on every turn of the run)."""
        if (wrapper := self._models.get(id(model))) is None:
            wrapper = self._models[id(model)] = DurableModel(model, model_name_of(model), self)
        return wrapper

    def run_config(self, run_config: RunConfig | dict[str, Any] | None) -> RunConfig:
        """A copy of ``run_config`` whose model provider is durable: the mark of this run."""
        owned = run_config is None or (isinstance(run_config, dict) and "model_provider" not in run_config)
        if not isinstance(run_config, RunConfig):
            run_config = RunConfig(**(run_config or {}))
        provider = DurableModelProvider(run_config.model_provider, self, owned=owned)
        return dataclasses.replace(run_config, model_provider=provider)

    def _is_inside_a_call(self) -> bool:
        # A model called while one of this run's tools runs belongs to that tool's own agent run
        # (Agent.as_tool() passes its run config on): the tool is the one journaled call.
        step = running_step()
        return step is not None and step.run is self.run

    async def model_response(self, model: Model, name: str, call: dict[str, Any]) -> ModelResponse:
        self.stops.check()
        if self._is_inside_a_call():
            return await self._unjournaled_response(model, name, call)
        step = self._model_step(name, call)
        response = self._replayed_response(step) if step.replayed else None
        if response is None:
            self.progress.flush()  # the replayed steps before it, logged before its request is
            await resolve_left_in_flight(self.run, call["tools"], self.verified_left_in_flight)
            await after_earlier_writes(step)
            admission = await admitted_by_budget(self.run.journal, name, step.key, call, carried=True)
            try:
                response = await model.get_response(**call)
            except BaseException as error:
                self._failed_model_step = step
                settled(admission, self._used_by_failed_request(name, getattr(error, TERMINAL_USAGE, None)))
                step.attempt_failed(error)
                raise
            settled(admission, self._record_response(step, response))
        self._answered(step, response, call["tools"])
        return response

    async def _unjournaled_response(self, model: Model, name: str, call: dict[str, Any]) -> ModelResponse:
        """A model call inside one of this run's tool calls: not journaled, but counted in the usage and budget."""
        admission = await self._admitted_inside_a_call(name, call, carried=True)
        try:
            response = await model.get_response(**call)
        except BaseException as error:
            settled(admission, self._used_by_failed_request(name, getattr(error, TERMINAL_USAGE, None)))
            raise
        settled(admission, self._counted(name, response.usage))
        return response

    async def _admitted_inside_a_call(
        self, name: str, call: dict[str, Any], *, carried: bool
    ) -> BudgetAdmission | None:
        """The budget's word on a model request made inside the tool call running now (``admitted_by_budget``)."""
        parent = running_step()
        key = parent.key if parent is not None else ""
        return await admitted_by_budget(self.run.journal, name, key, call, carried=carried)

    def _counted(self, name: str, usage: Usage) -> ModelUsage:
        """What a model request used, counted in the try's usage where no live step counts it (``JournalStep.used``)."""
        used = usage_of(name, usage)
        self.run.journal.stats.count_used(name, used)
        return used

    async def streamed_response(self, model: Model, name: str, call: dict[str, Any]) -> AsyncIterator[Any]:
        """
        A streamed model call: a replayed one is its recorded answer as one ``response.completed``
        event (no deltas); a live one is recorded when its stream completes, before the event that
        completes it is passed on. A stream cut off before that is not recorded: it runs again.
        """
        self.stops.check(carried=False)
        if self._is_inside_a_call():
            async for event in self._unjournaled_stream(model, name, call):
                yield event
            return
        step = self._model_step(name, call)
        response = self._replayed_response(step) if step.replayed else None
        if response is not None:
            try:
                self._answered(step, response, call["tools"])
            except RunStopped as stopped:
                # A streamed run hands the user its loop's exception as it is: the error itself.
                raise stopped.error from None
            yield completed_event(response, name)
            return
        done_items: list[Any] = []
        await resolve_left_in_flight(self.run, call["tools"], self.verified_left_in_flight, streamed=True)
        await after_earlier_writes(step)
        # A streamed run hands the user its loop's exception as it is: a refusal is the error itself.
        admission = await admitted_by_budget(self.run.journal, name, step.key, call, carried=False)
        try:
            async for event in model.stream_response(**call):
                if isinstance(event, ResponseOutputItemDoneEvent):
                    done_items.append(event.item)
                elif isinstance(event, ResponseCompletedEvent):
                    # What the SDK's run loop makes of it: the streamed items if the event has none.
                    completed = event.response
                    response = ModelResponse(
                        output=list(completed.output or done_items),
                        usage=_usage_of_stream(completed.usage),
                        response_id=completed.id,
                    )
                    admission = self._settled_now(admission, self._record_response(step, response))
                    self._answered(step, response, call["tools"])
                elif getattr(event, "type", None) in FAILED_RESPONSE_EVENTS:
                    admission = self._settled_now(admission, self._used_by_failed_stream(name, event))
                yield event
        except Exception as error:
            self._failed_model_step = step
            step.attempt_failed(error)
            raise
        finally:
            settled(admission, None)

    async def _unjournaled_stream(self, model: Model, name: str, call: dict[str, Any]) -> AsyncIterator[Any]:
        """
        A streamed model call inside one of this run's tool calls (an agent run as a tool with
        ``on_stream`` streams its run): not journaled, but counted in the usage and budget.
        """
        admission = await self._admitted_inside_a_call(name, call, carried=False)
        try:
            async for event in model.stream_response(**call):
                if isinstance(event, ResponseCompletedEvent):
                    admission = self._settled_now(
                        admission, self._counted(name, _usage_of_stream(event.response.usage))
                    )
                elif getattr(event, "type", None) in FAILED_RESPONSE_EVENTS:
                    admission = self._settled_now(admission, self._used_by_failed_stream(name, event))
                yield event
        finally:
            settled(admission, None)

    @staticmethod
    def _settled_now(admission: BudgetAdmission | None, used: ModelUsage | None) -> None:
        """
        A stream's request is over at its last event: settled then, not once the caller lets go of
        the stream (an SDK before 0.24 stops reading at a failed answer and keeps the stream, and
        the budget would hold the next request until then). ``None``, the admission left to settle.
        """
        settled(admission, used)
        return None

    def _used_by_failed_stream(self, name: str, event: Any) -> ModelUsage | None:
        """What a stream that ended failed or incomplete used: the SDK raises on its event (0.25 on), and bills it."""
        usage = getattr(getattr(event, "response", None), "usage", None)
        return self._used_by_failed_request(name, _usage_of_stream(usage) if usage else None)

    def _used_by_failed_request(self, name: str, usage: Any) -> ModelUsage | None:
        """
        What a model request that failed used, where the SDK tells (an answer that came back
        failed or incomplete, openai-agents 0.25 on): counted in the try's usage, as the SDK counts
        it in the run's, and settled with the budget. ``None`` where it does not tell.
        """
        return self._counted(name, usage) if isinstance(usage, Usage) else None

    def _model_step(self, name: str, call: dict[str, Any]) -> JournalStep:
        fingerprinted, parts = self._model_calls.fingerprint_and_parts(request_of(name, call), what=f"model {name!r}")
        step = self._failed_model_step
        if step is None or step.fingerprint != fingerprinted or fingerprinted is None:
            step = self.run.claim("model", name, fingerprinted, parts=parts)
        self._failed_model_step = None
        return step

    @staticmethod
    def _record_response(step: JournalStep, response: ModelResponse) -> ModelUsage:
        used = step.used(usage_of(step.name, response.usage))
        try:
            recorded = recorded_response(response)
        except (ValueError, TypeError, RecursionError) as error:
            step.not_recordable(f"the answer cannot be stored as JSON: {type(error).__name__}")
        else:
            step.record(recorded)
        return used

    @staticmethod
    def _replayed_response(step: JournalStep) -> ModelResponse | None:
        """The recorded answer, reporting no usage (R-7), or ``None`` when it no longer loads."""
        recorded = with_no_usage(step.result)
        try:
            return RESPONSES.validate_python(recorded)
        except ValidationError as error:
            built = as_the_client_built_it(recorded)
            if built is None:
                step.refuse_replay(f"the recorded answer no longer loads: {error.error_count()} errors")
            return built

    def _answered(self, step: JournalStep, response: ModelResponse, tools: list[Any]) -> None:
        self.progress.step_done(step)
        self._claim_tool_calls(response, tools)

    def _claim_tool_calls(self, response: ModelResponse, tools: list[Any]) -> None:
        """Claim the journaled tool calls of an answer in the order the model listed them."""
        journaled = {tool.name for tool in tools if _is_journaled(tool)}
        calls = [
            item for item in response.output if isinstance(item, ResponseFunctionToolCall) and item.name in journaled
        ]
        # Two calls under one id cannot be told apart on the retry: they run live.
        repeated = {call_id for call_id, n in Counter(call.call_id for call in calls).items() if n > 1}
        self.answer_tools = {tool.name: tool for tool in tools if tool.name in journaled}
        self._answer_tool_steps = []
        self._tool_steps = {}
        for call in calls:
            if call.call_id in repeated:
                continue
            fingerprinted, parts = tool_call_fingerprint_and_parts(
                call.name, call.arguments, call.call_id, what=f"tool {call.name!r}"
            )
            # The SDK may not make a call it was asked for (it stops for an approval first).
            self._tool_steps[call.call_id] = self.run.claim(
                "tool", call.name, fingerprinted, parts=parts, counted_when_handed_out=True
            )
        for call in calls:
            step = self._tool_steps.get(call.call_id)
            if step is not None and step.interrupted:
                resolve_before_tools(step, self.answer_tools[call.name], call.arguments, self._resolved_outputs)

    async def tool_invocation(self, invoke: Callable[[], Awaitable[Any]], tool: FunctionTool, context: Any) -> Any:
        """The SDK's invocation of ``tool`` for one call: replayed, or run and recorded."""
        step = None if self._is_inside_a_call() else self._tool_steps.pop(context.tool_call_id, None)
        if step is None:
            return await invoke()
        self._answer_tool_steps.append(step)
        declared = declared_output_adapter(tool)
        if step.replayed:
            try:
                replayed = invocation_result(decode_tool_output(step.result, declared))
                restore_custom_data(context, step.result)
            except ValueError as error:
                step.refuse_replay(f"the recorded output no longer loads: {error}")
            else:
                step.handed_out()
                self.progress.step_done(step)
                return replayed
        self.progress.flush()
        policy = policy_of(tool)
        resolved = await output_without_running(step, policy, context, declared, self._resolved_outputs, self)
        if resolved is not None:
            return invocation_result(resolved.output)
        await marked_in_flight(step, policy.policy)
        with noting_failures() as failures, self.stops.noting() as stops, step.running():
            result, stopped = await invoked_to_its_end(invoke, tool, step.describe())
        if stopped:  # ran to its end; left in flight for the next try's policy, which now sees its effect
            raise asyncio.CancelledError
        if stops or failures or result.is_sdk_generated_error:
            step.fail("the try stopped in it" if stops else "the SDK passed the tool's failure to the model as text")
        elif nested_agent_run_was_interrupted(context):
            step.fail("the agent it runs as a tool stopped for an approval, so the call did not complete")
        else:
            try:
                step.record({**encode_tool_output(result.output, declared), **custom_data_to_record(context)})
            except ToolOutputNotRecordable as error:
                step.not_recordable(str(error))
        self.progress.step_done(step)
        return result

    def discard_tool_outputs(self, error: ToolOutputGuardrailTripwireTriggered) -> None:
        """
        After a tool's output tripped its guardrail, make the next try run that tool again: its
        recorded output would trip it the same way. The error does not say which call tripped, so
        every call of the latest answer to a tool with that guardrail runs again.
        """
        for step in self._answer_tool_steps:
            tool = self.answer_tools.get(step.name)
            if tool is not None and error.guardrail in (tool.tool_output_guardrails or []):
                step.discard(f"its output tripped the tool output guardrail {error.guardrail.get_name()!r}")

    async def continued_past_approvals(self, agent: Agent, result: RunResult, kwargs: dict[str, Any]) -> RunResult:
        """
        The run continued, as a continuation of this journaled run, past each stop for approvals
        that the approval desk of this task (``approvals.approval_desk``) has a decision for; the
        result as the SDK returned it at the first stop it has none for (or without a desk).
        """
        desk = approval_desk()
        while desk is not None and result.interruptions:
            items = result.interruptions
            decisions = desk.decide(self.run, [_approval_request(item) for item in items])
            if decisions is None:
                break
            state = result.to_state()
            for item, decision in zip(items, decisions, strict=True):
                if decision.approved:
                    state.approve(item)
                else:
                    state.reject(item)
            # The state carries the run's context and max_turns; the run config is this run's.
            resumed = {key: value for key, value in kwargs.items() if key not in ("context", "max_turns")}
            result = await Runner.run(agent, state, **resumed)
        return result

    def ended(self) -> None:
        """The run ended without an error: the calls left in flight it verified are resolved."""
        resolve_verified_as_the_run_ends(self.verified_left_in_flight, self.answer_tools)

    def discard_last_answer(self, error: BaseException) -> None:
        """After a failure caused by the model's answers, make the next try ask the model again."""
        if getattr(error, TOOL_FAILURE, False):
            return
        answers = [step for step in self.run.steps if step.kind == "model"]
        if answers:
            answers[-1].discard(f"the run failed with {type(error).__name__}, which a replay would repeat")


def _usage_of_stream(usage: Any) -> Usage:
    """The usage of a streamed answer's last event, as the SDK's run loop counts it."""
    if not usage:
        return Usage(requests=1)
    return Usage(
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
    )


def _approval_request(item: Any) -> ApprovalRequest:
    raw = item.raw_item
    arguments = raw.get("arguments") if isinstance(raw, dict) else getattr(raw, "arguments", None)
    call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return ApprovalRequest(
        agent=item.agent.name,
        tool=str(item.tool_name or type(raw).__name__),
        arguments=arguments if isinstance(arguments, str) else repr(arguments),
        call_id=str(call_id),
    )


#: The SDK functions a journaled run replaces, in place only while one runs (see ``_run.journaled``).
SDK_HOOKS = SDKHooks(lambda: [*run_hooks(_resolved_model, _invoked_tool, note_failure), *mcp_hooks(note_failure)])
# An SDK whose runs the adapter cannot journal is refused when the adapter is imported, not at a run.
check_installed_sdk()
