"""Price table of model calls, USD per 1M tokens, and :func:`cost_usd`.

Local models cost 0.0 (the energy they use is a separate measure). Remote list prices change;
the entries below are list prices at the time of writing and exist so a report has a sensible
default — pass your own table or :class:`Price` for real accounting. The benchmark's escalation
target is the generic ``"expert"`` entry, whose price is a parameter of :func:`price_table`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memcurator.errors import InvalidInput, UnknownName


@dataclass(frozen=True)
class Price:
    """Price of a model, USD per 1,000,000 tokens.

    Parameters
    ----------
    usd_per_mtok_in : float, USD per 1M input (prompt) tokens
    usd_per_mtok_out : float, USD per 1M output (generated) tokens

    Raises
    ------
    InvalidInput
        A negative or non-finite price.
    """

    usd_per_mtok_in: float
    usd_per_mtok_out: float

    def __post_init__(self) -> None:
        for v in (self.usd_per_mtok_in, self.usd_per_mtok_out):
            if not math.isfinite(v) or v < 0:
                raise InvalidInput(
                    f"a price must be a finite number >= 0 USD per 1M tokens, got {v!r}"
                )

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """USD for ``tokens_in`` prompt tokens and ``tokens_out`` generated tokens.

        Examples
        --------
        >>> Price(3.0, 15.0).cost(1_000, 100)
        0.0045
        """
        return (tokens_in * self.usd_per_mtok_in + tokens_out * self.usd_per_mtok_out) / 1e6


LOCAL = Price(0.0, 0.0)
"""A model run on this machine: no money per call."""

DEFAULT_EXPERT_PRICE = Price(3.0, 15.0)
"""Default price of the generic remote ``"expert"`` (a frontier-class model's list price)."""

_REMOTE_LIST_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
}

_LOCAL_MODELS: tuple[str, ...] = ("local", "gemma-3-270m-q4_k_m", "scripted")


def price_table(expert: Price = DEFAULT_EXPERT_PRICE) -> dict[str, Price]:
    """A fresh price table: local models at 0.0, a few remote list prices, and ``"expert"``.

    Parameters
    ----------
    expert : Price
        Price of the generic remote expert the benchmark escalates to.

    Returns
    -------
    dict of str to Price
        Model id to price; the caller may add or change entries.

    Examples
    --------
    >>> t = price_table(expert=Price(1.0, 2.0))
    >>> t["expert"]
    Price(usd_per_mtok_in=1.0, usd_per_mtok_out=2.0)
    >>> t["local"] == LOCAL
    True
    """
    table = {m: LOCAL for m in _LOCAL_MODELS}
    table.update(_REMOTE_LIST_PRICES)
    table["expert"] = expert
    return table


def cost_usd(
    model: str,
    tokens_in: int,
    tokens_out: int,
    *,
    table: dict[str, Price] | None = None,
    default: Price | None = None,
) -> float:
    """Money a call cost, USD.

    Parameters
    ----------
    model : str
        Model id looked up in ``table``.
    tokens_in, tokens_out : int, tokens
    table : dict of str to Price, optional
        Defaults to :func:`price_table` ``()``.
    default : Price, optional
        Price of a model missing from the table. Without it an unknown model is an error, so a
        typo never silently costs 0 USD; pass :data:`LOCAL` to price unknown models at 0.

    Returns
    -------
    float, USD

    Raises
    ------
    UnknownName
        ``model`` is not in the table and no ``default`` is given.
    InvalidInput
        A negative token count.

    Examples
    --------
    >>> cost_usd("gpt-4o-mini", 1_000_000, 0)
    0.15
    >>> cost_usd("my-model", 10, 10, default=LOCAL)
    0.0
    """
    if tokens_in < 0 or tokens_out < 0:
        raise InvalidInput(f"token counts must be >= 0, got {tokens_in!r} in, {tokens_out!r} out")
    prices = price_table() if table is None else table
    price = prices.get(model, default)
    if price is None:
        raise UnknownName(
            f"no price for model {model!r}; known: {sorted(prices)}. "
            "Add it to the table or pass default=Price(...) (default=LOCAL for 0 USD)."
        )
    return price.cost(tokens_in, tokens_out)
