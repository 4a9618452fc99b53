"""Costs without configuration: each request priced from genai-prices by its provider and model,
given prices when they are given, local models free, anything unknown NaN (never 0)."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import subprocess
import sys
from datetime import datetime, timezone

import genai_prices
import pytest

import bettong_nb
from bettong_nb.core import pricing, usage
from bettong_nb.core.usage import RequestRecord, Usage
from support import REPO
from support.servers import ChatScript, LoopbackServer, chat_message
from support.wire import KEY, AnthropicScript, OllamaScript, weather, wire

COST_PARTS = ["cost_input", "cost_output", "cost_cache_hit", "cost_cache_write"]


def table_cost(record: RequestRecord) -> float:
    """What genai-prices itself says ``record`` cost, from its own arithmetic."""
    u = record.usage
    found = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=u.prompt_tokens, cache_read_tokens=u.cache_hit_tokens,
                           cache_write_tokens=u.cache_write_tokens, output_tokens=u.completion_tokens,
                           output_reasoning_tokens=u.reasoning_tokens),
        record.model, provider_id=record.provider,
        genai_request_timestamp=datetime.fromtimestamp(record.at, timezone.utc))
    return float(found.total_price)


def at_the_providers_api(result) -> None:
    """``result``'s requests as if the loopback server were the provider's own API: the run
    went to 127.0.0.1, which the table does not price (test_a_server_that_is_not_the_providers_api...)."""
    assert {r.host for r in result.requests} == {"127.0.0.1"}
    assert result.usage_frame()["price_source"].eq("unknown").all(), "a loopback server is not the provider's API"
    result.requests[:] = [dataclasses.replace(r, host=pricing.API_HOSTS[r.provider]) for r in result.requests]


def assert_priced_by_the_table(result, provider: str) -> None:
    at_the_providers_api(result)
    frame = result.usage_frame(full=True)
    assert [r.provider for r in result.requests] == [provider] * len(result.requests)
    assert frame["cost_total"].notna().all() and (frame["cost_total"] > 0).all()
    assert frame["cost_total"].tolist() == pytest.approx([table_cost(r) for r in result.requests], rel=1e-9)
    assert frame[COST_PARTS].sum(axis=1).tolist() == pytest.approx(frame["cost_total"].tolist())
    days = {datetime.fromtimestamp(r.at, timezone.utc).strftime("%Y-%m-%d") for r in result.requests}
    assert set(frame["price_source"]) == {f"genai-prices {genai_prices.__version__} ({day})" for day in days}
    assert frame.attrs["currency"] == "USD"
    assert result.cost() == pytest.approx(frame["cost_total"].sum())
    assert result.usage_line().endswith(f" · cost {usage.money(result.cost())}")
    assert usage.money(result.cost()).startswith("$")


def test_a_deepseek_run_without_prices_is_priced_from_the_table():
    final = chat_message("It is raining in Vilnius.", model="deepseek-v4-flash", usage={
        "prompt_tokens": 1320, "completion_tokens": 30, "total_tokens": 1350, "prompt_cache_hit_tokens": 1280,
        "prompt_cache_miss_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 12}})
    with LoopbackServer(ChatScript([wire("openai", "tool_call_deepseek"), final])) as server:
        result = bettong_nb.deepseek(base_url=server.url, api_key=KEY, capabilities=[weather()]).run("Weather?")
    assert result.done and [r.model for r in result.requests] == ["deepseek-v4-flash"] * 2
    assert result.requests[0].usage.cache_hit_tokens == 1216 and result.requests[0].usage.reasoning_tokens == 22
    assert_priced_by_the_table(result, "deepseek")
    frame = result.usage_frame(full=True)
    # cache hits bill at DeepSeek's cache price, far below its input price
    assert frame.loc[0, "cost_cache_hit"] < frame.loc[0, "cost_input"] * 1216 / 46


def test_an_anthropic_run_without_prices_is_priced_from_the_table():
    turns = [wire("anthropic", "tool_use"), wire("anthropic", "final")]
    with LoopbackServer(AnthropicScript(turns)) as server:
        result = bettong_nb.anthropic(base_url=server.url, api_key=KEY, capabilities=[weather()]).run("Weather?")
    assert result.done and [r.model for r in result.requests] == ["claude-opus-5"] * 2
    assert_priced_by_the_table(result, "anthropic")
    frame = result.usage_frame(full=True)
    assert frame.loc[0, "cost_cache_write"] > 0 and frame.loc[0, "cost_cache_hit"] == 0, "turn 1 writes the cache"
    assert frame.loc[1, "cost_cache_hit"] > 0 and frame.loc[1, "cost_cache_write"] == 0, "turn 2 reads it"


def test_an_unknown_model_costs_nan_and_says_unknown():
    with LoopbackServer(ChatScript([chat_message("hi", model="my-finetune-7b")])) as server:
        result = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY).run("x")
    frame = result.usage_frame(full=True)
    assert frame["price_source"].tolist() == ["unknown"]
    assert frame[COST_PARTS + ["cost_total"]].isna().all(axis=None)
    assert math.isnan(result.cost())
    assert result.usage_line() == usage.summary(result.usage), "an unknown cost is not shown, never as 0"


def test_given_prices_win_and_carry_their_currency():
    with LoopbackServer(ChatScript([chat_message("hi", model="deepseek-v4-flash")])) as server:
        result = bettong_nb.deepseek(base_url=server.url, api_key=KEY,
                                     prices={"input": 2.0, "output": 8.0, "currency": "EUR"}).run("x")
    frame = result.usage_frame(full=True)
    assert frame["price_source"].tolist() == ["given"] and frame.attrs["currency"] == "EUR"
    assert frame["cost_total"].tolist() == pytest.approx([(10 * 2.0 + 2 * 8.0) / 1e6])
    assert result.usage_line().endswith(" · cost €0.000036")
    other = result.usage_frame(prices={"input": 1.0, "output": 1.0})
    assert other["cost_total"].tolist() == pytest.approx([12 / 1e6]) and other.attrs["currency"] == "USD"


def test_a_local_ollama_model_costs_nothing():
    with LoopbackServer(OllamaScript([wire("ollama", "answer")])) as server:
        result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b").run("x")
    frame = result.usage_frame(full=True)
    assert frame["price_source"].tolist() == ["local"] and frame["cost_total"].tolist() == [0.0]
    assert result.usage_line().endswith(" · cost $0")


def test_a_session_and_a_batch_add_up_their_requests():
    final = copy.deepcopy(wire("anthropic", "final"))
    with LoopbackServer(AnthropicScript([final, final, final])) as server:
        agent = bettong_nb.anthropic(base_url=server.url, api_key=KEY)
        chat = agent.session()
        chat.run("a")
        batch = agent.map(["b", "c"], progress=False)
    for result in (chat, *batch):
        at_the_providers_api(result)
    assert chat.cost() == pytest.approx(table_cost(chat.requests[0]))
    assert batch.cost() == pytest.approx(sum(table_cost(r) for r in batch.requests))
    assert batch.usage_frame()["price_source"].str.startswith("genai-prices").all()


def test_a_server_that_is_not_the_providers_api_is_not_priced_from_the_table():
    """A local server behind openai() serving a model named like a priced one: its prices are not
    OpenAI's. Given prices still apply; the table's hosts are the presets' default base_urls."""
    from urllib.parse import urlsplit

    from bettong_nb.providers.anthropic import DEFAULT_BASE_URL
    from bettong_nb.providers.openai import DEEPSEEK, OPENAI

    with LoopbackServer(ChatScript([chat_message("hi", model="gpt-4.1-mini")] * 2)) as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        unpriced = agent.run("x")
        given = agent.run("x", prices={"input": 0.1, "output": 0.2})
    assert [r.provider for r in unpriced.requests] == ["openai"] and unpriced.requests[0].host == "127.0.0.1"
    frame = unpriced.usage_frame(full=True)
    assert frame["price_source"].tolist() == ["unknown"] and frame["cost_total"].isna().all()
    assert math.isnan(unpriced.cost())
    assert given.usage_frame(full=True)["price_source"].tolist() == ["given"] and given.cost() > 0
    # the same record at OpenAI's own host is priced by the table
    at_openai = dataclasses.replace(unpriced.requests[0], host="api.openai.com")
    assert pricing.quote(at_openai).source.startswith("genai-prices")
    assert pricing.total([at_openai]) == pytest.approx(table_cost(at_openai))
    assert pricing.quote(dataclasses.replace(at_openai, host=None)).source == "unknown"
    assert pricing.API_HOSTS == {"deepseek": urlsplit(DEEPSEEK.base_url).hostname,
                                 "openai": urlsplit(OPENAI.base_url).hostname,
                                 "anthropic": urlsplit(DEFAULT_BASE_URL).hostname}


def _record(provider, model, at, **tokens) -> RequestRecord:
    return RequestRecord(1, 1, model, 0.1, Usage(requests=1, **tokens), provider, at.timestamp(),
                         host=pricing.API_HOSTS[provider])


def test_dated_off_peak_and_tiered_prices_follow_the_table():
    # The table prices DeepSeek by the time of day: 03:00 UTC is in a busy window, 17:00 UTC is not.
    peak = datetime(2026, 11, 3, 3, 0, tzinfo=timezone.utc)
    night = datetime(2026, 11, 3, 17, 0, tzinfo=timezone.utc)
    tokens = dict(prompt_tokens=200_000, cache_hit_tokens=150_000, completion_tokens=40_000, reasoning_tokens=9_000)
    day_cost, night_cost = (pricing.total([_record("deepseek", "deepseek-v4-flash", t, **tokens)]) for t in (peak, night))
    assert day_cost == pytest.approx(table_cost(_record("deepseek", "deepseek-v4-flash", peak, **tokens)))
    assert night_cost == pytest.approx(table_cost(_record("deepseek", "deepseek-v4-flash", night, **tokens)))
    assert night_cost < day_cost, "the request's own time decides its price"
    # A prompt past a 200k tier pays the tier's rate for all of it, like the table says.
    for prompt in (150_000, 250_000):
        record = _record("anthropic", "claude-sonnet-4-5", peak, prompt_tokens=prompt, cache_hit_tokens=20_000,
                         cache_write_tokens=10_000, completion_tokens=2_000)
        assert pricing.total([record]) == pytest.approx(table_cost(record))
    small, large = (pricing.quote(_record("anthropic", "claude-sonnet-4-5", peak, prompt_tokens=p)).prices["input"]
                    for p in (150_000, 250_000))
    assert large > small


def test_given_reasoning_and_cache_write_prices_apply_to_their_tokens():
    u = Usage(requests=1, prompt_tokens=1_000_000, cache_hit_tokens=600_000, cache_write_tokens=100_000,
              completion_tokens=500_000, reasoning_tokens=200_000)
    parts = usage.cost_parts(u, input=1.0, output=4.0, cache_hit=0.1, cache_write=1.25, reasoning=2.0)
    assert parts == pytest.approx({"input": 0.3, "cache_hit": 0.06, "cache_write": 0.125, "output": 1.2 + 0.4})
    plain = usage.cost_parts(u, input=1.0, output=4.0)
    assert plain == pytest.approx({"input": 1.0, "cache_hit": 0.0, "cache_write": 0.0, "output": 2.0})
    with pytest.raises(TypeError, match="Unknown price key: cache_miss"):
        bettong_nb.usage.check_prices({"input": 1.0, "cache_miss": 0.5})


def test_without_genai_prices_installed_costs_are_unknown():
    # sys.modules[name] = None is how Python says "this module is not installed": the import fails.
    code = """
import sys
sys.modules["genai_prices"] = None
import math
from bettong_nb.core import pricing
from bettong_nb.core.usage import RequestRecord, Usage
record = RequestRecord(1, 1, "deepseek-v4-flash", 0.1, Usage(requests=1, prompt_tokens=100), "deepseek", 1.8e9)
assert pricing.quote(record).source == "unknown", pricing.quote(record)
assert math.isnan(pricing.total([record]))
local = RequestRecord(1, 1, "qwen3:8b", 0.1, Usage(requests=1, prompt_tokens=100), "ollama", 1.8e9)
assert pricing.total([local]) == 0.0
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
