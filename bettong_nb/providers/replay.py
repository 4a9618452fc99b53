"""Record a provider's turns to a cassette; replay them later with no key and no network.

    model = Recording(bettong_nb.deepseek().provider, "cassettes/demo.jsonl")   # live, and write
    model = Replay("cassettes/demo.jsonl")                                      # offline, and read
    model = cassette("cassettes/demo.jsonl")     # the one switch notebooks use (see below)

A cassette is JSON Lines, one turn a line: the neutral request, the response, and for a streamed
turn the deltas in order. Credentials (the wrapped provider's keys and credential-looking values)
are redacted before anything is written. Requests are neutral, so there are no HTTP headers to
leak. An image is stored as the sha256 of its bytes (a cassette stays small, and redaction never
scans image bytes as text); replay matches on that hash. Replay matches an incoming request to a recorded one by its content, not by position; the
same request recorded several times is served in recorded order.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from ..core import events, images
from ..safety import secrets
from ..core.provider import ProviderError, Request, Response
from ..core.usage import Usage

__all__ = ["Recording", "Replay", "ReplayMismatch", "cassette", "LIVE_ENV"]

LIVE_ENV = "BETTONG_LIVE"


class ReplayMismatch(ProviderError):
    """No recorded turn matches the request; the message names the first field that differs."""


def request_data(request: Request) -> dict:
    """The request as a cassette keeps it: each image as the sha256 of its bytes, not the bytes."""
    return {**dataclasses.asdict(dataclasses.replace(request, messages=[])),
            "messages": images.without_bytes(request.messages)}


def _response_data(response: Response) -> dict:
    return {"content": response.content, "stop_reason": response.stop_reason, "model": response.model,
            "usage": dataclasses.asdict(response.usage), "stop_details": response.stop_details}


def _response(data: dict) -> Response:
    return Response(content=data["content"], stop_reason=data["stop_reason"], model=data.get("model"),
                    usage=Usage(**data.get("usage") or {}), stop_details=data.get("stop_details"))


def _key(data: dict) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


_DELTAS = {"text-delta": events.TextDelta, "thinking-delta": events.ThinkingDelta, "tool-use-delta": events.ToolUseDelta}


class Recording:
    """Passes every turn to ``provider`` and appends it to the cassette at ``path``."""

    def __init__(self, provider: Any, path: str | os.PathLike):
        self.provider = provider
        self.path = Path(path)
        self.name = f"recording({getattr(provider, 'name', 'provider')})"
        self.model = getattr(provider, "model", None)

    def secret_values(self) -> list[str]:
        return list(getattr(self.provider, "secret_values", lambda: [])())

    def _write(self, request: Request, response: Response, deltas: list[dict] | None) -> None:
        record: dict[str, Any] = {"request": request_data(request), "response": _response_data(response)}
        # A cassette outlives the session, so it is redacted even inside secrets.revealed():
        # a fresh context has every switch at its default, redaction on.
        redact = contextvars.Context().run
        record, _ = redact(secrets.redact_data, record, extra=self.secret_values())
        if deltas is not None:
            record["stream"] = redact(_redacted_deltas, deltas, self.secret_values())
        line = json.dumps(record, ensure_ascii=False, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    async def complete(self, request: Request) -> Response:
        response = await self.provider.complete(request)
        self._write(request, response, None)
        return response

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        deltas: list[dict] = []

        def record(event: Any) -> None:
            if event.kind in _DELTAS:
                deltas.append({"kind": event.kind, **dataclasses.asdict(event)})
            on_event(event)

        response = await self.provider.stream(request, record)
        self._write(request, response, deltas)
        return response


def _redacted_deltas(deltas: list[dict], extra: list[str]) -> list[dict]:
    """The deltas of one stream, cut from its redacted text: a secret split across deltas
    (``"sk-ab"`` then ``"cd…"``) is caught in the joined text, which no single delta shows."""
    pieces: dict[tuple, list[dict]] = {}
    for delta in deltas:  # each stream of text: the answer, the thinking, each tool call's arguments
        pieces.setdefault((delta["kind"], delta.get("index")), []).append(delta)
    for group in pieces.values():
        field = "arguments" if group[0]["kind"] == "tool-use-delta" else "text"
        text, _ = secrets.redact("".join(d[field] for d in group), extra=extra)
        start = 0
        for number, delta in enumerate(group):  # the same cuts, the last piece takes what is left
            end = len(text) if number == len(group) - 1 else min(len(text), start + len(delta[field]))
            delta[field], start = text[start:end], end
    return deltas


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first place two JSON values differ, or None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}".lstrip(".")
            if (diff := _first_difference(a[k], b[k], f"{path}.{k}")) is not None:
                return diff
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if (diff := _first_difference(x, y, f"{path}[{i}]")) is not None:
                return diff
        return None if len(a) == len(b) else f"{path} (length {len(b)} recorded, {len(a)} now)"
    return None if a == b else path.lstrip(".")


def _similarity(a: dict, b: dict) -> tuple:
    """How alike two requests are: matching messages from the start, then matching fields."""
    prefix = 0
    for x, y in zip(a.get("messages", []), b.get("messages", [])):
        if x != y:
            break
        prefix += 1
    return prefix, sum(a.get(k) == b.get(k) for k in a)


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _lookup(data: Any, path: str) -> Any:
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path.split(" ")[0]):
        try:
            data = data[int(part[1:-1])] if part.startswith("[") else data[part]
        except (KeyError, IndexError, TypeError):
            return "(absent)"
    return data


class Replay:
    """Serves recorded turns for matching requests; deterministic, offline."""

    name = "replay"
    free = True  # no request has a price

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.requests: list[Request] = []
        self._records = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
        self._served: dict[str, int] = {}
        self.model = self._records[0]["response"].get("model") if self._records else None

    def _find(self, request: Request) -> dict:
        self.requests.append(request)
        data = json.loads(json.dumps(request_data(request), ensure_ascii=False))
        key = _key(data)
        matches = [r for r in self._records if _key(r["request"]) == key]
        if matches:
            n = self._served.get(key, 0)
            self._served[key] = n + 1
            return matches[min(n, len(matches) - 1)]
        if not self._records:
            raise ReplayMismatch(f"The cassette {self.path} is empty", provider=self.name)
        index, closest = max(enumerate(self._records), key=lambda r: _similarity(data, r[1]["request"]))
        field = _first_difference(data, closest["request"]) or "(unknown)"
        raise ReplayMismatch(
            f"No recorded turn in {self.path.name} matches this request. The closest (turn {index + 1}) "
            f"differs first at {field}: recorded {_show(_lookup(closest['request'], field))}, "
            f"now {_show(_lookup(data, field))}. Re-record with {LIVE_ENV}=1 and a key set.",
            provider=self.name)

    async def complete(self, request: Request) -> Response:
        return _response(self._find(request)["response"])

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        record = self._find(request)
        response = _response(record["response"])
        if "stream" in record:
            for delta in record["stream"]:
                fields = {k: v for k, v in delta.items() if k != "kind"}
                on_event(_DELTAS[delta["kind"]](**fields))
        else:
            for block in response.content:
                if block["type"] == "text" and block["text"]:
                    on_event(events.TextDelta(block["text"]))
        return response

    def __repr__(self) -> str:
        return f"Replay({str(self.path)!r}, {len(self._records)} turns)"


def cassette(path: str | os.PathLike, *, live: bool | None = None,
             make_live: Callable[[], Any] | None = None, key_env: str = "DEEPSEEK_API_KEY") -> Any:
    """The one switch for notebooks: replay the cassette, unless asked to go live.

    Live when ``live=True`` (or the environment variable BETTONG_LIVE=1) *and* ``key_env`` is set:
    then the live provider (``make_live()``, by default DeepSeek's) answers, and its turns are
    recorded beside the cassette as ``NAME.live.jsonl`` (the shipped cassette is left as it is;
    rename the live one over it to keep it). Otherwise the recorded turns are replayed: no key,
    no network.
    """
    live = os.environ.get(LIVE_ENV) == "1" if live is None else live
    if live and os.environ.get(key_env):
        if make_live is None:
            from .openai import DEEPSEEK, Options

            make_live = lambda: DEEPSEEK.provider(Options())  # noqa: E731
        live_path = Path(path).with_suffix(".live.jsonl")
        live_path.unlink(missing_ok=True)
        return Recording(make_live(), live_path)
    return Replay(path)
