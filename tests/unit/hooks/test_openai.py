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
        ValueError, match=r"^Connection 'openai_test' has no API key: put it in the connection's password"
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


def test_models_given_by_name_through_the_connection_replay_on_a_durable_retry(connection):
    from agents import Agent, RunConfig, function_tool
    from openai import InternalServerError

    from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope
    from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
    from airflow.providers.common.ai.durable.storage import InMemoryStorage
    from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

    looked_up = []

    @function_tool
    def lookup(ticket_id: str) -> str:
        """The ticket's text."""
        looked_up.append(ticket_id)
        return "cannot log in"

    storage = InMemoryStorage()
    script = [reply.tool_calls(("lookup", {"ticket_id": "T-1"}, "c1")), reply.text("Login problem.")]
    with FakeOpenAIServer(script, fail_requests={2}) as server:

        def attempt():
            # A new hook per try, as each try runs in a new worker process.
            hook = connection(
                password="sk-abcdef", host=server.base_url, extra={"openai_client_kwargs": {"max_retries": 0}}
            )
            journal = DurableJournal(storage)
            agent = Agent(name="triage", model="gpt-4.1-mini", tools=[lookup])
            with journal_scope(journal):
                output = run_durably_sync(
                    agent, "Triage T-1.", run_config=RunConfig(model_provider=hook.get_model_provider())
                ).final_output
            return output, journal

        with pytest.raises(InternalServerError):
            attempt()
        output, journal = attempt()

    assert output == "Login problem."
    assert [(r.number, r.status, r.body["model"]) for r in server.requests] == [
        (1, 200, "gpt-4.1-mini"),
        (2, 500, "gpt-4.1-mini"),
        (3, 200, "gpt-4.1-mini"),
    ]
    assert server.requests[2].body == server.requests[1].body
    assert server.requests[2].headers["authorization"] == "Bearer sk-abcdef"
    assert looked_up == ["T-1"]
    assert journal.stats.replayed == {"model": 1, "tool": 1}
