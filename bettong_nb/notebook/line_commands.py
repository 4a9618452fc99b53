"""The ``%agent`` line commands, one function each, dispatched from :data:`COMMANDS`.

    %agent usage bot          # COMMANDS["usage"](magics, "usage", ["bot"])

A command is ``function(magics, command, words)`` (``words``: the line's words after the
command); it reads its own words with the helpers here (:func:`_target_of`, ...) and returns what
the cell shows. To add one, write the function and put it in COMMANDS (the order there is the
order ``%agent`` lists them in), and add its line to :func:`agent_command`'s docstring.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Callable

from IPython.core.error import UsageError

from ..core import policy as course_policy
from .cell_magic import did_you_mean
from .cells import usage_by_cell
from .runner import SESSION_NAME, Magics, Plan, kernel_language
from .sessions import DEFAULT

__all__ = ["agent_command", "turn_plan", "line_turn_plan", "COMMANDS", "EXPLAIN", "FIX"]

EXPLAIN = "A notebook cell raised the error below. Explain what went wrong and propose a fix."
FIX = ("A notebook cell raised the error below. Say in a sentence or two what went wrong, then give the "
       "corrected code of the whole cell as one ```{language} code block.")


def agent_command(magics: Magics, line: str) -> Any:
    """Inspect and manage %%agent sessions.

      %agent sessions             the sessions %%agent keeps, and Sessions in your namespace
      %agent usage [TARGET]       one row per model request (a DataFrame)
      %agent usage [TARGET] --by cell   tokens and cost per notebook cell, its first line beside it
      %agent tools [TARGET]       one row per tool call (a DataFrame)
      %agent transcript [TARGET]  the conversation, tool calls expandable
      %agent reset [TARGET]       forget the conversation (keeps the agent)
      %agent explain [TARGET]     explain the last error (its cell's code and traceback)
      %agent fix [TARGET]         the same, and the fixed code in a new cell below, not run
      %agent save PATH [TARGET]   write the conversation to PATH (JSON; secrets redacted)
      %agent load PATH [TARGET]   resume a saved conversation: the next %%agent TARGET cell continues it
      %agent history [PATH]       the cells agents wrote or changed in this notebook (or PATH): when, model, who accepted
      %agent policy               the course policy in force, the file each rule came from, and the exam lock

    Without TARGET: the default session. Run a prompt with a %%agent cell (%%agent --help).
    Configure the default session with %config Magics.
    """
    words = _command_words(line)
    if not words or words[0] in ("help", "-h", "--help"):
        print(agent_command.__doc__)
        return None
    command, rest = words[0], words[1:]
    if command != "policy":  # what applies stays visible under the exam lock: it says why
        course_policy.check_notebook(course_policy.current())
    if command not in COMMANDS:
        raise UsageError(f"Unknown %agent command {command!r}{did_you_mean(command, list(COMMANDS))}. "
                         f"Commands: {', '.join(COMMANDS)}. "
                         "A prompt goes in a %%agent cell (two %).")
    return COMMANDS[command](magics, command, rest)


# --- reading a command's words ----------------------------------------------------------------

def _command_words(line: str) -> list[str]:
    """A ``%agent`` line's words, quoted as a shell quotes them (``"my chat.json"`` is one word,
    without its quotes); a backslash stays a backslash, so Windows paths need no doubling."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.escape, lexer.commenters = True, "", ""
    try:
        return list(lexer)
    except ValueError as error:  # an unclosed quote
        raise UsageError(f"%agent {line.strip()}: {error}; quote a path with spaces as \"my chat.json\"") from None


def _no_options(command: str, words: list[str]) -> None:
    """Line commands take no options: name one rather than read it as a TARGET."""
    unknown = [word for word in words if word.startswith("-")]
    if unknown:
        raise UsageError(f"%agent {command} has no option {unknown[0]}; see %agent --help")


def _one_target(command: str, words: list[str]) -> str | None:
    if len(words) > 1:
        raise UsageError(f"%agent {command} takes one TARGET; got {' '.join(words)!r}")
    return words[0] if words else None


def _target_of(command: str, words: list[str]) -> str | None:
    """The optional TARGET of ``%agent COMMAND [TARGET]``."""
    _no_options(command, words)
    return _one_target(command, words)


def _path_and_target(command: str, words: list[str]) -> tuple[str, str | None]:
    """``%agent COMMAND PATH [TARGET]`` (a PATH may start with -)."""
    if not 1 <= len(words) <= 2:
        raise UsageError(f"%agent {command} takes PATH and an optional TARGET; got {' '.join(words)!r}")
    return words[0], words[1] if len(words) == 2 else None


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


def _turns(session: Any) -> str:
    return f"{session.turns} turn{'' if session.turns == 1 else 's'}"


# --- the commands -----------------------------------------------------------------------------

def sessions(magics: Magics, command: str, words: list[str]) -> Any:
    _no_options(command, words)
    if words:
        raise UsageError(f"%agent {command} takes no argument; got {' '.join(words)!r}")
    return magics.sessions.table()


def usage(magics: Magics, command: str, words: list[str]) -> Any:
    """``%agent usage [TARGET] [--by cell]``: one row per request, or per notebook cell."""
    if "--by" not in words:
        return magics.sessions.existing(_target_of(command, words)).usage_frame()
    at = words.index("--by")
    if words[at + 1:at + 2] != ["cell"]:
        raise UsageError("%agent usage --by takes one grouping, cell: %agent usage [TARGET] --by cell")
    session = magics.sessions.existing(_target_of(command, words[:at] + words[at + 2:]))
    return usage_by_cell(session, magics.cells.lines)


def tools(magics: Magics, command: str, words: list[str]) -> Any:
    return magics.sessions.existing(_target_of(command, words)).tool_frame()


def transcript(magics: Magics, command: str, words: list[str]) -> Any:
    return magics.sessions.existing(_target_of(command, words))


def reset(magics: Magics, command: str, words: list[str]) -> None:
    name = _target_of(command, words)
    if name is None and DEFAULT not in magics.sessions.entries:
        print("Nothing to reset: the default session has not run yet.")
        return None
    session = magics.sessions.existing(name)
    turns = _turns(session)
    session.clear()
    print(f"Reset {name or 'the default session'}: {turns} forgotten.")
    return None


def save(magics: Magics, command: str, words: list[str]) -> None:
    path, name = _path_and_target(command, words)
    session = magics.sessions.existing(name)
    try:
        written = session.save(os.path.expanduser(path))
    except OSError as error:
        raise _path_error(command, path, error) from None
    print(f"Saved {name or 'the default session'} ({_turns(session)}) to {written}")


def load(magics: Magics, command: str, words: list[str]) -> None:
    from ..records.saving import ResumeError, load_session

    path, name = _path_and_target(command, words)
    name, session, _ = magics.sessions.target(name)
    try:
        load_session(os.path.expanduser(path), session)
    except ResumeError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise _path_error(command, path, error) from None
    target = "" if name == DEFAULT else f" {name}"
    print(f"Loaded {path} into {target.strip() or 'the default session'} ({_turns(session)}): "
          f"the next %%agent{target} cell continues it.")


def history(magics: Magics, command: str, words: list[str]) -> Any:
    """The notebook's provenance entries: the saved file's, and this kernel's accepted changes."""
    from .live import saved_path
    from .history import COLUMNS, notebook_history
    from .proposals import accepted_log

    _no_options(command, words)
    if len(words) > 1:
        raise UsageError(f"%agent {command} takes one PATH; got {' '.join(words)!r}")
    path = os.path.expanduser(words[0]) if words else saved_path(magics.shell)
    if path is None:
        import pandas as pd

        print("This kernel does not know its notebook's file: the changes accepted in this kernel only "
              "(%agent history PATH reads a saved notebook).")
        return pd.DataFrame([{c: e.get(c) for c in COLUMNS} for e in accepted_log], columns=COLUMNS)
    try:
        return notebook_history(path, also=[] if words else accepted_log)
    except ValueError as error:
        raise UsageError(f"%agent {command}: {error}") from None


def turn(magics: Magics, command: str, words: list[str]) -> None:
    """explain, fix: a turn, run as a %%agent cell's (an awaiting cell when the line is alone in it)."""
    _no_options(command, words)
    return magics.runner.launch(turn_plan(magics, command, words))


def turn_plan(magics: Magics, command: str, words: list[str]) -> Plan:
    """``%agent explain|fix [TARGET]``: the last error, with its cell's code, as a prompt."""
    target = _one_target(command, words)
    try:
        error = str(magics.errors)
    except LookupError as exc:
        raise UsageError(f"Nothing to {command}: {exc}.") from None
    name, session, notes = magics.sessions.target(target)
    ask = EXPLAIN if command == "explain" else FIX.format(language=kernel_language(magics.shell))
    magics.shell.user_ns[SESSION_NAME] = session
    return Plan(name, session, f"{ask}\n\n{error}", {"stream": magics.stream}, None, False, notes=notes,
                approve=False, fmt="code" if command == "fix" else "markdown")


def line_turn_plan(magics: Magics, line: str) -> Plan:
    """The plan of an ``explain|fix [TARGET]`` line (an awaiting cell's)."""
    command, *words = _command_words(line)
    return turn_plan(magics, command, words)


def policy(magics: Magics, command: str, words: list[str]) -> None:
    """``%agent policy``: each rule in force and the file it came from, and whether this
    notebook is locked."""
    _no_options(command, words)
    if words:
        raise UsageError(f"%agent {command} takes no argument; got {' '.join(words)!r}")
    rules = course_policy.current()
    if rules is None:
        print(f"No course policy: {course_policy.ENV} is not set and no {course_policy.FILENAME} "
              "is in the Jupyter config folders (jupyter --paths).")
    else:
        print("Course policy (the files merge, the stricter rule winning):")
        for rule, value, source in rules.rows():
            print(f"  {rule} = {value}    from {source}")
    lock = course_policy.notebook_lock(rules)
    where = course_policy.notebook_path() or "unknown (nobody told the kernel; its folder counts)"
    print(f"This notebook: {where}; {lock or 'agents allowed'}.")


COMMANDS: dict[str, Callable[[Magics, str, list[str]], Any]] = {
    "sessions": sessions, "usage": usage, "tools": tools, "transcript": transcript, "reset": reset,
    "save": save, "load": load, "history": history, "explain": turn, "fix": turn, "policy": policy,
}
