"""
What lets the example DAGs run anywhere: with an OpenAI API key for real, else offline.

An example DAG names an ``openai`` connection. Run as a script, it calls :func:`run_example`:
``dag.test()`` inside :func:`openai_connection_for_example`, which uses that connection if it is
defined, else builds it from ``OPENAI_API_KEY``, else starts a local OpenAI-compatible endpoint
that answers with the example's scripted replies and fails the requests it is told to, once each.
With ``--serve PORT`` it only serves that endpoint, on a fixed port, for a scheduler to run the
example against (the docs' quick start has the recipe).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

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
        failing = (
            f"; it fails request {', '.join(map(str, fail_requests))} with HTTP 500 to show a retry"
            if fail_requests
            else ""
        )
        print(
            f"Example: no OPENAI_API_KEY, so a local OpenAI-compatible endpoint at {server.base_url} plays the "
            f"model, with scripted answers{failing}."
        )
        with _environ(variable, _offline_connection(server)):
            yield server
        _print_statuses(server)


def run_example(dag: Any, conn_id: str, offline_replies: Iterable[Reply], *, fail_requests: Iterable[int] = ()) -> None:
    """
    What an example DAG does run as a script: ``dag.test()`` with connection ``conn_id`` made
    usable; with ``--serve PORT`` in ``sys.argv``, only the offline endpoint, on ``PORT``, until
    interrupted. Exits non-zero when the DAG run did not succeed.
    """
    if "--serve" in sys.argv:
        arguments = sys.argv[sys.argv.index("--serve") + 1 :]
        if not arguments or not arguments[0].isdigit():
            sys.exit(f"--serve needs a port: python {sys.argv[0]} --serve 8765")
        serve_offline(conn_id, offline_replies, port=int(arguments[0]), fail_requests=fail_requests)
        return
    with openai_connection_for_example(conn_id, offline_replies, fail_requests=fail_requests):
        dag_run = dag.test()
    state = str(getattr(dag_run, "state", None) or "unknown")
    if not state.endswith("success"):
        # dag.test() returns the run whatever its state; a demo that failed must not exit 0.
        sys.exit(f"Example: the DAG run of {dag.dag_id} ended {state.rsplit('.', 1)[-1]}, not success.")


def serve_offline(
    conn_id: str, offline_replies: Iterable[Reply], *, port: int, fail_requests: Iterable[int] = ()
) -> None:
    """
    Serve the example's scripted replies on ``127.0.0.1:port`` until interrupted (Ctrl-C or
    SIGTERM), and print the connection that points ``conn_id`` at them. The replies are answered
    once, in order: serve again for each DAG run.
    """
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeOpenAIServer(offline_replies, fail_requests=fail_requests, port=port) as server:
        print(
            f"Example: serving the model's scripted answers at {server.base_url}; run the DAG with this "
            f"connection set for the scheduler and the workers:\n"
            f"export AIRFLOW_CONN_{conn_id.upper()}='{_offline_connection(server)}'",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        _print_statuses(server)


def _offline_connection(server: FakeOpenAIServer) -> str:
    return json.dumps(
        {
            "conn_type": "openai",
            "host": server.base_url,
            "password": "offline-example",
            # The client's own retries would hide the injected failure from Airflow.
            "extra": {"openai_client_kwargs": {"max_retries": 0}},
        }
    )


def _print_statuses(server: FakeOpenAIServer) -> None:
    statuses = ", ".join(f"#{request.number} HTTP {request.status}" for request in server.requests)
    print(f"Example: the model requests the local endpoint got: {statuses or 'none'}.", flush=True)


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
