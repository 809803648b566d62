"""
What happens to each durable step, for whoever watches (traces and metrics, R-60): a
:class:`StepEvent` when a step replays, is recorded live, fails, runs live unrecorded or, found in
flight, is resolved as done without running (R-56), and a
:class:`BudgetRefusal` when a budget keeps a request from being sent. The listeners are the
journal's host's (``Host.listeners``); one that raises is logged at DEBUG and
never disturbs the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: What became of a step.
REPLAYED, LIVE, FAILED, NOT_RECORDED, RESOLVED = "replayed", "live", "failed", "not_recorded", "resolved"


@dataclass(frozen=True)
class StepEvent:
    """One step that ended: its kind, name (masked) and key, what became of it, when, and what it used or saved."""

    kind: str
    name: str
    key: str
    outcome: str
    started: float
    ended: float
    #: Tokens the call used (live) or had used when it ran (replayed), where known.
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    #: What the call cost (live) or saved (replayed) in US dollars, where its price is known.
    cost_usd: float | None = None
    #: How a call found in flight was resolved (R-56), if it was one.
    resolution: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class BudgetRefusal:
    """A model request not sent because it would pass the budget: the limit, the model, and the run's key."""

    limit: str
    model: str
    key: str


def emit_to(listeners: Iterable[Callable[[Any], None]], event: StepEvent | BudgetRefusal) -> None:
    """Hand ``event`` to each of ``listeners``; one that raises never disturbs the run."""
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            log.debug("Durable: a listener of durable steps failed", exc_info=True)


def now() -> float:
    return time.time()
