"""Let the agent run Python in your namespace — every call approved: ``capabilities.python()``.

    caps.python()                            # the notebook's namespace; a person approves each call
    caps.python({"x": 1}, timeout=10)        # any dict

**This runs arbitrary code with your rights**: it can read and change your variables, files and
anything else you can. By default every call needs a person's own decision — the notebook's
buttons, or y/N in a terminal — whatever the agent's approve_fn says (an approve_fn's yes counts
only when a person gave it); where nobody can be asked (nbclient, CI) the call is denied. ``require_approval=False``
opts out; do that only for code you would run unread.

The tool run_python(code) captures stdout, stderr, the value of a final expression and any
exception (with a short traceback), bounded in size. The timeout interrupts running Python code;
a call blocked inside C (a long ``time.sleep``) ends when that call returns.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import io
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, MutableMapping

from ..approvals import requires_person
from ..capability import Tool
from .namespace import user_namespace

__all__ = ["python", "Python", "PythonTimeout"]

MAX_OUTPUT = 10_000


class PythonTimeout(BaseException):
    """Raised inside code that ran past its timeout (a BaseException so ``except Exception`` in
    the model's code cannot swallow it)."""


class _Deadline:
    """Raises PythonTimeout in the running thread after ``seconds``, unless closed first."""

    def __init__(self, seconds: float):
        self._thread_id = ctypes.c_ulong(threading.get_ident())
        self._lock = threading.Lock()
        self._open = True
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._open:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(self._thread_id, ctypes.py_object(PythonTimeout))

    def close(self) -> None:
        with self._lock:
            self._open = False
            self._timer.cancel()
            # withdraw an interrupt that fired but was not delivered yet (harmless when none is pending)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(self._thread_id, None)


def _bounded(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return f"{text[:head]}\n… [cut {len(text) - limit} characters] …\n{text[-(limit - head):]}"


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

    def run_python(self, code: str) -> str:
        ns = self.source if self.source is not None else user_namespace()
        try:
            tree = ast.parse(code, "<agent>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        out, err = io.StringIO(), io.StringIO()
        value, failure = None, None
        try:
            deadline = _Deadline(self.timeout)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    exec(compile(tree, "<agent>", "exec"), ns)
                    if last is not None:
                        value = eval(compile(ast.Expression(last.value), "<agent>", "eval"), ns)
            except Exception as exc:
                frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<agent>"]
                where = "".join(traceback.format_list(frames[-3:]))
                failure = f"{where}{type(exc).__name__}: {exc}".strip()
            finally:
                deadline.close()
        except PythonTimeout:  # wherever it landed, up to the deadline's close
            failure = f"TimeoutError: the code ran past {self.timeout:g} s and was interrupted"
        parts = []
        if out.getvalue():
            parts.append("stdout:\n" + out.getvalue().rstrip("\n"))
        if err.getvalue():
            parts.append("stderr:\n" + err.getvalue().rstrip("\n"))
        if value is not None:
            parts.append("value:\n" + repr(value))
        if failure:
            parts.append("exception:\n" + failure)
        return _bounded("\n".join(parts) if parts else "(no output)")


def python(namespace: MutableMapping[str, Any] | None = None, *, timeout: float = 30,
           require_approval: bool = True) -> Python:
    """Run model-written Python in ``namespace`` (None: the notebook's), each call approved."""
    return Python(namespace, timeout, require_approval)
