"""
Which requests reach the model server on each try, through the real ``openai`` client and the
local OpenAI-compatible test server: models given by name, in ``run_config``, of agents in
``handoffs``, inside ``Agent.as_tool()`` (R-11), and the official endpoint, where the SDK adds a
new ``prompt_cache_key`` to every run (R-6).

The server answers strictly in order, so a retry's first live request gets the next scripted answer
whether anything replayed or not: every test asserts the requests of each try, not only the output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    MultiProvider,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    function_tool,
)
from openai import AsyncOpenAI, InternalServerError

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.testing import FakeOpenAIServer, RecordedRequest, reply

OFFICIAL_BASE_URL = "https://api.openai.com/v1"


class Tools:
    """Function tools that count their real runs."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            self.runs[f"weather {city}"] += 1
            return f"sunny in {city}"

        @function_tool
        def save_report(text: str) -> str:
            """Save a report."""
            self.runs["save_report"] += 1
            return "saved"

        self.weather, self.save_report = weather, save_report


class Task:
    """The tries of one task instance against one server: what each try sent, and its journal."""

    def __init__(self, server: FakeOpenAIServer) -> None:
        self.server = server
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None
        #: The requests each try sent, in order.
        self.requests: list[list[RecordedRequest]] = []

    def attempt(self, build: Callable[[AsyncOpenAI], tuple[Agent, RunConfig | None]], **kwargs):
        """One try, as a new worker runs it: a new client, agent and journal over the same storage."""
        before = len(self.server.requests)
        agent, run_config = build(self.client())
        self.journal = DurableJournal(self.storage)
        try:
            with journal_scope(self.journal):
                return run_durably_sync(agent, "Weather in Paris and Rome?", run_config=run_config, **kwargs)
        finally:
            self.requests.append(self.server.requests[before:])

    def client(self) -> AsyncOpenAI:
        return AsyncOpenAI(base_url=self.server.base_url, api_key="sk-test", max_retries=0)

    @property
    def replayed(self) -> Counter[str]:
        assert self.journal is not None
        return self.journal.stats.replayed


def named_provider(client: AsyncOpenAI) -> MultiProvider:
    return MultiProvider(openai_client=client)


# A retry sends only the request the failed try could not complete, however the model is given.

WEATHER_SCRIPT = [
    reply.tool_calls(("weather", {"city": "Paris"}, "c1")),
    reply.tool_calls(("weather", {"city": "Rome"}, "c2")),
    reply.text("Sunny in Paris and Rome."),
]
HANDOFF = reply.tool_calls(("transfer_to_forecaster", {}, "h1"))


def _forecaster(tools: Tools, model) -> Agent:
    return Agent(name="forecaster", instructions="Forecast.", model=model, tools=[tools.weather])


MODELS: dict[str, tuple[list, Callable[[Tools, AsyncOpenAI], tuple[Agent, RunConfig | None]]]] = {
    "agent-model-by-name": (
        WEATHER_SCRIPT,
        lambda tools, client: (
            Agent(name="a", model="gpt-named", tools=[tools.weather]),
            RunConfig(model_provider=named_provider(client)),
        ),
    ),
    "run-config-model-by-name": (
        WEATHER_SCRIPT,
        lambda tools, client: (
            Agent(name="a", tools=[tools.weather]),
            RunConfig(model="gpt-in-config", model_provider=named_provider(client)),
        ),
    ),
    "run-config-model-object": (
        WEATHER_SCRIPT,
        lambda tools, client: (
            Agent(name="a", tools=[tools.weather]),
            RunConfig(model=OpenAIResponsesModel("gpt-in-config", client)),
        ),
    ),
    "handoff-agent-model-object": (
        [HANDOFF, *WEATHER_SCRIPT],
        lambda tools, client: (
            Agent(
                name="triage",
                model=OpenAIResponsesModel("gpt-triage", client),
                handoffs=[_forecaster(tools, OpenAIChatCompletionsModel("gpt-forecaster", client))],
            ),
            None,
        ),
    ),
    "handoff-agent-model-by-name": (
        [HANDOFF, *WEATHER_SCRIPT],
        lambda tools, client: (
            Agent(name="triage", model="gpt-triage", handoffs=[_forecaster(tools, "gpt-forecaster")]),
            RunConfig(model_provider=named_provider(client)),
        ),
    ),
}


@pytest.mark.parametrize("given", MODELS)
def test_a_retry_sends_only_the_request_the_failed_try_could_not_complete(given):
    script, build = MODELS[given]
    tools = Tools()
    with FakeOpenAIServer(script, fail_requests={len(script)}) as server:
        task = Task(server)
        with pytest.raises(InternalServerError):
            task.attempt(lambda client: build(tools, client))
        assert tools.runs == {"weather Paris": 1, "weather Rome": 1}

        result = task.attempt(lambda client: build(tools, client))

    assert result.final_output == "Sunny in Paris and Rome."
    first_try, second_try = task.requests
    assert [r.status for r in first_try] == [200] * (len(script) - 1) + [500]
    # Try 2 sent one request: the one that failed, asked exactly as it was.
    assert [r.status for r in second_try] == [200]
    assert second_try[0].path == first_try[-1].path
    assert second_try[0].body == first_try[-1].body
    assert tools.runs == {"weather Paris": 1, "weather Rome": 1}
    model_calls = len(script) - 1
    assert task.replayed == {"model": model_calls, "tool": 2}
    assert task.journal.stats.ran_live == {"model": 1}
    # Replayed answers cost nothing in this try; the live one what the server reported.
    assert [response.usage.total_tokens for response in result.raw_responses] == [0] * model_calls + [15]


# An agent used as a tool is one journaled call: its replay never reaches the inner model.

AS_TOOL_SCRIPT = [
    reply.tool_calls(("research", {"input": "Paris"}, "c1")),  # writer
    reply.tool_calls(("weather", {"city": "Paris"}, "i1")),  # researcher, inside the tool
    reply.text("Paris is sunny."),  # researcher
    reply.tool_calls(("save_report", {"text": "Paris is sunny."}, "c2")),  # writer
    reply.text("Reported."),  # writer: fails on try 1, answered on try 2
]


def _writer(tools: Tools, writer_model, researcher_model) -> Agent:
    researcher = Agent(name="researcher", instructions="You research.", model=researcher_model, tools=[tools.weather])
    return Agent(
        name="writer",
        instructions="You write.",
        model=writer_model,
        tools=[researcher.as_tool(tool_name="research", tool_description="Researches."), tools.save_report],
    )


INNER_MODELS: dict[str, Callable[[Tools, AsyncOpenAI], tuple[Agent, RunConfig | None]]] = {
    "by-name": lambda tools, client: (
        _writer(tools, OpenAIResponsesModel("gpt-writer", client), "gpt-researcher"),
        RunConfig(model_provider=named_provider(client)),
    ),
    "run-config-model-by-name": lambda tools, client: (
        _writer(tools, None, None),
        RunConfig(model="gpt-shared", model_provider=named_provider(client)),
    ),
    "run-config-model-object": lambda tools, client: (
        _writer(tools, None, None),
        RunConfig(model=OpenAIResponsesModel("gpt-shared", client)),
    ),
}


@pytest.mark.parametrize("inner", INNER_MODELS)
def test_an_agent_used_as_a_tool_replays_as_one_call_without_a_request_to_its_model(inner):
    build, tools = INNER_MODELS[inner], Tools()
    with FakeOpenAIServer(AS_TOOL_SCRIPT, fail_requests={5}) as server:
        task = Task(server)
        with pytest.raises(InternalServerError):
            task.attempt(lambda client: build(tools, client))
        result = task.attempt(lambda client: build(tools, client))

    assert result.final_output == "Reported."
    first_try, second_try = task.requests
    assert [r.body["instructions"] for r in first_try] == ["You write.", "You research.", "You research."] + [
        "You write."
    ] * 2
    # Try 2: no request of the researcher; only the writer's request that failed.
    assert [r.body["instructions"] for r in second_try] == ["You write."]
    assert second_try[0].body == first_try[-1].body
    assert tools.runs == {"weather Paris": 1, "save_report": 1}
    # The writer's two answers and its two tool calls; the researcher's calls are inside "research".
    assert task.replayed == {"model": 2, "tool": 2}


# The official endpoint: the SDK adds a prompt_cache_key of its own to every run.


class RoutedToLocalServer(httpx.AsyncBaseTransport):
    """Sends every request, whatever its URL says, to the local test server: nothing leaves the machine."""

    def __init__(self, server: FakeOpenAIServer) -> None:
        self.target = httpx.URL(server.base_url)
        self.transport = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme=self.target.scheme, host=self.target.host, port=self.target.port)
        return await self.transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self.transport.aclose()


class OfficialEndpointTask(Task):
    def client(self) -> AsyncOpenAI:
        http_client = httpx.AsyncClient(transport=RoutedToLocalServer(self.server), trust_env=False)
        return AsyncOpenAI(base_url=OFFICIAL_BASE_URL, api_key="sk-test", max_retries=0, http_client=http_client)


def _official_agent(tools: Tools, model_class, settings: ModelSettings) -> Callable:
    def build(client: AsyncOpenAI) -> tuple[Agent, None]:
        model = model_class("gpt-4.1", client)
        return Agent(name="a", model=model, tools=[tools.weather], model_settings=settings), None

    return build


def _cache_key(request: RecordedRequest) -> str:
    return request.body["prompt_cache_key"]


@pytest.mark.parametrize("model_class", [OpenAIResponsesModel, OpenAIChatCompletionsModel])
def test_on_the_official_endpoint_a_retry_replays_although_the_sdk_sends_a_new_prompt_cache_key(model_class):
    tools = Tools()
    with FakeOpenAIServer(WEATHER_SCRIPT, fail_requests={3}) as server:
        task = OfficialEndpointTask(server)
        with pytest.raises(InternalServerError):
            task.attempt(_official_agent(tools, model_class, ModelSettings()))
        task.attempt(_official_agent(tools, model_class, ModelSettings()))

    first_try, second_try = task.requests
    assert {request.headers["host"] for request in first_try + second_try} == {"api.openai.com"}
    # The SDK keys each run's requests alike, and every run differently.
    assert len({_cache_key(request) for request in first_try}) == 1
    assert _cache_key(second_try[0]) != _cache_key(first_try[0])
    assert [r.status for r in second_try] == [200]
    assert {**second_try[0].body, "prompt_cache_key": None} == {**first_try[-1].body, "prompt_cache_key": None}
    assert tools.runs == {"weather Paris": 1, "weather Rome": 1}
    assert task.replayed == {"model": 2, "tool": 2}


def test_a_changed_timeout_in_the_model_settings_still_replays():
    tools = Tools()
    with FakeOpenAIServer(WEATHER_SCRIPT, fail_requests={3}) as server:
        task = OfficialEndpointTask(server)
        with pytest.raises(InternalServerError):
            task.attempt(_official_agent(tools, OpenAIResponsesModel, ModelSettings(temperature=0.2, timeout=30)))
        # The user gave the model longer after the failure: a transport setting, not a new question.
        task.attempt(_official_agent(tools, OpenAIResponsesModel, ModelSettings(temperature=0.2, timeout=90)))

    assert [r.status for r in task.requests[1]] == [200]
    assert tools.runs == {"weather Paris": 1, "weather Rome": 1}
    assert task.replayed == {"model": 2, "tool": 2}


def test_a_changed_temperature_in_the_model_settings_runs_live():
    """The control for the timeout test: an answer-shaping setting does change the fingerprint."""
    tools = Tools()
    with FakeOpenAIServer([*WEATHER_SCRIPT[:2], *WEATHER_SCRIPT], fail_requests={3}) as server:
        task = OfficialEndpointTask(server)
        with pytest.raises(InternalServerError):
            task.attempt(_official_agent(tools, OpenAIResponsesModel, ModelSettings(temperature=0.2, timeout=30)))
        task.attempt(_official_agent(tools, OpenAIResponsesModel, ModelSettings(temperature=0.9, timeout=30)))

    assert [r.status for r in task.requests[1]] == [200, 200, 200]
    assert tools.runs == {"weather Paris": 2, "weather Rome": 2}
    assert task.replayed == {}
