"""
Traces and metrics of durable steps (R-60), received as a collector receives them: a real
scheduler runs a durable task whose try 1 fails and try 2 replays, with Airflow's OpenTelemetry
traces and metrics on and sent to an OTLP/HTTP endpoint this test starts on 127.0.0.1, which decodes
what the exporters send. Airflow 3 only: 2.11's workers make no span of a try to put steps under.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from airflow_services import AirflowServices
from dag_runs import TEST_DAGS, durable_env
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS

pytestmark = pytest.mark.skipif(
    not AIRFLOW_V_3_0_PLUS, reason="Airflow 2.11's workers make no span of a try: steps are counted, not traced"
)

DAG_ID, TASK_ID = "durable_telemetry", "triage"
MODEL = "gpt-4.1-mini"  # 100 tokens in and 20 out cost $0.000072 in the maintained price table
DURABLE = "airflow.common_ai.durable."


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    start: int
    end: int
    status: int


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


def _attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in key_values}


class OtlpReceiver:
    """An OTLP/HTTP endpoint (``/v1/traces``, ``/v1/metrics``) that keeps the spans and counter points it decodes."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        #: (metric name, attributes, series start) -> the latest cumulative value of that series.
        self.counters: dict[tuple[str, tuple[tuple[str, Any], ...], int], float] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._take_spans(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    receiver._take_metrics(ExportMetricsServiceRequest.FromString(body))
                    answer = ExportMetricsServiceResponse()
                else:
                    self.send_error(404)
                    return
                payload = answer.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _take_spans(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            start=span.start_time_unix_nano,
                            end=span.end_time_unix_nano,
                            status=span.status.code,
                        )
                        for span in scope_spans.spans
                    )

    def _take_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self._lock:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.WhichOneof("data") != "sum":
                            continue
                        for point in metric.sum.data_points:
                            series = (
                                metric.name,
                                tuple(sorted(_attributes(point.attributes).items())),
                                point.start_time_unix_nano,
                            )
                            value = point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
                            self.counters[series] = max(value, self.counters.get(series, value))

    def counted(self, name: str, **attributes: Any) -> float:
        """A counter's total over every process that sent it (each try is a process of its own)."""
        with self._lock:
            return sum(
                value
                for (metric, have, _), value in self.counters.items()
                if metric == name and set(attributes.items()) <= set(have)
            )

    def wait_for(self, what: Callable[[], Any], timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := what()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found


@pytest.fixture(scope="module")
def receiver():
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def airflow(server, receiver, tmp_path_factory, airflow_db):
    env = {
        **durable_env(server, tmp_path_factory.mktemp("durable_cache")),
        # The agent SDK's own traces, which the [otel] extra sends to Airflow's exporter.
        "OPENAI_AGENTS_DISABLE_TRACING": "0",
        "AIRFLOW__TRACES__OTEL_ON": "True",
        "OTEL_TRACES_EXPORTER": "otlp_proto_http",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "AIRFLOW__METRICS__OTEL_ON": "True",
        "AIRFLOW__METRICS__OTEL_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__OTEL_PORT": receiver.url.rsplit(":", 1)[1],
        "AIRFLOW__METRICS__OTEL_INTERVAL_MILLISECONDS": "1000",
    }
    with AirflowServices(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
        yield services


def _ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> set[str]:
    """The span ids of the spans ``span`` is under, its parent first."""
    by_id = {s.span_id: s for s in spans}
    chain = set()
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.add(span.span_id)
    return chain


def test_each_durable_step_of_a_retried_task_is_a_span_of_its_try_and_counted_by_outcome(airflow, server, receiver):
    _each_step_is_a_span_of_its_try_and_counted_by_outcome(airflow, server, receiver, DAG_ID)


def _each_step_is_a_span_of_its_try_and_counted_by_outcome(
    airflow: AirflowServices, server: FakeOpenAIServer, receiver: OtlpReceiver, dag_id: str
) -> None:
    """A run of ``dag_id`` (its task ``triage`` looks the ticket up and answers) whose try 1 fails at its second request."""
    server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-7"}, "call_lookup"), usage=(100, 20)),
        reply.text("Billing, urgent.", usage=(50, 10)),
    )
    server.fail_later(2)  # try 1's second model request
    first_request = len(server.requests)
    run_id = airflow.trigger(dag_id)

    instance = airflow.wait_for_task(dag_id, run_id, TASK_ID, try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.service_log("scheduler")[-4000:]
    assert [r.status for r in server.requests[first_request:]] == [200, 500, 200]

    def try_spans() -> dict[int, ReceivedSpan]:
        """The span of each try, which its worker makes (the task_run spans of all tries share one id)."""
        return {
            s.attributes["airflow.task_instance.try_number"]: s
            for s in list(receiver.spans)
            if s.name == f"worker.{TASK_ID}" and s.attributes.get("airflow.dag_run.run_id") == run_id
        }

    def steps_of_both_tries() -> list[ReceivedSpan]:
        tries = try_spans()
        steps = [s for s in list(receiver.spans) if f"{DURABLE}outcome" in s.attributes]
        mine = [s for s in steps if tries and s.trace_id == next(iter(tries.values())).trace_id]
        return mine if len(tries) == 2 and len(mine) >= 6 else []

    steps = receiver.wait_for(steps_of_both_tries)
    assert steps, f"spans received: {sorted({s.name for s in receiver.spans})}"
    spans, tries = list(receiver.spans), try_spans()

    def steps_under(try_number: int) -> list[tuple[str, str]]:
        # Under the try's span, or under the agent SDK's spans inside it when the [otel] extra is on.
        under = [s for s in steps if tries[try_number].span_id in _ancestors(s, spans)]
        return [(s.name, s.attributes[f"{DURABLE}outcome"]) for s in sorted(under, key=lambda s: s.end)]

    # One span per durable step, under the span of the try that ran it: try 1's live and the model
    # request that failed it, try 2's replayed but for the answer it asked for live.
    assert steps_under(1) == [
        (f"chat {MODEL}", "live"),
        ("execute_tool lookup_ticket", "live"),
        (f"chat {MODEL}", "failed"),
    ]
    assert steps_under(2) == [
        (f"chat {MODEL}", "replayed"),
        ("execute_tool lookup_ticket", "replayed"),
        (f"chat {MODEL}", "live"),
    ]
    assert len(steps) == 6
    by_id = {s.span_id: s for s in spans}
    assert all(by_id[step.parent_id].start <= step.start for step in steps), "a step starts before its parent"

    live_model = next(
        s
        for s in steps
        if s.name == f"chat {MODEL}"
        and s.attributes[f"{DURABLE}outcome"] == "live"
        and tries[1].span_id in _ancestors(s, spans)
    )
    replayed_model = next(
        s for s in steps if s.attributes[f"{DURABLE}outcome"] == "replayed" and s.name == f"chat {MODEL}"
    )
    for span in (live_model, replayed_model):
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.request.model"] == MODEL
        assert (span.attributes["gen_ai.usage.input_tokens"], span.attributes["gen_ai.usage.output_tokens"]) == (
            100,
            20,
        )
        assert span.attributes[f"{DURABLE}cost_usd"] == pytest.approx(0.000072)
        assert 0 < span.start <= span.end
    assert replayed_model.attributes[f"{DURABLE}key"] == live_model.attributes[f"{DURABLE}key"]
    assert tries[2].start < replayed_model.start <= replayed_model.end < tries[2].end

    # Metrics, named airflow.<name> by Airflow's OpenTelemetry logger, from both tries' processes.
    if not AIRFLOW_V_3_3_PLUS:
        pytest.xfail(
            "Airflow 3.2's task process starts a second OpenTelemetry metrics logger when it first "
            "serializes (Stats.initialize in airflow.sdk.serde) and flushes only that one at exit: "
            "what was counted before, its own ti.start too, is lost"
        )

    def counted(name: str, **attributes: Any) -> float:
        return receiver.counted(f"airflow.common_ai.durable.{name}", dag_id=dag_id, task_id=TASK_ID, **attributes)

    assert receiver.wait_for(lambda: counted("step.live") >= 3 and counted("step.replayed") >= 2)
    assert (counted("step.live", kind="model"), counted("step.live", kind="tool")) == (2, 1)
    assert (counted("step.replayed", kind="model"), counted("step.replayed", kind="tool")) == (1, 1)
    assert (counted("step.failed", kind="model"), counted("step.not_recorded")) == (1, 0)
    assert counted("tokens_saved", model=MODEL) == 120
    assert counted("cost_saved_micro_usd", model=MODEL) == 72


def test_the_agent_sdks_own_spans_reach_the_same_exporter_in_the_tasks_trace(airflow, receiver):
    pytest.importorskip("opentelemetry.instrumentation.openai_agents", reason="the [otel] extra is not installed")
    spans = list(receiver.spans)
    workers = {s.span_id for s in spans if s.name == f"worker.{TASK_ID}"}
    assert workers, "run test_each_durable_step_of_a_retried_task_is_a_span_of_its_try_and_counted_by_outcome first"
    agent_spans = [s for s in spans if s.attributes.get("gen_ai.agent.name") == "triage"]
    tool_spans = [s for s in spans if s.name == "lookup_ticket.tool"]
    # Try 1 ran the tool; try 2 replayed it, which the SDK saw as a call of the tool.
    assert (len(agent_spans), len(tool_spans)) == (2, 2), sorted({s.name for s in spans})
    for span in agent_spans + tool_spans:
        assert _ancestors(span, spans) & workers, span.name


def _has_pydantic_ai() -> bool:
    try:
        import pydantic_ai.models.openai  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(
    not _has_pydantic_ai(), reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)
def test_each_durable_step_of_a_retried_pydantic_ai_task_is_the_same_span_and_counted_the_same(
    airflow, server, receiver
):
    # dags/durable_telemetry_pydantic_ai.py: the same task with a Pydantic AI agent.
    _each_step_is_a_span_of_its_try_and_counted_by_outcome(airflow, server, receiver, "durable_telemetry_pydantic_ai")
