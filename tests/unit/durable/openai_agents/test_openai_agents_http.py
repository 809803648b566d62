"""run_durably with the real OpenAI client against a local OpenAI-compatible server."""

from __future__ import annotations

from collections import Counter

import pytest
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool
from openai import AsyncOpenAI, InternalServerError

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


@pytest.mark.parametrize("model_class", [OpenAIChatCompletionsModel, OpenAIResponsesModel])
def test_a_retry_after_an_http_500_on_the_third_request_sends_only_the_requests_from_the_third_on(model_class):
    runs = Counter()

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs["weather"] += 1
        return f"sunny in {city}"

    @function_tool
    def save_report(text: str) -> str:
        """Saves a report."""
        runs["save_report"] += 1
        return "saved"

    script = [
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.tool_calls(("save_report", {"text": "Paris: sunny"}, "call_2")),
        reply.text("Reported: Paris is sunny."),
    ]
    storage = InMemoryStorage()
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

        def attempt():
            agent = Agent(
                name="reporter",
                instructions="Report the weather.",
                model=model_class(model="gpt-4o", openai_client=client),
                tools=[weather, save_report],
            )
            with journal_scope(DurableJournal(storage)):
                return run_durably_sync(agent, "Report the weather in Paris.")

        with pytest.raises(InternalServerError):
            attempt()
        assert len(server.requests) == 3
        assert runs == {"weather": 1, "save_report": 1}

        result = attempt()

    assert result.final_output == "Reported: Paris is sunny."
    assert [request.number for request in server.requests[3:]] == [4]
    assert runs == {"weather": 1, "save_report": 1}
    # The request the retry sent is the one the failed try could not get answered.
    assert server.requests[3].body == server.requests[2].body
