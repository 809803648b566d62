"""
Two @task functions whose journal lives on S3 ([common.ai] durable_cache_path=s3://CONN_ID@bucket/path):
``forecast_sync`` calls ``run_durably_sync``, ``forecast_async`` awaits ``run_durably``. Both talk
to an OpenAI-compatible endpoint (FAKE_OPENAI_BASE_URL); the system test fails one request of
each on try 1.

Each try first writes the bucket's keys, listed through boto3 (not through the journal's own
filesystem), to DURABLE_TEST_OUT/<task id>.try<N>.json; each tool run appends a line to
DURABLE_TEST_OUT/tool_runs.txt.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, get_current_context, task


def note_the_bucket_and_build_the_agent(task_id: str):
    import boto3
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    out = Path(os.environ["DURABLE_TEST_OUT"])
    s3 = boto3.client("s3", endpoint_url=os.environ["DURABLE_TEST_S3_ENDPOINT"], region_name="us-east-1")
    listed = s3.list_objects_v2(Bucket=os.environ["DURABLE_TEST_S3_BUCKET"])
    try_number = get_current_context()["ti"].try_number
    keys = sorted(item["Key"] for item in listed.get("Contents", []))
    (out / f"{task_id}.try{try_number}.json").write_text(json.dumps(keys))

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        with (out / "tool_runs.txt").open("a") as file:
            file.write(f"{task_id} weather {city} try {try_number}\n")
        return f"sunny in {city}"

    client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    return Agent(name="forecaster", model=model, tools=[weather])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_s3_cache_path():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def forecast_sync() -> str:
        from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

        agent = note_the_bucket_and_build_the_agent("forecast_sync")
        return run_durably_sync(agent, "Forecast Paris.").final_output

    @task(retries=1, retry_delay=timedelta(seconds=0))
    def forecast_async() -> str:
        import asyncio

        from airflow.providers.common.ai.durable.openai_agents import run_durably

        agent = note_the_bucket_and_build_the_agent("forecast_async")

        async def forecast() -> str:
            return (await run_durably(agent, "Forecast Rome.")).final_output

        return asyncio.run(forecast())

    forecast_sync() >> forecast_async()


dag_object = durable_s3_cache_path()

if __name__ == "__main__":
    dag_object.test()
