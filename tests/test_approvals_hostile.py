"""Approvals under attack: every shape an approve_fn can take decides what it must, a tool that
needs a person never runs on an automatic yes, "allow always" stays in its conversation, and
Stop ends one run, not the asyncio task it ran in.

Each case asserts on what actually ran (the tool's own log) and what the model was told (the
next request the scripted model received)."""

from __future__ import annotations

import asyncio

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


def test_run_python_runs_on_a_persons_yes_and_only_once_asked(monkeypatch):
    asked = []

    async def person(request):
        asked.append(request.tool)
        return Allow(person=True)

    namespace = {}
    with approvals.person(person):
        model = Scripted([[("run_python", {"code": "touched = 1"})], "ok"])
        bettong_nb.agent(provider=model, capabilities=[caps.python(namespace)]).run("go")
    assert namespace["touched"] == 1 and asked == ["run_python"]
    # a person's yes given as the approve_fn counts: nobody is asked twice
    asked.clear()
    model = Scripted([[("run_python", {"code": "again = 2"})], "ok"])
    bettong_nb.agent(provider=model, capabilities=[caps.python(namespace)], approve_fn=person).run("go")
    assert namespace["again"] == 2 and asked == ["run_python"]


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
