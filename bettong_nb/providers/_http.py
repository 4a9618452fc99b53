"""The one place HTTP happens for providers: clients, timeouts, retries, error mapping.

    transport = Transport("deepseek", base_url, headers={"Authorization": ...})
    body = await transport.post_json("/chat/completions", payload)
    async with transport.stream_lines("/chat/completions", payload) as lines: ...

Swapping the HTTP client means changing this module only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import weakref
from email.utils import parsedate_to_datetime
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, TypeVar

import httpx

from .. import events, secrets
from .base import ProviderError

__all__ = ["Transport", "RETRY_STATUSES", "timeout_config", "excerpt"]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
EXCERPT_CHARS = 200
T = TypeVar("T")

# httpx clients belong to the event loop that opened their connections, so keep one pool per
# loop, shared by every provider on it (connection reuse is most of a fast loopback turn).
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = weakref.WeakKeyDictionary()


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=100)
        client = _clients[loop] = httpx.AsyncClient(limits=limits, trust_env=False)
    return client


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
    """What the server said: ``error.message``, ``message`` or ``error``, else a body excerpt."""
    try:
        data = json.loads(text)
    except ValueError:
        return excerpt(text.strip())
    if isinstance(data, Mapping):
        err = data.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return excerpt(str(err["message"]))
        if data.get("message"):
            return excerpt(str(data["message"]))
        if isinstance(err, str) and err:
            return excerpt(err)
    return excerpt(text.strip())


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        with contextlib.suppress(TypeError, ValueError):
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


class Transport:
    """HTTP for one provider instance: base URL, headers, timeouts and the retry policy.

    A 429's Retry-After pauses every request through this transport, so a batch of concurrent
    runs backs off together instead of each worker hammering the server.
    """

    def __init__(self, provider: str, base_url: str, *, headers: Callable[[], Mapping[str, str]] | Mapping[str, str] = (),
                 timeout: float | Mapping[str, float] | None = None, max_retries: int = 2,
                 secret: Callable[[], str | None] | None = None):
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._headers = headers
        self.timeout = timeout_config(timeout)
        self.max_retries = max_retries
        self._secret = secret or (lambda: None)
        self._paused_until = 0.0

    def headers(self) -> dict[str, str]:
        headers = self._headers() if callable(self._headers) else self._headers
        return {"content-type": "application/json", "accept": "application/json", **dict(headers)}

    def _error(self, message: str, **kw: Any) -> ProviderError:
        message, _ = secrets.redact(message, extra=[self._secret()])
        return ProviderError(message, provider=self.provider, **kw)

    def _status_error(self, status: int, body: str, headers: httpx.Headers) -> ProviderError:
        err = self._error(f"{self.provider} request failed (HTTP {status}): {_server_message(body)}",
                          status=status, body_excerpt=excerpt(body), retryable=status in RETRY_STATUSES)
        err.retry_after = _retry_after(headers)
        return err

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` until it succeeds, retrying retryable errors with backoff and jitter."""
        for number in range(self.max_retries + 1):
            await self._wait_for_pause()
            try:
                return await attempt()
            except ProviderError as err:
                if not err.retryable or number == self.max_retries:
                    raise
                delay = getattr(err, "retry_after", None)
                if delay is None:
                    delay = min(30.0, 0.5 * 2**number) * (0.5 + random.random() / 2)
                if err.status == 429:
                    self._paused_until = max(self._paused_until, time.monotonic() + delay)
                events.emit(events.Retry(self.provider, number + 1, delay, str(err)))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _wait_for_pause(self) -> None:
        while (wait := self._paused_until - time.monotonic()) > 0:
            await asyncio.sleep(wait)

    def _connection_error(self, url: str, exc: Exception) -> ProviderError:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "could not be reached"
        return self._error(f"{self.provider} at {url} {kind}: {type(exc).__name__}: {exc}".rstrip(": "),
                           retryable=True)

    async def post_json(self, path: str, payload: Mapping[str, Any]) -> Any:
        """POST JSON and return the decoded JSON answer, with retries."""
        url = self.base_url + path
        content = json.dumps(payload, ensure_ascii=False).encode()

        async def attempt() -> Any:
            try:
                response = await _client().post(url, content=content, headers=self.headers(), timeout=self.timeout)
            except httpx.HTTPError as exc:
                raise self._connection_error(url, exc) from None
            if response.status_code >= 300:
                raise self._status_error(response.status_code, response.text, response.headers)
            try:
                return response.json()
            except ValueError:
                raise self._error(f"{self.provider} answered {response.status_code} with a body that is not JSON: "
                                  f"{excerpt(response.text)}", status=response.status_code,
                                  body_excerpt=excerpt(response.text)) from None

        return await self.retrying(attempt)

    @contextlib.asynccontextmanager
    async def stream_lines(self, path: str, payload: Mapping[str, Any]) -> AsyncIterator[AsyncIterator[str]]:
        """POST JSON and yield the answer's lines as they arrive (one attempt; see :meth:`retrying`).

        A connection lost mid-body raises ProviderError saying the stream was cut off.
        """
        url = self.base_url + path
        content = json.dumps(payload, ensure_ascii=False).encode()
        try:
            async with _client().stream("POST", url, content=content, headers=self.headers(),
                                        timeout=self.timeout) as response:
                if response.status_code >= 300:
                    body = (await response.aread()).decode("utf-8", "replace")
                    raise self._status_error(response.status_code, body, response.headers)
                yield self._lines(response, url)
        except httpx.HTTPError as exc:
            raise self._connection_error(url, exc) from None

    async def stream(self, path: str, payload: Mapping[str, Any],
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
                    return await fold(lines, relay)
            except ProviderError as err:
                err.retryable = err.retryable and not emitted
                raise

        return await self.retrying(attempt)

    async def _lines(self, response: httpx.Response, url: str) -> AsyncIterator[str]:
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.HTTPError as exc:
            raise self._error(f"{self.provider} stream from {url} was cut off mid-answer: "
                              f"{type(exc).__name__}: {exc}", retryable=True) from None
