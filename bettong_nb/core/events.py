"""Typed progress events. The loop reports; the notebook, the CLI and your code listen.

    def on_event(event):
        if isinstance(event, ToolCallFinished):
            print(event.tool, event.status)

    bettong_nb.deepseek(on_event=on_event)

Every event has a ``kind`` string, handy for ``match`` and logs.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Callable

from ..safety.sanitize import clean_text

__all__ = [
    "Event",
    "RunStarted",
    "ModelRequest",
    "TextDelta",
    "ThinkingDelta",
    "ToolUseDelta",
    "AssistantMessage",
    "ApprovalRequested",
    "ApprovalDecided",
    "ToolCallStarted",
    "ToolCallFinished",
    "Retry",
    "CacheWarning",
    "BudgetExceeded",
    "emit",
    "listening",
]


@dataclass(frozen=True)
class Event:
    kind = "event"

    def __post_init__(self) -> None:
        # A delta the server streamed, a person's reason, a retry's message: text from outside may
        # hold lone surrogates, mended here so no listener (a terminal, a log, a save) fails on it.
        for name, value in vars(self).items():
            if isinstance(value, str) and not value.isascii():
                object.__setattr__(self, name, clean_text(value))


@dataclass(frozen=True)
class RunStarted(Event):
    """A run begins: the system prompt and tools its capabilities give (a session compares them
    with what the provider has cached)."""

    system: str
    tools: list
    kind = "run-started"


@dataclass(frozen=True)
class ModelRequest(Event):
    """A request is about to go to the model."""

    step: int
    model: str | None
    kind = "model-request"


@dataclass(frozen=True)
class TextDelta(Event):
    text: str
    kind = "text-delta"


@dataclass(frozen=True)
class ThinkingDelta(Event):
    text: str
    kind = "thinking-delta"


@dataclass(frozen=True)
class ToolUseDelta(Event):
    """The model is writing a tool call: its name once known, then pieces of its JSON arguments."""

    index: int
    name: str | None
    arguments: str
    kind = "tool-use-delta"


@dataclass(frozen=True)
class AssistantMessage(Event):
    """A model response arrived (``usage`` is this one request's)."""

    step: int
    message: dict
    usage: Any
    latency_s: float
    kind = "assistant"


@dataclass(frozen=True)
class ApprovalRequested(Event):
    call_id: str
    tool: str
    capability: str | None
    args: Any
    kind = "approval-requested"


@dataclass(frozen=True)
class ApprovalDecided(Event):
    call_id: str
    tool: str
    allowed: bool
    reason: str | None
    kind = "approval-decided"


class _CallEvent(Event):
    """An event about one tool call; ``call`` is the :class:`bettong_nb.ToolCall` record itself,
    the one the result lists, so it reads the same here as there."""

    call: Any

    @property
    def call_id(self) -> str:
        return self.call.id

    @property
    def step(self) -> int:
        return self.call.step

    @property
    def tool(self) -> str:
        return self.call.tool

    @property
    def capability(self) -> str | None:
        return self.call.capability

    @property
    def args(self) -> Any:
        return self.call.args


@dataclass(frozen=True)
class ToolCallStarted(_CallEvent):
    call: Any
    kind = "tool-call-started"


@dataclass(frozen=True)
class ToolCallFinished(_CallEvent):
    """A tool call ended; ``call.status`` is ``ok``, ``error`` or ``denied``."""

    call: Any
    kind = "tool-call"

    @property
    def result(self) -> str:
        return self.call.result

    @property
    def status(self) -> str:
        return self.call.status

    @property
    def duration_s(self) -> float:
        return self.call.duration_s

    @property
    def redactions(self) -> int:
        return self.call.redactions


@dataclass(frozen=True)
class Retry(Event):
    """The transport will try a failed request again after ``delay_s`` seconds."""

    provider: str
    attempt: int
    delay_s: float
    reason: str
    kind = "retry"


@dataclass(frozen=True)
class CacheWarning(Event):
    """A turn changes what the provider has cached (``moved``: "system", "tools", or
    "transcript": a loaded session whose save redacted secret-shaped text in it)."""

    moved: str
    message: str
    kind = "warning"


@dataclass(frozen=True)
class BudgetExceeded(Event):
    reason: str
    kind = "budget-exceeded"


# A context variable because no caller can pass it: a tool (requires_person's wrapper) and the
# transport inside a provider report into the run's listener, yet are called without it.
_listener: contextvars.ContextVar[Callable[[Event], Any] | None] = contextvars.ContextVar(
    "bettong_listener", default=None
)


def emit(event: Event) -> None:
    """Report an event to whoever is listening in this context (no-op when nobody is)."""
    listener = _listener.get()
    if listener is not None:
        listener(event)


def report_retry(service: str, attempt: int, delay_s: float, reason: str) -> None:
    """A transport's ``on_retry``: reports the retry as a :class:`Retry` event."""
    emit(Retry(service, attempt, delay_s, reason))


class listening:
    """Context manager installing ``listener`` as the receiver of :func:`emit`."""

    def __init__(self, listener: Callable[[Event], Any] | None):
        self._listener = listener

    def __enter__(self):
        self._token = _listener.set(self._listener)
        return self

    def __exit__(self, *exc):
        _listener.reset(self._token)
