"""Exports: a session or a run as a file to read or share, in the format its extension names.

    chat.export("chat.md")       # Markdown: the transcript, tool calls as nested lists
    chat.export("chat.html")     # one self-contained page: the notebook's own transcript HTML
    chat.export("chat.ipynb")    # a notebook: a Markdown cell per turn, tool calls as outputs under it
    result.export("run.json")    # the saved-session JSON (session.save), loadable with load_session

Every export is made from what a save would write (:mod:`bettong_nb.saving`): secrets redacted,
DataFrames left out. Nothing in one is fetched from anywhere: images are inline (``data:`` in
HTML, attachments and image outputs in a notebook; a placeholder line in Markdown), the page
carries its styles and a Content-Security-Policy that lets it load nothing else.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.images import MEDIA_TYPES
from ..safety.sanitize import markdown_code, markdown_fence, markdown_literal, markdown_text
from .saving import FORMAT, Saved, save, snapshot, write_text
from ..core.usage import duration_text
from .terminal import args_preview, call_line, json_text
from .transcript_html import (image_placeholder, is_prompt, recorded_call, result_html, session_html, thinking_html,
                              tool_block, tool_result_images, tool_results)

__all__ = ["export", "markdown", "html_page", "notebook", "FORMATS"]


# --- the conversation, turn by turn -------------------------------------------------------------

def _turns(messages: list[dict]) -> tuple[str | None, list[list[dict]]]:
    """The system prompt, and the messages after it grouped by turn (each from a prompt on)."""
    system = messages[0].get("content") if messages and messages[0].get("role") == "system" else None
    groups: list[list[dict]] = []
    for message in messages[0 if system is None else 1:]:
        if is_prompt(message) or not groups:
            groups.append([])
        groups[-1].append(message)
    return system, groups


def _items(group: list[dict], saved: Saved) -> Iterator[tuple[str, Any]]:
    """A turn in order: ("prompt", content), ("text", str), ("thinking", str), ("call", (ToolCall, images))."""
    results = tool_results(saved.transcript)
    calls = {c.id: c for c in saved.tool_calls if c.id}
    for message in group:
        content = message.get("content")
        if is_prompt(message):
            yield "prompt", content
        elif message.get("role") == "assistant":
            for block in ([{"type": "text", "text": content}] if isinstance(content, str) else content or ()):
                kind = block.get("type")
                if kind in ("text", "thinking") and block.get("text"):
                    yield kind, block["text"]
                elif kind == "tool_use":
                    result = results.get(block.get("id"))
                    images = tool_result_images(result) if result is not None else []
                    yield "call", (recorded_call(block, result, calls.get(block.get("id"))), images)


def _title(saved: Saved) -> str:
    if saved.kind == "result":
        return "bettong_nb run"
    return f"bettong_nb session · {saved.turns} turn{'' if saved.turns == 1 else 's'}"


def _turn_line(result: Any, saved: Saved) -> str:
    """The turn's usage, after why it stopped early when it did, in italics."""
    line = result.usage_line(saved.prices)
    if not result.done:
        line = f"stopped early: {result.why()} · {line}"
    return f"*{_one_line(line)}*"


# --- Markdown -----------------------------------------------------------------------------------
# Whatever a model, a tool or a saved file wrote goes through sanitize's Markdown writers, so no
# viewer of the file fetches an image or follows a script link it holds.

def _one_line(value: Any) -> str:
    """``value`` as Markdown text on one line, shown as written."""
    return markdown_literal(" ".join(str(value).split()))


def _fenced(text: str, language: str = "", indent: str = "") -> list[str]:
    """``text`` in a code fence no line of it can close, each line indented."""
    return [f"{indent}{line}" for line in markdown_fence(text, language).split("\n")]


def _prompt_markdown(content: Any) -> list[str]:
    if isinstance(content, str):
        return [markdown_text(content)]
    return [_one_line(image_placeholder(b)) if b.get("type") == "image" else markdown_text(b.get("text", ""))
            for b in content]


def _call_markdown(call: Any, images: list[dict]) -> list[str]:
    head = f"- {markdown_code(f'{call.tool}({args_preview(call.args)})')} → {_one_line(call.status)}"
    if call.redactions:
        head += f" · {call.redactions} redacted"
    if call.duration_s is not None and call.status in ("ok", "error"):
        head += f" · {duration_text(call.duration_s)}"
    lines = [head, *([f"  - capability: {_one_line(call.capability)}"] if call.capability else []),
             "  - arguments:", "", *_fenced(json_text(call.args, indent=2), "json", "    ")]
    if call.why():
        lines.append(f"  - reason: {_one_line(call.why())}")
    if call.result is not None:
        lines += ["  - result:", "", *_fenced(call.result, "text", "    ")]
    return lines + [f"  - {_one_line(image_placeholder(b))}" for b in images]


def _thinking_markdown(text: str) -> list[str]:
    """A thinking block as a block quote."""
    return [f"> {line}" if line else ">" for line in f"*thinking:*\n\n{markdown_text(text)}".split("\n")]


def markdown(saved: Saved) -> str:
    """The conversation as Markdown: each turn's prompt and answers, tool calls as nested lists
    (arguments and result fenced), images as a placeholder line."""
    system, groups = _turns(saved.transcript)
    lines = [f"# {_title(saved)}", "", _one_line(saved.usage_line()), ""]
    if system is not None:
        lines += ["<details><summary>System prompt</summary>", "", *_fenced(system, "text"), "", "</details>", ""]
    for number, group in enumerate(groups, 1):
        lines += [f"## Turn {number}", ""]
        for kind, value in _items(group, saved):
            if kind == "prompt":
                lines += ["**You**", "", *_prompt_markdown(value), ""]
            elif kind == "text":
                lines += ["**Agent**", "", markdown_text(value), ""]
            elif kind == "thinking":
                lines += [*_thinking_markdown(value), ""]
            else:
                lines += [*_call_markdown(*value), ""]
        result = saved.by_turn.get(number)
        if result is not None:
            lines += [_turn_line(result, saved), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- HTML ---------------------------------------------------------------------------------------

# The page may load nothing: not a script, not a font, not an image that is not inline.
_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def html_page(saved: Saved) -> str:
    """One self-contained page holding the transcript HTML the notebook shows."""
    body = session_html(saved) if saved.kind == "session" else result_html(saved.results[-1])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(_title(saved))}</title>\n"
            "<style>:root{color-scheme:light dark}body{max-width:60em;margin:2em auto;padding:0 1em}</style>\n"
            f"</head>\n<body>\n{body}\n</body>\n</html>\n")


# --- notebook -----------------------------------------------------------------------------------

def _markdown_cell(cell_id: str, lines: list[str], attachments: dict | None = None) -> dict:
    cell = {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": "\n".join(lines).strip("\n")}
    if attachments:
        cell["attachments"] = attachments
    return cell


def _image_output(block: dict) -> dict:
    data = {"text/plain": image_placeholder(block)}
    if block.get("media_type") in MEDIA_TYPES and isinstance(block.get("data"), str):
        data[block["media_type"]] = block["data"]
    return {"output_type": "display_data", "data": data, "metadata": {}}


def _turn_cells(number: int, group: list[dict], saved: Saved) -> list[dict]:
    """A Markdown cell (prompt and answers) and, when the turn ran tools, a code cell with an empty
    source whose outputs are its tool calls (Jupyter never runs an empty cell, so they stay)."""
    lines, attachments, outputs = [f"## Turn {number}", ""], {}, []
    for kind, value in _items(group, saved):
        if kind == "prompt":
            lines += ["**You**", ""]
            for block in [{"type": "text", "text": value}] if isinstance(value, str) else value:
                if block.get("type") == "image" and block.get("media_type") in MEDIA_TYPES:
                    name = f"image-{len(attachments) + 1}.{block['media_type'].split('/')[1]}"
                    attachments[name] = {block["media_type"]: block["data"]}
                    lines += [f"![{image_placeholder(block)}](attachment:{name})", ""]
                elif block.get("type") == "image":
                    lines += [_one_line(image_placeholder(block)), ""]
                else:
                    lines += [markdown_text(block.get("text", "")), ""]
        elif kind == "text":
            lines += ["**Agent**", "", markdown_text(value), ""]
        elif kind == "thinking":
            outputs.append({"output_type": "display_data", "metadata": {},
                            "data": {"text/html": thinking_html(value), "text/plain": f"thinking: {value}"}})
        else:
            call, images = value
            outputs.append({"output_type": "display_data", "metadata": {},
                            "data": {"text/html": tool_block(call), "text/plain": call_line(call)}})
            outputs += [_image_output(b) for b in images]
    result = saved.by_turn.get(number)
    if result is not None:
        lines.append(_turn_line(result, saved))
    cells = [_markdown_cell(f"turn-{number}", lines, attachments)]
    if outputs:
        cells.append({"cell_type": "code", "id": f"turn-{number}-tools", "execution_count": None, "source": "",
                      "metadata": {"jupyter": {"source_hidden": True}, "tags": ["bettong-tool-calls"]},
                      "outputs": outputs})
    return cells


def notebook(saved: Saved) -> str:
    """The conversation as a notebook (nbformat 4.5): a heading cell with the usage and the
    system prompt, then per turn a Markdown cell and its tool calls as collapsible outputs."""
    system, groups = _turns(saved.transcript)
    head = [f"# {_title(saved)}", "", _one_line(saved.usage_line())]
    if system is not None:
        head += ["", "<details><summary>System prompt</summary>", "", *_fenced(system, "text"), "", "</details>"]
    cells = [_markdown_cell("conversation", head)]
    for number, group in enumerate(groups, 1):
        cells += _turn_cells(number, group, saved)
    document = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                             "language_info": {"name": "python"}, "bettong_nb": {"format": FORMAT, "kind": saved.kind}}}
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


# --- by extension -------------------------------------------------------------------------------

FORMATS: dict[str, Callable[[Saved], str]] = {".md": markdown, ".html": html_page, ".ipynb": notebook}


def export(target: Any, path: str | os.PathLike) -> Path:
    """Write a Session or a RunResult to ``path`` in the format its extension names (``.md``,
    ``.html``, ``.ipynb``, ``.json``); returns the path."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return save(target, path)
    if suffix not in FORMATS:
        known = ", ".join([*FORMATS, ".json"])
        raise ValueError(f"Cannot export to {os.fspath(path)!r}: its extension names the format, one of {known}")
    return write_text(path, FORMATS[suffix](snapshot(target)))
