"""Approve tool calls with buttons in the running cell.

    from bettong_nb.notebook import ask_with_buttons, ButtonApprover
    agent = bettong_nb.deepseek(capabilities=[...], approve_fn=ask_with_buttons)
    await agent.arun("Tidy data/")            # or: %%agent --approve
    strict = ButtonApprover(timeout=60, headless="deny")   # your own timeout and policy

Each call gets a prompt: the tool, its arguments and capability, buttons Allow, Allow always
(this tool, this conversation), Deny and Stop, and a "reason (optional)" box whose text goes to
the model when you deny. Stop denies the call and every later one in the same run, so the
model answers with what it has; so does a kernel interrupt while a prompt waits, except in a
cell awaiting a run (``%%agent``, ``await agent.arun(...)``), where the stop button ends the cell at once. A click is a person's decision
(an ``Allow`` whose ``person`` is True); the headless policy's and a timeout's are not, so they never let a
tool that needs a person (run_python) run.

Once decided, a prompt gives way to one line of record ("allowed by you", "allowed always
(this session)", "denied: <reason>", "stopped by you"): in a ``%%agent`` cell beside its own
tool call, elsewhere in the prompt's place. The record is plain HTML, so a saved notebook and
``jupyter nbconvert`` keep it; no widget is left behind.

With no widget frontend (nbclient, papermill, a closed tab) or no decision within ``timeout``
seconds the headless policy decides (default: deny, with the reason told to the model). The
wait never hangs. It needs the cell to be awaiting (``%%agent`` does that on ipykernel >= 7.4)
or the agent to run as a task; a blocking cell (``agent.run()``) cannot receive the click, so
its calls are denied at once and the cell says so.
"""

from __future__ import annotations

import asyncio
import html
import json
import signal
import threading
import time
import weakref
from typing import Any, Callable

from ..core.kernel import jupyter_kernel
from ..core.approvals import Allow, ApprovalRequest, Deny, Verdict, _person_said
from ..core.results import STOPPED
from ..records.transcript_html import ERROR_COLOUR, MUTED_STYLE, OK_COLOUR, css_id
from . import interrupts
from ..safety.sanitize import visible_controls
from .display import decision_text, decisions_bundle

__all__ = ["ButtonApprover", "ask_with_buttons", "frontend_connected", "HEADLESS_POLICIES", "STOP_REASON",
           "BLOCKING_NOTE"]

HEADLESS_POLICIES = ("deny", "allow")
STOP_REASON = "the user stopped the run; do not call more tools, answer with what you have"
INTERRUPT_REASON = "the user interrupted the run; do not call more tools, answer with what you have"
BLOCKING_NOTE = ("Approval buttons cannot work under a blocking agent.run() in a notebook (the cell holds the "
                 "kernel until it returns), so its tool calls are denied. Use a %%agent … --approve cell, "
                 "or await agent.arun(...).")
# What a decided prompt leaves behind, one line each.
ALLOWED, ALWAYS = "allowed by you", "allowed always (this session)"
HEADLESS_ALLOWED, HEADLESS_DENIED = "allowed automatically (headless policy)", "denied by the headless policy"

# "Allow always": the tools allowed for the rest of a conversation (a Session, else one run).
_always: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()
_frontend: bool | None = None
_probed_at = 0.0
NO_FRONTEND_RECHECK_S = 60.0  # a tab opened later is found again; a live one is kept for good


async def frontend_connected(*, timeout: float = 2.0, refresh: bool = False) -> bool:
    """Whether a live widget frontend is attached, found by a round trip: two widgets are
    ``jslink``-ed and only a real frontend carries a change from one to the other. The answer
    is kept for the life of the kernel, a "no" for a minute (``refresh=True`` asks again now)."""
    global _frontend, _probed_at
    fresh = _frontend or time.monotonic() - _probed_at < NO_FRONTEND_RECHECK_S
    if _frontend is not None and fresh and not refresh:
        return _frontend
    if jupyter_kernel() is None:
        return False  # a terminal or a plain InteractiveShell: no comms at all
    import ipywidgets as widgets

    loop = asyncio.get_running_loop()
    carried = loop.create_future()
    source, target = widgets.IntText(value=0), widgets.IntText(value=0)
    link = widgets.jslink((source, "value"), (target, "value"))

    def changed(change: dict) -> None:
        if change["new"] == 1:
            loop.call_soon_threadsafe(lambda: carried.done() or carried.set_result(True))

    target.observe(changed, "value")
    source.value = 1
    try:
        _frontend = await asyncio.wait_for(carried, timeout)
    except (asyncio.TimeoutError, TimeoutError):
        _frontend = False
    finally:
        for w in (link, source, target):
            w.close()
    _probed_at = time.monotonic()
    return _frontend


class _Interrupts:
    """While prompts wait, SIGINT (the kernel's interrupt) denies them instead of cancelling
    the cell; the previous handler comes back when the last prompt is decided."""

    def __init__(self) -> None:
        self.waiting: set[Callable[[], None]] = set()
        self.saved: Any = None

    def _handle(self, signum: int, frame: Any) -> None:
        for deny in list(self.waiting):
            deny()

    def add(self, deny: Callable[[], None]) -> bool:
        if threading.current_thread() is not threading.main_thread() or interrupts.active():
            return False  # the cell's guard owns SIGINT: the stop button ends the cell
        if not self.waiting:
            self.saved = signal.signal(signal.SIGINT, self._handle)
        self.waiting.add(deny)
        return True

    def discard(self, deny: Callable[[], None]) -> None:
        if deny in self.waiting:
            self.waiting.discard(deny)
            if not self.waiting:
                signal.signal(signal.SIGINT, self.saved)
                self.saved = None


_interrupts = _Interrupts()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Prompt:
    """The widget for one call; ``future`` gets the verdict, ``on_decided`` the line of record."""

    def __init__(self, request: ApprovalRequest, loop: asyncio.AbstractEventLoop, future: asyncio.Future,
                 on_decided: Callable[["_Prompt", str], None] | None = None):
        import ipywidgets as widgets

        self.request, self.loop, self.future, self.on_decided = request, loop, future, on_decided
        # what the model wrote, its invisible characters shown: a bidi control must not make the
        # call read as another than the one that runs
        args = visible_controls(json.dumps(request.args, ensure_ascii=False, indent=2, default=str))
        where = f" <span style='opacity:.7'>(capability: {html.escape(visible_controls(str(request.capability)))})" \
            "</span>" if request.capability else ""
        header = widgets.HTML(
            f"<div style='font-size:13px'><b>Allow <code>{html.escape(visible_controls(str(request.tool)))}</code>?</b>"
            f"{where}</div>"
            f"<pre style='white-space:pre-wrap;word-break:break-word;margin:4px 0;max-height:16em;overflow:auto'>"
            f"{html.escape(args)}</pre>")
        self.allow = widgets.Button(description="Allow", button_style="success",
                                    tooltip=f"run {request.tool} this once")
        self.always = widgets.Button(description="Allow always",
                                     tooltip=f"run {request.tool} without asking for the rest of this session")
        self.deny = widgets.Button(description="Deny", button_style="danger",
                                   tooltip="do not run it; the model reads your reason")
        self.stop = widgets.Button(description="Stop", button_style="warning",
                                   tooltip="deny this and every later tool call in this run")
        self.reason = widgets.Text(placeholder="reason (optional)", layout=widgets.Layout(width="24em"))
        self.status = widgets.HTML("")
        self.allow.on_click(lambda _: self.decide(_person_said(request), ALLOWED))
        self.always.on_click(lambda _: self.decide("always", ALWAYS))
        self.deny.on_click(lambda _: self._denied())
        self.stop.on_click(lambda _: self.decide(Deny(STOP_REASON, stop=True), STOPPED))
        self.widget = widgets.VBox([header, widgets.HBox([self.allow, self.always, self.deny, self.stop]),
                                    self.reason, self.status])
        self.widget.add_class("bettong-approval")
        self.widget.add_class(f"bettong-call-{css_id(request.call_id)}")

    def _denied(self) -> None:
        reason = self.reason.value.strip()
        self.decide(Deny(reason or "denied by the user"), f"denied: {reason}" if reason else
                    "denied by you")

    def decide(self, verdict: Any, shown: str) -> None:
        """Record a verdict (first one wins), lock the buttons and hand the line of record on."""
        if self.future.done() or self.allow.disabled:
            return
        for control in (self.allow, self.always, self.deny, self.stop, self.reason):
            control.disabled = True
        colour = OK_COLOUR if verdict == "always" or verdict else ERROR_COLOUR  # the theme's own colours
        self.status.value = f"<span style='color:{colour};font-weight:600'>{html.escape(shown)}</span>"
        # Clicks may arrive on a comm thread; the future and the display belong to the loop running the agent.
        self.loop.call_soon_threadsafe(lambda: self.future.done() or self.future.set_result(verdict))
        if self.on_decided is not None:
            if _running_loop() is self.loop:  # decided in the run itself (a timeout, a stop): record it now
                self.on_decided(self, shown)
            else:
                self.loop.call_soon_threadsafe(self.on_decided, self, shown)

    def close(self) -> None:
        for widget in (self.widget, *self.widget.children, *self.widget.children[1].children):
            widget.close()


class OwnOutput:
    """Where prompts go outside a %%agent cell: each in an output of its own, which its line of
    record replaces once it is decided."""

    def __init__(self) -> None:
        self.handles: dict[int, Any] = {}

    def __call__(self, widget: Any) -> None:
        from IPython.display import display

        self.handles[id(widget)] = display(widget, display_id=True)

    def settle(self, widget: Any, call: ApprovalRequest, line: str) -> None:
        handle = self.handles.pop(id(widget), None) if widget is not None else None
        if handle is not None:
            handle.update(decisions_bundle([decision_text(call, line)]), raw=True)


class ButtonApprover:
    """An ``approve_fn`` that asks with buttons in the cell (see the module doc).

    ``timeout``: seconds to wait for a click before the headless policy decides.
    ``headless``: "deny" (default) or "allow", used when nobody can or does answer.
    ``probe_timeout``: seconds to wait for the frontend round trip (once per kernel).
    ``show``: where a prompt is shown, a callable taking the widget (``%%agent`` passes a place
    in its own cell); with a ``settle(widget, request, line)`` method it also gets each decided
    prompt back with its line of record. Default: an output of the prompt's own, replaced by
    the record.
    """

    def __init__(self, *, timeout: float = 300.0, headless: str = "deny", probe_timeout: float = 2.0,
                 show: Callable[[Any], None] | None = None):
        if headless not in HEADLESS_POLICIES:
            raise ValueError(f"headless must be one of {', '.join(HEADLESS_POLICIES)}; got {headless!r}")
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
        self.timeout = timeout
        self.headless = headless
        self.probe_timeout = probe_timeout
        self.show = show if show is not None else OwnOutput()
        self.prompts: list[_Prompt] = []  # every prompt shown, newest last
        self._told: "weakref.WeakSet[Any]" = weakref.WeakSet()  # runs told that buttons cannot work

    def _headless(self, request: ApprovalRequest, why: str, *, prompt: _Prompt | None = None) -> Verdict:
        """The policy's verdict when no person answers; every such decision leaves its record
        ("allowed automatically (headless policy): …"), as a person's does."""
        if self.headless == "allow":
            verdict: Verdict = Allow()
        else:
            verdict = Deny(f"no one approved it: {why}; the headless policy denies tool calls that need approval")
        line = f"{HEADLESS_ALLOWED if verdict else HEADLESS_DENIED}: {why}"
        if prompt is not None:
            prompt.decide(verdict, line)
        else:
            self._settle(None, request, line)
        return verdict

    def _settle(self, prompt: _Prompt | None, request: ApprovalRequest, line: str) -> None:
        settle = getattr(self.show, "settle", None)
        if settle is not None:
            settle(None if prompt is None else prompt.widget, request, line)
        if prompt is not None:
            prompt.close()

    def _blocked(self, request: ApprovalRequest, scope: Any) -> Verdict:
        """agent.run() in a cell: the kernel is blocked until it returns, so no click can arrive."""
        if scope not in self._told:
            self._told.add(scope)
            from IPython.display import display

            # From the worker thread the run's context still names this cell, so the line lands here.
            display({"text/plain": BLOCKING_NOTE,
                     "text/html": f'<div class="bettong-note" style="{MUTED_STYLE}">{html.escape(BLOCKING_NOTE)}</div>'},
                    raw=True)
        return self._headless(request, "the agent runs in a blocking call, so no click can reach it "
                                       "(use %%agent or await agent.arun(...))")

    async def __call__(self, request: ApprovalRequest) -> Verdict:
        scope = request.scope if request.scope is not None else self
        if request.tool in _always.get(scope, ()):
            self._settle(None, request, ALWAYS)
            return _person_said(request)  # a person said so, for this conversation
        if threading.current_thread() is not threading.main_thread() and jupyter_kernel() is not None:
            return self._blocked(request, scope)
        if not await frontend_connected(timeout=self.probe_timeout):
            return self._headless(request, "no widget frontend is connected to this kernel (a headless run)")
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        prompt = _Prompt(request, loop, future, on_decided=lambda p, line: self._settle(p, request, line))
        self.prompts.append(prompt)

        def interrupted() -> None:
            prompt.decide(Deny(INTERRUPT_REASON, stop=True), STOPPED)

        watching = _interrupts.add(interrupted)  # before the prompt is on screen, so no interrupt slips by
        try:
            self.show(prompt.widget)
            verdict = await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except (asyncio.TimeoutError, TimeoutError):
            verdict = self._headless(request, f"no decision within {self.timeout:g} s", prompt=prompt)
        except asyncio.CancelledError:
            prompt.decide(Deny("cancelled"), STOPPED)  # the stop button ended the cell
            raise
        finally:
            if watching:
                _interrupts.discard(interrupted)
        if verdict == "always":
            _always.setdefault(scope, set()).add(request.tool)
            return _person_said(request)
        return verdict


ask_with_buttons = ButtonApprover()
