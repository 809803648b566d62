"""
OpenAI Agents SDK runs, journaled: :func:`run_durably` and :func:`run_durably_sync`.

They take the arguments of ``Runner.run`` and ``Runner.run_sync``. Inside a running Airflow task
every model call and every function-tool call of the run is recorded in the task instance's
journal when it completes; on a retry the calls the failed try completed return their recorded
results, and only the rest reach the model or run. This package is the only one that knows the SDK,
and this module only names what it offers: the runs are in ``_run``, the run's SDK side in
``_agent_run``, the model in ``_model``, function tools in ``_tools``, MCP in ``_mcp``, sessions
in ``_sessions``, tool outputs in ``_tool_output``, and every private name of the SDK it uses in
``_sdk_private``.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401
except ImportError as error:  # pragma: no cover - openai-agents is a dependency
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(
        "Durable agent runs need the OpenAI Agents SDK: pip install openai-agents"
    ) from error

from airflow.providers.common.ai.durable.core.adapter import current_idempotency_key
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.in_flight import Happened
from airflow.providers.common.ai.durable.openai_agents._model import SERVER_SIDE_CONVERSATION_OPTIONS
from airflow.providers.common.ai.durable.openai_agents._run import run_durably, run_durably_streamed, run_durably_sync
from airflow.providers.common.ai.durable.openai_agents._tools import in_flight

__all__ = [
    "SERVER_SIDE_CONVERSATION_OPTIONS",
    "Happened",
    "UsageBudget",
    "current_idempotency_key",
    "in_flight",
    "run_durably",
    "run_durably_streamed",
    "run_durably_sync",
]
