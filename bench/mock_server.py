"""A minimal, fast OpenAI-compatible model server for benchmarks, run in its own process.

    python -m bench.mock_server --port 0 --latency 0.1     # prints "PORT <n>" when ready

Answers a tool call (``run_probe``; ``--calls N``: N calls in that one step) when the request's
last message is not a tool result, and a final answer otherwise; so one agent run is exactly 2
model calls + 1 tool (+ N). A request that offers no tools gets the final answer at once (one
call per run). Keep-alive HTTP/1.1 on asyncio streams, so the server's own cost per request
stays far below the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def tool_calls(count: int) -> bytes:
    return json.dumps({
        "id": "b1", "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i + 1}", "type": "function",
                            "function": {"name": "run_probe", "arguments": "{\"n\": 3}"}} for i in range(count)]}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}}).encode()


ANSWER = json.dumps({
    "id": "b2", "object": "chat.completion", "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done: 9."}}],
    "usage": {"prompt_tokens": 150, "completion_tokens": 4, "total_tokens": 154,
              "prompt_cache_hit_tokens": 128, "prompt_cache_miss_tokens": 22}}).encode()


def _reply(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float, calls: bytes) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length) if length else b""
            if latency:
                await asyncio.sleep(latency)
            # the last message decides: a tool result asks for the answer
            role = body[body.rfind(b'"role"') + 6:].lstrip(b": ")
            answer = role.startswith(b'"tool"') or b'"tools"' not in body
            writer.write(_reply(ANSWER if answer else calls))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int, latency: float, calls: int) -> None:
    reply = tool_calls(calls)
    server = await asyncio.start_server(lambda r, w: _serve(r, w, latency, reply), "127.0.0.1", port, backlog=512)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--calls", type=int, default=1)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.port, args.latency, args.calls))
    except KeyboardInterrupt:
        sys.exit(0)
