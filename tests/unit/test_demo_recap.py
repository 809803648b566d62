"""scripts/demo_recap.py: the recap scripts/demo.sh prints after an example (issue 37)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("demo_recap", Path(__file__).parents[2] / "scripts" / "demo_recap.py")
assert _SPEC and _SPEC.loader
demo_recap = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(demo_recap)

# A failed try as Airflow 2.11's dag.test() prints it: the task's handler and the root logger each
# write its lines, in two timestamp formats.
AIRFLOW_2_11 = """\
[2026-12-04T01:59:12.100+0000] {dag.py:2990} INFO - [DAG TEST] starting task_id=refund_customer map_index=-1
[2026-12-04T01:59:12.838+0000] {_agent_run.py:126} INFO - Durable: model 'gpt-4.1-mini' at 1.1 ran live
[2026-12-04 01:59:12,838] {_agent_run.py:126} INFO - Durable: model 'gpt-4.1-mini' at 1.1 ran live
[2026-12-04 01:59:30,632] {taskinstance.py:3337} ERROR - Task failed with exception
Traceback (most recent call last):
  File "/venv/airflow/utils/timeout.py", line 69, in handle_timeout
    raise AirflowTaskTimeout(self.error_message)
airflow.exceptions.AirflowTaskTimeout: Process timed out, PID: 22701
[2026-12-04T01:59:30.632+0000] {taskinstance.py:3337} ERROR - Task failed with exception
Traceback (most recent call last):
  File "/venv/airflow/utils/timeout.py", line 69, in handle_timeout
    raise AirflowTaskTimeout(self.error_message)
airflow.exceptions.AirflowTaskTimeout: Process timed out, PID: 22701
[2026-12-04T01:59:30.664+0000] {journal.py:171} INFO - Durable: replayed 0, ran live 1 (model 1), could not record 0
[2026-12-04T01:59:31.100+0000] {dag.py:2990} INFO - [DAG TEST] starting task_id=refund_customer map_index=-1
[2026-12-04T01:59:31.200+0000] {_agent_run.py:126} INFO - Durable: model 'gpt-4.1-mini' at 1.1 replayed
"""

AIRFLOW_3 = """\
2026-12-04T01:52:20.100000Z [info     ] [DAG TEST] starting task_id=triage_ticket map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-12-04T01:52:21.100000Z [info     ] HTTP Request: POST http://127.0.0.1:38779/v1/responses "HTTP/1.0 500 Internal Server Error" [httpx] loc=_client.py:1740
2026-12-04T01:52:30.276740Z [error    ] Task failed with exception     [task] loc=task_runner.py:1676
Traceback (most recent call last):
  File "/venv/agents/run.py", line 2520, in run_sync
    return self._run_sync_impl(starting_agent, input, **kwargs)
openai.InternalServerError: Error code: 500 - injected failure of request #3
2026-12-04T01:52:30.300000Z [info     ] Durable: replayed 0, ran live 4 (model 2, tool 2), could not record 0 [airflow.providers.common.ai.durable.core.journal] loc=journal.py:171
"""


def test_airflow_2_11s_second_copy_of_each_line_is_left_out_and_the_timeout_is_kept():
    assert list(demo_recap.recap(AIRFLOW_2_11.splitlines())) == [
        "[DAG TEST] starting task_id=refund_customer map_index=-1",
        "Durable: model 'gpt-4.1-mini' at 1.1 ran live",
        "Task failed with exception: airflow.exceptions.AirflowTaskTimeout: Process timed out, PID: 22701",
        "Durable: replayed 0, ran live 1 (model 1), could not record 0",
        "[DAG TEST] starting task_id=refund_customer map_index=-1",
        "Durable: model 'gpt-4.1-mini' at 1.1 replayed",
    ]


def test_an_airflow_3_line_loses_its_decorations_and_a_failed_try_says_why():
    assert list(demo_recap.recap(AIRFLOW_3.splitlines())) == [
        "[DAG TEST] starting task_id=triage_ticket map_index=-1",
        'HTTP Request: POST http://127.0.0.1:38779/v1/responses "HTTP/1.0 500 Internal Server Error"',
        "Task failed with exception: openai.InternalServerError: Error code: 500 - injected failure of request #3",
        "Durable: replayed 0, ran live 4 (model 2, tool 2), could not record 0",
    ]


def test_the_recap_exits_with_the_examples_code_and_says_the_run_failed(tmp_path, capsys):
    log = tmp_path / "demo.log"
    log.write_text(AIRFLOW_3)
    assert demo_recap.main(["demo_recap.py", str(log), "1"]) == 1
    assert "demo: the DAG run failed (the example exited with 1)" in capsys.readouterr().err


@pytest.mark.parametrize("code", ["0", "1"])
def test_a_log_without_a_durable_line_says_so_instead_of_pointing_at_one(tmp_path, capsys, code):
    log = tmp_path / "demo.log"
    log.write_text("2026-12-04T01:52:20.100000Z [error    ] Failed to import: example.py [airflow] loc=dagbag.py:1\n")
    demo_recap.main(["demo_recap.py", str(log), code])
    out = capsys.readouterr().out
    assert "No 'Durable:' line: no durable step ran" in out and "above" in out
