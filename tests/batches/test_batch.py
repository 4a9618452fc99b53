"""Batches and budgets: input order, failures in place, shared backoff, cancellation, limits."""

import asyncio
import json
import re
import time

import pytest

import bettong_nb
from bettong_nb import events
from bettong_nb.providers import Response
from bettong_nb.providers.scripted import Scripted
from support.servers import LoopbackServer, Reply, chat_message


def echo_server(delays=None, fail_on=None):
    """Answers each prompt with its own text, after a per-prompt delay; 400 for ``fail_on``."""

    def handle(request):
        prompt = request.json()["messages"][-1]["content"]
        if prompt == fail_on:
            return Reply.json({"error": {"message": "bad prompt"}}, status=400)
        return Reply(body=json.dumps(chat_message(f"echo {prompt}")).encode(),
                     delay=(delays or {}).get(prompt, 0.0))

    return LoopbackServer(handle)


def test_map_keeps_input_order_under_concurrency():
    prompts = [f"p{i}" for i in range(12)]
    delays = {p: 0.01 * (12 - i) for i, p in enumerate(prompts)}  # later prompts finish first
    with echo_server(delays) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k")
        started = time.perf_counter()
        results = agent.map(prompts, concurrency=6, progress=False)
        elapsed = time.perf_counter() - started
    assert [r.output for r in results] == [f"echo {p}" for p in prompts]
    assert elapsed < sum(delays.values()) * 0.6, "items ran concurrently"
    assert results.usage.requests == 12 and results.failed == []


def test_a_failed_item_is_in_its_place_and_the_others_continue():
    with echo_server(fail_on="bad") as server:
        results = bettong_nb.openai(base_url=server.url, api_key="k").map(["a", "bad", "c"], progress=False)
    assert [r.output for r in results] == ["echo a", None, "echo c"]
    assert results[1].done is False and "HTTP 400" in str(results[1].error)
    assert results.failed == [results[1]]


def test_a_429_pauses_the_whole_batch():
    times, lock = [], [True]

    def handle(request):
        times.append(time.monotonic())
        if lock[0]:
            lock[0] = False
            return Reply.json({"error": {"message": "slow down"}}, status=429, **{"Retry-After": "0.4"})
        return Reply(body=json.dumps(chat_message("ok")).encode(), delay=0.05)

    with LoopbackServer(handle) as server:
        results = bettong_nb.openai(base_url=server.url, api_key="k").map([str(i) for i in range(8)],
                                                                          concurrency=4, progress=False)
    assert all(r.done for r in results)
    t429 = times[0]
    # requests already in flight when the 429 arrived are fine; nothing new starts during the pause
    early = [t - t429 for t in times[1:] if 0.1 < t - t429 < 0.38]
    assert early == [], f"requests sent during the shared pause: {early}"
    assert len(times) == 9


def test_progress_prints_a_text_bar_in_a_terminal(capsys):
    with echo_server() as server:
        bettong_nb.openai(base_url=server.url, api_key="k", prices={"input": 1, "output": 2}).map(
            ["a", "b"], progress=True)
    err = capsys.readouterr().err
    # the last line: what ran out of all, the counts, tokens and cost, how long it took and its rate
    assert re.search(r"\] 2/2 · 2 done · 0 failed · 24 tokens · cost \$0\.000028 · [\d.]+ m?s · [\d.]+/s\n", err), err


def test_cancelling_a_batch_returns_what_finished():
    async def slow(request):
        prompt = request.messages[-1]["content"]
        await asyncio.sleep(0.01 if prompt == "fast" else 5)
        return Response(content=[{"type": "text", "text": prompt}])

    agent = bettong_nb.agent(provider=slow)

    async def main():
        task = asyncio.create_task(agent.amap(["fast", "slow", "slow", "later"], concurrency=3, progress=False))
        await asyncio.sleep(0.2)
        task.cancel()
        return await task

    started = time.perf_counter()
    results = asyncio.run(main())
    assert time.perf_counter() - started < 2
    assert results[0].output == "fast" and results[0].done
    assert all(r.done is False and isinstance(r.error, asyncio.CancelledError) for r in results[1:])
    assert "not started" in str(results[3].error) or results[3].reason == "cancelled"


def test_map_frame_fills_a_column_and_keeps_the_usage_frame():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": ["purr", "bark"], "id": [1, 2]})
    with echo_server() as server:
        out = bettong_nb.openai(base_url=server.url, api_key="k").map_frame(
            df, prompt="Classify: {text} (#{id})", output="label", progress=False)
    assert list(out["label"]) == ["echo Classify: purr (#1)", "echo Classify: bark (#2)"]
    assert "label" not in df.columns, "the input frame is not changed"
    frame = out.attrs["usage_frame"]
    assert list(frame["item"]) == [0, 1] and frame["prompt_tokens"].sum() == 20


def test_map_frame_names_a_missing_column():
    pd = pytest.importorskip("pandas")
    agent = bettong_nb.agent(provider=Scripted(default="x"))
    with pytest.raises(KeyError, match=r"\{txt\}, which is not a column \(columns: text\)"):
        agent.map_frame(pd.DataFrame({"text": ["a"]}), prompt="{txt}")


# --- budgets ----------------------------------------------------------------------------------

def big_usage(tokens):
    return {"text": "ok", "usage": {"prompt_tokens": tokens, "completion_tokens": 0}}


def test_a_run_token_budget_stops_before_the_request_that_would_exceed_it():
    seen = []
    model = Scripted([[("noop", {})]] * 5, default=None)
    cap = {"id": "n", "tools": [{"name": "noop", "handler": lambda: "x" * 4000}]}
    result = bettong_nb.agent(provider=model, capabilities=[cap], on_event=seen.append).run("go", token_budget=700)
    assert result.done is False and result.stop_reason == "budget" and "run token budget of 700" in result.reason
    assert [e.reason for e in seen if isinstance(e, events.BudgetExceeded)] == [result.reason]
    assert len(model.requests) == 1, "the second request (with 4000 characters more) was never sent"


def test_a_cost_budget_needs_prices_and_stops_runs():
    with pytest.raises(TypeError, match="cost_budget needs prices"):
        bettong_nb.agent(provider=Scripted(default="x")).run("x", cost_budget=1.0)
    agent = bettong_nb.agent(provider=Scripted(default=big_usage(1000)), prices={"input": 1.0, "output": 1.0})
    session = agent.session(cost_budget=0.0025)  # each turn costs 0.001
    assert [session.run(p).done for p in "abc"] == [True, True, True]
    fourth = session.run("d")
    assert fourth.done is False and "session cost budget of $0.0025" in fourth.reason
    assert "($0.003 spent, the next request costs about $0.0" in fourth.reason


def test_a_cost_budget_says_its_amounts_in_the_prices_currency_even_when_tiny():
    agent = bettong_nb.agent(provider=Scripted(default="x"), prices={"input": 1.0, "output": 1.0, "currency": "EUR"})
    result = agent.run("go", cost_budget=1e-09)
    assert result.stop_reason == "budget" and result.reason.startswith(
        "the run cost budget of €0.000000001 would be exceeded (€0 spent, the next request costs about €0.0000")
    assert re.search(r"costs about €0\.0000\d+\)$", result.reason), result.reason


def test_a_session_budget_covers_all_its_turns():
    agent = bettong_nb.agent(provider=Scripted(default=big_usage(480)))
    session = agent.session(token_budget=1000)
    assert session.run("one").done and session.run("two").done
    third = session.run("three")
    assert third.done is False and "session token budget of 1000" in third.reason
    assert session.usage.prompt_tokens == 960


def test_a_batch_budget_is_shared_by_its_items():
    agent = bettong_nb.agent(provider=Scripted(default=big_usage(480)))
    results = agent.map([f"p{i}" for i in range(10)], concurrency=1, token_budget=1000, progress=False)
    finished = [r for r in results if r.done]
    assert len(finished) == 2 and all("batch token budget" in r.reason for r in results if not r.done)


def test_a_budget_is_handed_to_the_runs_that_share_it_and_to_no_other():
    from bettong_nb.batches.local import amap
    from bettong_nb.core.budget import Budget

    shared = Budget("shared", tokens=1000)
    one, two = (bettong_nb.agent(provider=Scripted(default=big_usage(480))) for _ in range(2))
    assert one.run("a", budgets=[shared]).done and two.run("b", budgets=[shared]).done
    third = one.run("c", budgets=[shared])
    assert third.done is False and "shared token budget of 1000" in third.reason
    assert one.run("d").done  # a run not handed the budget is not held to it
    # a batch over a session: the session's budget and the batch's both hold, passed down
    session = bettong_nb.agent(provider=Scripted(default=big_usage(480))).session(token_budget=1500)
    batch = asyncio.run(amap(session, ["e", "f", "g", "h"], concurrency=1, progress=False, token_budget=5000))
    assert [r.done for r in batch] == [True, True, True, False] and "session token budget" in batch[3].reason


def test_a_run_a_tool_starts_is_outside_its_callers_session_budget():
    inner = bettong_nb.agent(provider=Scripted(default=big_usage(480)))

    async def ask():
        return (await inner.arun("sub")).stop_reason

    cap = {"id": "sub", "tools": [{"name": "ask", "handler": ask}]}
    session = bettong_nb.agent(provider=Scripted([[("ask", {})], [("ask", {})], "done"], default=None),
                               capabilities=[cap]).session(token_budget=100_000)
    result = session.run("go")
    assert result.done and [c.result for c in result.tool_calls] == ["end_turn", "end_turn"]
    assert session.budget.spent.prompt_tokens == 0  # the sub-runs spent on their own account


def test_rows_under_way_hold_the_batch_budget_so_it_is_never_passed():
    # 32 rows start at once; each holds its estimate (max_tokens covers the answer) until its
    # answer is counted, so no row starts on a budget the others already hold.
    usage = {"prompt_tokens": 10, "completion_tokens": 50, "total_tokens": 60}
    with LoopbackServer(lambda request: Reply(body=json.dumps(chat_message("ok", usage=usage)).encode(),
                                              delay=0.02)) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k", model="m", max_tokens=60)
        results = agent.map([f"p{i}" for i in range(200)], concurrency=32, token_budget=1000, progress=False)
        sent = len(server.requests)
    assert 1 <= sent == sum(r.done for r in results)
    assert sent * 60 <= 1000, f"{sent} requests spent {sent * 60} tokens of a budget of 1000"
    assert all("token budget of 1000" in r.reason for r in results if not r.done)


def test_the_text_bar_tells_time_rate_and_time_left_and_a_stop_is_not_all_done(capsys):
    # While it runs the bar estimates the time left from the rate so far; when a stop cancels
    # the rest, the final line counts what ran out of all and says what was cancelled.
    from bettong_nb.batches.local import Progress

    bar = Progress(50, prices=None)
    for _ in range(16):
        bar.update(bettong_nb.RunResult("ok", 1, [], [], bettong_nb.Usage(requests=1), True))
    time.sleep(0.15)  # the bar redraws at most every 0.1 s
    bar.update(None)
    running = capsys.readouterr().err.rsplit("\r", 1)[-1]
    assert re.fullmatch(r"\[#{9}\.{21}\] 16/50 · 16 done · 0 failed · 0 tokens · cost \$0 · [\d.]+ m?s · [\d.e+]+/s · "
                        r"about [\d.]+ m?s left", running), running
    bar.cancelled = 34
    bar.update(None, final=True)
    final = capsys.readouterr().err.rsplit("\r", 1)[-1]
    assert final.startswith("[") and "] 16/50 · 16 done · 0 failed · 34 cancelled · 0 tokens" in final
    assert "left" not in final and not final.split("] ", 1)[1].startswith("50/50")
