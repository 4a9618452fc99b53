"""Token accounting and cost.

    u = result.usage
    summary(u)   # '3 requests 3347 tokens (3042 in, 305 out) [2688 cached, 88% of input]'
    cost(u, input=0.22, output=0.66, cache_hit=0.007)   # per million tokens
    line(u, {"input": 0.22, "output": 0.66})  # '1 request 120 tokens (100 in, 20 out) · cost $0.000035'

Prices are in US dollars unless ``prices["currency"]`` names another (an ISO code: "EUR").

``prompt_tokens`` always counts the whole prompt, cached part included (Anthropic reports
cache reads and writes beside its input count; its provider adds them in), so
``cache_hit_tokens / prompt_tokens`` is the share of the prompt served from cache.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Mapping

from .errors import OptionError

__all__ = ["Usage", "RequestRecord", "from_openai", "summary", "line", "cost", "cost_parts", "money",
           "cache_hit_rate", "PRICE_KEYS", "ZERO"]

PRICE_KEYS = ("input", "output", "cache_hit")


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
    """One model request: which turn and step it served, how long it took, what it used."""

    turn: int
    step: int
    model: str | None
    latency_s: float
    usage: Usage


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
    unknown = sorted(set(prices) - set(PRICE_KEYS))
    if unknown:
        raise OptionError(f"Unknown price key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                        "prices is {'input': ..., 'output': ..., 'cache_hit': ...} per million tokens")


def cost_parts(u: Usage, *, input: float | None = None, output: float | None = None,
               cache_hit: float | None = None) -> dict[str, float]:
    """What ``u`` cost, split into ``input`` (uncached prompt), ``cache_hit`` and ``output``, from
    per-million-token prices. Cached prompt tokens bill at ``cache_hit`` when it is given (0.0
    counts as given), else as input; a price not given costs nothing."""

    def per_million(tokens: int, price: float | None) -> float:
        return tokens / 1e6 * price if price is not None else 0.0

    cached = min(u.cache_hit_tokens, u.prompt_tokens) if cache_hit is not None else 0
    return {"input": per_million(u.prompt_tokens - cached, input), "cache_hit": per_million(cached, cache_hit),
            "output": per_million(u.completion_tokens, output)}


def cost(u: Usage | None, **prices: float | None) -> float | None:
    """Money spent, from per-million-token prices (see :func:`cost_parts`). None when ``u`` is None."""
    if u is None:
        return None
    parts = cost_parts(u, **prices)
    return parts["input"] + parts["cache_hit"] + parts["output"]


def money(value: float, currency: str | None = None) -> str:
    """An amount with its currency, to the millionth: ``$0.000093`` (US dollars, the default),
    ``0.5 EUR`` for any other ISO code."""
    amount = f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"
    code = (currency or "USD").upper()
    return f"${amount}" if code == "USD" else f"{amount} {code}"


def line(u: Usage, prices: Mapping[str, Any] | None = None) -> str:
    """The usage line every display shows: :func:`summary`, and the cost when prices are known."""
    text = summary(u)
    if prices:
        spent = cost(u, **{key: prices[key] for key in PRICE_KEYS if key in prices}) or 0.0
        text += f" · cost {money(spent, prices.get('currency'))}"
    return text
