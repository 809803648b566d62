"""
The output the docs show is the output of a run (issue 37): the quick start's task log, the
summary lines of the quick start and durable.rst, and visibility.rst's usage XCom are compared
with a run of ``example_durable_agent`` against the local scripted server, so they cannot go
stale. Only what varies from run to run (the server's port) is normalized.
"""

from __future__ import annotations

import importlib.util
import json
import re

from dag_runs import EXAMPLE_DAGS, ROOT, durable_env, latest_run_id, run_dag_file, xcom_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

DOCS = ROOT / "docs"
_SPEC = importlib.util.spec_from_file_location("demo_recap", ROOT / "scripts" / "demo_recap.py")
assert _SPEC and _SPEC.loader
demo_recap = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(demo_recap)


def literal_blocks(page: str, language: str) -> list[list[str]]:
    """The ``.. code-block:: language`` blocks of a docs page, each as its lines, unindented."""
    blocks, lines = [], (DOCS / page).read_text().splitlines()
    for number, line in enumerate(lines):
        if line.strip() != f".. code-block:: {language}":
            continue
        block: list[str] = []
        for following in lines[number + 2 :]:
            if following and not following.startswith("    "):
                break
            block.append(following[4:])
        blocks.append([entry for entry in block if entry.strip()])
    return blocks


def _normalized(line: str) -> str:
    """The line without what varies: the server's port, and the reason the demo's recap adds to a failed try."""
    if line.startswith("Task failed with exception"):
        line = "Task failed with exception"
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line)


def _is_summary(line: str) -> bool:
    """A try's summary line (``Durable: replayed 4 (...)``), not a stretch of replayed steps."""
    return re.match(r"Durable: replayed \d", line) is not None


def test_the_docs_show_what_a_run_of_the_durable_agent_example_logs_and_pushes(tmp_path):
    script = [
        reply.tool_calls(("get_customer", {"email": "ada@example.com"}, "call_customer")),
        reply.tool_calls(("get_recent_orders", {"customer_id": "C-1024"}, "call_orders")),
        reply.text('{"category": "billing", "priority": "urgent", "summary": "Charged twice for O-77."}'),
    ]
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        run = run_dag_file(EXAMPLE_DAGS / "example_durable_agent.py", durable_env(server, tmp_path))
    assert run.returncode == 0, run.output[-5000:]
    story = [_normalized(line) for line in demo_recap.recap(run.output.splitlines())]

    # The quick start's task log: the block that starts with the first try, line for line, in order.
    [quickstart_log] = [b for b in literal_blocks("quickstart.rst", "text") if b[0].startswith("[DAG TEST]")]
    expected = [_normalized(line) for line in quickstart_log]
    if not any(line.startswith("HTTP Request:") for line in story):
        # Airflow 3.4's dag.test() does not show httpx's own log lines; the docs show 3.3's log.
        expected = [line for line in expected if not line.startswith("HTTP Request:")]
    start = story.index(expected[0])
    assert story[start : start + len(expected)] == expected

    # Every try summary line the quick start and durable.rst show is one this run logged.
    summaries = {line for line in story if _is_summary(line)}
    for page in ("quickstart.rst", "durable.rst"):
        shown = {line for block in literal_blocks(page, "text") for line in block if _is_summary(line)}
        assert shown and shown <= summaries, (page, shown - summaries)

    # visibility.rst's usage XCom is try 2's.
    usage = xcom_value("example_durable_agent", latest_run_id("example_durable_agent"), "triage_ticket", "usage")
    [shown_usage, *_] = literal_blocks("visibility.rst", "json")
    assert json.loads("\n".join(shown_usage)) == usage
