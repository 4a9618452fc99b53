"""One behaviour suite, run against a loopback server per wire format: OpenAI, Anthropic, Ollama.

Each server answers the same conversation with recorded-shaped bodies (tests/wire/): a plain
answer, a get_weather tool round trip, errors in the provider's own error format.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from bettong_nb import ProviderError, events
from bettong_nb.core.usage import Usage, summary
from support.servers import Reply
from support.wire import KEY, WIRE, WIRES, weather

ANSWER = "The capital of Lithuania is Vilnius."
FINAL = "It is raining in Vilnius, 11 °C."


EXPECTED_KEY_HEADER = {"openai": f"Bearer {KEY}", "anthropic": KEY, "ollama": None}
ANSWER_USAGE = {  # what each wire's recorded answer reports, in bettong_nb's terms
    "openai": Usage(requests=1, prompt_tokens=1210, completion_tokens=9, total_tokens=1219, cache_hit_tokens=1024,
                    cache_miss_tokens=186),
    # prompt = 14 fresh + 1196 read from the cache + 0 written to it
    "anthropic": Usage(requests=1, prompt_tokens=1210, completion_tokens=12, total_tokens=1222,
                       cache_hit_tokens=1196, cache_miss_tokens=14, cache_write_tokens=0),
    "ollama": Usage(requests=1, prompt_tokens=1210, completion_tokens=48, total_tokens=1258, cache_miss_tokens=1210),
}


@pytest.fixture
def serve(board, w):
    """``with serve(handler) as server``: this wire's loopback server, answering with ``handler``."""
    @contextlib.contextmanager
    def install(handler):
        yield board.serve(w.name, handler)

    return install


def fast(agent):
    """Keep the backoff short: these tests count attempts, not seconds (test_provider_faults times them)."""
    agent.provider.transport.backoff = 0.02
    return agent


def test_plain_answer(w, serve):
    with serve(w.script([w.body("answer")])) as server:
        result = w.build(server.url).run("What is the capital of Lithuania?")
    assert (result.output, result.done, result.stop_reason, result.steps) == (ANSWER, True, "end_turn", 1)
    request = server.only_request()
    assert request.method == "POST" and request.path == w.path
    assert w.key_header(request) == EXPECTED_KEY_HEADER[w.name]
    body = request.json()
    assert "What is the capital of Lithuania?" in json.dumps(body["messages"][-1])
    assert "stream" not in body or body["stream"] is False
    assert result.messages[-1]["role"] == "assistant" and result.messages[-1]["content"][-1]["text"] == ANSWER


def test_tool_round_trip(w, serve):
    calls = []
    with serve(w.script(w.conversation())) as server:
        result = w.build(server.url, capabilities=[weather(calls)]).run("What is the weather in Vilnius?")
    assert result.output == FINAL and result.done and result.steps == 2
    assert calls == ["Vilnius"]
    [call] = result.tool_calls
    assert (call.tool, call.args, call.result, call.status) == ("get_weather", {"city": "Vilnius"},
                                                                "raining in Vilnius, 11 °C", "ok")
    first, second = (r.json() for r in server.requests)
    assert [t.get("name") or t.get("function", {}).get("name") for t in first["tools"]] == ["get_weather"]
    assert w.tool_results(second) == ["raining in Vilnius, 11 °C"]
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_streaming_equals_completing(w, serve):
    results, seen = {}, []
    for stream in (False, True):
        with serve(w.script(w.conversation())) as server:
            results[stream] = w.build(server.url, capabilities=[weather()], stream=stream,
                                      on_event=seen.append if stream else None).run("Weather in Vilnius?")
        assert all(r.json().get("stream", False) is stream for r in server.requests)
    plain, streamed = results[False], results[True]
    assert streamed.output == plain.output == FINAL
    assert streamed.messages == plain.messages
    assert streamed.usage == plain.usage and streamed.usage.requests == 2
    assert [(c.id, c.tool, c.args, c.result) for c in streamed.tool_calls] == [
        (c.id, c.tool, c.args, c.result) for c in plain.tool_calls]
    texts = [e.text for e in seen if isinstance(e, events.TextDelta)]
    said = "".join(b["text"] for m in plain.messages if m["role"] == "assistant" and isinstance(m["content"], list)
                   for b in m["content"] if b["type"] == "text")
    assert "".join(texts) == said and len(texts) > 3, "the text arrives in pieces, all of it"
    tool_deltas = [e for e in seen if isinstance(e, events.ToolUseDelta)]
    assert {e.name for e in tool_deltas} == {"get_weather"} and {e.index for e in tool_deltas} == {0}
    assert json.loads("".join(e.arguments for e in tool_deltas)) == {"city": "Vilnius"}
    # the deltas come before the message they make up
    kinds = [type(e).__name__ for e in seen]
    assert kinds.index("ToolUseDelta") < kinds.index("AssistantMessage") < kinds.index("ToolCallStarted")


def test_usage_mapping(w, serve):
    with serve(w.script([w.body("answer")])) as server:
        result = w.build(server.url).run("x")
    assert result.usage == ANSWER_USAGE[w.name]
    assert result.requests[0].usage == ANSWER_USAGE[w.name]
    u = ANSWER_USAGE[w.name]
    assert summary(result.usage).startswith(f"1 request {u.total_tokens} tokens ({u.prompt_tokens} in, "
                                            f"{u.completion_tokens} out)")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_surface_with_status_and_message_and_are_never_retried(w, serve, status):
    message = f"the server explains status {status} here"
    with serve(lambda r: w.error(status, message)) as server:
        with pytest.raises(ProviderError) as err:
            w.build(server.url, max_retries=3).run("x")
    assert err.value.status == status and err.value.provider == w.name
    assert f"HTTP {status}" in str(err.value) and message in str(err.value)
    assert len(server.requests) == 1, f"{status} is never retried"


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_503_is_retried_then_succeeds(w, serve, stream):
    seen = []
    script = w.script([w.error(503, "busy, try again"), w.body("answer")])
    with serve(script) as server:
        result = fast(w.build(server.url, stream=stream, on_event=seen.append)).run("x")
    assert result.output == ANSWER
    assert len(server.requests) == 2, "one failed attempt, one retry"
    [retry] = [e for e in seen if isinstance(e, events.Retry)]
    assert (retry.provider, retry.attempt) == (w.name, 1)
    assert "HTTP 503" in retry.reason and "busy, try again" in retry.reason
    assert 0.01 <= retry.delay_s <= 0.02, "backoff with jitter: half to all of the base delay"
    assert server.requests[0].body == server.requests[1].body, "the retry sends the same request"


def test_the_key_never_shows_in_errors_or_retry_events(w, serve, monkeypatch):
    # Ollama takes no key; a credential in the environment (a proxy token) must not leak either.
    monkeypatch.setenv("OLLAMA_PROXY_TOKEN", KEY)
    echo = f"key {KEY} rejected; " + "x" * 170 + KEY  # the second copy straddles the excerpt cut
    seen = []
    script = w.script([w.error(503, echo), w.error(401, echo)])
    with serve(script) as server:
        with pytest.raises(ProviderError) as err:
            fast(w.build(server.url, max_retries=1, on_event=seen.append)).run("x")
    assert len(server.requests) == 2 and err.value.status == 401
    texts = [str(err.value), repr(err.value), err.value.body_excerpt or ""]
    texts += [e.reason for e in seen if isinstance(e, events.Retry)]
    assert len(texts) == 4 and "[redacted]" in str(err.value)
    for text in texts:
        assert KEY not in text and KEY[:12] not in text, "not even the start of it"


RECORDED_ERRORS = [(w, int(path.stem.split("_")[1])) for w in WIRES
                   for path in sorted((WIRE / w.name).glob("error_*.json"))]


@pytest.mark.parametrize("w,status", RECORDED_ERRORS, ids=[f"{w.name}-{s}" for w, s in RECORDED_ERRORS])
def test_recorded_error_bodies_surface_the_servers_message(w, status, board):
    body = w.body(f"error_{status}")
    said = body["error"] if isinstance(body["error"], str) else body["error"]["message"]
    server = board.serve(w.name, lambda r: Reply.json(body, status))
    with pytest.raises(ProviderError) as err:
        w.build(server.url, max_retries=0).run("x")
    assert err.value.status == status and said[:150] in str(err.value)
    assert err.value.retryable == (status in (408, 409, 429, 500, 502, 503, 504, 529))
