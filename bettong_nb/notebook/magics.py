"""``%%agent``: the cell is the prompt, the answer streams into the cell.

    %load_ext bettong_nb

    %%agent                      # the default session
    What is a bettong?

    %%agent chat --approve -o r  # chat: a Session in your namespace, or an Agent
    Summarise {report_path} and compare with {df}

    %agent usage                 # line commands: sessions, usage, tools, transcript, reset, save, load

TARGET. A Session continues. An Agent gets a session kept by the magic under that name (so
``%%agent bot`` cells form one conversation; ``--new`` or ``%agent reset bot`` starts over;
rebinding ``bot`` to another agent starts a new session). Without TARGET the default session
is used: DeepSeek when DEEPSEEK_API_KEY is set, else the offline demo model, which says so.

Configuration is traitlets, one convention for everything::

    %config AgentMagics.model = "deepseek-v4-pro"     # %config AgentMagics lists them all

or ``c.AgentMagics.model = ...`` in ipython_config.py. Changing the default session's provider,
model, max_steps or prices keeps its conversation and swaps its agent.

Interpolation. ``{name}``, ``{name.attr}`` and ``{name[key]}`` that resolve in the user
namespace are replaced by the value (a lookup, never code: no eval, no format specs; private
attributes and callables are not looked up). ``{{text}}`` gives ``{text}``. Anything else is sent
exactly as written, so pasted code keeps its braces. A DataFrame becomes a bounded preview.
``--no-interpolate`` sends the cell verbatim.

Names set in the user namespace: ``_agent_result`` (the last RunResult, also ``-o VAR``) and
``_agent_session`` (the session the last cell used).

How the cell waits. On ipykernel >= 7.4 a ``%%agent`` cell becomes an awaiting cell (an input
transformer rewrites it to ``await __bettong_agent_cell__(line, cell)``), so it stays busy until
the answer is complete and widget clicks (approvals) still get through. On older kernels the turn
runs as a task and the cell returns at once; ``await _agent_session.wait()`` joins it. In a
terminal the cell blocks until the answer is complete.
"""

from __future__ import annotations

import asyncio
import functools
import html
import os
import re
from typing import Any, Callable, Mapping

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Enum, Float, Int, Unicode

__all__ = ["AgentMagics", "interpolate", "load_ipython_extension", "unload_ipython_extension",
           "CELL_FUNCTION", "RESULT_NAME", "SESSION_NAME"]

CELL_FUNCTION = "__bettong_agent_cell__"
RESULT_NAME = "_agent_result"
SESSION_NAME = "_agent_session"
DEFAULT = "(default)"  # not an identifier, so no TARGET name can collide with it

# --- interpolation -----------------------------------------------------------------------------

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


@functools.cache
def _patterns() -> tuple[re.Pattern, re.Pattern]:
    # Compiled on first use: %load_ext stays cheap.
    field = re.compile(r"\{\{(?P<escaped>[^{}]*)\}\}|\{(?P<field>" + _IDENT + r"(?:\." + _IDENT
                       + r"|\[[^\[\]{}]*\])*)\}")
    part = re.compile(r"\.(" + _IDENT + r")|\[([^\[\]{}]*)\]")
    return field, part


PREVIEW_ROWS = 10
PREVIEW_CHARS = 4_000
VALUE_CHARS = 20_000


class _Unresolved(Exception):
    pass


def _key(text: str) -> Any:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _lookup(path: str, namespace: Mapping[str, Any]) -> Any:
    name = re.match(_IDENT, path).group(0)
    _, part = _patterns()
    if name not in namespace:
        raise _Unresolved(name)
    value = namespace[name]
    for attr, key in part.findall(path[len(name):]):
        if attr:
            if attr.startswith("_"):
                raise _Unresolved(attr)
            value = getattr(value, attr)
        else:
            value = value[_key(key)]
    if callable(value):
        raise _Unresolved(path)  # a function, class or method: most likely code, not data
    return value


def _is_frame(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and type(value).__name__ in ("DataFrame", "Series")


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def render_value(value: Any) -> str:
    """How a value reads in a prompt: strings as they are, a DataFrame as shape plus head."""
    if isinstance(value, str):
        return value
    if _is_frame(value):
        shape = " × ".join(str(n) for n in value.shape)
        kind = type(value).__name__
        head = value.head(PREVIEW_ROWS)
        head = head.to_string(max_cols=20, max_colwidth=60) if value.ndim == 2 else head.to_string()
        more = value.shape[0] - PREVIEW_ROWS
        tail = f"\n… ({more} more rows)" if more > 0 else ""
        return _cap(f"{kind} ({shape}):\n{head}{tail}", PREVIEW_CHARS)
    return _cap(str(value), VALUE_CHARS)


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}``, ``{name.attr}``, ``{name[key]}`` found in ``namespace``; ``{{x}}`` → ``{x}``;
    leave everything else exactly as written.

    >>> interpolate("{n} items, {missing}, {{n}}, f(){ return 1; }", {"n": 3})
    '3 items, {missing}, {n}, f(){ return 1; }'
    """

    def replace(match: re.Match) -> str:
        if match.group("escaped") is not None:
            return "{" + match.group("escaped") + "}"
        try:
            return render_value(_lookup(match.group("field"), namespace))
        except Exception:  # anything that does not resolve stays as the user wrote it
            return match.group(0)

    return _patterns()[0].sub(replace, text)


# --- the magic ---------------------------------------------------------------------------------

class _Entry:
    """A session the magic keeps, and what it was made from (an agent, or the default config)."""

    __slots__ = ("session", "source", "kind")

    def __init__(self, session: Any, source: Any, kind: str):
        self.session, self.source, self.kind = session, source, kind


class _Plan:
    """One %%agent cell, parsed and resolved, ready to run."""

    def __init__(self, name: str, session: Any, prompt: str, overrides: dict, out: str | None, quiet: bool,
                 notes: list[str], approve: bool):
        self.name, self.session, self.prompt, self.overrides = name, session, prompt, overrides
        self.out, self.quiet, self.notes, self.approve = out, quiet, notes, approve
        self.view: Any = None
        self.approver: Any = None  # who is asked in this cell (--approve, and tools that need a person)


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
        from ..session import Session

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
        from ..agent import Agent
        from ..session import Session

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
    @argument("--no-interpolate", action="store_true", help="send the cell exactly as written")
    @cell_magic("agent")
    def agent_cell(self, line: str, cell: str) -> None:
        """Send the cell to an agent as a prompt; the answer streams into the cell.

        {name}, {name.attr} and {name[key]} are looked up in your namespace and replaced
        (a lookup, never code); {{text}} gives {text}; all other braces stay as written.
        The result is _agent_result (and VAR with -o); the session used is _agent_session.
        The default session is configured with %config AgentMagics (DeepSeek when
        DEEPSEEK_API_KEY is set, else the offline demo model). Line commands:
        %agent sessions | usage [TARGET] | tools [TARGET] | transcript [TARGET] | reset [TARGET]
        | save PATH [TARGET] | load PATH [TARGET].
        """
        plan = self._plan(line, cell)
        if plan is None:
            return None
        mode = self.mode()
        if mode == "block":
            return self._run_blocking(plan)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._run_blocking(plan)  # await/task need the kernel's loop; without one, block
        self._start_views(plan)
        task = loop.create_task(self._execute(plan, background=True))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return None

    async def agent_cell_async(self, line: str, cell: str) -> None:
        """What an awaiting ``%%agent`` cell runs (ipykernel >= 7.4): the turn, then return."""
        plan = self._plan(line, cell)
        if plan is None:
            return None
        self._start_views(plan)
        task = asyncio.ensure_future(self._execute(plan, background=False))
        await task

    def _plan(self, line: str, cell: str) -> _Plan | None:
        words = line.split()
        if "-h" in words or "--help" in words:
            print(self.agent_cell.__doc__)
            return None
        args = parse_argstring(self.agent_cell, line)
        if args.out is not None and not args.out.isidentifier():
            raise UsageError(f"-o/--out needs a variable name; got {args.out!r}")
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError(f"--max-steps must be at least 1; got {args.max_steps}")
        cell = cell.strip("\n")
        prompt = cell if args.no_interpolate else interpolate(cell, self.shell.user_ns)
        if not prompt.strip():
            raise UsageError("The %%agent cell is empty: write the prompt below the %%agent line.")
        name, session, notes = self._target(args.target, new=args.new)
        overrides: dict[str, Any] = {"stream": self.stream and not args.no_stream}
        if args.max_steps is not None:
            overrides["max_steps"] = args.max_steps
        if args.model:
            overrides["model"] = args.model
        self.shell.user_ns[SESSION_NAME] = session
        return _Plan(name, session, prompt, overrides, args.out, args.quiet, notes=notes, approve=args.approve)

    def approver(self, show: Callable[[Any], None] | None = None) -> Any:
        """The person who approves, as configured (%config AgentMagics): buttons in a kernel,
        y/N in a terminal IPython."""
        if self.mode() == "block":
            from ..approvals import ask_in_terminal

            return ask_in_terminal
        from .approvals import ButtonApprover

        return ButtonApprover(timeout=self.approval_timeout, headless=self.headless_policy, show=show)

    async def ask_person(self, request: Any) -> Any:
        """The person installed at %load_ext: buttons as configured now, shown where display() goes."""
        from ..approvals import decide

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
        from IPython.display import display

        from .display import LiveView, PromptSlot

        for note in plan.notes:
            shown = f"<div style='opacity:.7;font-size:12px'>{html.escape(note)}</div>"
            display({"text/plain": note, "text/html": shown}, raw=True)
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
        from ..approvals import person

        try:
            with person(plan.approver):
                result = await plan.session.arun(plan.prompt, **plan.overrides)
        except asyncio.CancelledError:
            if plan.view is not None:
                plan.view.fail("⏹ interrupted: the turn was cancelled; the session is as it was before this cell")
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if plan.view is not None:
                plan.view.fail(f"✘ {message}")
            if background:
                print(f"%%agent {plan.name}: {message}")
                return None
            raise UsageError(message) from exc
        self._publish(plan, result)
        if plan.view is not None:
            plan.view.finish(result)
        return result

    def _run_blocking(self, plan: _Plan) -> None:
        from .._sync import run_sync
        from ..terminal import TextView

        for note in plan.notes:
            print(note)
        view = None if plan.quiet else TextView(stream=plan.overrides["stream"], prices=plan.session.prices)
        plan.view = view
        plan.overrides["on_event"] = self._listener(plan)
        if plan.approve:
            plan.overrides["approve_fn"] = self.approver()
        try:
            result = run_sync(plan.session.arun(plan.prompt, **plan.overrides))
        except KeyboardInterrupt:
            if view is not None:
                view.fail("⏹ interrupted: the session is as it was before this cell")
            raise
        except Exception as exc:
            raise UsageError(f"{type(exc).__name__}: {exc}") from exc
        self._publish(plan, result)
        if view is not None:
            view.finish(result)

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
          %agent save PATH [TARGET]   write the conversation to PATH (JSON; secrets redacted)
          %agent load PATH [TARGET]   resume a saved conversation: the next %%agent TARGET cell continues it

        Without TARGET: the default session. Run a prompt with a %%agent cell (%%agent --help).
        Configure the default session with %config AgentMagics.
        """
        words = line.split()
        if not words or words[0] in ("help", "-h", "--help"):
            print(self.agent_command.__doc__)
            return None
        command, rest = words[0], words[1:]
        commands = {"sessions": self._sessions, "usage": self._usage, "tools": self._tools,
                    "transcript": self._transcript, "reset": self._reset, "save": self._save, "load": self._load}
        if command not in commands:
            raise UsageError(f"Unknown %agent command {command!r}. Commands: {', '.join(commands)}. "
                             "A prompt goes in a %%agent cell (two %).")
        if command in ("save", "load"):
            if not 1 <= len(rest) <= 2:
                raise UsageError(f"%agent {command} takes PATH and an optional TARGET; got {' '.join(rest)!r}")
            return commands[command](*rest)
        if len(rest) > (0 if command == "sessions" else 1):
            raise UsageError(f"%agent {command} takes {'no argument' if command == 'sessions' else 'one TARGET'}; "
                             f"got {' '.join(rest)!r}")
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
        written = session.save(os.path.expanduser(path))
        print(f"Saved {name or 'the default session'} ({session.turns} turn{'' if session.turns == 1 else 's'}) "
              f"to {written}")

    def _load(self, path: str, name: str | None = None) -> None:
        from ..saving import ResumeError, load_session

        name, session, _ = self._target(name)
        try:
            load_session(os.path.expanduser(path), session)
        except (ResumeError, OSError) as error:
            raise UsageError(str(error)) from None
        target = "" if name == DEFAULT else f" {name}"
        print(f"Loaded {path} into {target.strip() or 'the default session'} ({session.turns} turn"
              f"{'' if session.turns == 1 else 's'}): the next %%agent{target} cell continues it.")

    def _sessions(self, _: None) -> Any:
        import pandas as pd

        from ..session import Session

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


# --- loading -------------------------------------------------------------------------------------

def _awaiting(magics: AgentMagics) -> Callable[[list[str]], list[str]]:
    """An input transformer turning a %%agent cell into an awaiting one (when the mode is await)."""

    def transform(lines: list[str]) -> list[str]:
        first = lines[0] if lines else ""
        is_agent = first.startswith("%%agent") and first[7:8] in ("", " ", "\t", "\n")
        if not is_agent or first.rstrip().endswith("?") or magics.mode() != "await":
            return lines  # %%agent? is help, left to IPython
        if CELL_FUNCTION not in magics.shell.user_ns:  # %reset cleared it
            magics.shell.push({CELL_FUNCTION: magics.agent_cell_async}, interactive=False)
        line = first[len("%%agent"):].strip()
        return [f"await {CELL_FUNCTION}({line!r}, {''.join(lines[1:])!r})\n"]

    transform.bettong = True  # so unload finds it
    return transform


def load_ipython_extension(ipython: Any) -> None:
    from .. import approvals, batch
    from ..results import RunResult
    from ..session import Session
    from ..terminal import result_text
    from .display import result_html, session_html
    from .progress import WidgetProgress

    magics = AgentMagics(shell=ipython)
    ipython.register_magics(magics)
    ipython.input_transformers_cleanup.append(_awaiting(magics))
    ipython.push({CELL_FUNCTION: magics.agent_cell_async}, interactive=False)
    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].for_type(RunResult, lambda result, printer, cycle: printer.text(result_text(result)))
    formatters["text/html"].for_type(RunResult, result_html)
    formatters["text/html"].for_type(Session, session_html)
    approvals.install_person(magics.ask_person)
    batch.install_progress(WidgetProgress)


def unload_ipython_extension(ipython: Any) -> None:
    from .. import approvals, batch
    from ..results import RunResult
    from ..session import Session

    ipython.input_transformers_cleanup[:] = [t for t in ipython.input_transformers_cleanup
                                             if not getattr(t, "bettong", False)]
    for kind in ("line", "cell"):
        ipython.magics_manager.magics[kind].pop("agent", None)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, AgentMagics)]
    ipython.user_ns.pop(CELL_FUNCTION, None)
    ipython.user_ns_hidden.pop(CELL_FUNCTION, None)
    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].pop(RunResult, None)
    formatters["text/html"].pop(RunResult, None)
    formatters["text/html"].pop(Session, None)
    approvals.install_person(None)
    batch.install_progress(None)
