"""What a notebook shows: transcripts of results and sessions, and the live view of a running turn.

    result            # in a cell: the HTML transcript, tool calls as expandable blocks
    session           # every turn of the conversation, and the usage of all of them
    print(result_text(result))   # the same for a terminal

The HTML is plain markup with inline styles and ``<details>`` blocks, so it reads the same in
JupyterLab, Notebook 7, VS Code and static viewers; nothing needs JavaScript.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import re
import sys
import time
from typing import Any, Callable, Mapping

from .. import events
from ..usage import Usage

__all__ = [
    "result_html", "session_html", "result_text", "tool_block", "usage_line", "css_id", "LiveView", "TextView",
    "PromptSlot",
    "RESULT_PREVIEW_CHARS",
]

RESULT_PREVIEW_CHARS = 20_000  # a tool result longer than this is cut in the display (never in the data)
_ARGS_PREVIEW_CHARS = 60

# Colours must read on light and dark themes alike: text inherits the theme's colour, fills and
# borders are translucent grey, and status colours are the theme's own where the frontend exposes
# them (JupyterLab and Notebook 7: --jp-*, VS Code: --vscode-*). The fallbacks, for static viewers,
# are mid-tones with about 4:1 contrast on white and on near-black.
_OK = "var(--jp-success-color0,var(--vscode-testing-iconPassed,#3d9140))"
_ERROR = "var(--jp-error-color1,var(--vscode-errorForeground,#e0403a))"
_WARN = "var(--jp-warn-color0,var(--vscode-editorWarning-foreground,#c86400))"
_INFO = "var(--jp-brand-color1,var(--vscode-textLink-foreground,#2f80ed))"
_STATUS_COLOURS = {"ok": _OK, "error": _ERROR, "denied": _ERROR, "running": _INFO, "awaiting approval": _WARN}
_RAN = ("ok", "error")  # statuses with a duration worth showing: a denied call never ran

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


def _json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _args_preview(args: Any) -> str:
    if isinstance(args, Mapping):
        text = ", ".join(f"{k}={_json(v)}" for k, v in args.items())
    else:
        text = _json(args)
    return text if len(text) <= _ARGS_PREVIEW_CHARS else text[:_ARGS_PREVIEW_CHARS - 1] + "…"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 0.0005:
        return "<1 ms"  # not "0 ms": it did take some time
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def css_id(call_id: str) -> str:
    """A tool call id as it appears in CSS classes (``bettong-call-<id>``)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)


def _one_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _call_line(tool: str, args: Any, status: str, *, detail: str | None = None, redactions: int = 0,
               duration_s: float | None = None) -> str:
    """One tool call on one line for a terminal: ``· tool(args…) → error: why (12 ms)``."""
    line = f"· {tool}({_args_preview(args)}) → {status}"
    if redactions:
        line += f" · {redactions} redacted"
    if detail:
        line += f": {_one_line(detail.removeprefix('ERROR: '))}"
    if duration_s is not None and status in _RAN:
        line += f" ({_duration(duration_s)})"
    return line


def _capped(text: str, limit: int = RESULT_PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters; the full text is in result.tool_calls)"


def tool_block(tool: str, args: Any, *, status: str, call_id: str = "", capability: str | None = None,
               result: str | None = None, duration_s: float | None = None, redactions: int = 0,
               reason: str | None = None, note: str | None = None) -> str:
    """One tool call as ``<details>``: summary ``tool(args…) → status · duration``, then the full
    arguments and the result, HTML-escaped."""
    colour = _STATUS_COLOURS.get(status, "inherit")
    parts = [f'<code style="{_CALL}">{_esc(tool)}({_esc(_args_preview(args))})</code> → '
             f'<span style="color:{colour};font-weight:600;white-space:nowrap">{_esc(status)}</span>']
    if redactions:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {redactions} redacted</span>')
    if duration_s is not None and status in _RAN:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {_esc(_duration(duration_s))}</span>')
    where = f" · capability: {_esc(capability)}" if capability else ""
    body = [f'<div style="{_LABEL}">ARGUMENTS{where}</div>',
            f'<pre style="{_PRE}">{_esc(_json(args, indent=2))}</pre>']
    if note:
        body.append(f'<div style="{_MUTED}">{_esc(note)}</div>')
    if reason and status == "denied":
        body.append(f'<div style="{_MUTED}">reason: {_esc(reason)}</div>')
    if result is not None:
        body.append(f'<div style="{_LABEL}">RESULT</div><pre style="{_PRE}">{_esc(_capped(result))}</pre>')
    css = f"bettong-tool bettong-call-{css_id(call_id)}" if call_id else "bettong-tool"
    return (f'<details class="{css}" style="{_DETAILS}"><summary style="{_SUMMARY}">{"".join(parts)}</summary>'
            f'{"".join(body)}</details>')


def _cost_text(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"


def usage_line(u: Usage, prices: Mapping[str, float] | None = None) -> str:
    """``3 requests · 3347 tokens (3042 in, 305 out) · 88% cache hit · cost 0.00123``."""
    from ..usage import cost

    total = u.total_tokens if u.total_tokens > 0 else u.prompt_tokens + u.completion_tokens
    parts = [f"{u.requests} request{'' if u.requests == 1 else 's'}",
             f"{total} tokens ({u.prompt_tokens} in, {u.completion_tokens} out)"]
    if u.prompt_tokens > 0:
        parts.append(f"{round(100 * u.cache_hit_tokens / u.prompt_tokens)}% cache hit")
    if prices:
        parts.append(f"cost {_cost_text(cost(u, **prices) or 0.0)}")
    return " · ".join(parts)


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


def _recorded_tool(block: dict, result: dict | None, call: Any) -> str:
    if call is not None:
        return tool_block(call.tool, call.args, status=call.status, call_id=call.id, capability=call.capability,
                          result=call.result, duration_s=call.duration_s, redactions=call.redactions,
                          reason=call.reason)
    text = None if result is None else str(result.get("content"))
    status = "ok" if result is not None and not result.get("is_error") else ("error" if result else "not run")
    return tool_block(block.get("name", "?"), block.get("input"), status=status, call_id=block.get("id", ""),
                      result=text)


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
    footer = _esc(usage_line(result.usage, result.prices))
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
    return _wrap(parts, _esc(usage_line(session.usage, session.options.get("prices"))))


def result_text(result: Any) -> str:
    """A RunResult for a terminal: the answer, one line per tool call, the usage line."""
    lines = [result.output if result.output is not None else f"(no final answer: {result.reason or 'not done'})"]
    for call in result.tool_calls:
        detail = call.reason if call.status == "denied" else call.result if call.status == "error" else None
        lines.append("  " + _call_line(call.tool, call.args, call.status, detail=detail, redactions=call.redactions,
                                       duration_s=call.duration_s))
    lines.append(f"  {usage_line(result.usage, result.prices)}")
    return "\n".join(lines)


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
    Markdown at the end) and the usage line. Updates are throttled to one per ``interval`` s.
    With ``prompts``, a :class:`PromptSlot` for approval prompts sits between activity and answer."""

    def __init__(self, *, prices: Mapping[str, float] | None = None, interval: float = 0.1,
                 show: Callable[[dict], Any] = _show, prompts: bool = False):
        self.prices = prices
        self.interval = interval
        self.items: list[dict] = []  # in order: {"kind": "text"|"thinking"|"note"|"tool", ...}
        self.tools: dict[str, dict] = {}
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
            item = {"kind": "tool", "id": event.call_id, "tool": event.tool, "args": event.args,
                    "capability": event.capability, "status": "running"}
            self.tools[event.call_id] = item
            self.items.append(item)
            self.status = None
            self._touch("activity")
        elif isinstance(event, events.ApprovalRequested):
            self._tool(event.call_id).update(status="awaiting approval", note="waiting for your decision")
            self._touch("activity")
        elif isinstance(event, events.ApprovalDecided):
            # A denial needs no note: the status says it, and the block shows the reason.
            self._tool(event.call_id).update(status="running" if event.allowed else "denied",
                                             note="allowed" if event.allowed else None, reason=event.reason)
            self._touch("activity")
        elif isinstance(event, events.ToolCallFinished):
            self._tool(event.call_id).update(status=event.status, result=event.result, duration=event.duration_s,
                                             redactions=event.redactions)
            self._touch("activity")
        elif isinstance(event, events.Retry):
            self._note(f"↻ {event.provider}: retry {event.attempt} in {event.delay_s:.1f} s ({event.reason})")
        elif isinstance(event, events.CacheWarning):
            self._note(f"⚠ {event.message}")
        elif isinstance(event, events.BudgetExceeded):
            self._note(f"⛔ stopped: {event.reason}")

    def _tool(self, call_id: str) -> dict:
        return self.tools.get(call_id) or {}

    def _note(self, text: str) -> None:
        self.items.append({"kind": "note", "text": text})
        self._touch("activity")

    def _assistant(self, message: dict) -> None:
        # The message is authoritative: without streaming it is the only source of the text.
        self.current = _message_text(message)
        if self.thinking:
            self.items.append({"kind": "thinking", "text": self.thinking})
            self.thinking = ""
        if _has_tool_use(message):
            if self.current.strip():
                self.items.append({"kind": "text", "text": self.current})
            self.current = ""
        self.status = None
        self._touch("answer", "activity")

    # rendering
    def activity_html(self) -> str:
        parts = []
        for item in self.items:
            if item["kind"] == "tool":
                parts.append(tool_block(item["tool"], item["args"], status=item["status"], call_id=item["id"],
                                        capability=item.get("capability"), result=item.get("result"),
                                        duration_s=item.get("duration"), redactions=item.get("redactions", 0),
                                        reason=item.get("reason"), note=item.get("note")))
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
            if item["kind"] == "tool":
                # No duration: this text is saved with the notebook, and should not change per run.
                lines.append(_call_line(item["tool"], item["args"], item["status"],
                                        redactions=item.get("redactions", 0)))
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
        wait = self.interval - (time.monotonic() - self._last)
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
            if item["kind"] == "tool" and item["status"] in ("running", "awaiting approval"):
                item["status"] = "not finished"
        self._dirty.add("activity")
        self.flush()
        if result.output:
            self._update("answer", {"text/markdown": safe_markdown(result.output), "text/plain": result.output})
        elif result.output is None:
            why = f"(no final answer: {result.reason or result.stop_reason or 'not done'})"
            self._update("answer", {"text/html": f'<div style="{_MUTED};color:{_ERROR};opacity:1">{_esc(why)}</div>',
                                    "text/plain": why})
        line = usage_line(result.usage, result.prices or self.prices)
        self._update("footer", {"text/html": f'<div class="bettong-usage" style="{_MUTED}">{_esc(line)}</div>',
                                "text/plain": line})
        self._closed = True

    def fail(self, message: str) -> None:
        """End the view with an error line instead of an answer."""
        self.status = None
        self._dirty.add("activity")
        self.flush()
        self._update("footer", {"text/html": f'<div class="bettong-error" style="{_MUTED};color:{_ERROR};opacity:1">'
                                             f'{_esc(message)}</div>', "text/plain": message})
        self._closed = True


class TextView:
    """The listener for a terminal: streamed text and one line per tool call, on stdout."""

    def __init__(self, *, stream: bool, prices: Mapping[str, float] | None = None, file: Any = None):
        self.stream = stream
        self.prices = prices
        self.file = file
        self._wrote = False  # streamed text since the last newline
        self._reasons: dict[str, str | None] = {}  # call id -> why it was denied

    def _print(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.file or sys.stdout, flush=True)

    def _break(self) -> None:
        if self._wrote:
            self._print("")
            self._wrote = False

    def __call__(self, event: events.Event) -> None:
        if isinstance(event, events.TextDelta) and self.stream:
            self._print(event.text, end="")
            self._wrote = not event.text.endswith("\n")
        elif isinstance(event, events.ApprovalDecided) and not event.allowed:
            self._reasons[event.call_id] = event.reason
        elif isinstance(event, events.ToolCallFinished):
            self._break()
            detail = {"denied": self._reasons.get(event.call_id), "error": event.result}.get(event.status)
            self._print("  " + _call_line(event.tool, event.args, event.status, detail=detail,
                                          redactions=event.redactions, duration_s=event.duration_s))
        elif isinstance(event, events.Retry):
            self._break()
            self._print(f"  ↻ retry {event.attempt} in {event.delay_s:.1f} s: {event.reason}")
        elif isinstance(event, (events.CacheWarning, events.BudgetExceeded)):
            self._break()
            self._print(f"  ⚠ {getattr(event, 'message', None) or getattr(event, 'reason', '')}")

    def finish(self, result: Any) -> None:
        self._break()
        if not self.stream or result.output is None:
            self._print(result.output if result.output is not None
                        else f"(no final answer: {result.reason or result.stop_reason or 'not done'})")
        self._print(f"  {usage_line(result.usage, result.prices or self.prices)}")

    def fail(self, message: str) -> None:
        self._break()
        self._print(message)
