"""
Airflow names this provider needs that neither ``airflow.sdk`` nor ``airflow.providers.common.compat``
offers; each with why. ``tests/unit/test_airflow_private.py`` fails, naming the Airflow version,
when an upgrade removes one. Names that ``common.compat`` offers are imported from there instead.
"""

from __future__ import annotations

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

# What Airflow resolves before execute() (an XComArg, a mapped argument): AgentOperator lets such
# a prompt through at parse time. airflow.sdk exports XComArg alone, which misses the others.
try:
    from airflow.sdk.definitions._internal.mixins import ResolveMixin
except ImportError:  # Airflow 2.11
    from airflow.utils.mixins import ResolveMixin  # type: ignore[no-redef,import-untyped]


def is_run_by_an_executor() -> bool:
    """
    Whether the running task talks to a supervisor process of its own, as a worker an executor
    started does, rather than to the in-process stand-in of ``dag.test()``: only the Task SDK's
    private ``task_runner.SUPERVISOR_COMMS`` (a ``CommsDecoder`` in a worker) tells them apart.
    """
    if not AIRFLOW_V_3_0_PLUS:
        return False
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import CommsDecoder

    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), CommsDecoder)


__all__ = ["ResolveMixin", "is_run_by_an_executor"]
