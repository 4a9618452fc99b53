"""Hostile and malformed answers from a model server, for each wire format: every one is read
(content as parts, arguments as an object, missing ids) or becomes one clear ProviderError —
never a TypeError or AttributeError from inside the library — and no error carries a key.

The corpus (tests/corpora/provider_bodies.json) is data: the body a loopback server answers
the first request with (a stream's events when ``stream``; ``RAW:`` marks a line sent as it
is), and what must come of it. ``KEY`` in a body stands for a secret the client holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bettong_nb
from bettong_nb import ProviderError
from support.servers import Reply
from support.wire import KEY, WIRES, weather

CASES = json.loads((Path(__file__).parent / "corpora" / "provider_bodies.json").read_text())
BY_NAME = {w.name: w for w in WIRES}
# Ollama has no key: there the secret is the value of a credential-named variable.
ENV_SECRET = "hush-7Qm2vX9kLp4Rt8Wz"


def _line(wire: str, item) -> bytes:
    if isinstance(item, str):
        text = item[4:] if item.startswith("RAW:") else item
    else:
        text = json.dumps(item)
    return (text + "\n").encode() if wire == "ollama" else f"data: {text}\n\n".encode()


def _answer(case: dict, secret: str):
    """The server: the case's body for the first request, a plain final answer afterwards."""
    body = json.loads(json.dumps(case["body"]).replace("KEY", secret))
    wire = BY_NAME[case["wire"]]
    sent = []

    def handler(request):
        sent.append(request)
        streamed = request.json().get("stream") is True
        if len(sent) > 1:
            return wire.stream(wire.body("final")) if streamed else Reply.json(wire.body("final"))
        if case["stream"]:
            return Reply(200, headers=wire.stream_headers, chunks=[_line(case["wire"], item) for item in body])
        return Reply.json(body)

    return handler


@pytest.mark.parametrize("case", CASES, ids=[f"{c['wire']}: {c['name']}" for c in CASES])
def test_a_malformed_answer_is_read_or_one_clear_error(case, board, monkeypatch):
    monkeypatch.setenv("RELAY_SERVICE_TOKEN", ENV_SECRET)
    secret = ENV_SECRET if case["wire"] == "ollama" else KEY
    server = board.serve(case["wire"], _answer(case, secret))
    agent = BY_NAME[case["wire"]].build(server.url, capabilities=[weather()], stream=case["stream"], max_retries=0)
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(ProviderError) as caught:
            agent.run("What is the weather in Kaunas?")
        message = str(caught.value)
        assert expect["error"] in message
        assert secret not in message and secret not in (caught.value.body_excerpt or "")
        return
    result = agent.run("What is the weather in Kaunas?")
    if "output" in expect:
        assert result.output == expect["output"]
    else:
        assert expect["tool"] in result.tool_calls[0].result
        assert result.done  # the model read the result and answered


def test_the_cli_prints_one_line_for_a_malformed_answer(board, tmp_path):
    import os
    import subprocess
    import sys

    server = board.serve("openai", lambda request: Reply.json({"choices": [{"message": {"tool_calls": [None]}}]}))
    env = {**{k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}, "DEEPSEEK_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-m", "bettong_nb", "hi", "--base-url", server.url + "/v1"],
                          capture_output=True, text=True, env=env, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    assert "tool calls that are not a list of objects" in lines[0] and "Traceback" not in proc.stderr


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
