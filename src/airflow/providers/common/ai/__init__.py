"""Durable OpenAI Agents SDK agent tasks for Apache Airflow."""

from __future__ import annotations

import packaging.version

from airflow import __version__ as airflow_version

__all__ = ["__version__"]

__version__ = "0.1.0"

MIN_AIRFLOW_VERSION = "3.2.0"

if packaging.version.parse(packaging.version.parse(airflow_version).base_version) < packaging.version.parse(
    MIN_AIRFLOW_VERSION
):
    raise RuntimeError(
        f"The package `apache-airflow-providers-common-ai:{__version__}` needs Apache Airflow "
        f"{MIN_AIRFLOW_VERSION}+ (it supports Airflow 3.2 and 3.3), not {airflow_version}"
    )
