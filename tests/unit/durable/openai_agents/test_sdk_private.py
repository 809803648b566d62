"""The OpenAI Agents SDK's private names the adapter relies on are all still there (see _sdk_private)."""

from __future__ import annotations

import asyncio
from importlib.metadata import version

import agents
import pytest

from airflow.providers.common.ai.durable.openai_agents import _sdk_private
from airflow.providers.common.ai.durable.openai_agents._sdk_private import missing_private_names


def test_every_private_name_of_the_sdk_the_adapter_uses_exists_in_the_installed_version():
    missing = missing_private_names()
    assert not missing, (
        f"openai-agents {version('openai-agents')} no longer has {', '.join(missing)}, which "
        "airflow.providers.common.ai.durable.openai_agents._sdk_private relies on: find the new way and update that module"
    )


def test_the_check_names_a_private_name_an_upgrade_removed(monkeypatch):
    import agents.run_internal.run_loop

    monkeypatch.delattr(agents.Model, _sdk_private.CLEANUP_ON_RUN_END)
    monkeypatch.delattr(agents.run_internal.run_loop, "get_model")
    assert set(missing_private_names()) == {_sdk_private.CLEANUP_ON_RUN_END, "agents.run_internal.run_loop.get_model"}


def _error_of(invocation) -> BaseException:
    try:
        asyncio.run(invocation)
    except BaseException as error:
        return error
    raise AssertionError("the invocation did not raise")


@pytest.mark.parametrize("arguments", ['{"city": ', "[]", "{}"])
def test_the_sdks_checks_of_tool_arguments_are_told_from_a_tools_own_model_behavior_error(arguments):
    from agents import ModelBehaviorError, RunContextWrapper, function_tool
    from agents.mcp import MCPUtil
    from agents.tool_context import ToolContext
    from mcp.types import Tool as MCPTool

    @function_tool(failure_error_function=None)
    def forecast(city: str) -> str:
        """The forecast."""
        raise ModelBehaviorError("the tool's own")

    context = ToolContext(context=None, tool_name="forecast", tool_call_id="c1", tool_arguments=arguments)
    refused = _error_of(forecast.on_invoke_tool(context, arguments))
    raised_by_the_tool = _error_of(forecast.on_invoke_tool(context, '{"city": "Paris"}'))
    mcp_tool = MCPTool(name="forecast", inputSchema={"type": "object"})
    mcp_refused = _error_of(MCPUtil.invoke_mcp_tool(None, mcp_tool, RunContextWrapper(None), '{"city": '))

    message = (
        f"openai-agents {version('openai-agents')} checks a tool call's arguments somewhere else than "
        f"{sorted(_sdk_private.ARGUMENT_CHECKS)}: find where and update ARGUMENT_CHECKS in _sdk_private"
    )
    assert isinstance(refused, ModelBehaviorError) and _sdk_private.raised_checking_arguments(refused), message
    assert isinstance(mcp_refused, ModelBehaviorError) and _sdk_private.raised_checking_arguments(mcp_refused), message
    assert isinstance(raised_by_the_tool, ModelBehaviorError)
    assert not _sdk_private.raised_checking_arguments(raised_by_the_tool)


# What differs between the SDK versions the provider supports, and what it refuses.


@pytest.fixture
def installed(monkeypatch):
    """Sets the openai-agents version the adapter's check reads."""

    def set_version(sdk_version: str) -> None:
        monkeypatch.setattr(_sdk_private, "version", lambda name: sdk_version)

    return set_version


@pytest.mark.parametrize("sdk_version", ["0.19.4", "1.0.0", "2.3.1"])
def test_an_sdk_older_than_the_oldest_supported_or_of_a_major_the_adapter_does_not_know_is_refused_naming_it(
    installed, sdk_version
):
    installed(sdk_version)
    with pytest.raises(_sdk_private.UnsupportedSDKVersion, match=rf"openai-agents {sdk_version}\b.*pip install"):
        _sdk_private.check_installed_sdk()


def test_an_sdk_whose_private_surface_changed_is_refused_naming_its_version_and_the_name(monkeypatch):
    import agents.run_internal.run_loop

    monkeypatch.delattr(agents.run_internal.run_loop, "get_model")
    with pytest.raises(_sdk_private.UnsupportedSDKVersion) as refused:
        _sdk_private.check_installed_sdk()
    assert f"openai-agents {version('openai-agents')} " in str(refused.value)
    assert "agents.run_internal.run_loop.get_model" in str(refused.value)
    assert "pip install 'openai-agents>=0.20,<0.26'" in str(refused.value)


def test_a_hooked_function_whose_parameters_changed_is_named_as_a_changed_private_name(monkeypatch):
    import agents.run_internal.tool_execution

    async def invoke(*, tool, context, arguments):
        raise AssertionError("never called")

    monkeypatch.setattr(agents.run_internal.tool_execution, "_invoke_function_tool_with_metadata", invoke)
    assert missing_private_names() == [
        "agents.run_internal.tool_execution._invoke_function_tool_with_metadata(function_tool, context, arguments) "
        "(it takes (tool, context, arguments))"
    ]


def test_an_sdk_newer_than_any_tested_with_the_private_names_there_runs_and_logs_that_it_was_not_tested(
    installed, caplog
):
    installed("0.31.2")
    with caplog.at_level("WARNING", logger=_sdk_private.__name__):
        _sdk_private.check_installed_sdk()
    assert "Durable: openai-agents 0.31.2 is newer than any this provider was tested with (0.20 to 0.25)" in caplog.text


@pytest.mark.parametrize("sdk_version", ["0.20.0", "0.22.3", "0.24.0", "0.25.0"])
def test_a_tested_sdk_is_accepted_without_a_word(installed, caplog, sdk_version):
    installed(sdk_version)
    with caplog.at_level("DEBUG", logger=_sdk_private.__name__):
        _sdk_private.check_installed_sdk()
    assert not caplog.records


def test_an_sdk_with_part_of_a_feature_and_not_the_rest_is_refused_naming_the_part_it_lacks(monkeypatch):
    # Whichever way the installed SDK has the feature, take away or add one of its two names.
    if _sdk_private.has_sdk_feature("closes its model provider"):
        monkeypatch.delattr(agents.RunResultStreaming, _sdk_private.ENSURE_MODEL_PROVIDER_CLEANUP)
        lacking = f"agents.RunResultStreaming.{_sdk_private.ENSURE_MODEL_PROVIDER_CLEANUP}"
    else:
        monkeypatch.setattr(
            agents.RunResultStreaming,
            _sdk_private.ENSURE_MODEL_PROVIDER_CLEANUP,
            lambda self, cleanup: None,
            raising=False,
        )
        lacking = "agents.run_internal.model_provider_lifecycle._close_runner_owned_model_provider"
    assert missing_private_names() == [f"{lacking} (the rest of 'closes its model provider' is there)"]


def _closes_counted(monkeypatch) -> list[str]:
    from agents.models.multi_provider import MultiProvider

    closed: list[str] = []

    async def counted_close(self):
        closed.append("closed")

    monkeypatch.setattr(MultiProvider, "aclose", counted_close)
    return closed


def test_a_durable_run_closes_the_model_provider_the_sdk_made_for_it_exactly_when_the_sdk_does(monkeypatch):
    # 0.22.x on, the SDK closes the MultiProvider it made for a run; before, it never did.
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message
    from tries import Task

    closed = _closes_counted(monkeypatch)
    Runner.run_sync(Agent(name="a", model=ScriptedModel([[assistant_message("hi")]])), "hi")
    by_the_sdk = len(closed)
    assert by_the_sdk == (1 if _sdk_private.has_sdk_feature("closes its model provider") else 0)
    Task().attempt(Agent(name="a", model=ScriptedModel([[assistant_message("hi")]])))
    assert len(closed) == 2 * by_the_sdk


def test_a_durable_streamed_run_closes_the_model_provider_the_sdk_made_for_it_exactly_when_the_sdk_does(monkeypatch):
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message

    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.scope import journal_scope
    from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
    from airflow.providers.common.ai.durable.openai_agents import run_durably_streamed

    closed = _closes_counted(monkeypatch)

    async def streamed(start) -> None:
        result = start(Agent(name="a", model=ScriptedModel([[assistant_message("hi")]])), "hi")
        assert [event async for event in result.stream_events()]
        assert result.final_output == "hi"

    asyncio.run(streamed(Runner.run_streamed))
    by_the_sdk = len(closed)
    assert by_the_sdk == (1 if _sdk_private.has_sdk_feature("closes its model provider") else 0)
    with journal_scope(DurableJournal(InMemoryStorage())):
        asyncio.run(streamed(run_durably_streamed))
    assert len(closed) == 2 * by_the_sdk
