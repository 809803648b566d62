"""
An example that fails for good, run the way the examples run themselves (``run_example``): the
local endpoint fails both tries' first model request, so the DAG run fails. In a folder of its
own, so that the DAG folder the demo sets holds only it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.compat.sdk import dag

from airflow.providers.common.ai.operators.agent import AgentOperator


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def demo_fails_for_good():
    from agents import Agent

    AgentOperator(
        task_id="answer",
        agent=Agent(name="answerer", model="gpt-4.1-mini"),
        prompt="Say hello.",
        openai_conn_id="openai_default",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


example_dag = demo_fails_for_good()

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    run_example(example_dag, "openai_default", [reply.text("Hello.")], fail_requests={1, 2})
