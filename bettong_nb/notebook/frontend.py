"""The kernel's line to the notebook it serves: read and edit its cells through bettong_nb's
JupyterLab / Notebook 7 extension (``bettong_nb/notebook/labextension``, source in ``frontend/``).

    from bettong_nb.notebook import frontend

    fe = await frontend.connect()          # None without the extension (VS Code, nbclient, a terminal)
    if fe is not None:
        cells = await fe.cells()           # nbformat-like dicts: id, cell_type, source, metadata, outputs...
        new = await fe.insert_cell(after=frontend.current_cell_id(), cell_type="code", source="1 + 1")
        await fe.set_source(new, "2 + 2", metadata={"bettong": {"by": "agent"}})   # one undo step
        await fe.set_outputs(new, [{"output_type": "execute_result", "data": {"text/plain": "4"},
                                    "metadata": {}, "execution_count": 7}], 7)
        await fe.highlight(new); await fe.highlight(None)
        await fe.delete_cell(new)

A kernel cannot touch its notebook: only the page can. The extension registers the comm target
``bettong_nb.notebook`` on every notebook's kernel connection; :func:`connect` opens a comm to it
and every method is one request ``{"id", "op", "target", ...}`` answered ``{"id", "ok": true, ...}``
or ``{"id", "ok": false, "error"}``. Each acts on the notebook whose kernel this is, never another.
A page reloaded meanwhile takes the comm over at its first request; when no page answers, a
request fails after ``timeout`` and the next one opens a new comm.

Works from an awaiting cell: ipykernel (>= 7.4) handles comm messages while a cell awaits, so
the answers arrive although the cell keeps the kernel busy. It does not run cells: an execute
request would queue behind the running cell (the caller runs code in the kernel and puts the
outputs on the cell with :meth:`Frontend.set_outputs`). Requests may come from any thread and
event loop: answers are handed to the loop that asked. The kernel's main thread must stay free
to receive them: a cell that blocks it (a synchronous call waiting on a thread) gets timeouts;
await instead (``%%agent``, ``await agent.arun(...)``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

from ..errors import UserError
from ..core.kernel import jupyter_kernel

__all__ = ["FrontendError", "Frontend", "connect", "current_cell_id", "TARGET"]

TARGET = "bettong_nb.notebook"  # the comm target the extension registers
PROTOCOL = 1  # the request shapes this module speaks; the extension reports its own in `hello`
REQUEST_TIMEOUT_S = 10.0
# After a "no frontend" answer connect() says None at once for this long: a probe costs its whole
# timeout, and a kernel run by nbclient or VS Code does not grow a JupyterLab page.
NO_FRONTEND_RECHECK_S = 60.0
# A hello unanswered this long is asked again on a new comm, within connect()'s timeout: a page
# handling its kernel's restart or its own reload can drop a comm opened at that moment.
HELLO_ATTEMPT_S = 2.0


class FrontendError(UserError):
    """A request to the notebook's page failed: no answer in time, the page went away, or the
    page refused it (an unknown cell id). The message names the operation, on one line."""


class Frontend:
    """The notebook page of this kernel, as the extension sees it. Get one from :func:`connect`.

    ``app`` is ``"JupyterLab"`` or ``"Notebook"``, ``path`` the notebook's path relative to the
    server root, ``versions`` what the page reported; ``timeout`` bounds every request (s).
    """

    app: str
    path: str | None

    def __init__(self, kernel: Any, *, timeout: float = REQUEST_TIMEOUT_S):
        self.app = ""
        self.path = None
        self.versions: dict[str, Any] = {}
        self.timeout = timeout
        self._kernel = kernel
        self._comm: Any = None
        self._ids = itertools.count(1)
        # request id -> (event loop, future); the comm's handler may run on another thread
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._lock = threading.Lock()
        self._stale = False  # a request went unanswered: the page may have been reloaded

    def __repr__(self) -> str:
        return f"<Frontend {self.app} {self.path!r}>"

    # -- the operations ------------------------------------------------------------------------

    async def cells(self) -> list[dict]:
        """Every cell, in order, as nbformat 4.5 dicts (``source`` a str, ``outputs`` and
        ``execution_count`` on code cells)."""
        return (await self._request("cells"))["cells"]

    async def cell(self, cell_id: str) -> dict | None:
        """One cell as :meth:`cells` gives it, or None when no cell has that id."""
        return (await self._request("cell", cell_id=cell_id))["cell"]

    async def insert_cell(self, *, after: str | None, cell_type: str, source: str,
                          metadata: dict | None = None) -> str:
        """Insert a cell below cell ``after`` (``None``: at the top); returns the new cell's id."""
        answer = await self._request("insert_cell", after_id=after, cell_type=cell_type, source=source,
                                     metadata=metadata or {})
        return answer["cell_id"]

    async def set_source(self, cell_id: str, source: str, *, metadata: dict | None = None) -> None:
        """Replace a cell's source, and set the ``metadata`` keys given (``None`` values remove a
        key), in one transaction: one undo in the cell (Ctrl-Z in its editor) takes it all back."""
        await self._request("set_source", cell_id=cell_id, source=source, metadata=metadata)

    async def delete_cell(self, cell_id: str) -> None:
        """Delete a cell (``z`` in command mode brings it back)."""
        await self._request("delete_cell", cell_id=cell_id)

    async def set_metadata(self, cell_id: str, key: str, value: Any) -> None:
        """Set one metadata key of a cell (``None`` removes it). Not an undo step: it records, it
        does not edit."""
        await self._request("set_metadata", cell_id=cell_id, key=key, value=value)

    async def set_outputs(self, cell_id: str, outputs: list[dict], execution_count: int | None) -> None:
        """Show ``outputs`` (nbformat output dicts) and ``execution_count`` on a code cell, as if
        the page had run it."""
        await self._request("set_outputs", cell_id=cell_id, outputs=outputs, execution_count=execution_count)

    async def highlight(self, cell_id: str | None) -> None:
        """Outline a cell and scroll it into view (CSS class ``bettong-proposal-target``);
        ``None`` clears the outline."""
        await self._request("highlight", cell_id=cell_id)

    async def notebook_metadata(self) -> dict:
        """The notebook's metadata (kernelspec, language_info, ...)."""
        return (await self._request("notebook_metadata"))["metadata"]

    async def save(self) -> None:
        """Save the notebook, as the person's Ctrl-S would."""
        await self._request("save")

    # -- the wire ------------------------------------------------------------------------------

    async def _request(self, op: str, *, timeout: float | None = None, **args: Any) -> dict:
        if self._stale:
            await self._reopen(op)
        timeout = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
        try:
            if self._comm is None:
                raise FrontendError(f"{op}: the notebook's page closed the connection")
            # The target lets a reloaded page, which never saw this comm open, take it over.
            self._comm.send({"id": request_id, "op": op, "target": TARGET, **args})
            try:
                answer = await asyncio.wait_for(future, timeout)
            except TimeoutError:
                self._stale = True
                raise FrontendError(f"{op}: the notebook's page did not answer within {timeout:g} s") from None
        finally:
            # Answered, timed out or cancelled (the stop button): nothing is left waiting.
            with self._lock:
                self._pending.pop(request_id, None)
        if not isinstance(answer, dict) or not answer.get("ok"):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise FrontendError(f"{op}: {error or 'the notebook refused the request'}")
        return answer

    def _open(self) -> None:
        import comm  # ipykernel's comm implementation once a kernel runs

        self._comm = comm.create_comm(target_name=TARGET, data={"protocol": PROTOCOL})
        self._comm.on_msg(self._on_msg)
        self._comm.on_close(self._on_close)
        self._stale = False

    async def _hello(self, timeout: float) -> None:
        answer = await self._request("hello", timeout=timeout)
        self.app = str(answer.get("app") or "")
        self.path = answer.get("path")
        self.versions = dict(answer.get("versions") or {})

    async def _reopen(self, op: str) -> None:
        # A reloaded page forgot our comm; a new one reaches the notebook's new page.
        self.close()
        self._open()
        try:
            await self._hello(min(self.timeout, HELLO_ATTEMPT_S))
        except FrontendError:
            self.close()
            self._stale = True
            raise FrontendError(f"{op}: the notebook's page is gone (closed, or without the extension)") from None

    def _on_msg(self, msg: dict) -> None:
        data = msg.get("content", {}).get("data")
        request_id = data.get("id") if isinstance(data, dict) else None
        with self._lock:
            waiting = self._pending.get(request_id) if isinstance(request_id, int) else None
        if waiting is not None:
            loop, future = waiting
            loop.call_soon_threadsafe(_settle, future, data, None)

    def _on_close(self, msg: dict) -> None:
        # The page closed the comm (no such target there, or the notebook closed): fail fast.
        self._comm = None
        self._stale = True
        self._fail_pending("the notebook's page closed the connection")

    def _fail_pending(self, error: str) -> None:
        with self._lock:
            waiting = list(self._pending.values())
        for loop, future in waiting:
            loop.call_soon_threadsafe(_settle, future, None, error)

    def close(self) -> None:
        """Close the comm (the extension forgets it). The next request opens a new one; the
        requests still waiting fail at once (the page drops answers to a closed comm)."""
        comm, self._comm = self._comm, None
        self._stale = True
        if comm is not None:
            try:
                comm.close()
            except Exception:  # a comm of a kernel that is shutting down
                pass
        self._fail_pending("the connection to the notebook's page was closed")


def _settle(future: asyncio.Future, answer: Any, error: str | None) -> None:
    if future.done():  # cancelled or timed out meanwhile
        return
    if error is not None:
        future.set_result({"ok": False, "error": error})
    else:
        future.set_result(answer)


_cached: Frontend | None = None
_none_at: tuple[Any, float] | None = None  # (kernel, monotonic time) of the last "no frontend"
_swap = threading.Lock()  # connects may finish at once on several threads


async def connect(*, timeout: float = 2.0, refresh: bool = False) -> Frontend | None:
    """The extension of the notebook this kernel serves, or None when there is none (VS Code,
    Colab, nbclient or papermill, the classic notebook, a terminal, no kernel at all).

    The first call opens a comm and waits at most ``timeout`` seconds for the page's hello, asked
    again on a new comm every :data:`HELLO_ATTEMPT_S` seconds. The answer is kept for the kernel's
    life (a "none" for a minute); ``refresh=True`` asks again. Calls made at once all get the first
    bridge that answered.
    """
    global _cached, _none_at
    kernel = jupyter_kernel()
    if kernel is None or getattr(kernel, "session", None) is None:
        return None
    if not refresh:
        if _cached is not None and _cached._kernel is kernel and not _cached._stale:
            return _cached
        if _none_at is not None and _none_at[0] is kernel and time.monotonic() - _none_at[1] < NO_FRONTEND_RECHECK_S:
            return None
    frontend = Frontend(kernel)
    deadline = time.monotonic() + timeout
    ok = False
    try:
        while not ok:
            frontend._open()
            try:
                await frontend._hello(max(min(HELLO_ATTEMPT_S, deadline - time.monotonic()), 0.001))
                ok = True
            except FrontendError:
                unanswered = frontend._stale  # not refused: asked again while time is left
                frontend.close()
                if not unanswered or time.monotonic() >= deadline:
                    _none_at = (kernel, time.monotonic())
                    return None
    finally:
        if not ok:  # no answer, a refusal or a cancelled connect: leave no comm behind
            frontend.close()
    with _swap:
        kept = _cached
        if not refresh and kept is not None and kept._kernel is kernel and not kept._stale:
            # Two connects at once (a cell's own and the exam lock's as the cell starts): the
            # first answered is the bridge, and closing it would drop the answers it awaits.
            frontend.close()
            return kept
        _cached, _none_at = frontend, None
    if kept is not None:
        kept.close()
    return frontend


def current_cell_id() -> str | None:
    """The id of the cell whose execution is running now (JupyterLab and Notebook 7 send it as
    ``metadata.cellId`` of the execute request); None outside a kernel or a cell's run."""
    kernel = jupyter_kernel()
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # no request handled yet
        return None
    if not isinstance(parent, dict) or parent.get("header", {}).get("msg_type") != "execute_request":
        return None
    cell_id = (parent.get("metadata") or {}).get("cellId")
    return cell_id if isinstance(cell_id, str) else None
