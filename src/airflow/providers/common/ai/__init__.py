"""Durable OpenAI Agents SDK agent tasks for Apache Airflow."""

from __future__ import annotations

import packaging.version

from airflow import __version__ as airflow_version
from airflow.providers.common.ai._mixed_install import refuse_a_mixed_install

__all__ = ["__version__"]

# 0.x while this provider shares its distribution name with the ASF provider (1.0.0 and later):
# the version never ranks the two, docs/quickstart.rst installs this one by path only.
__version__ = "0.1.0"

refuse_a_mixed_install(__path__, __version__)

MIN_AIRFLOW_VERSION = "2.11.0"
SUPPORTED_LINES = "Airflow 2.11, 3.1.1+, 3.2 and 3.3+"

# Why Airflow 3.0 and 3.1.0 cannot run this provider (docs/versions.rst). 3.1.1 and later run it
# beside openai-agents 0.20 to 0.22.2: they cap fastapi<0.118 (starlette<0.49), which leaves pip no
# SDK from 0.22.3 on (those need starlette>=1.3.1).
_NO_FASTAPI_CAP = (
    "it sets no cap on fastapi, so pip takes a FastAPI whose strict content-type check rejects the "
    "Task SDK's requests with HTTP 422 at every task start"
)


def _refusal(version: str) -> str | None:
    """Why this provider cannot run on Airflow ``version``, or ``None`` when it can."""
    base = packaging.version.parse(packaging.version.parse(version).base_version)
    if base < packaging.version.parse(MIN_AIRFLOW_VERSION):
        return f"it needs Apache Airflow {MIN_AIRFLOW_VERSION}+"
    if (base.major, base.minor) == (3, 0) or base == packaging.version.parse("3.1.0"):
        return _NO_FASTAPI_CAP
    return None


if (_reason := _refusal(airflow_version)) is not None:
    raise RuntimeError(
        f"The package `apache-airflow-providers-common-ai:{__version__}` cannot run on Apache Airflow "
        f"{airflow_version}: {_reason}. It supports {SUPPORTED_LINES}; install one of those."
    )
