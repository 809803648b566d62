"""
A budget over all tries of a task instance (R-58): :class:`UsageBudget`, the limits a user sets,
and :class:`BudgetLedger`, what the tries of the budget spent, kept with the journal.

Every live model request of every try counts (a request that got no answer counts as a request,
its tokens unknown); a replayed call costs nothing. Before a live
request is sent, what the budget's tries spent plus what the request can at most add (its
``max_tokens``, where the request says) must stay within each limit, or the request is not sent
and the task fails for good: a retry would be refused the same way.

Concurrent requests of one task (``asyncio.gather``, threads) never together pass a limit by more
than one request's worth: under a limit on requests, or on output tokens with ``max_tokens`` set,
a request runs beside others while the most all of them can add fits what is left; under a limit
whose most a request can add is not known before it returns (input and total tokens, money), a
request waits until no other request is in flight, and is sent only if the limit is not reached.

Where it is kept: under one key of the journal (:data:`BUDGET_KEY`), what each try spent, written
behind the agent before the next live request. A clear of a finished task instance starts a new
budget: the system the journal runs in says from which try the budget counts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core import events
from airflow.providers.common.ai.durable.core.encryption import UndecryptableTextError
from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION, INDEX_KEY, lookup_of
from airflow.providers.common.ai.durable.core.prices import MOST_USD, counted_usd, format_usd, price_of
from airflow.providers.common.ai.durable.core.usage import ModelUsage

if TYPE_CHECKING:
    from concurrent.futures import Future

    from airflow.providers.common.ai.durable.core.host import Host
    from airflow.providers.common.ai.durable.core.journal_io import JournalIO

log = logging.getLogger(__name__)

#: The journal's key of what the tries of its budget spent (beside the index's, never an entry's).
BUDGET_KEY = f"{INDEX_KEY}.budget"
#: What a budget limits, as its fields and the ledger name them.
AMOUNTS = ("requests", "input_tokens", "output_tokens", "total_tokens", "cost_usd")


@dataclass(frozen=True)
class UsageBudget:
    """
    Limits on what all tries of a task instance may spend on model requests: requests, input,
    output and total tokens, and cost in US dollars (at the model's price, see ``[common.ai]
    model_prices``). Give it to ``AgentOperator(budget=...)``, ``@task.agent(budget=...)`` or
    ``run_durably(..., budget=...)``; every agent of the task shares it. A request that would pass
    a limit is not sent and the task fails without retry. Refused when it limits nothing or a
    limit is not a number above zero and below what an amount can be counted as (about 1.8e308).
    """

    max_requests: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        limits = {field.name: getattr(self, field.name) for field in fields(self)}
        if all(value is None for value in limits.values()):
            raise ValueError("UsageBudget limits nothing: set at least one of " + ", ".join(limits))
        for name, value in limits.items():
            whole = name != "max_cost_usd"
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
                raise TypeError(f"UsageBudget({name}={value!r}) must be a {'whole number' if whole else 'number'}")
            if not value > 0:
                raise ValueError(f"UsageBudget({name}={value!r}) must be above zero")
            if not value < MOST_USD:  # a whole number this large has no float, nor a repr worth showing
                raise ValueError(
                    f"UsageBudget({name}) is larger than an amount can be counted (about 1.8e308): "
                    "give a number above zero and below it"
                )

    def limits(self) -> dict[str, float]:
        """The limits set, by what they limit (``"requests"``, ..., ``"cost_usd"``)."""
        return {name: getattr(self, f"max_{name}") for name in AMOUNTS if getattr(self, f"max_{name}") is not None}


class BudgetUnreadable(Exception):
    """What the budget's tries spent cannot be read: no request is sent, and a retry reads it again."""


def _zero() -> dict[str, float]:
    return dict.fromkeys(AMOUNTS, 0)


class BudgetLedger:
    """What the tries of a task instance's budget spent, and the requests of this try in flight."""

    def __init__(self, io: JournalIO, host: Host, budget: UsageBudget, *, try_number: int, first_try: int) -> None:
        # The journal's calls to its store, which keeps what the tries spent under BUDGET_KEY.
        self._io = io
        self.host = host
        self.budget = budget
        self.try_number = try_number
        self.first_try = first_try
        self._lock = threading.RLock()
        # What each try spent, by try number, as the store held it when first needed (this try's own included).
        self._tries: dict[int, dict[str, float]] | None = None
        # The requests in flight, each with the most it can add (None where that is not known).
        self._in_flight: list[dict[str, float | None]] = []

    def _spent_by_try(self) -> dict[int, dict[str, float]]:
        if self._tries is None:
            read = self._io.read_later(BUDGET_KEY)
            entry, problem = lookup_of(read)
            # A store that failed to answer may answer the next try; an entry no key decrypts or
            # this release cannot read never will, and a try that starts a budget counts none of it.
            set_aside = problem is not None and self.first_try == self.try_number and _never_readable(read)
            if problem is not None and not set_aside:
                raise BudgetUnreadable(
                    f"Durable: what the tries of this task's budget spent cannot be read, so no request is sent: {problem}"
                )
            recorded = entry.get("tries") if entry is not None else None
            self._tries = {
                int(number): {name: _amount(spent.get(name)) for name in AMOUNTS}
                for number, spent in (recorded.items() if isinstance(recorded, dict) else ())
                if str(number).isdigit() and isinstance(spent, dict)
            }
            self._tries.setdefault(self.try_number, _zero())
            if set_aside:
                # Replaced now, before a later try of this budget reads it.
                log.warning(
                    "Durable: what the tries before try %d spent (an earlier budget of this task instance) cannot "
                    "be read; it is set aside and replaced, and this budget counts from try %d reason=%r",
                    self.first_try,
                    self.first_try,
                    problem,
                )
                self._io.write(BUDGET_KEY, _ledger_text(self._tries), _budget_written)
        return self._tries

    def spent(self) -> dict[str, float]:
        """What the tries of this budget spent, in total."""
        with self._lock:
            tries = self._spent_by_try()
            total = {
                name: sum(spent[name] for number, spent in tries.items() if number >= self.first_try)
                for name in AMOUNTS
            }
            return {**total, "cost_usd": counted_usd(total["cost_usd"])}

    async def admit(self, model: str, key: str, max_output_tokens: int | None) -> dict[str, float | None]:
        """
        Wait until the request to ``model`` at ``key`` may be sent, and count it in flight; the
        most it can add is returned, to hand back with :meth:`settled`. Raises the error that fails
        the task for good when the request would pass a limit.
        """
        most = self._most_a_request_adds(model, max_output_tokens)
        while True:
            with self._lock:
                verdict = self._verdict(most)
                if verdict is True:
                    self._in_flight.append(most)
                    return most
            if verdict is not False:
                host = self.host
                host.emit(events.BudgetRefusal(limit=verdict[0], model=model, key=key))
                raise host.failing_error(self._refusal(model, key, *verdict))
            await asyncio.sleep(0.005)

    def settled(self, most: dict[str, float | None], usage: ModelUsage | None) -> None:
        """A request admitted with ``most`` returned (``usage``: what it used, if it got an answer)."""
        with self._lock:
            self._in_flight.remove(most)
            tries = self._spent_by_try()
            spent = tries[self.try_number]
            # A request that got no answer was still sent: it counts, what it used is not known.
            spent["requests"] += usage.requests if usage is not None else 1
            if usage is None:
                usage = ModelUsage()
            spent["input_tokens"] += usage.input_tokens
            spent["output_tokens"] += usage.output_tokens
            spent["total_tokens"] += usage.total_tokens
            spent["cost_usd"] = counted_usd(spent["cost_usd"] + (usage.cost_usd or 0.0))
            text = _ledger_text(tries)
        self._io.write(BUDGET_KEY, text, _budget_written)

    def summary(self) -> dict[str, Any]:
        """The budget as the try's summary and usage show it: from which try, the limits, spent and left."""
        limits = self.budget.limits()
        spent = self.spent()
        return {
            "first_try": self.first_try,
            "limits": limits,
            "spent": {name: spent[name] for name in limits},
            "left": {name: max(limit - spent[name], 0) for name, limit in limits.items()},
        }

    def _most_a_request_adds(self, model: str, max_output_tokens: int | None) -> dict[str, float | None]:
        """The most one request can add to each amount, where known: its input tokens never are, before it returns."""
        host = self.host
        if self.budget.max_cost_usd is not None and price_of(model, host) is None:
            raise host.failing_error(
                f"Durable: this task's budget limits cost (max_cost_usd={self.budget.max_cost_usd}), but the price "
                f"of model {model!r} is unknown, so no request to it is sent: set its price in "
                f'{host.wording.prices_setting}, for example {{{json.dumps(model)}: {{"input": 0.4, "output": 1.6}}}}'
            )
        return {
            "requests": 1,
            "input_tokens": None,
            "output_tokens": max_output_tokens,
            "total_tokens": None,
            "cost_usd": None,
        }

    def _verdict(self, most: dict[str, float | None]) -> bool | tuple[str, float, float]:
        """True: send it; False: wait for the requests in flight; else the limit it would pass, spent and most."""
        spent = self.spent()
        for name, limit in self.budget.limits().items():
            adds = most[name]
            ahead = [other[name] for other in self._in_flight]
            if spent[name] >= limit:
                return name, spent[name], adds or 0
            if adds is None or None in ahead:
                if self._in_flight:
                    return False
                continue
            if spent[name] + sum(a or 0 for a in ahead) + adds > limit:
                if self._in_flight:
                    return False
                return name, spent[name], adds
        return True

    def _refusal(self, model: str, key: str, limit: str, spent: float, adds: float) -> str:
        shown = format_usd if limit == "cost_usd" else _whole
        tries = self._spent_by_try()
        by_try = ", ".join(
            f"try {number}: {shown(amounts[limit])}"
            for number, amounts in sorted(tries.items())
            if number >= self.first_try
        )
        most = f" and this request may add up to {shown(adds)} (its max_tokens)" if limit == "output_tokens" else ""
        maximum = getattr(self.budget, f"max_{limit}")
        return (
            f"Durable: the request to model {model!r} at {key} was not sent: it would pass this task's budget, "
            f"max_{limit}={maximum}. Its tries spent {shown(spent)} ({by_try}){most}. A retry would be refused "
            f"the same way, so the task fails without one; raise UsageBudget(max_{limit}=...) and clear the task "
            f"(a clear of a finished task instance starts a new budget; what replayed costs nothing)."
        )


def _never_readable(read: Future[str | None]) -> bool:
    """Whether what a read of the budget's entry found will read no better on another try."""
    error = read.exception()
    return error is None or isinstance(error, UndecryptableTextError)


def _ledger_text(tries: dict[int, dict[str, float]]) -> str:
    """The budget's entry: what each try spent."""
    return json.dumps(
        {
            "format": FORMAT_VERSION,
            "kind": "budget",
            "tries": {str(number): amounts for number, amounts in sorted(tries.items())},
        },
        separators=(",", ":"),
    )


def _amount(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0
    try:
        finite = math.isfinite(value)
    except OverflowError:  # a whole number beyond any float
        finite = False
    # An earlier release stored an overflowed cost as Infinity: it was spent, beyond counting.
    return value if finite else MOST_USD if value > 0 else 0


def _whole(value: float) -> str:
    return f"{value:,.0f}"


def _budget_written(error: BaseException | None) -> None:
    if error is not None:
        log.warning(
            "Durable: could not store what this try spent of its budget; a later try counts less reason=%r", str(error)
        )
