"""
OpenAI Agents SDK runs, journaled: :func:`run_durably` and :func:`run_durably_sync`.

They take the arguments of ``Runner.run`` and ``Runner.run_sync``. Inside a running Airflow task
every model call and every function-tool call of the run is recorded in the task instance's
journal when it completes; on a retry the calls the failed try completed return their recorded
results, and only the rest reach the model or run. This is the only module that knows the SDK.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import logging
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeGuard

from pydantic import BaseModel, TypeAdapter, ValidationError

from airflow.providers.common.ai.durable._mcp import custom_data_to_record, install_mcp_hooks, restore_custom_data
from airflow.providers.common.ai.durable._sdk_private import (
    CLEANUP_ON_RUN_END,
    close_runner_owned_model_provider,
    declared_output_adapter,
    ensure_model_provider_cleanup,
    install_run_hooks,
    invocation_result,
    nested_agent_run_was_interrupted,
    raised_checking_arguments,
    unvalidated_output_item,
)
from airflow.providers.common.ai.durable._tool_output import (
    ToolOutputNotRecordable,
    decode_tool_output,
    encode_tool_output,
)
from airflow.providers.common.ai.durable.core.approvals import ApprovalRequest, approval_desk
from airflow.providers.common.ai.durable.core.divergence import ModelCalls, tool_call_parts
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.scope import current_journal, running_step
from airflow.providers.common.ai.durable.core.steps import JournalStep

try:
    from agents import (
        Agent,
        AgentOutputSchemaBase,
        FunctionTool,
        Handoff,
        MaxTurnsExceeded,
        Model,
        ModelBehaviorError,
        ModelProvider,
        ModelRefusalError,
        ModelResponse,
        ModelSettings,
        ModelTracing,
        OpenAIConversationsSession,
        OutputGuardrailTripwireTriggered,
        RunConfig,
        Runner,
        RunResult,
        RunResultStreaming,
        Session,
        Tool,
        ToolInputGuardrailTripwireTriggered,
        ToolOutputGuardrailTripwireTriggered,
        TResponseInputItem,
        Usage,
    )
    from agents.items import TResponseStreamEvent
    from agents.run import AgentRunner
    from agents.run_state import RunState
    from agents.tracing import custom_span
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputItemDoneEvent,
        ResponsePromptParam,
    )
except ImportError as error:  # pragma: no cover - openai-agents is a dependency
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(
        "Durable agent runs need the OpenAI Agents SDK: pip install openai-agents"
    ) from error

log = logging.getLogger(__name__)

#: Options that keep the conversation on the provider's servers, which a replayed call never reaches.
SERVER_SIDE_CONVERSATION_OPTIONS = ("previous_response_id", "conversation_id", "auto_previous_response_id")

# Failures caused by the model's answers: replaying those answers would fail the same way.
_ANSWER_FAILURES = (
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    OutputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
)

# ModelSettings fields that change how a request travels, not what the model answers.
_TRANSPORT_SETTINGS = frozenset(
    {
        "timeout",
        "retry",
        "extra_headers",
        "extra_query",
        "preserve_raw_usage",
        "prompt_cache_retention",
        "prompt_cache_options",
    }
)
_RESPONSES = TypeAdapter(ModelResponse)
_TOOL_FAILURE = "_airflow_durable_tool_failure"

# The exceptions a tool's failure policy turned into text for the model, while that tool call runs.
_handled_failures: contextvars.ContextVar[list[BaseException] | None] = contextvars.ContextVar(
    "durable_handled_failures", default=None
)


def _note_failure(error: BaseException) -> None:
    if (failures := _handled_failures.get()) is not None:
        failures.append(error)


def current_idempotency_key() -> str:
    """
    The idempotency key of the function-tool or MCP tool call running now: the same string on
    every try of the task instance for the same call, so a tool with side effects can recognise
    a repeat.

    Raises ``RuntimeError`` outside a function-tool or MCP tool call of a durable run.
    """
    step = running_step()
    if step is None:
        raise RuntimeError(
            "current_idempotency_key() only works inside a function-tool or MCP tool call of a durable run "
            "(run_durably, run_durably_sync or AgentOperator(durable=True)) in an Airflow task"
        )
    return step.idempotency_key


def _refuse_server_side_conversation(kwargs: dict[str, Any]) -> None:
    for option in SERVER_SIDE_CONVERSATION_OPTIONS:
        if kwargs.get(option):
            raise ValueError(
                f"run_durably cannot use {option}: the conversation would live on the provider's "
                "servers, which a replayed call never reaches; pass the conversation as input instead"
            )
    if isinstance(kwargs.get("session"), OpenAIConversationsSession):
        raise ValueError(
            "run_durably cannot use an OpenAIConversationsSession: the conversation would live on the "
            "provider's servers, which a replayed call never reaches; use a session kept locally "
            "(SQLiteSession, SQLAlchemySession, ...) instead"
        )


def _model_name(model: Model) -> str:
    return str(getattr(model, "model", None) or type(model).__name__)


def _answer_settings(settings: Any) -> dict[str, Any]:
    """The model settings that shape the answer: transport fields and the SDK's cache key left out."""
    rendered = {
        field.name: value
        for field in dataclasses.fields(settings)
        if field.name not in _TRANSPORT_SETTINGS and (value := getattr(settings, field.name)) is not None
    }
    extra_args = {k: v for k, v in (rendered.pop("extra_args", None) or {}).items() if k != "prompt_cache_key"}
    return {**rendered, "extra_args": extra_args} if extra_args else rendered


def _describe_tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, FunctionTool):
        return {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.params_json_schema,
            "strict": tool.strict_json_schema,
        }
    return {"type": type(tool).__name__, "name": getattr(tool, "name", None)}


def _describe_output_schema(schema: Any) -> dict[str, Any] | None:
    if schema is None or schema.is_plain_text():
        return None
    return {"name": schema.name(), "schema": schema.json_schema(), "strict": schema.is_strict_json_schema()}


def _request(name: str, call: dict[str, Any]) -> dict[str, Any]:
    """What a model call asks, as its fingerprint sees it."""
    return {
        "model": name,
        "instructions": call["system_instructions"],
        "input": call["input"],
        "settings": _answer_settings(call["model_settings"]),
        "tools": [_describe_tool(tool) for tool in call["tools"]],
        "output_schema": _describe_output_schema(call["output_schema"]),
        "handoffs": [
            {"name": h.tool_name, "description": h.tool_description, "schema": h.input_json_schema}
            for h in call["handoffs"]
        ],
        "prompt": call["prompt"],
    }


def _as_the_client_built_it(recorded: Any) -> ModelResponse | None:
    """
    A recorded answer whose output items do not validate only because fields are missing or null, loaded
    as the ``openai`` client loaded it: without validation (it builds answers so, and the SDK used
    this one as it was). An item that no longer fits its type in any other way: ``None``.
    """
    output = recorded.get("output") if isinstance(recorded, dict) else None
    if not isinstance(output, list) or not all(isinstance(item, dict) for item in output):
        return None
    items: list[Any] = []
    for item in output:
        built = unvalidated_output_item(item)
        if not isinstance(built, BaseModel):
            return None
        try:
            items.append(type(built).model_validate(item))
        except ValidationError as error:
            if any(detail["type"] != "missing" and detail["input"] is not None for detail in error.errors()):
                return None
            items.append(built)
    try:
        rest = _RESPONSES.validate_python({**recorded, "output": []})
    except ValidationError:
        return None
    return dataclasses.replace(rest, output=items)


def _completed_event(response: ModelResponse, model_name: str) -> ResponseCompletedEvent:
    """The ``response.completed`` event of a replayed answer: its items, and no usage (no request was made)."""
    completed = Response.model_construct(
        id=response.response_id or "replayed",
        created_at=0,
        model=model_name,
        object="response",
        output=response.output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        status="completed",
        usage=None,
    )
    return ResponseCompletedEvent.model_construct(type="response.completed", response=completed, sequence_number=0)


def _arguments(local_names: dict[str, Any]) -> dict[str, Any]:
    """A model call's arguments by name, from the ``locals()`` of the method that took them."""
    return {name: value for name, value in local_names.items() if name != "self"}


class _DurableModel(Model):
    """A model of a durable run: each call goes through the run's journal."""

    def __init__(self, wrapped: Model, name: str, durable: _DurableAgentRun) -> None:
        self.wrapped = wrapped
        self.name = name
        self.durable = durable

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        return await self.durable.model_response(self.wrapped, self.name, _arguments(locals()))

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        async for event in self.durable.streamed_response(self.wrapped, self.name, _arguments(locals())):
            yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self.wrapped.get_retry_advice(request)

    async def close(self) -> None:
        await self.wrapped.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await getattr(self.wrapped, CLEANUP_ON_RUN_END)(owner)

    def __getattr__(self, name: str) -> Any:
        # The SDK reads optional private flags of a model (SUPPORTS_DEFAULT_PROMPT_CACHE_KEY). Not
        # for dunders, nor before __init__ ran (copy.deepcopy asks before "wrapped" is set).
        if name.startswith("__") or "wrapped" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.wrapped, name)


class _DurableModelProvider(ModelProvider):
    """The model provider of a journaled run: resolves names as the wrapped one does, and marks the run."""

    def __init__(self, wrapped: ModelProvider, durable: _DurableAgentRun, *, owned: bool) -> None:
        self.wrapped = wrapped
        self.durable = durable
        #: The SDK would have created the wrapped provider, and closed it after the run: _run does.
        self.owned = owned

    def __deepcopy__(self, memo: dict[int, Any]) -> _DurableModelProvider:
        # Run machinery, not data: a copied result or run state shares it (it reaches the journal's lock).
        return self

    def get_model(self, model_name: str | None) -> Model:
        # Not wrapped here: every model a turn resolves, by name or not, is wrapped by the run hook.
        return self.wrapped.get_model(model_name)


async def _after_earlier_writes(step: JournalStep) -> None:
    """
    Wait, off the event loop, until every entry written so far is in the store: the request about
    to be sent may carry a tool's result, and a try killed once it is sent must not run that tool again.
    """
    journal = step.run.journal
    if journal.has_pending_writes():
        await asyncio.to_thread(journal.settle)


def _progress(step: JournalStep) -> None:
    # Each step as it completes, so that a long agent's task log shows how far it got.
    if step.failure is not None:
        log.info("Durable: %s ran live and failed, so it runs again next try reason=%r", step.describe(), step.failure)
    else:
        log.info("Durable: %s %s", step.describe(), "replayed" if step.replayed else "ran live")


def _durable_run_of(run_config: Any) -> _DurableAgentRun | None:
    provider = getattr(run_config, "model_provider", None)
    return provider.durable if isinstance(provider, _DurableModelProvider) else None


def _resolved_model(model: Model, run_config: Any) -> Model:
    """The model the SDK resolved for a turn: the durable one in a journaled run."""
    durable = _durable_run_of(run_config)
    return durable.model(model) if durable is not None and not isinstance(model, _DurableModel) else model


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


class _DurableAgentRun:
    """
    The SDK side of one journaled ``Runner.run``: its run config carries a durable model provider,
    by which the run hooks (``_sdk_private.install_run_hooks``) find it to journal each model call
    and function-tool call. The user's agents and tools are never copied.
    """

    def __init__(self, run: DurableRun) -> None:
        self.run = run
        self._models: dict[int, _DurableModel] = {}
        # Tool steps of the latest model answer, claimed in the model's order, by call id.
        self._tool_steps: dict[str, JournalStep] = {}
        # The model step whose call raised: the SDK's own retry of it keeps its position.
        self._failed_model_step: JournalStep | None = None
        # The fingerprints and part digests of the run's model calls, each input item digested once.
        self._model_calls = ModelCalls()
        # The journaled tools of the latest answer by name, and the steps of its calls that ran.
        self._answer_tools: dict[str, FunctionTool] = {}
        self._answer_tool_steps: list[JournalStep] = []

    def model(self, model: Model) -> _DurableModel:
        """The durable wrapper of ``model`` (the same one on every turn of the run)."""
        if (wrapper := self._models.get(id(model))) is None:
            wrapper = self._models[id(model)] = _DurableModel(model, _model_name(model), self)
        return wrapper

    def run_config(self, run_config: RunConfig | dict[str, Any] | None) -> RunConfig:
        """A copy of ``run_config`` whose model provider is durable: the mark of this run."""
        owned = run_config is None or (isinstance(run_config, dict) and "model_provider" not in run_config)
        if not isinstance(run_config, RunConfig):
            run_config = RunConfig(**(run_config or {}))
        provider = _DurableModelProvider(run_config.model_provider, self, owned=owned)
        return dataclasses.replace(run_config, model_provider=provider)

    def _is_inside_a_call(self) -> bool:
        # A model called while one of this run's tools runs belongs to that tool's own agent run
        # (Agent.as_tool() passes its run config on): the tool is the one journaled call.
        step = running_step()
        return step is not None and step.run is self.run

    async def model_response(self, model: Model, name: str, call: dict[str, Any]) -> ModelResponse:
        if self._is_inside_a_call():
            return await model.get_response(**call)
        step = self._model_step(name, call)
        response = self._replayed_response(step) if step.replayed else None
        if response is None:
            await _after_earlier_writes(step)
            try:
                response = await model.get_response(**call)
            except BaseException:
                self._failed_model_step = step
                raise
            self._record_response(step, response)
        self._answered(step, response, call["tools"])
        return response

    async def streamed_response(self, model: Model, name: str, call: dict[str, Any]) -> AsyncIterator[Any]:
        """
        A streamed model call: a replayed one is its recorded answer as one ``response.completed``
        event (no deltas); a live one is recorded when its stream completes, before the event that
        completes it is passed on. A stream cut off before that is not recorded: it runs again.
        """
        if self._is_inside_a_call():
            async for event in model.stream_response(**call):
                yield event
            return
        step = self._model_step(name, call)
        response = self._replayed_response(step) if step.replayed else None
        if response is not None:
            self._answered(step, response, call["tools"])
            yield _completed_event(response, name)
            return
        done_items: list[Any] = []
        await _after_earlier_writes(step)
        try:
            async for event in model.stream_response(**call):
                if isinstance(event, ResponseOutputItemDoneEvent):
                    done_items.append(event.item)
                elif isinstance(event, ResponseCompletedEvent):
                    # What the SDK's run loop makes of it: the streamed items if the event has none.
                    completed = event.response
                    usage = completed.usage
                    response = ModelResponse(
                        output=list(completed.output or done_items),
                        usage=Usage(
                            requests=1,
                            input_tokens=usage.input_tokens,
                            output_tokens=usage.output_tokens,
                            total_tokens=usage.total_tokens,
                        )
                        if usage
                        else Usage(requests=1),
                        response_id=completed.id,
                    )
                    self._record_response(step, response)
                    self._answered(step, response, call["tools"])
                yield event
        except Exception:
            self._failed_model_step = step
            raise

    def _model_step(self, name: str, call: dict[str, Any]) -> JournalStep:
        fingerprinted, parts = self._model_calls.fingerprint_and_parts(_request(name, call), what=f"model {name!r}")
        step = self._failed_model_step
        if step is None or step.fingerprint != fingerprinted or fingerprinted is None:
            step = self.run.claim("model", name, fingerprinted, parts=parts)
        self._failed_model_step = None
        return step

    @staticmethod
    def _record_response(step: JournalStep, response: ModelResponse) -> None:
        usage = response.usage
        step.used(
            requests=usage.requests,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
        )
        try:
            recorded = _RESPONSES.dump_python(response, mode="json", by_alias=True, exclude_unset=True)
        except (ValueError, TypeError, RecursionError) as error:
            step.not_recordable(f"the answer cannot be stored as JSON: {type(error).__name__}")
        else:
            step.record(recorded)

    @staticmethod
    def _replayed_response(step: JournalStep) -> ModelResponse | None:
        recorded: ModelResponse | None
        try:
            recorded = _RESPONSES.validate_python(step.result)
        except ValidationError as error:
            recorded = _as_the_client_built_it(step.result)
            if recorded is None:
                step.refuse_replay(f"the recorded answer no longer loads: {error.error_count()} errors")
                return None
        return dataclasses.replace(recorded, usage=Usage())

    def _answered(self, step: JournalStep, response: ModelResponse, tools: list[Any]) -> None:
        _progress(step)
        self._claim_tool_calls(response, tools)

    def _claim_tool_calls(self, response: ModelResponse, tools: list[Any]) -> None:
        """Claim the journaled tool calls of an answer in the order the model listed them."""
        journaled = {tool.name for tool in tools if _is_journaled(tool)}
        calls = [
            item for item in response.output if isinstance(item, ResponseFunctionToolCall) and item.name in journaled
        ]
        # Two calls under one id cannot be told apart on the retry: they run live.
        repeated = {call_id for call_id, n in Counter(call.call_id for call in calls).items() if n > 1}
        self._answer_tools = {tool.name: tool for tool in tools if tool.name in journaled}
        self._answer_tool_steps = []
        self._tool_steps = {
            call.call_id: self.run.claim(
                "tool",
                call.name,
                fingerprint(
                    {"name": call.name, "arguments": call.arguments, "call_id": call.call_id},
                    what=f"tool {call.name!r}",
                ),
                parts=tool_call_parts(call.name, call.arguments, call.call_id),
                # The SDK may not make a call it was asked for (it stops for an approval first).
                counted_when_handed_out=True,
            )
            for call in calls
            if call.call_id not in repeated
        }

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
                _progress(step)
                return replayed
        failures: list[BaseException] = []
        token = _handled_failures.set(failures)
        try:
            with step.running(mark_in_flight=True):
                result = await invoke()
        except ModelBehaviorError as error:
            # Raised by the tool's own code, it is the tool's failure: the answer that asked for it
            # still replays. Raised checking the answer's arguments, it is the model's.
            if not raised_checking_arguments(error):
                setattr(error, _TOOL_FAILURE, True)
            raise
        finally:
            _handled_failures.reset(token)
        if failures or result.is_sdk_generated_error:
            step.fail("the SDK passed the tool's failure to the model as text")
        elif nested_agent_run_was_interrupted(context):
            step.fail("the agent it runs as a tool stopped for an approval, so the call did not complete")
        else:
            try:
                step.record({**encode_tool_output(result.output, declared), **custom_data_to_record(context)})
            except ToolOutputNotRecordable as error:
                step.not_recordable(str(error))
        _progress(step)
        return result

    def discard_tool_outputs(self, error: ToolOutputGuardrailTripwireTriggered) -> None:
        """
        After a tool's output tripped its guardrail, make the next try run that tool again: its
        recorded output would trip it the same way. The error does not say which call tripped, so
        every call of the latest answer to a tool with that guardrail runs again.
        """
        for step in self._answer_tool_steps:
            tool = self._answer_tools.get(step.name)
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

    def discard_last_answer(self, error: BaseException) -> None:
        """After a failure caused by the model's answers, make the next try ask the model again."""
        if getattr(error, _TOOL_FAILURE, False):
            return
        answers = [step for step in self.run.steps if step.kind == "model"]
        if answers:
            answers[-1].discard(f"the run failed with {type(error).__name__}, which a replay would repeat")


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


install_run_hooks(_resolved_model, _invoked_tool, _note_failure)
install_mcp_hooks(_note_failure)


@contextlib.contextmanager
def _journaled(
    journal: DurableJournal | None, durable_key: str | None, kwargs: dict[str, Any], input: Any
) -> Iterator[tuple[dict[str, Any], _DurableAgentRun | None]]:
    """The ``Runner.run`` arguments to run, and the journaled run: durable inside a task, the user's outside."""
    if journal is None:
        yield kwargs, None
        return
    _refuse_server_side_conversation(kwargs)
    if isinstance(input, RunState):
        log.warning(
            "Durable: this run is not journaled and runs live on every try: a resumed RunState carries its own history"
        )
        yield kwargs, None
        return
    with journal.run(key=durable_key) as run:
        durable = _DurableAgentRun(run)
        try:
            yield {**kwargs, "run_config": durable.run_config(kwargs.get("run_config"))}, durable
        except _ANSWER_FAILURES as error:
            durable.discard_last_answer(error)
            raise
        except ToolOutputGuardrailTripwireTriggered as error:
            durable.discard_tool_outputs(error)
            raise


#: As many session items as a session can hold: the whole history, whatever its settings' limit.
_ALL_ITEMS = 2**62


async def _rewind_session(session: Session, run: DurableRun, input: Any, run_config: RunConfig) -> None:
    """
    Put ``session`` back to what the first try of this run found (R-35), so that the SDK adds the
    input once and the model calls ask what they asked then. The first try records how many items
    the session held and their digest; a retry removes the items added after those, unless the
    earlier items changed since (another writer): then it leaves the session alone and the run
    goes live, warning why. With the run's tracing disabled, the session's own spans are too.
    """
    with custom_span("durable session", disabled=True) if run_config.tracing_disabled else contextlib.nullcontext():
        await _put_back(session, run, input)


async def _put_back(session: Session, run: DurableRun, input: Any) -> None:
    items = await session.get_items(limit=_ALL_ITEMS)
    found = {"items": len(items), "digest": fingerprint(items, what="the session's items")}
    step = run.claim(
        "session",
        type(session).__name__,
        fingerprint({"session_id": session.session_id, "input": input}, what="the session's run"),
    )
    if step.replayed:
        recorded = step.result if isinstance(step.result, dict) else {}
        held = recorded.get("items")
        added = len(items) - held if isinstance(held, int) and 0 <= held <= len(items) else None
        digest = fingerprint(items[: len(items) - added], what="the session's items") if added is not None else None
        if added is None or digest is None or digest != recorded.get("digest"):
            step.refuse_replay(
                "the session's items before this run changed since the failed try (another writer?): "
                "the session is left as it is, so it may hold the failed try's items as well"
            )
        else:
            for _ in range(added):
                await session.pop_item()
            if added:
                log.info("Durable: removed the %d items the failed try added to the session", added)
            return
    step.record(found)


async def _run(
    journal: DurableJournal | None, durable_key: str | None, agent: Agent, input: Any, kwargs: dict[str, Any]
) -> RunResult:
    with _journaled(journal, durable_key, kwargs, input) as (kwargs, durable):
        provider = getattr(kwargs.get("run_config"), "model_provider", None)
        if durable is not None and (session := kwargs.get("session")) is not None:
            await _rewind_session(session, durable.run, input, kwargs["run_config"])
        try:
            result = await Runner.run(agent, input, **kwargs)
            if durable is not None:
                result = await durable.continued_past_approvals(agent, result, kwargs)
        finally:
            if isinstance(provider, _DurableModelProvider) and provider.owned:
                # The SDK would have created and closed this provider itself: closed as it does.
                await close_runner_owned_model_provider(provider.wrapped)
    parent = running_step()
    if journal is not None and result.interruptions and parent is not None and parent.run.journal is journal:
        parent.keep_live("a run it started stopped for an approval, so the call did not complete")
    return result


def _checked(durable_key: Any) -> str | None:
    if durable_key is not None and (not isinstance(durable_key, str) or not durable_key.strip()):
        raise ValueError(
            f"durable_key must be a non-empty string that names this run on every try, not {durable_key!r}"
        )
    return durable_key


async def run_durably(agent: Agent, input: Any, *, durable_key: str | None = None, **kwargs: Any) -> RunResult:
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
    """
    durable_key = _checked(durable_key)
    # Bound off the event loop: a storage's set-up may run an event loop of its own (s3fs does).
    journal = await asyncio.to_thread(current_journal)
    return await _run(journal, durable_key, agent, input, kwargs)


class _DurableRunner(AgentRunner):
    """The SDK's runner, whose ``run_sync`` drives the journaled run: its loop, cancellation and errors."""

    def __init__(self, journal: DurableJournal | None, durable_key: str | None) -> None:
        self.journal = journal
        self.durable_key = durable_key

    async def run(self, starting_agent: Agent, input: Any, **kwargs: Any) -> RunResult:
        return await _run(self.journal, self.durable_key, starting_agent, input, kwargs)


def run_durably_sync(agent: Agent, input: Any, *, durable_key: str | None = None, **kwargs: Any) -> RunResult:
    """:func:`run_durably` for synchronous code, as ``Runner.run_sync`` is to ``Runner.run``."""
    durable_key = _checked(durable_key)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # Bound before the loop runs: a storage's set-up may run an event loop of its own (s3fs does).
        journal = current_journal()
    else:
        journal = None  # run_sync refuses to run inside a running event loop, with the SDK's own error
    if journal is None:
        return Runner.run_sync(agent, input, **kwargs)
    return _DurableRunner(journal, durable_key).run_sync(agent, input, **kwargs)


def _off_the_loop(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a thread of its own, in this context: the running event loop must not run it."""
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(context.run, function, *args).result()


def run_durably_streamed(
    agent: Agent, input: Any, *, durable_key: str | None = None, **kwargs: Any
) -> RunResultStreaming:
    """
    ``Runner.run_streamed(agent, input, **kwargs)``, journaled as :func:`run_durably` is.

    Each model call is recorded when its stream completes. On a retry a replayed call passes on
    its recorded answer as one ``response.completed`` event: ``stream_events()`` yields the same
    run-item events (messages, tool calls, tool outputs, handoffs), but not the raw token deltas of
    replayed calls. A stream cut off mid-call was never recorded, and runs again.
    """
    durable_key = _checked(durable_key)
    # Bound, and a session put back, off the event loop: a storage's set-up may run an event loop
    # of its own (s3fs does), and the run must not start before the session is back.
    journal = _off_the_loop(current_journal)
    if journal is None:
        return Runner.run_streamed(agent, input, **kwargs)
    run = contextlib.ExitStack()
    try:
        kwargs, durable = run.enter_context(_journaled(journal, durable_key, kwargs, input))
        if durable is not None and (session := kwargs.get("session")) is not None:
            _off_the_loop(asyncio.run, _rewind_session(session, durable.run, input, kwargs["run_config"]))
        result = Runner.run_streamed(agent, input, **kwargs)
    except BaseException:
        run.__exit__(*sys.exc_info())  # _journaled records what the error means; it never swallows it
        raise
    provider = getattr(kwargs.get("run_config"), "model_provider", None)
    if isinstance(provider, _DurableModelProvider) and provider.owned:
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
