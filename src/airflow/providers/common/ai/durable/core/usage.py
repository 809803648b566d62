"""
What one try of an agent task used, and what replaying the journal saved: :class:`TryUsage`.

``AgentOperator`` pushes it to XCom under the key ``usage``; a ``@task`` that runs agents with
``run_durably(_sync)`` reads it with :func:`durable_usage`. Neutral of any agent SDK.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.scope import journal_in_use

#: The XCom key ``AgentOperator`` pushes a try's usage under.
USAGE_XCOM_KEY = "usage"


@dataclass
class ModelUsage:
    """The requests that reached one model and their tokens."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def add(self, *, requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> None:
        self.requests += requests
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.total_tokens += total_tokens


@dataclass
class TryUsage:
    """
    One try's usage: requests and tokens per model (only what reached a model in this try), what
    the replay saved (requests and tokens the replayed calls had cost when they ran), and how
    many calls of each kind (``"model"``, ``"tool"``, ...) replayed, ran live, or ran live but
    could not be recorded; and each call an earlier try left in flight, with how it was resolved.
    """

    models: dict[str, ModelUsage] = field(default_factory=dict)
    saved_requests: int = 0
    saved_tokens: int = 0
    replayed: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)
    not_recorded: dict[str, int] = field(default_factory=dict)
    #: Each call found in flight and how its tool's policy resolved it (step, tool, idempotency_key, policy, outcome).
    in_flight: list[dict[str, str]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(usage.requests for usage in self.models.values())

    @property
    def input_tokens(self) -> int:
        return sum(usage.input_tokens for usage in self.models.values())

    @property
    def output_tokens(self) -> int:
        return sum(usage.output_tokens for usage in self.models.values())

    @property
    def total_tokens(self) -> int:
        return sum(usage.total_tokens for usage in self.models.values())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: what goes to XCom and into the try's summary."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "models": {name: asdict(usage) for name, usage in sorted(self.models.items())},
            "saved": {"requests": self.saved_requests, "tokens": self.saved_tokens},
            "replayed": dict(sorted(self.replayed.items())),
            "live": dict(sorted(self.live.items())),
            "not_recorded": dict(sorted(self.not_recorded.items())),
            "in_flight": [dict(call) for call in self.in_flight],
        }


def durable_usage() -> TryUsage | None:
    """
    The usage of this try's durable runs so far (every ``run_durably`` / ``run_durably_sync`` of
    the running task instance, finished or not); ``None`` when no durable run took place in this
    try, or outside a task.

    Call it in a ``@task`` after its agents ran, for example to return or log what the try cost::

        result = run_durably_sync(agent, "Summarise the incident.")
        usage = durable_usage()
        log.info("%d tokens, %d saved by replay", usage.total_tokens, usage.saved_tokens)
    """
    journal = journal_in_use()
    return journal.stats.usage() if journal is not None else None
