"""Usage and tool calls as DataFrames: columns, dtypes, costs, and frames from real runs."""

from __future__ import annotations

import pandas as pd
import pytest

import bettong_nb
from bettong_nb import usage
from bettong_nb import Deny, ToolCall
from bettong_nb.core import frames
from bettong_nb.providers.scripted import Scripted

PRICES = {"input": 0.27, "output": 1.10, "cache_hit": 0.07}


def _record(turn, step, model, latency, **tokens):
    return usage.RequestRecord(turn, step, model, latency, usage.Usage(requests=1, **tokens))


RECORDS = [
    _record(1, 1, "m-small", 0.5, prompt_tokens=1000, completion_tokens=50, total_tokens=1050,
            cache_hit_tokens=0, cache_miss_tokens=1000),
    _record(1, 2, "m-small", 0.25, prompt_tokens=1200, completion_tokens=80, total_tokens=1280,
            cache_hit_tokens=1000, cache_miss_tokens=200, reasoning_tokens=30),
    _record(2, 1, "m-large", 1.5, prompt_tokens=1500, completion_tokens=400, total_tokens=1900,
            cache_hit_tokens=1280, cache_miss_tokens=220),
]


def test_usage_frame_has_one_typed_row_per_request():
    df = frames.usage_frame(RECORDS, full=True)
    assert list(df.columns) == list(frames.USAGE_COLUMNS + frames.COST_COLUMNS)
    assert len(df) == 3
    assert df["prompt_tokens"].tolist() == [1000, 1200, 1500]
    assert df["reasoning_tokens"].tolist() == [0, 30, 0]
    for name in ("turn", "step", "prompt_tokens", "completion_tokens", "cache_hit_tokens", "cache_miss_tokens",
                 "reasoning_tokens"):
        assert df[name].dtype == "int64", name
    assert df["latency_s"].dtype == "float64"
    assert isinstance(df["model"].dtype, pd.CategoricalDtype)
    assert df.groupby("turn")["completion_tokens"].sum().to_dict() == {1: 130, 2: 400}
    assert df.groupby("model", observed=True)["latency_s"].sum().to_dict() == {"m-large": 1.5, "m-small": 0.75}


def test_a_usage_frame_is_narrow_unless_asked_for_all_columns():
    short = ["turn", "step", "cell", "model", "prompt_tokens", "completion_tokens", "cache_hit_tokens", "cost_total",
             "price_source"]
    assert list(frames.usage_frame(RECORDS).columns) == short  # costs always, NaN where a price is unknown
    priced = frames.usage_frame(RECORDS, PRICES)
    assert list(priced.columns) == short and set(priced["price_source"]) == {"given"}
    assert priced["cost_total"].tolist() == frames.usage_frame(RECORDS, PRICES, full=True)["cost_total"].tolist()
    assert len(frames.usage_frame(RECORDS, PRICES, full=True).columns) == 17


def test_cost_columns_follow_usage_cost_and_sum_to_the_total():
    df = frames.usage_frame(RECORDS, PRICES, full=True)
    assert list(df.columns) == list(frames.USAGE_COLUMNS + frames.COST_COLUMNS)
    # Row 2: 200 uncached prompt tokens at input price, 1000 cached at the cache price.
    assert df.loc[1, "cost_input"] == pytest.approx(200 / 1e6 * 0.27)
    assert df.loc[1, "cost_cache_hit"] == pytest.approx(1000 / 1e6 * 0.07)
    assert df.loc[1, "cost_output"] == pytest.approx(80 / 1e6 * 1.10)
    total = sum((r.usage for r in RECORDS), usage.ZERO)
    assert df["cost_total"].sum() == pytest.approx(usage.cost(total, **PRICES))
    for r, row_total in zip(RECORDS, df["cost_total"]):
        assert row_total == pytest.approx(usage.cost(r.usage, **PRICES))


def test_cost_without_a_cache_price_bills_cached_tokens_as_input():
    df = frames.usage_frame(RECORDS, {"input": 1.0, "output": 2.0}, full=True)
    assert df["cost_cache_hit"].tolist() == [0.0, 0.0, 0.0]
    assert df.loc[1, "cost_input"] == pytest.approx(1200 / 1e6)
    total = sum((r.usage for r in RECORDS), usage.ZERO)
    assert df["cost_total"].sum() == pytest.approx(usage.cost(total, input=1.0, output=2.0))


def test_unknown_price_keys_are_an_error():
    with pytest.raises(TypeError, match="Unknown price key: inptu"):
        frames.usage_frame(RECORDS, {"inptu": 1.0})


def test_empty_frames_keep_their_columns_and_dtypes():
    df = frames.usage_frame([], PRICES, full=True)
    assert list(df.columns) == list(frames.USAGE_COLUMNS + frames.COST_COLUMNS)
    assert df["prompt_tokens"].dtype == "int64" and df["cost_total"].dtype == "float64"
    tools = frames.tool_frame([])
    assert list(tools.columns) == list(frames.TOOL_COLUMNS)
    assert tools["duration_s"].dtype == "float64" and isinstance(tools["status"].dtype, pd.CategoricalDtype)
    assert list(tools["status"].cat.categories) == ["ok", "error", "denied"]


def test_tool_frame_rows_and_dtypes():
    calls = [ToolCall("read", "fs", {"path": "a"}, "hello", "c1", "ok", None, 0.02, 0, 1, 1),
             ToolCall("write", "fs", {"path": "b"}, "ERROR: write was not allowed: no", "c2", "denied", "no",
                      0.5, 0, 2, 1),
             ToolCall("bogus", None, {}, "ERROR: Unknown tool", "c3", "error", None, 0.0, 0, 2, 2)]
    df = frames.tool_frame(calls)
    assert list(df.columns) == list(frames.TOOL_COLUMNS)
    assert df["status"].tolist() == ["ok", "denied", "error"]
    assert df["result_chars"].tolist() == [5, len("ERROR: write was not allowed: no"), len("ERROR: Unknown tool")]
    assert df["args"].tolist() == [{"path": "a"}, {"path": "b"}, {}]
    assert pd.isna(df.loc[2, "capability"])
    assert df["turn"].dtype == "int64" and df["redactions"].dtype == "int64"
    counts = df.groupby("status", observed=False).size().to_dict()
    assert counts == {"ok": 1, "error": 1, "denied": 1}


def _notes_agent(model, **options):
    def read(path: str) -> str:
        """Read a file."""
        if path == "missing":
            raise FileNotFoundError("no such file: missing")
        return f"contents of {path}"

    return bettong_nb.agent(provider=model, capabilities=[{"id": "fs", "instructions": None,
                                                            "tools": [bettong_nb.tool(read)]}], **options)


def test_frames_from_a_real_session_run():
    model = Scripted([
        {"tool_calls": [("read", {"path": "a.txt"}), ("read", {"path": "missing"}), ("read", {"path": "x"})],
         "usage": {"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540}},
        {"text": "done", "usage": {"prompt_tokens": 700, "completion_tokens": 10, "total_tokens": 710,
                                   "cache_hit_tokens": 500}},
        {"text": "again", "usage": {"prompt_tokens": 800, "completion_tokens": 5, "total_tokens": 805,
                                    "cache_hit_tokens": 700}},
    ])
    deny_x = lambda request: Deny("not x") if request.args.get("path") == "x" else True  # noqa: E731
    chat = _notes_agent(model, prices=PRICES, approve_fn=deny_x).session()
    first = chat.run("read things")
    chat.run("and again")
    tools = chat.tool_frame()
    assert tools["status"].tolist() == ["ok", "error", "denied"]
    assert tools["tool"].tolist() == ["read"] * 3 and tools["capability"].tolist() == ["fs"] * 3
    assert (tools["step"] == 1).all() and (tools["turn"] == 1).all()
    use = chat.usage_frame()  # prices come from the agent's options
    assert use[["turn", "step"]].values.tolist() == [[1, 1], [1, 2], [2, 1]]
    assert "cost_total" in use.columns
    assert use["cost_total"].sum() == pytest.approx(usage.cost(chat.usage, **PRICES))
    assert use["model"].tolist() == ["scripted"] * 3
    assert first.usage_frame()["prompt_tokens"].tolist() == [500, 700]
    assert first.tool_frame()["result_chars"].tolist()[0] == len("contents of a.txt")
    unpriced = _notes_agent(Scripted(["hi"])).run("x").usage_frame()  # a scripted model has no price
    assert unpriced["cost_total"].isna().all() and unpriced["price_source"].tolist() == ["unknown"]
    assert use["price_source"].tolist() == ["given"] * 3
