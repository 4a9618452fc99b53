"""Request bodies reuse the JSON of what the previous request sent, and stay byte-identical to
the plain encoding: ``json.dumps(encode_request(request), ensure_ascii=False)``."""

from __future__ import annotations

import json

import pytest

import bettong_nb
from bettong_nb.http.json_body import Encoded, Reuse, array, body
from bettong_nb.providers import anthropic, ollama, openai
from support.wire import calls_body, weather


def _plain(provider, request, stream: bool) -> dict:
    """The body each provider sent before the reuse, built without it."""
    if isinstance(provider, openai.OpenAIProvider):
        return openai.encode_request(request, default_model=provider.model, stream=stream)
    if isinstance(provider, anthropic.AnthropicProvider):
        return anthropic.encode_request(request, default_model=provider.model, stream=stream, effort=provider.effort,
                                        thinking_display=provider.thinking_display, provider=provider.name)
    return ollama.encode_request(request, model=request.model or provider.model, stream=stream,
                                 num_ctx=provider.num_ctx, keep_alive=provider.keep_alive, think=provider.think)


class Recording:
    """The real provider, noting each Request it is handed (and whether it streamed)."""

    def __init__(self, provider):
        self.provider, self.requests = provider, []

    async def complete(self, request):
        self.requests.append((request, False))
        return await self.provider.complete(request)

    async def stream(self, request, on_event):
        self.requests.append((request, True))
        return await self.provider.stream(request, on_event)

    def secret_values(self):
        return self.provider.secret_values()


def test_a_multi_turn_session_with_tools_sends_the_plain_bytes(w, board):
    turns = [w.body(w.tool_case), w.body("final"), calls_body(w, ["Zürich", "Ōsaka \"east\""]), w.body("final"), w.body("answer"),
             w.body(w.tool_case), w.body("final")]
    server = board.serve(w.name, w.script(turns))
    cities: list[str] = []
    built = w.build(server.url)
    provider = Recording(built.provider)
    session = bettong_nb.ModelAgent(provider=provider, capabilities=[weather(cities)], model=built.options.model,
                                    system="Weather desk.\nBe brief: ẞ ✓").session()
    session.run("Weather in Vilnius?")
    session.run("And in Zürich and Ōsaka?")
    session.run("Thanks — streamed, please.", stream=True)
    session.run("Vilnius again, streamed.", stream=True)

    assert cities == ["Vilnius", "Zürich", "Ōsaka \"east\"", "Vilnius"]
    sent = [r.body for r in server.requests]
    assert len(sent) == len(provider.requests) == 7
    for (request, stream), body_bytes in zip(provider.requests, sent):
        assert body_bytes == json.dumps(_plain(provider.provider, request, stream), ensure_ascii=False).encode()
    # the transcript only grew: every body's messages begin with the previous body's
    messages = [json.loads(b)["messages"] for b in sent]
    for before, after in zip(messages, messages[1:]):
        assert after[:len(before)] == before


def test_joined_encodes_only_what_follows_the_shared_prefix():
    reuse, made = Reuse(), []

    def piece(message: dict) -> str:
        made.append(message["n"])
        return json.dumps(message)

    transcript = [{"n": i} for i in range(4)]
    assert reuse.joined(transcript, piece) == ", ".join(json.dumps(m) for m in transcript)
    transcript += [{"n": 4}, {"n": 5}]
    reuse.joined(transcript, piece)
    assert made == [0, 1, 2, 3, 4, 5]
    # a copy of a message is another object: from there on everything is encoded again
    changed = transcript[:2] + [dict(transcript[2])] + transcript[3:]
    assert reuse.joined(changed, piece) == ", ".join(json.dumps(m) for m in changed)
    assert made[6:] == [2, 3, 4, 5]


def test_joined_replays_its_running_state_over_the_reused_prefix():
    reuse, seen = Reuse(), []
    transcript = ["a", "b"]
    reuse.joined(transcript, lambda m: m)
    assert reuse.joined(transcript + ["c"], lambda m: m + str(len(seen)), reused=seen.append) == "a, b, c2"
    assert seen == ["a", "b"]


def test_json_keeps_only_what_the_latest_request_used():
    reuse, made = Reuse(), []
    tools, other = [{"name": "a"}], [{"name": "a"}]

    def make(value):
        made.append(value)
        return json.dumps(value)

    for _ in range(3):
        reuse.next_request()
        reuse.json(tools, lambda: make(tools))
    assert made == [tools]
    reuse.next_request()
    reuse.json(other, lambda: make(other))  # equal, but another object
    reuse.next_request()
    reuse.json(other, lambda: make(other))
    reuse.next_request()
    reuse.json(tools, lambda: make(tools))  # dropped: the request before did not use it
    assert made == [tools, other, tools]
    reuse.next_request()
    assert reuse.json(tools, lambda: "ctx", context=("x",)) == "ctx"  # another context, another piece


@pytest.mark.parametrize("fields", [
    {},
    {"model": "m", "messages": Encoded("[]"), "n": 1.5, "nested": {"ü": [None, True]}},
    {"messages": array(["{\"a\": 1}", "", "{\"b\": \"ẞ\"}"]), "stream": False},
])
def test_body_is_json_dumps_byte_for_byte(fields):
    plain = {k: json.loads(v) if isinstance(v, Encoded) else v for k, v in fields.items()}
    assert body(fields) == json.dumps(plain, ensure_ascii=False).encode()
