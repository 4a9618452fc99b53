"""Sessions: continuing transcripts, one turn at a time, failures that leave nothing behind."""

import asyncio
import threading

import pytest

import bettong_nb
from bettong_nb import ProviderError
from bettong_nb.providers import Response
from bettong_nb.providers.scripted import Scripted


def test_turns_extend_the_transcript_and_sum_usage():
    model = Scripted([{"text": "one", "usage": {"prompt_tokens": 10}}, {"text": "two", "usage": {"prompt_tokens": 20}}])
    session = bettong_nb.agent(provider=model).session()
    assert isinstance(session, bettong_nb.Agent) and isinstance(session, bettong_nb.Session)
    session.run("first")
    session.run("second")
    assert [m["role"] for m in session.transcript] == ["system", "user", "assistant", "user", "assistant"]
    assert model.requests[1].messages[: len(model.requests[0].messages)] == model.requests[0].messages
    assert session.usage.prompt_tokens == 30 and session.usage.requests == 2
    assert [r.turn for r in session.requests] == [1, 2]


def test_two_sessions_on_one_agent_are_two_conversations():
    agent = bettong_nb.agent(provider=Scripted(default="x"))
    a, b = agent.session(), agent.session()
    a.run("1")
    a.run("2")
    b.run("3")
    assert len(a.transcript) == 5 and len(b.transcript) == 3


def test_clear_starts_over_with_a_fresh_system_prompt():
    model = Scripted(default="x")
    session = bettong_nb.agent(provider=model, system="v1").session()
    session.run("a")
    session.clear()
    assert session.transcript == [] and session.usage == bettong_nb.usage.ZERO
    session.run("b", system="v2")
    assert model.requests[-1].system[0].text == "v2" and len(model.requests[-1].messages) == 1


def test_a_failed_turn_leaves_the_transcript_exactly_as_it_was():
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ProviderError("server fell over", provider="test", status=500)
        return Response(content=[{"type": "text", "text": f"answer {calls['n']}"}])

    session = bettong_nb.agent(provider=flaky).session()
    session.run("one")
    before = [dict(m) for m in session.transcript]
    with pytest.raises(ProviderError):
        session.run("two")
    assert session.transcript == before and session.turns == 1
    assert session.run("three").output == "answer 3"
    assert [m["content"] for m in session.transcript if m["role"] == "user"] == ["one", "three"]


def test_concurrent_turns_are_serialized_and_none_is_lost():
    active, overlap = [0], [False]

    async def slow(request):
        active[0] += 1
        overlap[0] |= active[0] > 1
        await asyncio.sleep(0.02)
        active[0] -= 1
        return Response(content=[{"type": "text", "text": request.messages[-1]["content"]}])

    session = bettong_nb.agent(provider=slow).session()

    async def main():
        await asyncio.gather(*(session.arun(f"q{i}") for i in range(6)))

    asyncio.run(main())
    assert not overlap[0]
    assert sorted(m["content"] for m in session.transcript if m["role"] == "user") == [f"q{i}" for i in range(6)]
    assert len(session.transcript) == 13


def test_sync_and_async_callers_share_one_turn_lock():
    order = []

    async def slow(request):
        order.append(("start", request.messages[-1]["content"]))
        await asyncio.sleep(0.05)
        order.append(("end", request.messages[-1]["content"]))
        return Response(content=[{"type": "text", "text": "ok"}])

    session = bettong_nb.agent(provider=slow).session()
    thread = threading.Thread(target=lambda: session.run("sync"))

    async def main():
        thread.start()
        await asyncio.sleep(0.01)
        await session.arun("async")

    asyncio.run(main())
    thread.join()
    assert [kind for kind, _ in order] == ["start", "end", "start", "end"]
    assert len(session.transcript) == 5


def test_a_cancelled_waiter_does_not_block_the_next_turn():
    async def slow(request):
        await asyncio.sleep(0.05)
        return Response(content=[{"type": "text", "text": "ok"}])

    session = bettong_nb.agent(provider=slow).session()

    async def main():
        first = asyncio.create_task(session.arun("a"))
        await asyncio.sleep(0.01)
        waiting = asyncio.create_task(session.arun("b"))
        await asyncio.sleep(0.01)
        waiting.cancel()
        await first
        return await asyncio.wait_for(session.arun("c"), 2)

    assert asyncio.run(main()).output == "ok"
    assert [m["content"] for m in session.transcript if m["role"] == "user"] == ["a", "c"]
