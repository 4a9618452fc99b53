"""What each model request cost: the prices you give, else a maintained price table, else unknown.

    quote(record)                            # Quote(prices={...}, source="genai-prices 0.2.3 (2026-12-01)")
    quote(record, {"input": 0.27, "output": 1.10})   # Quote(prices=..., source="given")
    request_cost(record)                     # usage.cost_parts of it: input, cache_hit, cache_write, output
    total(result.requests)                   # their sum; NaN when any request's price is unknown

The table is genai-prices (``pip install 'bettong_nb[prices]'``), read from the copy installed
with it, never fetched. It knows a request by its provider's name (``deepseek``, ``anthropic``,
``openai``) and model, at the time it was sent, so dated and off-peak prices apply, and tiers
by prompt size; its prices are in USD. Its prices are those providers' own, so they apply only
to a request that went to the provider's own API host (:data:`API_HOSTS`, the presets' default
``base_url``): ``bettong_nb.openai(base_url=<a local server>)`` is not priced as OpenAI even when
the model's name is one OpenAI sells. A local provider (``ollama``) costs 0. Anything else —
genai-prices not installed, a provider or model it does not know (``offline``, ``scripted``,
``replay``), another ``base_url`` (a llama.cpp server, a proxy, a gateway) — is unknown: NaN
costs, never 0, unless ``prices`` are given.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from .usage import RequestRecord, cost_parts

__all__ = ["Quote", "quote", "request_cost", "total", "currency", "LOCAL_PROVIDERS", "UNPRICED_PROVIDERS", "TABLE",
           "UNKNOWN", "API_HOSTS", "GATEWAY"]

TABLE = "genai-prices"
GATEWAY = "gateway"  # the price source of a request whose server reported its cost
LOCAL_PROVIDERS = frozenset({"ollama"})
# The hosts whose prices the table holds, by provider name: the presets' default base_url hosts.
API_HOSTS = {"deepseek": "api.deepseek.com", "openai": "api.openai.com", "anthropic": "api.anthropic.com"}
# Providers no table has heard of, so the table is not even loaded for them (it takes a while).
UNPRICED_PROVIDERS = frozenset({"offline", "scripted", "replay"})
# genai-prices' price keys (per million tokens) and the usage.cost_parts keyword each one is.
_TABLE_KEYS = {"input_mtok": "input", "output_mtok": "output", "cache_read_mtok": "cache_hit",
               "cache_write_mtok": "cache_write", "output_reasoning_mtok": "reasoning"}


@dataclass(frozen=True)
class Quote:
    """The prices of one request (per million tokens; None: unknown) and where they came from:
    ``"given"``, ``"local"``, the table's name, version and the date priced, or ``"unknown"``."""

    prices: Mapping[str, Any] | None
    source: str


UNKNOWN = Quote(None, "unknown")
_PARTS = ("input", "cache_hit", "cache_write", "output")


def quote(record: RequestRecord, prices: Mapping[str, Any] | None = None) -> Quote:
    """The prices ``record`` is billed at: ``prices`` when given, else the table's."""
    if prices:
        return Quote(prices, "given")
    if record.provider in LOCAL_PROVIDERS:
        return Quote({"input": 0.0, "output": 0.0}, "local")
    if not (record.provider and record.model) or record.provider in UNPRICED_PROVIDERS:
        return UNKNOWN
    if record.host is None or record.host != API_HOSTS.get(record.provider):
        return UNKNOWN  # another server under the provider's name: its prices are not the table's
    when = datetime.fromtimestamp(record.at, timezone.utc) if record.at is not None else datetime.now(timezone.utc)
    found = _table_prices(record.provider, record.model, when.replace(second=0, microsecond=0))
    if found is None:
        return UNKNOWN
    version, table = found
    return Quote({key: _tier(price, record.usage.prompt_tokens) for key, price in table.items()},
                 f"{TABLE} {version} ({when:%Y-%m-%d})")


def request_cost(record: RequestRecord,
                 prices: Mapping[str, Any] | None = None) -> tuple[dict[str, float], float, str]:
    """``record``'s cost split (:func:`bettong_nb.usage.cost_parts`), its total and its price
    source. Given ``prices`` come first; then the cost the server reported (a gateway's: its
    total, the split unknown, source ``"gateway"``); then the table. Every part and the total
    are NaN when the price is unknown."""
    if not prices and record.reported_cost is not None:
        return dict.fromkeys(_PARTS, math.nan), record.reported_cost, GATEWAY
    found = quote(record, prices)
    if found.prices is None:
        return dict.fromkeys(_PARTS, math.nan), math.nan, found.source
    parts = cost_parts(record.usage, **found.prices)
    return parts, math.fsum(parts.values()), found.source


def total(records: Iterable[RequestRecord], prices: Mapping[str, Any] | None = None) -> float:
    """What ``records`` cost together: NaN when any one's price is unknown (0.0 for none)."""
    return math.fsum(request_cost(r, prices)[1] for r in records)


def currency(prices: Mapping[str, Any] | None) -> str:
    """The currency costs are in: the given prices' ``currency``, else the table's (USD)."""
    return str((prices or {}).get("currency") or "USD")


@functools.lru_cache(maxsize=512)
def _table_prices(provider: str, model: str, when: datetime) -> tuple[str, dict[str, Any]] | None:
    """The table's version and its per-million prices for ``model`` at ``provider`` at ``when``
    (tiered ones still tiered); None when the table is not installed or does not know them."""
    try:
        import genai_prices
    except ImportError:
        return None
    try:
        found = genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model,
                                        provider_id=provider, genai_request_timestamp=when)
    except LookupError:
        return None
    table = {ours: getattr(found.model_price, key, None) for key, ours in _TABLE_KEYS.items()}
    table = {key: price for key, price in table.items() if price is not None}
    if "input" not in table or "output" not in table:
        return None  # priced in units this library does not count (images, audio, requests)
    return genai_prices.__version__, table


def _tier(price: Any, prompt_tokens: int) -> float:
    """A per-million price; a tiered one at the tier the request's prompt size reaches (the whole
    request pays that tier's rate, as the providers bill it)."""
    tiers = getattr(price, "tiers", None)
    if tiers is None:
        return float(price)
    reached = [tier.price for tier in tiers if prompt_tokens > tier.start]
    return float(reached[-1] if reached else price.base)
