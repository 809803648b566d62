"""Durable steps as spans of the task's trace and as Airflow metrics (R-60), from scripted runs."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from airflow.providers.common.ai.durable.airflow import telemetry
from airflow.providers.common.ai.durable.airflow.telemetry import DurableTelemetry
from airflow.providers.common.ai.durable.core import events
from airflow.providers.common.ai.durable.core.host import current_host, hosting
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

MODEL = "gpt-4.1-mini"  # priced in the maintained table: 100 in and 20 out cost $0.000072
USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)
DURABLE = "airflow.common_ai.durable."


class RecordingStats:
    """Airflow's Stats facade as the listener calls it: counters by name and tags."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, str] | None = None) -> None:
        self.counts[stat, tuple(sorted((tags or {}).items()))] += count

    def total(self, stat: str, **tags: str) -> int:
        return sum(n for (name, have), n in self.counts.items() if name == stat and set(tags.items()) <= set(have))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


@pytest.fixture
def stats() -> RecordingStats:
    return RecordingStats()


@pytest.fixture
def listening(tracer, stats) -> Iterator[DurableTelemetry]:
    listener = DurableTelemetry(tracer, stats)
    with hosting(dataclasses.replace(current_host(), listeners=(listener,))):
        yield listener


def run_two_tries(tracer) -> list[Any]:
    """
    A task whose try 1 fails: its tool fails, then its second model call; returns the task span of
    each try.
    """
    storage, weather_calls = InMemoryStorage(), []

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        weather_calls.append(city)
        if len(weather_calls) == 1:
            raise TimeoutError("the weather service timed out")
        return f"sunny in {city}"

    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Paris"}, call_id="c1")],
            ModelStep.raise_error(ConnectionError("the model's API is down")),
            [assistant_message("Paris: sunny")],
        ],
        default_usage=USAGE,
    )
    model.model = MODEL
    agent = Agent(name="forecaster", model=model, tools=[weather])
    task_spans = []
    for try_number in (1, 2):
        with tracer.start_as_current_span(f"worker.forecast try {try_number}") as task_span:
            task_spans.append(task_span)
            with journal_scope(DurableJournal(storage)):
                if try_number == 1:
                    with pytest.raises(ConnectionError):
                        run_durably_sync(agent, "Weather in Paris?")
                else:
                    assert run_durably_sync(agent, "Weather in Paris?").final_output == "Paris: sunny"
    assert (len(model.calls), weather_calls) == (3, ["Paris", "Paris"])
    return task_spans


def step_spans(exporter: InMemorySpanExporter, task_span: Any) -> list[Any]:
    """The step spans under one task span, in the order the steps ended."""
    parent = task_span.get_span_context().span_id
    return [span for span in exporter.get_finished_spans() if span.parent and span.parent.span_id == parent]


def test_each_step_of_a_retried_task_is_a_span_under_its_try_live_then_replayed(listening, tracer, exporter):
    try_1, try_2 = run_two_tries(tracer)

    first, second = step_spans(exporter, try_1), step_spans(exporter, try_2)
    # The model request that failed try 1 is a failed span too; its step stays unrecorded and runs again.
    assert [(s.name, s.attributes[f"{DURABLE}outcome"]) for s in first] == [
        (f"chat {MODEL}", "live"),
        ("execute_tool weather", "failed"),
        (f"chat {MODEL}", "failed"),
    ]
    assert [(s.name, s.attributes[f"{DURABLE}outcome"]) for s in second] == [
        (f"chat {MODEL}", "replayed"),
        ("execute_tool weather", "live"),
        (f"chat {MODEL}", "live"),
    ]
    # Every step span is in its task's trace, and the task spans are all there is besides.
    assert len(exporter.get_finished_spans()) == 2 + 6
    assert {s.context.trace_id for s in first} == {try_1.get_span_context().trace_id}
    assert {s.context.trace_id for s in second} == {try_2.get_span_context().trace_id}

    live_model, failed_tool, failed_model = first
    tool = second[1]
    assert live_model.attributes["gen_ai.operation.name"] == "chat"
    assert live_model.attributes["gen_ai.request.model"] == MODEL
    assert (
        live_model.attributes["gen_ai.usage.input_tokens"],
        live_model.attributes["gen_ai.usage.output_tokens"],
    ) == (100, 20)
    assert live_model.attributes[f"{DURABLE}total_tokens"] == 120
    assert live_model.attributes[f"{DURABLE}cost_usd"] == pytest.approx(0.000072)
    assert (tool.attributes["gen_ai.operation.name"], tool.attributes["gen_ai.tool.name"]) == (
        "execute_tool",
        "weather",
    )
    assert "gen_ai.usage.input_tokens" not in tool.attributes
    assert failed_tool.status.status_code is StatusCode.ERROR
    assert failed_tool.attributes[f"{DURABLE}reason"]
    assert failed_model.status.status_code is StatusCode.ERROR
    assert failed_model.attributes[f"{DURABLE}reason"] == "it raised ConnectionError"
    assert tool.status.status_code is StatusCode.UNSET
    # The replayed model call carries what it had used, which is what its replay saved.
    replayed_model = second[0]
    assert replayed_model.attributes[f"{DURABLE}cost_usd"] == pytest.approx(0.000072)
    assert replayed_model.attributes["gen_ai.usage.input_tokens"] == 100
    assert replayed_model.attributes[f"{DURABLE}key"] == live_model.attributes[f"{DURABLE}key"]
    for span in first + second:
        assert span.start_time <= span.end_time


def test_metrics_count_steps_by_outcome_and_kind_and_what_the_replay_saved(listening, tracer, stats):
    run_two_tries(tracer)

    step = telemetry.STEP_METRIC
    assert stats.total(step.format(outcome="live"), kind="model") == 2
    assert stats.total(step.format(outcome="live"), kind="tool") == 1
    assert stats.total(step.format(outcome="failed"), kind="tool") == 1
    assert stats.total(step.format(outcome="failed"), kind="model") == 1
    assert stats.total(step.format(outcome="replayed"), kind="model") == 1
    assert stats.total(step.format(outcome="replayed"), kind="tool") == 0
    assert stats.total(step.format(outcome="not_recorded")) == 0
    assert stats.total(telemetry.TOKENS_SAVED_METRIC, model=MODEL) == 120
    assert stats.total(telemetry.COST_SAVED_METRIC, model=MODEL) == 72  # millionths of a dollar


def test_a_budget_refusal_is_counted_with_its_limit_and_model(stats):
    DurableTelemetry(None, stats)(events.BudgetRefusal(limit="total_tokens", model=MODEL, key="run-1"))

    assert stats.total(telemetry.BUDGET_REFUSALS_METRIC, limit="total_tokens", model=MODEL) == 1


def step_event(outcome: str = events.LIVE) -> events.StepEvent:
    return events.StepEvent(kind="tool", name="weather", key="r1/0001", outcome=outcome, started=100.0, ended=100.5)


def test_a_step_of_a_try_without_a_trace_makes_no_span_and_still_counts(tracer, exporter, stats):
    DurableTelemetry(tracer, stats)(step_event())

    assert exporter.get_finished_spans() == ()
    assert stats.total(telemetry.STEP_METRIC.format(outcome="live"), kind="tool") == 1


def test_a_step_outside_any_current_span_goes_under_the_task_instance_trace_context(monkeypatch, tracer, exporter):
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ti = SimpleNamespace(dag_id="d", task_id="t", context_carrier={"traceparent": traceparent})
    monkeypatch.setattr(telemetry, "_running_task_instance", lambda: ti)

    DurableTelemetry(tracer, None)(step_event(events.REPLAYED))

    [span] = exporter.get_finished_spans()
    assert (span.context.trace_id, span.parent.span_id) == (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)
    assert (span.start_time, span.end_time) == (100_000_000_000, 100_500_000_000)


def test_a_step_claimed_before_the_span_it_ends_in_starts_with_that_span(tracer, exporter):
    with tracer.start_as_current_span("the SDK's span of the tool call", start_time=100_200_000_000):
        DurableTelemetry(tracer, None)(step_event())

    [step] = [s for s in exporter.get_finished_spans() if s.parent is not None]
    assert (step.start_time, step.end_time) == (100_200_000_000, 100_500_000_000)


def test_approvals_and_sessions_are_spans_named_for_the_durable_step(tracer, exporter):
    with tracer.start_as_current_span("worker.task"):
        for kind in ("approval", "session"):
            DurableTelemetry(tracer, None)(
                events.StepEvent(kind=kind, name="refund", key="r1/0002", outcome=events.LIVE, started=1.0, ended=2.0)
            )

    spans = [s for s in exporter.get_finished_spans() if s.parent is not None]
    assert [(s.name, s.attributes[f"{DURABLE}name"]) for s in spans] == [
        ("durable approval refund", "refund"),
        ("durable session refund", "refund"),
    ]
    assert all("gen_ai.operation.name" not in s.attributes for s in spans)


def test_with_traces_and_metrics_off_the_listener_makes_nothing(monkeypatch):
    monkeypatch.setenv("AIRFLOW__TRACES__OTEL_ON", "False")
    for option in ("STATSD_ON", "OTEL_ON", "STATSD_DATADOG_ENABLED"):
        monkeypatch.setenv(f"AIRFLOW__METRICS__{option}", "False")

    listener = DurableTelemetry.configured()

    assert (listener.tracer, listener.stats) == (None, None)


def test_the_agent_sdks_traces_stay_out_of_opentelemetry_where_the_process_has_no_tracer_provider(monkeypatch):
    from opentelemetry import trace

    from airflow.providers.common.ai.durable.openai_agents import _telemetry

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.setattr(_telemetry, "_decided", None)

    assert _telemetry.send_sdk_traces_to_the_tracer_provider() is False
    # Decided once for the process: a later run does not look again.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: pytest.fail("looked again"))
    assert _telemetry.send_sdk_traces_to_the_tracer_provider() is False


def test_with_traces_and_metrics_on_the_listener_uses_airflows_tracer_provider_and_stats_traces_from_airflow_3(
    monkeypatch,
):
    from airflow.providers.common.compat.sdk import Stats

    monkeypatch.setenv("AIRFLOW__TRACES__OTEL_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")

    listener = DurableTelemetry.configured()

    # Airflow 2.11's workers make no span of a try to put steps under (docs/telemetry.rst).
    assert (listener.tracer is not None) == AIRFLOW_V_3_0_PLUS
    assert listener.stats is Stats


def test_the_configuration_is_read_on_the_first_event_only(monkeypatch):
    reads = []
    monkeypatch.setattr(telemetry, "_telemetry", None)
    monkeypatch.setattr(DurableTelemetry, "configured", classmethod(lambda cls: reads.append(1) or cls(None, None)))

    for _ in range(3):
        telemetry.listen(step_event())

    assert reads == [1]


def test_the_airflow_host_hears_each_event_once_through_the_telemetry_listener():
    from airflow.providers.common.ai.durable.airflow import binding

    assert binding.AIRFLOW_HOST.listeners == (telemetry.listen,)
