"""
A durable Pydantic AI run's steps as spans and metrics (R-60, R-65): the same, step for step, as an
OpenAI Agents SDK run of the same conversation against the same local OpenAI-compatible server.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

# A module of the real package: without Pydantic AI, "pydantic_ai" alone would import this test folder
# as a namespace package (the durable tests' conftest puts tests/unit/durable on sys.path).
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

import agents
from openai import AsyncOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable import openai_agents, pydantic_ai
from airflow.providers.common.ai.durable.airflow import telemetry
from airflow.providers.common.ai.durable.airflow.telemetry import DurableTelemetry
from airflow.providers.common.ai.durable.core.host import current_host, hosting
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

MODEL = "gpt-4.1-mini"  # priced in the maintained table: 100 in and 20 out cost $0.000072
DURABLE = "airflow.common_ai.durable."
# Try 1: the model asks for the weather, the tool fails (its error goes back to the model), the
# second request fails. Try 2: the first answer replays, the tool and the second request run live.
SCRIPT = [
    reply.tool_calls(("weather", {"city": "Paris"}, "call_1"), usage=(100, 20)),
    reply.text("Paris: sunny", usage=(100, 20)),
]


class RecordingStats:
    """Airflow's Stats facade as the listener calls it: counters by name and tags."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, str] | None = None) -> None:
        self.counts[stat, tuple(sorted((tags or {}).items()))] += count


def _pydantic_ai_try(client: AsyncOpenAI, weather_calls: list[str]) -> Callable[[], Any]:
    agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        weather_calls.append(city)
        if len(weather_calls) == 1:
            raise ModelRetry("the weather service timed out")
        return f"sunny in {city}"

    return lambda: pydantic_ai.run_durably_sync(agent, "Weather in Paris?").output


def _openai_agents_try(client: AsyncOpenAI, weather_calls: list[str]) -> Callable[[], Any]:
    @agents.function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        weather_calls.append(city)
        if len(weather_calls) == 1:
            raise TimeoutError("the weather service timed out")
        return f"sunny in {city}"

    model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = agents.Agent(name="forecaster", model=model, tools=[weather])
    return lambda: openai_agents.run_durably_sync(agent, "Weather in Paris?").final_output


def _watched_retry(framework_try: Callable[[AsyncOpenAI, list[str]], Callable[[], Any]]):
    """Two tries of a task under a tracer and Airflow's Stats: each try's step spans, and the metrics."""
    exporter, stats = InMemorySpanExporter(), RecordingStats()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    storage, weather_calls, task_spans = InMemoryStorage(), [], []
    listener = DurableTelemetry(tracer, stats)
    with (
        hosting(dataclasses.replace(current_host(), listeners=(listener,))),
        FakeOpenAIServer(SCRIPT, fail_requests={2}) as server,
    ):
        attempt = framework_try(AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0), weather_calls)
        for try_number in (1, 2):
            with tracer.start_as_current_span(f"worker.forecast try {try_number}") as task_span:
                task_spans.append(task_span)
                with journal_scope(DurableJournal(storage)):
                    if try_number == 1:
                        with pytest.raises(Exception, match=r"500|Internal"):
                            attempt()
                    else:
                        assert attempt() == "Paris: sunny"
        # Try 2 sends only the request that failed.
        assert [request.number for request in server.requests] == [1, 2, 3]
    assert weather_calls == ["Paris", "Paris"]
    finished = exporter.get_finished_spans()
    per_try = [
        [span for span in finished if span.parent and span.parent.span_id == task.get_span_context().span_id]
        for task in task_spans
    ]
    return per_try, stats.counts


def _shown(span: Any) -> tuple[Any, ...]:
    """What a step's span says, but for the failure's reason, which names each framework's own exception."""
    attributes = dict(span.attributes)
    attributes.pop(f"{DURABLE}reason", None)
    attributes.pop(f"{DURABLE}key", None)
    return span.name, span.status.status_code, tuple(sorted(attributes.items()))


def test_a_pydantic_ai_run_makes_the_spans_of_an_openai_agents_sdk_run_live_then_replayed():
    pydantic_tries, _ = _watched_retry(_pydantic_ai_try)
    openai_tries, _ = _watched_retry(_openai_agents_try)

    assert [[(s.name, s.attributes[f"{DURABLE}outcome"]) for s in spans] for spans in pydantic_tries] == [
        [(f"chat {MODEL}", "live"), ("execute_tool weather", "failed"), (f"chat {MODEL}", "failed")],
        [(f"chat {MODEL}", "replayed"), ("execute_tool weather", "live"), (f"chat {MODEL}", "live")],
    ]
    assert [[_shown(s) for s in spans] for spans in pydantic_tries] == [
        [_shown(s) for s in spans] for spans in openai_tries
    ]
    live_model, failed_tool, failed_model = pydantic_tries[0]
    replayed_model = pydantic_tries[1][0]
    for model_span in (live_model, replayed_model):
        assert model_span.attributes["gen_ai.request.model"] == MODEL
        assert (
            model_span.attributes["gen_ai.usage.input_tokens"],
            model_span.attributes["gen_ai.usage.output_tokens"],
        ) == (100, 20)
        assert model_span.attributes[f"{DURABLE}cost_usd"] == pytest.approx(0.000072)
    assert replayed_model.attributes[f"{DURABLE}key"] == live_model.attributes[f"{DURABLE}key"]
    assert failed_tool.status.status_code is failed_model.status.status_code is StatusCode.ERROR
    assert failed_model.attributes[f"{DURABLE}reason"] == "it raised ModelServerError"


def test_a_pydantic_ai_run_counts_the_metrics_of_an_openai_agents_sdk_run():
    _, pydantic_counts = _watched_retry(_pydantic_ai_try)
    _, openai_counts = _watched_retry(_openai_agents_try)

    assert pydantic_counts == openai_counts
    step = telemetry.STEP_METRIC
    assert pydantic_counts == {
        (step.format(outcome="live"), (("kind", "model"),)): 2,
        (step.format(outcome="live"), (("kind", "tool"),)): 1,
        (step.format(outcome="failed"), (("kind", "model"),)): 1,
        (step.format(outcome="failed"), (("kind", "tool"),)): 1,
        (step.format(outcome="replayed"), (("kind", "model"),)): 1,
        (telemetry.TOKENS_SAVED_METRIC, (("model", MODEL),)): 120,
        (telemetry.COST_SAVED_METRIC, (("model", MODEL),)): 72,  # millionths of a dollar
    }
