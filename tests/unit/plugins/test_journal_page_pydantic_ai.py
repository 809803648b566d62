"""
The journal page's data for a durable Pydantic AI run of a priced model (R-59, R-65): what each try
spent and what the replay saved, in money as in tokens, as the page shows them for an OpenAI Agents
SDK run of the same conversation; and the try's summary line the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

import agents
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from upath import UPath

from airflow.providers.common.ai.durable import openai_agents, pydantic_ai
from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
from airflow.providers.common.ai.durable.airflow.summaries import write_summary
from airflow.providers.common.ai.durable.airflow.summary_stores import ObjectStorageSummaries
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.plugins import journal_page_data
from airflow.providers.common.ai.plugins.journal_page_html import render_page
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

MODEL = "gpt-4.1-mini"  # priced in the maintained table: 100 in and 20 out cost $0.000072
IDS = {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1}


def _pydantic_ai_run(client: AsyncOpenAI) -> Callable[[], Any]:
    agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return lambda: pydantic_ai.run_durably_sync(agent, "Weather in Paris?").output


def _openai_agents_run(client: AsyncOpenAI) -> Callable[[], Any]:
    @agents.function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = agents.Agent(name="forecaster", model=model, tools=[weather])
    return lambda: openai_agents.run_durably_sync(agent, "Weather in Paris?").final_output


def _page_after_a_retry(framework_run, cache_path, monkeypatch) -> tuple[dict[str, Any], list[str]]:
    """
    The page's data once try 1 failed at its second request and try 2 replayed the first and the
    tool call, with the journal and summaries under a file:// cache path; and each try's summary line.
    """
    monkeypatch.setattr("airflow.providers.common.ai.durable.airflow.journal_access.AIRFLOW_V_3_3_PLUS", False)
    monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{cache_path}")
    place = UPath(f"file://{cache_path}")
    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1"), usage=(100, 20)),
        reply.text("Paris: sunny", usage=(100, 20)),
    ]
    lines = []
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        run = framework_run(AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0))
        for try_number in (1, 2):
            journal = DurableJournal(ObjectStorageStorage(place, **IDS))
            with journal_scope(journal):
                if try_number == 1:
                    with pytest.raises(Exception, match=r"500|Internal"):
                        run()
                else:
                    assert run() == "Paris: sunny"
            journal.settle()
            lines.append(journal.stats.summary())
            outcome = "failed" if try_number == 1 else "success"
            write_summary(ObjectStorageSummaries(place, **IDS), journal, try_number=try_number, outcome=outcome)
        assert [request.status for request in server.requests] == [200, 500, 200]
    return journal_page_data.journal_of(**IDS), lines


def _spent_and_saved(shown: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            summary["usage"]["cost_usd"],
            summary["usage"]["saved"]["cost_usd"],
            summary["usage"]["models"][MODEL]["cost_usd"],
            summary["usage"]["unknown_prices"],
            [
                (step["key"], step["kind"], step["outcome"], step["tokens"], step["cost_usd"])
                for step in summary["steps"]
            ],
        )
        for summary in shown["tries"]
    ]


def test_the_page_shows_what_each_try_of_a_pydantic_ai_run_spent_and_saved_as_for_the_openai_agents_sdk(
    tmp_path, monkeypatch
):
    shown, lines = _page_after_a_retry(_pydantic_ai_run, tmp_path / "pydantic_ai", monkeypatch)
    openai_shown, openai_lines = _page_after_a_retry(_openai_agents_run, tmp_path / "openai_agents", monkeypatch)

    spent = pytest.approx(0.000072)
    assert _spent_and_saved(shown) == [
        (
            spent,
            0.0,
            spent,
            [],
            [
                ("1.1", "model", "live", 120, spent),
                ("1.2", "tool", "live", None, None),
                ("1.3", "model", "failed", None, None),
            ],
        ),
        (
            spent,
            spent,
            spent,
            [],
            [
                ("1.1", "model", "replayed", 120, spent),
                ("1.2", "tool", "replayed", None, None),
                ("1.3", "model", "live", 120, spent),
            ],
        ),
    ]
    assert _spent_and_saved(shown) == _spent_and_saved(openai_shown)
    # The page and the summary line write the money as for the other framework.
    page = render_page(shown)
    assert "spent 120 tokens, $0.000072<br>saved 120 tokens, $0.000072" in page
    assert "price unknown" not in page
    assert lines[1].endswith("saved 120 tokens by replaying, spent $0.000072, saved $0.000072")
    assert [line.split(", ran live")[1] for line in lines] == [line.split(", ran live")[1] for line in openai_lines]
