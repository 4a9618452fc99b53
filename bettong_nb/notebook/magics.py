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
"""

from __future__ import annotations

import asyncio
import collections
import functools
import html
import importlib.util
import os
import re
import shlex
from typing import Any, Callable, Mapping

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Enum, Float, Int, Unicode

from ..safety.hidden import hides, is_frame, without_hidden
from ..safety.sanitize import visible_controls
from .display import answer_bundle
from .errorlog import ErrorLog
from .interpolation import interpolate
from .interrupts import guarded

__all__ = ["AgentMagics", "load_ipython_extension", "unload_ipython_extension", "CELL_FUNCTION", "RESULT_NAME",
           "SESSION_NAME", "FORMATS"]

CELL_FUNCTION = "__bettong_agent_cell__"
RESULT_NAME = "_agent_result"
SESSION_NAME = "_agent_session"
DEFAULT = "(default)"  # not an identifier, so no TARGET name can collide with it
FORMATS = ("markdown", "code", "text", "html")
HTML_REQUEST = ("\n\n(Answer as an HTML fragment: plain tags such as p, ul, table, code and pre; no Markdown, "
                "no scripts, no styles.)")
EXPLAIN = "A notebook cell raised the error below. Explain what went wrong and propose a fix."
FIX = ("A notebook cell raised the error below. Say in a sentence or two what went wrong, then give the "
       "corrected code of the whole cell as one ```{language} code block.")


def _muted(text: str) -> None:
    """One muted line in the cell (a note, never an error)."""
    from IPython.display import display

    display({"text/plain": text, "text/html": f"<div class='bettong-note' style='opacity:.7;font-size:12px'>"
                                              f"{html.escape(text)}</div>"}, raw=True)


def _appended(prompt: str | list, text: str) -> str | list:
    """``text`` at the end of a prompt: of its last text part, or a new part after an image."""
    if isinstance(prompt, str):
        return prompt + text
    if isinstance(prompt[-1], str):
        return [*prompt[:-1], prompt[-1] + text]
    return [*prompt, text.lstrip()]


# --- the magic ---------------------------------------------------------------------------------

class _Entry:
    """A session the magic keeps, and what it was made from (an agent, or the default config)."""

    __slots__ = ("session", "source", "kind")

    def __init__(self, session: Any, source: Any, kind: str):
        self.session, self.source, self.kind = session, source, kind


class _Plan:
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


@functools.cache
def _ipykernel_version() -> tuple[int, ...]:
    try:
        from importlib.metadata import version

        return tuple(int(p) for p in re.findall(r"\d+", version("ipykernel"))[:2])
    except Exception:
        return (0,)


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
        self.sessions: dict[str, _Entry] = {}
        self.tasks: set[asyncio.Task] = set()
        self.errors = ErrorLog(shell)  # {Err}: filled by the post_run_cell hook %load_ext installs

    # --- configuration and targets ----------------------------------------------------------

    def mode(self) -> str:
        if self.run_mode != "auto":
            return self.run_mode
        if getattr(self.shell, "kernel", None) is None:
            return "block"
        if _ipykernel_version() >= (7, 4) and getattr(self.shell, "autoawait", False):
            return "await"
        return "task"

    def _default_config(self) -> tuple:
        kind = self.provider
        if kind == "auto":
            kind = "deepseek" if os.environ.get("DEEPSEEK_API_KEY") else "offline"
        prices = tuple(sorted((self.prices or {}).items()))
        return kind, self.model, self.max_steps, prices

    def _default_agent(self, config: tuple) -> Any:
        from ..presets import deepseek, offline

        kind, model, max_steps, prices = config
        make = deepseek if kind == "deepseek" else offline
        return make(max_steps=max_steps, model=model, prices=dict(prices) if prices else None)

    def _default_session(self, *, new: bool = False) -> tuple[Any, list[str]]:
        from ..core.session import Session

        config = self._default_config()
        entry = self.sessions.get(DEFAULT)
        notes = []
        if entry is None or new:
            entry = self.sessions[DEFAULT] = _Entry(Session(self._default_agent(config)), config, DEFAULT)
        elif entry.source != config:
            entry.session.agent = self._default_agent(config)  # keep the conversation, swap the model
            entry.source = config
            notes.append(f"The default session now uses {config[0]}"
                         f"{f' ({config[1]})' if config[1] else ''}; the conversation continues.")
        if config[0] == "offline" and entry.session.turns == 0:
            notes.append("No DEEPSEEK_API_KEY: the default session uses the offline demo model.")
        return entry.session, notes

    def _target(self, name: str | None, *, new: bool = False) -> tuple[str, Any, list[str]]:
        """(name, session, notes) for a TARGET name; None means the default session."""
        from ..core.agent import Agent
        from ..core.session import Session

        if not name:
            session, notes = self._default_session(new=new)
            return DEFAULT, session, notes
        if not name.isidentifier():
            raise UsageError(f"TARGET must be the name of an Agent or Session in your namespace; got {name!r}. "
                             "Options start with --; see %%agent --help.")
        ns = self.shell.user_ns
        if name not in ns:
            raise UsageError(f"No agent or session named {name!r} in the namespace. Define it first, e.g. "
                             f"{name} = bettong_nb.deepseek() or {name} = bettong_nb.deepseek().session(); "
                             "or drop TARGET to use the default session.")
        value = ns[name]
        if isinstance(value, Session):
            if new:
                value.clear()
            return name, value, []
        if not isinstance(value, Agent) or isinstance(value, type):
            raise UsageError(f"{name!r} is a {type(value).__name__}, not an Agent or Session "
                             "(anything with run() and arun()).")
        entry = self.sessions.get(name)
        if entry is None or entry.source is not value or new:
            session = value.session() if hasattr(value, "session") else Session(value)
            entry = self.sessions[name] = _Entry(session, value, "agent")
        return name, entry.session, []

    # --- the cell -----------------------------------------------------------------------------

    @magic_arguments(name="%agent")
    @argument("target", nargs="?", metavar="TARGET",
              help="an Agent or Session in your namespace (default: the default session)")
    @argument("--new", action="store_true", help="start a fresh session (clears a Session TARGET)")
    @argument("--max-steps", type=int, metavar="N", help="model requests before giving up")
    @argument("--model", metavar="M", help="the model for this cell")
    @argument("--no-stream", action="store_true", help="show the answer when it is complete")
    @argument("--quiet", action="store_true",
              help="show nothing (approval prompts excepted); the result is in _agent_result / -o VAR")
    @argument("--approve", action="store_true", help="ask with buttons before every tool call")
    @argument("-o", "--out", metavar="VAR", help="also store the RunResult in VAR")
    @argument("-f", "--format", choices=FORMATS, default="markdown",
              help="markdown (default); code: also put the answer's code into a new cell below, not run; "
                   "text: the answer as plain text; html: ask for an HTML answer, shown sanitised")
    @argument("--data", metavar="DF1,DF2",
              help="DataFrames in your namespace the agent may query with SQL in this cell (a duckdb capability)")
    @argument("--no-interpolate", action="store_true", help="send the cell exactly as written")
    @cell_magic("agent")
    def agent_cell(self, line: str, cell: str) -> None:
        """Send the cell to an agent as a prompt; the answer streams into the cell.

        {name}, {name.attr} and {name[key]} are looked up in your namespace and replaced
        (a lookup, never code); {{text}} gives {text}; all other braces stay as written.
        {fig} of a matplotlib Figure, a PIL or IPython image (or {Out[n]} of one) is sent
        as an image. {Err} is the last error a cell raised (its code and traceback), {Err[n]}
        cell n's.
        The result is _agent_result (and VAR with -o); the session used is _agent_session.
        The default session is configured with %config AgentMagics (DeepSeek when
        DEEPSEEK_API_KEY is set, else the offline demo model). Line commands:
        %agent sessions | usage | tools | transcript | reset | explain | fix [TARGET]
        | save PATH [TARGET] | load PATH [TARGET].
        """
        plan = self._plan(line, cell)
        return None if plan is None else self._launch(plan)

    agent_cell.parser.allow_abbrev = False  # --max-step is a typo to point out, not a guess to make

    async def agent_cell_async(self, line: str, cell: str | None) -> None:
        """What an awaiting ``%%agent`` cell runs (ipykernel >= 7.4): the turn, then return.
        ``cell`` None: a ``%agent explain|fix`` line."""
        plan = self._plan(line, cell) if cell is not None else self._command_plan(line)
        if plan is None:
            return None
        self._start_views(plan)
        await guarded(self._execute(plan, background=False))
        return None

    def _launch(self, plan: _Plan) -> None:
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

    def _plan(self, line: str, cell: str) -> _Plan | None:
        words = line.split()
        if "-h" in words or "--help" in words:
            print(self.agent_cell.__doc__)
            return None
        try:
            args = parse_argstring(self.agent_cell, line)
        except UsageError as exc:
            raise UsageError(f"{exc} (see %%agent --help)") from None
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"-o/--out needs a variable name; got {args.out!r}")
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError(f"--max-steps must be at least 1; got {args.max_steps}")
        cell = cell.strip("\n")
        notes: list[str] = []
        prompt = cell if args.no_interpolate else interpolate(cell, self._namespace(), notes=notes)
        if isinstance(prompt, str) and not prompt.strip():  # a list of parts holds an image
            raise UsageError("The %%agent cell is empty: write the prompt below the %%agent line.")
        name, session, target_notes = self._target(args.target, new=args.new)
        overrides: dict[str, Any] = {"stream": self.stream and not args.no_stream}
        if args.max_steps is not None:
            overrides["max_steps"] = args.max_steps
        if args.model:
            overrides["model"] = args.model
        if args.format == "html":
            if importlib.util.find_spec("bettong_nb.safety.sanitize") is None:
                raise UsageError("-f html needs bettong_nb.safety.sanitize (the HTML sanitiser), which this installation "
                                 "lacks; use -f markdown")
            prompt = _appended(prompt, HTML_REQUEST)
        plan = _Plan(name, session, prompt, overrides, args.out, args.quiet, notes=target_notes + notes,
                     approve=args.approve, fmt=args.format)
        if args.data:
            plan.extra = self._data_capability(args.data, session)
            overrides["capabilities"] = [*session.options.capabilities, plan.extra]
            # A session keeps its first system prompt (the provider caches it), so the frames' SQL
            # guidance and table names go with this cell's prompt, on any cell of the session.
            plan.prompt = _appended(plan.prompt, "\n\n" + plan.extra.instructions)
            plan.extra.instructions = None
        self.shell.user_ns[SESSION_NAME] = session
        return plan

    def _namespace(self) -> Mapping[str, Any]:
        """What {name} fields see: the user's names, and Err (unless the user has their own)."""
        return collections.ChainMap(self.shell.user_ns, {"Err": self.errors})

    def _data_capability(self, names: str, session: Any) -> Any:
        """--data df1,df2: a duckdb capability over those DataFrames, for this cell only."""
        frames = {}
        for name in filter(None, (n.strip() for n in names.split(","))):
            if not name.isidentifier() or name not in self.shell.user_ns:
                raise UsageError(f"--data: no variable named {name!r} in your namespace")
            value = self.shell.user_ns[name]
            if hides(name, value):
                raise UsageError(f"--data: {name} is named like a credential, so what it holds is hidden from "
                                 "the agent (as the namespace capability hides it); rename it to query it")
            # what the namespace capability hides, SQL does not read: credential-named text columns
            frames[name] = without_hidden(value) if is_frame(value) else value
        if any(getattr(c, "id", None) == "duckdb" for c in session.options.capabilities):
            raise UsageError("--data adds a duckdb capability, and this target already has one: "
                             "pass the frames to its tables= instead")
        from ..capabilities import duckdb

        try:
            return duckdb(tables=frames)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--data: {exc}") from None

    def _command_plan(self, line: str) -> _Plan:
        """``%agent explain|fix [TARGET]``: the last error, with its cell's code, as a prompt."""
        command, *rest = _command_words(line)
        if len(rest) > 1:
            raise UsageError(f"%agent {command} takes one TARGET; got {' '.join(rest)!r}")
        try:
            error = str(self.errors)
        except LookupError as exc:
            raise UsageError(f"Nothing to {command}: {exc}.") from None
        name, session, notes = self._target(rest[0] if rest else None)
        ask = EXPLAIN if command == "explain" else FIX.format(language=self._language())
        self.shell.user_ns[SESSION_NAME] = session
        return _Plan(name, session, f"{ask}\n\n{error}", {"stream": self.stream}, None, False, notes=notes,
                     approve=False, fmt="code" if command == "fix" else "markdown")

    def _language(self) -> str:
        kernel = getattr(self.shell, "kernel", None)
        return (getattr(kernel, "language_info", None) or {}).get("name", "python")

    def approver(self, show: Callable[[Any], None] | None = None) -> Any:
        """The person who approves, as configured (%config AgentMagics): buttons in a kernel,
        y/N in a terminal IPython."""
        if self.mode() == "block":
            from ..core.approvals import ask_in_terminal

            return ask_in_terminal
        from .approvals import ButtonApprover

        return ButtonApprover(timeout=self.approval_timeout, headless=self.headless_policy, show=show)

    async def ask_person(self, request: Any) -> Any:
        """The person installed at %load_ext: buttons as configured now, shown where display() goes."""
        from ..core.approvals import decide

        return await decide(self.approver(), request)

    def _listener(self, plan: _Plan) -> Callable[[Any], None]:
        own = plan.session.options.on_event
        view = plan.view

        def on_event(event: Any) -> None:
            if view is not None:
                view(event)
            if own is not None:
                own(event)

        return on_event

    def _start_views(self, plan: _Plan) -> None:
        """Create the cell's displays now, while this cell is the one executing: a background
        task's later display() calls would land in whichever cell runs then. Approval prompts
        go into a container shown between the tool calls and the answer."""
        from .display import LiveView, PromptSlot

        for note in plan.notes:
            _muted(note)
        if not plan.quiet:
            plan.view = LiveView(prices=plan.session.prices, interval=self.update_interval, prompts=True)
            surface = plan.view.prompts
        else:
            surface = PromptSlot()
        # Prompts go into this cell's own slot, even when a background task shows them later.
        plan.approver = self.approver(surface)
        if plan.approve:
            plan.overrides["approve_fn"] = plan.approver
        plan.overrides["on_event"] = self._listener(plan)

    async def _execute(self, plan: _Plan, *, background: bool) -> Any:
        """The turn. A failure leaves no ``_agent_result`` and ends the view quietly: the cell's
        error says what happened, once (a background turn has no cell error, so its view says it)."""
        from ..core.approvals import person

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
            plan.close()
        self._publish(plan, result)
        if plan.view is not None:
            plan.view.finish(result, answer=answer_bundle(result.output, plan.fmt) if result.output else None)
        if plan.fmt == "code":
            self._code_cell(plan, result)
        return result

    def _code_cell(self, plan: _Plan, result: Any) -> None:
        """-f code: the answer's code blocks, joined, into ONE new cell below (never run: a kernel
        keeps only the last set_next_input of a cell)."""
        blocks = result.code_blocks(self._language())
        if not blocks:
            _muted(f"The answer has no {self._language()} code block; no cell was added.")
        elif plan.background:  # the cell has ended: the new cell would appear below a later one
            _muted("The code is not put in a new cell because this cell did not wait for the answer; "
                   "it is in _agent_result.code_blocks().")
        else:
            # a bidi control would lay the code out other than it runs ("Trojan Source"): shown
            self.shell.set_next_input(visible_controls("\n\n".join(blocks)), replace=False)
            _muted("The code is in a new cell below (not run).")

    def _run_blocking(self, plan: _Plan) -> None:
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

    def _publish(self, plan: _Plan, result: Any) -> None:
        self.shell.user_ns[RESULT_NAME] = result
        if plan.out:
            self.shell.user_ns[plan.out] = result

    # --- line commands ------------------------------------------------------------------------

    @line_magic("agent")
    def agent_command(self, line: str) -> Any:
        """Inspect and manage %%agent sessions.

          %agent sessions             the sessions %%agent keeps, and Sessions in your namespace
          %agent usage [TARGET]       one row per model request (a DataFrame)
          %agent tools [TARGET]       one row per tool call (a DataFrame)
          %agent transcript [TARGET]  the conversation, tool calls expandable
          %agent reset [TARGET]       forget the conversation (keeps the agent)
          %agent explain [TARGET]     explain the last error (its cell's code and traceback)
          %agent fix [TARGET]         the same, and the fixed code in a new cell below, not run
          %agent save PATH [TARGET]   write the conversation to PATH (JSON; secrets redacted)
          %agent load PATH [TARGET]   resume a saved conversation: the next %%agent TARGET cell continues it

        Without TARGET: the default session. Run a prompt with a %%agent cell (%%agent --help).
        Configure the default session with %config AgentMagics.
        """
        words = _command_words(line)
        if not words or words[0] in ("help", "-h", "--help"):
            print(self.agent_command.__doc__)
            return None
        command, rest = words[0], words[1:]
        commands = {"sessions": self._sessions, "usage": self._usage, "tools": self._tools,
                    "transcript": self._transcript, "reset": self._reset, "save": self._save, "load": self._load,
                    "explain": None, "fix": None}
        if command not in commands:
            raise UsageError(f"Unknown %agent command {command!r}. Commands: {', '.join(commands)}. "
                             "A prompt goes in a %%agent cell (two %).")
        unknown = [word for word in rest if word.startswith("-")] if command not in ("save", "load") else []
        if unknown:  # line commands take no options: name it rather than read it as a TARGET
            raise UsageError(f"%agent {command} has no option {unknown[0]}; see %agent --help")
        if command in ("save", "load"):
            if not 1 <= len(rest) <= 2:
                raise UsageError(f"%agent {command} takes PATH and an optional TARGET; got {' '.join(rest)!r}")
            return commands[command](*rest)
        if len(rest) > (0 if command == "sessions" else 1):
            raise UsageError(f"%agent {command} takes {'no argument' if command == 'sessions' else 'one TARGET'}; "
                             f"got {' '.join(rest)!r}")
        if commands[command] is None:  # explain, fix: a turn (an awaiting cell when the line is alone in it)
            return self._launch(self._command_plan(line))
        return commands[command](rest[0] if rest else None)

    def _existing(self, name: str | None) -> Any:
        if name is None:
            entry = self.sessions.get(DEFAULT)
            if entry is None:
                raise UsageError("No default session yet: run a %%agent cell first.")
            return entry.session
        return self._target(name)[1]

    def _usage(self, name: str | None) -> Any:
        return self._existing(name).usage_frame()

    def _tools(self, name: str | None) -> Any:
        return self._existing(name).tool_frame()

    def _transcript(self, name: str | None) -> Any:
        return self._existing(name)

    def _reset(self, name: str | None) -> None:
        if name is None and DEFAULT not in self.sessions:
            print("Nothing to reset: the default session has not run yet.")
            return None
        session = self._existing(name)
        turns = session.turns
        session.clear()
        print(f"Reset {name or 'the default session'}: {turns} turn{'' if turns == 1 else 's'} forgotten.")
        return None

    def _save(self, path: str, name: str | None = None) -> None:
        session = self._existing(name)
        try:
            written = session.save(os.path.expanduser(path))
        except OSError as error:
            raise _path_error("save", path, error) from None
        print(f"Saved {name or 'the default session'} ({session.turns} turn{'' if session.turns == 1 else 's'}) "
              f"to {written}")

    def _load(self, path: str, name: str | None = None) -> None:
        from ..records.saving import ResumeError
        from ..core.session import load_session

        name, session, _ = self._target(name)
        try:
            load_session(os.path.expanduser(path), session)
        except ResumeError as error:
            raise UsageError(str(error)) from None
        except OSError as error:
            raise _path_error("load", path, error) from None
        target = "" if name == DEFAULT else f" {name}"
        print(f"Loaded {path} into {target.strip() or 'the default session'} ({session.turns} turn"
              f"{'' if session.turns == 1 else 's'}): the next %%agent{target} cell continues it.")

    def _sessions(self, _: None) -> Any:
        import pandas as pd

        from ..core.session import Session

        rows, seen = [], set()
        for name, entry in self.sessions.items():
            rows.append((name, entry.kind, entry.session))
            seen.add(id(entry.session))
        for name, value in self.shell.user_ns.items():
            if isinstance(value, Session) and id(value) not in seen and not name.startswith("_"):
                rows.append((name, "session", value))
                seen.add(id(value))
        frame = pd.DataFrame(
            [{"name": n, "kind": k, "turns": s.turns, "messages": len(s.transcript), "requests": s.usage.requests,
              "total_tokens": s.usage.total_tokens, "tool_calls": len(s.tool_calls)} for n, k, s in rows],
            columns=["name", "kind", "turns", "messages", "requests", "total_tokens", "tool_calls"])
        return frame.astype({"turns": "int64", "messages": "int64", "requests": "int64", "total_tokens": "int64",
                             "tool_calls": "int64"})


def _command_words(line: str) -> list[str]:
    """A ``%agent`` line's words, quoted as a shell quotes them (``"my chat.json"`` is one word,
    without its quotes); a backslash stays a backslash, so Windows paths need no doubling."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.escape, lexer.commenters = True, "", ""
    try:
        return list(lexer)
    except ValueError as error:  # an unclosed quote
        raise UsageError(f"%agent {line.strip()}: {error}; quote a path with spaces as \"my chat.json\"") from None


def _path_error(command: str, path: str, error: OSError) -> UsageError:
    """What went wrong with the PATH of ``%agent save|load``, said of that path in a person's
    words (a folder where a file was meant, a folder that does not exist)."""
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(full):
        why = "it is a folder; name a file in it, e.g. " + os.path.join(path, "chat.json")
    elif not os.path.isdir(os.path.dirname(full)):
        why = f"its folder {os.path.dirname(full)} does not exist"
    else:
        why = error.strerror or str(error)
    return UsageError(f"%agent {command} {path}: {why}")


# --- loading -------------------------------------------------------------------------------------

_TURN_COMMAND = re.compile(r"%agent[ \t]+(explain|fix)\b[^\n]*")


def _awaiting(magics: AgentMagics) -> Callable[[list[str]], list[str]]:
    """An input transformer turning a %%agent cell, or a cell that is one %agent explain|fix
    line, into an awaiting one (when the mode is await)."""

    def transform(lines: list[str]) -> list[str]:
        first = lines[0] if lines else ""
        is_agent = first.startswith("%%agent") and first[7:8] in ("", " ", "\t", "\n")
        command = _TURN_COMMAND.fullmatch("".join(lines).strip())
        if not (is_agent or command) or first.rstrip().endswith("?") or magics.mode() != "await":
            return lines  # %%agent? is help, left to IPython
        if CELL_FUNCTION not in magics.shell.user_ns:  # %reset cleared it
            magics.shell.push({CELL_FUNCTION: magics.agent_cell_async}, interactive=False)
        if command:
            return [f"await {CELL_FUNCTION}({command.group(0)[len('%agent'):].strip()!r}, None)\n"]
        line = first[len("%%agent"):].strip()
        return [f"await {CELL_FUNCTION}({line!r}, {''.join(lines[1:])!r})\n"]

    transform.bettong = True  # so unload finds it
    return transform


def load_ipython_extension(ipython: Any) -> None:
    from ..core import _sync, approvals
    from ..batches import local as batch
    from ..core.results import RunResult
    from ..core.session import Session
    from ..records.terminal import result_text
    from . import interrupts
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
    approvals.install_person(magics.ask_person)
    batch.install_progress(WidgetProgress)
    _sync.install_runner(interrupts.cell_runner)  # Stop ends `await agent.arun(...)` in a cell too


def unload_ipython_extension(ipython: Any) -> None:
    from ..core import _sync, approvals
    from ..batches import local as batch
    from ..core.results import RunResult
    from ..core.session import Session
    from . import interrupts

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
    batch.install_progress(None)
    _sync.install_runner(None)
