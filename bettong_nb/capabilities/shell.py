"""The shell capability: one tool, ``run_shell``, that runs a bash command.

    agent = bettong_nb.openai(capabilities=[shell(root="/work/project", timeout=60)])

The result is ``exit N`` on the first line and the combined stdout/stderr after it; a
non-zero exit is a result, not an error. stdin is closed (``/dev/null``), so ``cat`` returns
at once. Output is trimmed, then cut to ``max_output`` characters (the first quarter and the
rest from the end, with a note of how much was cut), and it is read in bounded memory: a
command that prints gigabytes is drained until it finishes or times out, keeping only the
head and a ring-buffer tail.

Every command runs in its own process group. When the command returns, or when it overruns
``timeout`` seconds, the group gets SIGTERM, then SIGKILL after a short grace, so background
jobs (``cmd &``) never outlive the call; only a program that detaches itself (``setsid``)
survives. With ``strip_secrets`` (the default) credential-named variables are removed from
the child's environment. ``root`` confines only the starting directory, not what the command
can reach.

The refusal policy is a seatbelt, not a sandbox. It searches the command *text* for a few
catastrophic mistakes (:data:`DEFAULT_DENY`): recursive deletes or ``chmod``/``chown -R`` of
``/``, ``~`` and the top-level system directories, ``mkfs`` on a device, ``dd`` or
redirections onto a disk, ``shutdown``/``reboot``, fork bombs and ``curl | sh``. Anything
clever — ``eval``, variables, base64 — walks past it; a real boundary needs ``allow``, a
list of regexes of which at least one must be found in a command for it to run
(``allow=[]`` runs nothing). ``deny`` adds ``(regex, reason)`` pairs, checked before the
defaults.

Because the rules read the text, a dangerous command inside quotes is refused too:
``echo "rm -rf /"`` is a known false positive, kept because ``bash -c "rm -rf /"`` and
``ssh host 'rm -rf /'`` look the same. The machine-state words (``shutdown``, ``reboot``,
``poweroff``, ``halt``) are refused only where a command starts — at the beginning, after
``; & | ( { $(`` or a newline, at an opening quote, or behind ``sudo``/``env``/``nohup`` and
the like — so ``grep shutdown log.txt`` runs, while ``git commit -m "reboot fix"`` does not.
``dd of=/dev/null`` and the other pseudo-devices are allowed.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Iterable, Pattern

from .. import secrets
from ..capability import Tool

__all__ = ["Shell", "shell", "DEFAULT_DENY"]

_TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL for the command's process group
_EOF_GRACE = 1.0  # how long to wait for the last output once the group is dead

# --- the seatbelt -----------------------------------------------------------------------------

# The arguments of the command just matched: the rest of one simple command, read no further
# than 500 characters so that checking a long command stays linear.
_ARGS = r"[^|;&\n]{0,500}"
# `/`, `~`, $HOME or a top-level system directory, optionally with `/` or `/*`, as a whole word.
_TOP = (
    r"""["']?(?:/(?:(?:bin|boot|dev|etc|home|lib|lib32|lib64|libx32|opt|proc|root|run|sbin"""
    r"""|srv|sys|usr|var)\b)?|~|\$HOME\b|\$\{HOME\})["']?/*\*?["']?(?=\s|$|[;&|)])"""
)
_TARGETS_TOP = rf"(?={_ARGS}\s{_TOP})"
# A command word, not part of a longer word, a path or an option such as `docker run --rm`.
_WORD = r"(?<![\w.-])"
_DISK = r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|md\d|dm-\d|mapper/|loop\d|nbd\d)"
# Where a command starts, then the wrappers that run the next word as a command (`sudo -u root`,
# `env X=1`, `timeout 5`). A flag's value is never one of the words the rule looks for, so the
# wrappers have one reading, and the atomic group keeps a long command from backtracking.
_STOPPERS = r"(?:shutdown|reboot|poweroff|halt|systemctl|init|telinit)(?![\w.-])"
_COMMAND_START = (
    r"""(?:^|[;&|(){}`\n"']|\$\()\s*+(?>(?:"""
    r"(?:sudo|doas|exec|nohup|command|builtin|env|time|nice|ionice|xargs|eval|watch|timeout|then|do|else|!)"
    rf"(?:\s++-\S++(?:\s++(?!{_STOPPERS}|-)\S++)?)*+\s++|\w+=\S*+\s++|\d+(?:\.\d+)?[smhd]?\s++)*)"
    r"(?:\\|(?:/[\w.-]+)*/)?"
)
_SHELL = r"(?:ba|z|k|c|tc|da|fi|a)?sh\b"


def _rule(pattern: str, reason: str, flags: int = re.IGNORECASE) -> tuple[Pattern[str], str]:
    return re.compile(pattern, flags), reason


DEFAULT_DENY: tuple[tuple[Pattern[str], str], ...] = (
    _rule(
        rf"{_WORD}rm(?={_ARGS}\s(?:-[a-z]*r[a-z]*|--recursive|--no-preserve-root)(?=\s|$)){_TARGETS_TOP}"
        rf"|{_WORD}rm\s{_ARGS}--no-preserve-root",
        "recursive delete of /",
    ),
    _rule(rf"{_WORD}(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs)\s{_ARGS}/dev/", "formatting a filesystem"),
    _rule(
        rf"{_WORD}dd\s{_ARGS}\bof=[\"']?/dev/(?!(?:null|zero|full|random|urandom|stdout|stderr|tty)\b|fd/|pts/|shm/)"
        rf"|>\|?\s*[\"']?{_DISK}"
        rf"|{_WORD}(?:tee|shred)\s{_ARGS}{_DISK}"
        rf"|{_WORD}(?:cp|mv|install|pv)\s{_ARGS}\s[\"']?{_DISK}\w*[\"']?\s*(?=$|[;&|)])",
        "writing straight to a device",
    ),
    _rule(
        rf"{_COMMAND_START}(?:(?:shutdown|reboot|poweroff|halt)(?![\w.-])"
        rf"|systemctl(?:\s+-\S+)*\s+(?:poweroff|reboot|halt|kexec)(?![\w.-])|(?:tel)?init\s+[06](?![\w.-]))",
        "shutting the machine down",
    ),
    _rule(
        r"(?<!\w)(?P<f>:|\w++)\s*+\(\)\s*+\{[^}]{0,100}?(?P=f)\s*[|&]\s*(?P=f)[^}]{0,100}\}\s*;?\s*(?P=f)",
        "a fork bomb",
        flags=0,
    ),
    _rule(
        rf"{_WORD}(?:curl|wget)\s{_ARGS}\|\s*(?:sudo(?:\s+-\S+)*\s+)?(?:env\s+(?:\w+=\S*\s+)*)?(?:/[\w.-]+)*/?{_SHELL}"
        rf"|(?:\b{_SHELL}(?:\s+-\S+)*|\bsource|(?<![\w.])\.)\s+<\(\s*(?:curl|wget)\b"
        rf"|(?:\b{_SHELL}\s+-c|\beval)\s+[\"']?\$\(\s*(?:curl|wget)\b",
        "piping a download into a shell",
    ),
    _rule(
        rf"{_WORD}chmod(?={_ARGS}\s(?:[0-7]?[0-7]{{2}}[2367]|[ugoa]*[oa][ugoa]*[+=][rwxXst]*w[rwxXst]*)(?=\s))"
        rf"{_TARGETS_TOP}",
        "making / world-writable",
    ),
    _rule(
        rf"{_WORD}ch(?:mod|own|grp)(?={_ARGS}\s(?:(?-i:-[a-zA-Z]*R[a-zA-Z]*)|--recursive)(?=\s)){_TARGETS_TOP}",
        "recursively changing the permissions or owner of /",
    ),
)


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


# --- bounded output ---------------------------------------------------------------------------

def _cut_marker(cut: int) -> str:
    return f"\n... [{cut} characters truncated] ...\n"


class _Clip:
    """A string of any length kept as its first ``limit // 4`` and last remaining characters."""

    def __init__(self, limit: int):
        self.limit, self.head_size, self.tail_size = limit, limit // 4, limit - limit // 4
        self.head, self.tail, self.total = "", "", 0

    def add(self, text: str) -> None:
        if len(self.head) < self.head_size:
            self.head += text[: self.head_size - len(self.head)]
        self.tail = text[-self.tail_size :] if len(text) >= self.tail_size else (self.tail + text)[-self.tail_size :]
        self.total += len(text)

    def extend(self, other: _Clip) -> None:
        if other.total <= other.limit:
            self.add(other.value())
            return
        # other's middle is gone, but its head and tail hold all this clip can still need
        self.head += other.head[: self.head_size - len(self.head)]
        self.tail = other.tail
        self.total += other.total

    def value(self) -> str:
        if self.total <= len(self.tail):
            return self.tail
        if self.total <= self.limit:
            return self.head + self.tail[len(self.tail) - (self.total - len(self.head)) :]
        return self.head + _cut_marker(self.total - self.limit) + self.tail


class _Output:
    """Trims and truncates the output as it streams in: ``truncate(out.strip(), limit)``."""

    def __init__(self, limit: int):
        self._limit = limit
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._text = _Clip(limit)  # everything up to the last non-whitespace character
        self._blank = _Clip(limit)  # the whitespace after it: trimmed unless more text follows

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decode(data, final)
        if not self._text.total:
            text = text.lstrip()
        body = text.rstrip()
        if body:
            self._text.extend(self._blank)
            self._blank = _Clip(self._limit)
            self._text.add(body)
        self._blank.add(text[len(body) :])

    def value(self) -> str:
        self.feed(b"", final=True)
        return self._text.value()


class _Command(asyncio.SubprocessProtocol):
    def __init__(self, output: _Output):
        loop = asyncio.get_running_loop()
        self.output = output
        self.exited = loop.create_future()
        self.closed = loop.create_future()  # stdout reached EOF: nobody holds the pipe any more

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when nothing is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


async def _within(future: asyncio.Future, seconds: float) -> bool:
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


# --- the capability ---------------------------------------------------------------------------

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
        object.__setattr__(self, "_deny", _compile_deny(deny) + (DEFAULT_DENY if self.deny_defaults else ()))
        object.__setattr__(self, "_allow", None if allow is None else tuple(_compile(r, "allow") for r in allow))

    @property
    def instructions(self) -> str:
        parts = [
            "Shell commands run non-interactively in bash with stdin closed, so never run anything "
            f"that waits for input. A command is killed after {self.timeout:g} s, and its background "
            "jobs end when it returns."
        ]
        if self.deny_defaults:
            parts.append(
                "A seatbelt (not a sandbox) refuses a few catastrophic commands such as rm -rf /, mkfs, "
                'shutdown and curl | sh. It reads the command text, so even quoted text like echo "rm -rf /" '
                "is refused; do not work around a refusal."
            )
        if self._allow is not None:
            parts.append("This shell only runs commands matching its allowlist.")
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

    def refusal(self, command: str) -> str | None:
        """Why the policy refuses ``command``, or None when it may run."""
        if self._allow is not None and not any(p.search(command) for p in self._allow):
            return "this shell only runs commands matching its allowlist"
        return next((reason for pattern, reason in self._deny if pattern.search(command)), None)

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
        if (reason := self.refusal(command)) is not None:
            raise PermissionError(f"refused: {reason}; the command was not run")
        cwd = self.start_dir(dir)
        output = _Output(self.max_output)
        transport, proc = await asyncio.get_running_loop().subprocess_exec(
            lambda: _Command(output),
            "bash", "-c", command,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=cwd, env=secrets.stripped_env() if self.strip_secrets else None,
            start_new_session=True,  # its own process group, so one killpg reaches every child
        )
        pgid = transport.get_pid()
        try:
            finished = await _within(proc.exited, self.timeout)
            # whatever is left in the group now is a background job or the overrunning command
            if _signal_group(pgid, signal.SIGTERM):
                await _within(asyncio.gather(proc.exited, proc.closed), _TERM_GRACE)
                _signal_group(pgid, signal.SIGKILL)
            await _within(proc.closed, _EOF_GRACE)  # a detached process may still hold the pipe
            await _within(proc.exited, _EOF_GRACE)
        except BaseException:  # cancelled: no grace
            _signal_group(pgid, signal.SIGKILL)
            raise
        finally:
            transport.close()
        text = output.value()
        if not finished:
            raise TimeoutError(f"command timed out after {self.timeout:g} s and was killed\n{text}")
        code = transport.get_returncode()
        code = 128 - code if code < 0 else code  # killed by signal N reads as 128+N, as bash reports it
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
    concurrent: bool = False,
) -> Shell:
    """A capability with one tool, ``run_shell(command, dir?)``.

        shell()                                        # any command, from the current directory
        shell(root="proj", timeout=30)                 # starts in proj; dir may not leave it
        shell(allow=[r"^git (status|log|diff)\\b"])      # only these commands run
        shell(deny=[(r"\\bgit push\\b", "pushing is for humans")])

    Commands of one step run one after another, in the model's order (``mkdir d`` then
    ``ls d``; and any command may write); ``concurrent=True`` lets them run side by side, for a
    shell whose ``allow`` list only reads. The refusals are a seatbelt against accidents, not a
    sandbox: see the module docstring.
    """
    return Shell(
        root=None if root is None else os.fspath(root),
        timeout=timeout,
        max_output=max_output,
        strip_secrets=strip_secrets,
        deny=deny,
        deny_defaults=deny_defaults,
        allow=allow,
        concurrent=concurrent,
    )
