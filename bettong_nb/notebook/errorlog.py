"""The errors cells raised, for prompts: ``{Err}`` (the last one) and ``{Err[n]}`` (cell n's).

    %%agent
    Why does this fail? {Err}

    %agent explain           # the last error, explained; %agent fix puts the fix in a new cell

``%load_ext bettong_nb`` records each error with a ``post_run_cell`` hook, keyed by execution
count (not a usage error of ``%agent`` itself): the code of the cell, then the traceback as the person saw it, without colours. Like a
tool result it is redacted before it is kept (a traceback can carry a key), then bounded (see
:mod:`.excerpts`): the first :data:`CODE_CHARS` characters of the code, the last
:data:`TRACEBACK_CHARS` of the traceback (its end says what went wrong), the last :data:`KEEP`
errors.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

from IPython.core.error import UsageError

from ..safety.hidden import held_strings
from .excerpts import head, tail

__all__ = ["ErrorLog", "CODE_CHARS", "TRACEBACK_CHARS", "KEEP"]

CODE_CHARS = 4_000
TRACEBACK_CHARS = 8_000
KEEP = 100

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def _not_to_explain(error: BaseException) -> bool:
    """A stop, or a UsageError of this library's own magics (``Nothing to explain``, a bad
    TARGET): recorded, a second ``%agent explain`` would explain the first instead of the
    person's error."""
    if isinstance(error, KeyboardInterrupt):
        return True
    frames = traceback.walk_tb(error.__traceback__)
    return isinstance(error, UsageError) and any(f.f_globals.get("__name__", "").startswith("bettong_nb.")
                                                 for f, _ in frames)


class ErrorLog:
    """What ``{Err}`` resolves to (see the module doc). ``log[n]`` is cell n's error as text;
    ``str(log)`` the last one (a LookupError when no cell has raised)."""

    def __init__(self, shell: Any):
        self.shell = shell
        self.errors: dict[int, str] = {}
        self.last: int | None = None

    def record(self, result: Any) -> None:
        """The ``post_run_cell`` hook."""
        error = result.error_before_exec or result.error_in_exec
        if error is None or _not_to_explain(error):
            return
        count = result.execution_count or 0
        code = result.info.raw_cell if result.info is not None else ""
        # what the namespace tool hides is hidden here too: the text held under credential names
        # in the person's namespace and in the locals of every frame the traceback shows
        held = held_strings(getattr(self.shell, "user_ns", None) or {})
        held += [text for frame, _ in traceback.walk_tb(error.__traceback__) for text in held_strings(frame.f_locals)]
        self.errors[count] = (f"In [{count}]:\n{head(code.strip(), CODE_CHARS, extra=held)}\n\n"
                              f"{tail(self._traceback(error), TRACEBACK_CHARS, extra=held)}")
        self.last = count
        while len(self.errors) > KEEP:
            del self.errors[next(iter(self.errors))]

    def _traceback(self, error: BaseException) -> str:
        render = getattr(error, "_render_traceback_", None)
        if callable(render):
            lines = render()
        elif isinstance(error, SyntaxError):
            lines = traceback.format_exception_only(type(error), error)
        elif type(error).__name__ == "UsageError":  # IPython shows these as one line
            lines = [f"UsageError: {error}"]
        else:
            try:  # what the person saw, in their %xmode
                lines = self.shell.InteractiveTB.structured_traceback(type(error), error, error.__traceback__)
            except Exception:
                lines = traceback.format_exception(type(error), error, error.__traceback__)
        return _ANSI.sub("", "\n".join(line.rstrip("\n") for line in lines)).strip()

    def __getitem__(self, count: int) -> str:
        if count not in self.errors:
            raise KeyError(f"cell {count} raised no error that was recorded")
        return self.errors[count]

    def __str__(self) -> str:
        if self.last is None or self.last not in self.errors:
            raise LookupError("no cell has raised an error since %load_ext bettong_nb")
        return self.errors[self.last]

    def __repr__(self) -> str:
        return f"ErrorLog(cells={sorted(self.errors)})"
