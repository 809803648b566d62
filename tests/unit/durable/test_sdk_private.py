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
