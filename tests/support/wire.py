"""Loopback stand-ins for the Anthropic and Ollama wire formats (OpenAI's is support.servers.ChatScript).

    with LoopbackServer(AnthropicScript([wire("anthropic", "answer")])) as server:
        bettong_nb.anthropic(api_key="k" * 12, base_url=server.url).run("hi")

A script serves whole response bodies in order, as JSON, or as the event stream the real
server would send for the same answer when the request says ``"stream": true``. Recorded
streams under tests/wire/ are served as they are with :func:`recorded`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import bettong_nb
from .servers import ChatScript, LoopbackServer, Recorded, Reply, Script, _stream_chunks

__all__ = ["WIRE", "KEY", "Wire", "WIRES", "wire", "recorded", "Switchboard", "assert_well_formed", "AnthropicScript", "OllamaScript", "anthropic_events", "anthropic_sse",
           "ollama_chunks", "ollama_ndjson", "openai_error", "anthropic_error", "ollama_error"]

WIRE = Path(__file__).parent.parent / "wire"
KEY = "bt-test-Zq81fJ0aXwVilnius7731"  # not shaped like any known token: only the provider's key redacts it
SSE = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
NDJSON = {"Content-Type": "application/x-ndjson"}


def wire(provider: str, case: str) -> dict:
    """A recorded-shaped body: tests/wire/<provider>/<case>.json."""
    return json.loads((WIRE / provider / f"{case}.json").read_text(encoding="utf-8"))


def recorded(provider: str, filename: str, **reply: Any) -> Reply:
    """A recorded stream served chunk by chunk: one SSE event, or one NDJSON line, per chunk."""
    text = (WIRE / provider / filename).read_text(encoding="utf-8")
    if filename.endswith(".sse"):
        chunks = [event.encode() + b"\n\n" for event in text.split("\n\n") if event.strip()]
        headers = SSE
    else:
        chunks = [line.encode() + b"\n" for line in text.splitlines() if line.strip()]
        headers = NDJSON
    return Reply(200, headers=headers, chunks=chunks, **reply)


# --- error bodies, each in its provider's own shape --------------------------------------------

_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                    503: "api_error", 529: "overloaded_error"}


def openai_error(status: int, message: str, **headers: str) -> Reply:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return Reply.json({"error": {"message": message, "type": kind, "param": None, "code": None}}, status, **headers)


def anthropic_error(status: int, message: str, **headers: str) -> Reply:
    return Reply.json({"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message},
                       "request_id": "req_011CUaTestLoopback000001"}, status, **headers)


def ollama_error(status: int, message: str, **headers: str) -> Reply:
    return Reply.json({"error": message}, status, **headers)


# --- Anthropic: a Message body as the SSE events the API sends for it ---------------------------

def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def anthropic_events(body: dict) -> list[dict]:
    """The stream for ``body``: message_start, per block start/deltas/stop, message_delta, message_stop."""
    usage = dict(body.get("usage") or {})
    head = {k: v for k, v in body.items() if k not in ("content", "stop_reason", "stop_details", "usage")}
    out: list[dict] = [{"type": "message_start", "message": {
        **head, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict] = []
        if kind == "text":
            start = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], 4)]
        elif kind == "thinking":
            start = {**block, "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], 9)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                {"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(block["input"]), 7)]
        else:
            start = block
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        if index == 0:
            out.append({"type": "ping"})
        out.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        out.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": body.get("stop_sequence")}
    if body.get("stop_details") is not None:
        delta["stop_details"] = body["stop_details"]
    out.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage.get("output_tokens", 0)}})
    out.append({"type": "message_stop"})
    return out


def anthropic_sse(events: Iterable[dict]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


# --- Ollama: a chat body as the NDJSON chunks the server sends for it ---------------------------

def ollama_chunks(body: dict) -> list[dict]:
    message = body["message"]
    base = {"model": body["model"], "created_at": body["created_at"]}
    out: list[dict] = []
    for piece in _pieces(message.get("thinking") or "", 8):
        out.append({**base, "message": {"role": "assistant", "content": "", "thinking": piece}, "done": False})
    for piece in _pieces(message.get("content") or "", 4):
        out.append({**base, "message": {"role": "assistant", "content": piece}, "done": False})
    if message.get("tool_calls"):
        out.append({**base, "message": {"role": "assistant", "content": "", "tool_calls": message["tool_calls"]},
                    "done": False})
    final = {k: v for k, v in body.items() if k != "message"}
    out.append({**final, "message": {"role": "assistant", "content": ""}})
    return out


def ollama_ndjson(chunks: Iterable[dict]) -> list[bytes]:
    return [json.dumps(c).encode() + b"\n" for c in chunks]


# --- scripts ------------------------------------------------------------------------------------

class AnthropicScript(Script):
    def streamed(self, body: dict) -> Reply:
        return Reply(200, headers=SSE, chunks=anthropic_sse(anthropic_events(body)))

    def exhausted(self) -> Reply:
        return anthropic_error(500, "script exhausted")


class OllamaScript(Script):
    def streamed(self, body: dict) -> Reply:
        return Reply(200, headers=NDJSON, chunks=ollama_ndjson(ollama_chunks(body)))

    def exhausted(self) -> Reply:
        return ollama_error(500, "script exhausted")


def weather(calls: list | None = None) -> dict:
    """The get_weather capability the wire suites share; ``calls`` collects the cities asked."""

    def get_weather(city: str) -> str:
        if calls is not None:
            calls.append(city)
        return f"raining in {city}, 11 °C"

    return {"id": "weather", "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                                        "parameters": {"city": {"type": "string", "required": True}},
                                        "handler": get_weather}]}


class Switchboard:
    """One long-lived loopback server per wire format, its handler swapped per test.

    Starting a LoopbackServer is cheap but stopping one waits out serve_forever's 0.5 s poll,
    so a suite of many short exchanges shares servers (as the client shares connections).

        board = Switchboard()
        server = board.serve("anthropic", AnthropicScript([...]))   # requests cleared
        board.close()
    """

    def __init__(self) -> None:
        self._servers: dict[str, LoopbackServer] = {}

    def serve(self, name: str, handler) -> LoopbackServer:
        server = self._servers.get(name)
        if server is None:
            server = self._servers[name] = LoopbackServer(handler).__enter__()
        with server.lock:
            server.handler = handler
            server.requests.clear()
        return server

    def close(self) -> None:
        for server in self._servers.values():
            server.__exit__(None, None, None)
        self._servers.clear()


# --- the three wire formats, side by side, for suites parametrized over them -------------------

@dataclass(frozen=True)
class Wire:
    """How to talk to one wire format's loopback server, and read what the client sent it."""

    name: str
    path: str  # where requests go
    tool_case: str  # the recorded body that calls get_weather
    script: Callable[[list], Callable[[Recorded], Reply]]
    error: Callable[..., Reply]  # (status, message, **headers) in the provider's error shape
    build: Callable[..., Any]  # (url, **options) -> an agent with key KEY where the wire has keys
    stream_chunks: Callable[[dict], list[bytes]]  # a body as the chunks of its stream
    stream_headers: dict
    key_header: Callable[[Recorded], str | None]
    tool_results: Callable[[dict], list[str]]  # tool result texts in a request body

    def body(self, case: str) -> dict:
        return wire(self.name, case)

    def conversation(self) -> list[dict]:
        return [self.body(self.tool_case), self.body("final")]

    def stream(self, body: dict, *, keep: int | None = None, **reply: Any) -> Reply:
        """``body`` streamed; ``keep`` sends only its first chunks (with ``cut=True``: then drops)."""
        chunks = self.stream_chunks(body)
        return Reply(200, headers=self.stream_headers, chunks=chunks if keep is None else chunks[:keep], **reply)


def _tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _anthropic_results(body: dict) -> list[str]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b["content"] for b in last["content"] if b["type"] == "tool_result"]


WIRES = [
    Wire("openai", "/v1/chat/completions", "tool_call", ChatScript, openai_error,
         lambda url, **o: bettong_nb.openai(base_url=url + "/v1", api_key=KEY, **o),
         _stream_chunks, {"Content-Type": "text/event-stream"},
         lambda r: r.headers.get("authorization"), _tool_messages),
    Wire("anthropic", "/v1/messages", "tool_use", AnthropicScript, anthropic_error,
         lambda url, **o: bettong_nb.anthropic(base_url=url, api_key=KEY, **o),
         lambda body: anthropic_sse(anthropic_events(body)), SSE,
         lambda r: r.headers.get("x-api-key"), _anthropic_results),
    Wire("ollama", "/api/chat", "tool_call", OllamaScript, ollama_error,
         lambda url, **o: bettong_nb.ollama(base_url=url, model="qwen3:8b", **o),
         lambda body: ollama_ndjson(ollama_chunks(body)), NDJSON,
         lambda r: None, _tool_messages),
]


def assert_well_formed(wire_name: str, body: dict) -> None:
    """The request body's conversation is one its API accepts: every tool call answered right
    after it, every result answering a call (and, for Anthropic, roles alternating from user)."""
    messages = body["messages"]
    if wire_name == "anthropic":
        roles = [m["role"] for m in messages]
        assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:])), roles
        for i, m in enumerate(messages):
            blocks = m["content"] if isinstance(m["content"], list) else []
            assert blocks or m["content"], f"message {i} is empty"
            if m["role"] == "assistant":
                asked = {b["id"] for b in blocks if b["type"] == "tool_use"}
                later = messages[i + 1]["content"] if i + 1 < len(messages) else []
                answered = {b["tool_use_id"] for b in later if isinstance(b, dict) and b["type"] == "tool_result"}
                assert asked == answered, (i, asked, answered)
            elif i == 0 or not isinstance(messages[i - 1]["content"], list):
                assert not any(b["type"] == "tool_result" for b in blocks), f"message {i}: a result without a call"
        return
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            replies = messages[i + 1:i + 1 + len(calls)]
            assert [r["role"] for r in replies] == ["tool"] * len(calls), (i, replies)
            if wire_name == "openai":
                assert [r["tool_call_id"] for r in replies] == [c["id"] for c in calls]
        if m["role"] == "tool":
            before = next(p for p in reversed(messages[:i]) if p["role"] != "tool")
            assert before["role"] == "assistant" and before.get("tool_calls"), f"message {i}: a result without a call"


def calls_body(w: Wire, cities: list[str]) -> dict:
    """The wire's recorded tool call, asking get_weather for each of ``cities`` in one step."""
    import copy

    if w.name == "openai":
        from .servers import chat_message, tool_call

        return chat_message(tool_calls=[tool_call("get_weather", {"city": c}, f"call_{i}") for i, c in enumerate(cities)])
    body = copy.deepcopy(w.body(w.tool_case))
    if w.name == "anthropic":
        use = body["content"][-1]
        body["content"][-1:] = [{**use, "id": f"toolu_{i}", "input": {"city": c}} for i, c in enumerate(cities)]
    else:
        body["message"]["tool_calls"] = [{"function": {"name": "get_weather", "arguments": {"city": c}}} for c in cities]
    return body
