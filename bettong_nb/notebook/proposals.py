"""A change the agent proposes, shown in the running cell as a diff with Accept and Reject.

    decision = await propose(fe, change, prompt_cell="c1")   # fe: a frontend.Frontend

The diff is unified, coloured, and inert (escaped text in a ``<pre>``); hidden and bidi
characters show as ``⟨U+202E⟩``. The target cell is outlined in the notebook while the proposal
waits. Nothing changes before a person's Accept; an accepted change goes through the notebook's
own model (one undo step) and stamps the cell's metadata with a provenance entry under
``bettong_nb`` (what, model, session, turn, the prompt's cell, who decided, when, the diff's
sha256). A decided proposal leaves one line of record in the ``%%agent`` cell ("accepted by
you", "rejected: <reason>"), plain HTML that a saved notebook keeps. With no widget frontend,
nobody can be asked: the change is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import difflib
import hashlib
import html
from typing import Any, Callable

from ..capabilities.notebook import Change, Decision
from ..core.approvals import ApprovalRequest, current_call, current_person
from ..records.transcript_html import ERROR_COLOUR, OK_COLOUR
from ..safety.sanitize import visible_controls
from .approvals import OwnOutput, frontend_connected
from .history import KEY  # the cell metadata key of the provenance list

__all__ = ["propose", "diff_html", "provenance", "accepted_log", "KEY", "MAX_DIFF_LINES",
           "PROMPT_CELL"]

MAX_DIFF_LINES = 400
DEFAULT_TIMEOUT = 300.0
# The %%agent cell's id, read by the runner when the cell starts (during the turn the kernel's
# parent message may be a comm message the page sent).
PROMPT_CELL: contextvars.ContextVar[str | None] = contextvars.ContextVar("bettong_prompt_cell", default=None)
# Every change accepted in this kernel, newest last: %agent history shows them before a save.
accepted_log: list[dict] = []


def _diff_lines(old: str, new: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=3))


def diff_html(old: str, new: str) -> str:
    """The unified diff of ``old`` to ``new`` as escaped, coloured HTML (at most
    :data:`MAX_DIFF_LINES` lines)."""
    lines = _diff_lines(old, new)
    shown = []
    for line in lines[:MAX_DIFF_LINES]:
        text = html.escape(visible_controls(line))
        colour = OK_COLOUR if line.startswith("+") and not line.startswith("+++") else \
            ERROR_COLOUR if line.startswith("-") and not line.startswith("---") else None
        shown.append(f"<span style='color:{colour}'>{text}</span>" if colour else text)
    if len(lines) > MAX_DIFF_LINES:
        shown.append(html.escape(f"… {len(lines) - MAX_DIFF_LINES} more lines of the diff"))
    hidden = " <b>(holds hidden or bidi characters, shown as ⟨U+…⟩)</b>" if visible_controls(old + new) != old + new else ""
    return (f"<pre class='bettong-diff' style='white-space:pre-wrap;word-break:break-word;margin:4px 0;"
            f"max-height:24em;overflow:auto'>{chr(10).join(shown)}</pre>{hidden}")


def provenance(change: Change, *, prompt_cell: str | None, cell_id: str | None) -> dict:
    """The metadata entry an accepted change leaves."""
    diff = "\n".join(_diff_lines(change.old, change.source)).encode("utf-8", "surrogatepass")
    return {"action": change.action, "cell": cell_id, "model": change.origin.get("model"),
            "session": change.origin.get("session"), "turn": change.origin.get("turn"),
            "prompt_cell": prompt_cell, "decided_by": "you",
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "diff_sha256": hashlib.sha256(diff).hexdigest()}


_TITLES = {"insert": "Insert a new {type} cell", "edit": "Edit cell {id}", "delete": "Delete cell {id}"}


class _Proposal:
    """The widget of one proposal; ``future`` gets ``(accepted, reason)``."""

    def __init__(self, change: Change, loop: asyncio.AbstractEventLoop, waiting: list["_Proposal"]):
        import ipywidgets as widgets

        self.loop, self.future, self.waiting = loop, loop.create_future(), waiting
        title = _TITLES[change.action].format(type=html.escape(change.cell_type), id=html.escape(visible_controls(
            str(change.cell_id))))
        where = " below cell " + html.escape(visible_controls(change.cell_id)) if change.action == "insert" and \
            change.cell_id else ""
        header = widgets.HTML(f"<div style='font-size:13px'><b>{title}{where}?</b></div>"
                              f"{diff_html(change.old, change.source)}")
        self.accept = widgets.Button(description="Accept", button_style="success",
                                     tooltip="make this change in the notebook (Ctrl-Z takes it back)")
        self.reject = widgets.Button(description="Reject", button_style="danger",
                                     tooltip="leave the notebook as it is; the model reads your reason")
        self.accept_all = widgets.Button(description="Accept all", tooltip="accept every proposal waiting here",
                                         layout=widgets.Layout(display="none"))
        self.reason = widgets.Text(placeholder="reason (optional)", layout=widgets.Layout(width="24em"))
        self.status = widgets.HTML("")
        self.accept.on_click(lambda _: self.decide(True, ""))
        self.reject.on_click(lambda _: self.decide(False, self.reason.value.strip()))
        self.accept_all.on_click(lambda _: [p.decide(True, "") for p in list(self.waiting)])
        self.buttons = widgets.HBox([self.accept, self.reject, self.accept_all])
        self.widget = widgets.VBox([header, self.buttons, self.reason, self.status])
        self.widget.add_class("bettong-proposal")

    def decide(self, accepted: bool, reason: str) -> None:
        if self.future.done() or self.accept.disabled:
            return
        for control in (self.accept, self.reject, self.accept_all, self.reason):
            control.disabled = True
        self.loop.call_soon_threadsafe(lambda: self.future.done() or self.future.set_result((accepted, reason)))

    def close(self) -> None:
        for widget in (self.widget, *self.widget.children, *self.buttons.children):
            widget.close()


def _show_accept_all(waiting: list[_Proposal]) -> None:
    for proposal in waiting:
        proposal.accept_all.layout.display = None if len(waiting) > 1 else "none"


# Proposals waiting, per surface (one %%agent cell's prompt slot): Accept all acts on these.
_waiting: dict[int, list[_Proposal]] = {}


async def propose(fe: Any, change: Change, *, prompt_cell: str | None) -> Decision:
    """Ask the person about ``change`` in the running cell; apply it through ``fe`` when accepted."""
    if not await frontend_connected():
        return Decision(False, "no person can see the proposal here (no widget frontend is connected)")
    request = current_call() or ApprovalRequest(f"{change.action}_cell", {"cell_id": change.cell_id}, "notebook")
    person = current_person()
    show: Callable[[Any], None] = getattr(person, "show", None) or OwnOutput()
    timeout = getattr(person, "timeout", DEFAULT_TIMEOUT)
    waiting = _waiting.setdefault(id(show), [])
    proposal = _Proposal(change, asyncio.get_running_loop(), waiting)
    target = change.cell_id
    with contextlib.suppress(Exception):  # an outline is a help, never a reason to fail
        await fe.highlight(target)
    waiting.append(proposal)
    _show_accept_all(waiting)
    line = "stopped"
    try:
        show(proposal.widget)
        try:
            accepted, reason = await asyncio.wait_for(asyncio.shield(proposal.future), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            accepted, reason = False, f"no decision within {timeout:g} s"
        if accepted:
            decision = await _apply(fe, change, prompt_cell)
            line = "accepted by you" if decision.accepted else f"accepted, but not made: {decision.reason}"
        else:
            decision = Decision(False, reason or "rejected by the user")
            line = f"rejected: {reason}" if reason else "rejected by you"
        return decision
    finally:  # decided, timed out or stopped: the proposal gives way to its line of record
        proposal.decide(False, "stopped")
        waiting.remove(proposal)
        _show_accept_all(waiting)
        if not waiting:
            _waiting.pop(id(show), None)
        # Not awaited: a stopped cell must end now; the outline goes when the page answers.
        asyncio.ensure_future(_quietly(fe.highlight(None)))
        colour = OK_COLOUR if line.startswith("accepted by") else ERROR_COLOUR
        proposal.status.value = f"<span style='color:{colour};font-weight:600'>{html.escape(line)}</span>"
        settle = getattr(show, "settle", None)
        if settle is not None:
            settle(proposal.widget, request, line)
        proposal.close()


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(Exception):
        await awaitable


def _history(cell: dict | None) -> list:
    value = ((cell or {}).get("metadata") or {}).get(KEY)
    return list(value) if isinstance(value, list) else []


async def _apply(fe: Any, change: Change, prompt_cell: str | None) -> Decision:
    """Make an accepted change, unless its cell changed while the proposal waited."""
    cells = {cell.get("id"): cell for cell in await fe.cells()}
    if change.action == "insert":
        if change.cell_id is not None and change.cell_id not in cells:
            return Decision(False, f"cell {change.cell_id} is gone; the new cell was not inserted")
        entry = provenance(change, prompt_cell=prompt_cell, cell_id=None)
        new_id = await fe.insert_cell(after=change.cell_id, cell_type=change.cell_type, source=change.source,
                                      metadata={KEY: [entry]})
        entry["cell"] = new_id
        await fe.set_metadata(new_id, KEY, [entry])
        accepted_log.append(entry)
        return Decision(True, cell_id=new_id)
    cell = cells.get(change.cell_id)
    if cell is None or cell.get("source") != change.old:
        return Decision(False, f"cell {change.cell_id} changed while the proposal waited; propose again")
    entry = provenance(change, prompt_cell=prompt_cell, cell_id=change.cell_id)
    if change.action == "edit":
        await fe.set_source(change.cell_id, change.source, metadata={KEY: _history(cell) + [entry]})
    else:
        await fe.delete_cell(change.cell_id)
        if prompt_cell in cells:  # a deleted cell keeps no metadata: the prompt's cell records it
            await fe.set_metadata(prompt_cell, KEY, _history(cells[prompt_cell]) + [entry])
    accepted_log.append(entry)
    return Decision(True, cell_id=change.cell_id)
