"""Let the agent run Python in your namespace — every call approved: ``capabilities.python()``.

    caps.python()                            # the notebook's namespace; a person approves each call
    caps.python({"x": 1}, timeout=10)        # any dict

**This runs arbitrary code with your rights**: it can read and change your variables, files and
anything else you can. By default every call needs a person's own decision — the notebook's
buttons, or y/N in a terminal — whatever the agent's approve_fn says (its yes counts only when
one of those channels got it from a person, never when the approve_fn says so itself); where nobody can be asked (nbclient, CI) the call is denied. ``require_approval=False``
opts out; do that only for code you would run unread.

The tool run_python(code) captures stdout, stderr, the value of a final expression and any
exception (with a short traceback), bounded in size. The code runs in a worker thread while the
tool awaits it, so the agent's event loop keeps running (other tools, the Stop button, streamed
text) whatever the code does; what the worker prints is captured for it alone.

The timeout. When ``timeout`` seconds pass, :class:`PythonTimeout` (a BaseException) is raised
in the worker, and raised again at every line it then runs, also inside ``except:`` and
``except BaseException:`` blocks and ``finally`` clauses, in the code and in whatever it calls:
a loop that swallows exceptions still ends, usually within milliseconds. What cannot be stopped:

* a call that does not return to Python — ``time.sleep(600)``, a blocking read, a long C
  computation (``sum(range(10**12))``, a huge regex backtrack). The tool gives up waiting one
  second after the timeout and says so; the code goes on in the background until that call
  returns and is stopped at its next line. What it prints from then on is dropped; it can still
  change your variables.
* library code interrupted at an arbitrary line can be left inconsistent: an asyncio event loop
  run inside the code, stopped mid-step, may then wait forever for a task it lost (the tool
  says it could not interrupt it; the thread stays blocked, using no CPU).
* a C computation that holds the GIL (the two examples above do) also stalls every other
  Python thread — the event loop included — until it returns. Only a separate process could
  stop it, and a separate process cannot share your namespace.
* code that fights back on purpose: removing the trace function in a loop, starting threads
  (a thread the code starts is not stopped), or ``os._exit``.
"""

from __future__ import annotations

import ast
import asyncio
import ctypes
import io
import sys
import threading
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, MutableMapping

from ..core.approvals import requires_person
from ..core.capability import Tool
from .namespace import user_namespace

__all__ = ["python", "Python", "PythonTimeout"]

MAX_OUTPUT = 10_000
GRACE = 1.0  # seconds after the timeout before the tool stops waiting for code stuck in C
_REPEAT = 0.02  # seconds between injections while stopping

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_expired: set[int] = set()  # worker threads whose code ran past its timeout


class PythonTimeout(BaseException):
    """Raised inside code that ran past its timeout (a BaseException so ``except Exception`` in
    the model's code cannot swallow it; whatever swallows it gets it again at its next line)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # The copy injected into the thread is made where it is caught: from here every line
        # raises it again. (Made by _stop_at_every_line it changes nothing: CPython switches
        # tracing off after a trace function raises.)
        _arm()

    def __del__(self) -> None:
        # Dropped at the end of the ``except`` block that swallowed it, when tracing is off
        # since the raise: switch it back on.
        _arm()


def _ours(frame: FrameType) -> bool:
    return frame.f_globals is globals()


def _arm() -> None:
    """In an expired worker, raise PythonTimeout at every line from the caller's caller on
    (never in this module's frames)."""
    try:
        if threading.get_ident() not in _expired:
            return
        frame = sys._getframe(2)
    except Exception:  # no such frame, or the interpreter is shutting down
        return
    if _ours(frame) or frame.f_code is _stop_at_every_line.__code__:
        return
    sys.settrace(_stop_at_every_line)
    while frame is not None and not _ours(frame):
        frame.f_trace = _stop_at_every_line
        frame = frame.f_back


def _stop_at_every_line(frame: FrameType, event: str, arg: Any) -> Callable | None:
    if threading.get_ident() not in _expired or _ours(frame):
        return None
    raise PythonTimeout


# --- output captured per thread -----------------------------------------------------------------

class _Router:
    """Stands in for sys.stdout or sys.stderr while workers run: a worker's writes go to its own
    buffer, every other thread's to the stream that was there before."""

    _buffers: dict[int, tuple[io.StringIO, io.StringIO]] = {}
    _lock = threading.Lock()

    def __init__(self, fallback: Any, index: int) -> None:
        self._fallback, self._index = fallback, index

    def _target(self) -> Any:
        buffers = self._buffers.get(threading.get_ident())
        return self._fallback if buffers is None else buffers[self._index]

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno ... of the real stream
        return getattr(self._fallback, name)

    @classmethod
    def capture(cls, thread_id: int) -> tuple[io.StringIO, io.StringIO]:
        with cls._lock:
            # installed again when someone replaced it meanwhile (pytest does, per test)
            if not isinstance(sys.stdout, cls):
                sys.stdout = cls(sys.stdout, 0)
            if not isinstance(sys.stderr, cls):
                sys.stderr = cls(sys.stderr, 1)
            buffers = cls._buffers[thread_id] = (io.StringIO(), io.StringIO())
            return buffers

    @classmethod
    def release(cls, thread_id: int) -> None:
        with cls._lock:
            cls._buffers.pop(thread_id, None)
            if not cls._buffers:
                if isinstance(sys.stdout, cls):
                    sys.stdout = sys.stdout._fallback
                if isinstance(sys.stderr, cls):
                    sys.stderr = sys.stderr._fallback


# --- one run ------------------------------------------------------------------------------------

@dataclass
class _Run:
    """One piece of code in a worker thread, stoppable from the event loop."""

    body: ast.Module
    last: ast.expr | None
    namespace: MutableMapping[str, Any]
    value: str | None = None
    failure: BaseException | None = None
    stopped: bool = False
    running: bool = True
    stdout: io.StringIO = field(default_factory=io.StringIO)
    stderr: io.StringIO = field(default_factory=io.StringIO)
    thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, on_done: Callable[[], None]) -> None:
        self.thread = threading.Thread(target=self._work, args=(on_done,), name="bettong-run-python", daemon=True)
        self.thread.start()

    def _work(self, on_done: Callable[[], None]) -> None:
        ident = threading.get_ident()
        self.stdout, self.stderr = _Router.capture(ident)
        try:
            try:
                exec(compile(self.body, "<agent>", "exec"), self.namespace)
                if self.last is not None:
                    value = eval(compile(ast.Expression(self.last), "<agent>", "eval"), self.namespace)
                    self.value = None if value is None else repr(value)
            except PythonTimeout:
                self.stopped = True
            except BaseException as exc:  # SystemExit and KeyboardInterrupt too: reported, not raised
                # after the timeout, whatever the interruption turned into (a finally block
                # that raised something else) means the code was stopped
                self.stopped, self.failure = ident in _expired, exc
        except PythonTimeout:  # injected while the lines above were being left
            self.stopped = True
        finally:
            # No call of a Python function until the lock is held: each would be a point
            # where one more injection could land.
            sys.settrace(None)
            with self._lock:
                self.running = False
                _expired.discard(ident)
                _set_async_exc(ctypes.c_ulong(ident), None)  # withdraw one that was not delivered
            _Router.release(ident)
            on_done()

    def stop(self) -> None:
        """Raise PythonTimeout in the worker (again): call it until the run ends."""
        with self._lock:
            if self.running and self.thread is not None and self.thread.ident is not None:
                _expired.add(self.thread.ident)
                _set_async_exc(ctypes.c_ulong(self.thread.ident), ctypes.py_object(PythonTimeout))

    def report(self, timeout: float, finished: bool) -> str:
        parts = []
        if self.stdout.getvalue():
            parts.append("stdout:\n" + self.stdout.getvalue().rstrip("\n"))
        if self.stderr.getvalue():
            parts.append("stderr:\n" + self.stderr.getvalue().rstrip("\n"))
        if self.value is not None:
            parts.append("value:\n" + self.value)
        if not finished:
            parts.append(f"exception:\nTimeoutError: the code ran past {timeout:g} s and could not be interrupted: it "
                         "is inside a call that does not return to Python (a sleep, blocking I/O, a long C "
                         "computation). It goes on in the background and stops at its next line of Python; what "
                         "it prints from now on is not shown, and it may still change variables.")
        elif self.stopped:
            parts.append(f"exception:\nTimeoutError: the code ran past {timeout:g} s and was interrupted")
        elif self.failure is not None:
            frames = [f for f in traceback.extract_tb(self.failure.__traceback__) if f.filename == "<agent>"]
            where = "".join(traceback.format_list(frames[-3:]))
            parts.append("exception:\n" + f"{where}{type(self.failure).__name__}: {self.failure}".strip())
        return _bounded("\n".join(parts) if parts else "(no output)")


def _bounded(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return f"{text[:head]}\n… [cut {len(text) - limit} characters] …\n{text[-(limit - head):]}"


async def _settled(done: asyncio.Future, seconds: float, *, then: Callable[[], None] | None = None) -> bool:
    """Whether ``done`` settles within ``seconds``, calling ``then`` every ``_REPEAT`` s meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not done.done():
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.wait([done], timeout=min(left, _REPEAT) if then else left)
        if then is not None and not done.done():
            then()
    return True


@dataclass
class Python:
    source: MutableMapping[str, Any] | None = field(default=None, repr=False)
    timeout: float = 30
    require_approval: bool = True
    id: str = "python"
    tools: list = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        # Alone: the code changes the user's namespace and redirects the process's stdout.
        run_python = Tool(
            "run_python", self.run_python,
            "Run Python code in the user's session and see stdout, stderr, the value of the last "
            "expression and any exception. Each call is shown to the user for approval first.",
            {"code": {"type": "string", "description": "Python source; the last line's value is returned.",
                      "required": True}}, concurrent=False)
        self.tools = [requires_person(run_python) if self.require_approval else run_python]

    @property
    def instructions(self) -> str:
        return ("run_python runs code in the user's live Python session, with the user's rights; the user "
                f"approves each call. Keep code short and read-only unless asked; calls stop after {self.timeout:g} s.")

    async def run_python(self, code: str) -> str:
        """Run ``code`` in a worker thread; the result text (output, value, exception)."""
        ns = self.source if self.source is not None else user_namespace()
        try:
            tree = ast.parse(code, "<agent>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
        last = tree.body.pop().value if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def finished() -> None:  # in the worker thread
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more

        run = _Run(tree, last, ns)
        run.start(finished)
        try:
            if not await _settled(done, self.timeout):
                run.stop()
                await _settled(done, GRACE, then=run.stop)
        except BaseException:  # cancelled (Stop, Ctrl-C): the code stops too
            run.stop()
            raise
        return run.report(self.timeout, done.done())


def python(namespace: MutableMapping[str, Any] | None = None, *, timeout: float = 30,
           require_approval: bool = True) -> Python:
    """Run model-written Python in ``namespace`` (None: the notebook's), each call approved."""
    return Python(namespace, timeout, require_approval)
