"""OpenAIAgentsHook reads an ``openai`` connection as apache-airflow-providers-openai does."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook
from airflow.providers.common.ai.testing import FakeOpenAIServer


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

    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.scope import journal_scope
    from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
    from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
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


# --- test_connection(): the Test button of the connection form, against a real local server ---

KEY = "sk-the-right-key"


def test_test_connection_lists_the_models_and_accepts_the_key(connection):
    with FakeOpenAIServer(api_key=KEY, models=["gpt-a", "gpt-b"]) as server:
        ok, message = connection(password=KEY, host=server.base_url).test_connection()
    assert (ok, message) == (True, f"{server.base_url} accepted the API key (2 models listed)")
    assert server.get_paths == ["/v1/models"]
    assert server.requests == []  # no model request was paid for


def test_test_connection_says_the_key_was_refused_without_saying_the_key(connection):
    with FakeOpenAIServer(api_key=KEY) as server:
        ok, message = connection(password="sk-wrong-key-123", host=server.base_url).test_connection()
    assert not ok
    assert message == f"{server.base_url} refused the API key (HTTP 401): check the connection's password"
    assert "sk-wrong" not in message


def test_test_connection_names_the_endpoint_it_could_not_reach(connection):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        ok, message = connection(password=KEY, host=f"http://127.0.0.1:{port}/v1").test_connection()
    assert not ok
    assert message.startswith(f"Could not reach http://127.0.0.1:{port}/v1: ")
    assert KEY not in message


def test_test_connection_to_an_endpoint_without_a_model_list_says_the_key_was_not_checked(connection):
    with FakeOpenAIServer() as server:
        ok, message = connection(password=KEY, host=server.base_url + "/nowhere").test_connection()
    assert not ok
    assert message == (
        f"{server.base_url}/nowhere was reached but has no model list (GET /models answered 404), so the API key "
        "could not be checked without a model call"
    )


def test_test_connection_reports_a_bad_connection_as_get_client_kwargs_refuses_it(connection, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ok, message = connection(host="http://127.0.0.1:9/v1").test_connection()
    assert not ok and message.startswith("Connection 'openai_test' has no API key")
    ok, message = connection(password=KEY, extra={"auth_type": "workload_identity"}).test_connection()
    assert not ok and "has auth_type 'workload_identity'" in message and KEY not in message


def test_test_connection_tries_once_whatever_max_retries_the_extra_gives(connection):
    """An endpoint failing with HTTP 500 is reported at once: the client's retries are off."""
    paths = []

    class Failing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Failing) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        hook = connection(
            password=KEY, extra={"openai_client_kwargs": {"base_url": base_url, "max_retries": 5, "timeout": 600}}
        )
        ok, message = hook.test_connection()
        httpd.shutdown()
    assert (ok, message) == (False, f"{base_url} answered GET /models with HTTP 500")
    assert paths == ["/v1/models"]


NOT_A_MODEL_LIST = {
    "html": ("text/html", b"<html><body>Welcome to nginx!</body></html>"),
    "list-without-data": ("application/json", b'{"object": "list"}'),
    "data-not-a-list": ("application/json", b'{"object": "list", "data": "gpt-a"}'),
    "json-array": ("application/json", b'[{"id": "gpt-a"}]'),
    "bad-json": ("application/json", b'{"object": "list", "data": ['),
    "empty": ("application/json", b""),
}


@pytest.mark.parametrize("answer", NOT_A_MODEL_LIST)
def test_test_connection_to_an_endpoint_that_answers_no_model_list_says_so(connection, answer):
    content_type, body = NOT_A_MODEL_LIST[answer]

    class NotOpenAI(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), NotOpenAI) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
        ok, message = connection(password=KEY, host=base_url).test_connection()
        httpd.shutdown()
    assert (ok, message) == (
        False,
        f"{base_url} answered GET /models without a model list, so it is not an OpenAI-compatible endpoint: "
        "check the base URL (most end in /v1)",
    )


def test_airflow_lists_the_openai_connection_type_with_this_hook_and_its_form():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()

    hook = manager.hooks["openai"]
    assert (hook.hook_class_name, hook.package_name) == (
        "airflow.providers.common.ai.hooks.openai.OpenAIAgentsHook",
        "apache-airflow-providers-common-ai",
    )
    assert manager.field_behaviours["openai"]["hidden_fields"] == ["schema", "port", "login"]
    assert manager.field_behaviours["openai"]["relabeling"] == {"host": "Base URL", "password": "API key"}


def test_the_form_the_hook_describes_for_airflow_2_is_the_one_provider_yaml_describes():
    from airflow.providers.common.ai.get_provider_info import get_provider_info

    [connection_type] = get_provider_info()["connection-types"]
    behaviour = connection_type["ui-field-behaviour"]

    assert OpenAIAgentsHook.get_ui_field_behaviour() == {
        "hidden_fields": behaviour["hidden-fields"],
        "relabeling": behaviour["relabeling"],
        "placeholders": behaviour["placeholders"],
    }
    assert (connection_type["connection-type"], connection_type["hook-name"]) == (
        OpenAIAgentsHook.conn_type,
        OpenAIAgentsHook.hook_name,
    )


def test_a_connection_of_type_openai_gets_this_hook_and_its_test(connection):
    from airflow.models.connection import Connection

    with FakeOpenAIServer(api_key=KEY, models=["gpt-a"]) as server:
        connection(conn_id="openai_form", password=KEY, host=server.base_url)
        ok, message = Connection.get_connection_from_secrets("openai_form").test_connection()

    assert (ok, message) == (True, f"{server.base_url} accepted the API key (1 model listed)")
    assert server.get_paths == ["/v1/models"]
