"""Cancelling a turn at any point leaves a session whose next turn succeeds, on every wire format.

A session commits a turn only when it succeeds, so a cancel while waiting for the model,
mid-stream, inside a tool or while an approval is pending must leave the transcript exactly
as the last good turn left it: the next request is the one that would have gone out had the
cancelled turn never started — no tool call without its results, nothing earlier lost.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest

import bettong_nb
from bettong_nb import events
from support.servers import Reply
from support.wire import WIRES, Switchboard, Wire, assert_well_formed

FIRST, CANCELLED, NEXT = "What is the weather in Vilnius?", "And in Kaunas?", "Thanks. The capital?"


@pytest.fixture(scope="module")
def other_board():
    """A second set of servers, for the provider a session switches to."""
    board = Switchboard()
    yield board
    board.close()


def weather(started: asyncio.Event | threading.Event | None = None) -> dict:
    """get_weather; given ``started``, the Kaunas call sets it, then waits until it is cancelled."""

    async def get_weather(city: str) -> str:
        if started is not None and city == "Kaunas":
            started.set()
            await asyncio.Event().wait()
        return f"raining in {city}, 11 °C"

    return {"id": "weather", "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                                        "parameters": {"city": {"type": "string", "required": True}},
                                        "handler": get_weather}]}


def kaunas_call(w: Wire) -> dict:
    """The recorded tool call, asking for Kaunas instead."""
    return _replace_city(w.body(w.tool_case), "Kaunas")


def _replace_city(value, city):
    if isinstance(value, dict):
        return {k: _replace_city(v, city) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_city(v, city) for v in value]
    return value.replace("Vilnius", city) if isinstance(value, str) else value


class Gate:
    """Holds a server thread until released; ``reached`` tells the test it got there."""

    def __init__(self):
        self.reached = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        self.reached.set()
        self.release.wait(10)


def control_request(w: Wire, board: Switchboard, **options) -> dict:
    """What the NEXT turn sends when the cancelled turn never happened."""
    server = board.serve(w.name, w.script(w.conversation() + [w.body("answer")]))
    session = w.build(server.url, capabilities=[weather()], **options).session()
    session.run(FIRST)
    session.run(NEXT)
    return server.requests[-1].json()


def check_next_turn(w: Wire, board: Switchboard, server, session, sent_before: int, **options) -> None:
    """After the cancel: the next turn succeeds and sends exactly the control request."""
    result = session.run(NEXT)
    assert result.output == "The capital of Lithuania is Vilnius." and result.done
    body = server.requests[-1].json()
    assert len(server.requests) == sent_before + 1
    assert_well_formed(w.name, body)
    assert CANCELLED not in str(body["messages"]) and "Kaunas" not in str(body["messages"])
    assert body["messages"] == control_request(w, board, **options)["messages"]
    assert [m["role"] for m in session.transcript] == ["system", "user", "assistant", "user", "assistant",
                                                       "user", "assistant"]


async def cancel_when(session, event_wait) -> None:
    """Start the CANCELLED turn, wait for ``event_wait()``, cancel it, and see it end cancelled."""
    task = asyncio.create_task(session.arun(CANCELLED))
    await asyncio.wait_for(event_wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


# --- async: task cancellation at each point ----------------------------------------------------

def test_cancel_while_waiting_for_the_model(w, board):
    gate = Gate()
    script = w.script(w.conversation() + [w.body("answer")])

    def handler(request):
        if len(server.requests) == 3:  # the cancelled turn's request
            gate.hold()
            return w.error(500, "the client is gone")
        return script(request)

    server = board.serve(w.name, handler)
    session = w.build(server.url, capabilities=[weather()]).session()

    async def main():
        await session.arun(FIRST)
        await cancel_when(session, lambda: asyncio.to_thread(gate.reached.wait, 5))
        gate.release.set()

    asyncio.run(main())
    check_next_turn(w, board, server, session, sent_before=3)


def test_cancel_mid_stream(w, board):
    gate = Gate()
    shown = threading.Event()
    kaunas = w.stream_chunks(kaunas_call(w))

    def stalled():
        yield from kaunas[:-2]
        gate.hold()
        yield from kaunas[-2:]

    script = w.script(w.conversation() + [Reply(200, headers=w.stream_headers, chunks=stalled()),
                                          w.body("answer")])
    server = board.serve(w.name, script)

    def on_event(event):
        if isinstance(event, (events.TextDelta, events.ThinkingDelta, events.ToolUseDelta)) and session.turns == 1:
            shown.set()

    session = w.build(server.url, capabilities=[weather()], stream=True, on_event=on_event).session()

    async def main():
        await session.arun(FIRST)
        await cancel_when(session, lambda: asyncio.to_thread(shown.wait, 5))
        gate.release.set()

    asyncio.run(main())
    check_next_turn(w, board, server, session, sent_before=3, stream=True)


def test_cancel_inside_a_tool(w, board):
    started = asyncio.Event()
    server = board.serve(w.name, w.script(w.conversation() + [kaunas_call(w), w.body("answer")]))
    session = w.build(server.url, capabilities=[weather(started)]).session()

    async def main():
        await session.arun(FIRST)
        await cancel_when(session, started.wait)
        # the model asked for Kaunas and the tool ran: the assistant tool call exists only in the dead turn
        assert len(session.transcript) == 5

    asyncio.run(main())
    check_next_turn(w, board, server, session, sent_before=3)


def test_cancel_while_an_approval_is_pending(w, board):
    asked = asyncio.Event()

    async def approve(request):
        if request.args == {"city": "Kaunas"}:
            asked.set()
            await asyncio.Event().wait()
        return True

    server = board.serve(w.name, w.script(w.conversation() + [kaunas_call(w), w.body("answer")]))
    session = w.build(server.url, capabilities=[weather()], approve_fn=approve).session()

    async def main():
        await session.arun(FIRST)
        await cancel_when(session, asked.wait)

    asyncio.run(main())
    check_next_turn(w, board, server, session, sent_before=3, approve_fn=approve)


# --- sync: Ctrl-C in a notebook cell or a script (KeyboardInterrupt in the main thread) --------

def interrupt_main_when(event: threading.Event) -> threading.Thread:
    """SIGINT to the main thread once ``event`` is set, as Ctrl-C (or a kernel interrupt) does."""
    main = threading.main_thread().ident

    def kick():
        if event.wait(5):
            time.sleep(0.05)  # let the main thread settle into its wait
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=kick, daemon=True)
    thread.start()
    return thread


SYNC = [w for w in WIRES if w.name == "anthropic"]  # the sync path is the same for every wire


@pytest.mark.parametrize("w", SYNC, ids=[w.name for w in SYNC])
def test_keyboard_interrupt_inside_a_tool_leaves_the_session_usable(w, board):
    started = threading.Event()
    server = board.serve(w.name, w.script(w.conversation() + [kaunas_call(w), w.body("answer")]))
    session = w.build(server.url, capabilities=[weather(started)]).session()
    session.run(FIRST)
    kicker = interrupt_main_when(started)
    with pytest.raises(KeyboardInterrupt):
        session.run(CANCELLED)
    kicker.join(5)
    check_next_turn(w, board, server, session, sent_before=3)


@pytest.mark.parametrize("w", SYNC, ids=[w.name for w in SYNC])
def test_keyboard_interrupt_while_waiting_for_the_model_leaves_the_session_usable(w, board):
    gate = Gate()
    script = w.script(w.conversation() + [w.body("answer")])

    def handler(request):
        if len(server.requests) == 3:
            gate.hold()
            return w.error(500, "the client is gone")
        return script(request)

    server = board.serve(w.name, handler)
    session = w.build(server.url, capabilities=[weather()]).session()
    session.run(FIRST)
    kicker = interrupt_main_when(gate.reached)
    with pytest.raises(KeyboardInterrupt):
        session.run(CANCELLED)
    gate.release.set()
    kicker.join(5)
    check_next_turn(w, board, server, session, sent_before=3)


# --- switching provider between turns ----------------------------------------------------------

TARGETS = {
    "openai": lambda url: bettong_nb.providers.OpenAIProvider(base_url=url + "/v1", api_key="k" * 12),
    "anthropic": lambda url: bettong_nb.anthropic(api_key="k" * 12, base_url=url).provider,
    "ollama": lambda url: bettong_nb.providers.OllamaProvider(base_url=url, model="qwen3:8b"),
}


@pytest.mark.parametrize("target", WIRES, ids=[f"to-{t.name}" for t in WIRES])
def test_a_session_switches_provider_between_turns(w, target, board, other_board):
    """Turns with tool calls on one wire, then a turn on another: the transcript is neutral."""
    source_turns = w.conversation()
    if w.name == "openai":  # DeepSeek's shape: reasoning_content, which has no signature to echo
        source_turns[0] = w.body("tool_call_deepseek")
    source = board.serve(w.name, w.script(source_turns))
    session = w.build(source.url, capabilities=[weather()]).session()
    first = session.run(FIRST)
    assert first.output == "It is raining in Vilnius, 11 °C."

    server = other_board.serve(target.name, target.script([target.body("answer")]))
    result = session.run(NEXT, provider=TARGETS[target.name](server.url))
    assert result.output == "The capital of Lithuania is Vilnius."
    body = server.only_request().json()
    assert server.only_request().path == target.path
    assert_well_formed(target.name, body)
    text = str(body)
    assert FIRST in text and "raining in Vilnius, 11 °C" in text and "It is raining in Vilnius" in text
    assert body["messages"][-1]["content"] == NEXT
    if target.name == "anthropic":
        [assistant_call] = [m for m in body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
                            and any(b["type"] == "tool_use" for b in m["content"])]
        thinking = [b for b in assistant_call["content"] if b["type"] == "thinking"]
        # Anthropic's own signed thinking goes back verbatim; another provider's reasoning is dropped
        assert thinking == ([w.body("tool_use")["content"][0]] if w.name == "anthropic" else [])
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert session.turns == 2 and len(session.transcript) == 7
