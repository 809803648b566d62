"""
The SDK's own trace events (agent runs, model responses, tool calls) sent to the process's
OpenTelemetry tracer provider, beside the SDK's own trace processors, when the ``otel`` extra is
installed and the process has a tracer provider: Airflow 3 sets one in a worker with ``[traces]
otel_on``. Done once, when the first durable run of the process starts (docs/telemetry.rst).
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

_lock = threading.Lock()
_decided: bool | None = None


def _has_a_tracer_provider() -> bool:
    from opentelemetry import trace

    # Until a provider is set, the API hands out a proxy (or a no-op one) that records nothing.
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def send_sdk_traces_to_the_tracer_provider() -> bool:
    """Instrument the SDK for the process's tracer provider, once; return whether its traces go there."""
    global _decided
    with _lock:
        if _decided is None:
            _decided = _instrumented()
        return _decided


def _instrumented() -> bool:
    try:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    except ImportError:
        log.debug("Durable: the agent SDK's traces stay out of OpenTelemetry: the [otel] extra is not installed")
        return False
    if not _has_a_tracer_provider():
        log.debug("Durable: the agent SDK's traces stay out of OpenTelemetry: this process has no tracer provider")
        return False
    try:
        instrumentor = OpenAIAgentsInstrumentor()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
    except Exception:  # tracing must never keep a task from running
        log.debug("Durable: the agent SDK's traces could not be sent to OpenTelemetry", exc_info=True)
        return False
    return True
