"""Token accounting and cost.

    u = result.usage
    summary(u)   # '3 requests 3347 tokens (3042 in, 305 out) [2688 cached, 88% of input]'
    cost(u, input=0.22, output=0.66, cache_hit=0.007)   # per million tokens, your currency
    line(u, {"input": 0.22, "output": 0.66})            # the summary and '· cost $0.000093'

Prices are per million tokens: ``input``, ``output``, and where the provider bills them
differently ``cache_hit`` (prompt tokens read from cache), ``cache_write`` (written to it) and
``reasoning`` (thinking tokens, part of the output); ``currency`` says what they are in (USD by
default). Without prices, :mod:`bettong_nb.pricing` looks each request up in a price table.

``prompt_tokens`` always counts the whole prompt, cached part included (Anthropic reports
cache reads and writes beside its input count; its provider adds them in), so
``cache_hit_tokens / prompt_tokens`` is the share of the prompt served from cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Mapping

from ..errors import OptionError

__all__ = ["Usage", "RequestRecord", "duration_text", "from_openai", "summary", "line", "money", "cost", "cost_parts",
           "cache_hit_rate", "check_prices", "PRICE_KEYS", "ZERO"]

PRICE_KEYS = ("input", "output", "cache_hit", "cache_write", "reasoning")
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


@dataclass(frozen=True)
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: "Usage | None") -> "Usage":
        if other is None:
            return self
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Usage)))

    __radd__ = __add__

    def __str__(self) -> str:
        return summary(self)


ZERO = Usage()


@dataclass(frozen=True)
class RequestRecord:
    """One model request: which turn and step it served, how long it took, what it used, and
    how many images it carried (all those in its transcript, earlier turns' included) and who served
    it when (``provider`` is the provider's name, ``host`` the API host it went to, ``at`` the Unix
    time it was sent): prices depend on them. ``cell`` is the notebook cell it ran from (its id,
    or ``In[n]``; None outside a notebook, see :func:`bettong_nb.core.kernel.current_cell`).
    ``reported_cost``: what the server said it cost (a gateway such as LiteLLM's proxy reports
    each response's cost), used before any price table."""

    turn: int
    step: int
    model: str | None
    latency_s: float
    usage: Usage
    provider: str | None = None
    at: float | None = None
    images: int = 0
    host: str | None = None
    cell: str | None = None
    reported_cost: float | None = None


def _first(block: Mapping[str, Any], *paths: str) -> int:
    """The first present value among dotted paths: a present 0 wins over a later source."""
    for path in paths:
        value: Any = block
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            return int(value)
    return 0


def from_openai(block: Mapping[str, Any] | None) -> Usage:
    """Usage of one request from an OpenAI-style ``usage`` block (DeepSeek's fields included)."""
    block = block or {}
    prompt = _first(block, "prompt_tokens")
    hit = _first(block, "prompt_cache_hit_tokens", "prompt_tokens_details.cached_tokens")
    miss = _first(block, "prompt_cache_miss_tokens") if "prompt_cache_miss_tokens" in block else prompt - hit
    return Usage(
        requests=1,
        prompt_tokens=prompt,
        completion_tokens=_first(block, "completion_tokens"),
        total_tokens=_first(block, "total_tokens"),
        cache_hit_tokens=hit,
        cache_miss_tokens=max(miss, 0),
        reasoning_tokens=_first(block, "completion_tokens_details.reasoning_tokens"),
    )


def cache_hit_rate(u: Usage) -> float | None:
    return u.cache_hit_tokens / u.prompt_tokens if u.prompt_tokens > 0 else None


def summary(u: Usage) -> str:
    parts = [f"{u.requests} request{'' if u.requests == 1 else 's'}"]
    total = u.total_tokens if u.total_tokens > 0 else u.prompt_tokens + u.completion_tokens
    parts.append(f"{total} tokens ({u.prompt_tokens} in, {u.completion_tokens} out)")
    if u.cache_hit_tokens > 0:
        rate = cache_hit_rate(u) or 0.0
        pct = Decimal(repr(100 * rate)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        parts.append(f"[{u.cache_hit_tokens} cached, {pct}% of input]")
    return " ".join(parts)


def check_prices(prices: Mapping[str, Any]) -> None:
    unknown = sorted(set(prices) - set(PRICE_KEYS) - {"currency"})
    if unknown:
        raise OptionError(f"Unknown price key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                        f"prices is {{'input': ..., 'output': ..., 'cache_hit': ...}} per million tokens "
                        f"(keys: {', '.join(PRICE_KEYS)}, and 'currency')")


def cost_parts(u: Usage, *, input: float | None = None, output: float | None = None,
               cache_hit: float | None = None, cache_write: float | None = None, reasoning: float | None = None,
               currency: str | None = None) -> dict[str, float]:
    """What ``u`` cost, split into ``input`` (prompt tokens neither read from nor written to the
    cache), ``cache_hit``, ``cache_write`` and ``output`` (reasoning included), from
    per-million-token prices. Cached and written prompt tokens bill at their own price when it is
    given (0.0 counts as given), else as input; reasoning tokens likewise bill as output unless
    ``reasoning`` is given. A price not given costs nothing; ``currency`` changes no number."""

    def per_million(tokens: int, price: float | None) -> float:
        return tokens / 1e6 * price if price is not None else 0.0

    read = min(u.cache_hit_tokens, u.prompt_tokens) if cache_hit is not None else 0
    written = min(u.cache_write_tokens, u.prompt_tokens - read) if cache_write is not None else 0
    thought = min(u.reasoning_tokens, u.completion_tokens) if reasoning is not None else 0
    return {"input": per_million(u.prompt_tokens - read - written, input), "cache_hit": per_million(read, cache_hit),
            "cache_write": per_million(written, cache_write),
            "output": per_million(u.completion_tokens - thought, output) + per_million(thought, reasoning)}


def cost(u: Usage | None, **prices: Any) -> float | None:
    """Money spent, from per-million-token prices (see :func:`cost_parts`). None when ``u`` is None."""
    if u is None:
        return None
    return sum(cost_parts(u, **prices).values())


def money(value: float, currency: str | None = None) -> str:
    """``0.000093`` as ``$0.000093`` (USD unless ``currency`` says otherwise; ``0.000093 CHF``).
    Six decimals, more for an amount smaller than that (two significant digits: ``$0.0000000012``),
    so a tiny amount never reads as ``$0``."""
    if not value or not math.isfinite(value):
        digits = "0" if value == 0 else str(value)  # NaN (an unknown price) reads as nan, not a crash
    else:
        places = max(6, 1 - math.floor(math.log10(abs(value))))
        digits = f"{value:.{places}f}".rstrip("0").rstrip(".")
    code = (currency or "USD").upper()
    return f"{_SYMBOLS[code]}{digits}" if code in _SYMBOLS else f"{digits} {code}"


def line(u: Usage, prices: Mapping[str, Any] | None = None, *, spent: float | None = None) -> str:
    """The usage line every display shows: :func:`summary`, and what it cost — ``spent`` when
    given (a ledger prices each request), else from ``prices``; no cost when neither is known
    (a NaN ``spent`` is unknown, never shown as 0)."""
    text = summary(u)
    if spent is None and prices:
        spent = cost(u, **prices)
    if spent is not None and not math.isnan(spent):
        text += f" · cost {money(spent, (prices or {}).get('currency'))}"
    return text


def duration_text(seconds: float | None) -> str:
    """A duration as a person reads it: ``<1 ms``, ``340 ms``, ``12.3 s`` ("" for None)."""
    if seconds is None:
        return ""
    if seconds < 0.0005:
        return "<1 ms"  # not "0 ms": it did take some time
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
