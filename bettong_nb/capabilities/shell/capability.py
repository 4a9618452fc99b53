"""The shell capability: one tool, ``run_shell``, that runs a bash command.

    agent = bettong_nb.openai(capabilities=[shell(root="/work/project", timeout=60)])
    shell(allow=[r"^git (status|log|diff)\\b"]).refusal("git status; cat /etc/passwd")
    # 'this shell only runs commands matching its allowlist ("cat /etc/passwd" does not match)'

The result is ``exit N`` on the first line and the combined stdout/stderr after it; a
non-zero exit is a result, not an error. stdin is closed (``/dev/null``), so ``cat`` returns
at once. Output is trimmed, redacted, then cut to ``max_output`` characters (the first quarter
and the rest from the end, with a note of how much was cut) — redacted *before* it is cut, so
a secret astride the cut is redacted whole. It is read in bounded memory: a command that
prints gigabytes is drained until it finishes or times out, keeping only a head and a tail.

**Processes.** Where the OS allows it (Linux with util-linux's ``unshare`` and ``setpriv`` and
user namespaces, as an ordinary user or as root), each command runs in its own user, PID and
mount namespaces (``isolate=True``, the default), with every capability dropped: it sees only
its own processes in ``/proc`` and cannot undo that (``umount /proc``, a new proc mount,
``nsenter``, a nested ``unshare``, ``chroot`` all fail), so it cannot read the Python process's
(or any ancestor's) ``environ``, ``cmdline`` or ``mem``, where credentials stripped from its own
environment still sit; and when bash returns or overruns ``timeout``, everything it started
dies with the namespace, however it detached (``setsid``, ``nohup``, ``disown``, double forks,
``set -m``). The price: ``ps`` shows only the command's own processes, it cannot signal others,
setuid programs (``sudo``) gain nothing, and root is root in name only: it holds no capability
(it cannot mount, load modules, bind ports below 1024 or override file permissions: it reads and
writes what user 0 owns, or what the mode lets anyone). ``isolate=False`` runs commands beside
the kernel. Each then runs in a cgroup (v2) of its own where this process may make one below its
own cgroup (root, or a systemd-delegated user slice), and everything left in it is killed, however
it detached; only a process allowed to move itself to another cgroup (root) escapes that.
Without such a cgroup every descendant is tracked by its session, parent and a marker in its
environment, and killed: a process that clears its environment *and* leaves the session and
its parent (``env -i setsid -f cmd``, an ``env -i`` double fork with ``setsid``) is not found
and outlives the call. Without namespaces (macOS, containers that forbid ``unshare``, ``isolate=False``) a
command *can* read the environment of the kernel's ancestors and, as root, of the kernel; the
Python process is marked non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``), which stops a command
of the same non-root user from reading its ``/proc`` entries (measured) but not root.
:func:`isolation` says which applies here, and the capability's instructions tell the model.
With ``strip_secrets`` (the default) the child's environment keeps every variable but those
that hold a credential (:func:`~bettong_nb.secrets.stripped_env`): a credential-like name
(``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*AUTH*``, …), or a value holding a URL
password (``DATABASE_URL=postgres://u:pw@db``), a known token shape (``sk-…``, ``ghp_…``,
``AKIA…``, a JWT, a PEM key) or a value redaction hides — removed, not redacted, since a
command can print a value in any spelling (``rev``, ``${URL#*:*:}``, a few characters at a
time). ``root`` confines only the starting directory, not what the command can reach.

**Policy.** Each command is parsed as bash (quotes, escapes, ``$(…)``, backticks, ``<(…)``,
here-documents, subshells, groups, loops, functions, …) into the simple commands it runs,
including those that wrappers run for it (``sudo``, ``env``, ``xargs``, ``find -exec``,
``nohup``, ``timeout``, …) and the strings that ``bash -c``, ``eval``, ``su -c``, ``ssh host``,
``watch`` and ``trap`` run. What the parser cannot read with confidence is refused.

* ``allow``: a list of regexes; a command runs only if it is static (:mod:`.static`: every word
  known before bash runs it, quotes and plain words only, no expansion, assignment, glob, loop
  variable, ``[[ ]]``, function or builtin that evaluates text or defines names) and **every**
  simple command in it is matched by one of them (``re.search`` on that command's text, so
  anchor with ``^`` and ``$``): ``git status; cat /etc/passwd`` is refused by
  ``allow=[r"^git (status|log|diff)\\b"]``, as are ``git log $(cat x)``, ``echo ${_@P}`` (a
  parameter expansion: the reason names it), ``sudo git status`` (``sudo …`` must match too),
  ``bash -c "$x"`` and ``curl … | sh``. A group's or loop's redirections (``{ …; } > f`` is
  matched as ``> f``) and every redirection that writes a file must match on their own.
  ``allow=[]`` runs nothing. An allowed program can still do what it does: allowing ``find``,
  ``xargs`` or a shell allows what they run only if that matches too, but allowing ``python``
  allows any Python.
* ``deny``: ``(regex, reason)`` pairs, searched in the whole command and in each simple command
  in it (``^rm\\b`` also refuses ``ls; sudo rm x``); checked before the defaults.
* The defaults (:data:`DEFAULT_DENY`, a seatbelt, not a sandbox) refuse a few catastrophic
  mistakes, whatever the spelling: recursive deletes of ``/``, ``~``, a home or top-level system
  directory, or everything in one (``rm -rf /usr/../usr``, ``//``, ``/*/``, ``/?*``, ``/{bin,usr}``,
  ``$HOME``, ``${HOME%/*}``, ``${x:-/}``, ``/proc/self/root/usr``, ``--no-preserve-root``,
  ``find / -delete``, ``find / -name '*' -delete``, ``xargs rm -rf <<< /``, ``cd / && rm -rf *``);
  ``mkfs*``, ``wipefs``, partition editors (``sgdisk``, ``sfdisk``, ``parted``, ``fdisk``, unless
  they only list) and the like on a device; writing to a disk device (``dd of=``, redirections,
  ``tee``, ``cp`` onto ``/dev/sd*``, ``/dev/nvme*``, ``/dev/disk/by-id/…``, ``/dev/mapper/…``);
  ``shutdown``/``reboot``/``halt``/``systemctl poweroff``/``kill -9 -1``/``/proc/sysrq-trigger``;
  fork bombs (a function that runs itself in a pipeline, the background or a subshell, whatever
  its name; an endless loop of background jobs); running a download (``curl … | sh``,
  ``bash <(curl …)``, ``sh -c "$(curl …)"``, ``curl -o x.sh … && sh x.sh``, ``bash /dev/stdin``,
  ``source /dev/stdin``, ``> >(sh)``, ``tee >(sh)``, ``xargs -0 bash -c``); ``chmod`` making
  those directories world-writable, and recursive ``chmod``/``chown``/``chgrp`` of them.
  Bash's operators on ``HOME``, ``PWD`` and ``USER`` are evaluated (``${HOME:?}``, ``${HOME%/*}``,
  ``${PWD:0:5}``), an unknown variable's default counts (``${x:-/}``), ``/proc/<pid>/root/`` is
  ``/``, and what the seatbelt cannot read where a rule looks is refused, never taken for "no
  paths": a brace expansion too large to list (but a group of plain names stands as ``*``), an
  operator it does not evaluate, ``$OLDPWD``, a path through another process's cwd or an open
  descriptor (``/dev/fd/3/usr``). ``find`` narrows only by a test that can be false and is not
  negated (``-name '*'``, ``! -name x`` and tests in another ``-o`` branch narrow nothing).
  Variables other than those, functions that take their targets as arguments, ``eval`` of
  computed text, base64, and programs that act through their own languages (``python -c``)
  walk past it. A quoted argument that reads like a command line is checked as one too, since
  ``ssh``, ``docker exec`` and so many others run theirs: ``echo "rm -rf /"`` is refused, a known
  false positive.

Test a policy with :meth:`Shell.refusal` without running anything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Pattern

from ...safety import secrets
from ...core.capability import Tool
from .bash import BashSyntaxError
from .seatbelt import DEFAULT_DENY, refused
from .process import isolation_kind, run
from .reading import read
from .static import file_writes, not_static

__all__ = ["Shell", "shell", "DEFAULT_DENY", "isolation"]

_ALLOWLIST = "this shell only runs commands matching its allowlist"


def isolation() -> str:
    """How commands are kept apart from this process here: ``"namespaces"`` (user, PID and
    mount), ``"pid namespace"`` (PID and mount, for root where user namespaces are off) or
    ``"none"``. In namespaces a command holds no capabilities, so it cannot undo them."""
    return isolation_kind()


def _compile_deny(deny: Iterable) -> tuple[tuple[Pattern[str], str], ...]:
    rules = []
    for entry in deny:
        if isinstance(entry, (str, bytes, re.Pattern)) or len(entry) != 2:
            raise ValueError(f"deny takes (regex, reason) pairs, got {entry!r}")
        regex, reason = entry
        rules.append((_compile(regex, "deny"), reason or "denied by policy"))
    return tuple(rules)


def _compile(regex: str | Pattern[str], option: str) -> Pattern[str]:
    try:
        return re.compile(regex)
    except (re.error, TypeError) as exc:
        raise ValueError(f"{option} regex {regex!r} does not compile: {exc}") from None


@dataclass(frozen=True)
class Shell:
    """Runs bash commands for the model; build it with :func:`shell`."""

    root: str | None = None
    timeout: float = 120
    max_output: int = 20000
    strip_secrets: bool = True
    deny: tuple = ()
    deny_defaults: bool = True
    allow: tuple | None = None
    isolate: bool = True
    concurrent: bool = False
    id: str = field(default="shell", init=False)
    _deny: tuple = field(init=False, repr=False, compare=False)
    _allow: tuple | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or self.timeout <= 0:
            raise ValueError(f"timeout is in seconds and must be positive, got {self.timeout!r}")
        if isinstance(self.max_output, bool) or not isinstance(self.max_output, int) or self.max_output < 1:
            raise ValueError(f"max_output must be a positive number of characters, got {self.max_output!r}")
        if isinstance(self.allow, (str, re.Pattern)):
            raise ValueError("allow takes a list of regexes, not a single one")
        deny = tuple(self.deny)
        allow = None if self.allow is None else tuple(self.allow)
        object.__setattr__(self, "deny", deny)
        object.__setattr__(self, "allow", allow)
        object.__setattr__(self, "_deny", _compile_deny(deny))
        object.__setattr__(self, "_allow", None if allow is None else tuple(_compile(r, "allow") for r in allow))

    @property
    def instructions(self) -> str:
        parts = [
            "Shell commands run non-interactively in bash with stdin closed, so never run anything "
            f"that waits for input. A command is killed after {self.timeout:g} s, and everything it "
            "starts, background jobs included, ends when it returns."
        ]
        kind = isolation_kind() if self.isolate else "none"
        if kind == "none":
            parts.append("Commands are not isolated from the other processes on this machine.")
        else:
            parts.append("Each command runs in its own process namespace: ps shows only its own processes.")
        if self.deny_defaults:
            parts.append(
                "A seatbelt (not a sandbox) refuses a few catastrophic commands such as rm -rf /, mkfs, "
                'shutdown and curl | sh. It also reads quoted text, so even echo "rm -rf /" '
                "is refused; do not work around a refusal."
            )
        if self._allow is not None:
            parts.append("This shell only runs static commands matching its allowlist: plain and quoted "
                         "words only (no $ expansions, substitutions, globs, assignments, loops or "
                         "functions: quote special characters), every command in a pipeline or list "
                         "must match, and so must a redirection that writes a file.")
        return " ".join(parts)

    @property
    def tools(self) -> list[Tool]:
        return [
            Tool(
                name="run_shell",
                handler=self.run_shell,
                concurrent=self.concurrent,
                description=(
                    "Run a bash command. Returns the exit code on the first line, then the combined "
                    "stdout and stderr. Use it for things the other tools can't do."
                ),
                parameters={
                    "command": {"type": "string", "description": "The bash command to run.", "required": True},
                    "dir": {
                        "type": "string",
                        "description": "Directory to run in, relative to the shell's root if it has one. "
                        "Default: the root, or the current directory.",
                    },
                },
            )
        ]

    def refusal(self, command: str, *, dir: str | None = None) -> str | None:
        """Why the policy refuses ``command`` (run from ``dir``), or None when it may run.
        Nothing is run: use it to test an allow/deny policy.

            shell(allow=[r"^ls\\b"]).refusal("ls && reboot")
            # 'this shell only runs commands matching its allowlist ("reboot" does not match)'
        """
        if self._allow is None and not self._deny and not self.deny_defaults:
            return None
        try:
            reading = read(command, cwd=self._policy_dir(dir), home=os.path.expanduser("~"))
        except BashSyntaxError as exc:
            if self._allow is None and not self.deny_defaults:  # the user's regexes can still read it
                return next((reason for pattern, reason in self._deny if pattern.search(command)), None)
            return f"the policy cannot read this command ({exc}), so it does not run it"
        if self._allow is not None:
            if (why := not_static(reading)) is not None:
                return why
            for call in reading.calls:
                if call.runs and not any(p.search(call.text) for p in self._allow):
                    if call.text.strip() == command.strip():
                        return _ALLOWLIST
                    return f"{_ALLOWLIST} ({call.text!r} does not match)"
            for text in file_writes(reading):
                if not any(p.search(text) for p in self._allow):
                    return f"{_ALLOWLIST} ({text!r} writes a file, and a write must match on its own)"
            if reading.unreadable:
                return f"{_ALLOWLIST}, and {reading.unreadable[0]}"
        texts = [command, *(call.text for call in reading.calls)]
        for pattern, reason in self._deny:
            if any(pattern.search(text) for text in texts):
                return reason
        return refused(reading) if self.deny_defaults else None

    def _policy_dir(self, dir: str | None) -> str | None:
        base = os.getcwd() if self.root is None else self.root
        return os.path.realpath(os.path.join(base, "." if dir is None else str(dir)))

    def start_dir(self, dir: str | None = None) -> str:
        """The real path a command starts in: ``dir`` under the root, which it may not leave."""
        dir = "." if dir is None else str(dir)
        if not dir.strip():
            raise ValueError("dir must not be blank")
        base = os.getcwd() if self.root is None else self.root
        path = os.path.realpath(os.path.join(base, dir))
        if self.root is not None:
            root = os.path.realpath(self.root)
            if os.path.commonpath([root, path]) != root:
                raise PermissionError(f"{dir} escapes the allowed root {self.root}")
        if not os.path.isdir(path):
            raise FileNotFoundError(f"No such directory: {path}")
        return path

    async def run_shell(self, command: str | None = None, dir: str | None = None) -> str:
        """Run ``command``; return ``exit N`` and its output, or raise when refused or timed out."""
        command = "" if command is None else str(command)
        if not command.strip():
            raise ValueError("command must not be blank")
        if dir is not None and not str(dir).strip():
            raise ValueError("dir must not be blank")
        if (reason := self.refusal(command, dir=dir)) is not None:
            raise PermissionError(f"refused: {reason}; the command was not run")
        cwd = self.start_dir(dir)
        env = secrets.stripped_env() if self.strip_secrets else dict(os.environ)
        finished, code, text = await run(command, cwd=cwd, env=env, timeout=self.timeout,
                                         limit=self.max_output, isolate=self.isolate)
        if not finished:
            raise TimeoutError(f"command timed out after {self.timeout:g} s and was killed\n{text}")
        return f"exit {code}\n{text or '(no output)'}"


def shell(
    *,
    root: str | os.PathLike | None = None,
    timeout: float = 120,
    max_output: int = 20000,
    strip_secrets: bool = True,
    deny: Iterable[tuple[str | Pattern[str], str | None]] = (),
    deny_defaults: bool = True,
    allow: Iterable[str | Pattern[str]] | None = None,
    isolate: bool = True,
    concurrent: bool = False,
) -> Shell:
    """A capability with one tool, ``run_shell(command, dir?)``.

        shell()                                        # any command, from the current directory
        shell(root="proj", timeout=30)                 # starts in proj; dir may not leave it
        shell(allow=[r"^git (status|log|diff)\\b"])      # only these commands run, every one of them
        shell(deny=[(r"\\bgit push\\b", "pushing is for humans")])
        shell(isolate=False)                           # no namespaces: ps and kill see the machine

    Commands of one step run one after another, in the model's order (``mkdir d`` then
    ``ls d``; and any command may write); ``concurrent=True`` lets them run side by side, for a
    shell whose ``allow`` list only reads. The refusals are a seatbelt against accidents, not a
    sandbox: see the module docstring. ``shell(...).refusal(command)`` says whether a command
    would be refused, and why.
    """
    return Shell(
        root=None if root is None else os.fspath(root),
        timeout=timeout,
        max_output=max_output,
        strip_secrets=strip_secrets,
        deny=deny,
        deny_defaults=deny_defaults,
        allow=allow,
        isolate=isolate,
        concurrent=concurrent,
    )
