"""The fake OpenAI-compatible server, kept under its old import name for tests.

It lives in ``airflow.providers.common.ai.testing.openai_server`` so that the example DAGs can
start it when they run offline.
"""

from __future__ import annotations

from airflow.providers.common.ai.testing.openai_server import *  # noqa: F403
from airflow.providers.common.ai.testing.openai_server import __all__  # noqa: F401
