"""
A task that journals three steps of its own, with no agent: the system tests of the journal run
it through real Airflow retries. Try 1 fails in its third step; try 2 must replay the first two.

DURABLE_TEST_OUT names a folder where each try writes what its steps did.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, get_current_context, task

from airflow.providers.common.ai.durable.core.scope import current_journal


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_journal_steps():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def three_steps() -> list[str]:
        context = get_current_context()
        try_number = context["ti"].try_number
        if (store := context.get("task_state_store")) is not None:
            store.set("users_own_key", "kept")  # the journal must never delete the task's own keys
        events = []
        with current_journal().run() as run:
            for i in range(3):
                step = run.claim("tool", f"step{i}", f"asks {i}")
                if step.replayed:
                    events.append(f"replayed {step.result['i']}")
                    continue
                with step.running(mark_in_flight=True):
                    events.append(f"live {i}")
                    if i == 2 and try_number == 1:
                        Path(os.environ["DURABLE_TEST_OUT"], "try1.json").write_text(json.dumps(events))
                        raise RuntimeError("injected failure in the third step")
                step.record({"i": i})
        Path(os.environ["DURABLE_TEST_OUT"], f"try{try_number}.json").write_text(json.dumps(events))
        return events

    three_steps()


dag_object = durable_journal_steps()

if __name__ == "__main__":
    dag_object.test()
