"""Hostile and malformed answers from a model server, for each wire format: every one is read
(content as parts, arguments as an object, missing ids) or becomes one clear ProviderError —
never a TypeError or AttributeError from inside the library — and no error carries a key.

The corpus (tests/corpora/provider_bodies.json) is data: the body a loopback server answers
the first request with (a stream's events when ``stream``; ``RAW:`` marks a line sent as it
is), and what must come of it. ``KEY`` in a body stands for a secret the client holds;
``"@DEEP<n>@"`` as a whole string is a JSON value of n nested arrays, sent as it is, and
``@DEEP<n>@`` inside a string is that text (too deep for a corpus to hold, or for Python to load).
"""

from __future__ import annotations

import json
import re

import pytest

import bettong_nb
from bettong_nb import ProviderError
from support import TESTS
from support.servers import Reply
from support.wire import KEY, WIRES, weather

CASES = json.loads((TESTS / "corpora" / "provider_bodies.json").read_text())
BY_NAME = {w.name: w for w in WIRES}
# Ollama has no key: there the secret is the value of a credential-named variable.
ENV_SECRET = "hush-7Qm2vX9kLp4Rt8Wz"


_DEEP = re.compile(r'"@DEEP(\d+)@"|@DEEP(\d+)@')


def _sent(text: str, secret: str) -> str:
    """JSON text as the server sends it: its markers replaced."""
    nested = lambda m: "[" * int(m[1] or m[2]) + "]" * int(m[1] or m[2])  # noqa: E731
    return _DEEP.sub(nested, text.replace("KEY", secret))


def _line(wire: str, item, secret: str) -> bytes:
    text = (item[4:] if item.startswith("RAW:") else item) if isinstance(item, str) else json.dumps(item)
    text = _sent(text, secret)
    return (text + "\n").encode() if wire == "ollama" else f"data: {text}\n\n".encode()


def _answer(case: dict, secret: str):
    """The server: the case's body for the first request, a plain final answer afterwards."""
    wire = BY_NAME[case["wire"]]
    sent = []

    def handler(request):
        sent.append(request)
        streamed = request.json().get("stream") is True
        if len(sent) > 1:
            return wire.stream(wire.body("final")) if streamed else Reply.json(wire.body("final"))
        if case["stream"]:
            return Reply(200, headers=wire.stream_headers,
                         chunks=[_line(case["wire"], item, secret) for item in case["body"]])
        return Reply(200, _sent(json.dumps(case["body"]), secret).encode())

    return handler


@pytest.mark.parametrize("case", CASES, ids=[f"{c['wire']}: {c['name']}" for c in CASES])
def test_a_malformed_answer_is_read_or_one_clear_error(case, board, monkeypatch):
    monkeypatch.setenv("RELAY_SERVICE_TOKEN", ENV_SECRET)
    secret = ENV_SECRET if case["wire"] == "ollama" else KEY
    server = board.serve(case["wire"], _answer(case, secret))
    seen = []
    agent = BY_NAME[case["wire"]].build(server.url, capabilities=[weather()], stream=case["stream"], max_retries=0,
                                        on_event=seen.append)
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(ProviderError) as caught:
            agent.run("What is the weather in Kaunas?")
        message = str(caught.value)
        assert expect["error"] in message
        assert secret not in message and secret not in (caught.value.body_excerpt or "")
        return
    result = agent.run("What is the weather in Kaunas?")
    _encodable(seen)  # what listeners got (streamed deltas too) is text a terminal or a save can take
    if "output" in expect:
        assert result.output == expect["output"]
    else:
        assert expect["tool"] in result.tool_calls[0].result
        assert result.done  # the model read the result and answered


CLI_BODIES = [
    ({"choices": [{"message": {"tool_calls": [None]}}]}, "tool calls that are not a list of objects"),
    ({"choices": [{"message": {"tool_calls": [{"id": "c1", "function": {"name": ["x"], "arguments": "{}"}}]}}]},
     "a tool_use block whose 'name' is not a string"),
    ({"choices": [{"message": {"content": "@DEEP100000@"}}]}, "a body that is not JSON"),
]


@pytest.mark.parametrize("body,says", CLI_BODIES, ids=[says for _, says in CLI_BODIES])
def test_the_cli_prints_one_line_for_a_malformed_answer(body, says, board, tmp_path):
    import os
    import subprocess
    import sys

    server = board.serve("openai", lambda request: Reply(200, _sent(json.dumps(body), KEY).encode()))
    env = {**{k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}, "DEEPSEEK_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-m", "bettong_nb", "hi", "--base-url", server.url + "/v1"],
                          capture_output=True, text=True, env=env, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    assert says in lines[0] and "Traceback" not in proc.stderr


def test_the_corpus_covers_every_wire_whole_and_streamed():
    kinds = {(c["wire"], c["stream"]) for c in CASES}
    assert kinds == {(w.name, s) for w in WIRES for s in (False, True)}
    assert sum("no_key" in c["expect"] for c in CASES) >= 8
    assert bettong_nb.ProviderError is ProviderError


def test_text_that_cannot_be_encoded_never_breaks_the_next_request(board):
    """Lone surrogates (a "\\ud800" escape in the server's JSON, a tool's broken text) are mended
    as they enter the transcript, so every later request of the session still goes out."""
    wire = BY_NAME["openai"]
    bodies = iter([
        {"choices": [{"message": {"role": "assistant", "content": "half \\ud800 a pair",
                                  "tool_calls": [{"id": "c1", "type": "function", "function": {
                                      "name": "get_weather", "arguments": '{"city": "Ka\\udc00unas"}'}}]}}]},
        wire.body("final"), wire.body("final")])
    sent = []

    def handler(request):
        sent.append(request.json())
        return Reply(200, json.dumps(next(bodies)).replace("\\\\ud800", "\\ud800").encode())

    server = board.serve("openai", handler)
    broken = {"id": "w", "tools": [{"name": "get_weather", "parameters": {"city": {"type": "string"}},
                                    "handler": lambda city: f"weather in {city} \ud800"}]}
    chat = wire.build(server.url, capabilities=[broken]).session()
    first = chat.run("go \udfff")
    second = chat.run("and now?")
    assert first.done and second.done and len(sent) == 3
    assert first.tool_calls[0].args == {"city": "Ka\ufffdunas"}
    assert first.tool_calls[0].result == "weather in Ka\ufffdunas \ufffd"
    assert "\ufffd" in json.dumps(sent[2], ensure_ascii=False)  # the whole transcript, mended, went out
    json.dumps(chat.transcript, ensure_ascii=False).encode()  # and the session's transcript is valid UTF-8


# --- JSON nested too deep, wherever a server or a model sends it ---------------------------------

@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("wire", sorted(BY_NAME))
def test_an_error_body_nested_too_deep_is_one_clear_error(wire, status, board):
    server = board.serve(wire, lambda request: Reply(status, _sent('{"error": "@DEEP100000@"}', KEY).encode()))
    with pytest.raises(ProviderError, match=f"HTTP {status}"):
        BY_NAME[wire].build(server.url, max_retries=0).run("hi")


@pytest.mark.parametrize("depth", [150, 500, 100_000])
def test_a_structured_answer_nested_too_deep_is_told_to_the_model(depth):
    from dataclasses import dataclass

    from bettong_nb.providers.scripted import Scripted

    @dataclass
    class Rating:
        stars: int

    model = Scripted(["[" * depth + "]" * depth] * 2)
    result = bettong_nb.agent(provider=model, output_type=Rating, output_retries=1).run("rate it")
    assert result.stop_reason == "invalid_output" and "nested more than 100 levels deep" in result.reason
    assert "nested more than 100 levels deep" in model.requests[1].messages[-1]["content"]


# --- what a tool gives back that cannot be encoded ------------------------------------------------

class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


class _Weird:
    def __str__(self):
        return "weird \ud800"


def _raise(exc):
    raise exc


# (name, handler, what the model reads): every one reaches the model as clean text, and the
# ToolCall, the events and the saved session hold nothing UTF-8 cannot encode.
BROKEN_TOOLS = [
    ("raises with a lone surrogate", lambda city: _raise(ValueError("bad \ud800 " + city)),
     "ERROR: ValueError: bad \ufffd Kaunas"),
    ("raises an exception whose str raises", lambda city: _raise(_Unprintable()),
     "ERROR: _Unprintable: <a _Unprintable that cannot be shown>"),
    ("returns a dict with surrogates", lambda city: {"k\udc00": "v\ud800"}, '{"k\ufffd": "v\ufffd"}'),
    ("returns an object whose str has a surrogate", lambda city: _Weird(), "weird \ufffd"),
    ("returns ToolOutput(text=5)", lambda city: bettong_nb.ToolOutput(5), "5"),
    ("returns a ToolOutput with a surrogate and a traceback with one",
     lambda city: bettong_nb.ToolOutput("ok \ud800", traceback="tb \ud800"), "ok \ufffd"),
]


def _encodable(value, seen=None) -> None:
    """Every string reachable from ``value`` (dataclasses, dicts, lists) encodes as UTF-8."""
    import dataclasses

    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for key, item in value.items():
            _encodable(key)
            _encodable(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _encodable(item)
    elif dataclasses.is_dataclass(value):
        for item in vars(value).values():
            _encodable(item)


@pytest.mark.parametrize("name,handler,reads", BROKEN_TOOLS, ids=[b[0] for b in BROKEN_TOOLS])
def test_what_a_tool_gives_back_never_breaks_a_save_or_the_next_request(name, handler, reads, tmp_path):
    from bettong_nb.providers.scripted import Scripted

    tool = {"id": "w", "tools": [{"name": "get_weather", "parameters": {"city": {"type": "string"}},
                                  "handler": handler}]}
    seen = []
    model = Scripted([[("get_weather", {"city": "Kaunas"})], "done", "again"])
    chat = bettong_nb.agent(provider=model, capabilities=[tool], on_event=seen.append).session()
    first = chat.run("go")
    chat.run("and now?")
    assert model.requests[1].messages[-1]["content"][0]["content"] == reads == first.tool_calls[0].result
    json.dumps([r.messages for r in model.requests], ensure_ascii=False).encode("utf-8")
    _encodable(first.tool_calls)
    _encodable(seen)
    for suffix in ("json", "md", "html"):
        chat.save(tmp_path / f"chat.{suffix}")
