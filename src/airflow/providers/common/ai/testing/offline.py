"""
Run your own DAG file offline: ``airflow dags test`` against a local OpenAI-compatible endpoint.

``python -m airflow.providers.common.ai.testing.offline DAG_FILE [DAG_ID]`` (``scripts/offline.sh``
adds a venv, an Airflow home of its own and its database) serves scripted model answers on
``127.0.0.1:--port``, points the ``openai`` connection ``--conn-id`` and the SDK's default client
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``) at them, so no request leaves the machine, and runs
``airflow dags test DAG_ID`` on the file. It exits with that command's exit code: non-zero when
the DAG run failed.

The answers come from ``--replies FILE``, a JSON list answered in order, one item per model
request: a string is a text answer, ``{"tool_calls": [{"name": ..., "arguments": {...}}]}`` asks
for tool calls. Without it, every request gets a text answer (which an agent with a structured
``output_type`` cannot parse: give it JSON of its type). ``--fail 3`` fails request 3 once with
HTTP 500, to watch a retry replay.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow.providers.common.ai.testing.openai_server import FakeOpenAIServer, Reply, reply

# Without --replies: enough text answers for any DAG that is not a loop.
_DEFAULT_REPLY_COUNT = 200


def replies_from(items: list[Any]) -> list[Reply]:
    """The scripted answers a ``--replies`` file's JSON list describes; refuses anything else, naming the item."""
    replies = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, str):
            replies.append(reply.text(item))
        elif isinstance(item, dict) and isinstance(item.get("tool_calls"), list):
            calls = [
                (call["name"], call.get("arguments", {}), call.get("call_id", f"call_{number}_{index}"))
                for index, call in enumerate(item["tool_calls"], start=1)
            ]
            replies.append(reply.tool_calls(*calls))
        else:
            raise ValueError(
                f"reply {number} is neither a string (a text answer) nor "
                f'{{"tool_calls": [{{"name": ..., "arguments": {{...}}}}]}}: {json.dumps(item)[:200]}'
            )
    return replies


def _dags_test_command(dag_file: Path, dag_id: str) -> list[str]:
    airflow = [sys.executable, "-m", "airflow", "dags", "test", dag_id]
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

    # Airflow 3 reads one file with --dagfile-path; 2.11 a folder with --subdir.
    return [*airflow, "--dagfile-path", str(dag_file)] if AIRFLOW_V_3_0_PLUS else [*airflow, "--subdir", str(dag_file)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offline", description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("dag_file", type=Path)
    parser.add_argument("dag_id", nargs="?", help="default: the file's name without .py")
    parser.add_argument("--port", type=int, default=0, help="the endpoint's port (default: a free one)")
    parser.add_argument("--conn-id", default="openai_default", help="the openai connection the DAG names")
    parser.add_argument("--replies", type=Path, help="a JSON list of the model's answers, in order")
    parser.add_argument("--fail", type=int, action="append", default=[], help="fail this request once with HTTP 500")
    arguments = parser.parse_args(argv)

    dag_file = arguments.dag_file.resolve()
    if not dag_file.is_file():
        parser.error(f"no DAG file at {dag_file}")
    dag_id = arguments.dag_id or dag_file.stem
    if arguments.replies:
        try:
            replies = replies_from(json.loads(arguments.replies.read_text()))
        except (OSError, ValueError) as error:
            parser.error(f"--replies {arguments.replies}: {error}")
    else:
        replies = [reply.text("An answer from the offline endpoint.") for _ in range(_DEFAULT_REPLY_COUNT)]

    with FakeOpenAIServer(replies, fail_requests=arguments.fail, port=arguments.port) as server:
        connection = json.dumps(
            {
                "conn_type": "openai",
                "host": server.base_url,
                "password": "offline",
                # The client's own retries would hide a failed request from Airflow's retry.
                "extra": {"openai_client_kwargs": {"max_retries": 0}},
            }
        )
        environment = {
            **os.environ,
            f"AIRFLOW_CONN_{arguments.conn_id.upper()}": connection,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "offline",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        }
        print(
            f"Offline: the local endpoint at {server.base_url} answers the model requests of {dag_id} "
            f"(connection {arguments.conn_id!r}; {len(replies)} scripted answers"
            f"{', failing request ' + ', '.join(map(str, sorted(arguments.fail))) if arguments.fail else ''}).",
            flush=True,
        )
        returncode = subprocess.run(_dags_test_command(dag_file, dag_id), env=environment).returncode
    statuses = ", ".join(f"#{request.number} HTTP {request.status}" for request in server.requests)
    print(f"Offline: the model requests the local endpoint got: {statuses or 'none'}.")
    print(
        f"Offline: airflow dags test {dag_id} "
        + ("succeeded." if returncode == 0 else f"failed (exit code {returncode}): the DAG run did not succeed."),
        flush=True,
    )
    return returncode


if __name__ == "__main__":
    sys.exit(main())
