"""
The OpenAI Agents SDK model provider of an Airflow ``openai`` connection.

This provider registers the ``openai`` connection type (its form in the UI and its Test button),
the type ``apache-airflow-providers-openai`` also registers, with the same fields:

* **password**: the API key;
* **host**: the base URL of an OpenAI-compatible endpoint (a proxy, Azure, vLLM, Ollama, ...),
  empty for api.openai.com;
* **extra**: ``openai_client_kwargs``, passed to ``AsyncOpenAI`` as that provider does (its
  ``base_url`` and ``api_key`` win over host and password), and ``use_responses``: ``false``
  for endpoints that only offer Chat Completions.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

try:
    import openai
    from agents import MultiProvider
    from openai import AsyncOpenAI, OpenAI
except ImportError as error:  # pragma: no cover - both are dependencies of this provider
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(error) from error

from airflow.providers.common.compat.sdk import BaseHook


class OpenAIAgentsHook(BaseHook):
    """
    Builds the model provider that resolves model names (``Agent(model="gpt-4.1")``) against
    the endpoint and key of an ``openai`` connection.

    Refuses a connection whose ``auth_type`` is not ``api_key``.

    :param openai_conn_id: the Airflow connection id; ``openai_default`` when not given.
    """

    conn_name_attr = "openai_conn_id"
    default_conn_name = "openai_default"
    conn_type = "openai"
    hook_name = "OpenAI"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form on Airflow before 3.2, which asks the hook; later lines read provider.yaml."""
        behaviour = _connection_type()["ui-field-behaviour"]
        return {
            "hidden_fields": list(behaviour["hidden-fields"]),
            "relabeling": dict(behaviour["relabeling"]),
            "placeholders": dict(behaviour["placeholders"]),
        }

    def __init__(self, openai_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.openai_conn_id = openai_conn_id

    @cached_property
    def connection(self) -> Any:
        return self.get_connection(self.openai_conn_id)

    def get_client_kwargs(self) -> dict[str, Any]:
        """The ``AsyncOpenAI`` arguments the connection describes."""
        conn = self.connection
        extra = conn.extra_dejson
        auth_type = extra.get("auth_type", "api_key")
        if auth_type != "api_key":
            raise ValueError(
                f"Connection {self.openai_conn_id!r} has auth_type {auth_type!r}, but agents "
                "authenticate with an API key: put the key in the connection's password"
            )
        client_kwargs = dict(extra.get("openai_client_kwargs") or {})
        client_kwargs["api_key"] = client_kwargs.get("api_key") or conn.password or None
        client_kwargs["base_url"] = client_kwargs.get("base_url") or extra.get("base_url") or conn.host or None
        if not client_kwargs["api_key"] and not os.environ.get("OPENAI_API_KEY"):
            raise ValueError(
                f"Connection {self.openai_conn_id!r} has no API key: put it in the connection's "
                "password (any non-empty value for an endpoint that needs none)"
            )
        return client_kwargs

    def get_model_provider(self) -> MultiProvider:
        """
        The model provider for ``RunConfig(model_provider=...)``; model names keep the SDK's
        prefixes (``openai/gpt-4.1``, ``litellm/...``).
        """
        use_responses = self.connection.extra_dejson.get("use_responses")
        return MultiProvider(
            openai_client=AsyncOpenAI(**self.get_client_kwargs()),
            openai_use_responses=None if use_responses is None else _as_bool(use_responses),
        )

    def test_connection(self) -> tuple[bool, str]:
        """
        The Test button of the connection form: lists the endpoint's models (``GET /models``),
        which checks the key and the endpoint without a paid model call. Never says the key.
        """
        try:
            client = OpenAI(**{**self.get_client_kwargs(), "timeout": TEST_TIMEOUT_SECONDS, "max_retries": 0})
        except (ValueError, TypeError, openai.OpenAIError) as error:
            return False, str(error)
        base_url = str(client.base_url).rstrip("/")
        try:
            with client:
                models = client.models.list().data
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            # The message is not shown: the real API echoes part of the key in it.
            return False, f"{base_url} refused the API key (HTTP {error.status_code}): check the connection's password"
        except openai.NotFoundError:
            return False, (
                f"{base_url} was reached but has no model list (GET /models answered 404), so the API key "
                "could not be checked without a model call"
            )
        except openai.APIStatusError as error:
            return False, f"{base_url} answered GET /models with HTTP {error.status_code}"
        except openai.APIConnectionError as error:
            return False, f"Could not reach {base_url}: {_cause(error)}"
        except (ValueError, AttributeError):
            models = None  # not JSON, or JSON the client cannot read as a page (an HTML page, an array)
        if not isinstance(models, list):
            return False, (
                f"{base_url} answered GET /models without a model list, so it is not an OpenAI-compatible "
                "endpoint: check the base URL (most end in /v1)"
            )
        listed = f"{len(models)} model" if len(models) == 1 else f"{len(models)} models"
        return True, f"{base_url} accepted the API key ({listed} listed)"


TEST_TIMEOUT_SECONDS = 10.0


def _connection_type() -> dict[str, Any]:
    """What provider.yaml says of the ``openai`` connection type, the one place the form is described."""
    from airflow.providers.common.ai.get_provider_info import get_provider_info

    [connection_type] = get_provider_info()["connection-types"]
    return connection_type


def _cause(error: BaseException) -> str:
    """The innermost cause's text (``Connection refused``, ``timed out``), or the error's own."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error) or type(error).__name__


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
