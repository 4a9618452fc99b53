"""What a notebook shows: transcripts of results and sessions, and the live view of a running turn.

    result            # in a cell: the HTML transcript, tool calls as expandable blocks
    session           # every turn of the conversation, and the usage of all of them

(The text forms, for terminals, are in :mod:`bettong_nb.terminal`.)

The HTML is plain markup with inline styles and ``<details>`` blocks, so it reads the same in
JupyterLab, Notebook 7, VS Code and static viewers; nothing needs JavaScript.
"""

from __future__ import annotations

import asyncio
import functools
import html
import re
import time
from typing import Any, Callable, Mapping

from .. import events, usage
from ..results import ToolCall
from ..terminal import RAN, args_preview, call_line, duration_text, json_text

__all__ = ["result_html", "session_html", "tool_block", "css_id", "LiveView", "PromptSlot", "RESULT_PREVIEW_CHARS"]

RESULT_PREVIEW_CHARS = 20_000  # a tool result longer than this is cut in the display (never in the data)
# The live view redraws a streamed answer at most every len(answer) * this many seconds: about
# 100 KB of text a second for the frontend to lay out, so a long answer cannot swamp it (every
# 0.1 s up to 10 KB, every 0.5 s at 50 KB).
SECONDS_PER_CHAR = 1e-5

# Colours must read on light and dark themes alike: text inherits the theme's colour, fills and
# borders are translucent grey, and status colours are the theme's own where the frontend exposes
# them (JupyterLab and Notebook 7: --jp-*, VS Code: --vscode-*). The fallbacks, for static viewers,
# are mid-tones with about 4:1 contrast on white and on near-black.
_OK = "var(--jp-success-color0,var(--vscode-testing-iconPassed,#3d9140))"
_ERROR = "var(--jp-error-color1,var(--vscode-errorForeground,#e0403a))"
_WARN = "var(--jp-warn-color0,var(--vscode-editorWarning-foreground,#c86400))"
_INFO = "var(--jp-brand-color1,var(--vscode-textLink-foreground,#2f80ed))"
_STATUS_COLOURS = {"ok": _OK, "error": _ERROR, "denied": _ERROR, "running": _INFO, "awaiting approval": _WARN}

_MONO = "font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,monospace);font-size:12px"
_BOX = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45"
# Answers and prompts in the size of rendered Markdown, so a streamed answer does not change size
# when it becomes Markdown at the end.
_PROSE = "font-size:var(--jp-content-font-size1,14px);line-height:var(--jp-content-line-height,1.6)"
_DETAILS = ("margin:3px 0;border:1px solid rgba(128,128,128,.35);border-radius:4px;padding:2px 8px;"
            "background:rgba(128,128,128,.06)")
_SUMMARY = "cursor:pointer;overflow-wrap:anywhere"  # stays a list-item: its marker is the disclosure triangle
# The call in a summary takes what room the status after it leaves and ends in an ellipsis, so
# both share one line; in a very narrow cell it keeps 10em and the status moves below.
_CALL = (f"{_MONO};display:inline-block;max-width:calc(100% - 17em);max-width:max(10em,calc(100% - 17em));"
         "overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom")
# word-break:normal undoes JupyterLab's break-all for output <pre>, which splits words anywhere;
# a word too long for the line still breaks (overflow-wrap), and a huge result scrolls.
_PRE = (f"{_MONO};white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere;margin:4px 0;padding:4px 6px;"
        "max-height:24em;overflow:auto;background:rgba(128,128,128,.1);border-radius:3px")
_TEXT = f"white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0;{_PROSE}"
_MUTED = "opacity:.75;font-size:12px;margin:3px 0"
_LABEL = "font-size:11px;letter-spacing:.04em;opacity:.7;margin-top:6px"
_ROLE = "font-weight:600;margin-top:10px"
_FOOTER = f"{_MUTED};margin-top:8px;padding-top:4px;border-top:1px solid rgba(128,128,128,.3)"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def css_id(call_id: str) -> str:
    """A tool call id as it appears in CSS classes (``bettong-call-<id>``)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)


def _capped(text: str, limit: int = RESULT_PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters; the full text is in result.tool_calls)"


def tool_block(call: ToolCall, *, note: str | None = None) -> str:
    """One tool call as ``<details>``: summary ``tool(args…) → status · duration``, then the full
    arguments and the result, HTML-escaped."""
    colour = _STATUS_COLOURS.get(call.status, "inherit")
    parts = [f'<code style="{_CALL}">{_esc(call.tool)}({_esc(args_preview(call.args))})</code> → '
             f'<span style="color:{colour};font-weight:600;white-space:nowrap">{_esc(call.status)}</span>']
    if call.redactions:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {call.redactions} redacted</span>')
    if call.duration_s is not None and call.status in RAN:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {_esc(duration_text(call.duration_s))}</span>')
    where = f" · capability: {_esc(call.capability)}" if call.capability else ""
    body = [f'<div style="{_LABEL}">ARGUMENTS{where}</div>',
            f'<pre style="{_PRE}">{_esc(json_text(call.args, indent=2))}</pre>']
    if note:
        body.append(f'<div style="{_MUTED}">{_esc(note)}</div>')
    if call.reason and call.status == "denied":
        body.append(f'<div style="{_MUTED}">reason: {_esc(call.reason)}</div>')
    if call.result is not None:
        body.append(f'<div style="{_LABEL}">RESULT</div><pre style="{_PRE}">{_esc(_capped(call.result))}</pre>')
    css = f"bettong-tool bettong-call-{css_id(call.id)}" if call.id else "bettong-tool"
    return (f'<details class="{css}" style="{_DETAILS}"><summary style="{_SUMMARY}">{"".join(parts)}</summary>'
            f'{"".join(body)}</details>')


# --- transcripts ------------------------------------------------------------------------------

def _results_by_id(messages: list[dict]) -> dict[str, dict]:
    return {b.get("tool_use_id"): b for m in messages if m.get("role") == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"}


def _messages_html(messages: list[dict], calls: list[Any], *, turn_marks: bool = False) -> list[str]:
    results = _results_by_id(messages)
    meta = {c.id: c for c in calls if getattr(c, "id", "")}
    out: list[str] = []
    turn = 0
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "system":
            out.append(f'<details style="{_DETAILS}"><summary style="{_SUMMARY}">system prompt</summary>'
                       f'<pre style="{_PRE}">{_esc(content)}</pre></details>')
        elif role == "user" and isinstance(content, str):
            turn += 1
            label = f"You · turn {turn}" if turn_marks else "You"
            out.append(f'<div style="{_ROLE}">{label}</div><div style="{_TEXT}">{_esc(content)}</div>')
        elif role == "assistant" and isinstance(content, list):
            for block in content:
                kind = block.get("type")
                if kind == "text" and block.get("text"):
                    out.append(f'<div style="{_ROLE}">Agent</div>{_answer_html(block["text"])}')
                elif kind == "thinking" and block.get("text"):
                    out.append(f'<details style="{_DETAILS}"><summary style="{_SUMMARY}">thinking</summary>'
                               f'<pre style="{_PRE}">{_esc(block["text"])}</pre></details>')
                elif kind == "tool_use":
                    out.append(_recorded_tool(block, results.get(block.get("id")), meta.get(block.get("id"))))
        elif role == "assistant" and isinstance(content, str) and content:
            out.append(f'<div style="{_ROLE}">Agent</div>{_answer_html(content)}')
    return out


def _recorded_tool(block: dict, result: dict | None, call: ToolCall | None) -> str:
    if call is None:  # a transcript handed in by the user: what its messages say
        status = "ok" if result is not None and not result.get("is_error") else ("error" if result else "not run")
        call = ToolCall(block.get("name", "?"), None, block.get("input"), id=block.get("id", ""), status=status,
                        result=None if result is None else str(result.get("content")))
    return tool_block(call)


def _wrap(parts: list[str], footer: str) -> str:
    return (f'<div class="bettong-transcript" style="{_BOX}">{"".join(parts)}'
            f'<div class="bettong-usage" style="{_FOOTER}">{footer}</div></div>')


_CODE = re.compile(r"(```.*?(?:```|$)|~~~.*?(?:~~~|$)|`[^`\n]*`)", re.S)


def _outside_code(text: str, fix: Callable[[str], str]) -> str:
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts are outside code
        parts[i] = fix(parts[i])
    return "".join(parts)


def safe_markdown(text: str) -> str:
    """An answer made safe to render: the model's text may carry a prompt-injected image whose
    URL leaks data when the frontend fetches it, or raw HTML. Outside code, images become plain
    links (``\\![…](…)``) and ``<`` is escaped; code spans and fences are left as written."""
    return _outside_code(text, lambda part: part.replace("<", "&lt;").replace("![", "\\!["))


@functools.cache
def _markdown() -> Callable[[str], str]:
    import mistune  # imported on first use only: %load_ext stays cheap

    return mistune.create_markdown(escape=True, plugins=["strikethrough", "table"])


def _answer_html(text: str) -> str:
    """The model's text in a transcript, as the live view shows it: Markdown rendered to plain
    HTML, raw HTML escaped (mistune does that) and images turned into links nobody fetches."""
    rendered = _markdown()(_outside_code(text, lambda part: part.replace("![", "\\![")))
    return f'<div class="bettong-markdown" style="{_PROSE};overflow-wrap:anywhere">{rendered}</div>'


def result_html(result: Any) -> str:
    """A RunResult as an HTML transcript: prompt, answers, tool calls, and a usage line."""
    parts = _messages_html(result.messages, result.tool_calls)
    footer = _esc(usage.line(result.usage, result.prices))
    if not result.done:
        why = _esc(result.reason or result.stop_reason)
        footer = f'<span style="color:{_ERROR}">stopped early: {why}</span> · {footer}'
    return _wrap(parts, footer)


def session_html(session: Any) -> str:
    """A Session as an HTML transcript of all its turns, with the usage of all of them."""
    parts = [f'<div style="{_MUTED}">Session · {session.turns} turn{"" if session.turns == 1 else "s"}</div>']
    parts += _messages_html(session.transcript, session.tool_calls, turn_marks=True)
    if not session.transcript:
        parts.append(f'<div style="{_MUTED}">(no turns yet)</div>')
    return _wrap(parts, _esc(usage.line(session.usage, session.prices)))


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


class PromptSlot:
    """An empty output reserved now that becomes a column of widgets (approval prompts) when the
    first one is shown: nothing is left behind when no prompt ever comes, and prompts land in
    this cell even when a background task shows them later."""

    def __init__(self, show: Callable[[dict], Any] = _show):
        self.handle = show({"text/plain": "", "text/html": ""})
        self.box: Any = None

    def __call__(self, widget: Any) -> None:
        if self.box is None:
            import ipywidgets

            self.box = ipywidgets.VBox([widget])
            self.box.add_class("bettong-approvals")
            bundle = self.box._repr_mimebundle_()
            # Where widgets do not render (a saved notebook in a static viewer) say what this was;
            # the decisions are in the tool-call blocks above.
            bundle["text/plain"] = "(approval prompts: interactive widgets)"
            self.handle.update(bundle, raw=True)
        else:
            self.box.children = (*self.box.children, widget)


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
        # Approval prompts go below the tool calls and above the answer.
        self.prompts = PromptSlot(show) if prompts else None
        # The answer starts as (blank) Markdown, so the frontend loads its Markdown renderer now,
        # not after the last chunk of a long answer (a cold first render took ~200 ms more).
        self.handles["answer"] = show({"text/plain": "", "text/markdown": " "})
        self.handles["footer"] = show(dict(empty))

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
            self._touch("activity")
        elif isinstance(event, events.ApprovalRequested):
            self._set_status(event.call_id, "awaiting approval")
            self.notes[event.call_id] = "waiting for your decision"
            self._touch("activity")
        elif isinstance(event, events.ApprovalDecided):
            # A denial needs no note: the status says it, and the block shows the reason.
            self._set_status(event.call_id, "running" if event.allowed else "denied")
            self.notes[event.call_id] = "allowed" if event.allowed else ""
            self._touch("activity")
        elif isinstance(event, events.ToolCallFinished):
            self._touch("activity")
        elif isinstance(event, events.Retry):
            self._note(f"↻ {event.provider}: retry {event.attempt} in {event.delay_s:.1f} s ({event.reason})")
        elif isinstance(event, events.CacheWarning):
            self._note(f"⚠ {event.message}")
        elif isinstance(event, events.BudgetExceeded):
            self._note(f"⛔ stopped: {event.reason}")

    def _set_status(self, call_id: str, status: str) -> None:
        for item in self.items:
            if isinstance(item, ToolCall) and item.id == call_id and item.result is None:
                item.status = status

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
                parts.append(tool_block(item, note=self.notes.get(item.id)))
            elif item["kind"] == "text":
                parts.append(_answer_html(item["text"]))
            elif item["kind"] == "thinking":
                parts.append(f'<details style="{_DETAILS}"><summary style="{_SUMMARY}">thinking</summary>'
                             f'<pre style="{_PRE}">{_esc(item["text"])}</pre></details>')
            else:
                parts.append(f'<div style="{_MUTED}">{_esc(item["text"])}</div>')
        if self.thinking:
            parts.append(f'<details style="{_DETAILS}"><summary style="{_SUMMARY}">thinking…</summary>'
                         f'<pre style="{_PRE}">{_esc(self.thinking)}</pre></details>')
        if self.status:
            parts.append(f'<div style="{_MUTED}">⏳ {_esc(self.status)}</div>')
        return f'<div class="bettong-live" style="{_BOX}">{"".join(parts)}</div>' if parts else ""

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
            body = f'<div class="bettong-answer" style="{_BOX};{_TEXT}">{_esc(self.current)}</div>'
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

    def finish(self, result: Any) -> None:
        """The final flush: the answer as Markdown, the usage line, no transient status."""
        self.status = None
        for item in self.items:
            if isinstance(item, ToolCall) and item.status in ("running", "awaiting approval"):
                item.status = "not finished"
        self._dirty.add("activity")
        self._dirty.discard("answer")  # replaced below: a long answer is not rendered twice
        self.flush()
        if result.output:
            self._update("answer", {"text/markdown": safe_markdown(result.output), "text/plain": result.output})
        elif result.output is None:
            why = result.answer_text()
            self._update("answer", {"text/html": f'<div style="{_MUTED};color:{_ERROR};opacity:1">{_esc(why)}</div>',
                                    "text/plain": why})
        line = usage.line(result.usage, result.prices or self.prices)
        self._update("footer", {"text/html": f'<div class="bettong-usage" style="{_MUTED}">{_esc(line)}</div>',
                                "text/plain": line})
        self._closed = True

    def fail(self, message: str) -> None:
        """End the view with an error line instead of an answer."""
        self.status = None
        self._dirty.update(("activity", "answer") if self.current else ("activity",))
        self.flush()
        self._update("footer", {"text/html": f'<div class="bettong-error" style="{_MUTED};color:{_ERROR};opacity:1">'
                                             f'{_esc(message)}</div>', "text/plain": message})
        self._closed = True
