"""
run_durably through a scripted model: each test runs tries against one storage and counts live calls.

A durable run shows what ``Runner.run`` would have shown (R-20, R-49): results, items, contexts and
hooks hold the user's own agents and tools, a result and its run state can be deep-copied, and a
call whose agent or nested run stopped for an approval is not recorded as completed.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import logging
from collections import Counter

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelSettings,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrailTripwireTriggered,
    ToolOutputImage,
    ToolOutputText,
    Usage,
    function_tool,
    handoff,
    output_guardrail,
    tool_output_guardrail,
)
from agents.models.multi_provider import MultiProvider
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task, WorkerDied

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import (
    current_idempotency_key,
    run_durably,
    run_durably_streamed,
    run_durably_sync,
)

USAGE = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)


def model(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps), default_usage=USAGE)


def call(tool: str, call_id: str, **arguments) -> object:
    return function_call(tool, arguments, call_id=call_id)


class Tools:
    """Function tools that count their real runs."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.keys: list[str] = []

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            self.runs["weather"] += 1
            return f"sunny in {city}"

        @function_tool
        def send_mail(to: str) -> str:
            """Send an e-mail."""
            self.runs["send_mail"] += 1
            self.keys.append(current_idempotency_key())
            return f"sent to {to}"

        self.weather, self.send_mail = weather, send_mail


def weather_agent(tools: Tools, scripted: ScriptedModel, **kwargs) -> Agent:
    return Agent(name="assistant", instructions="Be brief.", model=scripted, tools=[tools.weather], **kwargs)


def test_a_retry_replays_the_calls_the_failed_try_completed_and_runs_the_rest_live():
    task, tools = Task(), Tools()
    first = model([call("weather", "c1", city="Paris")], RuntimeError("provider outage"))
    task.failing_attempt(weather_agent(tools, first), RuntimeError)
    assert (len(first.calls), tools.runs["weather"]) == (2, 1)

    second = model([assistant_message("Sunny in Paris.")])
    result = task.attempt(weather_agent(tools, second))

    assert result.final_output == "Sunny in Paris."
    assert (len(second.calls), tools.runs["weather"]) == (1, 1)
    # what the live call was asked is what it would have been asked without the failure
    assert second.calls[0].input[-1]["output"] == "sunny in Paris"
    assert task.journal.stats.replayed == {"model": 1, "tool": 1}


def test_a_replayed_model_call_reports_zero_token_usage_and_the_summary_the_tokens_saved():
    task, tools = Task(), Tools()
    task.failing_attempt(weather_agent(tools, model([call("weather", "c1", city="Paris")], RuntimeError())))
    result = task.attempt(weather_agent(tools, model([assistant_message("Sunny.")])))

    assert [r.usage.total_tokens for r in result.raw_responses] == [0, 120]
    assert "saved 120 tokens" in task.journal.stats.summary()


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "What is the weather in Oslo?"},
        {"instructions": "Be verbose."},
        {"model_settings": ModelSettings(temperature=0.9)},
    ],
    ids=["prompt", "instructions", "settings"],
)
def test_a_changed_request_runs_live_with_every_call_after_it(change, caplog):
    task, tools = Task(), Tools()
    task.failing_attempt(weather_agent(tools, model([call("weather", "c1", city="Paris")], RuntimeError())))

    second = model([call("weather", "c1", city="Paris")], [assistant_message("Sunny.")])
    agent_kwargs = {k: v for k, v in change.items() if k != "prompt"}
    agent = Agent(
        name="assistant",
        model=second,
        tools=[tools.weather],
        **{"instructions": "Be brief.", **agent_kwargs},
    )
    with caplog.at_level(logging.WARNING):
        task.attempt(agent, prompt=change.get("prompt", "What is the weather in Paris?"))
    assert (len(second.calls), tools.runs["weather"]) == (2, 2)
    if "prompt" in change or "instructions" in change or "model_settings" in change:
        # The first call differs: the run matches no recorded run and takes a new number.
        assert "run diverged" in caplog.text and "at 2.1" in caplog.text
        assert "no recorded run starts with this call" in caplog.text


def test_transport_settings_and_the_sdk_prompt_cache_key_leave_the_fingerprint_alone():
    task, tools = Task(), Tools()
    settings = ModelSettings(timeout=10, extra_headers={"x-try": "1"}, extra_args={"prompt_cache_key": "run-1"})
    task.failing_attempt(
        weather_agent(tools, model([call("weather", "c1", city="Paris")], RuntimeError()), model_settings=settings)
    )
    settings = ModelSettings(timeout=99, extra_headers={"x-try": "2"}, extra_args={"prompt_cache_key": "run-2"})
    second = model([assistant_message("Sunny.")])
    task.attempt(weather_agent(tools, second, model_settings=settings))
    assert (len(second.calls), tools.runs["weather"]) == (1, 1)


def test_a_tool_call_whose_exception_the_sdk_turned_into_text_runs_again_on_retry():
    task, runs = Task(), Counter()

    @function_tool
    def flaky() -> str:
        """Fails on the first try."""
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            raise ConnectionError("database unreachable")
        return "rows"

    def custom(context, error):
        return f"custom: {error}"

    @function_tool(failure_error_function=custom)
    def flaky_custom() -> str:
        """Fails on the first try, reported by a custom formatter."""
        runs["flaky_custom"] += 1
        if runs["flaky_custom"] == 1:
            raise ConnectionError("database unreachable")
        return "rows"

    answer = [call("flaky", "c1"), call("flaky_custom", "c2")]
    first = model(answer, RuntimeError("outage"))
    task.failing_attempt(Agent(name="a", model=first, tools=[flaky, flaky_custom]))
    assert "custom: database unreachable" in json.dumps(first.calls[1].input)

    second = model([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[flaky, flaky_custom]))
    assert runs == {"flaky": 2, "flaky_custom": 2}
    assert len(second.calls) == 1  # the answer that asked for them replayed


def test_a_model_behavior_error_raised_by_a_tool_reruns_the_tool_and_replays_the_answer_before_it():
    task, runs = Task(), Counter()

    def reraise(context, error):
        raise error

    @function_tool(failure_error_function=reraise)
    def strict_lookup() -> str:
        """Raises ModelBehaviorError on the first try."""
        runs["strict_lookup"] += 1
        if runs["strict_lookup"] == 1:
            raise ModelBehaviorError("the model asked for a table that does not exist")
        return "found"

    first = model([call("strict_lookup", "c1")])
    task.failing_attempt(Agent(name="a", model=first, tools=[strict_lookup]), ModelBehaviorError)

    second = model([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[strict_lookup]))
    assert runs["strict_lookup"] == 2
    assert len(second.calls) == 1


def test_tool_calls_of_one_answer_keep_the_models_order_whatever_order_they_finish_in():
    task, finished = Task(), []
    delays = {"first": 0.05, "second": 0.0}

    @function_tool
    async def lookup(name: str) -> str:
        """Looks something up."""
        await asyncio.sleep(delays[name])
        finished.append(name)
        return f"value of {name}"

    answer = [call("lookup", "c1", name="first"), call("lookup", "c2", name="second")]
    task.failing_attempt(Agent(name="a", model=model(answer, RuntimeError()), tools=[lookup]))
    assert finished == ["second", "first"]
    assert json.loads(task.storage.entries["1.2"])["result"] == {"value": "value of first"}

    delays.update(first=0.0, second=0.05)  # the retry's timings fall the other way
    second = model([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[lookup]))
    assert finished == ["second", "first"]  # both replayed
    assert second.calls[0].input[-2:] == [
        {"call_id": "c1", "output": "value of first", "type": "function_call_output"},
        {"call_id": "c2", "output": "value of second", "type": "function_call_output"},
    ]


def test_a_run_that_ran_out_of_turns_asks_the_model_again_from_its_last_request():
    task, tools = Task(), Tools()
    first = model([call("weather", "c1", city="Paris")], [call("weather", "c2", city="Paris")])
    task.failing_attempt(weather_agent(tools, first), MaxTurnsExceeded, max_turns=2)

    second = model([assistant_message("Sunny.")])
    result = task.attempt(weather_agent(tools, second), max_turns=2)
    assert result.final_output == "Sunny."
    assert len(second.calls) == 1  # only the last request was asked again
    assert tools.runs["weather"] == 2  # c1 replayed on the retry; c2 ran once, on try 1


def test_an_answer_that_tripped_an_output_guardrail_is_asked_again_on_retry():
    task, tools = Task(), Tools()

    @output_guardrail
    def no_rain(context, agent, output):
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="rain" in output)

    first = model([call("weather", "c1", city="Paris")], [assistant_message("rain")])
    task.failing_attempt(weather_agent(tools, first, output_guardrails=[no_rain]), OutputGuardrailTripwireTriggered)
    second = model([assistant_message("sun")])
    assert task.attempt(weather_agent(tools, second, output_guardrails=[no_rain])).final_output == "sun"
    assert (len(second.calls), tools.runs["weather"]) == (1, 1)


def test_models_of_handoff_agents_named_models_and_run_config_models_are_journaled():
    task, tools = Task(), Tools()
    specialist_model = model([call("weather", "c2", city="Oslo")], RuntimeError())
    specialist = Agent(name="specialist", model=specialist_model, tools=[tools.weather])
    triage = Agent(name="triage", model=model([call("transfer_to_specialist", "h1")]), handoffs=[specialist])
    task.failing_attempt(triage)

    specialist = Agent(name="specialist", model=model([assistant_message("Oslo: sunny")]), tools=[tools.weather])
    triage_model = model()
    triage = Agent(name="triage", model=triage_model, handoffs=[specialist])
    assert task.attempt(triage).final_output == "Oslo: sunny"
    assert (len(triage_model.calls), tools.runs["weather"]) == (0, 1)

    named = Task()

    class Provider(MultiProvider):
        def __init__(self, scripted):
            super().__init__()
            self.scripted = scripted

        def get_model(self, model_name):
            return self.scripted

    named.failing_attempt(
        Agent(name="a", model="gpt-test", tools=[tools.weather]),
        run_config=RunConfig(model_provider=Provider(model([call("weather", "c1", city="Rome")], RuntimeError()))),
    )
    by_name = model([assistant_message("ok")])
    named.attempt(
        Agent(name="a", model="gpt-test", tools=[tools.weather]), run_config=RunConfig(model_provider=Provider(by_name))
    )
    assert len(by_name.calls) == 1

    in_config = Task()
    in_config.failing_attempt(
        Agent(name="a", tools=[tools.weather]),
        run_config=RunConfig(model=model([call("weather", "c1", city="Nice")], RuntimeError())),
    )
    config_model = model([assistant_message("ok")])
    in_config.attempt(Agent(name="a", tools=[tools.weather]), run_config=RunConfig(model=config_model))
    assert len(config_model.calls) == 1


def test_the_model_and_tools_of_an_agent_reached_through_a_handoff_object_replay():
    task, tools = Task(), Tools()

    def specialist(scripted):
        return Agent(name="specialist", model=scripted, tools=[tools.weather])

    first = model([call("weather", "c2", city="Oslo")], RuntimeError())
    triage = Agent(
        name="triage", model=model([call("transfer_to_specialist", "h1")]), handoffs=[handoff(specialist(first))]
    )
    task.failing_attempt(triage)
    again = model([assistant_message("ok")])  # only the request that failed is live
    triage = Agent(name="triage", model=model(), handoffs=[handoff(specialist(again))])
    assert task.attempt(triage).final_output == "ok"
    assert tools.runs["weather"] == 1 and len(again.calls) == 1
    assert task.journal.stats.replayed == {"model": 2, "tool": 1}


def test_an_agent_used_as_a_tool_is_one_call_that_replays_whole():
    task, tools = Task(), Tools()

    def researcher(scripted):
        return Agent(name="researcher", model=scripted, tools=[tools.weather]).as_tool(
            tool_name="research", tool_description="Researches."
        )

    inner = model([call("weather", "i1", city="Paris")], [assistant_message("Paris is sunny")])
    task.failing_attempt(
        Agent(
            name="writer",
            model=model([call("research", "c1", input="Paris")], RuntimeError()),
            tools=[researcher(inner)],
        )
    )
    assert len(inner.calls) == 2

    inner_again = model()
    writer = model([assistant_message("Article: Paris is sunny")])
    result = task.attempt(Agent(name="writer", model=writer, tools=[researcher(inner_again)]))
    assert result.final_output == "Article: Paris is sunny"
    assert (len(inner_again.calls), tools.runs["weather"]) == (0, 1)
    assert writer.calls[0].input[-1]["output"] == "Paris is sunny"


def test_two_runs_in_one_task_are_journaled_apart_and_both_replay_when_the_second_failed():
    task, tools = Task(), Tools()
    first_agent = model([call("weather", "c1", city="Paris")], [assistant_message("Paris: sunny")])
    second_agent = model([call("weather", "c2", city="Oslo")], RuntimeError())

    def both(a, b):
        task.journal = DurableJournal(task.storage)
        with journal_scope(task.journal):
            one = run_durably_sync(weather_agent(tools, a), "Paris?").final_output
            return one, run_durably_sync(weather_agent(tools, b), "Oslo?").final_output

    with pytest.raises(RuntimeError):
        both(first_agent, second_agent)
    again_first, again_second = model(), model([assistant_message("Oslo: sunny")])
    assert both(again_first, again_second) == ("Paris: sunny", "Oslo: sunny")
    assert (len(again_first.calls), len(again_second.calls)) == (0, 1)
    assert tools.runs["weather"] == 2


def test_a_run_started_inside_a_tool_is_journaled_under_that_call():
    task, runs = Task(), Counter()
    inner_models: list[ScriptedModel] = []

    @function_tool
    async def delegate(topic: str) -> str:
        """Runs a helper agent."""
        runs["delegate"] += 1
        helper = Agent(name="helper", model=inner_models.pop(0))
        result = await run_durably(helper, topic)
        if runs["delegate"] == 1:
            raise WorkerDied("worker lost after the helper answered")
        return result.final_output

    inner_models.append(model([assistant_message("helper says hi")]))
    with pytest.raises(WorkerDied):
        task.attempt(Agent(name="boss", model=model([call("delegate", "c1", topic="x")]), tools=[delegate]))
    assert "1.2.1.1" in task.storage.entries

    inner_again = model()
    inner_models.append(inner_again)
    boss = model([assistant_message("done")])
    task.attempt(Agent(name="boss", model=boss, tools=[delegate]))
    assert runs["delegate"] == 2 and len(inner_again.calls) == 0


@pytest.mark.parametrize(
    "output",
    [
        ToolOutputImage(image_url="data:image/png;base64,AAAA", detail="low"),
        [ToolOutputText(text="a"), ToolOutputImage(file_id="file-1")],
        {"rows": 3, 7: ("x", None)},
        datetime.date(2026, 11, 29),
        datetime.datetime(2026, 11, 29, 10, 0, tzinfo=datetime.timezone.utc),
    ],
    ids=["image", "list", "dict", "date", "datetime"],
)
def test_a_structured_tool_output_replays_as_what_the_model_saw(output):
    task, runs = Task(), Counter()

    @function_tool
    def produce() -> object:
        """Produces a structured output."""
        runs["produce"] += 1
        return output

    first = model([call("produce", "c1")], RuntimeError())
    task.failing_attempt(Agent(name="a", model=first, tools=[produce]))
    second = model([assistant_message("done")])
    task.attempt(Agent(name="a", model=second, tools=[produce]))
    assert runs["produce"] == 1
    assert second.calls[0].input[-1] == first.calls[1].input[-1]


def test_a_secret_a_tool_returned_never_reaches_storage():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret("s3cr3t-connection-password")

    @function_tool
    def connection() -> str:
        """Returns a connection URI."""
        return "postgres://user:s3cr3t-connection-password@db/prod"

    task = Task()
    task.failing_attempt(Agent(name="a", model=model([call("connection", "c1")], RuntimeError()), tools=[connection]))
    stored = json.dumps(task.storage.entries)
    assert "s3cr3t-connection-password" not in stored and "user:***@db" in stored


def test_an_interrupted_tool_call_runs_again_with_the_same_idempotency_key():
    task, tools = Task(), Tools()
    answer = [call("send_mail", "c1", to="ops@example.com")]
    original_run = tools.send_mail.on_invoke_tool

    async def dies_after_sending(context, arguments):
        await original_run(context, arguments)
        raise WorkerDied("worker killed after the mail went out")

    tools.send_mail.on_invoke_tool = dies_after_sending
    with pytest.raises(WorkerDied):
        task.attempt(Agent(name="a", model=model(answer), tools=[tools.send_mail]))
    tools.send_mail.on_invoke_tool = original_run

    task.attempt(Agent(name="a", model=model([assistant_message("sent")]), tools=[tools.send_mail]))
    assert tools.runs["send_mail"] == 2
    assert tools.keys[0] == tools.keys[1]


def test_current_idempotency_key_outside_a_durable_tool_call_says_where_it_works():
    with pytest.raises(RuntimeError, match="only works inside a function-tool or MCP tool call"):
        current_idempotency_key()


@pytest.mark.parametrize(
    "option, value",
    [("previous_response_id", "resp_1"), ("conversation_id", "conv_1"), ("auto_previous_response_id", True)],
)
def test_server_side_conversations_are_refused_naming_the_option_before_any_call(option, value):
    scripted = model([assistant_message("hi")])
    with pytest.raises(ValueError, match=option):
        Task().attempt(Agent(name="a", model=scripted), **{option: value})
    assert scripted.calls == ()


def test_a_conversations_session_kept_on_the_providers_servers_is_refused_before_any_call():
    from agents import OpenAIConversationsSession
    from openai import AsyncOpenAI

    scripted = model([assistant_message("hi")])
    client = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1", max_retries=0)
    for session in (
        OpenAIConversationsSession(openai_client=client),
        OpenAIConversationsSession(conversation_id="conv_1", openai_client=client),
    ):
        with pytest.raises(
            ValueError, match=r"cannot use an OpenAIConversationsSession: .* use a session kept locally"
        ):
            Task().attempt(Agent(name="a", model=scripted), session=session)
        with (
            pytest.raises(ValueError, match="cannot use an OpenAIConversationsSession"),
            journal_scope(DurableJournal(InMemoryStorage())),
        ):
            run_durably_streamed(Agent(name="a", model=scripted), "hi", session=session)
    assert scripted.calls == ()


def test_outside_a_task_it_is_exactly_runner_run():
    tools = Tools()
    scripted = model([call("weather", "c1", city="Paris")], [assistant_message("Sunny.")])
    assert run_durably_sync(weather_agent(tools, scripted), "Paris?").final_output == "Sunny."
    assert tools.runs["weather"] == 1


def test_the_users_agent_tools_and_run_config_are_left_as_they_were():
    task, tools = Task(), Tools()
    scripted = model([call("weather", "c1", city="Paris")], [assistant_message("ok")])
    agent = weather_agent(tools, scripted)
    config = RunConfig()
    invoke, provider = tools.weather.on_invoke_tool, config.model_provider
    task.attempt(agent, run_config=config)
    assert agent.model is scripted and agent.tools == [tools.weather]
    assert tools.weather.on_invoke_tool is invoke and config.model_provider is provider


def test_a_recorded_answer_that_no_longer_loads_runs_live_with_every_call_after_it(caplog):
    task, tools = Task(), Tools()
    task.failing_attempt(weather_agent(tools, model([call("weather", "c1", city="Paris")], RuntimeError())))
    entry = json.loads(task.storage.entries["1.1"])
    entry["result"] = {"output": "not a list of output items"}
    task.storage.entries["1.1"] = json.dumps(entry)

    second = model([call("weather", "c1", city="Paris")], [assistant_message("Sunny.")])
    with caplog.at_level(logging.WARNING):
        assert task.attempt(weather_agent(tools, second)).final_output == "Sunny."
    assert (len(second.calls), tools.runs["weather"]) == (2, 2)
    assert "the recorded answer no longer loads" in caplog.text
    assert task.journal.stats.replayed == {}


# What Runner.run would have shown, and tool output guardrails (R-10, like R-15).


def scripted(*steps) -> ScriptedModel:
    return ScriptedModel(list(steps))


def test_a_tool_output_guardrail_that_tripped_makes_the_tool_run_again_while_the_answer_replays():
    runs = Counter()
    outputs = iter(["SECRET-LEAK", "clean"])

    @tool_output_guardrail
    def no_leaks(data) -> ToolGuardrailFunctionOutput:
        if "LEAK" in str(data.output):
            return ToolGuardrailFunctionOutput.raise_exception(output_info="leak")
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_output_guardrails=[no_leaks])
    def fetch() -> str:
        """Fetches."""
        runs["fetch"] += 1
        return next(outputs)

    task = Task()
    first = scripted([function_call("fetch", {}, call_id="c1")], [assistant_message("never")])
    task.failing_attempt(Agent(name="a", model=first, tools=[fetch]), ToolOutputGuardrailTripwireTriggered)
    second = scripted([assistant_message("done")])
    result = task.attempt(Agent(name="a", model=second, tools=[fetch]))
    assert result.final_output == "done"
    assert runs["fetch"] == 2  # the tripped output was not replayed
    assert len(second.calls) == 1  # the answer that asked for the tool replayed
    assert task.journal.stats.replayed == {"model": 1}


def test_a_durable_result_its_run_state_and_a_tools_context_can_be_deep_copied():
    contexts = []

    @function_tool
    def remember(context: RunContextWrapper) -> str:
        """Keeps its context."""
        contexts.append(context)
        return "kept"

    model = scripted([function_call("remember", {}, call_id="c1")], [assistant_message("hi")])
    result = Task().attempt(Agent(name="a", model=model, tools=[remember]))
    assert copy.deepcopy(result).final_output == "hi"
    copy.deepcopy(result.to_state())
    copy.deepcopy(contexts[0])  # its run config carries the journaled run's provider


def approval_agent(runs: Counter) -> Agent:
    @function_tool(needs_approval=True)
    def wire_money(amount: int) -> str:
        """Wires money."""
        runs["wire_money"] += 1
        return "wired"

    inner = scripted([function_call("wire_money", {"amount": 5}, call_id="w1")], [assistant_message("done")])
    return Agent(name="payer", model=inner, tools=[wire_money])


def test_an_agent_used_as_a_tool_that_stopped_for_an_approval_is_not_recorded_as_a_completed_call():
    runs = Counter()
    payer = approval_agent(runs)
    outer = scripted([function_call("pay", {"input": "pay 5"}, call_id="c1")], [assistant_message("paid")])
    task = Task()
    boss = Agent(name="boss", model=outer, tools=[payer.as_tool(tool_name="pay", tool_description="Pays.")])
    result = task.attempt(boss)
    assert result.interruptions and runs["wire_money"] == 0
    assert json.loads(task.storage.entries["1.2"])["state"] != "done"

    # The retry does not replay the unfinished call into a final answer without the approval.
    payer_again = approval_agent(runs)
    boss_again = Agent(
        name="boss",
        model=scripted([assistant_message("paid")]),
        tools=[payer_again.as_tool(tool_name="pay", tool_description="Pays.")],
    )
    assert task.attempt(boss_again).interruptions
    # The payer was asked again, live; before 0.23 the SDK gives a run in the same process the
    # pending result of the first try's nested run instead, as it does Runner.run (a retry in a
    # new process has none to find).
    assert len(payer_again.model.calls) == (1 if runs_have_a_scope_of_their_own() else 0)
    assert runs["wire_money"] == 0


def runs_have_a_scope_of_their_own() -> bool:
    """Whether the SDK keeps the results of nested agent runs per run (0.23 on) or per process."""
    from agents.agent_tool_state import get_agent_tool_state_scope

    scopes = []

    @function_tool
    def note_scope(context: RunContextWrapper) -> str:
        """Notes the scope."""
        scopes.append(get_agent_tool_state_scope(context))
        return "noted"

    model = scripted([function_call("note_scope", {}, call_id="s1")], [assistant_message("ok")])
    Runner.run_sync(Agent(name="a", model=model, tools=[note_scope]), "go")
    return scopes[0] is not None


def test_a_function_tool_whose_nested_durable_run_stopped_for_an_approval_is_not_recorded():
    runs = Counter()

    @function_tool
    async def delegate() -> str:
        """Delegates the payment."""
        runs["delegate"] += 1
        nested = await run_durably(approval_agent(runs), "pay 5")
        return "waiting" if nested.interruptions else "paid"

    storage = InMemoryStorage()
    for _ in range(2):
        journal = DurableJournal(storage)
        with journal_scope(journal):
            run_durably_sync(
                Agent(
                    name="boss",
                    model=scripted([function_call("delegate", {}, call_id="c1")], [assistant_message("ok")]),
                    tools=[delegate],
                ),
                "go",
                run_config=RunConfig(),
            )
        assert json.loads(storage.entries["1.2"])["state"] == "failed"
    assert runs["delegate"] == 2


def test_results_items_contexts_and_hooks_hold_the_users_own_agents_and_tools():
    from agents import RunHooks

    seen: dict[str, list] = {"hook agents": [], "hook tools": [], "context agents": [], "model tools": []}

    @function_tool
    def weather(context: RunContextWrapper, city: str) -> str:
        """The weather."""
        seen["context agents"].append(getattr(context, "agent", None))
        return "sunny"

    class Hooks(RunHooks):
        async def on_tool_start(self, context, agent, tool):
            seen["hook agents"].append(agent)
            seen["hook tools"].append(tool)

    class Spy(ScriptedModel):
        async def get_response(self, *args, **kwargs):
            seen["model tools"].extend(kwargs.get("tools", args[3] if len(args) > 3 else []))
            return await super().get_response(*args, **kwargs)

    specialist = Agent(
        name="specialist",
        model=Spy([[function_call("weather", {"city": "Oslo"}, call_id="c1")], [assistant_message("ok")]]),
        tools=[weather],
    )
    triage = Agent(
        name="triage",
        model=scripted([function_call("transfer_to_specialist", {}, call_id="h1")]),
        handoffs=[specialist],
    )
    result = Task().attempt(triage, hooks=Hooks())
    assert result.last_agent is specialist
    assert all(item.agent in (triage, specialist) for item in result.new_items)
    assert seen["hook agents"] == [specialist] and seen["hook tools"] == [weather]
    assert seen["context agents"] == [specialist]
    assert all(tool is weather for tool in seen["model tools"])
    assert result.to_state()._current_agent is specialist
