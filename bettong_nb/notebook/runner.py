"""How a ``%%agent`` turn runs, in one of three modes, and what it leaves in the cell.

    runner = Runner(magics)          # reads run_mode, update_interval, approval_timeout, headless_policy
    runner.launch(plan)              # from a sync magic: task (kernel) or blocking (terminal)
    await runner.awaiting(plan)      # an awaiting cell (ipykernel >= 7.4)

- await: a cell rewritten to ``await __bettong_agent_cell__(...)`` stays busy until the answer is
  complete, and widget clicks (approvals) still get through;
- task: on older kernels the turn runs as a task on the kernel's loop and the cell returns at once
  (``await _agent_session.wait()`` joins);
- block: in a terminal the cell blocks until the answer is complete.

A finished turn sets ``_agent_result`` (and ``-o VAR``); a failed or interrupted one removes
``_agent_result`` and leaves VAR as it was.
"""

from __future__ import annotations

import asyncio
import functools
import html
import re
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..safety.sanitize import visible_controls
from .display import answer_bundle
from .interrupts import guarded

if TYPE_CHECKING:
    from .cells import CellFinder
    from .errorlog import ErrorLog
    from .sessions import Sessions

__all__ = ["Runner", "Plan", "RESULT_NAME", "SESSION_NAME", "kernel_language"]

RESULT_NAME = "_agent_result"
SESSION_NAME = "_agent_session"


class Plan:
    """One %%agent cell, parsed and resolved, ready to run."""

    def __init__(self, name: str, session: Any, prompt: str | list, overrides: dict, out: str | None, quiet: bool,
                 notes: list[str], approve: bool, fmt: str = "markdown"):
        self.name, self.session, self.prompt, self.overrides = name, session, prompt, overrides
        self.out, self.quiet, self.notes, self.approve, self.fmt = out, quiet, notes, approve, fmt
        self.view: Any = None
        self.approver: Any = None  # who is asked in this cell (--approve, and tools that need a person)
        self.extra: Any = None  # a capability made for this cell only (--data), closed after it
        self.background = False  # the cell returned before the turn (task mode)

    def close(self) -> None:
        closer = getattr(self.extra, "close", None)
        if callable(closer):
            closer()


def kernel_language(shell: Any) -> str:
    """The kernel's language name (``python`` in a terminal)."""
    kernel = getattr(shell, "kernel", None)
    return (getattr(kernel, "language_info", None) or {}).get("name", "python")


def muted(text: str) -> None:
    """One muted line in the cell (a note, never an error)."""
    from IPython.display import display

    display({"text/plain": text, "text/html": f"<div class='bettong-note' style='opacity:.7;font-size:12px'>"
                                              f"{html.escape(text)}</div>"}, raw=True)


@functools.cache
def _ipykernel_version() -> tuple[int, ...]:
    try:
        from importlib.metadata import version

        return tuple(int(p) for p in re.findall(r"\d+", version("ipykernel"))[:2])
    except Exception:
        return (0,)


class Settings(Protocol):
    """What a Runner reads of the magics configured with %config (AgentMagics): named here, so
    the modules the magics are made of need not import the class made of them."""

    shell: Any
    run_mode: str
    approval_timeout: float
    headless_policy: str
    update_interval: float


class Magics(Settings, Protocol):
    """What the cell magic and the line commands use of AgentMagics beside its settings."""

    sessions: Sessions
    runner: Runner
    errors: ErrorLog
    cells: CellFinder
    stream: bool


class Runner:
    """Runs plans as ``settings`` (the AgentMagics, configured with %config) says."""

    def __init__(self, settings: Settings):
        self.settings, self.shell = settings, settings.shell
        self.tasks: set[asyncio.Task] = set()

    def mode(self) -> str:
        if self.settings.run_mode != "auto":
            return self.settings.run_mode
        if getattr(self.shell, "kernel", None) is None:
            return "block"
        if _ipykernel_version() >= (7, 4) and getattr(self.shell, "autoawait", False):
            return "await"
        return "task"

    def approver(self, show: Callable[[Any], None] | None = None) -> Any:
        """The person who approves, as configured (%config AgentMagics): buttons in a kernel,
        y/N in a terminal IPython."""
        if self.mode() == "block":
            from ..core.approvals import ask_in_terminal

            return ask_in_terminal
        from .approvals import ButtonApprover

        return ButtonApprover(timeout=self.settings.approval_timeout, headless=self.settings.headless_policy,
                              show=show)

    async def ask_person(self, request: Any) -> Any:
        """The person installed at %load_ext: buttons as configured now, shown where display() goes."""
        from ..core.approvals import decide

        return await decide(self.approver(), request)

    # --- the three modes ------------------------------------------------------------------------

    async def awaiting(self, plan: Plan) -> None:
        """An awaiting cell: the turn, then return."""
        self._start_views(plan)
        await guarded(self._execute(plan, background=False))

    def launch(self, plan: Plan) -> None:
        """Run a plan from a sync magic: blocking in a terminal, else as a task on the kernel's loop
        (the cell returns at once; ``await _agent_session.wait()`` joins)."""
        if self.mode() == "block":
            return self._run_blocking(plan)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._run_blocking(plan)  # a task needs the kernel's loop; without one, block
        plan.background = True
        self._start_views(plan)
        task = loop.create_task(self._execute(plan, background=True))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return None

    def _run_blocking(self, plan: Plan) -> None:
        from ..core._sync import run_sync
        from ..records.terminal import TextView

        for note in plan.notes:
            print(note)
        view = None if plan.quiet else TextView(stream=plan.overrides["stream"], prices=plan.session.prices)
        plan.view = view
        plan.overrides["on_event"] = self._listener(plan)
        if plan.approve:
            plan.overrides["approve_fn"] = self.approver()
        try:
            result = run_sync(plan.session.arun(plan.prompt, **plan.overrides))
        except BaseException:
            self.shell.user_ns.pop(RESULT_NAME, None)
            raise  # user errors and interrupts show as one line, bugs with their traceback
        finally:
            plan.close()
        self._publish(plan, result)
        if view is not None:
            view.finish(result)
        if plan.fmt == "code":
            self._code_cell(plan, result)

    # --- what the modes share -------------------------------------------------------------------

    def _listener(self, plan: Plan) -> Callable[[Any], None]:
        own = plan.session.options.on_event
        view = plan.view

        def on_event(event: Any) -> None:
            if view is not None:
                view(event)
            if own is not None:
                own(event)

        return on_event

    def _start_views(self, plan: Plan) -> None:
        """Create the cell's displays now, while this cell is the one executing: a background
        task's later display() calls would land in whichever cell runs then. Approval prompts
        go into a container shown between the tool calls and the answer."""
        from .display import LiveView, PromptSlot

        for note in plan.notes:
            muted(note)
        if not plan.quiet:
            plan.view = LiveView(prices=plan.session.prices, interval=self.settings.update_interval, prompts=True)
            surface = plan.view.prompts
        else:
            surface = PromptSlot()
        # Prompts go into this cell's own slot, even when a background task shows them later.
        plan.approver = self.approver(surface)
        if plan.approve:
            plan.overrides["approve_fn"] = plan.approver
        plan.overrides["on_event"] = self._listener(plan)

    async def _execute(self, plan: Plan, *, background: bool) -> Any:
        """The turn. A failure leaves no ``_agent_result`` and ends the view quietly: the cell's
        error says what happened, once (a background turn has no cell error, so its view says it)."""
        from ..core.approvals import person
        from .proposals import PROMPT_CELL
        from .frontend import current_cell_id

        prompt_cell = PROMPT_CELL.set(current_cell_id())  # now, while this cell's request is the parent
        try:
            with person(plan.approver):
                result = await plan.session.arun(plan.prompt, **plan.overrides)
        except BaseException as exc:
            self.shell.user_ns.pop(RESULT_NAME, None)
            stopped = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
            told = None if stopped or not background else f"%%agent {plan.name}: {type(exc).__name__}: {exc}"
            if plan.view is not None:
                plan.view.fail(told, unfinished="interrupted" if stopped else "not finished")
            elif told:
                print(told)
            if background and not stopped and isinstance(exc, Exception):
                return None
            raise
        finally:
            PROMPT_CELL.reset(prompt_cell)
            plan.close()
        self._publish(plan, result)
        if plan.view is not None:
            plan.view.finish(result, answer=answer_bundle(result.output, plan.fmt) if result.output else None)
        if plan.fmt == "code":
            self._code_cell(plan, result)
        return result

    def _code_cell(self, plan: Plan, result: Any) -> None:
        """-f code: the answer's code blocks, joined, into ONE new cell below (never run: a kernel
        keeps only the last set_next_input of a cell)."""
        language = kernel_language(self.shell)
        blocks = result.code_blocks(language)
        if not blocks:
            muted(f"The answer has no {language} code block; no cell was added.")
        elif plan.background:  # the cell has ended: the new cell would appear below a later one
            muted("The code is not put in a new cell because this cell did not wait for the answer; "
                  "it is in _agent_result.code_blocks().")
        else:
            # a bidi control would lay the code out other than it runs ("Trojan Source"): shown
            self.shell.set_next_input(visible_controls("\n\n".join(blocks)), replace=False)
            muted("The code is in a new cell below (not run).")

    def _publish(self, plan: Plan, result: Any) -> None:
        self.shell.user_ns[RESULT_NAME] = result
        if plan.out:
            self.shell.user_ns[plan.out] = result
