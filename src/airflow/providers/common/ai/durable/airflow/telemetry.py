"""
Durable steps where Airflow's operators already look: each step a span of the running task's
trace when ``[traces] otel_on``, and counted in Airflow's metrics (statsd or OpenTelemetry, as
``[metrics]`` configures them). The agent SDK's own trace events are the adapter's to send
(``openai_agents/_telemetry.py``). Whether traces and metrics are on is read once per process;
when both are off a step costs a function call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core import events
from airflow.providers.common.ai.durable.core.prices import MOST_USD
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer


#: Metric names, in Airflow's style (``ti.finish``, ``celery.task_timeout_error``): what became of a
#: step is in the name, so that plain statsd, which drops tags, still counts steps by outcome.
STEP_METRIC = "common_ai.durable.step.{outcome}"
TOKENS_SAVED_METRIC = "common_ai.durable.tokens_saved"
#: Counters are integers: cost is counted in millionths of a US dollar.
COST_SAVED_METRIC = "common_ai.durable.cost_saved_micro_usd"
BUDGET_REFUSALS_METRIC = "common_ai.durable.budget_refusals"

#: Attributes of a step's span beside the GenAI semantic conventions' ``gen_ai.*``.
ATTRIBUTE_PREFIX = "airflow.common_ai.durable."
_OPERATIONS = {"model": "chat", "tool": "execute_tool"}
_TRACER_NAME = "airflow.providers.common.ai.durable"


class DurableTelemetry:
    """Turns durable step events into spans (``tracer``) and metrics (``stats``, Airflow's Stats); either may be off (``None``)."""

    def __init__(self, tracer: Tracer | None, stats: Any | None) -> None:
        self.tracer = tracer
        self.stats = stats

    @classmethod
    def configured(cls) -> DurableTelemetry:
        """What this process's Airflow configuration turns on."""
        from airflow.configuration import conf

        tracer = None
        if AIRFLOW_V_3_0_PLUS and conf.getboolean("traces", "otel_on", fallback=False):
            from opentelemetry import trace

            # Airflow set the global tracer provider on import (settings.configure_otel).
            tracer = trace.get_tracer(_TRACER_NAME)
        stats = None
        if any(
            conf.getboolean("metrics", option, fallback=False)
            for option in ("statsd_on", "otel_on", "statsd_datadog_enabled")
        ):
            from airflow.providers.common.compat.sdk import Stats

            stats = Stats
        return cls(tracer, stats)

    def __call__(self, event: object) -> None:
        if isinstance(event, events.StepEvent):
            if self.tracer is not None:
                _trace(self.tracer, event)
            if self.stats is not None:
                _count(self.stats, event)
        elif isinstance(event, events.BudgetRefusal) and self.stats is not None:
            self.stats.incr(
                BUDGET_REFUSALS_METRIC, 1, tags={**_task_tags(), "limit": event.limit, "model": event.model}
            )


def _trace(tracer: Tracer, event: events.StepEvent) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    parent = _task_trace_context()
    if parent is None:
        return
    operation = _OPERATIONS.get(event.kind)
    attributes: dict[str, Any] = {
        f"{ATTRIBUTE_PREFIX}kind": event.kind,
        f"{ATTRIBUTE_PREFIX}outcome": event.outcome,
        f"{ATTRIBUTE_PREFIX}key": event.key,
    }
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    if event.kind == "model":
        attributes["gen_ai.request.model"] = event.name
    elif event.kind == "tool":
        attributes["gen_ai.tool.name"] = event.name
    else:
        attributes[f"{ATTRIBUTE_PREFIX}name"] = event.name
    for name, value in (
        ("gen_ai.usage.input_tokens", event.input_tokens),
        ("gen_ai.usage.output_tokens", event.output_tokens),
        (f"{ATTRIBUTE_PREFIX}total_tokens", event.total_tokens),
        (f"{ATTRIBUTE_PREFIX}cost_usd", event.cost_usd),
        (f"{ATTRIBUTE_PREFIX}resolution", event.resolution),
        (f"{ATTRIBUTE_PREFIX}reason", event.reason),
    ):
        if value is not None:
            attributes[name] = value
    # GenAI's span names: "{operation} {model or tool}"; approvals and sessions are not GenAI operations.
    span_name = f"{operation or f'durable {event.kind}'} {event.name}"
    # A step claimed before the SDK opened the span it ends in (the journal claims the tool
    # calls of an answer together) starts with that span: no span starts before its parent.
    parent_start = getattr(trace.get_current_span(parent), "start_time", None) or 0
    start = max(_nanoseconds(event.started), parent_start)
    span = tracer.start_span(span_name, context=parent, attributes=attributes, start_time=start)
    if event.outcome == events.FAILED:
        span.set_status(Status(StatusCode.ERROR, event.reason))
    span.end(end_time=max(_nanoseconds(event.ended), start))


def _count(stats: Any, event: events.StepEvent) -> None:
    tags = _task_tags()
    stats.incr(STEP_METRIC.format(outcome=event.outcome), 1, tags={**tags, "kind": event.kind})
    if event.outcome != events.REPLAYED:
        return
    saved_tokens = event.total_tokens
    if saved_tokens is None and event.input_tokens is not None and event.output_tokens is not None:
        saved_tokens = event.input_tokens + event.output_tokens
    if saved_tokens:
        stats.incr(TOKENS_SAVED_METRIC, saved_tokens, tags={**tags, "model": event.name})
    if event.cost_usd:
        # At least one: a saving of less than a millionth of a dollar is still a saving.
        micro_usd = max(1, round(min(event.cost_usd, MOST_USD / 1_000_000) * 1_000_000))
        stats.incr(COST_SAVED_METRIC, micro_usd, tags={**tags, "model": event.name})


def _nanoseconds(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _running_task_instance() -> Any | None:
    from airflow.providers.common.compat.sdk import AirflowException, get_current_context

    try:
        return get_current_context()["ti"]
    except (RuntimeError, AirflowException, KeyError):  # outside a task (2.11 raises AirflowException)
        return None


def _task_tags() -> dict[str, str]:
    ti = _running_task_instance()
    return {"dag_id": ti.dag_id, "task_id": ti.task_id} if ti is not None else {}


def _task_trace_context() -> Context | None:
    """
    Where a step's span goes: under the current span, which in a worker is the span of this try
    (``worker.<task_id>``) or a span the agent SDK's instrumentation opened inside it; else under
    the task instance's ``context_carrier``; ``None`` when this try has no trace (``dag.test()``
    makes none). The carrier comes second: Airflow 3.3 gives every try of a task instance the same
    one, so it cannot tell the tries apart.
    """
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    current = context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    carrier = getattr(_running_task_instance(), "context_carrier", None)
    if not carrier:
        return None
    parent = TraceContextTextMapPropagator().extract(carrier)
    return parent if trace.get_current_span(parent).get_span_context().is_valid else None


_telemetry: DurableTelemetry | None = None


def listen(event: object) -> None:
    """The listener of durable step events the binding installs; configured on the first event."""
    global _telemetry
    if _telemetry is None:
        _telemetry = DurableTelemetry.configured()
    _telemetry(event)
