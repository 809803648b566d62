"""
Pydantic AI agent runs, journaled: :func:`run_durably` and :func:`run_durably_sync`, and the
streamed :func:`run_stream_durably` and :func:`iter_durably` (R-65).

They take the arguments of ``Agent.run``, ``Agent.run_sync``, ``Agent.run_stream`` and
``Agent.iter``. Inside a running Airflow task every model request (streamed or not) and every
tool call of the run is recorded in the task instance's journal when it completes; on a retry the
calls the failed try completed return their recorded results, and only the rest reach the model or
run. This package is the only one that knows
Pydantic AI, and this module only names what it offers: the runs are in ``_run``, the run's
capability and model wrapper in ``_agent_run``, what a request asks in ``_requests`` and tools in
``_tools``. It is written against the core's adapter contract (``core/adapter.py``).
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401
except ImportError as error:
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(
        "Durable Pydantic AI runs need Pydantic AI, the optional extra [pydantic-ai] of this provider: "
        "pip install 'apache-airflow-providers-common-ai[pydantic-ai]'"
    ) from error

from airflow.providers.common.ai.durable.core.adapter import current_idempotency_key
from airflow.providers.common.ai.durable.core.budget import UsageBudget
from airflow.providers.common.ai.durable.core.in_flight import Happened
from airflow.providers.common.ai.durable.pydantic_ai._run import (
    iter_durably,
    run_durably,
    run_durably_sync,
    run_stream_durably,
)
from airflow.providers.common.ai.durable.pydantic_ai._tools import in_flight
from airflow.providers.common.ai.durable.pydantic_ai._toolsets import send_idempotency_key

__all__ = [
    "Happened",
    "UsageBudget",
    "current_idempotency_key",
    "in_flight",
    "iter_durably",
    "run_durably",
    "run_durably_sync",
    "run_stream_durably",
    "send_idempotency_key",
]
