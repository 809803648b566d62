"""
Durable execution of agent tasks: a journal per task instance that a retry replays.

``core/`` is the engine-neutral journal, ``airflow/`` binds it to Airflow, ``openai_agents`` adapts
the OpenAI Agents SDK; see docs/layout.rst. Inside this provider the core runs in Airflow: importing
the package imports the binding, which makes the Airflow host (``airflow/binding.py``) the default
host of the process (``core/host.py``), before any adapter looks up the running task's journal.
The core's own modules import nothing of Airflow and no module global of theirs is assigned.
"""

from __future__ import annotations

# Not ``import airflow.providers...``: that would bind this package's name ``airflow`` to Airflow itself.
from airflow.providers.common.ai.durable import airflow as _airflow_binding  # noqa: F401
