"""
A mapped durable ``@task``: one map index per city, each with its own model server (connection
``openai_<map index>``). On try 1 each weather tool waits until another map index is in its tool
too, so that with one task slot per worker both workers run tries at once; the model request after
the tool then fails and the retry replays the tool from that map index's own journal.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, RunConfig, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context, task

from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook

CITIES = ["Zürich", "Paris", "Rome", "Oslo"]


def _out() -> Path:
    return Path(os.environ["DURABLE_TEST_OUT"])


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    ti = get_current_context()["ti"]
    note = {
        "city": city,
        "map_index": ti.map_index,
        "try": ti.try_number,
        "worker": os.environ.get("DURABLE_WORKER_NAME"),
    }
    with (_out() / "weather.jsonl").open("a") as calls:
        calls.write(json.dumps(note, ensure_ascii=False) + "\n")
    if ti.try_number == 1:
        barrier = _out() / "barrier"
        barrier.mkdir(exist_ok=True)
        (barrier / str(ti.map_index)).touch()
        deadline = time.monotonic() + 120
        while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    return f"{city} (map index {ti.map_index}): sunny, 21 °C"


agent = Agent(name="forecaster", model="gpt-4.1-mini", tools=[weather])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def production_mapped():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def forecast(city: str) -> str:
        map_index = get_current_context()["ti"].map_index
        provider = OpenAIAgentsHook(f"openai_{map_index}").get_model_provider()
        return run_durably_sync(
            agent, f"Weather in {city}?", run_config=RunConfig(model_provider=provider)
        ).final_output

    forecast.expand(city=CITIES)


production_mapped()
