"""httpx over plain asyncio: an httpcore network backend and the httpx transport around it.

    transport = AsyncioTransport(ssl_context=ssl.create_default_context())
    client = httpx.AsyncClient(transport=transport, trust_env=False)

httpx's own async transport reaches the socket through anyio, whose stream wrappers, cancel
scopes and per-read pause/resume of the socket take about a fifth of the CPU of a loopback
request. Here httpcore's HTTP/1.1 pool talks to an asyncio protocol directly. Errors
map to the same httpcore classes as its anyio backend (so httpx raises the same classes:
ConnectError, ConnectTimeout, ReadError, ReadTimeout, WriteError, WriteTimeout,
RemoteProtocolError), which the retry policy in ``bettong_nb.http`` depends on. No proxies: the
library's clients ignore the environment's proxy settings anyway.
"""

from __future__ import annotations

import asyncio
import collections
import select
import ssl
import typing
from typing import Any, AsyncIterator, Iterable

import httpcore
import httpx

__all__ = ["AsyncioBackend", "AsyncioStream", "AsyncioTransport"]

# Stop reading the socket while this much arrived unread (a stream nobody consumes), resume
# below the low mark: the kernel's buffer then pushes back on the server.
_READ_HIGH = 256 * 1024
_READ_LOW = 64 * 1024


class _Connection(asyncio.Protocol):
    """What asyncio reports about one socket: bytes received, end of stream, loss, write pressure.

    Reading stays on (unlike anyio, which pauses the socket between reads), so a server that
    closed an idle keep-alive connection is usually known here before the next request.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None  # why the connection was lost, if not cleanly
        self.closed = False  # we closed it
        self.tls = False
        self.reading_paused = False
        self.transport: asyncio.Transport | None = None
        # Both hold True when woken, False when their timer ran out first.
        self.reader: asyncio.Future[bool] | None = None
        self.writer: asyncio.Future[bool] | None = None
        self.write_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > _READ_HIGH and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        _wake(self.reader)

    def eof_received(self) -> bool:
        self.eof = True
        _wake(self.reader)
        # Keep a plain socket open for writing, as anyio does; TLS transports close regardless.
        return not self.tls

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = exc
        _wake(self.reader)
        _wake(self.writer)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        _wake(self.writer)

    async def wait(self, slot: str, timeout: float | None) -> bool:
        """Wait until :meth:`_wake` or ``timeout``; False on timeout. One waiter per direction."""
        if getattr(self, slot) is not None:
            raise RuntimeError(f"another task is already waiting to use this connection ({slot})")
        # A bare future and a timer: cheaper than asyncio.timeout(), which cancels the task.
        waiter = self.loop.create_future()
        setattr(self, slot, waiter)
        timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
        try:
            return await waiter
        finally:
            setattr(self, slot, None)
            if timer is not None:
                timer.cancel()


def _wake(waiter: asyncio.Future[bool] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(True)


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_result(False)


def _socket_readable(sock: Any) -> bool:
    """Whether the kernel holds unread bytes or an end of stream for ``sock`` (a closed one is)."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # Windows


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection, plain or TLS, as httpcore's connections use it (one request at a time)."""

    def __init__(self, connection: _Connection, transport: asyncio.Transport) -> None:
        self._conn = connection
        self._transport = transport

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        conn = self._conn
        if not conn.chunks:
            if conn.closed:
                raise httpcore.ReadError("the connection was closed")
            if not (conn.eof or conn.lost) and not await conn.wait("reader", timeout):
                raise httpcore.ReadTimeout(f"nothing arrived for {timeout:g} s")
            if not conn.chunks:
                if conn.error is not None:
                    raise httpcore.ReadError(str(conn.error) or type(conn.error).__name__) from conn.error
                return b""  # end of stream: h11 turns it into the right protocol error, if any
        chunk = conn.chunks.popleft()
        if len(chunk) > max_bytes:
            conn.chunks.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        conn.buffered -= len(chunk)
        if conn.reading_paused and conn.buffered <= _READ_LOW and not conn.lost:
            conn.reading_paused = False
            self._transport.resume_reading()
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        conn = self._conn
        self._check_writable()
        self._transport.write(buffer)
        # Over the transport's high-water mark: wait until the kernel takes the rest.
        if conn.write_paused and not conn.lost:
            if not await conn.wait("writer", timeout):
                raise httpcore.WriteTimeout(f"the connection took no data for {timeout:g} s")
            self._check_writable()

    def _check_writable(self) -> None:
        conn = self._conn
        if conn.closed:
            raise httpcore.WriteError("the connection was closed")
        if conn.lost:
            raise httpcore.WriteError(str(conn.error or "the server closed the connection")) from conn.error

    async def aclose(self) -> None:
        # abort, not close: no TLS close_notify exchange to wait for (anyio does the same)
        self._conn.closed = True
        self._transport.abort()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncioStream:
        conn = self._conn
        conn.tls = True
        try:
            async with asyncio.timeout(timeout):
                transport = await conn.loop.start_tls(self._transport, conn, ssl_context,
                                                      server_hostname=server_hostname)
        except TimeoutError as exc:  # before OSError: TimeoutError is one
            await self.aclose()
            raise httpcore.ConnectTimeout(f"TLS handshake took longer than {timeout:g} s") from exc
        except OSError as exc:  # ssl.SSLError (a bad certificate, say) included
            await self.aclose()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            await self.aclose()
            raise
        conn.transport = typing.cast(asyncio.Transport, transport)
        return AsyncioStream(conn, conn.transport)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            conn = self._conn
            return (bool(conn.chunks) or conn.eof or conn.lost or conn.closed
                    or _socket_readable(self._transport.get_extra_info("socket")))
        name = _EXTRA.get(info)
        return None if name is None else self._transport.get_extra_info(name)


_EXTRA = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername", "socket": "socket"}


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on the running asyncio loop."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> AsyncioStream:
        loop = asyncio.get_running_loop()
        conn = _Connection(loop)
        try:
            async with asyncio.timeout(timeout):
                transport, _ = await loop.create_connection(
                    lambda: conn, host, port, happy_eyeballs_delay=0.25,
                    local_addr=None if local_address is None else (local_address, 0))
        except TimeoutError as exc:  # before OSError: TimeoutError is one
            raise httpcore.ConnectTimeout(f"connecting took longer than {timeout:g} s" if timeout is not None
                                          else str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        stream = AsyncioStream(conn, transport)
        if socket_options:  # asyncio already sets TCP_NODELAY
            sock = transport.get_extra_info("socket")
            try:
                for option in socket_options:
                    sock.setsockopt(*option)
            except OSError as exc:
                await stream.aclose()
                raise httpcore.ConnectError(str(exc)) from exc
        return stream

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> AsyncioStream:
        raise NotImplementedError("AsyncioBackend connects over TCP only; for a Unix socket use "
                                  "httpx.AsyncHTTPTransport(uds=...)")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# httpcore's exception classes and httpx's share their names.
_ERRORS: dict[type[Exception], type[httpx.HTTPError]] = {
    getattr(httpcore, name): getattr(httpx, name) for name in (
        "TimeoutException", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "NetworkError",
        "ConnectError", "ReadError", "WriteError", "ProxyError", "UnsupportedProtocol", "ProtocolError",
        "LocalProtocolError", "RemoteProtocolError")}
_CORE_ERRORS = tuple(_ERRORS)


def _httpx_error(exc: Exception) -> httpx.HTTPError:
    """The httpx counterpart of an httpcore exception: the most specific class that matches."""
    cls = next(c for c in type(exc).__mro__ if c in _ERRORS)
    return _ERRORS[cls](str(exc))


class _Body(httpx.AsyncByteStream):
    """A response body from httpcore, its errors raised as httpx's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc) from exc

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc) from exc


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport: httpcore's HTTP/1.1 connection pool on :class:`AsyncioBackend`.

    ``ssl_context`` verifies HTTPS servers; the limits mean what they mean in ``httpx.Limits``.
    """

    def __init__(self, *, ssl_context: ssl.SSLContext, max_connections: int | None = 100,
                 max_keepalive_connections: int | None = 20, keepalive_expiry: float | None = 5.0) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections, keepalive_expiry=keepalive_expiry,
            network_backend=AsyncioBackend())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        try:
            response = await self._pool.handle_async_request(core_request)
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc) from exc
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Body(response.stream), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()
