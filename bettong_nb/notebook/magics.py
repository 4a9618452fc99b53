"""``%%agent``: the cell is the prompt, the answer streams into the cell.

    %load_ext bettong_nb

    %%agent                      # the default session
    What is a bettong?

    %%agent chat --approve -o r  # chat: a Session in your namespace, or an Agent
    Summarise {report_path} and compare with {df}

    %%agent -f code              # the answer's code lands in a new cell below, not run
    Write a function that reads {path} into a DataFrame

    %agent usage                 # line commands: sessions, usage, tools, transcript, reset, save, load
    %agent explain               # the last error explained; %agent fix: the fix in a new cell

TARGET. A Session continues. An Agent gets a session kept by the magic under that name (so
``%%agent bot`` cells form one conversation; ``--new`` or ``%agent reset bot`` starts over;
rebinding ``bot`` to another agent starts a new session). Without TARGET the default session
is used: DeepSeek when DEEPSEEK_API_KEY is set, else the offline demo model, which says so.

Configuration is traitlets, one convention for everything::

    %config AgentMagics.model = "deepseek-v4-pro"     # %config AgentMagics lists them all

or ``c.AgentMagics.model = ...`` in ipython_config.py. Changing the default session's provider,
model, max_steps or prices keeps its conversation and swaps its agent.

Interpolation (:mod:`bettong_nb.notebook.interpolation`). ``{name}``, ``{name.attr}`` and
``{name[key]}`` that resolve in the user namespace are replaced by the value (a lookup, never
code). ``{{text}}`` gives ``{text}``. Anything else is sent exactly as written, so pasted code
keeps its braces; a field that looks like a variable but is not defined gets one muted line in
the cell. A DataFrame becomes a bounded preview; an image (``{fig}`` of a matplotlib Figure, a
PIL or IPython image, a bettong_nb.Image, or ``{Out[n]}`` of one) is sent as an image. ``{Err}``
is the last error a cell raised (its code and traceback, :mod:`bettong_nb.notebook.errorlog`),
``{Err[n]}`` cell n's.
``--no-interpolate`` sends the cell verbatim.

Formats (``-f``): ``markdown`` (default); ``code`` also puts the answer's code blocks (in the
kernel's language, or unlabelled), joined by a blank line, into ONE new cell below, never run;
``text`` shows the answer as plain text; ``html`` asks the model for an HTML answer and shows
it sanitised. ``--data df1,df2`` lets the agent query those DataFrames with SQL for this cell
(a duckdb capability beside the target's own).

Names set in the user namespace: ``_agent_result`` (the last RunResult, also ``-o VAR``) and
``_agent_session`` (the session the last cell used). A cell that fails or is interrupted
removes ``_agent_result`` (so it never holds an older cell's answer) and leaves ``VAR`` as it was.

Errors show once: a mistake that is yours to fix (a missing key, an unknown option, a bad
base_url, a cassette that does not match) as one line, a bug with its traceback. The stop
button ends a running cell within a second, whatever it waits on, with one line
("interrupted — the session is unchanged"); the session is as it was before the cell.

How the cell waits. On ipykernel >= 7.4 a ``%%agent`` cell becomes an awaiting cell (an input
transformer rewrites it to ``await __bettong_agent_cell__(line, cell)``), so it stays busy until
the answer is complete and widget clicks (approvals) still get through. On older kernels the turn
runs as a task and the cell returns at once; ``await _agent_session.wait()`` joins it. In a
terminal the cell blocks until the answer is complete.

Where it lives: this module is :class:`AgentMagics`, the configurable IPython registers (its
traits, and the sessions, runner and error log it holds); the cell is in
:mod:`~bettong_nb.notebook.cell_magic`, the line commands in
:mod:`~bettong_nb.notebook.line_commands`, the run modes in :mod:`~bettong_nb.notebook.runner`,
the kept sessions in :mod:`~bettong_nb.notebook.sessions`, ``%load_ext`` in
:mod:`~bettong_nb.notebook.extension`.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, Dict, Enum, Float, Int, Unicode

from . import exam_lock
from .cell_magic import agent_cell, cell_plan
from .cells import CellFinder
from .errorlog import ErrorLog
from .line_commands import agent_command, line_turn_plan
from .runner import Runner
from .sessions import Sessions

__all__ = ["AgentMagics"]


@magics_class
class AgentMagics(Magics):
    """The ``%%agent`` cell magic and ``%agent`` line commands (see the module doc)."""

    provider = Enum(["auto", "deepseek", "offline"], default_value="auto",
                    help="Default session's model: auto = DeepSeek when DEEPSEEK_API_KEY is set, "
                         "else the offline demo model.").tag(config=True)
    model = Unicode(None, allow_none=True, help="Default session's model name (None: the provider's default)."
                    ).tag(config=True)
    max_steps = Int(10, help="Default session's max_steps.").tag(config=True)
    prices = Dict(None, allow_none=True, help="Default session's prices per million tokens: "
                  "{'input': ..., 'output': ..., 'cache_hit': ...}.").tag(config=True)
    stream = Bool(True, help="Stream answers into the cell (--no-stream turns it off per cell).").tag(config=True)
    approval_timeout = Float(300.0, help="Seconds an approval prompt waits for a click before the "
                             "headless policy decides.").tag(config=True)
    headless_policy = Enum(["deny", "allow"], default_value="deny",
                           help="What an approval does with no widget frontend or no decision in time."
                           ).tag(config=True)
    run_mode = Enum(["auto", "await", "task", "block"], default_value="auto",
                    help="How a cell waits: await (ipykernel >= 7.4), task (older kernels: the cell returns, "
                         "await _agent_session.wait() joins), block (terminal). auto picks.").tag(config=True)
    update_interval = Float(0.1, help="Seconds between live display updates.").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any):
        super().__init__(shell=shell, **kwargs)
        self.sessions = Sessions(shell, self.default_config)
        self.runner = Runner(self)
        self.errors = ErrorLog(shell)  # {Err}: filled by the post_run_cell hook %load_ext installs
        self.cells = CellFinder(shell)  # the cell a run starts from (%load_ext installs it)

    # The two magics IPython registers; each is written out in its own module.
    agent_cell = cell_magic("agent")(agent_cell)
    agent_command = line_magic("agent")(agent_command)

    async def agent_cell_async(self, line: str, cell: str | None) -> None:
        """What an awaiting ``%%agent`` cell runs (ipykernel >= 7.4): the turn, then return.
        ``cell`` None: a ``%agent explain|fix`` line."""
        await exam_lock.refresh()  # the page's metadata, read now: the exam lock as it stands
        plan = cell_plan(self, line, cell) if cell is not None else line_turn_plan(self, line)
        if plan is None:
            return None
        await self.runner.awaiting(plan)
        return None

    def default_config(self) -> tuple:
        """The default session's (provider, model, max_steps, prices), as configured now."""
        kind = self.provider
        if kind == "auto":
            kind = "deepseek" if os.environ.get("DEEPSEEK_API_KEY") else "offline"
        prices = tuple(sorted((self.prices or {}).items()))
        return kind, self.model, self.max_steps, prices
