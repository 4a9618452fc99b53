"""Fault injection against each wire format: every failure is retried or surfaced clearly, and
the number of attempts is what the policy says.

Policy (bettong_nb/providers/_http.py): retry 408, 409, 429, 5xx-that-mean-busy and dropped
connections with jittered exponential backoff, honouring Retry-After, at most ``max_retries``
times; never a client error; a stream only while nothing of it reached the caller.
"""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

import bettong_nb
from bettong_nb import ProviderError, events
from bettong_nb.core.provider import Request
from support.servers import LoopbackServer, Reply
from support.servers import FaultyServer
from support.wire import KEY, WIRES, Wire

ANSWER = "The capital of Lithuania is Vilnius."


@pytest.fixture
def serve(board, w):
    return lambda handler: board.serve(w.name, handler)


def run(w: Wire, url: str, backoff: float = 0.02, **options):
    """Run one prompt; returns (result or the ProviderError, the Retry events seen)."""
    seen: list = []
    agent = w.build(url, on_event=seen.append, **options)
    agent.provider.transport.backoff = backoff
    try:
        outcome = agent.run("What is the capital of Lithuania?")
    except ProviderError as err:
        outcome = err
    return outcome, [e for e in seen if isinstance(e, events.Retry)], seen


# --- statuses -----------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retryable_statuses_are_retried_max_retries_times_then_surface(w, serve, status):
    server = serve(lambda r: w.error(status, f"status {status} from the server"))
    err, retries, _ = run(w, server.url, max_retries=2)
    assert isinstance(err, ProviderError) and err.status == status and err.retryable
    assert f"status {status} from the server" in str(err)
    assert len(server.requests) == 3, "one attempt and max_retries=2 retries"
    assert [r.attempt for r in retries] == [1, 2]
    # exponential: the second wait's range (0.02-0.04 s) starts where the first's (0.01-0.02 s) ends
    assert 0.01 <= retries[0].delay_s <= 0.02 <= retries[1].delay_s <= 0.04


def test_max_retries_zero_means_one_attempt(w, serve):
    server = serve(lambda r: w.error(503, "busy"))
    err, retries, _ = run(w, server.url, max_retries=0)
    assert isinstance(err, ProviderError) and err.status == 503
    assert len(server.requests) == 1 and retries == []


def test_anthropic_overloaded_529_is_retried(board):
    w = next(w for w in WIRES if w.name == "anthropic")
    server = board.serve("anthropic", w.script([w.error(529, "Overloaded"), w.body("answer")]))
    result, retries, _ = run(w, server.url)
    assert result.output == ANSWER and len(server.requests) == 2 and len(retries) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_429_retry_after_is_honoured(w, serve, stream):
    server = serve(w.script([w.error(429, "slow down", **{"Retry-After": "0.2"}), w.body("answer")]))
    started = time.perf_counter()
    result, retries, _ = run(w, server.url, backoff=5.0, stream=stream)  # a backoff would take seconds
    elapsed = time.perf_counter() - started
    assert result.output == ANSWER and len(server.requests) == 2
    [retry] = retries
    assert retry.delay_s == pytest.approx(0.2) and "HTTP 429" in retry.reason and "slow down" in retry.reason
    assert 0.2 <= elapsed < 2.0


def test_retry_after_ms_and_http_dates_are_read(w, serve):
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    server = serve(w.script([w.error(503, "a", **{"retry-after-ms": "150"}), w.error(503, "b", **{"Retry-After": past}),
                             w.body("answer")]))
    result, retries, _ = run(w, server.url, backoff=5.0)
    assert result.output == ANSWER and len(server.requests) == 3
    assert [round(r.delay_s, 3) for r in retries] == [0.15, 0.0], "a date in the past means now"


def test_a_retry_after_beyond_the_cap_surfaces_at_once(w, serve):
    server = serve(lambda r: w.error(429, "quota exhausted", **{"Retry-After": "3600"}))
    started = time.perf_counter()
    err, retries, _ = run(w, server.url)
    assert isinstance(err, ProviderError) and err.status == 429 and err.retry_after == 3600
    assert "retry after 3600 s" in str(err) and "quota exhausted" in str(err)
    assert len(server.requests) == 1 and retries == [] and time.perf_counter() - started < 2.0


def test_a_429_pauses_every_request_through_the_transport(w, serve):
    """A batch of concurrent runs backs off together: a request started during the pause waits it out."""
    arrivals: list[float] = []
    replies = iter([w.error(429, "slow down", **{"Retry-After": "0.3"})])

    def handler(request):
        arrivals.append(time.monotonic())
        return next(replies, None) or Reply.json(w.body("answer"))

    server = serve(handler)
    provider = w.build(server.url).provider
    request = Request(messages=[{"role": "user", "content": "x"}], model="qwen3:8b")

    async def main() -> float:
        paused = asyncio.Event()
        pause_seen_at = []

        def listener(event):
            if isinstance(event, events.Retry):
                pause_seen_at.append(time.monotonic())
                paused.set()

        with events.listening(listener):
            first = asyncio.create_task(provider.complete(request))
            await asyncio.wait_for(paused.wait(), 5)
            second = await provider.complete(request)  # started during the pause
            await first
        assert second.text() == ANSWER
        return pause_seen_at[0]

    pause_started = asyncio.run(main())
    assert len(arrivals) == 3
    assert min(arrivals[1:]) - pause_started >= 0.28, "neither request went out during the pause"


# --- connections --------------------------------------------------------------------------------

def test_a_reset_connection_is_retried(w):
    with FaultyServer(["reset", "reset"], body=w.body("answer")) as server:
        result, retries, _ = run(w, server.url, max_retries=2)
    assert result.output == ANSWER
    assert server.attempts == 3 and len(retries) == 2
    assert all("could not be reached" in r.reason for r in retries)


def test_resets_beyond_max_retries_surface(w):
    with FaultyServer(["reset"] * 5, body=w.body("answer")) as server:
        err, retries, _ = run(w, server.url, max_retries=1)
    assert isinstance(err, ProviderError) and err.status is None and "could not be reached" in str(err)
    assert server.attempts == 2 and len(retries) == 1


def test_nothing_listening_is_retried_then_named(w):
    with LoopbackServer(lambda r: Reply()) as server:
        url = server.url
    err, retries, _ = run(w, url, max_retries=1)
    assert isinstance(err, ProviderError) and "could not be reached" in str(err) and "ConnectError" in str(err)
    assert url in str(err) and len(retries) == 1


def test_a_silent_server_hits_the_read_timeout_and_each_attempt_is_bounded(w):
    with FaultyServer(["silent"] * 5, body=w.body("answer")) as server:
        started = time.perf_counter()
        err, retries, _ = run(w, server.url, max_retries=1, timeout=0.2)
        elapsed = time.perf_counter() - started
    assert isinstance(err, ProviderError) and "timed out" in str(err) and "ReadTimeout" in str(err)
    assert server.attempts == 2 and len(retries) == 1
    assert 0.4 <= elapsed < 3.0, "two attempts of 0.2 s and a short backoff, not a hang"


def test_a_slow_answer_after_a_timeout_is_retried_into_success(w):
    with FaultyServer(["silent"], body=w.body("answer")) as server:
        result, retries, _ = run(w, server.url, timeout={"read": 0.2, "connect": 1.0})
    assert result.output == ANSWER and server.attempts == 2 and "timed out" in retries[0].reason


def test_a_stream_that_stalls_mid_answer_is_a_read_timeout_not_a_half_answer(w, serve):
    chunks = w.stream_chunks(w.body("answer"))

    def stalling():
        yield from chunks[:4]
        time.sleep(0.6)  # the server goes quiet mid-answer
        yield from chunks[4:]

    server = serve(lambda r: Reply(200, headers=w.stream_headers, chunks=stalling()))
    err, retries, seen = run(w, server.url, stream=True, timeout={"read": 0.3})
    assert isinstance(err, ProviderError) and "stopped mid-answer" in str(err) and "read timeout" in str(err)
    assert not any(isinstance(e, events.AssistantMessage) for e in seen)
    deltas = [e for e in seen if isinstance(e, (events.TextDelta, events.ThinkingDelta))]
    assert deltas, "something was shown before the stall"
    assert len(server.requests) == 1 and retries == [], "never retried once the caller saw part of it"


# --- bodies -------------------------------------------------------------------------------------

def test_a_body_that_is_not_json_surfaces_with_an_excerpt(w, serve):
    page = "<html><body><h1>Sign in to the corporate proxy</h1>" + "<p>filler</p>" * 40 + "</body></html>"
    server = serve(lambda r: Reply.text(page, 200))
    err, retries, _ = run(w, server.url)
    assert isinstance(err, ProviderError) and err.status == 200 and "not JSON" in str(err)
    assert "Sign in to the corporate proxy" in str(err) and len(str(err)) < 400, "an excerpt, not the page"
    assert err.body_excerpt and err.body_excerpt.endswith("…")
    assert len(server.requests) == 1 and retries == []


def test_a_stream_line_that_is_not_json_surfaces(w, serve):
    garbage = b"data: {not json\n\n" if w.name != "ollama" else b"{not json\n"
    server = serve(lambda r: Reply(200, headers=w.stream_headers, chunks=[garbage]))
    err, _, _ = run(w, server.url, stream=True)
    assert isinstance(err, ProviderError) and "not JSON" in str(err) and "{not json" in str(err)
    assert len(server.requests) == 1


def test_an_error_status_non_json_body_gives_an_excerpt(w, serve):
    server = serve(lambda r: Reply.text("<html>502 Bad Gateway</html>" + " " * 500, 502))
    err, retries, _ = run(w, server.url, max_retries=1)
    assert isinstance(err, ProviderError) and err.status == 502 and "502 Bad Gateway" in str(err)
    assert len(server.requests) == 2 and len(retries) == 1


# --- streams cut off ----------------------------------------------------------------------------

def test_a_stream_cut_mid_answer_is_an_error_never_a_half_answer(w, serve):
    body = w.body("answer")
    chunks = w.stream_chunks(body)
    server = serve(lambda r: w.stream(body, keep=len(chunks) // 2 + 1, cut=True))
    err, retries, seen = run(w, server.url, stream=True)
    assert isinstance(err, ProviderError) and "cut off mid-answer" in str(err)
    shown = "".join(e.text for e in seen if isinstance(e, events.TextDelta))
    assert shown and ANSWER.startswith(shown) and shown != ANSWER
    assert not any(isinstance(e, events.AssistantMessage) for e in seen)
    assert len(server.requests) == 1 and retries == [], "part of it was shown: a retry would repeat it"


# How many chunks open a stream before any text: OpenAI's empty role delta, Anthropic's
# message_start; every Ollama line carries text.
OPENING = {"openai": 1, "anthropic": 1, "ollama": 0}


def test_a_stream_cut_before_anything_was_shown_is_retried(w, serve):
    body = w.body("answer")
    opening = w.stream(body, keep=OPENING[w.name], cut=True)  # then the socket drops
    server = serve(w.script([opening, body]))
    result, retries, seen = run(w, server.url, stream=True)
    assert result.output == ANSWER and len(server.requests) == 2 and len(retries) == 1
    assert "".join(e.text for e in seen if isinstance(e, events.TextDelta)) == ANSWER, "shown once"


def test_a_stream_that_ends_cleanly_but_early_is_retried_when_nothing_was_shown(w, serve):
    body = w.body("answer")
    early = w.stream(body, keep=OPENING[w.name])  # a well-formed HTTP body missing the rest of the answer
    server = serve(w.script([early, body]))
    result, retries, _ = run(w, server.url, stream=True)
    assert result.output == ANSWER and len(server.requests) == 2
    assert "ended before the answer was complete" in retries[0].reason


def test_a_stream_error_event_mid_answer_surfaces(w, serve):
    body = w.body("answer")
    chunks = w.stream_chunks(body)[:4]
    error = {"openai": b'data: {"error": {"message": "upstream model crashed", "type": "server_error"}}\n\n',
             "anthropic": b'event: error\ndata: {"type": "error", "error": {"type": "api_error", '
                          b'"message": "upstream model crashed"}}\n\n',
             "ollama": b'{"error": "upstream model crashed"}\n'}[w.name]
    server = serve(lambda r: Reply(200, headers=w.stream_headers, chunks=chunks + [error]))
    err, retries, _ = run(w, server.url, stream=True)
    assert isinstance(err, ProviderError) and "upstream model crashed" in str(err)
    assert len(server.requests) == 1 and retries == []


def test_streamed_turns_reuse_one_connection(w):
    """The body is read to its end after the final event, so the connection goes back to the pool."""
    with FaultyServer([], chunks=w.stream_chunks(w.body("answer"))) as server:
        provider = w.build(server.url).provider
        request = Request(messages=[{"role": "user", "content": "x"}], model="qwen3:8b")

        async def three():
            return [await provider.stream(request, lambda e: None) for _ in range(3)]

        answers = asyncio.run(three())
    assert [a.text() for a in answers] == [ANSWER] * 3
    assert server.attempts == 3 and server.connections == 1


def test_a_server_dawdling_after_the_final_event_is_not_waited_for(w, serve):
    chunks = w.stream_chunks(w.body("answer"))

    def dawdling():
        yield from chunks
        time.sleep(1.5)  # the answer is complete; the body just has not ended

    server = serve(lambda r: Reply(200, headers=w.stream_headers, chunks=dawdling()))
    started = time.perf_counter()
    result, retries, _ = run(w, server.url, stream=True)
    assert result.output == ANSWER and retries == [] and time.perf_counter() - started < 1.2


# --- keys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("factory", [bettong_nb.openai, bettong_nb.anthropic])
@pytest.mark.parametrize("bad", ["\n", "\x00", "é"], ids=["newline-inside", "control", "non-ascii"])
def test_a_key_http_cannot_carry_is_named_not_shown(factory, bad):
    key = f"bt-test-{bad}Zq81fJ0aXwVilnius"
    with LoopbackServer(lambda r: Reply.json({})) as server:
        with pytest.raises(ProviderError, match="header .* holds a character") as err:
            factory(base_url=server.url, api_key=key).run("x")
    assert server.requests == [] and "Zq81fJ0aXw" not in str(err.value)


def test_a_trailing_newline_on_an_anthropic_key_is_trimmed(monkeypatch, board):
    w = next(w for w in WIRES if w.name == "anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY + "\n")
    server = board.serve("anthropic", w.script([w.body("answer")]))
    assert bettong_nb.anthropic(base_url=server.url).run("x").output == ANSWER
    assert server.only_request().headers["x-api-key"] == KEY
