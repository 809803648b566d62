"""
The model of a journaled run: a wrapper of the agent's model whose calls go through the run's
journal, the provider that marks the run, and how a model call is described for its fingerprint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agents import (
    AgentOutputSchemaBase,
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    OpenAIConversationsSession,
    Tool,
    TResponseInputItem,
)
from agents.items import TResponseStreamEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponsePromptParam,
)
from pydantic import BaseModel, TypeAdapter, ValidationError

from airflow.providers.common.ai.durable.openai_agents._sdk_private import (
    CLEANUP_ON_RUN_END,
    unvalidated_output_item,
)

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.openai_agents._agent_run import DurableAgentRun

#: Options that keep the conversation on the provider's servers, which a replayed call never reaches.
SERVER_SIDE_CONVERSATION_OPTIONS = ("previous_response_id", "conversation_id", "auto_previous_response_id")


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
RESPONSES = TypeAdapter(ModelResponse)
#: The fields of a model answer an entry leaves out when they are empty (format 8).
_LEFT_OUT_WHEN_EMPTY = ("request_id", "raw_usage")


def recorded_response(response: ModelResponse) -> dict[str, Any]:
    """
    A model answer as its entry stores it (format 8): without its usage, which a replay reports as
    none (R-7) and the entry's ``meta`` counts, and without the optional fields it left empty.
    """
    recorded = RESPONSES.dump_python(response, mode="json", by_alias=True, exclude_unset=True)
    recorded.pop("usage", None)
    for field in _LEFT_OUT_WHEN_EMPTY:
        if field in recorded and recorded[field] is None:
            del recorded[field]
    return recorded


def with_no_usage(recorded: Any) -> Any:
    """A recorded answer (of any format) reporting no usage: no request was made (R-7)."""
    return {**recorded, "usage": {}} if isinstance(recorded, dict) else recorded


def refuse_server_side_conversation(kwargs: dict[str, Any]) -> None:
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


def model_name_of(model: Model) -> str:
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


def request_of(name: str, call: dict[str, Any]) -> dict[str, Any]:
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


def as_the_client_built_it(recorded: Any) -> ModelResponse | None:
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
        rest = RESPONSES.validate_python({**recorded, "output": []})
    except ValidationError:
        return None
    return dataclasses.replace(rest, output=items)


def completed_event(response: ModelResponse, model_name: str) -> ResponseCompletedEvent:
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


class DurableModel(Model):
    """A model of a durable run: each call goes through the run's journal."""

    def __init__(self, wrapped: Model, name: str, durable: DurableAgentRun) -> None:
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

    # From 0.25 the run loop asks the model for its default settings and for the settings of each
    # request: the wrapped model answers, so that a durable run sends what a plain run does (the
    # base class's answers would drop an OpenAI model's own, and send a "reasoning" twice when the
    # settings' extra_args hold one). Not called before 0.25, where Model has neither.
    def get_default_model_settings(self) -> Any:
        wrapped: Any = self.wrapped
        return wrapped.get_default_model_settings()

    def _get_request_settings(self, settings: ModelSettings, **kwargs: Any) -> Any:
        wrapped: Any = self.wrapped
        return wrapped._get_request_settings(settings, **kwargs)

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


class DurableModelProvider(ModelProvider):
    """The model provider of a journaled run: resolves names as the wrapped one does, and marks the run."""

    def __init__(self, wrapped: ModelProvider, durable: DurableAgentRun, *, owned: bool) -> None:
        self.wrapped = wrapped
        self.durable = durable
        #: The SDK would have created the wrapped provider, and closed it after the run: _run does.
        self.owned = owned

    def __deepcopy__(self, memo: dict[int, Any]) -> DurableModelProvider:
        # Run machinery, not data: a copied result or run state shares it (it reaches the journal's lock).
        return self

    def get_model(self, model_name: str | None) -> Model:
        # Not wrapped here: every model a turn resolves, by name or not, is wrapped by the run hook.
        return self.wrapped.get_model(model_name)
