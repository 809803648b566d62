"""
Airflow names this provider needs that neither ``airflow.sdk`` nor ``airflow.providers.common.compat``
offers; each with why. ``tests/unit/test_airflow_private.py`` fails, naming the Airflow version,
when an upgrade removes one. Names that ``common.compat`` offers are imported from there instead.
"""

from __future__ import annotations

# What Airflow resolves before execute() (an XComArg, a mapped argument): AgentOperator lets such
# a prompt through at parse time. airflow.sdk exports XComArg alone, which misses the others.
try:
    from airflow.sdk.definitions._internal.mixins import ResolveMixin
except ImportError:  # Airflow 2.11
    from airflow.utils.mixins import ResolveMixin  # type: ignore[no-redef,import-untyped]

__all__ = ["ResolveMixin"]
