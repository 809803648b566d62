"""
What lets the example DAGs run anywhere: with an OpenAI API key for real, else offline.

An example DAG names an ``openai`` connection. Run as a script, it wraps ``dag.test()`` in
:func:`openai_connection_for_example`, which uses that connection if it is defined, else builds
it from ``OPENAI_API_KEY``, else starts a local OpenAI-compatible endpoint that answers with the
example's scripted replies and fails the requests it is told to, once each.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator

from airflow.providers.common.ai.testing.openai_server import FakeOpenAIServer, Reply


def _is_defined(conn_id: str) -> bool:
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models.connection import Connection

    try:
        Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        return False
    return True


@contextlib.contextmanager
def openai_connection_for_example(
    conn_id: str, offline_replies: Iterable[Reply], *, fail_requests: Iterable[int] = ()
) -> Iterator[FakeOpenAIServer | None]:
    """
    Make connection ``conn_id`` usable inside this block; yield the offline endpoint, if one was
    started.
    """
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    if _is_defined(conn_id):
        print(f"Example: the models are served by connection {conn_id!r}.")
        yield None
        return
    api_key = os.environ.get("OPENAI_API_KEY")
    if api_key:
        print(f"Example: the models are served by api.openai.com with OPENAI_API_KEY, as connection {conn_id!r}.")
        with _environ(variable, json.dumps({"conn_type": "openai", "password": api_key})):
            yield None
        return
    fail_requests = sorted(fail_requests)
    with FakeOpenAIServer(offline_replies, fail_requests=fail_requests) as server:
        print(
            f"Example: no OPENAI_API_KEY, so a local OpenAI-compatible endpoint at {server.base_url} plays the "
            f"model, with scripted answers; it fails request {', '.join(map(str, fail_requests)) or 'none'} "
            "with HTTP 500 to show a retry."
        )
        connection = {
            "conn_type": "openai",
            "host": server.base_url,
            "password": "offline-example",
            # The client's own retries would hide the injected failure from Airflow.
            "extra": {"openai_client_kwargs": {"max_retries": 0}},
        }
        with _environ(variable, json.dumps(connection)):
            yield server
        statuses = ", ".join(f"#{request.number} HTTP {request.status}" for request in server.requests)
        print(
            f"Example: the model requests the local endpoint got: {statuses or 'none'}. The 'Durable:' "
            "line of each try, above, says what it replayed and what it ran live."
        )


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
