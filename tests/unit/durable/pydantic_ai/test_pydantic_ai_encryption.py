"""
A Pydantic AI run's journal encrypted at rest with ``[core] fernet_key`` (R-47), as an OpenAI
Agents SDK run's is (tests/unit/durable/core/test_encryption.py): the store holds Fernet tokens
only, and the retry replays them.
"""

from __future__ import annotations

from collections import Counter

import pytest

# A module of the real package: without Pydantic AI, "pydantic_ai" alone would import this test folder.
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from cryptography.fernet import Fernet
from durable_backends import (
    FakeTaskStateStore,
    assert_fernet_tokens_only,
    make_storage,
    records_in_folder,
    records_in_store,
)
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.encryption import EncryptedStorage
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.pydantic_ai import run_durably_sync
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

FORECAST = "Zürich: 23 °C, föhn ☀ — forecast #4711"
PROMPT = "Wie ist das Wetter in Zürich?"


def _agent(server: FakeOpenAIServer, runs: Counter) -> Agent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)))

    @agent.tool_plain
    def forecast(city: str) -> str:
        """The forecast for a city."""
        runs[city] += 1
        return FORECAST

    return agent


@pytest.mark.parametrize("backend", ["file", "task-state-store"])
def test_with_a_fernet_key_the_store_holds_no_plain_text_and_a_retry_replays_it(fernet_key, backend, tmp_path):
    fernet_key(Fernet.generate_key().decode())
    accessor = FakeTaskStateStore()
    inner = make_storage(backend, tmp_path, accessor)
    runs: Counter[str] = Counter()
    script = [reply.tool_calls(("forecast", {"city": "Zürich"}, "call_1")), reply.text("Sonnig.")]
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        with journal_scope(DurableJournal(EncryptedStorage(inner))), pytest.raises(ModelHTTPError):
            run_durably_sync(_agent(server, runs), PROMPT)
        assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500)]

        stored = records_in_folder(tmp_path) if backend == "file" else records_in_store(accessor)
        # The model's answer and the tool's output, each one Fernet token and nothing beside it,
        # superseded records (a start mark, an in-flight mark) too.
        assert {key for key, _ in stored} == {"1.1", "1.2"}
        assert_fernet_tokens_only(stored, ("Zürich", "Z\\u00fcrich", "forecast", "gpt-4o", "fingerprint", "state", "{"))

        journal = DurableJournal(EncryptedStorage(make_storage(backend, tmp_path, accessor)))
        with journal_scope(journal):
            result = run_durably_sync(_agent(server, runs), PROMPT)

    assert result.output == "Sonnig."
    # try 2 sent only the request that failed, and the tool ran once in all
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 500), (3, 200)]
    assert server.requests[2].body == server.requests[1].body
    assert runs == {"Zürich": 1}
    assert journal.stats.replayed == {"model": 1, "tool": 1}
