"""
What a model call costs in US dollars (R-59): from the maintained price table of ``genai-prices``,
or from a price a deployment sets for a model the table does not know or prices otherwise
(a private deployment, a negotiated rate), installed by the binding as :data:`price_overrides`.
A model with neither has an unknown price: its cost is ``None``, never a guess.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens: input, output, and input read from the provider's prompt cache."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        cached = min(max(cached_input_tokens, 0), input_tokens) if self.cached_input is not None else 0
        return (
            (input_tokens - cached) * self.input + cached * (self.cached_input or 0.0) + output_tokens * self.output
        ) / 1_000_000


#: The prices a deployment set per model name (``[common.ai] model_prices``); installed by the binding.
price_overrides: Callable[[], dict[str, ModelPrice]] = dict


def price_of(model: str) -> ModelPrice | None:
    """The price of ``model``: the deployment's, else the table's; ``None`` where neither has one."""
    override = price_overrides().get(model)
    return override if override is not None else _table_price(model)


def cost_usd(model: str, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float | None:
    """What a call of ``model`` with these tokens cost, in US dollars; ``None`` if its price is unknown."""
    price = price_of(model)
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
    return float(value) if isinstance(value, (Decimal, int, float)) else None


def format_usd(value: float) -> str:
    """``value`` as the log and the page write money: ``$0.000285``, ``$12.5``."""
    return "$" + (f"{value:.6f}".rstrip("0").rstrip(".") or "0")
