"""How a run reads as text: one line per tool call, the answer, the usage line, and the
listener that prints a run as it goes (the CLI, a terminal IPython, a blocking cell).

What the model or a tool wrote is printed through :func:`bettong_nb.sanitize.terminal_text`:
no escape sequence (an OSC 52 clipboard write, a title, cursor moves) or bidi control reaches
the terminal.

    agent = bettong_nb.deepseek(capabilities=[...], on_event=TextView(stream=True))
    print(result_text(result))
"""

from __future__ import annotations

import json
import sys
from typing import Any, Mapping

from ..core import events
from ..core.usage import duration_text
from ..safety.sanitize import terminal_text, visible_controls

__all__ = ["TextView", "result_text", "call_line", "args_preview", "json_text"]

_ARGS_PREVIEW_CHARS = 60
RAN = ("ok", "error")  # statuses with a duration worth showing: a denied call never ran


def json_text(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    except (TypeError, ValueError):
        return repr(value)


def args_preview(args: Any) -> str:
    """Tool arguments on one short line: ``path="a.txt", max_chars=100``."""
    if isinstance(args, Mapping):
        text = ", ".join(f"{k}={json_text(v)}" for k, v in args.items())
    else:
        text = json_text(args)
    text = visible_controls(text)  # a bidi control would make the call read as another
    return text if len(text) <= _ARGS_PREVIEW_CHARS else text[:_ARGS_PREVIEW_CHARS - 1] + "…"


def _one_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def call_line(call: Any, *, timed: bool = True) -> str:
    """One tool call on one line: ``· tool(args…) → error: why (12 ms)``. ``timed=False`` leaves
    the duration out (text saved with a notebook should not change per run)."""
    line = f"· {visible_controls(str(call.tool))}({args_preview(call.args)}) → {call.status}"
    if call.redactions:
        line += f" · {call.redactions} redacted"
    detail = call.why() if call.status == "denied" else call.result if call.status == "error" else None
    if detail:
        line += f": {_one_line(detail.removeprefix('ERROR: '))}"
    if timed and call.duration_s is not None and call.status in RAN:
        line += f" ({duration_text(call.duration_s)})"
    return line


def result_text(result: Any) -> str:
    """A RunResult for a terminal: the answer, one line per tool call, the usage line."""
    lines = [result.answer_text()]
    lines += ["  " + call_line(call) for call in result.tool_calls]
    lines.append(f"  {result.usage_line()}")
    return terminal_text("\n".join(lines))


class TextView:
    """The listener for a terminal: the answer (streamed, with ``stream``) on ``file``, and one
    line per tool call, retry or warning, and the usage line, on ``notes`` (default: ``file``;
    both default to stdout)."""

    def __init__(self, *, stream: bool, prices: Mapping[str, float] | None = None, file: Any = None,
                 notes: Any = None):
        self.stream = stream
        self.prices = prices
        self.file = file
        self.notes = notes
        self._wrote = False  # streamed text since the last newline

    def _print(self, text: str, end: str = "\n", *, note: bool = True) -> None:
        target = (self.notes if note else None) or self.file or sys.stdout
        print(terminal_text(text), end=end, file=target, flush=True)

    def _break(self) -> None:
        if self._wrote:
            self._print("", note=False)
            self._wrote = False

    def __call__(self, event: events.Event) -> None:
        if isinstance(event, events.TextDelta) and self.stream:
            self._print(event.text, end="", note=False)
            self._wrote = not event.text.endswith("\n")
        elif isinstance(event, events.ToolCallFinished):
            self._break()
            self._print("  " + call_line(event.call))
        elif isinstance(event, events.Retry):
            self._break()
            self._print(f"  ↻ retry {event.attempt} in {event.delay_s:.1f} s: {event.reason}")
        elif isinstance(event, events.CacheWarning):
            self._break()
            self._print(f"  ⚠ {event.message}")

    def finish(self, result: Any) -> None:
        self._break()
        if not self.stream or result.output is None or result.refused():
            self._print(result.answer_text(), note=False)
        self._print(f"  {result.usage_line(self.prices)}")

    def fail(self, message: str) -> None:
        self._break()
        self._print(message)
