"""Durable OpenAI Agents SDK agent tasks for Apache Airflow."""

from __future__ import annotations

import packaging.version

from airflow import __version__ as airflow_version

__all__ = ["__version__"]

__version__ = "0.1.0"

MIN_AIRFLOW_VERSION = "2.11.0"
SUPPORTED_LINES = "Airflow 2.11, 3.2 and 3.3+"

# Why 3.0 and 3.1 cannot run this provider (docs/airflow_lines.rst).
_UNSUPPORTED_LINES = {
    (3, 0): (
        "openai-agents 0.24 requires starlette>=1.3.1, and every FastAPI that accepts it rejects "
        "the Airflow 3.0 Task SDK's requests with HTTP 422 at task start"
    ),
    (3, 1): (
        "openai-agents 0.24 requires starlette>=1.3.1, Airflow 3.1.1+ caps fastapi<0.118 (which needs "
        "starlette<0.49), and on 3.1.0 every FastAPI that accepts it rejects the Task SDK's requests "
        "with HTTP 422 at task start"
    ),
}


def _refusal(version: str) -> str | None:
    """Why this provider cannot run on Airflow ``version``, or ``None`` when it can."""
    base = packaging.version.parse(packaging.version.parse(version).base_version)
    if base < packaging.version.parse(MIN_AIRFLOW_VERSION):
        return f"it needs Apache Airflow {MIN_AIRFLOW_VERSION}+"
    if (reason := _UNSUPPORTED_LINES.get((base.major, base.minor))) is not None:
        return reason
    return None


if (_reason := _refusal(airflow_version)) is not None:
    raise RuntimeError(
        f"The package `apache-airflow-providers-common-ai:{__version__}` cannot run on Apache Airflow "
        f"{airflow_version}: {_reason}. It supports {SUPPORTED_LINES}; install one of those."
    )
