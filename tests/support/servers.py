"""Real HTTP servers on 127.0.0.1 standing in for model and search APIs.

    with LoopbackServer(lambda req: Reply.json({"ok": True})) as server:
        httpx.get(server.url + "/x")
        server.requests[0].path   # "/x"

A handler gets the recorded :class:`Recorded` request and returns a :class:`Reply`; a reply
whose ``chunks`` is set is streamed chunk by chunk (SSE, NDJSON, or a body cut off midway).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

__all__ = ["Recorded", "Reply", "LoopbackServer", "RawServer", "FaultyServer", "Script", "ChatScript", "chat_message",
           "tool_call", "sse"]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    chunks: Iterable[bytes] | None = None  # streamed; the connection closes after the last
    chunk_delay: float = 0.0
    cut: bool = False  # drop the connection after the chunks, without finishing the body
    delay: float = 0.0  # wait before answering

    @classmethod
    def json(cls, data: Any, status: int = 200, *, delay: float = 0.0, **headers: str) -> "Reply":
        """A JSON body; extra keyword arguments are response headers."""
        return cls(status, json.dumps(data).encode(), {"Content-Type": "application/json", **headers}, delay=delay)

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/html; charset=utf-8") -> "Reply":
        return cls(status, text.encode(), {"Content-Type": content_type})


def sse(events: Iterable[Any], *, done: bool = True) -> list[bytes]:
    """Server-sent-event chunks, one ``data:`` line per event (dicts become JSON)."""
    out = [f"data: {json.dumps(e) if not isinstance(e, str) else e}\n\n".encode() for e in events]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the body waited for the
    # client's delayed ACK of the headers, about 40 ms a reply.
    disable_nagle_algorithm = True

    def log_message(self, *args):  # keep test output clean
        pass

    def _handle(self):
        server: LoopbackServer = self.server.owner  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        rec = Recorded(self.command, parts.path, parse_qs(parts.query),
                       {k.lower(): v for k, v in self.headers.items()}, body)
        with server.lock:
            server.requests.append(rec)
        try:
            reply = server.handler(rec)
        except Exception as exc:  # a broken test handler should be loud, not hang the client
            reply = Reply.json({"error": {"message": f"test handler failed: {exc!r}"}}, status=599)
        if reply.delay:
            time.sleep(reply.delay)
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        if reply.chunks is None:
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in reply.chunks:
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
            if reply.chunk_delay:
                time.sleep(reply.chunk_delay)
        if reply.cut:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = _handle


class LoopbackServer:
    """A threaded HTTP server on a free 127.0.0.1 port; use as a context manager."""

    def __init__(self, handler: Callable[[Recorded], Reply]):
        self.handler = handler
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def only_request(self) -> Recorded:
        assert len(self.requests) == 1, f"expected one request, got {len(self.requests)}"
        return self.requests[0]


# --- an OpenAI-compatible chat server driven by a script ---------------------------------------

def tool_call(name: str, args: Any, id: str | None = None) -> dict:
    """An OpenAI-wire tool call; ``args`` may be a dict or the raw arguments text."""
    return {"id": id or f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def chat_message(content: str | None = None, tool_calls: list[dict] | None = None,
                 usage: dict | None = None, model: str = "test-model", **extra: Any) -> dict:
    """A whole chat.completion body."""
    message: dict = {"role": "assistant", "content": content, **extra}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


def _stream_chunks(body: dict) -> list[bytes]:
    """The same answer as a chat.completion.chunk SSE stream, split the way real servers do."""
    message = body["choices"][0]["message"]
    finish = body["choices"][0]["finish_reason"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "model": body["model"]}
    events: list[dict] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    if message.get("reasoning_content"):
        events.append({**base, "choices": [{"index": 0, "delta": {"reasoning_content": message["reasoning_content"]}}]})
    content = message.get("content") or ""
    for i in range(0, len(content), 4):
        events.append({**base, "choices": [{"index": 0, "delta": {"content": content[i:i + 4]}}]})
    for index, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"], "arguments": ""}}]}}]})
        for i in range(0, len(args), 5):
            events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": args[i:i + 5]}}]}}]})
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    events.append({**base, "choices": [], "usage": body["usage"]})
    return sse(events)


class Script:
    """Serves scripted turns in order: a body (sent whole, or streamed when the request asks)
    or a :class:`Reply` as it is. Past the end it answers 500, so a runaway loop fails loudly.
    Subclasses say how one wire format streams a body and reports an error."""

    def __init__(self, turns: Iterable[dict | Reply]):
        self.turns = list(turns)
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, request: Recorded) -> Reply:
        with self._lock:
            if self._next >= len(self.turns):
                return self.exhausted()
            turn = self.turns[self._next]
            self._next += 1
        if isinstance(turn, Reply):
            return turn
        return self.streamed(turn) if request.json().get("stream") else Reply.json(turn)

    def streamed(self, body: dict) -> Reply:
        raise NotImplementedError

    def exhausted(self) -> Reply:
        return Reply.json({"error": {"message": "script exhausted"}}, status=500)


class ChatScript(Script):
    """OpenAI-compatible chat completions; each turn a chat.completion body (:func:`chat_message`)."""

    def streamed(self, body: dict) -> Reply:
        return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=_stream_chunks(body))


# --- below HTTP: raw sockets, for what an HTTP server library will not do ---------------------

class RawServer:
    """Runs ``serve(conn)`` in a thread per accepted connection (TLS-wrapped with ``tls``);
    counts connections. ``accept=False`` never accepts: connections wait in the backlog."""

    def __init__(self, serve: Callable[[socket.socket], None], *, tls: ssl.SSLContext | None = None,
                 backlog: int = 64, accept: bool = True):
        self.serve, self.tls, self.connections = serve, tls, 0
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=backlog)
        self.port = self.sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.done = threading.Event()  # set by tests to release handlers that hold on
        self._accept = accept
        self._open: list[socket.socket] = []

    def __enter__(self) -> "RawServer":
        if self._accept:
            threading.Thread(target=self._loop, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.sock.close()
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.close()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        try:
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
            self.serve(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()


class FaultyServer(RawServer):
    """An HTTP server misbehaving in ways an HTTP server library will not: for each request,
    in order, ``faults`` says ``"reset"`` (the request is read, then an RST instead of a status
    line) or ``"silent"`` (no answer; the connection stays open until the client gives up);
    once they are used up it answers ``body`` as JSON, or streams ``chunks`` (chunked, the
    connection kept alive, as the real APIs do).

        with FaultyServer(["reset", "silent"], body={...}) as server: ...   # .url, .attempts, .connections
    """

    def __init__(self, faults: Iterable[str], *, body: Any = None, chunks: list[bytes] | None = None):
        super().__init__(self._answer)
        self.faults = list(faults)
        self.payload = json.dumps(body).encode()
        self.chunks = chunks
        self.attempts = 0
        self._lock = threading.Lock()

    def _answer(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        while True:  # one keep-alive connection may carry several requests
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = reader.readline()
                if not line:
                    return
                head += line
            length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                           if h.lower().startswith(b"content-length:")), 0)
            reader.read(length)
            with self._lock:
                fault = self.faults[self.attempts] if self.attempts < len(self.faults) else None
                self.attempts += 1
            if fault == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if fault == "silent":
                reader.read()  # until the client hangs up
                return
            if self.chunks is None:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(self.payload)}\r\n\r\n".encode() + self.payload)
                continue
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for chunk in self.chunks:
                conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            conn.sendall(b"0\r\n\r\n")


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on right now (for a server started in a subprocess)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
