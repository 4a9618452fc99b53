"""A provider that plays canned turns: for tests, offline demos and teaching.

    model = Scripted([
        [("read_file", {"path": "notes.txt"})],      # turn 1: call a tool
        "The notes say hello.",                       # turn 2: answer
    ])
    agent = bettong_nb.agent(provider=model, capabilities=[...])
    model.requests        # the neutral requests it received

A turn is a str (the answer), a list of ``(tool_name, args)`` calls, a :class:`Response`, or a
dict ``{"text": ..., "tool_calls": [...], "usage": Usage(...) or {...}}``.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

from ..core import events
from ..core.provider import ProviderError, Request, Response
from ..core.usage import Usage

__all__ = ["Scripted"]


def _usage(value: Usage | Mapping[str, int] | None) -> Usage:
    if isinstance(value, Usage):
        return value
    return Usage(**{"requests": 1, **(value or {})})


class Scripted:
    """Serves ``turns`` in order; past the end it answers ``default`` or raises."""

    name = "scripted"
    free = True  # no request has a price

    def __init__(self, turns: Iterable[Any] = (), *, default: Any = None, model: str = "scripted"):
        self.turns = list(turns)
        self.default = default
        self.model = model
        self.requests: list[Request] = []

    def _turn(self, index: int, turn: Any) -> Response:
        if isinstance(turn, Response):
            return turn
        spec: Mapping[str, Any]
        if isinstance(turn, str):
            spec = {"text": turn}
        elif isinstance(turn, Mapping):
            spec = turn
        elif isinstance(turn, (list, tuple)):
            spec = {"tool_calls": turn}
        else:
            raise TypeError(f"A scripted turn is a str, a list of (tool, args), a dict or a Response; got {turn!r}")
        content: list[dict] = []
        if spec.get("text"):
            content.append({"type": "text", "text": spec["text"]})
        for n, (name, args) in enumerate(spec.get("tool_calls") or ()):
            content.append({"type": "tool_use", "id": f"call_{index}_{n}", "name": name, "input": args})
        stop = "tool_use" if spec.get("tool_calls") else spec.get("stop_reason", "end_turn")
        return Response(content=content, stop_reason=stop, model=self.model, usage=_usage(spec.get("usage")))

    async def complete(self, request: Request) -> Response:
        index = len(self.requests)
        self.requests.append(request)
        if index < len(self.turns):
            return self._turn(index, self.turns[index])
        if self.default is not None:
            return self._turn(index, self.default)
        raise ProviderError(f"The scripted model has no turn {index + 1} (it was given {len(self.turns)})",
                            provider=self.name)

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        response = await self.complete(request)
        for block in response.content:
            if block["type"] == "text":
                for piece in re.findall(r"\S+\s*|\s+", block["text"]):
                    on_event(events.TextDelta(piece))
            elif block["type"] == "tool_use":
                on_event(events.ToolUseDelta(0, block["name"], ""))
        return response

    def last_user_text(self) -> str:
        """The newest user message's text (block content joined by newlines)."""
        for message in reversed(self.requests[-1].messages if self.requests else []):
            if message["role"] == "user":
                content = message["content"]
                if isinstance(content, str):
                    return content
                return "\n".join(b.get("text") or b.get("content") or "" for b in content)
        return ""

    def __repr__(self) -> str:
        return f"Scripted({len(self.turns)} turns, {len(self.requests)} served)"
