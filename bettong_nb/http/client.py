"""The one place HTTP happens, for model providers and search sources alike: clients,
timeouts, retries, and errors that name the service and never carry a key.

    transport = Transport("deepseek", base_url, headers={"Authorization": ...}, error=ProviderError)
    body = await transport.post_json("/chat/completions", payload)
    body = await transport.get_json("/w/api.php", params={"q": "bettong"})
    async with transport.stream_lines("/chat/completions", payload) as lines: ...

Every failure is a :class:`bettong_nb.errors.ServiceError` (the ``error`` class given), its
message redacted of the service's key and every credential-looking value. A service words its
errors its own way by overriding the ``*_message`` methods (search sources do).

Swapping the HTTP client means changing this module only (and ``_asyncio_transport``, the
network layer under httpx that it plugs in).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import random
import re
import ssl
import time
import weakref
from email.utils import parsedate_to_datetime
from typing import (
    Any,
    AsyncContextManager,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Protocol,
    TypeVar,
)

import httpx

from ..safety import secrets
from ..errors import ServiceError
from .json_body import loads

__all__ = ["Transport", "Gate", "gated", "RETRY_STATUSES", "MAX_RETRY_AFTER", "borrow", "close_clients",
           "timeout_config", "excerpt"]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
EXCERPT_CHARS = 200
# A server asking for a longer wait than this gets its error surfaced instead: a notebook cell
# silently sleeping for an hour is worse than an error that says when to try again.
MAX_RETRY_AFTER = 60.0
# Failures worth another attempt: the network or the server dropped us. A malformed URL or a
# header httpx refuses to send fails the same way every time.
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)
T = TypeVar("T")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # what an HTTP header value can carry


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs ~40 ms a client otherwise."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class _Pools:
    """The httpx clients of one event loop, shared by every provider and search source on it.

    httpx clients belong to the loop that opened their connections, hence one set per loop.
    It is a set of small pools rather than one big one because httpcore scans every connection
    of a pool on each request, which grows with the square of concurrent connections: a batch
    of 30 concurrent runs spends more CPU there than in the agent loop. Requests go to the least
    busy client, so sequential runs stay on the first one and keep reusing its connections.
    """

    SHARDS = 6

    def __init__(self) -> None:
        self.clients: list[httpx.AsyncClient | None] = [None] * self.SHARDS
        self.busy = [0] * self.SHARDS

    def _open(self, index: int) -> httpx.AsyncClient:
        client = self.clients[index]
        if client is None or client.is_closed:
            # imported here: httpcore loads with the first client, not with the library
            from ._asyncio_transport import AsyncioTransport

            transport = AsyncioTransport(ssl_context=_tls(), max_connections=100, max_keepalive_connections=50)
            client = self.clients[index] = httpx.AsyncClient(transport=transport, trust_env=False)
        return client

    @contextlib.contextmanager
    def borrow(self) -> Iterator[httpx.AsyncClient]:
        index = self.busy.index(min(self.busy))
        self.busy[index] += 1
        try:
            yield self._open(index)
        finally:
            self.busy[index] -= 1


_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pools]" = weakref.WeakKeyDictionary()


def borrow() -> contextlib.AbstractContextManager[httpx.AsyncClient]:
    """``with borrow() as client:`` an httpx client of the running loop, for one request."""
    loop = asyncio.get_running_loop()
    pools = _pools.get(loop)
    if pools is None:
        pools = _pools[loop] = _Pools()
    return pools.borrow()


async def close_clients() -> None:
    """Close the running loop's clients (before closing a loop you made yourself)."""
    pools = _pools.pop(asyncio.get_running_loop(), None)
    for client in pools.clients if pools else ():
        if client is not None:
            await client.aclose()


class Gate(Protocol):
    """A request bound and a 429 pause shared beyond this process (a Dask batch's, see
    :mod:`bettong_nb.distributed`): every request attempt holds ``slot(service)`` while it goes,
    and a 429 calls ``pause(service, seconds)``. Install one with :func:`gated`."""

    def slot(self, service: str) -> AsyncContextManager[Any]: ...

    def pause(self, service: str, seconds: float) -> None: ...


# A context variable because no caller can pass it: the transport sits inside whatever provider a
# run uses, reached through ``complete(request)``, which has no place for a gate.
_gate: contextvars.ContextVar[Gate | None] = contextvars.ContextVar("bettong_gate", default=None)


@contextlib.contextmanager
def gated(gate: Gate | None) -> Iterator[None]:
    """Requests made in this context go through ``gate`` (None: none)."""
    token = _gate.set(gate)
    try:
        yield
    finally:
        _gate.reset(token)


def timeout_config(timeout: float | Mapping[str, float] | None) -> httpx.Timeout:
    """``timeout`` is the read timeout in seconds, or a mapping of connect/read/write/pool."""
    parts = {"connect": 5.0, "read": 120.0, "write": 30.0, "pool": 30.0}
    if isinstance(timeout, Mapping):
        unknown = set(timeout) - set(parts)
        if unknown:
            raise TypeError(f"Unknown timeout part(s): {', '.join(sorted(unknown))}. Known: {', '.join(parts)}")
        parts.update({k: float(v) for k, v in timeout.items()})
    elif timeout is not None:
        parts["read"] = float(timeout)
    return httpx.Timeout(**parts)


def excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def _server_message(text: str) -> str:
    """What the server said: ``error.message``, ``message`` or ``error``, else the body (whole:
    :meth:`Transport.fail` cuts the message once it is redacted)."""
    try:
        data = loads(text)
    except ValueError:
        return text.strip()
    if isinstance(data, Mapping):
        err = data.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if data.get("message"):
            return str(data["message"])
        if isinstance(err, str) and err:
            return err
    return text.strip()


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms`` (OpenAI, Anthropic), else
    ``Retry-After`` in seconds or as an HTTP date."""
    with contextlib.suppress(KeyError, ValueError):
        return max(0.0, float(headers["retry-after-ms"]) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        with contextlib.suppress(TypeError, ValueError):
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


def _json_bytes(payload: Any) -> bytes:
    return payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read what follows the final event (the body's end, normally at once), so the connection
    goes back to the pool: a connection closed mid-body costs the next streamed turn a new
    TCP (and TLS) handshake. The answer is complete; a server dawdling here is not waited for."""
    async def rest() -> None:
        async for _ in lines:
            pass

    with contextlib.suppress(asyncio.TimeoutError, ServiceError):
        await asyncio.wait_for(rest(), 0.25)


class Transport:
    """HTTP for one service: base URL, headers, timeouts, the retry policy and its errors.

    Retried, at most ``max_retries`` times: ``retry_statuses`` and dropped or timed-out
    connections. The wait is the server's Retry-After (or retry-after-ms) when it sends one —
    beyond MAX_RETRY_AFTER the error surfaces instead — else ``backoff`` doubling per attempt,
    jittered down by up to half. Each retry is reported to ``on_retry(service, attempt, delay_s,
    reason)`` when given (the providers pass :func:`bettong_nb.core.events.report_retry`). Client
    errors (400, 401, 403, 404, 422...) are never retried.

    A 429's Retry-After pauses every request through this transport, so a batch of concurrent
    runs backs off together instead of each worker hammering the server; under a :class:`Gate`
    the pause is shared beyond this process too.

    ``deadline`` bounds each attempt as a whole (a server trickling its answer byte by byte
    included); ``secret`` returns the key, which no error may show.
    """

    backoff = 0.5  # seconds before the first retry without Retry-After; doubles each time, jittered

    def __init__(self, service: str, base_url: str = "", *,
                 headers: Callable[[], Mapping[str, str]] | Mapping[str, str] = (),
                 timeout: float | Mapping[str, float] | None = None, max_retries: int = 2,
                 secret: Callable[[], str | None] | None = None, retry_statuses: frozenset[int] = RETRY_STATUSES,
                 error: type[ServiceError] = ServiceError, deadline: float | None = None,
                 on_retry: Callable[[str, int, float, str], None] | None = None):
        self.service = service
        self.on_retry = on_retry
        self.base_url = base_url.rstrip("/")
        self._headers = headers
        self.timeout = timeout_config(timeout)
        self.max_retries = max_retries
        self.retry_statuses = retry_statuses
        self.error = error
        self.deadline = deadline
        self._secret = secret or (lambda: None)
        self._paused_until = 0.0

    # --- how errors read (a service may word them its own way) -------------------------------

    def status_message(self, status: int, body: str) -> str:
        return f"{self.service} request failed (HTTP {status}): {_server_message(body)}"

    def connection_message(self, url: str, exc: Exception) -> str:
        kind = "timed out" if isinstance(exc, (httpx.TimeoutException, TimeoutError)) else "could not be reached"
        shown = secrets.url_without_credentials(url)
        # httpx may quote the URL itself, with whatever password or key it holds
        detail = str(exc).replace(url, shown)
        return f"{self.service} at {shown} {kind}: {type(exc).__name__}: {detail}".rstrip(": ")

    def not_json_message(self, status: int, body: str) -> str:
        return f"{self.service} answered {status} with a body that is not JSON: {body}"

    # --- errors -------------------------------------------------------------------------------

    def _redacted(self, text: str) -> str:
        # Before any excerpt is cut, so a key straddling the cut cannot leave a piece behind.
        return secrets.redact(text, extra=[self._secret()])[0]

    def fail(self, message: str, *, body_excerpt: str | None = None, **details: Any) -> ServiceError:
        """The service's error for ``message``, redacted."""
        return self.error(message, service=self.service, body_excerpt=body_excerpt, **details).redact([self._secret()])

    @contextlib.contextmanager
    def redacting(self) -> Iterator[None]:
        """Around reading an answer: an error raised there (a provider quoting what the server
        sent, whole) leaves redacted of this service's key and cut short."""
        try:
            yield
        except ServiceError as err:
            err.redact([self._secret()])
            raise

    def _status_error(self, status: int, body: str, headers: httpx.Headers) -> ServiceError:
        body = self._redacted(body)
        return self.fail(self.status_message(status, body), status=status, body_excerpt=excerpt(body),
                         retryable=status in self.retry_statuses, retry_after=_retry_after(headers))

    def _connection_error(self, url: str, exc: Exception) -> ServiceError:
        return self.fail(self.connection_message(url, exc), retryable=isinstance(exc, _TRANSIENT))

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"accept": "application/json", **dict(self._headers() if callable(self._headers) else self._headers),
                   **(extra or {})}
        for name, value in headers.items():
            # httpx would put the offending value (the key, say) in its own error message.
            if not _HEADER_VALUE.fullmatch(value):
                raise self.fail(f"The {name} header for {self.service} holds a character HTTP headers cannot "
                                "carry (a line break, a control character or non-ASCII): check the key or "
                                "its environment variable for a stray newline or a pasted quote")
        return headers

    # --- requests -----------------------------------------------------------------------------

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` until it succeeds, retrying retryable errors with backoff and jitter."""
        gate = _gate.get()
        for number in range(self.max_retries + 1):
            await self._wait_for_pause()
            try:
                async with gate.slot(self.service) if gate is not None else contextlib.nullcontext():
                    with self.redacting():
                        return await attempt()
            except ServiceError as err:
                if not err.retryable or number == self.max_retries:
                    raise
                delay = err.retry_after
                if delay is not None and delay > MAX_RETRY_AFTER:
                    err.args = (f"{err} (the server asked to retry after {delay:.0f} s; not waiting that long)",)
                    raise
                if delay is None:
                    delay = min(30.0, self.backoff * 2**number) * (0.5 + random.random() / 2)
                if err.status == 429:
                    self._paused_until = max(self._paused_until, time.monotonic() + delay)
                    if gate is not None:
                        gate.pause(self.service, delay)
                if self.on_retry is not None:
                    self.on_retry(self.service, number + 1, delay, str(err))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _wait_for_pause(self) -> None:
        while (wait := self._paused_until - time.monotonic()) > 0:
            await asyncio.sleep(wait)

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      payload: Any = None, headers: Mapping[str, str] | None = None,
                      check: bool = True) -> httpx.Response:
        """One request (retried as above); with ``check`` an answer that is not 2xx raises.
        ``payload`` is sent as JSON; bytes are JSON already (see :mod:`bettong_nb.json_body`)."""
        url = self.base_url + path
        content = None if payload is None else _json_bytes(payload)
        if content is not None:
            headers = {"content-type": "application/json", **(headers or {})}

        async def attempt() -> httpx.Response:
            try:
                async with asyncio.timeout(self.deadline):
                    with borrow() as client:
                        response = await client.request(method, url, params=params, content=content,
                                                        headers=self.headers(headers), timeout=self.timeout)
            except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as exc:
                raise self._connection_error(url, exc) from None
            if check and not 200 <= response.status_code < 300:
                raise self._status_error(response.status_code, response.text, response.headers)
            return response

        return await self.retrying(attempt)

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request`, then the body as JSON; a body that is not JSON is an error."""
        return self.parsed(await self.request(method, path, **kwargs))

    def parsed(self, response: httpx.Response) -> Any:
        """``response``'s body as JSON (when its headers matter too: :meth:`request`, then this)."""
        try:
            return loads(response.content)
        except ValueError:
            body = self._redacted(response.text)
            raise self.fail(self.not_json_message(response.status_code, body), status=response.status_code,
                            body_excerpt=excerpt(body)) from None

    async def post_json(self, path: str, payload: Any, **kwargs: Any) -> Any:
        return await self.json("POST", path, payload=payload, **kwargs)

    async def get_json(self, path: str, **kwargs: Any) -> Any:
        return await self.json("GET", path, **kwargs)

    @contextlib.asynccontextmanager
    async def stream_lines(self, path: str, payload: Mapping[str, Any] | bytes) -> AsyncIterator[AsyncIterator[str]]:
        """POST JSON (bytes: already encoded) and yield the answer's lines as they arrive (one
        attempt; see :meth:`retrying`). A connection lost mid-body raises an error saying the
        stream was cut off.
        """
        url = self.base_url + path
        content = _json_bytes(payload)
        try:
            with borrow() as client:
                async with client.stream("POST", url, content=content,
                                         headers=self.headers({"content-type": "application/json"}),
                                         timeout=self.timeout) as response:
                    if response.status_code >= 300:
                        body = (await response.aread()).decode("utf-8", "replace")
                        raise self._status_error(response.status_code, body, response.headers)
                    yield self._lines(response, url)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._connection_error(url, exc) from None

    async def stream(self, path: str, payload: Mapping[str, Any] | bytes,
                     fold: Callable[[AsyncIterator[str], Callable[[Any], Any]], Awaitable[T]],
                     on_event: Callable[[Any], Any]) -> T:
        """Stream an answer through ``fold(lines, emit)``, retrying only while nothing was emitted.

        Once a delta reached the caller a retry would repeat it, so a stream cut off after that
        is an error, never a half answer reported as done.
        """

        async def attempt() -> T:
            emitted = False

            def relay(event: Any) -> None:
                nonlocal emitted
                emitted = True
                on_event(event)

            try:
                async with self.stream_lines(path, payload) as lines:
                    answer = await fold(lines, relay)
                    await _drain(lines)
                    return answer
            except ServiceError as err:
                err.retryable = err.retryable and not emitted
                raise

        return await self.retrying(attempt)

    async def _lines(self, response: httpx.Response, url: str) -> AsyncIterator[str]:
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.TimeoutException as exc:
            raise self.fail(f"{self.service} stream from {url} stopped mid-answer: nothing arrived for "
                            f"{self.timeout.read} s (the read timeout; raise `timeout` to wait longer): "
                            f"{type(exc).__name__}", retryable=True) from None
        except httpx.HTTPError as exc:
            raise self.fail(f"{self.service} stream from {url} was cut off mid-answer: "
                            f"{type(exc).__name__}: {exc}", retryable=True) from None
