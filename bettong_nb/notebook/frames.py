"""Usage and tool calls as pandas DataFrames, ready for groupby and plots.

    session.usage_frame(prices={"input": 0.27, "output": 1.10, "cache_hit": 0.07})
    session.usage_frame().groupby("turn")[["prompt_tokens", "completion_tokens"]].sum()
    session.tool_frame().groupby(["tool", "status"], observed=True).duration_s.describe()

pandas is imported when a frame is asked for, never before.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["usage_frame", "tool_frame", "USAGE_COLUMNS", "COST_COLUMNS", "TOOL_COLUMNS", "STATUSES"]

USAGE_COLUMNS = ("turn", "step", "model", "prompt_tokens", "completion_tokens", "cache_hit_tokens",
                 "cache_miss_tokens", "reasoning_tokens", "latency_s")
COST_COLUMNS = ("cost_input", "cost_output", "cost_cache_hit", "cost_total")
TOOL_COLUMNS = ("turn", "step", "tool", "capability", "args", "status", "duration_s", "result_chars", "redactions")
STATUSES = ("ok", "error", "denied")
PRICE_KEYS = ("input", "output", "cache_hit")

_INTS = ("turn", "step", "prompt_tokens", "completion_tokens", "cache_hit_tokens", "cache_miss_tokens",
         "reasoning_tokens", "result_chars", "redactions")


def _check_prices(prices: Mapping[str, float]) -> None:
    unknown = sorted(set(prices) - set(PRICE_KEYS))
    if unknown:
        raise TypeError(f"Unknown price key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                        "prices is {'input': ..., 'output': ..., 'cache_hit': ...} per million tokens")


def _costs(u: Any, prices: Mapping[str, float]) -> dict[str, float]:
    # The same split as bettong_nb.usage.cost, so the column sums equal the cost of the total.
    inp, out, hit = (prices.get(k) for k in PRICE_KEYS)
    cached = min(u.cache_hit_tokens, u.prompt_tokens) if hit is not None else 0
    row = {
        "cost_input": (u.prompt_tokens - cached) / 1e6 * inp if inp is not None else 0.0,
        "cost_output": u.completion_tokens / 1e6 * out if out is not None else 0.0,
        "cost_cache_hit": cached / 1e6 * hit if hit is not None else 0.0,
    }
    row["cost_total"] = row["cost_input"] + row["cost_output"] + row["cost_cache_hit"]
    return row


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


def usage_frame(requests: Iterable[Any], prices: Mapping[str, float] | None = None):
    """One row per model request (``bettong_nb.usage.RequestRecord``); cost columns when
    ``prices`` (per million tokens: input, output, cache_hit) are given."""
    if prices:
        _check_prices(prices)
    rows = []
    for r in requests:
        u = r.usage
        row = {"turn": r.turn, "step": r.step, "model": r.model, "prompt_tokens": u.prompt_tokens,
               "completion_tokens": u.completion_tokens, "cache_hit_tokens": u.cache_hit_tokens,
               "cache_miss_tokens": u.cache_miss_tokens, "reasoning_tokens": u.reasoning_tokens,
               "latency_s": r.latency_s}
        if prices:
            row.update(_costs(u, prices))
        rows.append(row)
    columns = USAGE_COLUMNS + (COST_COLUMNS if prices else ())
    models = sorted({row["model"] for row in rows if row["model"] is not None})
    return _typed(rows, columns, {"model": models})


def tool_frame(tool_calls: Iterable[Any]):
    """One row per tool call (``bettong_nb.agent.ToolCall``)."""
    rows = [{"turn": c.turn, "step": c.step, "tool": c.tool, "capability": c.capability, "args": c.args,
             "status": c.status, "duration_s": c.duration_s, "result_chars": len(c.result or ""),
             "redactions": c.redactions} for c in tool_calls]
    tools = sorted({row["tool"] for row in rows})
    capabilities = sorted({row["capability"] for row in rows if row["capability"] is not None})
    statuses = list(STATUSES) + sorted({row["status"] for row in rows} - set(STATUSES))
    return _typed(rows, TOOL_COLUMNS, {"tool": tools, "capability": capabilities, "status": statuses})
