"""Approvals under attack: every shape an approve_fn can take decides what it must, a tool that
needs a person never runs on an automatic yes, "allow always" stays in its conversation, and
Stop ends one run, not the asyncio task it ran in.

Each case asserts on what actually ran (the tool's own log) and what the model was told (the
next request the scripted model received)."""

from __future__ import annotations

import asyncio
import io

import pytest

import bettong_nb
from bettong_nb import Allow, Deny, approvals
from bettong_nb import capabilities as caps
from bettong_nb.notebook import approvals as buttons
from bettong_nb.providers.scripted import Scripted


def _notes(ran: list) -> dict:
    def note(text: str) -> str:
        ran.append(text)
        return f"noted {text}"

    return {"id": "notes", "tools": [{"name": "note", "handler": note,
                                      "parameters": {"text": {"type": "string", "required": True}}}]}


async def _async_yes(request):
    return True


def _raises_with_a_secret(request):
    raise RuntimeError("hook failed reading sk-live-9f8e7d6c5b4a3f2e1d0c9b8a")


# (name, approve_fn, does the plain tool run?, the reason the model reads or None)
VERDICTS = [
    ("False denies every call", False, False, None),
    ("True allows every call", True, True, None),
    ("None allows (no approver)", None, True, None),
    ("an empty set denies", set(), False, None),
    ("a set naming another tool denies", {"other"}, False, None),
    ("a set naming the tool allows", {"note"}, True, None),
    ("{} allows (the seed: only allowed=False denies)", lambda r: {}, True, None),
    ('{"reason": "r"} allows', lambda r: {"reason": "r"}, True, None),
    ('{"allowed": False} denies with its reason', lambda r: {"allowed": False, "reason": "not now"}, False, "not now"),
    ('{"allowed": 0} allows (only False denies)', lambda r: {"allowed": 0}, True, None),
    ("a zero denies", lambda r: 0, False, None),
    ("an empty string denies", lambda r: "", False, None),
    ("a non-empty string allows", lambda r: "no", True, None),
    ("Deny() denies", lambda r: Deny(), False, None),
    ("Deny(reason) denies", lambda r: Deny("shell is off today"), False, "shell is off today"),
    ("Allow() allows", lambda r: Allow(), True, None),
    ("an async yes allows", _async_yes, True, None),
    ("a raising hook denies, and its text holds no secret", _raises_with_a_secret, False,
     "approval hook threw: hook failed reading [redacted]"),
    ("a hook returning a coroutine of Deny denies", lambda r: asyncio.sleep(0, Deny("later")), False, "later"),
]


@pytest.mark.parametrize("name,approve_fn,runs,reason", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_every_verdict_shape_decides_what_it_must(name, approve_fn, runs, reason):
    ran = []
    model = Scripted([[("note", {"text": "a"})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[_notes(ran)], approve_fn=approve_fn).run("go")
    told = model.requests[1].messages[-1]["content"][0]["content"]
    assert (ran == ["a"]) == runs
    if runs:
        assert told == "noted a" and result.tool_calls[0].status == "ok"
    else:
        assert told == "ERROR: note was not allowed" + (f": {reason}" if reason else "")
        assert result.tool_calls[0].status == "denied" and result.tool_calls[0].reason == reason
        assert "sk-live" not in str(model.requests[1].messages)


# --- hostile answers -------------------------------------------------------------------------------

SECRET = "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a"


class _BoolRaises:
    def __bool__(self):
        raise RuntimeError(f"bool boom {SECRET}")


class _StrRaises:
    def __str__(self):
        raise RuntimeError("str boom")


class _GetRaises(dict):
    def get(self, *args):
        raise RuntimeError("get boom")


class _LenRaises:
    def __len__(self):
        raise ValueError("len boom")


class _BoolNotBool:
    def __bool__(self):
        return "yes"


class _AllowThatDenies(Allow):
    def __bool__(self):
        raise RuntimeError("a subclass of Allow")


class _ExceptionWithoutText(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def _yields(request):
    yield True


async def _yields_async(request):
    yield True


async def _cancelled(request):
    raise asyncio.CancelledError


def _raises_unprintable(request):
    raise _ExceptionWithoutText


async def _awaitable_of_awaitable(request):
    return asyncio.sleep(0, True)


# (name, approve_fn, what the reason the model reads starts with): each ends as a clear denial,
# never an exception out of the run, and what the model reads is bounded text with no secret.
HOSTILE = [
    ("__bool__ raises", lambda r: _BoolRaises(), "approval hook threw: bool boom [redacted]"),
    ("__bool__ returns a str", lambda r: _BoolNotBool(), "approval hook threw: __bool__ should return bool"),
    ("__len__ raises", lambda r: _LenRaises(), "approval hook threw: len boom"),
    ("a mapping whose .get raises", lambda r: _GetRaises(), "approval hook threw: get boom"),
    ("a numpy array", lambda r: __import__("numpy").array([1, 0]), "approval hook threw: The truth value"),
    ("a coroutine of a value whose truth raises", lambda r: asyncio.sleep(0, _BoolRaises()),
     "approval hook threw: bool boom [redacted]"),
    ("an awaitable of an awaitable", _awaitable_of_awaitable, "the approval hook gave an awaitable"),
    ("a generator function", _yields, "the approval hook yields"),
    ("an async generator function", _yields_async, "the approval hook yields"),
    ("a hook raising CancelledError while the run is not cancelled", _cancelled, "the approval hook was cancelled"),
    ("an exception whose str raises", _raises_unprintable, "approval hook threw: <a _ExceptionWithoutText"),
    ("a subclass of Allow whose truth raises", lambda r: _AllowThatDenies(), "approval hook threw: a subclass"),
    ("Deny(stop=<truth raises>)", lambda r: Deny("x", stop=_BoolRaises()), "approval hook threw: bool boom"),
    ('{"allowed": False, "reason": 12345}', lambda r: {"allowed": False, "reason": 12345}, "12345"),
    ("Deny(bytes)", lambda r: Deny(b"bytes \xff reason"), "bytes \ufffd reason"),
    ("Deny(an object whose str raises)", lambda r: Deny(_StrRaises()), "<a _StrRaises that cannot be shown>"),
    ("Deny(a lone surrogate)", lambda r: Deny("bad \ud800"), "bad \ufffd"),
    ("a 2 MB reason with a secret across the cut", lambda r: Deny("x" * 1_995 + SECRET + "y" * 2_000_000), "xxx"),
    ("a 2 MB mapping reason", lambda r: {"allowed": False, "reason": "z" * 2_000_000}, "zzz"),
    ("an int, not callable", 5, "approval hook threw: 'int' object is not callable"),
]


@pytest.mark.parametrize("name,approve_fn,starts", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_every_hostile_answer_ends_as_a_clear_denial(name, approve_fn, starts):
    ran = []
    model = Scripted([[("note", {"text": "a"})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[_notes(ran)], approve_fn=approve_fn).run("go")
    told = model.requests[1].messages[-1]["content"][0]["content"]
    prefix = "ERROR: note was not allowed: "
    assert ran == [] and result.tool_calls[0].status == "denied" and result.stop_reason == "end_turn"
    assert told.startswith(prefix + starts) and told[len(prefix):] == result.tool_calls[0].reason
    assert len(told) < 2_100 and "sk-live" not in str(model.requests[1].messages)
    told.encode("utf-8")  # text the next request can carry


# --- a tool that needs a person -----------------------------------------------------------------

def _automatic_buttons(**settings):
    """Buttons that nobody can click (no widget frontend): their headless policy decides."""
    return buttons.ButtonApprover(probe_timeout=0.1, **settings)


AUTOMATIC = [
    ("allow all", lambda: bettong_nb.approve_all),
    ("True", lambda: True),
    ("a lambda saying yes", lambda: (lambda r: True)),
    ("Allow() without a person", lambda: (lambda r: Allow())),
    ('{"allowed": True}', lambda: (lambda r: {"allowed": True})),
    ("buttons whose headless policy allows", lambda: _automatic_buttons(headless="allow")),
    ("buttons that time out into allow", lambda: _automatic_buttons(headless="allow", timeout=0.05)),
]


@pytest.mark.parametrize("name,make", AUTOMATIC, ids=[a[0] for a in AUTOMATIC])
@pytest.mark.parametrize("person", ["nobody", "an automatic yes installed as the person"])
def test_run_python_never_runs_on_an_automatic_yes(name, make, person, monkeypatch):
    monkeypatch.setattr(buttons, "_frontend", False)
    namespace = {}
    if person != "nobody":  # even the installed "person" saying yes is no person unless it says so
        monkeypatch.setattr(approvals, "_installed", [_async_yes])
    model = Scripted([[("run_python", {"code": "touched = True"})], "ok"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.python(namespace)], approve_fn=make()).run("go")
    call = result.tool_calls[0]
    assert "touched" not in namespace and call.status == "denied"
    assert call.result.startswith("ERROR: run_python was not allowed: ")


class _Stream(io.StringIO):
    """A stream that says whether it is a terminal."""

    def __init__(self, text: str = "", tty: bool = True):
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _at_a_terminal(monkeypatch, typed: str, *, stdin_tty: bool = True, stdout_tty: bool = True) -> _Stream:
    """y/N answered with ``typed`` (one line per question); returns what the terminal showed."""
    shown = _Stream(tty=stdout_tty)
    monkeypatch.setattr("sys.stdin", _Stream(typed, tty=stdin_tty))
    monkeypatch.setattr("sys.stdout", shown)
    return shown


def _run_python(namespace: dict, approve_fn=None, calls: int = 1):
    model = Scripted([[("run_python", {"code": f"touched_{n} = {n}"}) for n in range(calls)], "ok"])
    kwargs = {} if approve_fn is None else {"approve_fn": approve_fn}
    result = bettong_nb.agent(provider=model, capabilities=[caps.python(namespace)], **kwargs).run("go")
    return result, model.requests[1].messages[-1]["content"]


def test_run_python_runs_on_a_persons_yes_at_a_terminal_and_only_once_asked(monkeypatch):
    namespace = {}
    screen = _at_a_terminal(monkeypatch, "y\n")
    result, told = _run_python(namespace)
    assert namespace["touched_0"] == 0 and screen.getvalue().count("[y/N]") == 1
    assert told[0]["content"] == "(no output)" and result.tool_calls[0].status == "ok"
    # the terminal given as the approve_fn: its yes is a person's, nobody is asked twice
    namespace.clear()
    screen = _at_a_terminal(monkeypatch, "y\n")
    _run_python(namespace, bettong_nb.ask_in_terminal)
    assert namespace["touched_0"] == 0 and screen.getvalue().count("[y/N]") == 1


def _the_terminal_for_the_first_call_then_its_answer_again():
    first = []

    def approve(request):
        first.append(first[0] if first else bettong_nb.ask_in_terminal(request))
        return first[-1]
    return approve


# (name, approve_fn, stdin a terminal?, stdout a terminal?, what is typed): none is a person's
# yes to each call, so run_python must not run on it (the model is told why).
NO_PERSON = [
    ("Allow(person=True) from a hook", lambda: (lambda r: Allow(person=True)), True, True, ""),
    ("an async Allow(person=True)", lambda: (lambda r: asyncio.sleep(0, Allow(person=True))), True, True, ""),
    ("a hook setting person after the fact", lambda: (lambda r: object.__setattr__(a := Allow(), "person", True) or a),
     True, True, ""),
    ("a subclass of Allow claiming a person", lambda: (lambda r: type("Mine", (Allow,), {"person": True})()),
     True, True, ""),
    ('{"allowed": True, "person": True}', lambda: (lambda r: {"allowed": True, "person": True}), True, True, ""),
    ("ask_in_terminal with y piped in", lambda: bettong_nb.ask_in_terminal, False, True, "y\ny\n"),
    ("ask_in_terminal with stdout piped", lambda: bettong_nb.ask_in_terminal, True, False, "y\ny\n"),
    ("a person's yes to one call reused for the next", _the_terminal_for_the_first_call_then_its_answer_again,
     True, True, "y\nn\n"),
]


@pytest.mark.parametrize("name,make,stdin_tty,stdout_tty,typed", NO_PERSON, ids=[c[0] for c in NO_PERSON])
def test_only_the_librarys_own_channels_vouch_for_a_person(name, make, stdin_tty, stdout_tty, typed, monkeypatch):
    namespace = {}
    _at_a_terminal(monkeypatch, typed, stdin_tty=stdin_tty, stdout_tty=stdout_tty)
    result, told = _run_python(namespace, make(), calls=2)
    # the reused answer's first call was a person's own yes; every other call is denied
    expected_ran = {"touched_0"} if name.startswith("a person's yes") else set()
    assert {k for k in namespace if k.startswith("touched")} == expected_ran
    for n, (call, block) in enumerate(zip(result.tool_calls, told)):
        if f"touched_{n}" not in namespace:
            assert call.status == "denied" and block["content"].startswith("ERROR: run_python was not allowed: ")


def test_opting_out_still_runs_without_a_person():
    namespace = {}
    model = Scripted([[("run_python", {"code": "touched = 1"})], "ok"])
    bettong_nb.agent(provider=model, capabilities=[caps.python(namespace, require_approval=False)],
                     approve_fn=lambda r: True).run("go")
    assert namespace["touched"] == 1


# --- allow always and stop, with the notebook's buttons -------------------------------------------

def _clicking(approver: buttons.ButtonApprover, *clicks: str) -> list:
    """Answer the approver's prompts by clicking these buttons in order; returns the prompts shown."""
    shown = []

    def show(widget):
        prompt = approver.prompts[-1]
        shown.append(prompt)
        if len(shown) <= len(clicks):
            asyncio.get_running_loop().call_later(0.01, getattr(prompt, clicks[len(shown) - 1]).click)

    approver.show = show
    return shown


def test_allow_always_stays_in_its_session_even_with_one_shared_approver(monkeypatch):
    monkeypatch.setattr(buttons, "_frontend", True)
    shared = buttons.ButtonApprover(timeout=5)
    ran = []
    agent = bettong_nb.agent(provider=Scripted(default=[("note", {"text": "x"})]), capabilities=[_notes(ran)],
                             approve_fn=shared, max_steps=2)
    other_agent = bettong_nb.agent(provider=Scripted(default=[("note", {"text": "y"})]),
                                   capabilities=[_notes(ran)], approve_fn=shared, max_steps=1)

    async def main():
        first, second = agent.session(), agent.session()
        shown = _clicking(shared, "always")
        await first.arun("go")  # two calls: one prompt, then "always"
        assert len(shown) == 1 and ran == ["x", "x"]
        await first.arun("again")  # the same session: nobody asked
        assert len(shown) == 1 and ran == ["x"] * 4
        shown = _clicking(shared, "deny", "deny", "deny")
        await second.arun("go")  # another session on the same agent asks again (two calls)
        await other_agent.arun("go")  # and so does another agent sharing the approver
        assert len(shown) == 3 and ran == ["x"] * 4

    asyncio.run(main())


def test_after_stop_the_next_run_in_the_same_task_asks_again(monkeypatch):
    monkeypatch.setattr(buttons, "_frontend", True)
    approver = buttons.ButtonApprover(timeout=5)
    ran = []
    agent = bettong_nb.agent(provider=Scripted(default=[("note", {"text": "z"})]), capabilities=[_notes(ran)],
                             approve_fn=approver, max_steps=1)

    async def main():
        shown = _clicking(approver, "stop", "allow")
        stopped = await agent.arun("go")
        assert stopped.stop_reason == "stopped" and ran == []
        again = await agent.arun("go")  # same task, a new run: asked again, and allowed
        assert len(shown) == 2 and ran == ["z"] and again.tool_calls[0].status == "ok"

    asyncio.run(main())


def test_allow_always_does_not_reach_an_agent_that_a_tool_runs(monkeypatch):
    monkeypatch.setattr(buttons, "_frontend", True)
    shared = buttons.ButtonApprover(timeout=5)
    ran = []
    inner = bettong_nb.agent(provider=Scripted(default=[("note", {"text": "inner"})]), capabilities=[_notes(ran)],
                             approve_fn=shared, max_steps=1)

    async def delegate(task: str) -> str:
        return str((await inner.arun(task)).tool_calls[0].status)

    delegation = {"id": "delegation", "tools": [{"name": "delegate", "handler": delegate,
                                                 "parameters": {"task": {"type": "string", "required": True}}}]}
    outer = bettong_nb.agent(provider=Scripted([[("note", {"text": "outer"})], [("delegate", {"task": "t"})],
                                                [("delegate", {"task": "t"})], "done"]),
                             capabilities=[_notes(ran), delegation], approve_fn=shared, max_steps=4)

    async def main():
        # "always" for note in the outer session; delegate allowed; the inner note is asked (denied)
        shown = _clicking(shared, "always", "always", "deny", "deny")
        result = await outer.session().arun("go")
        assert ran == ["outer"] and [p.request.tool for p in shown] == ["note", "delegate", "note", "note"]
        assert [c.result for c in result.tool_calls if c.tool == "delegate"] == ["denied", "denied"]

    asyncio.run(main())
