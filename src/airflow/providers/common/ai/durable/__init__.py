"""
Durable execution of agent tasks: a journal per task instance that a retry replays.

``core/`` is the engine-neutral journal, ``airflow/`` binds it to Airflow, ``openai_agents`` adapts
the OpenAI Agents SDK; see docs/layout.rst. Inside this provider the core runs in Airflow: importing
the package registers the Airflow host (``airflow/binding.py``) as the default host of the process
(``core/host.py``), built the first time something asks for it (an adapter looking up the running
task's journal, the page masking a text). The import itself runs nothing of Airflow or the binding,
and no module global of the core is assigned from outside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.providers.common.ai.durable.core.host import use_by_default

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.host import Host


def _airflow_host() -> Host:
    from airflow.providers.common.ai.durable.airflow.binding import AIRFLOW_HOST

    return AIRFLOW_HOST


use_by_default(_airflow_host)
