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

import base64
import binascii
import contextvars
import dataclasses
import errno
import json
import math
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

from ..core import capability as cap
from ..safety import secrets
from ..core.images import Image, ImageError, check_decodes
from ..http.json_body import MAX_DEPTH, depth_within
from ..core.options import Options
from ..core.results import Ledger, RunResult, ToolCall
from ..core.session import Session
from .transcript_html import tool_result_images, tool_results
from ..core.usage import RequestRecord, Usage

__all__ = ["load_session", "FORMAT", "VERSION", "ResumeError", "Saved", "document", "redacted_document", "snapshot", "save", "parse",
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


def redacted_document(target: Any) -> dict:
    """:func:`document`, every string redacted, and ``transcript_redactions``: how many stretches
    of the transcript were (the next turn after a load then differs from what the provider
    cached). A fresh context: ``secrets.revealed()`` around a save does not turn redaction off
    for the disk."""
    doc, extra, context = document(target), _secret_values(target), contextvars.Context()
    out, counts = {}, {}
    for key, value in doc.items():
        out[key], counts[key] = context.run(secrets.redact_data, value, extra=extra)
    return {**out, "transcript_redactions": counts["transcript"]}


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a crash mid-write leaves the old file)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a folder: name a file in it", str(path))
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:  # said of the user's path, not of the temporary file beside it
        raise type(error)(error.errno, error.strerror, str(path)) from None
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


# What a file must hold to be resumed: checked whole at load, so a hand-edited or damaged file is
# one clear ResumeError naming the place, never a traceback at load or at the next turn.

class _Damaged(Exception):
    """Where a document departs from the format, and how."""


_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "None": type(None), "list": list,
          "dict": dict}
_TURN = {"turn": "int", "messages": "int", "output": "str | None", "done": "bool", "steps": "int",
         "stop_reason": "str | None", "reason": "str | None", "redactions": "int", "usage": "Usage"}
_ROLES = ("system", "user", "assistant")


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return f"{type(value).__name__} {text[:40]}{'…' if len(text) > 40 else ''}"


def _is(value: Any, kind: str) -> bool:
    if kind == "Any":
        return True
    if kind == "Usage":
        return isinstance(value, dict) and all(_is(value.get(f.name, 0), "int") and value.get(f.name, 0) >= 0
                                               for f in dataclasses.fields(Usage))
    if isinstance(value, bool) and kind != "bool":  # JSON's true is no number
        return False
    if kind == "float" and isinstance(value, float) and not math.isfinite(value):  # 1e400 reads as inf
        return False
    if kind == "int" and isinstance(value, int) and abs(value) > 2 ** 53:  # beyond what JSON readers agree on
        return False
    return isinstance(value, _TYPES[kind])


def _want(value: Any, kinds: str, at: str) -> Any:
    """``value`` when it is of one of ``kinds`` ("str | None"), else _Damaged naming ``at``."""
    if not any(_is(value, kind.strip()) for kind in kinds.split("|")):
        wanted = kinds.replace(" | ", " or ").replace("None", "null").replace("Usage", "token counts (whole numbers)")
        raise _Damaged(f"{at} should be {wanted}, not {_shown(value)}")
    return value


def _record(value: Any, fields: Mapping[str, str], at: str, optional: Iterable[str] = ()) -> None:
    """``value`` an object whose ``fields`` (name: kinds) are present (bar ``optional``) and of their kinds."""
    _want(value, "dict", at or "the file")
    for name, kinds in fields.items():
        if name in value:
            _want(value[name], kinds, f"{at}.{name}" if at else name)
        elif name not in optional:
            raise _Damaged(f"{at or 'the file'} has no {name!r}")


def _dataclass_record(value: Any, cls: type, at: str, skip: Iterable[str] = ()) -> None:
    """``value`` a record of dataclass ``cls``: its fields' annotations are the kinds."""
    fields = [f for f in dataclasses.fields(cls) if f.name not in skip]
    optional = [f.name for f in fields
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
    _record(value, {f.name: str(f.type) for f in fields}, at, optional)


def _check_image(block: Any, at: str) -> None:
    _record(block, {"media_type": "str", "data": "str"}, at)
    try:
        image = Image(base64.b64decode(block["data"], validate=True), block["media_type"])
    except (binascii.Error, ValueError) as error:  # ImageError is a ValueError
        raise _Damaged(f"{at} is not an image's base64 ({error})") from None
    try:  # decoded now, not at the next request: a damaged image or a pixel bomb is refused here
        check_decodes(image)
    except ImageError as error:
        raise _Damaged(f"{at} is not an image that can be sent: {error}") from None


def _check_block(block: Any, at: str, tool_uses: set[str]) -> None:
    _want(block, "dict", at)
    kind = _want(block.get("type"), "str", f"{at}.type")
    if "raw" in block:
        _want(block["raw"], "dict", f"{at}.raw")
    if kind in ("text", "thinking"):
        _record(block, {"text": "str"}, at)
    elif kind == "image":
        _check_image(block, at)
    elif kind == "tool_use":
        _record(block, {"id": "str", "name": "str", "input": "Any"}, at)
        if not block["id"] or not block["name"]:
            raise _Damaged(f"{at} has an empty id or name")
        tool_uses.add(block["id"])
    elif kind == "tool_result":
        _record(block, {"tool_use_id": "str", "content": "str", "is_error": "bool", "images": "list"}, at,
                optional=("is_error", "images"))
        if block["tool_use_id"] not in tool_uses:
            raise _Damaged(f"{at} answers tool call {block['tool_use_id']!r}, which no earlier message made")
        for i, image in enumerate(block.get("images") or ()):
            _check_image(image, f"{at}.images[{i}]")
    elif kind != "other":  # what the Anthropic provider keeps as it came (its raw), to echo back
        raise _Damaged(f"{at}.type is {kind!r}, not a block type of a transcript")


def _check_transcript(transcript: Any) -> None:
    _want(transcript, "list", "transcript")
    if not transcript or not isinstance(transcript[0], dict) or transcript[0].get("role") != "system":
        raise _Damaged("transcript does not start with the system message")
    tool_uses: set[str] = set()
    for i, message in enumerate(transcript):
        at = f"transcript[{i}]"
        _record(message, {"role": "str", "content": "str | list"}, at)
        if message["role"] not in _ROLES or (message["role"] == "system") != (i == 0):
            raise _Damaged(f"{at}.role is {message['role']!r}; a transcript has one system message, first, then "
                           "user and assistant messages")
        if i == 0 and not isinstance(message["content"], str):
            raise _Damaged(f"{at}.content (the system prompt) should be str, not {_shown(message['content'])}")
        for j, block in enumerate(message["content"] if isinstance(message["content"], list) else ()):
            _check_block(block, f"{at}.content[{j}]", tool_uses)


def _check(doc: dict) -> None:
    """Everything :func:`parse` and the next turn read, of the kind they read it as."""
    if doc.get("kind") not in ("session", "result"):
        raise _Damaged(f"kind should be \"session\" or \"result\", not {_shown(doc.get('kind'))}")
    _check_transcript(doc.get("transcript"))
    _record(doc, {"turns": "list", "requests": "list", "tool_calls": "list", "usage": "Usage",
                  "tools": "list | None", "options": "dict | None", "provider": "dict | None",
                  "capabilities": "list | None", "transcript_redactions": "int"}, "",
            optional=("tools", "options", "provider", "capabilities", "transcript_redactions"))
    for i, tool in enumerate(doc.get("tools") or ()):
        _record(tool, {"name": "str", "parameters": "dict", "description": "str | None"}, f"tools[{i}]",
                optional=("description",))
    for i, name in enumerate(doc.get("capabilities") or ()):
        _want(name, "str", f"capabilities[{i}]")
    _want((doc.get("options") or {}).get("prices"), "dict | None", "options.prices")
    for i, turn in enumerate(doc["turns"]):
        _record(turn, _TURN, f"turns[{i}]")
        if not 1 <= turn["turn"] or not 0 <= turn["messages"] <= len(doc["transcript"]):
            raise _Damaged(f"turns[{i}] counts turn {turn['turn']} or {turn['messages']} messages, which the "
                           f"transcript ({len(doc['transcript'])} messages) does not hold")
    for i, request in enumerate(doc["requests"]):
        _dataclass_record(request, RequestRecord, f"requests[{i}]")
    for i, call in enumerate(doc["tool_calls"]):
        _dataclass_record(call, ToolCall, f"tool_calls[{i}]", skip=("data", "images"))


# The levels of a session document around a model's JSON (tool arguments in a message's content
# in the transcript), which a provider's answer already keeps within MAX_DEPTH.
_FRAME_DEPTH = 10


def parse(doc: Any, where: str) -> Saved:
    """A saved document as a :class:`Saved`; ResumeError when it is not one this version reads,
    naming the first place where it departs from the format."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResumeError(f"{where} is not a saved bettong_nb session (no \"format\": \"{FORMAT}\" in it); "
                          "save one with session.save(path)")
    version = doc.get("version")
    if not _is(version, "int") or not 1 <= version <= VERSION:
        raise ResumeError(f"{where} was saved in session format version {_shown(version)}; this bettong_nb reads "
                          f"versions 1 to {VERSION}" + (": upgrade bettong_nb to load it"
                                                        if _is(version, "int") and version > VERSION else ""))
    if not depth_within(doc, MAX_DEPTH + _FRAME_DEPTH):
        raise ResumeError(f"{where} is a damaged session file: it nests deeper than {MAX_DEPTH + _FRAME_DEPTH} "
                          "levels, which no session does (and it could not be saved again)")
    try:
        _check(doc)
    except _Damaged as error:
        raise ResumeError(f"{where} is a damaged session file: {error}") from None
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
        number = turn["turn"]
        by_turn[number] = RunResult(
            turn["output"], turn["steps"], [c for c in calls if c.turn == number],
            transcript[:turn["messages"]], _usage_from(turn["usage"]), turn["done"],
            [r for r in requests if r.turn == number], turn["redactions"], turn["stop_reason"], turn["reason"],
            prices=options.get("prices"))
    return Saved(doc["kind"], transcript, by_turn, requests, calls, _usage_from(doc["usage"]),
                 max(by_turn, default=0), doc.get("tools"), options.get("prices"), options, doc.get("provider"),
                 list(doc.get("capabilities") or ()), doc.get("transcript_redactions", 0))


def read(path: str | os.PathLike) -> Saved:
    """A saved session file, checked: ResumeError when it is not one, or is of a newer version."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResumeError(f"{os.fspath(path)} is not a saved bettong_nb session (not JSON: {error})") from None
    except RecursionError:
        raise ResumeError(f"{os.fspath(path)} is not a saved bettong_nb session (its JSON is nested deeper than "
                          "a session's ever is)") from None
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


def load_session(path: str | os.PathLike, agent: Any) -> Session:
    """Resume a saved conversation on ``agent`` (an Agent; or a Session, whose conversation it
    replaces). Its capabilities must provide every tool the transcript used. The next turn starts
    with the saved system prompt and transcript, byte for byte, so the provider's cache holds."""
    saved = read(path)
    session = agent if isinstance(agent, Session) else (
        agent.session() if hasattr(agent, "session") else Session(agent))
    why = missing_tools(saved, session.options.capabilities)
    if why is not None:
        raise ResumeError(f"{os.fspath(path)} {why}")
    return session.restore(saved)
