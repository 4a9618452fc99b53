"""Approvals: who says yes before a tool runs.

    agent = bettong_nb.deepseek(capabilities=[...], approve_fn=bettong_nb.ask_in_terminal)
    agent = bettong_nb.deepseek(capabilities=[...], approve_fn={"read_file", "list_dir"})
    agent = bettong_nb.deepseek(capabilities=[...], approve_fn=lambda req: req.capability == "filesystem"
                                or Deny("shell is off today"))

An ``approve_fn`` is asked before every call. Truthy allows (so a set of tool names works),
falsy denies, ``Deny(reason)`` denies with a reason the model reads, a mapping denies only when
its ``"allowed"`` is False, True/False allow/deny everything, and a hook that raises denies.
``Deny(stop=True)`` also ends the run after this round of calls. Whatever else a hook gives (a
generator, a value whose truth cannot be told, an awaitable of an awaitable) denies, with a
reason; a reason that is not text is shown as text.

Some tools must never run on an automatic yes (``run_python``): :func:`requires_person` wraps
such a tool so that it runs only on a person's own decision — a click or a keypress, never a
headless policy, a timeout or a hook. Only the library's own channels can say a person
decided: y/N asked by :func:`ask_in_terminal` when stdin and stdout are a terminal, and the
notebook's buttons (installed by ``%load_ext bettong_nb`` with :func:`install_person`, or put in
place by a cell for its duration with :func:`person`). An ``Allow`` any other code makes is an
automatic yes, whatever it says.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Mapping

__all__ = ["ApprovalRequest", "Allow", "Deny", "Denied", "Verdict", "approve_all", "ask_in_terminal",
           "decide", "verdict", "ask_a_person", "install_person", "person", "requires_person", "approved",
           "denial_text", "current_person", "current_call"]


@dataclass(frozen=True)
class ApprovalRequest:
    """What an approve_fn is asked about. ``scope`` is the conversation the call belongs to (a
    Session, else the run): "allow always" lasts as long as it does."""

    tool: str
    args: Any
    capability: str | None
    call_id: str = ""
    scope: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Allow:
    """An approval. ``person`` says a person decided it (a click, a keypress): only a channel
    that asked one sets it (:func:`_person_said`), so no approve_fn can claim it."""

    # The request the person answered, by identity: that call, and no other, had a person's yes.
    _answered: ApprovalRequest | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def person(self) -> bool:
        return self._answered is not None

    def __bool__(self) -> bool:
        return True


def _person_said(request: ApprovalRequest) -> Allow:
    """A person's yes to ``request``: for the library's own channels (the terminal, the
    notebook's buttons), which asked one."""
    given = Allow()
    object.__setattr__(given, "_answered", request)
    return given


@dataclass(frozen=True)
class Deny:
    """A denial with a reason the model will read. With ``stop=True`` the run also ends after
    this round of tool calls (``stop_reason="stopped"``) instead of asking the model what next."""

    reason: str | None = None
    stop: bool = False

    def __bool__(self) -> bool:
        return False


Verdict = Allow | Deny


class Denied(Exception):
    """Raised by a tool wrapper that was refused: the call is reported as denied, not failed."""

    def __init__(self, verdict: Deny):
        super().__init__(verdict.reason or "not allowed")
        self.verdict = verdict


def denial_text(tool: str, denial: Deny) -> str:
    """What the model reads for a call that was not allowed."""
    return f"ERROR: {tool} was not allowed" + ("" if denial.reason is None else f": {denial.reason}")


def approve_all(request: ApprovalRequest) -> bool:
    return True


def _text(value: Any) -> str | None:
    """A reason as text (None stays None)."""
    from ..safety.sanitize import as_text

    return None if value is None else as_text(value)


def verdict(value: Any) -> Verdict:
    """Whatever an approve_fn returned, as a plain Allow or Deny (a Deny's reason as text). It
    may raise on a value whose truth cannot be told (:func:`decide` turns that into a denial)."""
    if type(value) is Allow:
        return value
    if isinstance(value, Deny):
        return Deny(_text(value.reason), stop=bool(value.stop))
    if inspect.isgenerator(value) or inspect.isasyncgen(value):  # a truthy object, never an answer
        return Deny("the approval hook yields; it must return its verdict")
    if isinstance(value, Mapping):
        return Deny(_text(value.get("reason"))) if value.get("allowed") is False else Allow()
    return Allow() if value else Deny()  # a subclass of Allow too: a plain yes, never a person's


async def decide(approve_fn: Any, request: ApprovalRequest) -> Verdict:
    """Ask ``approve_fn`` (None allows) about ``request``. Every outcome is a verdict: a hook
    that raises, or whose answer cannot be read, denies (fails closed)."""
    if approve_fn is None or isinstance(approve_fn, bool):
        return Allow() if approve_fn is not False else Deny()
    if isinstance(approve_fn, (set, frozenset)):
        return Allow() if request.tool in approve_fn else Deny()
    try:
        answer = approve_fn(request)
        if inspect.isawaitable(answer):
            answer = await answer
            if inspect.isawaitable(answer):
                if inspect.iscoroutine(answer):
                    answer.close()  # never awaited: closed, so it warns nobody
                return Deny("the approval hook gave an awaitable whose result is another awaitable")
        return verdict(answer)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():  # the run itself is being cancelled
            raise
        return Deny("the approval hook was cancelled")
    except Exception as exc:
        return Deny(f"approval hook threw: {_text(exc)}")


def _terminal() -> bool:
    """Whether a person sits at this process: stdin and stdout both a terminal (a piped "y" is
    no one's keypress)."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


def ask_in_terminal(request: ApprovalRequest) -> Verdict:
    """Ask y/N on stdin; anything but y/yes denies. A yes is a person's when stdin and stdout
    are a terminal; a piped answer is an automatic one. What the model wrote (the tool name, its
    arguments) reaches the terminal without control sequences."""
    from ..safety.sanitize import terminal_text, visible_controls

    # invisible characters shown, not dropped: the person judges what runs
    shown = terminal_text(visible_controls(f"{request.tool} {json.dumps(request.args, ensure_ascii=False, default=str)}"))
    print(f"Allow {shown} ? [y/N] ", end="", flush=True)
    try:
        answer = input()
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        return Deny("denied by the user")
    return _person_said(request) if _terminal() else Allow()


# --- the person -------------------------------------------------------------------------------

async def _terminal_or_nobody(request: ApprovalRequest) -> Verdict:
    if _terminal():
        return await asyncio.to_thread(ask_in_terminal, request)
    return Deny(f"{request.tool} needs a person's approval and nobody can be asked here "
                "(no notebook, no terminal); the user can opt out with require_approval=False")


Person = Callable[[ApprovalRequest], Awaitable[Verdict]]
_installed: list[Person] = [_terminal_or_nobody]
# A context variable because no caller can pass it: requires_person's wrapper runs as a tool,
# called with the model's arguments only, and asks whoever the cell put here.
_current: contextvars.ContextVar[Person | None] = contextvars.ContextVar("bettong_person", default=None)


def install_person(asker: Person | None) -> Person:
    """Make ``asker`` the default person (None: the terminal again); returns the previous one.
    ``%load_ext bettong_nb`` installs the notebook's buttons."""
    previous = _installed[0]
    _installed[0] = asker or _terminal_or_nobody
    return previous


@contextlib.contextmanager
def person(asker: Person) -> Iterator[None]:
    """Use ``asker`` as the person for the runs started inside this block (one notebook cell)."""
    token = _current.set(asker)
    try:
        yield
    finally:
        _current.reset(token)


def current_person() -> Person:
    """Whoever :func:`ask_a_person` would ask now (a cell's buttons, the installed default)."""
    return _current.get() or _installed[0]


async def ask_a_person(request: ApprovalRequest) -> Verdict:
    """The verdict of whoever can be asked here (see the module doc)."""
    return await decide(current_person(), request)


# --- tools that need a person -----------------------------------------------------------------

# A context variable because no caller can pass it: the tool wrapper is called with the model's
# arguments only, yet must know how this very call was allowed.
_call: contextvars.ContextVar[tuple[ApprovalRequest, Verdict] | None] = contextvars.ContextVar(
    "bettong_call", default=None)


def current_call() -> ApprovalRequest | None:
    """The request of the tool call running now (None outside one): for a tool that asks a
    person itself and records the decision beside its own call."""
    running = _call.get()
    return None if running is None else running[0]


@contextlib.contextmanager
def approved(request: ApprovalRequest, given: Verdict) -> Iterator[None]:
    """The loop runs each allowed call inside this block, so a tool wrapper can see how the
    call was allowed."""
    token = _call.set((request, given))
    try:
        yield
    finally:
        _call.reset(token)


def requires_person(tool: Any) -> Any:
    """``tool`` (a :class:`bettong_nb.Tool`) wrapped so that it runs only when a person allowed
    this very call: the approve_fn's verdict counts when a person gave it, else a person is
    asked now; an automatic yes never suffices, and a refusal raises :class:`Denied`."""
    from dataclasses import replace

    from . import events

    inner = tool.handler

    async def handler(**args: Any) -> Any:
        request, given = _call.get() or (ApprovalRequest(tool.name, args, None), Allow())
        if given._answered is not request:  # no person allowed this very call
            events.emit(events.ApprovalRequested(request.call_id, request.tool, request.capability, args))
            answer = await ask_a_person(request)
            if not (answer and answer._answered is request):
                why = answer.reason if isinstance(answer, Deny) and answer.reason else (
                    f"{tool.name} needs a person's approval, and no person allowed this call "
                    "(an automatic yes does not count)")
                answer = Deny(why, stop=isinstance(answer, Deny) and answer.stop)
            events.emit(events.ApprovalDecided(request.call_id, request.tool, bool(answer),
                                               answer.reason if isinstance(answer, Deny) else None, "person"))
            if isinstance(answer, Deny):
                raise Denied(answer)
        result = inner(**args)
        return await result if inspect.isawaitable(result) else result

    # It runs alone: its question to a person must not overlap the next call's approval.
    return replace(tool, handler=handler, concurrent=False)
