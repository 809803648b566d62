"""Airflow's own commands find the provider, its plugin and its connection type on every supported line (R-55)."""

from __future__ import annotations

import json
import os
import re
import subprocess

from airflow_services import AIRFLOW

import airflow.providers.common.ai as package
from airflow.providers.common.ai.testing import FakeOpenAIServer


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


def connections_test(conn_id: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [AIRFLOW, "connections", "test", conn_id],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_airflow_connections_test_reaches_the_hook_of_the_openai_connection_type():
    with FakeOpenAIServer(api_key="sk-cli-key", models=["gpt-a", "gpt-b"]) as server:
        connection = json.dumps({"conn_type": "openai", "password": "sk-cli-key", "host": server.base_url})
        result = connections_test(
            "openai_cli", AIRFLOW_CONN_OPENAI_CLI=connection, AIRFLOW__CORE__TEST_CONNECTION="Enabled"
        )
        wrong_key = json.dumps({"conn_type": "openai", "password": "sk-wrong", "host": server.base_url})
        refused = connections_test(
            "openai_cli", AIRFLOW_CONN_OPENAI_CLI=wrong_key, AIRFLOW__CORE__TEST_CONNECTION="Enabled"
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Connection success!" in result.stdout
    assert server.get_paths == ["/v1/models", "/v1/models"]
    # Airflow 2.11 exits 0 after "Connection failed!"; 3.x exits 1.
    assert "Connection failed!" in refused.stdout
    assert f"{server.base_url} refused the API key (HTTP 401)" in refused.stdout
    assert "sk-wrong" not in refused.stdout + refused.stderr


def test_airflow_connections_test_needs_test_connection_enabled_as_the_docs_say():
    connection = json.dumps({"conn_type": "openai", "password": "sk-any", "host": "http://127.0.0.1:9/v1"})
    result = connections_test(
        "openai_cli", AIRFLOW_CONN_OPENAI_CLI=connection, AIRFLOW__CORE__TEST_CONNECTION="Disabled"
    )
    assert result.returncode == 1
    assert "Testing connections is disabled" in result.stdout + result.stderr
