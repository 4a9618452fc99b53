import pytest

from bettong_nb import usage
from bettong_nb.core.usage import Usage, cache_hit_rate, cost, from_openai, summary


def test_zero_and_addition():
    assert Usage() == usage.ZERO
    a = Usage(1, 10, 5, 15, 2, 8, 1, 0)
    assert a + a == Usage(2, 20, 10, 30, 4, 16, 2, 0)
    assert sum([a, a, a], Usage()) == Usage(3, 30, 15, 45, 6, 24, 3, 0)
    assert a + None == a


def test_from_openai_reads_deepseek_and_openai_fields():
    ds = from_openai({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
                      "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36,
                      "completion_tokens_details": {"reasoning_tokens": 3}})
    assert ds == Usage(1, 100, 5, 105, 64, 36, 3)
    oa = from_openai({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
                      "prompt_tokens_details": {"cached_tokens": 80}})
    assert (oa.cache_hit_tokens, oa.cache_miss_tokens) == (80, 20)
    assert from_openai(None) == Usage(requests=1)


def test_a_present_zero_wins():
    u = from_openai({"prompt_tokens": 10, "prompt_cache_hit_tokens": 0, "prompt_tokens_details": {"cached_tokens": 9}})
    assert u.cache_hit_tokens == 0


@pytest.mark.parametrize("u,text", [
    (Usage(2, 2400, 600, 3000, 2048), "2 requests 3000 tokens (2400 in, 600 out) [2048 cached, 85% of input]"),
    (Usage(1, 10, 5, 15), "1 request 15 tokens (10 in, 5 out)"),
    (Usage(1, 10, 5, 0), "1 request 15 tokens (10 in, 5 out)"),
    (Usage(2, 1120, 28, 1148, 1024), "2 requests 1148 tokens (1120 in, 28 out) [1024 cached, 91% of input]"),
    (Usage(3, 3042, 305, 3347, 2688), "3 requests 3347 tokens (3042 in, 305 out) [2688 cached, 88% of input]"),
    (Usage(1, 200, 0, 200, 25), "1 request 200 tokens (200 in, 0 out) [25 cached, 13% of input]"),  # 12.5 rounds up
])
def test_summary(u, text):
    assert summary(u) == text


def test_cost_per_million_tokens():
    assert cost(Usage(prompt_tokens=1_000_000, completion_tokens=500_000), input=0.3, output=0.4) == 0.5
    assert cost(Usage(prompt_tokens=1_000_000, cache_hit_tokens=800_000), input=1.0, cache_hit=0.1) == pytest.approx(0.28)
    assert cost(Usage(prompt_tokens=1_000_000, cache_hit_tokens=800_000), input=1.0) == 1.0
    assert cost(Usage(prompt_tokens=1_000_000, cache_hit_tokens=800_000), input=1.0, cache_hit=0.0) == pytest.approx(0.2)
    assert cost(usage.ZERO, input=1, output=1) == 0
    assert cost(None, input=1) is None


def test_cache_accounting_across_a_session():
    t1 = Usage(1, 1000, 10, 1010, 0, 1000)
    t2 = Usage(1, 1200, 10, 1210, 960, 240)
    assert cache_hit_rate(t1) == 0.0 and cache_hit_rate(t2) == 0.8
    total = t1 + t2
    assert (total.cache_hit_tokens, total.cache_miss_tokens) == (960, 1240)
    assert 0.4 < cache_hit_rate(total) < 0.5
    assert cache_hit_rate(Usage()) is None


def test_what_the_cache_is_worth():
    prices = dict(input=0.22, output=0.66, cache_hit=0.007)
    hit = cost(Usage(1, 17579, 1716, 0, 15744), **prices)
    miss = cost(Usage(1, 17579, 1716, 0, 0), **prices)
    assert hit < miss and 0.6 < 1 - hit / miss < 0.7


def test_the_usage_line_is_the_summary_and_the_cost():
    u = usage.Usage(requests=3, prompt_tokens=3042, completion_tokens=305, total_tokens=3347, cache_hit_tokens=2688)
    assert usage.line(u) == summary(u) == "3 requests 3347 tokens (3042 in, 305 out) [2688 cached, 88% of input]"
    priced = usage.line(u, {"input": 1.0, "output": 2.0, "cache_hit": 0.1})
    expected = cost(u, input=1.0, output=2.0, cache_hit=0.1)
    assert priced == f"{summary(u)} · cost ${expected:.6f}".rstrip("0")
    assert usage.line(u, {"input": 1.0, "currency": "EUR"}).endswith(" · cost €0.003042")
    assert usage.line(u, {"input": 1.0, "currency": "chf"}).endswith(" · cost 0.003042 CHF")
    assert usage.line(u, spent=float("nan")) == summary(u), "an unknown cost is not shown, never as 0"
    assert usage.line(u, spent=0.0).endswith(" · cost $0")
    assert usage.line(usage.Usage(requests=1, prompt_tokens=93), {"input": 1.0}).endswith("· cost $0.000093")


def test_money_carries_its_currency():
    assert usage.money(0.000093) == "$0.000093" and usage.money(0) == "$0"
    assert usage.money(1.5, "EUR") == "€1.5" and usage.money(0.25, "usd") == "$0.25"
    assert usage.money(1.5, "chf") == "1.5 CHF"
    # an amount below a millionth keeps two significant digits rather than reading as nothing
    assert usage.money(1e-09) == "$0.000000001" and usage.money(1.234e-9, "EUR") == "€0.0000000012"
    assert usage.money(0.0000004) == "$0.0000004" and usage.money(-0.5) == "$-0.5"
    assert usage.line(usage.Usage(requests=1)) == "1 request 0 tokens (0 in, 0 out)"
