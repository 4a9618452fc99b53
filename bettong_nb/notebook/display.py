"""What a notebook shows: transcripts of results and sessions, and the live view of a running turn.

    result            # in a cell: the HTML transcript, tool calls as expandable blocks
    session           # every turn of the conversation, and the usage of all of them

(The transcript HTML is built in :mod:`bettong_nb.transcript_html`, which exports use too; the
text forms, for terminals, are in :mod:`bettong_nb.terminal`.)

The HTML is plain markup with inline styles and ``<details>`` blocks, so it reads the same in
JupyterLab, Notebook 7, VS Code and static viewers; nothing needs JavaScript.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Mapping

from ..core import events
from ..batches.local import tally
from ..core.results import ToolCall

# The live view draws with the transcript's own pieces and styles, so both look the same.
from ..safety.sanitize import html_answer, visible_controls
from ..records.terminal import args_preview, call_line
from ..records.transcript_html import (BOX_STYLE, ERROR_COLOUR, MUTED_STYLE, PROSE_STYLE,
    RESULT_PREVIEW_CHARS, TEXT_STYLE, answer_html, css_id, esc, folded_html, result_html, session_html,
    thinking_html, tool_block)

__all__ = ["result_html", "session_html", "batch_text", "batch_html", "answer_bundle", "tool_block", "css_id",
           "LiveView", "PromptSlot", "RESULT_PREVIEW_CHARS", "decision_text", "decisions_bundle"]
# The live view redraws a streamed answer at most every len(answer) * this many seconds: about
# 100 KB of text a second for the frontend to lay out, so a long answer cannot swamp it (every
# 0.1 s up to 10 KB, every 0.5 s at 50 KB).
SECONDS_PER_CHAR = 1e-5
CLOCK_S = 1.0  # how often a running tool call's elapsed time is redrawn


def batch_text(results: Any) -> str:
    """A Batch in one line: ``Batch of 10: 7 done · 0 failed · 3 cancelled · <usage line>``."""
    failed, cancelled = len(results.failed), len(results.cancelled)
    counts = tally(len(results) - failed - cancelled, failed, cancelled)
    return f"Batch of {len(results)}: {counts} · {results.usage_line()}"


def batch_html(results: Any) -> str:
    return (f'<div class="bettong-batch" style="{BOX_STYLE}">{esc(batch_text(results))}'
            f'<div style="{MUTED_STYLE}">results[i] is item i\'s RunResult; results.usage_frame() has one row per '
            f'request</div></div>')


def answer_bundle(text: str, fmt: str = "markdown") -> dict:
    """How an answer is shown in format ``fmt`` (``%%agent -f``): Markdown rendered safe, plain
    text, or HTML sanitised (no scripts, no event handlers, nothing fetched)."""
    if fmt == "text":
        return {"text/plain": text}
    if fmt == "html":
        return {"text/html": f'<div class="bettong-html-answer" style="{PROSE_STYLE}">{html_answer(text)}</div>',
                "text/plain": text}
    return {"text/html": answer_html(text), "text/plain": text}


# --- live views -------------------------------------------------------------------------------

def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if b.get("type") == "text")


def _has_tool_use(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_use" for b in content)


def _show(bundle: dict) -> Any:
    from IPython.display import display

    return display(bundle, raw=True, display_id=True)


def decision_text(request: Any, line: str) -> str:
    """A decided prompt's record where no tool call is shown beside it: ``tool(args…) — line``."""
    return f"{visible_controls(str(request.tool))}({args_preview(request.args)}) — {line}"


def decisions_bundle(lines: list[str]) -> dict:
    """Records of decided prompts as plain HTML, which a saved notebook and nbconvert keep."""
    return {"text/plain": "\n".join(lines),
            "text/html": "".join(f'<div class="bettong-decision" style="{MUTED_STYLE}">{esc(line)}</div>' for line in lines)}


class PromptSlot:
    """An empty output reserved now that becomes a column of widgets (approval prompts) when the
    first one is shown, and gives them up as they are decided: prompts land in this cell even
    when a background task shows them later, and no widget is left behind. Each decided
    prompt's line of record goes to ``on_record(call_id, line)``; without one (a ``--quiet``
    cell, where no tool call is shown) the slot itself ends as those records."""

    def __init__(self, show: Callable[[dict], Any] = _show, on_record: Callable[[str, str], None] | None = None):
        self.handle = show({"text/plain": "", "text/html": ""})
        self.on_record = on_record
        self.records: list[str] = []  # without on_record: what the slot shows once no prompt waits
        self.box: Any = None

    def __call__(self, widget: Any) -> None:
        if self.box is None:
            import ipywidgets

            self.box = ipywidgets.VBox([widget])
            self.box.add_class("bettong-approvals")
            bundle = self.box._repr_mimebundle_()
            bundle["text/plain"] = "(approval prompts waiting)"
            self.handle.update(bundle, raw=True)
        else:
            self.box.children = (*self.box.children, widget)

    def settle(self, widget: Any, request: Any, line: str) -> None:
        """``widget`` (None for a call allowed without asking) was decided: record ``line``, and
        take the prompt away."""
        if self.on_record is not None:
            self.on_record(request.call_id, line)
        else:
            self.records.append(decision_text(request, line))
        if widget is not None and self.box is not None:
            self.box.children = tuple(w for w in self.box.children if w is not widget)
            if not self.box.children:
                self.box.close()
                self.box = None
                self.handle.update(decisions_bundle(self.records), raw=True)
        elif self.box is None and self.on_record is None:  # decided without a prompt (allowed always)
            self.handle.update(decisions_bundle(self.records), raw=True)


class LiveView:
    """The ``on_event`` listener that draws a running turn in the cell, through three display
    handles updated in place: activity (tool calls, retries, approvals), the answer (streamed,
    Markdown at the end) and the usage line. Updates are throttled to one per ``interval`` s,
    and further apart as a streamed answer grows: the frontend redraws it whole each time.
    With ``prompts``, a :class:`PromptSlot` for approval prompts sits between activity and answer."""

    def __init__(self, *, prices: Mapping[str, float] | None = None, interval: float = 0.1,
                 show: Callable[[dict], Any] = _show, prompts: bool = False):
        self.prices = prices
        self.interval = interval
        self.items: list[Any] = []  # in order: ToolCall records, and {"kind": "text"|"thinking"|"note", "text"}
        self.notes: dict[str, str] = {}  # call id -> a line under its arguments ("waiting for your decision")
        self.decisions: dict[str, str] = {}  # call id -> how a person decided it ("allowed by you")
        self.running_since: dict[str, float] = {}  # call id -> when it started to run (monotonic)
        self._clock: asyncio.TimerHandle | None = None  # redraws running calls' elapsed time
        self.current = ""  # the text of the step being streamed
        self.thinking = ""
        self.status: str | None = None  # a transient line: waiting for the model, writing a tool call
        self._dirty: set[str] = set()
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._sent: dict[str, str] = {}
        self._closed = False
        empty = {"text/plain": "", "text/html": ""}
        self.handles = {"activity": show(dict(empty))}
        # Approval prompts go below the tool calls and above the answer, their records into the calls.
        self.prompts = PromptSlot(show, on_record=self.record) if prompts else None
        self.handles.update({name: show(dict(empty)) for name in ("answer", "footer")})

    # the listener
    def __call__(self, event: events.Event) -> None:
        if self._closed:
            return
        if isinstance(event, events.TextDelta):
            self.current += event.text
            if self.status:
                self.status = None
                self._dirty.add("activity")
            self._touch("answer")
        elif isinstance(event, events.ThinkingDelta):
            self.thinking += event.text
            self.status = "thinking…"
            self._touch("activity")
        elif isinstance(event, events.ToolUseDelta):
            if event.name:
                self.status = f"writing a call to {event.name}…"
                self._touch("activity")
        elif isinstance(event, events.ModelRequest):
            self.status = f"step {event.step}: waiting for the model…"
            self._touch("activity")
        elif isinstance(event, events.AssistantMessage):
            self._assistant(event.message)
        elif isinstance(event, events.ToolCallStarted):
            self.items.append(event.call)  # the record itself: its status changes as the call goes
            self.status = None
            self._running(event.call.id)
            self._touch("activity")
        elif isinstance(event, events.ApprovalRequested):
            self._set_status(event.call_id, "awaiting approval")
            self.running_since.pop(event.call_id, None)  # the clock starts when it may run
            self.notes[event.call_id] = "waiting for your decision"
            self._touch("activity")
        elif isinstance(event, events.ApprovalDecided):
            # The status says it; how a person decided comes in the call's record (record()).
            self._set_status(event.call_id, "running" if event.allowed else "denied")
            if event.allowed:
                self._running(event.call_id)
            self.notes.pop(event.call_id, None)
            self._touch("activity")
        elif isinstance(event, events.ToolCallFinished):
            self.running_since.pop(event.call.id, None)
            self._touch("activity")
        elif isinstance(event, events.Retry):
            self._note(f"↻ {event.provider}: retry {event.attempt} in {event.delay_s:.1f} s ({event.reason})")
        elif isinstance(event, events.CacheWarning):
            self._note(f"⚠ {event.message}")

    def record(self, call_id: str, line: str) -> None:
        """How a person decided call ``call_id``: shown beside the call, kept when the cell is saved."""
        self.decisions[call_id] = line
        self._touch("activity")
        if self._closed:  # a late record (a click that raced the end): straight to the cell
            self.flush()

    def _set_status(self, call_id: str, status: str) -> None:
        for item in self.items:
            if isinstance(item, ToolCall) and item.id == call_id and item.result is None:
                item.status = status

    def _running(self, call_id: str) -> None:
        """Start a call's clock; while any call runs, the view redraws its elapsed time each second."""
        self.running_since[call_id] = time.monotonic()
        if self._clock is None:
            try:
                self._clock = asyncio.get_running_loop().call_later(CLOCK_S, self._tick)
            except RuntimeError:
                pass  # no loop here (a blocking run's worker): the next event redraws

    def _tick(self) -> None:
        self._clock = None
        if self.running_since and not self._closed:
            self._touch("activity")
            self._clock = asyncio.get_running_loop().call_later(CLOCK_S, self._tick)

    def _note(self, text: str) -> None:
        self.items.append({"kind": "note", "text": text})
        self._touch("activity")

    def _assistant(self, message: dict) -> None:
        # The message is authoritative: without streaming it is the only source of the text.
        self.current = _message_text(message)
        if self.thinking:
            self.items.append({"kind": "thinking", "text": self.thinking})
            self.thinking = ""
        self.status = None
        if _has_tool_use(message):
            if self.current.strip():
                self.items.append({"kind": "text", "text": self.current})
            self.current = ""
            self._touch("answer", "activity")
        else:  # the final answer: finish() shows it as Markdown next, so its HTML is not sent again
            self._touch("activity")

    # rendering
    def activity_html(self) -> str:
        parts = []
        for item in self.items:
            if isinstance(item, ToolCall):
                since = self.running_since.get(item.id)
                parts.append(tool_block(item, note=self.notes.get(item.id), decision=self.decisions.get(item.id),
                                        elapsed_s=None if since is None else time.monotonic() - since))
            elif item["kind"] == "text":
                parts.append(answer_html(item["text"]))
            elif item["kind"] == "thinking":
                parts.append(thinking_html(item["text"]))
            else:
                parts.append(f'<div style="{MUTED_STYLE}">{esc(item["text"])}</div>')
        if self.thinking:
            parts.append(folded_html("thinking…", self.thinking))
        if self.status:
            parts.append(f'<div class="bettong-status" style="{MUTED_STYLE}">{esc(self.status)}</div>')
        return f'<div class="bettong-live" style="{BOX_STYLE}">{"".join(parts)}</div>' if parts else ""

    def activity_text(self) -> str:
        lines = []
        for item in self.items:
            if isinstance(item, ToolCall):
                lines.append(call_line(item, timed=False))
            elif item["kind"] in ("text", "note"):
                lines.append(item["text"])
        return "\n".join(lines)

    def _bundle(self, name: str) -> dict:
        if name == "activity":
            return {"text/html": self.activity_html(), "text/plain": self.activity_text()}
        if name == "answer":
            body = f'<div class="bettong-answer" style="{BOX_STYLE};{TEXT_STYLE}">{esc(self.current)}</div>'
            return {"text/html": body if self.current else "", "text/plain": self.current}
        raise KeyError(name)

    def _touch(self, *names: str) -> None:
        self._dirty.update(names)
        wait = max(self.interval, len(self.current) * SECONDS_PER_CHAR) - (time.monotonic() - self._last)
        if wait <= 0:
            self.flush()
            return
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop to defer on: the next event or finish() flushes
            self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for name in sorted(self._dirty):
            self._update(name, self._bundle(name))
        self._dirty.clear()
        self._last = time.monotonic()

    def _update(self, name: str, bundle: dict) -> None:
        key = bundle.get("text/html", "") + "\0" + bundle.get("text/markdown", "") + "\0" + bundle.get("text/plain", "")
        if self._sent.get(name) == key:
            return
        self._sent[name] = key
        self.handles[name].update(bundle, raw=True)

    def _settle(self, unfinished: str) -> None:
        self.status = None
        self.running_since.clear()
        if self._clock is not None:
            self._clock.cancel()
            self._clock = None
        for item in self.items:
            if isinstance(item, ToolCall) and item.status in ("running", "awaiting approval"):
                item.status = unfinished
                self.notes.pop(item.id, None)
        self._dirty.add("activity")
        self._dirty.discard("answer")  # finish() replaces it: a long answer is not rendered twice
        self.flush()

    def finish(self, result: Any, *, answer: dict | None = None) -> None:
        """The final flush: the answer (Markdown, or the bundle ``answer`` when given), the usage
        line, no transient status. No answer shows why, in a person's words."""
        self._settle("not finished")
        if result.output and not result.refused():
            self._update("answer", answer or answer_bundle(result.output))
        elif result.why():
            why = result.answer_text()
            self._update("answer", {"text/html": f'<div class="bettong-why" style="{MUTED_STYLE};color:{ERROR_COLOUR};opacity:1">'
                                                 f'{esc(why)}</div>', "text/plain": why})
        line = result.usage_line(self.prices)
        self._update("footer", {"text/html": f'<div class="bettong-usage" style="{MUTED_STYLE}">{esc(line)}</div>',
                                "text/plain": line})
        self._closed = True

    def fail(self, message: str | None = None, *, unfinished: str = "not finished") -> None:
        """End the view without an answer: tool calls still going marked ``unfinished``, and
        ``message`` as the last line when given (a cell that raises says it once, in its error)."""
        self._settle(unfinished)
        if self.current:  # what was streamed before the end stays readable
            self._update("answer", self._bundle("answer"))
        if message:
            self._update("footer", {"text/html": f'<div class="bettong-error" style="{MUTED_STYLE};color:{ERROR_COLOUR};'
                                                 f'opacity:1">{esc(message)}</div>', "text/plain": message})
        self._closed = True
