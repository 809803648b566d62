"""
What a model call costs in US dollars (R-59): from the maintained price table of ``genai-prices``,
or from a price a deployment sets for a model the table does not know or prices otherwise
(a private deployment, a negotiated rate), which the host gives (``Host.price_overrides``).
A model with neither has an unknown price: its cost is ``None``, never a guess.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow.providers.common.ai.durable.core.host import Host, current_host


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens: input, output, and input read from the provider's prompt cache."""

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input"):
            amount = getattr(self, name)
            if amount is not None and not (isinstance(amount, (int, float)) and 0 <= amount < math.inf):
                raise ValueError(f"{name} of {amount!r} is not a price of 0 or more")

    def cost(self, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """What these tokens cost; where that passes what a float holds, the most it holds (:data:`MOST_USD`)."""
        cached = min(max(cached_input_tokens, 0), input_tokens) if self.cached_input is not None else 0
        try:
            amount = (
                (input_tokens - cached) * self.input + cached * (self.cached_input or 0.0) + output_tokens * self.output
            ) / 1_000_000
        except OverflowError:  # a token count beyond any float
            return MOST_USD
        return counted_usd(amount)


#: The most an amount of money is counted as: a cost beyond what a float holds (a price near its
#: maximum) counts as this, never as infinity, which is not JSON and would read back as nothing.
MOST_USD = sys.float_info.max


def counted_usd(amount: float) -> float:
    """``amount`` of US dollars as it is counted, summed and stored: :data:`MOST_USD` where it overflowed."""
    return amount if math.isfinite(amount) else MOST_USD


def check_price_overrides(host: Host | None = None) -> None:
    """
    Read the deployment's prices (the host's, by default the current one's) before any request is
    sent; refuses them, failing the task for good, where they cannot be read: each try would pay
    for its request, then fail pricing the answer.
    """
    host = host or current_host()
    try:
        host.price_overrides()
    except Exception as error:  # what reading them raises, the first answer's price would raise after it was paid for
        raise host.failing_error(
            f"{error}. No model request is sent, and a retry would be refused the same way: fix it and clear the task"
        ) from None


def price_of(model: str, host: Host | None = None) -> ModelPrice | None:
    """The price of ``model``: the deployment's (the host's), else the table's; ``None`` where neither has one."""
    override = (host or current_host()).price_overrides().get(model)
    return override if override is not None else _table_price(model)


def cost_usd(
    model: str, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0, host: Host | None = None
) -> float | None:
    """What a call of ``model`` with these tokens cost, in US dollars; ``None`` if its price is unknown."""
    price = price_of(model, host)
    if price is None:
        return None
    return price.cost(input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached_input_tokens)


@functools.lru_cache(maxsize=256)
def _table_price(model: str) -> ModelPrice | None:
    # Imported when first asked: the table takes a quarter of a second to load.
    import genai_prices

    try:
        found = genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model_ref=model)
    except LookupError:
        return None
    price = found.model_price
    per_million = [_flat(price.input_mtok), _flat(price.output_mtok)]
    if None in per_million:
        return None  # tiered by the request's size: not a price per token this can apply
    cached = _flat(price.cache_read_mtok) if price.cache_read_mtok is not None else None
    return ModelPrice(input=per_million[0] or 0.0, output=per_million[1] or 0.0, cached_input=cached)


def _flat(value: Any) -> float | None:
    if value is None:
        return 0.0
    if not isinstance(value, (Decimal, int, float)):
        return None
    try:
        amount = float(value)
    except OverflowError:
        return None
    return amount if 0 <= amount < math.inf else None  # a price the table gets wrong is no price


def format_usd(value: float) -> str:
    """``value`` as the log and the page write money: ``$0.000285``, ``$12.5``."""
    return "$" + (f"{value:.6f}".rstrip("0").rstrip(".") or "0")
