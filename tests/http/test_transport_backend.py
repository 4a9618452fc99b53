"""The asyncio network backend under httpx (bettong_nb/providers/_asyncio_transport.py).

Real sockets on 127.0.0.1 throughout: a small raw HTTP/1.1 server whose connection handler each
test writes, so a test can count connections, close idle ones, cut a body or never answer.
Error cases run against httpx's own anyio transport too: both must raise the same classes, which
the provider retry policy relies on.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import ssl
import struct
import threading
import time

import httpx
import pytest
import trustme

from bettong_nb.http import client as _http
from bettong_nb.http._asyncio_transport import AsyncioBackend, AsyncioStream, AsyncioTransport
from support.servers import RawServer

def read_request(conn: socket.socket) -> bytes | None:
    """One request's body (b"" when none), or None when the client closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = conn.recv(65536)
        if not part:
            return None
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += conn.recv(65536)
    return body


def reply(body: bytes, *, length: int | None = None) -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body) if length is None else length}"
            f"\r\n\r\n").encode() + body


def echo(conn: socket.socket) -> None:
    """Keep-alive: answer every request with its own body, prefixed."""
    while (body := read_request(conn)) is not None:
        conn.sendall(reply(b"echo:" + body))


@pytest.fixture(scope="module")
def certs():
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


def ours(context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AsyncioTransport(ssl_context=context or ssl.create_default_context()),
                             trust_env=False)


def anyio_based(context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(verify=context or ssl.create_default_context(), trust_env=False)


BOTH = pytest.mark.parametrize("client", [ours, anyio_based], ids=["asyncio", "anyio"])


def fetch(client_factory, url: str, *, timeout: httpx.Timeout | float = 5.0, context=None, **kw) -> httpx.Response:
    async def go():
        async with client_factory(context) as client:
            return await client.request(kw.pop("method", "GET"), url, timeout=timeout, **kw)

    return asyncio.run(go())


# --- requests that succeed -------------------------------------------------------------------


def test_the_library_pools_use_the_asyncio_backend_and_reuse_one_connection():
    async def go():
        answers = []
        for i in range(4):
            with _http.borrow() as client:
                response = await client.post(server.url + "/x", content=f"n{i}".encode())
            answers.append(response.text)
            stream = response.extensions["network_stream"]
        await _http.close_clients()
        return answers, stream

    with RawServer(echo) as server:
        answers, stream = asyncio.run(go())
    assert answers == ["echo:n0", "echo:n1", "echo:n2", "echo:n3"]
    assert isinstance(stream, AsyncioStream)
    assert server.connections == 1


def test_https_with_a_trusted_ca_and_keep_alive(certs):
    server_ctx, client_ctx = certs

    async def go():
        async with ours(client_ctx) as client:
            first = await client.post(server.url + "/a", content=b"one")
            second = await client.post(server.url + "/b", content=b"two")
            return first, second

    with RawServer(echo, tls=server_ctx) as server:
        first, second = asyncio.run(go())
    assert (first.text, second.text) == ("echo:one", "echo:two")
    stream = second.extensions["network_stream"]
    assert stream.get_extra_info("ssl_object").version().startswith("TLS")
    assert server.connections == 1


def test_the_stream_reports_its_addresses_and_socket():
    with RawServer(echo) as server:
        response = fetch(ours, server.url)
    stream = response.extensions["network_stream"]
    assert stream.get_extra_info("server_addr") == ("127.0.0.1", server.port)
    assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
    assert stream.get_extra_info("socket").family == socket.AF_INET
    assert stream.get_extra_info("ssl_object") is None and stream.get_extra_info("no such thing") is None


def test_an_untrusted_certificate_is_a_connect_error(certs):
    server_ctx, _ = certs
    with RawServer(echo, tls=server_ctx) as server:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            fetch(ours, server.url)
        assert server.connections == 1


@pytest.mark.parametrize("wait", ["loop runs", "loop blocked"])
def test_a_keep_alive_connection_the_server_closed_is_replaced(wait):
    """The server answers with keep-alive, then drops the idle connection. Whether the loop saw the
    FIN ("loop runs") or only the kernel has it ("loop blocked"), the next request takes a new
    connection instead of failing on the dead one."""

    def answer_once(conn):
        read_request(conn)
        conn.sendall(reply(b"once"))
        conn.shutdown(socket.SHUT_RDWR)

    async def go():
        async with ours() as client:
            texts = [(await client.get(server.url)).text]
            for _ in range(2):
                if wait == "loop runs":
                    await asyncio.sleep(0.1)
                else:
                    time.sleep(0.1)  # noqa: ASYNC251 - the point: the loop must not run
                texts.append((await client.get(server.url)).text)
            return texts

    with RawServer(answer_once) as server:
        assert asyncio.run(go()) == ["once"] * 3
        assert server.connections == 3


def test_is_readable_sees_a_close_the_loop_has_not_processed():
    async def go():
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", server.port, timeout=2)
        try:
            await asyncio.sleep(0.05)
            before = stream.get_extra_info("is_readable")
            closed.set()
            time.sleep(0.2)  # noqa: ASYNC251 - the FIN reaches the kernel while the loop does not run
            return before, stream.get_extra_info("is_readable"), await stream.read(10, timeout=1)
        finally:
            await stream.aclose()

    closed = threading.Event()
    with RawServer(lambda conn: (closed.wait(5), conn.shutdown(socket.SHUT_RDWR))) as server:
        assert asyncio.run(go()) == (False, True, b"")


def test_lines_stream_as_they_arrive():
    """The second line is sent only after the client has read the first: a buffering client hangs."""
    first_seen = threading.Event()

    def lines(conn):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        conn.sendall(b"6\r\nfirst\n\r\n")
        first_seen.wait(5)
        conn.sendall(b"7\r\nsecond\n\r\n0\r\n\r\n")

    async def go():
        got = []
        async with ours() as client, client.stream("POST", server.url, content=b"{}", timeout=3) as response:
            async for line in response.aiter_lines():
                got.append(line)
                first_seen.set()
        return got

    with RawServer(lines) as server:
        assert asyncio.run(go()) == ["first", "second"]


def test_a_big_body_read_slowly_arrives_intact():
    """4 MB read 64 KB at a time with pauses: the backend stops reading the socket while a lot is
    unread and resumes after, and no byte is lost or reordered."""
    payload = bytes(range(256)) * (4 * 4096)

    def big(conn):
        read_request(conn)
        conn.sendall(reply(payload))
        read_request(conn)

    async def go():
        digest, size = hashlib.sha256(), 0
        async with ours() as client, client.stream("GET", server.url, timeout=5) as response:
            async for part in response.aiter_raw():
                digest.update(part)
                size += len(part)
                if size < 1_000_000:
                    await asyncio.sleep(0.01)
        return size, digest.hexdigest()

    with RawServer(big) as server:
        assert asyncio.run(go()) == (len(payload), hashlib.sha256(payload).hexdigest())


def test_fifty_concurrent_requests():
    async def go():
        async with ours() as client:
            responses = await asyncio.gather(*(client.post(server.url, content=str(i).encode()) for i in range(50)))
        return [r.text for r in responses]

    with RawServer(echo, backlog=128) as server:
        assert asyncio.run(go()) == [f"echo:{i}" for i in range(50)]
        assert 1 <= server.connections <= 50


def test_unix_sockets_are_refused_clearly():
    with pytest.raises(NotImplementedError, match="TCP only"):
        asyncio.run(AsyncioBackend().connect_unix_socket("/tmp/nothing.sock"))


# --- failures: the same httpx classes as httpx's anyio transport -----------------------------


@BOTH
def test_a_refused_connection_is_a_connect_error(client):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(httpx.ConnectError):
        fetch(client, url)


@BOTH
def test_a_full_accept_queue_is_a_connect_timeout(client):
    server = RawServer(echo, backlog=0, accept=False)  # never accepts: further SYNs go unanswered
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", server.port))
            fillers.append(filler)
        time.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(httpx.ConnectTimeout):
            fetch(client, server.url, timeout=httpx.Timeout(5, connect=0.3))
        assert time.monotonic() - started < 2
    finally:
        for filler in fillers:
            filler.close()
        server.__exit__()


@BOTH
def test_a_silent_server_is_a_read_timeout(client):
    def silent(conn):
        read_request(conn)
        server.done.wait(5)

    with RawServer(silent) as server:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            fetch(client, server.url, timeout=httpx.Timeout(5, read=0.3))
        assert 0.3 <= time.monotonic() - started < 2


@BOTH
def test_a_server_that_stops_reading_is_a_write_timeout(client):
    def deaf(conn):
        server.done.wait(5)

    with RawServer(deaf) as server, pytest.raises(httpx.WriteTimeout):
        fetch(client, server.url, method="POST", content=b"x" * 64_000_000, timeout=httpx.Timeout(5, write=0.3))


@BOTH
def test_a_tls_handshake_nobody_answers_is_a_connect_timeout(client):
    def silent(conn):
        server.done.wait(5)

    with RawServer(silent) as server, pytest.raises(httpx.ConnectTimeout):
        fetch(client, f"https://127.0.0.1:{server.port}", timeout=httpx.Timeout(5, connect=0.3))


@BOTH
def test_tls_to_a_plain_http_server_is_a_connect_error(client):
    def plain(conn):  # answers the TLS hello as an HTTP server would answer garbage
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    with RawServer(plain) as server, pytest.raises(httpx.ConnectError, match="WRONG_VERSION_NUMBER|wrong version"):
        fetch(client, f"https://127.0.0.1:{server.port}")


@BOTH
def test_a_body_cut_short_is_a_remote_protocol_error(client):
    def cut(conn):
        read_request(conn)
        conn.sendall(reply(b"0123456789", length=100))
        conn.shutdown(socket.SHUT_RDWR)

    with RawServer(cut) as server, pytest.raises(httpx.RemoteProtocolError):
        fetch(client, server.url)


@BOTH
def test_a_connection_reset_mid_body_is_a_read_error(client):
    def reset(conn):
        read_request(conn)
        conn.sendall(reply(b"0123456789", length=100))
        time.sleep(0.1)  # the client has the first bytes and waits for more
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST

    with RawServer(reset) as server, pytest.raises(httpx.ReadError):
        fetch(client, server.url)


@BOTH
def test_a_server_closing_without_answering_is_a_remote_protocol_error(client):
    def hang_up(conn):
        read_request(conn)

    with RawServer(hang_up) as server, pytest.raises(httpx.RemoteProtocolError):
        fetch(client, server.url)
