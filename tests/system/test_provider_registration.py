"""Airflow's own commands find the provider and its plugin on every supported line (R-55)."""

from __future__ import annotations

import json
import re
import subprocess

from airflow_services import AIRFLOW

import airflow.providers.common.ai as package


def airflow_json(*command: str) -> list[dict]:
    result = subprocess.run([AIRFLOW, *command, "-o", "json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # Airflow may log lines before the JSON.
    start = re.search(r"^\[\{", result.stdout, re.MULTILINE)
    assert start is not None, result.stdout[-3000:]
    return json.loads(result.stdout[start.start() :])


def test_airflow_providers_list_shows_the_provider_and_its_version():
    listed = {row["package_name"]: row for row in airflow_json("providers", "list")}
    assert listed["apache-airflow-providers-common-ai"]["version"] == package.__version__


def test_airflow_plugins_shows_the_listener_that_ends_durable_tries():
    plugins = {row["name"]: row for row in airflow_json("plugins")}
    assert "airflow.providers.common.ai.plugins.durable" in str(plugins["common_ai_durable"]["listeners"])
