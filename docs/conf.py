"""Sphinx configuration for apache-airflow-providers-common-ai."""

from __future__ import annotations

import os

# autodoc imports the provider, which imports Airflow: keep that from touching a real Airflow home.
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

project = "apache-airflow-providers-common-ai"
author = "apache-airflow-providers-common-ai contributors"
release = "0.1.0"
version = release

extensions: list[str] = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = "Durable AI agent tasks for Airflow"
