"""
The OpenAI Agents SDK model provider of an Airflow ``openai`` connection.

The connection type is the one ``apache-airflow-providers-openai`` registers (install it for the
connection form in the UI; this hook only reads the connection and works without it):

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
    from agents import MultiProvider
    from openai import AsyncOpenAI
except ImportError as error:  # pragma: no cover - both are dependencies of this provider
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    raise AirflowOptionalProviderFeatureException(error) from error

from airflow.sdk import BaseHook


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


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
