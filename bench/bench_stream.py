"""How long a streamed chunk takes to become a TextDelta event, per wire format.

    python -m bench.bench_stream            # prints a table (or: python -m bench, every suite)
    from bench.bench_stream import measure; rows = measure(repeat=200)

The design, and why it is honest:

* The model server runs in its **own process** (this module with ``--serve``), so its work never
  shares the client's interpreter or event loop. It answers each request with ``CHUNKS``
  text deltas in the wire's own framing (OpenAI SSE, Anthropic SSE, Ollama NDJSON), one
  per ``GAP_S`` so every delta arrives in its own read, and it writes ``time.time_ns()``
  into each delta's text immediately before sending it.
* **ours**: the provider's ``stream`` with an ``on_event`` that reads the clock when the
  TextDelta arrives and subtracts the stamp in its text: send → bytes in → httpx → our SSE /
  NDJSON parsing → fold → event.
* **floor**: a bare httpx stream (``aiter_raw``) of the same server reading the clock when the
  raw bytes of a chunk are handed over: send → bytes in → httpx. Nothing can beat it.
* Both use the same wall clock (one machine, one clock source for both processes).

A row reports, in milliseconds over ``repeat`` chunks (whole streams of ``CHUNKS``, rounded
up), the send→TextDelta latency (``median``, ``min``, ``max``), the same for the floor
(``floor_median``), ``ratio`` = median / floor_median, and ``cpu_median``: client CPU time
per chunk (a stream's process time divided by its chunks; median over streams). Our own
cost, chunk arrival to TextDelta, is ``median - floor_median``; the target (median at most
1 ms, ``target_kind="ms"``) is checked on the whole ``median``, loopback transit and httpx
included, so meeting it bounds our part from above.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from .common import ROOT, row

__all__ = ["measure", "CHUNKS", "GAP_S", "TARGET_MS"]

CHUNKS = 40
GAP_S = 0.002
TARGET_MS = 1.0
_STAMP = re.compile(r"(\d{16,})\|")
WIRES = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}


# --- the server (child process) ------------------------------------------------------------------

def _frames(path: str):
    """(opening frames, delta frame maker, closing frames) for the wire served at ``path``."""
    if path == WIRES["anthropic"]:
        def sse(event: dict) -> bytes:
            return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()

        opening = [sse({"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
                                                             "model": "bench", "content": [], "usage": {"input_tokens": 1}}}),
                   sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
        closing = [sse({"type": "content_block_stop", "index": 0}),
                   sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": CHUNKS}}),
                   sse({"type": "message_stop"})]
        return opening, lambda text: sse({"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}}), closing
    if path == WIRES["ollama"]:
        def line(chunk: dict) -> bytes:
            return json.dumps(chunk).encode() + b"\n"

        closing = [line({"model": "bench", "message": {"role": "assistant", "content": ""}, "done": True,
                         "done_reason": "stop", "prompt_eval_count": 1, "eval_count": CHUNKS})]
        return [], lambda text: line({"model": "bench", "message": {"role": "assistant", "content": text},
                                      "done": False}), closing

    def data(chunk: Any) -> bytes:
        return f"data: {json.dumps(chunk) if not isinstance(chunk, str) else chunk}\n\n".encode()

    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench"}
    closing = [data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
               data({**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": CHUNKS,
                                                      "total_tokens": CHUNKS + 1}}),
               data("[DONE]")]
    return [], lambda text: data({**base, "choices": [{"index": 0, "delta": {"content": text}}]}), closing


def _answer(conn: socket.socket) -> None:
    reader = conn.makefile("rb")
    while True:
        request_line = reader.readline()
        if not request_line:
            return
        headers = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        reader.read(int(headers.get("content-length", 0)))
        opening, delta, closing = _frames(request_line.split()[1].decode())
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

        def send(frame: bytes) -> None:
            conn.sendall(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")

        for frame in opening:
            send(frame)
        for _ in range(CHUNKS):
            time.sleep(GAP_S)
            send(delta(f"{time.time_ns()}|"))
        for frame in closing:
            send(frame)
        conn.sendall(b"0\r\n\r\n")


def serve() -> None:
    """Child process: print ``PORT <n>``, then answer every connection on its own thread."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_answer, args=(conn,), daemon=True).start()


# --- the client (this process) -------------------------------------------------------------------

def _stamps(text: str) -> list[int]:
    return [int(stamp) for stamp in _STAMP.findall(text)]


async def _ours(provider, wire: str) -> tuple[list[float], float]:
    from bettong_nb import events
    from bettong_nb.core.provider import Request

    latencies: list[float] = []

    def on_event(event) -> None:
        if isinstance(event, events.TextDelta):
            now = time.time_ns()
            latencies.extend((now - stamp) / 1e9 for stamp in _stamps(event.text))

    request = Request(messages=[{"role": "user", "content": "stream"}], model="bench")
    cpu = time.process_time()
    await provider.stream(request, on_event)
    return latencies, (time.process_time() - cpu) / CHUNKS


async def _floor(client, url: str) -> list[float]:
    latencies: list[float] = []
    body = json.dumps({"model": "bench", "stream": True, "messages": []}).encode()
    async with client.stream("POST", url, content=body, headers={"content-type": "application/json"}) as response:
        async for raw in response.aiter_raw():
            now = time.time_ns()
            latencies.extend((now - stamp) / 1e9 for stamp in _stamps(raw.decode(errors="replace")))
    return latencies


def _providers(base: str) -> dict[str, Any]:
    from bettong_nb.providers.anthropic import AnthropicProvider
    from bettong_nb.providers.ollama import OllamaProvider
    from bettong_nb.providers.openai import OpenAIProvider

    return {"openai": OpenAIProvider(base_url=base + "/v1", api_key="bench-key-0000"),
            "anthropic": AnthropicProvider(base_url=base, api_key="bench-key-0000"),
            "ollama": OllamaProvider(base_url=base, model="bench")}


def measure(repeat: int = 200) -> list[dict]:
    """One row per wire format over ``repeat`` chunks; see the module docstring for the numbers."""
    import httpx

    streams = max(1, math.ceil(repeat / CHUNKS))
    child = subprocess.Popen([sys.executable, "-m", "bench.bench_stream", "--serve"], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"stream server did not start: {line!r}")
        base = f"http://127.0.0.1:{int(line.split()[1])}"

        async def run() -> list[dict]:
            rows = []
            providers = _providers(base)
            async with httpx.AsyncClient(timeout=10) as client:
                for wire, path in WIRES.items():
                    await _ours(providers[wire], wire)  # warm up: connection, imports, caches
                    await _floor(client, base + path)
                    ours, cpus, floor = [], [], []
                    for _ in range(streams):  # interleaved, so both see the same machine
                        latencies, cpu = await _ours(providers[wire], wire)
                        ours += latencies
                        cpus.append(cpu)
                        floor += await _floor(client, base + path)
                    rows.append(row(f"stream: chunk -> TextDelta ({wire})", ours, cpus, floor=floor,
                                    target=TARGET_MS, target_kind="ms"))
            return rows

        return asyncio.run(run())
    finally:
        child.terminate()
        child.wait(5)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        from .common import table

        print(table(measure()))
