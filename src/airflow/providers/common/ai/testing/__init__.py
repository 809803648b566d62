"""
Test and demo helpers: a scripted OpenAI-compatible HTTP server, and the offline endpoint the
example DAGs use when no OpenAI API key is set.

Nothing here is needed to run agents in production; it lets a DAG's tests (and this
provider's own) run an agent through the real ``openai`` client without a network.
"""

from __future__ import annotations

from airflow.providers.common.ai.testing.openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    ToolCall,
    reply,
)

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "ToolCall", "reply"]
