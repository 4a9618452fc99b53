"""Typed progress events. The loop reports; the notebook, the CLI and your code listen.

    def on_event(event):
        if isinstance(event, ToolCallFinished):
            print(event.tool, event.status)

    bettong_nb.deepseek(on_event=on_event)

Every event has a ``kind`` string, handy for ``match`` and logs.

The same stream feeds an observer when one is installed (:func:`observe`; the front door installs
one that builds OpenTelemetry spans when a tracer provider is set, see
:mod:`bettong_nb.records.tracing`): each run gets its own listener from it, beside yours.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Mapping, Protocol

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
    "RunFinished",
    "emit",
    "listening",
    "Observer",
    "observe",
    "observed",
    "scope",
    "carrier",
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
    with what the provider has cached), who serves it (the provider's name, the model asked
    for, the API host), the prices it is costed with and the notebook cell it runs from."""

    system: str
    tools: list
    provider: str | None = None
    model: str | None = None
    host: str | None = None
    prices: Mapping[str, Any] | None = None
    cell: str | None = None
    kind = "run-started"


@dataclass(frozen=True)
class ModelRequest(Event):
    """A request is about to go to the model (``messages``: the transcript it sends)."""

    step: int
    model: str | None
    messages: list | None = None
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
    """A model response arrived (``usage`` is this one request's; ``request`` its
    :class:`bettong_nb.usage.RequestRecord`, the model that answered included; ``stop_reason``
    why the model stopped: end_turn, tool_use, max_tokens, refusal or the vendor's own)."""

    step: int
    message: dict
    usage: Any
    latency_s: float
    request: Any = None
    stop_reason: str | None = None
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
    """``by`` says who decided: ``person`` (a click or a keypress), ``approve_fn`` (a policy or
    a hook) or ``stop`` (a person pressed Stop earlier in the round)."""

    call_id: str
    tool: str
    allowed: bool
    reason: str | None
    by: str = "approve_fn"
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


@dataclass(frozen=True)
class RunFinished(Event):
    """A run ended: with its :class:`bettong_nb.RunResult`, or with ``error`` (what it raised:
    a ServiceError, a cancellation)."""

    result: Any = None
    error: BaseException | None = None
    kind = "run-finished"


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


# --- observers ----------------------------------------------------------------------------------

class Observer(Protocol):
    """Watches every run of the process (tracing does): ``run()`` gives a listener for one run's
    events; ``scope`` wraps work that holds runs (a batch, one item of it) and makes it their
    parent; ``carrier()`` is where the current scope is, as text that travels to another process
    (W3C trace context), which ``scope(..., parent=carrier)`` continues there."""

    def run(self) -> Callable[[Event], Any]: ...

    def scope(self, name: str, attributes: Mapping[str, Any], parent: Mapping[str, str] | None) -> ContextManager: ...

    def carrier(self) -> dict[str, str]: ...


# The front door installs a finder, asked at each run: an Observer while one is wanted (a tracer
# provider is set), else None. Not asked at all until something is installed: no cost by default.
_observer: list[Callable[[], Observer | None] | None] = [None]


def observe(finder: Callable[[], Observer | None] | None) -> Callable[[], Observer | None] | None:
    """Install ``finder`` (None: none), asked for the observer at each run; returns the previous."""
    previous = _observer[0]
    _observer[0] = finder
    return previous


def _current() -> Observer | None:
    finder = _observer[0]
    return None if finder is None else finder()


def observed(listener: Callable[[Event], Any] | None) -> Callable[[Event], Any] | None:
    """``listener``, and when an observer is there, its listener for this run before it (alone
    when ``listener`` is None: one call less for each event of an unwatched, traced run)."""
    observer = _current()
    if observer is None:
        return listener
    watch = observer.run()
    if listener is None:
        return watch

    def both(event: Event) -> None:
        watch(event)
        listener(event)

    return both


def scope(name: str, parent: Mapping[str, str] | None = None, **attributes: Any) -> ContextManager:
    """Around work that holds runs (``with events.scope("batch", items=10):``): the observer's
    scope, the parent of the runs inside; nothing without an observer."""
    observer = _current()
    return contextlib.nullcontext() if observer is None else observer.scope(name, attributes, parent)


def carrier() -> dict[str, str] | None:
    """Where the current scope is, for another process to continue it (None without an observer)."""
    observer = _current()
    return None if observer is None else observer.carrier()
