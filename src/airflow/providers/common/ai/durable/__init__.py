"""
Durable execution of agent tasks: a journal per task instance that a retry replays.

``core/`` is the engine-neutral journal, ``airflow/`` binds it to Airflow, ``openai_agents`` adapts
the OpenAI Agents SDK; see docs/layout.rst. Inside this provider the core always runs in Airflow,
so the Airflow binding is installed here, before any module of the package is used.
"""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.binding import install as _install_airflow_binding

_install_airflow_binding()
