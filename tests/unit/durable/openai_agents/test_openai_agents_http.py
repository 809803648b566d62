"""run_durably with the real OpenAI client against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from agents import (
    Agent,
    AgentsException,
    Model,
    ModelBehaviorError,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    Usage,
    function_tool,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI, InternalServerError
from openai.types.responses import Response, ResponseFailedEvent, ResponseUsage

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import UsageBudget, run_durably_streamed, run_durably_sync
from airflow.providers.common.ai.durable.openai_agents._model import DurableModel
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


# The model's own settings: a durable run sends what a plain run sends.


def test_the_durable_model_defines_every_method_of_the_sdks_model_itself():
    # A method of Model the wrapper inherits answers for the base class, not for the wrapped model
    # (openai-agents 0.25 added two the run loop asks): each is journaled or passed on, never inherited.
    inherited = {
        name
        for name, value in vars(Model).items()
        if callable(value) and not name.startswith("__") and name not in vars(DurableModel)
    }
    assert inherited == set()


def test_the_durable_model_passes_on_what_the_wrapped_model_says_of_its_settings():
    class OwnSettings(OpenAIResponsesModel):
        def get_default_model_settings(self):
            return ModelSettings(verbosity="high")

        def _get_request_settings(self, settings, **kwargs):
            return settings.resolve(ModelSettings(temperature=0.25)), kwargs

    wrapped = OwnSettings(model="gpt-4o", openai_client=AsyncOpenAI(base_url="http://127.0.0.1:9", api_key="x"))
    durable = DurableModel(wrapped, "gpt-4o", durable=None)

    assert durable.get_default_model_settings() == ModelSettings(verbosity="high")
    settings, kwargs = durable._get_request_settings(
        ModelSettings(), prompt=None, has_tools=True, implicit_fields={"x"}
    )
    assert settings == ModelSettings(temperature=0.25)
    assert kwargs == {"prompt": None, "has_tools": True, "implicit_fields": {"x"}}


def sent_plain_and_durable(script: list, model_settings: ModelSettings | None, agent) -> list:
    """
    What a plain run and then a durable run of ``agent()`` sent to a server answering ``script``:
    each ``("sent", request bodies)``, or ``("raised", the TypeError)`` where the run raised one.
    No model named: the run config's provider picks the SDK's default, with its default settings.
    """
    outcomes = []
    for durable in (False, True):
        with FakeOpenAIServer(script) as server:
            client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            run_config = RunConfig(
                model_provider=OpenAIProvider(openai_client=client, use_responses=True), model_settings=model_settings
            )
            try:
                if durable:
                    with journal_scope(DurableJournal(InMemoryStorage())):
                        result = run_durably_sync(agent(), "hi", run_config=run_config)
                else:
                    result = Runner.run_sync(agent(), "hi", run_config=run_config)
            except TypeError as error:
                # Before 0.25 the SDK itself sends extra_args' "reasoning" beside its own default.
                outcomes.append(("raised", str(error)))
                continue
            assert result.final_output == "ok"
            outcomes.append(("sent", [request.body for request in server.requests]))
    return outcomes


@pytest.mark.parametrize(
    ("model_settings", "prompt"),
    [
        # openai-agents 0.25 leaves its own reasoning default out when extra_args hold one.
        pytest.param(ModelSettings(extra_args={"reasoning": {"effort": "high"}}), None, id="reasoning-in-extra-args"),
        # ... and its reasoning and verbosity defaults when a prompt names the model.
        pytest.param(None, {"id": "pmpt_1"}, id="a-prompt-owns-the-model"),
        pytest.param(ModelSettings(temperature=0.5), None, id="explicit-settings"),
    ],
)
def test_a_durable_run_sends_the_request_a_plain_run_sends(model_settings, prompt):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    plain, durable = sent_plain_and_durable(
        [reply.text("ok")],
        model_settings,
        lambda: Agent(name="a", instructions="Answer.", tools=[weather], prompt=prompt),
    )
    assert durable == plain
    assert plain[0] == "raised" or len(plain[1]) == 1


@pytest.mark.parametrize(
    "model_settings",
    [
        pytest.param(ModelSettings(extra_args={"reasoning": {"effort": "high"}}), id="reasoning-in-extra-args"),
        pytest.param(ModelSettings(temperature=0.5), id="explicit-settings"),
    ],
)
def test_a_durable_run_sends_the_requests_a_plain_run_sends_for_an_agent_a_tool_runs_too(model_settings):
    # Agent.as_tool() passes the run config on: the nested agent's model is the provider's, wrapped alike.
    def agent():
        helper = Agent(name="helper", instructions="Find things.").as_tool("helper", "Finds things.")
        return Agent(name="a", instructions="Answer.", tools=[helper])

    script = [reply.tool_calls(("helper", {"input": "find it"}, "call_1")), reply.text("found"), reply.text("ok")]
    plain, durable = sent_plain_and_durable(script, model_settings, agent)
    assert durable == plain
    assert plain[0] == "raised" or len(plain[1]) == 3


# A request whose answer came back failed: what it used is counted, as the SDK counts it (0.25 on).


class FailedAnswers(Model):
    """A model whose answer comes back failed, having used 120 tokens, as the SDK reports it from 0.25 on."""

    def __init__(self) -> None:
        self.requests = 0

    async def get_response(self, *args, **kwargs):
        self.requests += 1
        error = ModelBehaviorError("Responses stream ended with terminal event `response.failed`.")
        error._terminal_usage = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)
        raise error

    async def stream_response(self, *args, **kwargs):
        self.requests += 1
        failed = Response.model_construct(
            id="resp_1",
            created_at=0,
            model="failing",
            object="response",
            output=[],
            status="failed",
            usage=ResponseUsage.model_construct(input_tokens=100, output_tokens=20, total_tokens=120),
        )
        yield ResponseFailedEvent.model_construct(type="response.failed", response=failed, sequence_number=0)


@pytest.mark.parametrize("streamed", [False, True], ids=["get_response", "streamed"])
def test_a_request_whose_answer_failed_counts_what_it_used_in_the_try_and_the_budget(streamed):
    model = FailedAnswers()
    journal = DurableJournal(InMemoryStorage())
    agent = Agent(name="a", instructions="Answer.", model=model)
    with journal_scope(journal), pytest.raises(AgentsException):
        if streamed:

            async def streamed_run():
                result = run_durably_streamed(agent, "hi", budget=UsageBudget(max_total_tokens=10_000))
                async for _ in result.stream_events():
                    pass

            asyncio.run(streamed_run())
        else:
            run_durably_sync(agent, "hi", budget=UsageBudget(max_total_tokens=10_000))

    assert model.requests == 1
    used = journal.stats.usage().models
    assert (used["FailedAnswers"].requests, used["FailedAnswers"].total_tokens) == (1, 120)
    assert journal.stats.budget["spent"]["total_tokens"] == 120


@pytest.mark.parametrize(
    "streamed", [False, True, "journaled"], ids=["as_tool", "as_tool-on_stream", "run_durably_streamed-in-a-tool"]
)
def test_a_model_called_inside_a_tool_counts_what_it_used_answered_or_failed(streamed):
    # With on_stream, Agent.as_tool() streams its agent's run: the model calls inside are streamed;
    # a tool that runs run_durably_streamed journals its stream. Before 0.24 the SDK stops reading a
    # stream at a failed answer's event and keeps the stream: the budget must not wait for it to be
    # let go of before the next request (it hung beside 0.20).
    helper_model = ScriptedModel(
        [[assistant_message("found it")]],
        default_usage=Usage(requests=1, input_tokens=40, output_tokens=10, total_tokens=50),
    )
    failing_model = FailedAnswers()
    on_stream = {"on_stream": lambda event: None} if streamed is True else {}
    failing_tool = Agent(name="failing", model=failing_model).as_tool("failing", "Fails.", **on_stream)
    if streamed == "journaled":

        @function_tool(name_override="failing")
        async def failing_tool(input: str) -> str:
            """Fails."""
            result = run_durably_streamed(Agent(name="failing", model=failing_model), input)
            try:
                async for _ in result.stream_events():
                    pass
            except AgentsException as error:
                return f"failed: {error}"
            return "failed"

    tools = [Agent(name="helper", model=helper_model).as_tool("helper", "Finds things.", **on_stream), failing_tool]
    boss_model = ScriptedModel(
        [
            [function_call("helper", {"input": "find"}, call_id="c1")],
            [function_call("failing", {"input": "fail"}, call_id="c2")],
            [assistant_message("done")],
        ]
    )
    journal = DurableJournal(InMemoryStorage())
    with journal_scope(journal):
        result = run_durably_sync(
            Agent(name="boss", model=boss_model, tools=tools), "go", budget=UsageBudget(max_total_tokens=10_000)
        )

    assert result.final_output == "done"
    assert (len(boss_model.calls), len(helper_model.calls), failing_model.requests) == (3, 1, 1)
    used = journal.stats.usage().models
    # The boss's requests used no tokens; the helper's one used 50; the failed one 120.
    assert (used["ScriptedModel"].requests, used["ScriptedModel"].total_tokens) == (4, 50)
    assert (used["FailedAnswers"].requests, used["FailedAnswers"].total_tokens) == (1, 120)
    assert journal.stats.budget["spent"]["total_tokens"] == 170
