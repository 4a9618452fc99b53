"""The ``%%agent`` cell: its options, and the cell read into a :class:`~.runner.Plan`.

    %%agent chat --approve -o r -f code --data df
    Summarise {report_path} and compare with {df}

:func:`agent_cell` is the magic Magics registers (its docstring is ``%%agent --help``);
:func:`cell_plan` parses the line, interpolates the cell and resolves TARGET, for any run mode.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import inspect
import os
import textwrap
from typing import Any, Callable, Mapping

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..core import policy
from ..safety.hidden import hides, is_frame, without_hidden
from .interpolation import interpolate
from .runner import SESSION_NAME, Magics, Plan

__all__ = ["agent_cell", "cell_plan", "did_you_mean", "FORMATS", "HTML_REQUEST"]

FORMATS = ("markdown", "code", "text", "html")
HTML_REQUEST = ("\n\n(Answer as an HTML fragment: plain tags such as p, ul, table, code and pre; no Markdown, "
                "no scripts, no styles.)")


def _appended(prompt: str | list, text: str) -> str | list:
    """``text`` at the end of a prompt: of its last text part, or a new part after an image."""
    if isinstance(prompt, str):
        return prompt + text
    if isinstance(prompt[-1], str):
        return [*prompt[:-1], prompt[-1] + text]
    return [*prompt, text.lstrip()]


def _with_options(function: Callable) -> Callable:
    """The %%agent options, read by :func:`parse_argstring` and listed in ``%%agent --help``."""
    options = [
        argument("target", nargs="?", metavar="TARGET",
                 help="an Agent or Session in your namespace (default: the default session)"),
        argument("--new", action="store_true", help="start a fresh session (clears a Session TARGET)"),
        argument("--max-steps", type=int, metavar="N", help="model requests before giving up"),
        argument("--model", metavar="M", help="the model for this cell"),
        argument("--no-stream", action="store_true", help="show the answer when it is complete"),
        argument("--quiet", action="store_true",
                 help="show nothing (approval prompts excepted); the result is in _agent_result / -o VAR"),
        argument("--approve", action="store_true", help="ask with buttons before every tool call"),
        argument("-o", "--out", metavar="VAR", help="also store the RunResult in VAR"),
        argument("-f", "--format", choices=FORMATS, default="markdown",
                 help="markdown (default); code: also put the answer's code into a new cell below, not run; "
                      "text: the answer as plain text; html: ask for an HTML answer, shown sanitised"),
        argument("--data", metavar="DF1,DF2,FOLDER/", nargs="?", const="",
                 help="DataFrames in your namespace, and at most one folder of data files (Parquet, CSV, JSON, "
                      "Excel), the agent may query with SQL in this cell, read-only (a duckdb capability)"),
        argument("--no-interpolate", action="store_true", help="send the cell exactly as written"),
        argument("--notebook", action="store_true",
                 help="the agent works in this notebook: reads its cells, proposes edits you accept or reject, "
                      "runs a cell when you allow it"),
    ]
    for add in reversed(options):  # as stacked decorators apply: the last one first
        function = add(function)
    function = magic_arguments(name="%agent")(function)
    parser = function.parser
    parser.allow_abbrev = False  # --max-step is a typo to point out, not a guess to make
    # IPython's help formatter starts with a reST "::" and puts the positional TARGET last; the
    # examples put it first, so the usage line does too.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    flags = parser.format_usage().split(None, 2)[2].replace("[TARGET]", "").split()
    # argparse formats the usage with %: "%%%%agent" prints as %%agent
    parser.usage = textwrap.fill(" ".join(["%%%%agent", "[TARGET]", *flags]), 90, subsequent_indent="        ")
    parser.description = inspect.cleandoc(parser.description or "")
    function.__doc__ = parser.format_help()
    function.option_names = [name for add in options for name in add.args if name.startswith("-")]
    return function


@_with_options
def agent_cell(magics: Magics, line: str, cell: str) -> None:
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
    | save PATH [TARGET] | load PATH [TARGET] | policy.
    """
    plan = cell_plan(magics, line, cell)
    return None if plan is None else magics.runner.launch(plan)


def did_you_mean(word: str, known: list[str]) -> str:
    """`` (did you mean --approve?)`` for a typo close to one known word, else nothing."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _did_you_mean(message: str, options: list[str]) -> str:
    """For "unrecognized arguments: --aprove", the option it is closest to."""
    if "unrecognized arguments:" not in message:
        return ""
    words = message.split("unrecognized arguments:", 1)[1].split()
    return "".join(did_you_mean(word, options) for word in words if word.startswith("-"))


def cell_plan(magics: Magics, line: str, cell: str) -> Plan | None:
    """The cell's plan; None when the line asks for help (which is printed)."""
    policy.check_notebook(policy.current())  # the exam lock: nothing of the cell is read first
    words = line.split()
    if "-h" in words or "--help" in words:
        print(agent_cell.__doc__)
        return None
    try:
        args = parse_argstring(agent_cell, line)
    except UsageError as exc:
        raise UsageError(f"{exc}{_did_you_mean(str(exc), agent_cell.option_names)} (see %%agent --help)") from None
    if args.out is not None and not args.out.isidentifier():
        raise UsageError(f"-o/--out needs a variable name; got {args.out!r}")
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1; got {args.max_steps}")
    cell = cell.strip("\n")
    notes: list[str] = []
    prompt = cell if args.no_interpolate else interpolate(cell, _namespace(magics), notes=notes)
    if isinstance(prompt, str) and not prompt.strip():  # a list of parts holds an image
        raise UsageError("The %%agent cell is empty: write the prompt below the %%agent line.")
    if pictures := sum(1 for part in prompt if not isinstance(part, str)) if isinstance(prompt, list) else 0:
        notes.append(f"{pictures} image{'s' if pictures > 1 else ''} sent with the prompt")
    name, session, target_notes = magics.sessions.target(args.target, new=args.new)
    overrides: dict[str, Any] = {"stream": magics.stream and not args.no_stream}
    if args.max_steps is not None:
        overrides["max_steps"] = args.max_steps
    if args.model:
        overrides["model"] = args.model
    if args.format == "html":
        prompt = _appended(prompt, HTML_REQUEST)
    plan = Plan(name, session, prompt, overrides, args.out, args.quiet, notes=target_notes + notes,
                approve=args.approve, fmt=args.format)
    if args.data is not None:
        plan.extra = _data_capability(magics, args.data, session)
        overrides["capabilities"] = [*session.options.capabilities, plan.extra]
        # A session keeps its first system prompt (the provider caches it), so the frames' SQL
        # guidance and table names go with this cell's prompt, on any cell of the session.
        plan.prompt = _appended(plan.prompt, "\n\n" + plan.extra.instructions)
        plan.extra.instructions = None
    if args.notebook:
        overrides["capabilities"] = _with_notebook(overrides.get("capabilities", session.options.capabilities))
        # As with --data: the session's first system prompt stays, so the guidance goes with the cell.
        plan.prompt = _appended(plan.prompt, "\n\n" + overrides["capabilities"][-1].instructions)
        overrides["capabilities"][-1].instructions = None
    magics.shell.user_ns[SESSION_NAME] = session
    return plan


def _namespace(magics: Magics) -> Mapping[str, Any]:
    """What {name} fields see: the user's names, and Err (unless the user has their own)."""
    return collections.ChainMap(magics.shell.user_ns, {"Err": magics.errors})


def _with_notebook(capabilities: list) -> list:
    """--notebook: the notebook capability, editing and running, beside the target's own."""
    if any(getattr(c, "id", None) == "notebook" for c in capabilities):
        raise UsageError("--notebook adds a notebook capability, and this target already has one")
    from ..capabilities import notebook

    return [*capabilities, notebook(edit=True, run=True)]


DATA_USAGE = ("--data names what the agent may query with SQL in this cell: DataFrames in your namespace "
              "and at most one folder of data files, comma-separated: --data sales,targets or --data data/ "
              "or --data sales,data/")


def _data_capability(magics: Magics, names: str, session: Any) -> Any:
    """--data df1,df2,folder/: a duckdb capability over those DataFrames and that folder (read-only),
    for this cell only. A word that ends in / or names a folder is a folder."""
    frames, folders = {}, []
    words = [word.strip() for word in names.split(",") if word.strip()]
    if not words:
        raise UsageError(DATA_USAGE)
    for word in words:
        if word.endswith("/") or os.path.isdir(os.path.expanduser(word)):
            if not os.path.isdir(os.path.expanduser(word)):
                raise UsageError(f"--data: no folder {word!r} (relative to {os.getcwd()})")
            folders.append(os.path.expanduser(word))
        elif not word.isidentifier() or word not in magics.shell.user_ns:
            raise UsageError(f"--data: no variable named {word!r} in your namespace, and no folder by that name. "
                             + DATA_USAGE)
        else:
            value = magics.shell.user_ns[word]
            if hides(word, value):
                raise UsageError(f"--data: {word} is named like a credential, so what it holds is hidden from "
                                 "the agent (as the namespace capability hides it); rename it to query it")
            # what the namespace capability hides, SQL does not read: credential-named text columns
            frames[word] = without_hidden(value) if is_frame(value) else value
    if len(folders) > 1:
        raise UsageError(f"--data takes one folder at most; got {', '.join(folders)}")
    if any(getattr(c, "id", None) == "duckdb" for c in session.options.capabilities):
        raise UsageError("--data adds a duckdb capability, and this target already has one: "
                         "pass the frames to its tables= instead")
    from ..capabilities import duckdb

    try:
        return duckdb(root=folders[0] if folders else None, tables=frames)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--data: {exc}") from None
