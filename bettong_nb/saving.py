"""Saving a conversation to one JSON file, and resuming it on an agent.

    chat.save("chat.json")                                   # a Session (or result.export("run.json"))
    chat = bettong_nb.load_session("chat.json", agent)       # continues where it stopped
    chat.run("And then?")                                    # on the cached prefix of the saved turns

The file holds the transcript exactly as it was sent (so the next turn starts with the bytes the
provider cached), one record per turn (answer, usage, why it stopped), every model request
(``usage.RequestRecord``), every tool call with its status and duration (``results.ToolCall``),
the tools the cached prefix holds, the options that are plain data, the capabilities by id and
the provider by name, model and base URL.

Never saved: the API key or any other secret (every string is redacted with
:mod:`bettong_nb.secrets`, plus the values the provider and the capabilities hold, even inside
``secrets.revealed()``; the transcript too, though the provider cached it unredacted: the file
counts those stretches in ``transcript_redactions`` and the resumed session's first turn warns
that it misses the cache), callables (``approve_fn``, ``on_event``), option values that are not
plain data, capabilities beyond their ids, and the DataFrames tools handed back
(``ToolCall.data``: the call says ``"data": "not saved (DataFrame)"``). ``not_saved`` in the file
lists them. Images in the transcript are kept, as their base64.

``load_session`` runs the next turns with the agent you pass and its own options; the file's
options and provider record what the conversation ran with.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

from . import capability as cap
from . import secrets
from .images import Image
from .options import Options
from .results import Ledger, RunResult, ToolCall
from .transcript_html import tool_result_images, tool_results
from .usage import RequestRecord, Usage

__all__ = ["FORMAT", "VERSION", "ResumeError", "Saved", "document", "redacted_document", "snapshot", "save", "parse",
           "read", "write_text", "missing_tools"]

FORMAT = "bettong_nb.session"
VERSION = 1

# Never written: a secret, objects and callables; the transcript and the capabilities' ids are
# saved on their own.
_NOT_OPTIONS = ("api_key", "provider", "approve_fn", "on_event", "messages", "capabilities")
_ALWAYS_LEFT_OUT = ["api_key and every other secret", "approve_fn", "on_event",
                    "provider (saved: its name, model and base_url)", "capabilities (saved: their ids)",
                    "tool call data (DataFrames tools handed back)"]


class ResumeError(ValueError):
    """A saved session that cannot be resumed: not a session file, a newer format, or tools the
    agent does not have."""


@dataclass
class Saved(Ledger):
    """A saved conversation read back: what a Session is restored from and exports render.
    It reads like a Session (``transcript``, ``tool_calls``, ``usage``, ``turns``, ``prices``,
    and the Ledger's cost, frames and usage line)."""

    kind: str  # "session" or "result"
    transcript: list[dict]
    by_turn: dict[int, RunResult]
    requests: list[RequestRecord]
    tool_calls: list[ToolCall]
    usage: Usage
    turns: int
    tools: list[dict] | None
    prices: Mapping[str, Any] | None
    options: dict
    provider: dict | None
    capabilities: list[str]
    transcript_redactions: int = 0  # stretches of the transcript the save redacted

    @property
    def results(self) -> list[RunResult]:
        return list(self.by_turn.values())


# --- writing ------------------------------------------------------------------------------------

def _public_url(url: str) -> str:
    """A URL without what may hold a credential (user:password@, the query, the fragment)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _options(options: Options) -> tuple[dict, list[str]]:
    """The options that are plain data, and the names of those that are not."""
    saved, left_out = {}, []
    for field in dataclasses.fields(Options):
        if field.name in _NOT_OPTIONS:
            continue
        value = getattr(options, field.name)
        if field.name == "base_url" and isinstance(value, str):
            value = _public_url(value)
        if _plain(value):
            saved[field.name] = value
        else:
            left_out.append(field.name)
    return saved, left_out


def _provider(provider: Any) -> dict | None:
    if provider is None:
        return None
    found = {"name": getattr(provider, "name", None), "type": type(provider).__name__,
             "model": getattr(provider, "model", None), "base_url": getattr(provider, "base_url", None)}
    found = {k: v for k, v in found.items() if isinstance(v, str)}
    if "base_url" in found:
        found["base_url"] = _public_url(found["base_url"])
    return found


def _usage(u: Usage) -> dict:
    return dataclasses.asdict(u)


def _call(call: ToolCall) -> dict:
    # its images are in the transcript's tool_result block already; they come back from there
    record = {f.name: getattr(call, f.name) for f in dataclasses.fields(ToolCall) if f.name not in ("data", "images")}
    if call.data is not None:
        record["data"] = f"not saved ({type(call.data).__name__})"
    return record


def _request(record: RequestRecord) -> dict:
    return {**{f.name: getattr(record, f.name) for f in dataclasses.fields(RequestRecord)},
            "usage": _usage(record.usage)}


def _turn(number: int, result: RunResult) -> dict:
    return {"turn": number, "messages": len(result.messages), "output": result.output, "done": result.done,
            "steps": result.steps, "stop_reason": result.stop_reason, "reason": result.reason,
            "redactions": result.redactions, "usage": _usage(result.usage),
            "error": None if result.error is None else f"{type(result.error).__name__}: {result.error}"}


def _result_turn(result: RunResult) -> int:
    return next((r.turn for r in result.requests), None) or next((c.turn for c in result.tool_calls), 1)


def document(target: Any) -> dict:
    """The JSON-able record of a Session or a RunResult, not yet redacted (see :func:`snapshot`)."""
    if isinstance(target, RunResult):
        number = _result_turn(target)
        body = {"kind": "result", "provider": None, "options": {"prices": target.prices}, "capabilities": [],
                "tools": None, "transcript": target.messages, "turns": [_turn(number, target)]}
        left_out = []
    else:
        options, left_out = _options(target.options)
        capabilities = target.options.capabilities
        first = target.turns - len(target.results) + 1
        body = {"kind": "session", "provider": _provider(target.provider), "options": options,
                "capabilities": [str(cap.capability_id(c)) for c in capabilities], "tools": target.tools,
                "transcript": target.transcript,
                "turns": [_turn(first + i, r) for i, r in enumerate(target.results)]}
    return {"format": FORMAT, "version": VERSION, "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **body, "requests": [_request(r) for r in target.requests],
            "tool_calls": [_call(c) for c in target.tool_calls], "usage": _usage(target.usage),
            "not_saved": [*_ALWAYS_LEFT_OUT, *(f"option {name} (not plain data)" for name in left_out)]}


def _secret_values(target: Any) -> list[str]:
    """What the session's provider and capabilities hold (redact() adds what agents in this
    process held)."""
    holders = [] if isinstance(target, RunResult) else [target.provider, *target.options.capabilities]
    return secrets.values_held_by(holders)


def _redacted(value: Any, extra: list[str], context: contextvars.Context, tally: list[int]) -> Any:
    """``value`` with every string in it redacted, keys too (``tally[0]`` counts the stretches
    replaced); image bytes (base64) are not text and are left as they are."""
    if isinstance(value, str):
        text, count = context.run(secrets.redact, value, extra=extra)
        tally[0] += count
        return text
    if isinstance(value, Mapping):
        if value.get("type") == "image" and isinstance(value.get("data"), str):
            return {k: v if k == "data" else _redacted(v, extra, context, tally) for k, v in value.items()}
        return {_redacted(str(k), extra, context, tally): _redacted(v, extra, context, tally) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, extra, context, tally) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _redacted(str(value), extra, context, tally)  # anything else is written as its text: redact that


def redacted_document(target: Any) -> dict:
    """:func:`document`, every string redacted, and ``transcript_redactions``: how many stretches
    of the transcript were (the next turn after a load then differs from what the provider
    cached). A fresh context: ``secrets.revealed()`` around a save does not turn redaction off
    for the disk."""
    doc, extra, context = document(target), _secret_values(target), contextvars.Context()
    tallies = {key: [0] for key in doc}
    out = {key: _redacted(value, extra, context, tallies[key]) for key, value in doc.items()}
    return {**out, "transcript_redactions": tallies["transcript"][0]}


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a crash mid-write leaves the old file)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def save(target: Any, path: str | os.PathLike) -> Path:
    """Write a Session or a RunResult to ``path`` as JSON (see the module doc); returns the path."""
    return write_text(path, json.dumps(redacted_document(target), ensure_ascii=False, indent=1) + "\n")


def snapshot(target: Any) -> Saved:
    """What a save of ``target`` would read back as, redacted: what exports render."""
    return parse(redacted_document(target), "the session")


# --- reading ------------------------------------------------------------------------------------

def _usage_from(data: Mapping[str, Any]) -> Usage:
    return Usage(**{f.name: int(data.get(f.name, 0)) for f in dataclasses.fields(Usage)})


def _known(cls: type, data: Mapping[str, Any]) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def parse(doc: Any, where: str) -> Saved:
    """A saved document as a :class:`Saved`; ResumeError when it is not one this version reads."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResumeError(f"{where} is not a saved bettong_nb session (no \"format\": \"{FORMAT}\" in it); "
                          "save one with session.save(path)")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ResumeError(f"{where} was saved in session format version {version!r}; this bettong_nb reads "
                          f"versions up to {VERSION}: upgrade bettong_nb to load it")
    try:
        transcript = list(doc["transcript"])
        requests = [RequestRecord(**{**_known(RequestRecord, r), "usage": _usage_from(r["usage"])})
                    for r in doc["requests"]]
        results = tool_results(transcript)
        calls = [ToolCall(**{**_known(ToolCall, c), "data": None,
                             "images": [Image.from_block(b) for b in tool_result_images(results.get(c["id"]) or {})]})
                 for c in doc["tool_calls"]]
        options = dict(doc.get("options") or {})
        by_turn = {}
        for turn in doc["turns"]:
            number = int(turn["turn"])
            by_turn[number] = RunResult(
                turn["output"], turn["steps"], [c for c in calls if c.turn == number],
                transcript[:turn["messages"]], _usage_from(turn["usage"]), turn["done"],
                [r for r in requests if r.turn == number], turn["redactions"], turn["stop_reason"], turn["reason"],
                prices=options.get("prices"))
        return Saved(doc["kind"], transcript, by_turn, requests, calls, _usage_from(doc["usage"]),
                     max(by_turn, default=0), doc.get("tools"), options.get("prices"), options, doc.get("provider"),
                     list(doc.get("capabilities") or ()), int(doc.get("transcript_redactions") or 0))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ResumeError(f"{where} is a damaged session file ({type(error).__name__}: {error})") from None


def read(path: str | os.PathLike) -> Saved:
    """A saved session file, checked: ResumeError when it is not one, or is of a newer version."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResumeError(f"{os.fspath(path)} is not a saved bettong_nb session (not JSON: {error})") from None
    return parse(doc, os.fspath(path))


def _used_tools(transcript: list[dict]) -> list[str]:
    return list(dict.fromkeys(b["name"] for m in transcript if m.get("role") == "assistant"
                              and isinstance(m.get("content"), list) for b in m["content"]
                              if b.get("type") == "tool_use" and isinstance(b.get("name"), str)))


def _offered(capabilities: Any, registry: Mapping[str, cap.RegisteredTool]) -> str:
    """``fs (read_file, list_dir); sql (query)``: what an agent's capabilities give it."""
    named = []
    for capability in capabilities:
        cid = cap.capability_id(capability)
        tools = [t.name for t in registry.values() if t.capability == cid]
        named.append(f"{cid} ({', '.join(tools) or 'no tools'})")
    return "; ".join(named) or "none"


def missing_tools(saved: Saved, capabilities: Any) -> str | None:
    """Why ``capabilities`` cannot resume ``saved`` (tools its transcript used that they do not
    provide), or None when they can."""
    offered = cap.registry(capabilities)
    missing = [name for name in _used_tools(saved.transcript) if name not in offered]
    if not missing:
        return None
    before = f" (the conversation had: {', '.join(saved.capabilities)})" if saved.capabilities else ""
    return (f"used tools this agent does not have: {', '.join(missing)}. The agent's capabilities: "
            f"{_offered(capabilities, offered)}. Give it capabilities that provide them{before}.")
