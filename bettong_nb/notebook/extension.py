"""``%load_ext bettong_nb`` and ``%unload_ext bettong_nb``: what the notebook installs, and takes back.

    %load_ext bettong_nb      # bettong_nb.load_ipython_extension calls load_ipython_extension here

Loading registers :class:`~.magics.AgentMagics`, the input transformer that makes a ``%%agent``
cell (or a lone ``%agent explain|fix`` line) an awaiting cell, the error log's and interrupts'
cell hooks, the displays of results, sessions and batches, the core's person who approves,
batch progress bar and runner, and the notebook capability's live notebook. Unloading removes each of them.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .magics import AgentMagics

__all__ = ["load_ipython_extension", "unload_ipython_extension", "CELL_FUNCTION"]

CELL_FUNCTION = "__bettong_agent_cell__"

_TURN_COMMAND = re.compile(r"%agent[ \t]+(explain|fix)\b[^\n]*")


def _awaiting(magics: AgentMagics) -> Callable[[list[str]], list[str]]:
    """An input transformer turning a %%agent cell, or a cell that is one %agent explain|fix
    line, into an awaiting one (when the mode is await)."""

    def transform(lines: list[str]) -> list[str]:
        first = lines[0] if lines else ""
        is_agent = first.startswith("%%agent") and first[7:8] in ("", " ", "\t", "\n")
        command = _TURN_COMMAND.fullmatch("".join(lines).strip())
        if not (is_agent or command) or first.rstrip().endswith("?") or magics.runner.mode() != "await":
            return lines  # %%agent? is help, left to IPython
        if CELL_FUNCTION not in magics.shell.user_ns:  # %reset cleared it
            magics.shell.push({CELL_FUNCTION: magics.agent_cell_async}, interactive=False)
        if command:
            return [f"await {CELL_FUNCTION}({command.group(0)[len('%agent'):].strip()!r}, None)\n"]
        line = first[len("%%agent"):].strip()
        return [f"await {CELL_FUNCTION}({line!r}, {''.join(lines[1:])!r})\n"]

    transform.bettong = True  # so unload finds it
    return transform


async def _open_notebook() -> Any:
    """The notebook capability's live notebook; its modules load at the first call, not at %load_ext."""
    from .live import open_notebook

    return await open_notebook()


def load_ipython_extension(ipython: Any) -> None:
    from ..batches import local as batch
    from ..core import _sync, approvals, hooks, kernel
    from ..core.results import RunResult
    from ..core.session import Session
    from ..records.terminal import result_text
    from . import exam_lock, interrupts
    from .display import batch_html, batch_text, result_html, session_html
    from .progress import WidgetProgress

    magics = AgentMagics(shell=ipython)
    ipython.register_magics(magics)
    ipython.input_transformers_cleanup.append(_awaiting(magics))
    ipython.push({CELL_FUNCTION: magics.agent_cell_async}, interactive=False)
    ipython.events.register("post_run_cell", magics.errors.record)
    ipython.events.register("pre_run_cell", interrupts.cell_started)
    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].for_type(RunResult, lambda result, printer, cycle: printer.text(result_text(result)))
    formatters["text/html"].for_type(RunResult, result_html)
    formatters["text/html"].for_type(Session, session_html)
    formatters["text/plain"].for_type(batch.Batch, lambda results, printer, cycle: printer.text(batch_text(results)))
    formatters["text/html"].for_type(batch.Batch, batch_html)
    approvals.install_person(magics.runner.ask_person)
    hooks.provide(open_notebook=_open_notebook)  # the notebook capability's live notebook
    batch.install_progress(WidgetProgress)
    _sync.install_runner(interrupts.cell_runner)  # Stop ends `await agent.arun(...)` in a cell too
    kernel.install_cell(magics.cells)  # each request and tool call records the cell it ran from
    exam_lock.install(ipython)  # the page's metadata counts for the exam lock too


def unload_ipython_extension(ipython: Any) -> None:
    from ..batches import local as batch
    from ..core import _sync, approvals, hooks, kernel
    from ..core.results import RunResult
    from ..core.session import Session
    from . import exam_lock, interrupts

    ipython.input_transformers_cleanup[:] = [t for t in ipython.input_transformers_cleanup
                                             if not getattr(t, "bettong", False)]
    for kind in ("line", "cell"):
        ipython.magics_manager.magics[kind].pop("agent", None)
    for magics in [c for c in ipython.configurables if isinstance(c, AgentMagics)]:
        ipython.events.unregister("post_run_cell", magics.errors.record)
    if interrupts.cell_started in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.unregister("pre_run_cell", interrupts.cell_started)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, AgentMagics)]
    ipython.user_ns.pop(CELL_FUNCTION, None)
    ipython.user_ns_hidden.pop(CELL_FUNCTION, None)
    formatters = ipython.display_formatter.formatters
    for mime, kind in (("text/plain", RunResult), ("text/html", RunResult), ("text/html", Session),
                       ("text/plain", batch.Batch), ("text/html", batch.Batch)):
        formatters[mime].pop(kind, None)
    approvals.install_person(None)
    hooks.provide(open_notebook=None)
    batch.install_progress(None)
    _sync.install_runner(None)
    kernel.install_cell(None)
    exam_lock.uninstall(ipython)
