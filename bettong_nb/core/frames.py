"""Usage and tool calls as pandas DataFrames, ready for groupby and plots.

    session.usage_frame()            # costs from the price table (price_source says which; NaN: unknown)
    session.usage_frame(prices={"input": 0.27, "output": 1.10, "cache_hit": 0.07})
    session.usage_frame().groupby("turn")[["prompt_tokens", "completion_tokens", "cost_total"]].sum()
    session.usage_frame(full=True)        # every column: cache misses, reasoning, images, latency, each cost part
    session.usage_frame().groupby("cell", dropna=False)["cost_total"].sum()   # what each notebook cell cost
    session.tool_frame().groupby(["tool", "status"], observed=True).duration_s.describe()

pandas is imported when a frame is asked for, never before.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .pricing import currency, request_cost
from .usage import check_prices

__all__ = ["usage_frame", "tool_frame", "USAGE_COLUMNS", "COST_COLUMNS", "SHORT_COLUMNS", "TOOL_COLUMNS", "STATUSES"]

USAGE_COLUMNS = ("turn", "step", "cell", "model", "prompt_tokens", "completion_tokens", "cache_hit_tokens",
                 "cache_miss_tokens", "reasoning_tokens", "images", "latency_s")
COST_COLUMNS = ("cost_input", "cost_output", "cost_cache_hit", "cost_cache_write", "cost_total", "price_source")
# What a usage frame shows by default: narrow enough for a notebook cell, the same on every run.
SHORT_COLUMNS = ("turn", "step", "cell", "model", "prompt_tokens", "completion_tokens", "cache_hit_tokens",
                 "cost_total", "price_source")
TOOL_COLUMNS = ("turn", "step", "cell", "tool", "capability", "args", "status", "duration_s", "result_chars", "redactions")
STATUSES = ("ok", "error", "denied")

_INTS = ("turn", "step", "prompt_tokens", "completion_tokens", "cache_hit_tokens", "cache_miss_tokens",
         "reasoning_tokens", "images", "result_chars", "redactions")


def _typed(rows: list[dict], columns: tuple[str, ...], categories: Mapping[str, Any]):
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(columns))
    for name in columns:
        if name in _INTS:
            frame[name] = frame[name].astype("int64")
        elif name.startswith("cost_") or name.endswith("_s"):
            frame[name] = frame[name].astype("float64")
        elif name in categories:
            frame[name] = pd.Categorical(frame[name], categories=categories[name])
    return frame


def usage_frame(requests: Iterable[Any], prices: Mapping[str, Any] | None = None, *, full: bool = False):
    """One row per model request (``bettong_nb.usage.RequestRecord``), with its costs: from
    ``prices`` (per million tokens: input, output, cache_hit...) when given, else from the price
    table (:mod:`bettong_nb.pricing`); ``price_source`` says which, and a request whose price is
    unknown costs NaN. The currency is ``frame.attrs["currency"]``. By default the
    :data:`SHORT_COLUMNS`; ``full=True`` adds cache misses, reasoning tokens, images, latency and
    the cost's parts."""
    if prices:
        check_prices(prices)
    rows = []
    for r in requests:
        u = r.usage
        parts, cost, source = request_cost(r, prices)
        rows.append({"turn": r.turn, "step": r.step, "cell": r.cell, "model": r.model, "prompt_tokens": u.prompt_tokens,
                     "completion_tokens": u.completion_tokens, "cache_hit_tokens": u.cache_hit_tokens,
                     "cache_miss_tokens": u.cache_miss_tokens, "reasoning_tokens": u.reasoning_tokens,
                     "images": r.images, "latency_s": r.latency_s,
                     "cost_input": parts["input"], "cost_output": parts["output"],
                     "cost_cache_hit": parts["cache_hit"], "cost_cache_write": parts["cache_write"],
                     "cost_total": cost, "price_source": source})
    models = sorted({row["model"] for row in rows if row["model"] is not None})
    frame = _typed(rows, USAGE_COLUMNS + COST_COLUMNS, {"model": models})
    frame = frame if full else frame[list(SHORT_COLUMNS)]
    frame.attrs["currency"] = currency(prices)
    return frame


def tool_frame(tool_calls: Iterable[Any]):
    """One row per tool call (``bettong_nb.ToolCall``)."""
    rows = [{"turn": c.turn, "step": c.step, "cell": c.cell, "tool": c.tool, "capability": c.capability, "args": c.args,
             "status": c.status, "duration_s": c.duration_s, "result_chars": len(c.result or ""),
             "redactions": c.redactions} for c in tool_calls]
    tools = sorted({row["tool"] for row in rows})
    capabilities = sorted({row["capability"] for row in rows if row["capability"] is not None})
    statuses = list(STATUSES) + sorted({row["status"] for row in rows} - set(STATUSES))
    return _typed(rows, TOOL_COLUMNS, {"tool": tools, "capability": capabilities, "status": statuses})
