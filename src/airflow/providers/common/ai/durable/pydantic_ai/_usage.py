"""
What a Pydantic AI run used, counted as it goes: the capability ``AgentOperator`` adds to a run, so
that a try without a journal (``durable=False``, or outside a task) still reports its usage (R-42).
A durable try's usage is the journal's, which also knows what replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse

from airflow.providers.common.ai.durable.core.usage import TryUsage
from airflow.providers.common.ai.durable.pydantic_ai._requests import usage_of


@dataclass
class CountedUsage(AbstractCapability[Any]):
    """Counts each model answer's usage by model name, and each tool call, as they complete."""

    usage: TryUsage = field(default_factory=TryUsage)

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: ModelResponse) -> ModelResponse:
        name = request_context.model.model_name
        self.usage.count(name, usage_of(name, response.usage))
        self.usage.live["model"] = self.usage.live.get("model", 0) + 1
        return response

    async def after_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any) -> Any:
        self.usage.live["tool"] = self.usage.live.get("tool", 0) + 1
        return result
