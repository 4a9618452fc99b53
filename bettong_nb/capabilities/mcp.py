"""MCP servers as capabilities: any Model Context Protocol server's tools, with bettong_nb's
approvals, redaction, events and display applied to every call.

    fetch = caps.mcp(command=["uvx", "mcp-server-fetch"])                     # a stdio server
    wiki = caps.mcp(url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."}, id="wiki")
    agent = bettong_nb.deepseek(capabilities=[fetch, wiki])
    await fetch.start()     # optional: else the first read of its id, instructions or tools starts it
    fetch.close()           # or agent.close(); the interpreter's exit stops it too

Built on the official ``mcp`` SDK (the ``mcp`` extra), imported only when a server starts.

**One loop for every MCP session.** An SDK session belongs to the event loop that opened it,
and an agent runs on two kinds of loop: ``run()`` on bettong_nb's private worker loop,
``await arun()`` on the caller's (a notebook kernel's). So every session lives on one event
loop of its own, in a daemon thread (``bettong-nb-mcp``), and the tool handlers hand their calls
to it with ``run_coroutine_threadsafe`` and await the result through ``wrap_future``: the
caller's loop never blocks on a call, a cancelled run cancels the call (the SDK then tells the
server), and one capability serves ``run()``, ``arun()`` and batches alike. Each connection is
held open by one task on that loop, because the SDK's transports must be entered and exited in
the same task. The price is a thread hop per call, tens of microseconds.

Reading ``id`` (unless given), ``instructions`` (unless given) or ``tools`` starts the server if
it is not running, blocking the reader until it is up or ``start_timeout`` passes: an agent reads
them at the start of each run, so a first run waits for the server. ``await cap.start()``
starts it without blocking a loop. The tools are listed once, then again only after a restart or
after the server says they changed (``notifications/tools/list_changed``, which the 2026 protocol
sends only down a ``subscriptions/listen`` stream, opened for it; the 2025 protocol sends it as a
plain notification), so a run sees the tools as they were when it started.

**Lifecycle.** ``close()`` (sync, idempotent, from any thread) and ``await aclose()`` stop the
server; using the capability again starts a new one. Every running server is closed at
interpreter exit (atexit). On Linux a stdio server runs under a small guard (``_orphan_guard.py``)
that asks the kernel for a signal when this process dies (``PR_SET_PDEATHSIG``) and then ends the
server's whole process group, so even a SIGKILLed kernel leaves no server behind. A server that
dies during a call is an error for the model on that call and restarts on the next one; after
:data:`MAX_RESTARTS` restarts in a row that all died, calls fail with an error saying it gave up
(``await cap.start()`` tries again). A call that runs past ``timeout`` seconds is cancelled.

**Secrets.** A stdio server gets this process's environment without its credential-named
variables, plus whatever ``env=`` passes explicitly; the credential-named values passed in
``env=`` and the header values are redacted from what the server returns, on top of the
agent's usual redaction. Headers never appear in the repr or in errors. The server's stderr goes
to a private temporary file; its tail is part of the error when the server dies.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import json
import os
import sys
import threading
import weakref
from contextlib import AsyncExitStack
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Mapping, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..safety import secrets
from ..core.capability import Tool, ToolOutput
from ..core.portable import filled, withheld
from ..core.images import MEDIA_TYPES, Image

__all__ = ["MCP", "McpError", "mcp", "MAX_RESTARTS"]

MAX_RESTARTS = 3  # restarts in a row, each ending in another death, before giving up
_CLOSE_TIMEOUT = 10.0  # the SDK's own stdio shutdown takes at most about 6.5 s
_STDERR_TAIL = 2000  # characters of a dead server's stderr put in the error
_MAX_PAGES = 100  # tools/list pages: a server whose cursor never ends cannot hang a run
_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_orphan_guard.py")
_SENSITIVE_HEADERS = ("cookie", "proxy-authorization")  # besides credential-looking names

T = TypeVar("T")


class McpError(RuntimeError):
    """An MCP server could not start, died, gave up, or answered a call with an error.
    ``redactions``: how many of the server's secrets its text had replaced."""

    def __init__(self, message: str, *, redactions: int = 0):
        super().__init__(message)
        self.redactions = redactions


# --- the MCP loop -------------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()
_exiting = False
_started: "weakref.WeakSet[MCP]" = weakref.WeakSet()
_closing: set[asyncio.Task] = set()  # stops scheduled from the MCP loop itself, kept from the GC


def _mcp_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="bettong-nb-mcp", daemon=True)
            _thread.start()
            atexit.register(_close_all)
        return _loop


def _on_mcp_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


async def _hop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the MCP loop from whichever loop this is, without blocking it."""
    if _on_mcp_thread():
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, _mcp_loop()))


def _wait(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the MCP loop and block this thread until it ends (or ``timeout``)."""
    if _on_mcp_thread():
        coro.close()
        raise RuntimeError("a blocking MCP call was made on the MCP loop itself; await it instead")
    future = asyncio.run_coroutine_threadsafe(coro, _mcp_loop())
    try:
        return future.result(timeout)
    except BaseException:  # Ctrl-C or a timeout: stop the work too (a no-op when it failed by itself)
        future.cancel()
        raise


def _close_all() -> None:
    """At interpreter exit: stop every running server, all at once."""
    global _exiting
    _exiting = True
    running = list(_started)

    async def stop_all() -> None:
        await asyncio.gather(*(cap._stop() for cap in running), return_exceptions=True)

    if running:
        try:
            _wait(stop_all(), _CLOSE_TIMEOUT)
        except TimeoutError:
            pass  # what still runs dies with this process: see _orphan_guard.py


# --- one connection -----------------------------------------------------------------------------

class _Connection:
    """One running server session, held open by its own task on the MCP loop."""

    def __init__(self) -> None:
        self.client: Any = None
        self.stop = asyncio.Event()
        self.lost = False  # the session ended without being asked to
        self.task: asyncio.Task | None = None
        self.stderr: Any = None  # a stdio server's stderr, in a private temporary file

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            size = os.fstat(self.stderr.fileno()).st_size
            data = os.pread(self.stderr.fileno(), _STDERR_TAIL, max(0, size - _STDERR_TAIL))
        except (OSError, ValueError):
            return ""
        text = data.decode("utf-8", "replace").strip()
        return f"\nIts last stderr:\n{text}" if text else ""

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            if self.client is None:  # still starting: nothing waits on stop yet
                self.task.cancel()
            await asyncio.wait({self.task})
        if self.stderr is not None:
            self.stderr.close()


def _connection_lost(exc: BaseException) -> bool:
    """Whether a failed request means the connection (or the server) is gone."""
    import anyio
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, (OSError, EOFError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                            anyio.EndOfStream, httpx2.TransportError))


def _timed_out(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import REQUEST_TIMEOUT

    return isinstance(exc, TimeoutError) or isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT


# --- results ------------------------------------------------------------------------------------

def _image(block: Any) -> Image | str:
    media_type = block.mime_type or ""
    if media_type not in MEDIA_TYPES:
        return f"[an image of type {media_type or 'unknown'} was left out: only {', '.join(MEDIA_TYPES)} can be shown]"
    try:
        return Image(base64.b64decode(block.data, validate=True), media_type)
    except (binascii.Error, ValueError):
        return "[an image was left out: its data was not valid base64]"


def _result_parts(result: Any) -> tuple[list[str], list[Image]]:
    """The texts and images of a CallToolResult, in the server's order."""
    texts: list[str] = []
    images: list[Image] = []
    for block in result.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            part = _image(block)
            (images if isinstance(part, Image) else texts).append(part)
        elif kind == "resource":
            resource = block.resource
            if getattr(resource, "text", None) is not None:
                texts.append(resource.text)
            else:
                texts.append(f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}) left out]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.name}: {block.uri}]")
        else:
            texts.append(f"[{kind or 'unknown'} content left out]")
    has_text = any(getattr(b, "type", None) == "text" for b in result.content or ())
    if result.structured_content is not None and not has_text:
        # Servers are asked to send structured results as text too; when one does not, this is it.
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return texts, images


# --- the capability -----------------------------------------------------------------------------

class MCP:
    """An MCP server's tools as a capability (needs the ``mcp`` extra); ``caps.mcp`` is this class.

        mcp(command=["uvx", "mcp-server-fetch"])                        # stdio, started on first use
        mcp(command=["python", "server.py"], env={"API_KEY": key}, cwd="srv")
        mcp(url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."})
        mcp(command=[...], id="files", tools=["read_file"], timeout=20)

    ``id`` defaults to the server's name, ``instructions`` to the server's, ``tools`` (names to
    expose) to all of them. ``timeout`` bounds each call, ``start_timeout`` a start and a listing of
    the tools. See the module docstring for threads, lifecycle and secrets.
    """

    def __init__(
        self,
        *,
        command: Iterable[str] | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        headers: Mapping[str, str] | None = None,
        id: str | None = None,
        tools: Iterable[str] | None = None,
        instructions: str | None = None,
        timeout: float = 60,
        start_timeout: float = 60,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("pass exactly one of command=[...] (a stdio server) or url=... (Streamable HTTP)")
        if isinstance(command, (str, bytes)):
            raise TypeError(f"command takes a list such as ['uvx', 'some-server'], not a string: {command!r}")
        if command is not None:
            command = tuple(command)
            if not command or not all(isinstance(part, str) and part for part in command):
                raise ValueError(f"command must be a non-empty list of non-empty strings, got {list(command)!r}")
        if url is not None:
            if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
                raise ValueError("url must be an http:// or https:// URL of a Streamable HTTP endpoint")
            if env is not None or cwd is not None:
                raise ValueError("env and cwd are for a stdio server (command=...), not for url=")
        if command is not None and headers is not None:
            raise ValueError("headers are for a Streamable HTTP server (url=...), not for command=")
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} is in seconds and must be positive, got {value!r}")
        if isinstance(tools, str):
            raise TypeError("tools takes a list of tool names, not a single string")
        self.command = command
        self.url = url
        self.env = None if env is None else {str(k): str(v) for k, v in env.items()}
        self.cwd = None if cwd is None else os.fspath(cwd)
        self._headers = None if headers is None else {str(k): str(v) for k, v in headers.items()}
        self._id = id
        self.tool_names = None if tools is None else tuple(tools)
        self._instructions = instructions
        self.timeout = timeout
        self.start_timeout = start_timeout
        # What follows is changed on the MCP loop only.
        self._conn: _Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._failures = 0  # connections in a row that died or would not start
        self._server_name: str | None = None
        self._server_instructions: str | None = None
        self._listing: list[Tool] | None = None
        self._stale = True

    # -- what the agent reads --------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The given id, else ``mcp:<name>`` with the server's name from its initialize (or discover)
        result, else ``mcp``."""
        if self._id is None:
            self._ensure_listed()
            # never the server's name alone: a server calling itself "filesystem" must not pass
            # for that capability in an approval rule
            self._id = f"mcp:{self._server_name}" if self._server_name else "mcp"
        return self._id

    @property
    def instructions(self) -> str | None:
        """The given instructions, else the server's own (None when it has none)."""
        if self._instructions is not None:
            return self._instructions
        self._ensure_listed()
        return self._server_instructions

    @property
    def tools(self) -> list[Tool]:
        """The server's tools (only those named in ``tools=``, when given), listed again when
        the server has said they changed."""
        if self._listing is None or self._stale:
            _wait(self._refresh())
        return list(self._listing or ())

    def _ensure_listed(self) -> None:
        if self._listing is None:
            _wait(self._refresh())

    # -- public async API ------------------------------------------------------------------------

    async def start(self) -> "MCP":
        """Start the server (if it is not running) and list its tools; after giving up, try again."""
        await _hop(self._start())
        return self

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Call one of the server's tools: its text (scrubbed of this server's secrets, counted in
        ``redactions``) and the images it returned.
        Raises :class:`McpError` for an error result, TimeoutError past ``timeout``."""
        return await _hop(self._call(name, dict(arguments or {})))

    async def aclose(self) -> None:
        """Stop the server; the next use starts a new one."""
        await _hop(self._stop())

    def close(self) -> None:
        """Stop the server and wait for it, from any thread; idempotent."""
        if _loop is None:
            return
        if _on_mcp_thread():  # cannot wait here: the stop runs on this very loop
            task = _loop.create_task(self._stop())
            _closing.add(task)
            task.add_done_callback(_closing.discard)
            return
        try:
            _wait(self._stop(), _CLOSE_TIMEOUT)
        except TimeoutError:
            pass  # the SDK bounds its own shutdown; this only keeps close() from hanging

    def __enter__(self) -> "MCP":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "MCP":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def secret_values(self) -> list[str]:
        """Values this capability holds that must never reach the model: credential-named
        ``env=`` values, the credentials inside any ``env=`` value or the URL (a password, a
        ``?token=``), and credential header values."""
        values = secrets.credential_values(self.env or {})
        for value in (self.env or {}).values():  # DSN=postgres://u:pw@db, CONFIG=...?token=...
            values += secrets.embedded_credentials(value)
        for name, value in (self._headers or {}).items():
            if secrets.is_credential_name(name) or name.lower() in _SENSITIVE_HEADERS:
                values += [value, value.split()[-1]] if value.split() else []
        if self.url is not None:
            values += secrets.embedded_credentials(self.url)
        return list(dict.fromkeys(values))

    def __reduce__(self) -> tuple:
        """Pickled (for a Dask worker) as its settings: no server, no connection, no secret. An
        ``env=`` value that holds a credential (by its name or in its value, as
        :func:`~bettong_nb.safety.secrets.stripped_env` judges) is read from the unpickling
        process's environment under the same name; credentials in the URL as
        :mod:`bettong_nb.core.portable` says; a credential header cannot travel at all."""
        sensitive = [name for name in self._headers or {}
                     if secrets.is_credential_name(name) or name.lower() in _SENSITIVE_HEADERS]
        if sensitive:
            raise TypeError("an MCP capability with credentials in its headers cannot be "
                            "pickled (its secret would travel with it): build it where it runs")
        env = self.env or {}
        plain = secrets.stripped_env(env)
        settings = {"command": self.command, "url": self.url, "cwd": self.cwd, "headers": self._headers, "id": self._id,
                    "tools": self.tool_names, "instructions": self._instructions, "timeout": self.timeout,
                    "start_timeout": self.start_timeout, "env": None if self.env is None else plain}
        return _rebuilt, (withheld(settings), [k for k in env if k not in plain])

    def __repr__(self) -> str:
        where = f"command={list(self.command)!r}" if self.command is not None else f"url={self._safe_url()!r}"
        state = "running" if self._conn is not None and not self._conn.lost else "stopped"
        known = f", id={self._id!r}" if self._id is not None else ""
        return f"MCP({where}{known}, {state})"

    # -- on the MCP loop -------------------------------------------------------------------------

    def _safe_url(self) -> str:
        parts = urlsplit(self.url or "")
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def _label(self) -> str:
        if self._server_name:
            return f"MCP server {self._server_name!r}"
        if self.command is not None:
            return f"MCP server {self.command[0]!r}"
        return f"MCP server at {self._safe_url()}"

    def _scrub(self, text: str) -> str:
        return self._scrubbed(text)[0]

    def _scrubbed(self, text: str) -> tuple[str, int]:
        """The text without this server's secrets, and how many it held. Values already in the
        environment are left to the agent's redaction, which counts them."""
        known = set(secrets.credential_values())
        return secrets.redact(text, extra=[v for v in self.secret_values() if v not in known])

    def _error(self, text: str) -> McpError:
        """Every McpError is made here, so none carries a secret (a server's stderr tail prints its env)."""
        return McpError(self._scrub(text))

    def _transport(self, stack: AsyncExitStack, conn: _Connection) -> Any:
        if self.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=self._headers, timeout=httpx2.Timeout(30, read=300))
            stack.push_async_callback(http.aclose)
            return streamable_http_client(self.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        argv = list(self.command or ())
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-I", "-S", _GUARD, str(os.getpid()), *argv]
        env = {**secrets.stripped_env(), **(self.env or {})}
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=self.cwd)
        import tempfile

        conn.stderr = tempfile.TemporaryFile()
        return stdio_client(params, errlog=conn.stderr)

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True

    async def _serve(self, conn: _Connection, ready: asyncio.Future) -> None:
        """Open the session, report it ready, hold it open until asked to stop or it breaks."""
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                client = Client(self._transport(stack, conn), message_handler=self._on_message)
                conn.client = await stack.enter_async_context(client)
                capabilities = client.server_capabilities
                if capabilities.tools is not None and capabilities.tools.list_changed:
                    try:  # the 2026 protocol sends list_changed only down a listen stream
                        await stack.enter_async_context(client.listen(tools_list_changed=True))
                    except Exception:  # older protocols send it to the message handler anyway
                        pass
                ready.set_result(None)
                await conn.stop.wait()
        except asyncio.CancelledError:
            if conn.client is None:  # cancelled while starting (by _Connection.close)
                ready.cancel()
                raise
        except Exception as exc:  # a broken transport ends the session from inside the SDK
            if not ready.done():
                ready.set_exception(exc)
        finally:
            conn.lost = not conn.stop.is_set()

    async def _connect(self) -> _Connection:
        conn = _Connection()
        ready = asyncio.get_running_loop().create_future()
        conn.task = asyncio.get_running_loop().create_task(self._serve(conn, ready), name="bettong-nb-mcp-session")
        try:
            async with asyncio.timeout(self.start_timeout):
                await asyncio.shield(ready)
        except BaseException as exc:
            tail = conn.stderr_tail()
            await conn.close()
            if isinstance(exc, TimeoutError):
                raise self._error(f"{self._label()} did not start within {self.start_timeout:g} s{tail}") from None
            if isinstance(exc, Exception):
                failed = "could not start" if self.command is not None else "could not be reached"
                raise self._error(f"{self._label()} {failed}: {_reason(exc)}{tail}") from None
            raise
        client = conn.client
        info = client.server_info
        self._server_name = info.name if info is not None and info.name else self._server_name
        self._server_instructions = client.instructions
        self._stale = True  # a new session (after a restart) may offer other tools: list them again
        _started.add(self)
        return conn

    async def _connection(self) -> _Connection:
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and not conn.lost:
                return conn
            if conn is not None:  # it broke while idle: that counts as a death
                self._conn = None
                self._failures += 1
                await conn.close()
            if _exiting:
                raise self._error(f"{self._label()} is not started while the interpreter exits")
            if self._failures > MAX_RESTARTS:
                raise self._error(f"gave up on {self._label()}: it stopped or failed to start {self._failures} times "
                               f"in a row, and was restarted {MAX_RESTARTS} times; await start() to try again")
            try:
                self._conn = await self._connect()
            except McpError:
                self._failures += 1
                raise
            return self._conn

    async def _request(self, what: str, send: Callable[[Any], Awaitable[T]], limit: float) -> T:
        """Send one request (bounded by ``limit`` seconds) on the running connection, turning its
        failures into clear errors."""
        conn = await self._connection()
        try:
            result = await send(conn.client)
        except Exception as exc:
            if _timed_out(exc):
                raise TimeoutError(self._scrub(f"{what} took longer than {limit:g} s and was cancelled")) from None
            if not (conn.lost or _connection_lost(exc)):
                raise self._error(f"{what} failed: {_reason(exc)}") from None
            tail = conn.stderr_tail()
            async with self._connect_lock:
                if self._conn is conn:
                    self._conn = None
                    self._failures += 1
            await conn.close()
            then = ("it restarts on the next call" if self._failures <= MAX_RESTARTS else
                    f"it will not be restarted again ({MAX_RESTARTS} restarts in a row all ended the same way)")
            raise self._error(f"{self._label()} stopped during {what} ({_reason(exc)}); {then}{tail}") from None
        self._failures = 0
        return result

    async def _refresh(self) -> None:
        async def list_all(client: Any) -> list:
            self._stale = False  # a change announced from here on marks it stale again
            listed, cursor = [], None
            async with asyncio.timeout(self.start_timeout):  # part of a start, not a tool call
                for _ in range(_MAX_PAGES):
                    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                    listed += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
            return listed

        try:
            listed = await self._request("listing its tools", list_all, self.start_timeout)
        except BaseException:
            self._stale = True
            raise
        if self.tool_names is not None:
            missing = [n for n in self.tool_names if n not in {t.name for t in listed}]
            if missing:
                self._stale = True
                raise self._error(f"{self._label()} has no tool {', '.join(missing)}; "
                               f"it has: {', '.join(t.name for t in listed) or 'none'}")
            listed = [t for t in listed if t.name in self.tool_names]
        self._listing = [self._as_tool(t) for t in listed]

    async def _start(self) -> None:
        self._failures = 0
        await self._refresh()

    def _as_tool(self, spec: Any) -> Tool:
        name = spec.name

        async def call(**arguments: Any) -> ToolOutput:
            return await self.call_tool(name, arguments)

        schema = dict(spec.input_schema or {})
        schema.setdefault("type", "object")
        return Tool(name=name, handler=call, description=spec.description, parameters=schema)

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        result = await self._request(
            f"the call to {name}", lambda client: client.call_tool(name, arguments, read_timeout_seconds=self.timeout),
            self.timeout)
        texts, images = _result_parts(result)
        text, redactions = self._scrubbed("\n".join(texts))
        if result.is_error:
            # scrubbed above, counted: the one McpError not made by _error
            raise McpError(text or f"{name} failed without saying why", redactions=redactions)
        if images:
            text = text or f"[{len(images)} image{'s' if len(images) > 1 else ''}]"
        return ToolOutput(text=text, images=tuple(images), redactions=redactions)

    async def _stop(self) -> None:
        async with self._connect_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        _started.discard(self)


def _reason(exc: BaseException) -> str:
    """An exception in words; an exception group by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _rebuilt(settings: Mapping[str, Any], from_environment: list[str]) -> MCP:
    """An unpickled MCP capability: its credential-named env values from this process's environment."""
    settings = filled(settings)
    env = settings["env"]
    if env is not None:
        env = {**env, **{name: os.environ[name] for name in from_environment if name in os.environ}}
    return MCP(**{**settings, "env": env})


mcp = MCP  # the constructor, named like the other capabilities' constructors
