"""Transcripts as HTML: results and sessions, tool calls as expandable blocks.

    html = result_html(result)      # what a notebook shows for a RunResult
    html = session_html(session)    # every turn of a conversation, and its usage

The HTML is plain markup with inline styles and ``<details>`` blocks, so it reads the same in
JupyterLab, Notebook 7, VS Code, static viewers and an exported file; nothing needs JavaScript
and nothing is fetched. It needs no IPython: the notebook display (``notebook/display.py``)
shows it and builds its live view from the same pieces, and ``export`` writes it to a file.
"""

from __future__ import annotations

import functools
import html
from typing import Any

from ..core import images
from ..core.results import STOPPED, ToolCall
from ..safety.sanitize import markdown_html
from ..core.usage import duration_text
from .terminal import RAN, args_preview, json_text

__all__ = ["result_html", "session_html", "tool_block", "css_id", "image_html", "image_placeholder",
           "is_prompt", "recorded_call", "thinking_html", "tool_results", "tool_result_images", "tool_result_text",
           "RESULT_PREVIEW_CHARS", "answer_html", "esc", "folded_html",
           # the styles the live view and the approval prompts share with the transcript
           "OK_COLOUR", "ERROR_COLOUR", "BOX_STYLE", "PROSE_STYLE",
           "TEXT_STYLE", "MUTED_STYLE"]

RESULT_PREVIEW_CHARS = 20_000  # a tool result longer than this is cut in the display (never in the data)

# Colours must read on light and dark themes alike: text inherits the theme's colour, fills and
# borders are translucent grey, and status colours are the theme's own where the frontend exposes
# them (JupyterLab and Notebook 7: --jp-*, VS Code: --vscode-*). The fallbacks, for static viewers,
# are mid-tones with about 4:1 contrast on white and on near-black.
OK_COLOUR = "var(--jp-success-color0,var(--vscode-testing-iconPassed,#3d9140))"
ERROR_COLOUR = "var(--jp-error-color1,var(--vscode-errorForeground,#e0403a))"
_WARN = "var(--jp-warn-color0,var(--vscode-editorWarning-foreground,#c86400))"
_INFO = "var(--jp-brand-color1,var(--vscode-textLink-foreground,#2f80ed))"
_STATUS_COLOURS = {"ok": OK_COLOUR, "error": ERROR_COLOUR, "denied": ERROR_COLOUR, "running": _INFO, "awaiting approval": _WARN}

_MONO = "font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,monospace);font-size:12px"
BOX_STYLE = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45"
# Answers and prompts in the size of rendered Markdown, so a streamed answer does not change size
# when it becomes Markdown at the end.
PROSE_STYLE = "font-size:var(--jp-content-font-size1,14px);line-height:var(--jp-content-line-height,1.6)"
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
TEXT_STYLE = f"white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0;{PROSE_STYLE}"
MUTED_STYLE = "opacity:.75;font-size:12px;margin:3px 0"
_LABEL = "font-size:11px;letter-spacing:.04em;opacity:.7;margin-top:6px"
_ROLE = "font-weight:600;margin-top:10px"
_FOOTER = f"{MUTED_STYLE};margin-top:8px;padding-top:4px;border-top:1px solid rgba(128,128,128,.3)"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def css_id(call_id: str) -> str:
    """A tool call id as it appears in CSS classes (``bettong-call-<id>``)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)


def _capped(text: str, limit: int = RESULT_PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters; the full text is in result.tool_calls)"


_THUMB = "max-width:240px;max-height:240px;margin:4px 6px 4px 0;border:1px solid rgba(128,128,128,.35)"


@functools.lru_cache(maxsize=16)  # a live view redraws its tool calls on every update
def _thumbnail_url(image: images.Image) -> str:
    return images.thumbnail(image).data_url()


def _thumbnails(pictures: list[images.Image]) -> str:
    """Images as inline ``data:`` thumbnails: the page never fetches anything for them."""
    tags = [f'<img class="bettong-image" src="{_thumbnail_url(p)}" alt="{esc(p.describe())}" '
            f'title="{esc(p.describe())}" style="{_THUMB}">' for p in pictures]
    return f'<div>{"".join(tags)}</div>' if tags else ""


def tool_block(call: ToolCall, *, note: str | None = None, decision: str | None = None,
               elapsed_s: float | None = None) -> str:
    """One tool call as ``<details>``: summary ``tool(args…) → status · decision · duration``, then
    the full arguments, the result, thumbnails of the images it sent the model and, when the
    tool raised, its traceback, HTML-escaped. ``decision`` is how a person decided the call
    ("allowed by you"); a denial's decision says "denied: why" in place of the bare status.
    ``elapsed_s``: how long a call still running has run so far (the live view's clock)."""
    colour = _STATUS_COLOURS.get(call.status, "inherit")
    decision = decision or (STOPPED if call.stopped else None)  # a redisplay reads as the live view did
    shown = decision if decision and decision.startswith(call.status) else call.status
    parts = [f'<code style="{_CALL}">{esc(call.tool)}({esc(args_preview(call.args))})</code> → '
             f'<span style="color:{colour};font-weight:600;white-space:nowrap">{esc(shown)}</span>']
    if decision and shown != decision:
        parts.append(f'<span class="bettong-decision" style="opacity:.75;white-space:nowrap"> · {esc(decision)}</span>')
    if call.redactions:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {call.redactions} redacted</span>')
    if call.duration_s is not None and call.status in RAN:
        parts.append(f'<span style="opacity:.75;white-space:nowrap"> · {esc(duration_text(call.duration_s))}</span>')
    elif elapsed_s is not None and call.status == "running":
        parts.append(f'<span class="bettong-elapsed" style="opacity:.75;white-space:nowrap"> · '
                     f'{esc(duration_text(elapsed_s))}</span>')
    where = f" · capability: {esc(call.capability)}" if call.capability else ""
    body = [f'<div style="{_LABEL}">ARGUMENTS{where}</div>',
            f'<pre style="{_PRE}">{esc(json_text(call.args, indent=2))}</pre>']
    if note:
        body.append(f'<div style="{MUTED_STYLE}">{esc(note)}</div>')
    if call.why() and not call.stopped:
        body.append(f'<div style="{MUTED_STYLE}">reason: {esc(call.why())}</div>')
    if call.result is not None:
        body.append(f'<div style="{_LABEL}">RESULT</div><pre style="{_PRE}">{esc(_capped(call.result))}</pre>')
    body.append(_thumbnails(call.images))
    if call.traceback:
        body.append(f'<details style="{_DETAILS}"><summary style="{_SUMMARY};{_LABEL}">TRACEBACK</summary>'
                    f'<pre style="{_PRE}">{esc(_capped(call.traceback))}</pre></details>')
    css = f"bettong-tool bettong-call-{css_id(call.id)}" if call.id else "bettong-tool"
    return (f'<details class="{css}" style="{_DETAILS}"><summary style="{_SUMMARY}">{"".join(parts)}</summary>'
            f'{"".join(body)}</details>')


# --- transcripts ------------------------------------------------------------------------------

def tool_results(messages: list[dict]) -> dict[str, dict]:
    """The tool_result blocks of a transcript by the id of the call they answer."""
    return {b.get("tool_use_id"): b for m in messages if m.get("role") == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"}


def is_prompt(message: dict) -> bool:
    """A user message a person wrote (text, or text and images), not the tool results the loop sends."""
    content = message.get("content")
    return message.get("role") == "user" and (
        isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content or ()))


def tool_result_images(block: dict) -> list[dict]:
    """The image blocks a tool_result carries, under ``images`` or among its content."""
    content = block.get("content")
    inline = [b for b in content if b.get("type") == "image"] if isinstance(content, list) else []
    return [*(block.get("images") or ()), *inline]


def tool_result_text(block: dict) -> str:
    """The text a tool_result gave the model (its text parts, when its content is a list)."""
    content = block.get("content")
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return "" if content is None else str(content)


def image_placeholder(block: dict) -> str:
    """One line standing for an image where it cannot be shown: ``[image: image/png, 12.3 kB]``."""
    data = block.get("data") if isinstance(block.get("data"), str) else ""
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return f"[image: {block.get('media_type', 'unknown type')}, {size / 1000:.1f} kB]"


def _image(block: dict) -> images.Image | None:
    try:
        return images.Image.from_block(block)
    except (TypeError, ValueError, KeyError):  # not one of the raster types a model reads
        return None


def image_html(block: dict) -> str:
    """An image block as an inline ``data:`` thumbnail (nothing is fetched); a placeholder line
    when it is not one of the raster types a model reads."""
    image = _image(block)
    return _thumbnails([image]) if image else f'<div style="{MUTED_STYLE}">{esc(image_placeholder(block))}</div>'


def _prompt_html(content: Any) -> str:
    """A prompt: its text, and its images inline where it has them."""
    parts = []
    for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
        if block.get("type") == "image":
            parts.append(image_html(block))
        else:
            parts.append(f'<div style="{TEXT_STYLE}">{esc(block.get("text", ""))}</div>')
    return "".join(parts)


def folded_html(label: str, text: str) -> str:
    """``text`` as preformatted text, folded under ``label``."""
    return (f'<details style="{_DETAILS}"><summary style="{_SUMMARY}">{esc(label)}</summary>'
            f'<pre style="{_PRE}">{esc(text)}</pre></details>')


def thinking_html(text: str) -> str:
    """A thinking block, folded."""
    return folded_html("thinking", text)


def _refusals(messages: list[dict], results: list[Any]) -> dict[int, str]:
    """Where the refused answers are: the position of each refused turn's last assistant message,
    with why in a person's words. ``results`` are the last turns in order, one per prompt from
    the end (a run may continue an earlier transcript; a loaded session may hold fewer results
    than turns)."""
    prompts = [i for i, m in enumerate(messages) if is_prompt(m)] + [len(messages)]
    spans = list(zip(prompts, prompts[1:]))
    found = {}
    for (start, end), result in zip(reversed(spans), reversed(results)):
        if result is not None and result.refused():
            last = max((i for i in range(start, end) if messages[i].get("role") == "assistant"), default=None)
            if last is not None:
                found[last] = result.why()
    return found


def _refusal_html(why: str, content: Any) -> str:
    """A refused answer: what it is, never shown as the answer; the model's words folded below."""
    text = tool_result_text({"content": content})  # a message's text the same way as a tool result's
    folded = folded_html("what the model wrote", text) if text.strip() else ""
    return (f'<div style="{_ROLE}">Agent</div><div class="bettong-refusal" style="{MUTED_STYLE};color:{ERROR_COLOUR};'
            f'opacity:1">{esc(why)}</div>{folded}')


def _messages_html(messages: list[dict], calls: list[Any], *, turn_marks: bool = False,
                   refusals: dict[int, str] | None = None) -> list[str]:
    results = tool_results(messages)
    meta = {c.id: c for c in calls if getattr(c, "id", "")}
    out: list[str] = []
    turn = 0
    for position, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if position in (refusals or {}):
            out.append(_refusal_html(refusals[position], content))
        elif role == "system":
            out.append(folded_html("system prompt", content))
        elif is_prompt(message):
            turn += 1
            label = f"You · turn {turn}" if turn_marks else "You"
            out.append(f'<div style="{_ROLE}">{label}</div>{_prompt_html(content)}')
        elif role == "assistant" and isinstance(content, list):
            for block in content:
                kind = block.get("type")
                if kind == "text" and block.get("text"):
                    out.append(f'<div style="{_ROLE}">Agent</div>{answer_html(block["text"])}')
                elif kind == "thinking" and block.get("text"):
                    out.append(thinking_html(block["text"]))
                elif kind == "tool_use":
                    out.append(_recorded_tool(block, results.get(block.get("id")), meta.get(block.get("id"))))
        elif role == "assistant" and isinstance(content, str) and content:
            out.append(f'<div style="{_ROLE}">Agent</div>{answer_html(content)}')
    return out


def recorded_call(block: dict, result: dict | None, call: ToolCall | None) -> ToolCall:
    """The ToolCall of a transcript's tool_use block: the run's own record when there is one, else
    what the messages say (a transcript handed in by the user)."""
    if call is not None:
        return call
    status = "ok" if result is not None and not result.get("is_error") else ("error" if result else "not run")
    pictures = [image for b in tool_result_images(result or {}) if (image := _image(b)) is not None]
    return ToolCall(block.get("name", "?"), None, block.get("input"), id=block.get("id", ""), status=status,
                    result=None if result is None else tool_result_text(result), images=pictures)


def _recorded_tool(block: dict, result: dict | None, call: ToolCall | None) -> str:
    return tool_block(recorded_call(block, result, call))


def _wrap(parts: list[str], footer: str) -> str:
    return (f'<div class="bettong-transcript" style="{BOX_STYLE}">{"".join(parts)}'
            f'<div class="bettong-usage" style="{_FOOTER}">{footer}</div></div>')


def answer_html(text: str) -> str:
    """The model's text in a transcript, as the live view shows it: Markdown rendered by the
    real parser, then allow-listed (:func:`bettong_nb.sanitize.markdown_html`): no raw HTML, no
    image but inline data, no script links; nothing the browser would fetch or run."""
    return f'<div class="bettong-markdown" style="{PROSE_STYLE};overflow-wrap:anywhere">{markdown_html(text)}</div>'


def result_html(result: Any) -> str:
    """A RunResult as an HTML transcript: prompt, answers, tool calls, and a usage line."""
    # result.messages may continue an earlier transcript: the refusal is in this run's last turn
    parts = _messages_html(result.messages, result.tool_calls, refusals=_refusals(result.messages, [result]))
    footer = esc(result.usage_line())
    if not result.done or result.refused():
        footer = f'<span style="color:{ERROR_COLOUR}">{esc(result.why())}</span> · {footer}'
    return _wrap(parts, footer)


def session_html(session: Any) -> str:
    """A Session as an HTML transcript of all its turns, with the usage of all of them."""
    parts = [f'<div style="{MUTED_STYLE}">Session · {session.turns} turn{"" if session.turns == 1 else "s"}</div>']
    parts += _messages_html(session.transcript, session.tool_calls, turn_marks=True,
                            refusals=_refusals(session.transcript, session.results))
    if not session.transcript:
        parts.append(f'<div style="{MUTED_STYLE}">(no turns yet)</div>')
    return _wrap(parts, esc(session.usage_line()))
