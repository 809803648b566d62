"""
What a Pydantic AI model request asks, as its fingerprint sees it, its answer as the journal
stores it and as a replay hands it back, and what each tool call of the answer asks: what every
try builds anew (timestamps, run and conversation ids, the usage a replayed answer reports) is
left out, so a retry that asks the same matches.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.usage import RequestUsage
from pydantic_core import PydanticSerializationError, to_jsonable_python

from airflow.providers.common.ai.durable.core.usage import ModelUsage

#: Fields of a request part that a new try sets anew: never part of what the call asks.
_PART_FIELDS_OF_THE_TRY = frozenset({"timestamp"})
#: Model settings that change how a request travels, not what the model answers.
_TRANSPORT_SETTINGS = frozenset({"timeout", "extra_headers"})
# Fields that never reach the model are left out by name, not the fields it sees kept: the
# fingerprints of journals already written hold every other field. Those a Pydantic AI release
# added after 2.68 (a UI adapter's ``ui_visibility``, a durable engine's ``durable``) are left out
# too, so that a journal written before an upgrade of Pydantic AI replays after it.
#: Fields of a history message's part that never reach the model.
_PART_FIELDS_NOT_SENT = frozenset({"ui_visibility"})
#: Fields of a tool definition that never reach the model.
_TOOL_FIELDS_NOT_SENT = frozenset({"metadata", "toolset_id", "ui_visibility", "durable"})


class NotDescribable(ValueError):
    """A request holds a value with no JSON form the same in every process: it runs live."""


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """A history message as the model sees it: a request's parts, a response's parts."""
    if message.get("kind") == "request":
        left_out = _PART_FIELDS_OF_THE_TRY | _PART_FIELDS_NOT_SENT
        parts = [
            {name: value for name, value in part.items() if name not in left_out} for part in message.get("parts") or []
        ]
        # Only the latest request's instructions are sent: they are a part of their own.
        return {"kind": "request", "parts": parts}
    # A response in the history replayed or was recorded as it is: its parts are stable, its usage is not.
    answered = message.get("parts")
    if answered is not None:
        answered = [
            {name: value for name, value in part.items() if name not in _PART_FIELDS_NOT_SENT} for part in answered
        ]
    return {"kind": "response", "parts": answered}


def _tool(definition: Any) -> dict[str, Any]:
    described = to_jsonable_python(definition)
    return {name: value for name, value in described.items() if name not in _TOOL_FIELDS_NOT_SENT}


def described_request(
    model: str, messages: list[ModelMessage], settings: Any, parameters: ModelRequestParameters
) -> dict[str, Any]:
    """What a model request asks: the model, each message of the history, the settings, the tools, the output."""
    try:
        history = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        answer_settings = {
            name: value for name, value in dict(settings or {}).items() if name not in _TRANSPORT_SETTINGS
        }
        requests = [message for message in history if message.get("kind") == "request"]
        return {
            "model": model,
            "instructions": requests[-1].get("instructions") if requests else None,
            "input": [_message(message) for message in history],
            "settings": to_jsonable_python(answer_settings),
            "tools": [_tool(tool) for tool in parameters.function_tools],
            "output_schema": {
                "mode": parameters.output_mode,
                "tools": [_tool(tool) for tool in parameters.output_tools],
                "object": to_jsonable_python(parameters.output_object),
                "allow_text": parameters.allow_text_output,
                "allow_image": parameters.allow_image_output,
                "template": parameters.prompted_output_template,
            },
            "thinking": to_jsonable_python(parameters.thinking),
            "native_tools": [to_jsonable_python(tool) for tool in parameters.native_tools],
        }
    except (PydanticSerializationError, TypeError, ValueError) as error:
        raise NotDescribable(f"{type(error).__name__}: {error}") from error


def call_arguments(call: ToolCallPart) -> str:
    """The arguments of a tool call an answer asks for, as the model wrote them (JSON text)."""
    return call.args if isinstance(call.args, str) else call.args_as_json_str()


def asked_by(call: ToolCallPart) -> dict[str, Any]:
    """What a tool call an answer asks for asks, as its step's fingerprint sees it."""
    return {"name": call.tool_name, "arguments": call_arguments(call), "call_id": call.tool_call_id}


#: What the journal stores for an answer's ``history_digest``, which a replay takes anew.
HISTORY_DIGEST_TAKEN_ON_REPLAY = "taken anew on replay"


def recorded_answer(response: ModelResponse) -> Any:
    """
    A model answer as the journal stores it (JSON; format 8): without its usage, which a replay
    reports as none (R-7) and the entry's ``meta`` counts, and without its ``history_digest``, an
    unkeyed hash of the history before it that a secret in that history would be guessed against
    offline, as no stored hash may be (``core/fingerprint.py``): :func:`continued_from_this_history`
    takes it anew.
    """
    recorded = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    recorded.pop("usage", None)
    if recorded.get("history_digest") is not None:
        recorded["history_digest"] = HISTORY_DIGEST_TAKEN_ON_REPLAY
    return recorded


def replayed_answer(recorded: Any) -> ModelResponse | None:
    """A recorded answer, reporting no usage (no request was made); ``None`` if it no longer loads."""
    try:
        [loaded] = ModelMessagesTypeAdapter.validate_python([recorded])
    except (ValidationError, ValueError):
        return None
    if not isinstance(loaded, ModelResponse):
        return None
    return dataclasses.replace(loaded, usage=RequestUsage())


def history_digests() -> tuple[Any, Any] | None:
    """
    Pydantic AI's ``continuation_digest`` and ``history_hasher``, the functions its Responses model
    digests a history with, or ``None`` where neither place has them.
    """
    # Private: Pydantic AI digests a history nowhere public. 2.78 moved them to pydantic_ai.models
    # (for every model that continues server-side state); 2.68 has them under models.openai.
    for module in ("pydantic_ai.models._history_digest", "pydantic_ai.models.openai._history_digest"):
        try:
            digests = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(digests, "continuation_digest") and hasattr(digests, "history_hasher"):
            return digests.continuation_digest, digests.history_hasher
    return None


def continued_from_this_history(response: ModelResponse, model: Model, history: list[ModelMessage]) -> ModelResponse:
    """
    A replayed answer whose ``history_digest`` is taken over this try's history. Pydantic AI's
    ``OpenAIResponsesModel`` continues a later request from an answer's stored response
    (``openai_previous_response_id``) only while the digest of the answer and the history it was
    created from still matches; the journal does not keep the digest (:func:`recorded_answer`),
    and one taken over the failed try's history, whose timestamps differ, would not match either:
    the next request would send the whole history where the plain run sends only what came after.
    The step's fingerprint matched: the server created the response from this history as sent.
    """
    if response.history_digest is None:
        return response  # the model does not continue from it
    digests = history_digests()
    if digests is None:
        return response  # its digest matches no history: the next request sends the whole history
    continuation_digest, history_hasher = digests
    # Private: the model's history_digest_key argument, kept on no public attribute (a WrapperModel hands it on).
    key = getattr(model, "_history_digest_key", None)
    digest = continuation_digest(history_hasher(history, key), response.parts)
    return dataclasses.replace(response, history_digest=digest)


def usage_of(model: str, usage: RequestUsage) -> ModelUsage:
    """What a live answer's usage counts for in the try's usage and budget, its cost at the model's price."""
    return ModelUsage.of_call(
        model,
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.input_tokens + usage.output_tokens,
        cached_input_tokens=usage.cache_read_tokens,
    )
