"""OpenAIAgentsHook reads an ``openai`` connection as apache-airflow-providers-openai does."""

from __future__ import annotations

import json

import pytest

from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook


@pytest.fixture
def connection(monkeypatch):
    def define(conn_id: str = "openai_test", **fields) -> OpenAIAgentsHook:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "openai", **fields}))
        return OpenAIAgentsHook(conn_id)

    return define


def test_the_password_is_the_api_key_and_the_host_the_base_url(connection):
    hook = connection(password="sk-abcdef", host="https://proxy.example/v1")
    assert hook.get_client_kwargs() == {"api_key": "sk-abcdef", "base_url": "https://proxy.example/v1"}


def test_without_a_host_the_client_keeps_its_default_endpoint(connection):
    assert connection(password="sk-abcdef").get_client_kwargs() == {"api_key": "sk-abcdef", "base_url": None}


def test_openai_client_kwargs_in_extra_reach_the_client_and_win_over_host_and_password(connection):
    hook = connection(
        password="sk-password",
        host="https://host.example/v1",
        extra={
            "openai_client_kwargs": {
                "api_key": "sk-extra",
                "base_url": "https://extra.example/v1",
                "max_retries": 0,
            }
        },
    )
    assert hook.get_client_kwargs() == {
        "api_key": "sk-extra",
        "base_url": "https://extra.example/v1",
        "max_retries": 0,
    }


def test_a_base_url_in_extra_wins_over_the_host(connection):
    hook = connection(
        password="sk-abcdef", host="https://host.example/v1", extra={"base_url": "https://extra.example/v1"}
    )
    assert hook.get_client_kwargs()["base_url"] == "https://extra.example/v1"


def test_a_connection_without_an_api_key_is_refused_naming_the_fix(connection, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(
        ValueError, match="^Connection 'openai_test' has no API key: put it in the connection's password"
    ):
        connection(host="http://localhost:8000/v1").get_client_kwargs()


def test_without_a_key_in_the_connection_the_workers_openai_api_key_is_used(connection, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert connection(host="http://localhost:8000/v1").get_client_kwargs()["api_key"] is None


def test_workload_identity_is_refused_naming_the_fix(connection):
    hook = connection(password="sk-abcdef", extra={"auth_type": "workload_identity"})
    with pytest.raises(ValueError, match="has auth_type 'workload_identity', but agents authenticate with an API key"):
        hook.get_client_kwargs()


@pytest.mark.parametrize(("use_responses", "expected"), [(None, True), (False, False), ("false", False), (True, True)])
def test_use_responses_in_extra_picks_the_api_of_models_given_by_name(connection, use_responses, expected):
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel

    extra = {} if use_responses is None else {"use_responses": use_responses}
    provider = connection(password="sk-abcdef", extra=extra).get_model_provider()
    model = provider.get_model("gpt-4.1-mini")
    assert isinstance(model, OpenAIResponsesModel if expected else OpenAIChatCompletionsModel)
