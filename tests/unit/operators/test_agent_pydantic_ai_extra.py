"""
AgentOperator without the extra [pydantic-ai]: the operator module imports and runs OpenAI Agents
SDK agents (tests/unit/operators/test_agent.py runs on every line), and a Pydantic AI agent is
refused naming the extra. Runs with and without Pydantic AI installed.
"""

from __future__ import annotations

import importlib
import sys

import pytest
from airflow.exceptions import AirflowOptionalProviderFeatureException

ADAPTER = "airflow.providers.common.ai.durable.pydantic_ai"


class StandIn:
    """What the operator tells a Pydantic AI agent by: a class of Pydantic AI's modules."""


StandIn.__module__ = "pydantic_ai.agent"


@pytest.fixture
def without_pydantic_ai(monkeypatch):
    """As if Pydantic AI were not installed, whether it is or not."""
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    for name in [name for name in sys.modules if name == ADAPTER or name.startswith(f"{ADAPTER}.")]:
        monkeypatch.delitem(sys.modules, name)


def test_the_operator_module_imports_without_pydantic_ai(without_pydantic_ai, monkeypatch):
    operator_module = "airflow.providers.common.ai.operators.agent"
    monkeypatch.delitem(sys.modules, operator_module, raising=False)
    assert importlib.import_module(operator_module).AgentOperator


def test_a_pydantic_ai_agent_without_the_extra_is_refused_when_the_dag_is_parsed_naming_it(without_pydantic_ai):
    from airflow.providers.common.ai.operators.agent import AgentOperator

    with pytest.raises(AirflowOptionalProviderFeatureException, match=r"optional extra \[pydantic-ai\]"):
        AgentOperator(task_id="t", prompt="p", agent=StandIn(), durable=True)


def test_an_option_of_the_openai_agents_sdk_is_refused_before_the_extra_is_looked_for(without_pydantic_ai):
    from airflow.providers.common.ai.operators.agent import AgentOperator

    with pytest.raises(ValueError, match="^AgentOperator 't': openai_conn_id is an option of OpenAI Agents SDK"):
        AgentOperator(task_id="t", prompt="p", agent=StandIn(), openai_conn_id="openai_default")
