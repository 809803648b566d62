"""
What the steps of one journal did in this try: :class:`JournalStats`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.budget import BudgetUnreadable
from airflow.providers.common.ai.durable.core.host import HostWording
from airflow.providers.common.ai.durable.core.plural import counted
from airflow.providers.common.ai.durable.core.prices import counted_usd, format_usd
from airflow.providers.common.ai.durable.core.usage import ModelUsage, TryUsage


@dataclass
class JournalStats:
    """What the steps of one journal did in this try, by kind (``"model"``, ``"tool"``, ...)."""

    replayed: Counter[str] = field(default_factory=Counter)
    ran_live: Counter[str] = field(default_factory=Counter)
    recorded: Counter[str] = field(default_factory=Counter)
    #: Steps that ran live but could not be recorded, each named with its position and why.
    not_recorded: list[str] = field(default_factory=list)
    #: Tokens the replayed steps had cost when they ran (from their recorded ``meta["tokens"]``).
    tokens_saved: int = 0
    #: Requests the replayed steps had cost: one for each replayed step that recorded tokens.
    requests_saved: int = 0
    #: The steps that ran live but could not be recorded, by kind.
    not_recorded_kinds: Counter[str] = field(default_factory=Counter)
    #: What the replayed steps had cost when they ran, in US dollars (those that recorded a cost).
    cost_saved_usd: float = 0.0
    #: The models whose price is unknown: of live steps, or of replayed steps that recorded no cost.
    unknown_prices: set[str] = field(default_factory=set)
    #: What the live steps used, by step name (a model's name), as they reported it with ``used``.
    used: dict[str, ModelUsage] = field(default_factory=dict)
    #: Each divergence of this try: the step's key, the step, and why it did not line up.
    divergences: list[tuple[str, str, str]] = field(default_factory=list)
    #: Each decision on tool calls that needed approval, with who gave it ("issue_refund approved by alice").
    approvals: list[str] = field(default_factory=list)
    #: Runs that ran live because they could not be told apart from another run asking the same (R-51).
    indistinct_runs: int = 0
    #: Each call found in flight (outcome unknown) and how its policy resolved it (R-56): step, tool,
    #: idempotency_key, policy and outcome.
    in_flight: list[dict[str, str]] = field(default_factory=list)
    #: Each call the try was cut off during (a timeout, a cancellation), named with its position:
    #: not counted as ran live, its in-flight mark stays for the next try to resolve (R-56).
    cut_off: list[str] = field(default_factory=list)
    #: Why a step's call was not made, by the step's key: the budget refused it (R-58).
    refusals: dict[str, str] = field(default_factory=dict)

    #: What the tries of the task instance's budget spent (R-58), once a run gave it one.
    ledger: Any = None
    #: How to tell apart runs that ask the same, in the host's words.
    tell_runs_apart: str = HostWording().tell_runs_apart
    # Guards the counts updated as the store answers (on the journal's I/O thread) and by runs in
    # threads of one task; never held while waiting on the store.
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def budget(self) -> dict[str, Any] | None:
        """
        The task instance's budget so far: its first try, limits, spent and left; None without one,
        or where what its tries spent cannot be read (a summary never stops the try's end).
        """
        if self.ledger is None:
            return None
        try:
            return self.ledger.summary()
        except BudgetUnreadable:
            return None

    def usage(self) -> TryUsage:
        """This try's usage so far, as ``AgentOperator`` pushes it to XCom."""
        return TryUsage(
            models={name: dataclasses.replace(usage) for name, usage in self.used.items()},
            saved_requests=self.requests_saved,
            saved_tokens=self.tokens_saved,
            saved_cost_usd=self.cost_saved_usd,
            unknown_prices=sorted(self.unknown_prices),
            replayed=dict(+self.replayed),
            live=dict(+self.ran_live),
            not_recorded=dict(+self.not_recorded_kinds),
            in_flight=[dict(call) for call in self.in_flight],
            budget=self.budget,
        )

    def count_used(self, name: str, usage: ModelUsage) -> None:
        """Count what a live call of model ``name`` used."""
        self.used.setdefault(name, ModelUsage()).add(usage)
        if usage.cost_usd is None:
            self.unknown_prices.add(name)

    def count_replayed(self, kind: str, name: str, meta: dict[str, Any]) -> None:
        """Count a replayed step of ``kind`` named ``name`` and what its recorded ``meta`` says it saved."""
        self.replayed[kind] += 1
        self._count_saved(name, meta)

    def uncount_replayed(self, kind: str, name: str, meta: dict[str, Any]) -> None:
        """Take back :meth:`count_replayed`: the step's recorded result could not be used after all."""
        self.replayed[kind] -= 1
        self.replayed += Counter()  # drops the kind if nothing of it replayed
        self._count_saved(name, meta, sign=-1)

    def count_recorded(self, kind: str) -> None:
        """Count a live step's result that the store holds now."""
        with self._lock:
            self.recorded[kind] += 1

    def count_not_recorded(self, kind: str, step: str, reason: str) -> None:
        """Count a live step's result that could not be recorded, named (``step``) with why."""
        with self._lock:
            self.not_recorded.append(f"{step}: {reason}")
            self.not_recorded_kinds[kind] += 1

    def count_indistinct_runs(self, runs: int) -> None:
        """Count ``runs`` more runs that ran live, not told apart from another run asking the same."""
        with self._lock:
            self.indistinct_runs += runs

    def _count_saved(self, name: str, meta: dict[str, Any], sign: int = 1) -> None:
        tokens = meta.get("tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.tokens_saved += sign * tokens
            self.requests_saved += sign
            cost = meta.get("cost_usd")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                self.cost_saved_usd = counted_usd(self.cost_saved_usd + sign * cost)
            elif sign > 0:
                self.unknown_prices.add(name)

    def _money(self) -> str:
        """What this try spent and the replay saved, in US dollars; the models of unknown price named."""
        if not self.used and not self.requests_saved and self.ledger is None:
            return ""
        spent = counted_usd(sum(usage.cost_usd for usage in self.used.values() if usage.cost_usd is not None))
        unknown = ", ".join(sorted(self.unknown_prices))
        budget = self.budget
        if budget is not None:
            left = ", budget left: " + ", ".join(
                f"{name} {format_usd(amount) if name == 'cost_usd' else f'{amount:,.0f}'}"
                for name, amount in budget["left"].items()
            )
        else:
            left = ", budget: what its tries spent cannot be read" if self.ledger is not None else ""
        if unknown and not spent and not self.cost_saved_usd:
            return f", spent and saved: price unknown ({unknown}){left}"
        unknown = f" (price unknown: {unknown})" if unknown else ""
        return f", spent {format_usd(spent)}, saved {format_usd(self.cost_saved_usd)}{unknown}{left}"

    def summary(self) -> str:
        def by_kind(counter: Counter[str]) -> str:
            total = sum(counter.values())
            kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(counter.items()))
            return f"{total} ({kinds})" if kinds else "0"

        not_recorded = len(self.not_recorded)
        named = f" ({'; '.join(self.not_recorded)})" if not_recorded else ""
        approvals = f", approvals: {'; '.join(self.approvals)}" if self.approvals else ""
        in_flight = "; ".join(
            f"{call['tool']} at {call['step']} ({call['policy']}): {call['outcome']}" for call in self.in_flight
        )
        in_flight = f", calls found in flight: {in_flight}" if in_flight else ""
        cut_off = (
            f", cut off during the call (in flight for the next try): {'; '.join(self.cut_off)}" if self.cut_off else ""
        )
        indistinct = (
            f", {counted(self.indistinct_runs, 'run')} ran live that "
            f"{'asks' if self.indistinct_runs == 1 else 'ask'} the same as another run in flight: {self.tell_runs_apart}"
            if self.indistinct_runs
            else ""
        )
        return (
            f"Durable: replayed {by_kind(self.replayed)}, ran live {by_kind(self.ran_live)}{cut_off}, "
            f"could not record {not_recorded}{named}, saved {counted(self.tokens_saved, 'token')} by replaying"
            f"{self._money()}{approvals}{in_flight}"
            f"{indistinct}"
        )
