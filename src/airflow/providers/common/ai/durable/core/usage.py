"""
What one try of an agent task used, and what replaying the journal saved: :class:`TryUsage`.

``AgentOperator`` pushes it to XCom under the key ``usage``; a ``@task`` that runs agents with
``run_durably(_sync)`` reads it with :func:`durable_usage`. Neutral of any agent SDK.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.host import Host
from airflow.providers.common.ai.durable.core.prices import cost_usd, counted_usd
from airflow.providers.common.ai.durable.core.scope import journal_in_use

#: The XCom key ``AgentOperator`` pushes a try's usage under.
USAGE_XCOM_KEY = "usage"


@dataclass
class ModelUsage:
    """The requests that reached one model, their tokens, and what they cost in US dollars (``None``: price unknown)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = 0.0

    @classmethod
    def of_call(
        cls,
        model: str,
        *,
        requests: int,
        input_tokens: int,
        output_tokens: int,
        total_tokens: int,
        cached_input_tokens: int = 0,
        host: Host | None = None,
    ) -> ModelUsage:
        """What one call of ``model`` used, its cost at the model's price (the host's, else the table's)."""
        cost = cost_usd(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cached_input_tokens,
            host=host,
        )
        return cls(requests, input_tokens, output_tokens, total_tokens, cost)

    def add(self, other: ModelUsage) -> None:
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.total_tokens += other.total_tokens
        if self.cost_usd is None or other.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd = counted_usd(self.cost_usd + other.cost_usd)


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
    #: What the replayed calls had cost when they ran, in US dollars (those of a known price).
    saved_cost_usd: float = 0.0
    #: The models whose price is unknown, so that their calls are in no cost (spent or saved).
    unknown_prices: list[str] = field(default_factory=list)
    replayed: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)
    not_recorded: dict[str, int] = field(default_factory=dict)
    #: Each call found in flight and how its tool's policy resolved it (step, tool, idempotency_key, policy, outcome).
    in_flight: list[dict[str, str]] = field(default_factory=list)
    #: The task instance's budget (R-58): the first try it counts, its limits, what its tries spent and what is left.
    budget: dict[str, Any] | None = None

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

    @property
    def cost_usd(self) -> float:
        """What this try's live calls cost in US dollars, those of models with a known price."""
        return counted_usd(sum(usage.cost_usd for usage in self.models.values() if usage.cost_usd is not None))

    def count(self, model: str, usage: ModelUsage) -> None:
        """Count a live call of ``model``."""
        self.models.setdefault(model, ModelUsage()).add(usage)
        if usage.cost_usd is None and model not in self.unknown_prices:
            self.unknown_prices.append(model)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: what goes to XCom and into the try's summary."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "models": {name: asdict(usage) for name, usage in sorted(self.models.items())},
            "saved": {"requests": self.saved_requests, "tokens": self.saved_tokens, "cost_usd": self.saved_cost_usd},
            "unknown_prices": sorted(self.unknown_prices),
            "replayed": dict(sorted(self.replayed.items())),
            "live": dict(sorted(self.live.items())),
            "not_recorded": dict(sorted(self.not_recorded.items())),
            "in_flight": [dict(call) for call in self.in_flight],
            **({"budget": self.budget} if self.budget is not None else {}),
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
