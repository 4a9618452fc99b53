# Our own reader, not a parser library: on tests/corpora (2026-12) it finds every command of shell_split 65/65 and refuses shell_unreadable 37/37; bashlex 31/65 and 34/37 (6x slower to parse), tree-sitter-bash 33/65 and 28/37 (7x faster to parse, but keeps going past errors).
"""What a bash command line runs, read from its syntax tree, for the shell policy.

    reading = read("sudo rm -rf / && bash -c 'reboot'", cwd="/work", home="/root")
    [c.text for c in reading.calls]   # ['sudo rm -rf /', 'rm -rf /', "bash -c 'reboot'", 'reboot']

A :class:`Call` is one program run with its arguments: every simple command, anywhere (in
substitutions, subshells, function bodies, loops), and every command a wrapper runs for it —
``sudo``/``env``/``nohup``/``timeout``/``xargs``/``find -exec``/… run their arguments, ``bash -c``,
``eval``, ``su -c``, ``ssh host``, ``watch`` and ``trap`` run a string, and a shell fed a
here-document or an ``echo`` runs that text. Text a command only *mentions* — a quoted argument
that reads like a command line, a here-document given to ``cat`` — is read too, as calls with
``runs=False``: the seatbelt looks at it, the allowlist does not. :attr:`Reading.unreadable`
lists what runs but cannot be known from the text (``bash -c "$x"``, ``curl … | sh``).
"""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from .bash import BashSyntaxError, Command, Compound, Function, Pipeline, Redirect, Script, Word, parse

__all__ = ["Call", "Reading", "read", "program", "patterns", "glob", "everything", "escape", "Unreadable", "gnu_args",
           "find_actions", "DOWNLOADERS"]

_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})
MAX_NESTING = 8  # a string run by a string run by …: deeper is unreadable
MAX_WRAPPERS = 32  # sudo env nohup timeout …: more in one command is unreadable

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "lksh", "pdksh"})
OTHER_SHELLS = frozenset({"fish", "csh", "tcsh", "nu", "elvish", "xonsh", "pwsh"})
DOWNLOADERS = frozenset({"curl", "wget", "wget2", "fetch", "http", "https", "xh", "xhs", "lwp-request",
                         "get", "aria2c"})
_INTERPRETER = re.compile(r"(?:python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|deno|bun|php[0-9.]*"
                          r"|lua[0-9.]*|luajit|tclsh[0-9.]*|rscript|osascript|jshell|groovy|julia)")
_INLINE_FLAGS = {"python": "cm", "pypy": "cm", "perl": "eE", "ruby": "e", "node": "ep", "nodejs": "ep",
                 "deno": "", "bun": "e", "php": "rR", "lua": "e", "luajit": "e", "rscript": "e",
                 "osascript": "e", "julia": "e"}


@dataclass(eq=False)
class Call:
    """One program run: ``argv`` (program first; empty for assignments or redirections alone)."""
    argv: list[Word]
    text: str  # what the allow and deny regexes read
    command: Command  # the simple command it came from: its redirections and assignments
    cwd: str | None  # the directory it runs in, when the text says
    runs: bool = True  # False: text a command only mentions
    output_runs: bool = False  # its output is run as code (curl … | sh, bash <(curl …))
    runs_download: bool = False  # it runs a file a download in the same command wrote
    function: str | None = None  # the function whose body it is in
    forks: bool = False  # in a pipeline, in the background or in a subshell within that body
    conditional: bool = False  # behind an if, a case, a loop, && or || within that body
    placeholder: list[Word] | None = None  # what find's {} stands for, when it is every file
    wrapped: int = 0  # how many wrappers (sudo, env, xargs, …) run it

    @cached_property
    def program(self) -> str | None:
        return program(self.argv[0]) if self.argv else None


@dataclass(eq=False)
class Reading:
    home: str  # the home directory ~ and $HOME stand for
    calls: list[Call] = field(default_factory=list)
    redirects: list[tuple[Redirect, str | None]] = field(default_factory=list)  # with the directory they apply in
    loops: list[Compound] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # run, but not knowable from the text
    scripts: list[Script] = field(default_factory=list)  # the line itself, then each string it runs


def read(command: str, *, cwd: str | None, home: str) -> Reading:
    """Everything ``command`` runs and mentions; raises BashSyntaxError if it is not readable."""
    reader = _Reader(Reading(home))
    script = parse(command)
    reader.reading.scripts.append(script)
    reader.script(script, cwd, runs=True, depth=0)
    return reader.reading


def program(word: Word) -> str | None:
    """The program a word names: ``/usr/bin/rm`` and ``\\rm`` are ``rm``; None if it expands."""
    value = word.value
    return None if value is None else value.rsplit("/", 1)[-1].lower()


# --- arguments ----------------------------------------------------------------------------------

def gnu_args(words: list[Word], short_values: str = "", long_values: frozenset = frozenset(),
             *, stop_at_operand: bool = False) -> tuple[list[str], list[Word]]:
    """``(options, operands)`` the GNU way: ``-abc`` clusters, values attached or next, ``--``
    ends the options; options anywhere, unless ``stop_at_operand`` (as wrappers parse them).
    Options come back one each: ``-a``, ``-n5``, ``--name``, ``--name=value``. A word that
    expands is an operand."""
    options: list[str] = []
    operands: list[Word] = []
    i = 0
    while i < len(words):
        value = words[i].value
        if value == "--":
            operands += words[i + 1:]
            break
        if value is None or value == "-" or not value.startswith("-"):
            if stop_at_operand:
                operands += words[i:]
                break
            operands.append(words[i])
        elif value.startswith("--"):
            if "=" not in value and value.split("=", 1)[0] in long_values and i + 1 < len(words):
                value = f"{value}={words[i + 1].value}"
                i += 1
            options.append(value)
        else:
            for j, flag in enumerate(value[1:], 1):
                if flag in short_values:
                    rest = value[j + 1:]
                    if not rest and i + 1 < len(words):
                        i += 1
                        rest = words[i].value or ""
                    options.append(f"-{flag}{rest}")
                    break
                options.append(f"-{flag}")
        i += 1
    return options, operands


# --- what a word can be -------------------------------------------------------------------------

_GLOB_SPECIAL = "*?[]{},\\"


class Unreadable(ValueError):
    """A word the reader knows how to find the value of, but could not: a brace expansion too
    large to list, an operator on ``$HOME`` it does not evaluate, a directory it does not track
    (``$OLDPWD``). The seatbelt refuses a destructive command aimed at one: what it cannot read
    is never "no paths"."""


def escape(text: str) -> str:
    """``text`` as a glob that matches only it."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@lru_cache(maxsize=1024)
def glob(pattern: str) -> re.Pattern | str:
    """A glob (``\\`` escapes, ``*``, ``?``, ``[…]``) as a regex, or the literal text when it has no wildcard."""
    out, literal, i = [], True, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append(".*")
            literal = False
        elif c == "?":
            out.append(".")
            literal = False
        elif c == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            literal = False
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    if literal:
        return _unescape(pattern)
    try:
        return re.compile("".join(out), re.S)
    except re.error:
        return pattern


def everything(pattern: str, *samples: tuple[str, ...]) -> bool:
    """Does the glob match all of one of the groups of ``samples`` (by default: names, or
    names starting with a dot): does it mean "everything"?"""
    regex = glob(pattern)
    return not isinstance(regex, str) and any(all(regex.fullmatch(n) for n in names)
                                              for names in samples or _SAMPLES)


_SAMPLES = (("a", "Z", "0", "a.b", "x-y_1"), (".a", ".b0"))


_OLDPWD = object()  # a directory the shell was in: known to be one, but not which


def patterns(word: Word, *, cwd: str | None, home: str) -> list[str] | None:
    """The glob patterns ``word`` can stand for (quoted characters escaped with ``\\``), after
    tilde, ``$HOME``/``$USER``/``$PWD`` (with bash's operators: ``${HOME%/*}``, ``${PWD:0:5}``,
    ``${x:-/}``) and brace expansion; None if it depends on more. An unknown variable's default
    (``${x:-/}``) or alternative counts as what it can be. Raises :class:`Unreadable`."""
    known = {"HOME": home, "PWD": cwd, "USER": _user(), "LOGNAME": _user(), "OLDPWD": _OLDPWD}
    texts = _expand(word, known)
    return None if texts is None else [p for text in texts for p in _braces(text)]


def _expand(word: Word, known: dict) -> list[str] | None:
    """The texts ``word`` can be before brace expansion, as escaped globs; None if unknown."""
    texts = [""]
    for kind, value, quoted in word.parts:
        if kind == "lit":
            choices = [escape(value) if quoted else value]
        elif kind == "tilde" and value not in ("+", "-"):
            choices = [escape(known["HOME"] if value == "" else _home_of(value))]
        elif kind == "tilde" or kind == "var" and value is not None:
            choices = _parameter({"+": "PWD", "-": "OLDPWD"}.get(value, value) if kind == "tilde" else value, known)
        else:
            return None
        if choices is None:
            return None
        texts = [t + c for t in texts for c in choices]
        if len(texts) > _MAX_BRACE_WORDS:
            raise Unreadable("too many values to check")
    return texts


_PARAMETER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[@*#?$!0-9-])(.*)", re.S)
_OPERATOR = re.compile(r"(:?[-=?+])|(##?|%%?)|(/[/#%]?)|:|(\^\^?|,,?)|@([ULu])|", re.S)


def _parameter(body: str, known: dict) -> list[str] | None:
    """What ``${body}`` can expand to, as escaped globs, or None when it depends on an unknown."""
    m = _PARAMETER.fullmatch(body)
    if m is None:
        return None  # ${#x}, ${!x}: a length, an indirection
    name, rest = m.groups()
    value = known.get(name)
    if value is _OLDPWD:
        raise Unreadable("$OLDPWD names a directory the reader does not track")
    op = _OPERATOR.match(rest)
    operand = rest[op.end():]
    if op.group(1):  # :- - := = :? ? :+ +: the value, or the word
        if op.group(1).endswith("?"):
            return None if value is None else [escape(value)]
        if value is not None and not op.group(1).endswith("+"):
            return [escape(value)]
        words = _operand_words(operand, known)
        if words is None or value is not None:
            return words
        return [*words, ""] if op.group(1).endswith("+") else words  # unset: the word, or nothing
    if value is None:
        return None
    if not rest:
        return [escape(value)]
    text = _operand_text(operand)
    if text is None:
        raise Unreadable(f"${{{body}}} holds an expansion")
    if op.group(2):  # # ## % %%: the shortest or longest match removed from the front or back
        return [escape(_remove(value, glob(text), front=op.group(2)[0] == "#", longest=len(op.group(2)) == 2))]
    if op.group(3):  # / // /# /%: a substitution
        pattern, _, replacement = text.partition("/") if "/" in operand else (text, "", "")
        return [escape(_substitute(value, glob(pattern), _unescape(replacement), op.group(3)))]
    if op.group(0) == ":":  # :offset and :offset:length
        return [escape(_substring(value, text, body))]
    if op.group(4) and not text:
        upper, whole = op.group(4)[0] == "^", len(op.group(4)) == 2
        changed = (value.upper() if upper else value.lower()) if whole else \
            (value[:1].upper() if upper else value[:1].lower()) + value[1:]
        return [escape(changed)]
    if op.group(5) and not text:
        return [escape({"U": value.upper(), "L": value.lower(), "u": value[:1].upper() + value[1:]}[op.group(5)])]
    raise Unreadable(f"the seatbelt does not evaluate ${{{body}}}")


def _operand(operand: str) -> list[Word] | None:
    """The words of an operator's operand (``${x:-word}``, ``${x%pattern}``), parsed as bash
    parses arguments; None when they do not parse as one simple command's arguments."""
    try:
        return parse(": " + operand).pipelines[0].stages[0].words[1:] if operand else []
    except (BashSyntaxError, IndexError, AttributeError):
        return None


def _operand_text(operand: str) -> str | None:
    """An operator's pattern or text as one escaped glob, or None when it expands."""
    words = _operand(operand)
    if words is None or any(p[0] != "lit" for w in words for p in w.parts):
        return None
    return " ".join("".join(escape(v) if q else v for _, v, q in w.parts) for w in words)


def _operand_words(operand: str, known: dict) -> list[str] | None:
    """What ``${x:-word}``'s word can expand to (each word it splits into counts as one of
    them), as escaped globs; None when it depends on an unknown."""
    words = _operand(operand)
    if words is None:
        return None
    out = [] if words else [""]
    for word in words:
        texts = _expand(word, known)
        if texts is None:
            return None
        out += texts
    return out


def _remove(value: str, pattern, *, front: bool, longest: bool) -> str:
    cuts = range(len(value) + 1)
    for cut in (reversed(cuts) if longest == front else cuts):
        piece = value[:cut] if front else value[cut:]
        if (pattern == piece) if isinstance(pattern, str) else pattern.fullmatch(piece):
            return value[cut:] if front else value[:cut]
    return value


def _substitute(value: str, pattern, replacement: str, op: str) -> str:
    regex = re.escape(pattern) if isinstance(pattern, str) else pattern.pattern
    if not regex:
        return value
    anchored = {"/#": f"^(?:{regex})", "/%": f"(?:{regex})$"}.get(op, f"(?:{regex})")
    return re.sub(anchored, replacement.replace("\\", "\\\\"), value, count=0 if op == "//" else 1, flags=re.S)


def _substring(value: str, text: str, body: str) -> str:
    m = re.fullmatch(r"\s*\(?\s*(-?\d+)\s*\)?\s*(?::\s*\(?\s*(-?\d+)\s*\)?\s*)?", _unescape(text))
    if m is None:
        raise Unreadable(f"the seatbelt does not compute ${{{body}}}")
    offset = int(m.group(1))
    if offset < 0:
        if -offset > len(value):
            return ""
        offset += len(value)
    if m.group(2) is None:
        return value[offset:]
    length = int(m.group(2))
    return value[offset:offset + length] if length >= 0 else value[offset:len(value) + length]


@lru_cache(maxsize=1)
def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "")


@lru_cache(maxsize=64)
def _home_of(user: str) -> str:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return "~" + user


_MAX_BRACE_WORDS = 512


def _braces(pattern: str) -> list[str]:
    """Bash's brace expansion of ``pattern`` (``\\`` escapes respected). Past 512 words, each
    group whose words hold neither ``/`` nor ``.`` stands as ``*`` (which matches all it can
    make, so a check on the patterns still holds); if that is still too many, Unreadable."""
    for text in (pattern, None):
        text = _collapsed(pattern) if text is None else text  # collapsed only when it comes to that
        out, done = [text], []
        while out and len(out) + len(done) <= _MAX_BRACE_WORDS:
            current = out.pop()
            found = _brace_at(current)
            if found is None:
                done.append(current)
            else:
                start, end, alternatives = found
                out += [current[:start] + a + current[end:] for a in reversed(alternatives)]
        if not out:
            return done
    raise Unreadable("a brace expansion too large to check")


def _collapsed(pattern: str) -> str:
    at = 0
    while (found := _brace_at(pattern, at)) is not None:
        start, end, alternatives = found
        if any("/" in a or "." in a for a in alternatives):
            at = start + 1
        else:
            pattern = pattern[:start] + "*" + pattern[end:]
            at = start + 1
    return pattern


def _brace_at(text: str, i: int = 0) -> tuple[int, int, list[str]] | None:
    """The first expandable ``{…}`` from ``i``: its span and alternatives."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "{":
            depth, commas, j = 1, [], i + 1
            while j < len(text) and depth:
                c = text[j]
                if c == "\\":
                    j += 1
                elif c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                elif c == "," and depth == 1:
                    commas.append(j)
                j += 1
            if depth == 0:
                inner = text[i + 1:j - 1]
                if commas:
                    cuts = [i, *commas, j - 1]
                    return i, j, [text[a + 1:b] for a, b in zip(cuts, cuts[1:])]
                if sequence := _sequence(inner):
                    return i, j, sequence
        i += 1
    return None


def _sequence(inner: str) -> list[str] | None:
    m = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?", inner)
    if not m:
        return None
    a, b, step = m.group(1), m.group(2), abs(int(m.group(3) or 1)) or 1
    if a.lstrip("-").isdigit() != b.lstrip("-").isdigit():
        return None
    numeric = a.lstrip("-").isdigit()
    lo, hi = (int(a), int(b)) if numeric else (ord(a), ord(b))
    if abs(hi - lo) // step > _MAX_BRACE_WORDS:
        return ["*"]  # too long to list: numbers, which * matches all of
    values = range(lo, hi + (1 if hi >= lo else -1), step if hi >= lo else -step)
    return [str(v) if numeric else escape(chr(v)) for v in values]


# --- the reader ---------------------------------------------------------------------------------

# Wrappers that run their operands as a command: short options that take a value, long ones
# that do, and how many operands come before the command.
_WRAPPERS: dict[str, tuple[str, frozenset, int]] = {
    "sudo": ("ugpChDrRtUT", frozenset({"--user", "--group", "--prompt", "--close-from", "--host", "--chdir",
                                       "--role", "--chroot", "--type", "--other-user", "--command-timeout"}), 0),
    "doas": ("uC", frozenset(), 0),
    "nohup": ("", frozenset(), 0),
    "setsid": ("", frozenset(), 0),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "ionice": ("cnpPu", frozenset({"--class", "--classdata"}), 0),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "command": ("", frozenset(), 0),
    "builtin": ("", frozenset(), 0),
    "exec": ("a", frozenset(), 0),
    "xargs": ("aEeIiLlnPsd", frozenset({"--arg-file", "--eof", "--replace", "--max-lines", "--max-args",
                                        "--max-procs", "--max-chars", "--delimiter", "--process-slot-var"}), 0),
    "chroot": ("", frozenset({"--userspec", "--groups"}), 1),
    "chrt": ("T", frozenset(), 1),
    "taskset": ("", frozenset(), 1),
    "unshare": ("", frozenset(), 0),
    "nsenter": ("tSGwr", frozenset({"--target", "--setuid", "--setgid", "--wd", "--root"}), 0),
    "strace": ("abeEIoOpPsSuUX", frozenset(), 0),
    "ltrace": ("aeEFlnoOpsSuUwx", frozenset(), 0),
    "busybox": ("", frozenset(), 0),
    "runuser": ("ugGs", frozenset({"--user", "--group", "--supp-group", "--shell"}), 0),
    "systemd-run": ("pEMHuUSG", frozenset({"--unit", "--property", "--setenv", "--machine", "--host", "--uid",
                                           "--gid", "--working-directory", "--description", "--slice"}), 0),
    "firejail": ("", frozenset(), 0),
    "torsocks": ("", frozenset(), 0),
    "proxychains": ("f", frozenset(), 0),
    "caffeinate": ("tw", frozenset(), 0),
    "catchsegv": ("", frozenset(), 0),
    "valgrind": ("", frozenset(), 0),
    "flatpak-spawn": ("", frozenset(), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string"}), 0),
}
_SSH_VALUES = "BbcDEeFIiJLlmOopQRSWw"
_NOT_RUNNING = {"command": ("-v", "-V"), "sudo": ("-e", "-l", "-v", "-K", "-V")}


class _Reader:
    def __init__(self, reading: Reading):
        self.home = reading.home
        self.reading = reading
        self.functions: list[str] = []  # the function bodies being read, innermost last
        self.forking: list[int] = [0]  # how many forking contexts deep, per function body
        self.conditional: list[int] = [0]  # how many conditions deep, per function body
        self.downloaded: set[str] = set()  # files a download in this command wrote
        self.piped: dict[int, list[Word]] = {}  # words echoed into a pipeline stage, by the stage's id

    # --- structure ---

    def script(self, script: Script, cwd: str | None, *, runs: bool, depth: int,
               output_runs: bool = False) -> str | None:
        """Read ``script``; return the directory it leaves the shell in."""
        for pipeline in script.pipelines:
            cwd = self.pipeline(pipeline, cwd, runs=runs, depth=depth, output_runs=output_runs)
        return cwd

    def pipeline(self, pipeline: Pipeline, cwd: str | None, *, runs: bool, depth: int,
                 output_runs: bool) -> str | None:
        forks = pipeline.background or len(pipeline.stages) > 1
        self.forking[-1] += forks
        self.conditional[-1] += pipeline.conditional
        stdin_script = [self._reads_stdin_script(stage) for stage in pipeline.stages]
        last_reader = max((n for n, reads in enumerate(stdin_script) if reads), default=-1)
        after = cwd
        for n, stage in enumerate(pipeline.stages):
            if n and (echoed := _echoed(pipeline.stages[n - 1])) is not None:
                self.piped[id(stage)] = echoed
            feeds_code = output_runs or n < last_reader  # a later stage runs what it reads
            after = self.node(stage, cwd, runs=runs, depth=depth, output_runs=feeds_code)
            if stdin_script[n] and n:
                self._piped_script(pipeline.stages[n - 1], stage, cwd, runs=runs, depth=depth)
        self.forking[-1] -= forks
        self.conditional[-1] -= pipeline.conditional
        return cwd if forks else after  # each stage of a pipeline is a subshell

    def node(self, node, cwd: str | None, *, runs: bool, depth: int, output_runs: bool) -> str | None:
        if isinstance(node, Function):
            self.functions.append(node.name)
            self.forking.append(0)
            self.conditional.append(0)
            self.node(node.body, cwd, runs=runs, depth=depth, output_runs=False)
            self.conditional.pop()
            self.forking.pop()
            self.functions.pop()
            return cwd
        if isinstance(node, Command):
            return self.command(node, cwd, runs=runs, depth=depth, output_runs=output_runs)
        subshell = node.kind == "("
        self.forking[-1] += subshell
        if node.kind in ("while", "until") or node.endless:
            self.reading.loops.append(node)
        # What the allowlist must see besides the commands: a loop's assignment (a value such as
        # 'a[$(cmd)]' runs cmd when bash computes with it), and redirections.
        for text in (node.header, " ".join(r.text for r in node.redirects)):
            if text:
                self.reading.calls.append(Call([], text, Command(text, [], [], []), cwd, runs=runs))
        for word in node.words:
            self._substitutions(word, cwd, runs=runs, depth=depth, output_runs=False)
        self._redirect_substitutions(node.redirects, cwd, runs=runs, depth=depth, interpreter=False)
        self.reading.redirects += [(r, cwd) for r in node.redirects]
        after = cwd
        for n, body in enumerate(node.bodies):
            # only the first list of an if, while or until runs for sure
            maybe = node.kind in ("for", "select", "case") or (node.kind in ("if", "while", "until") and n > 0)
            self.conditional[-1] += maybe
            after = self.script(body, after, runs=runs, depth=depth, output_runs=output_runs)
            self.conditional[-1] -= maybe
        self.forking[-1] -= subshell
        return cwd if subshell else after

    def command(self, command: Command, cwd: str | None, *, runs: bool, depth: int,
                output_runs: bool) -> str | None:
        argv = command.words
        # cmd > >(sh) runs what cmd writes
        output_runs = output_runs or any(r.op in _WRITE_OPS and r.target is not None and self._runs_input(r.target)
                                         for r in command.redirects)
        self.call(Call(argv, command.text, command, cwd, runs=runs, output_runs=output_runs), depth)
        return self._cd(argv, cwd)

    def _substitutions(self, word: Word, cwd, *, runs: bool, depth: int, output_runs: bool) -> None:
        self.forking[-1] += bool(word.scripts)
        for inner in word.scripts:
            self.script(inner, cwd, runs=runs, depth=depth, output_runs=output_runs)
        self.forking[-1] -= bool(word.scripts)

    def _redirect_substitutions(self, redirects: list[Redirect], cwd, *, runs: bool, depth: int,
                                interpreter: bool) -> None:
        for r in redirects:
            for word in (r.target, r.body):
                if word is not None:
                    code = interpreter and r.op in ("<", "<<<", "<<", "<<-")
                    self._substitutions(word, cwd, runs=runs, depth=depth, output_runs=code)

    # --- one call ---

    def call(self, call: Call, depth: int) -> None:
        if self.functions:
            call.function = self.functions[-1]
            call.forks = self.forking[-1] > 0
            call.conditional = self.conditional[-1] > 0
        self.reading.calls.append(call)
        base = call.argv is call.command.words  # the simple command itself, not what a wrapper runs
        if base:
            self._words_of(call, depth)
        if self._runs_downloaded(call):
            call.runs_download = True
        if call.program is not None:
            if call.wrapped > MAX_WRAPPERS:
                raise BashSyntaxError("it wraps commands in too many others to check")
            self._inner(call, call.program, depth)

    def _words_of(self, call: Call, depth: int) -> None:
        """The substitutions, redirections and mentions in a simple command's words."""
        inner = unwrap(call.argv)
        name = program(inner[0]) if inner else None
        interpreter = is_interpreter(name)
        runs_text = {id(w) for w in inner} if interpreter or name in ("eval", "source", ".") else set()
        for n, word in enumerate(call.argv):
            # the output of a substitution is run when it is a command word, or an argument of
            # an interpreter, eval or source (bash <(curl …), sudo sh -c "$(curl …)")
            executed = n == 0 or (inner and word is inner[0]) or id(word) in runs_text
            self._substitutions(word, call.cwd, runs=call.runs, depth=depth, output_runs=bool(executed))
        for word in call.command.assigns:
            self._substitutions(word, call.cwd, runs=call.runs, depth=depth, output_runs=False)
        self._redirect_substitutions(call.command.redirects, call.cwd, runs=call.runs, depth=depth,
                                     interpreter=interpreter)
        self.reading.redirects += [(r, call.cwd) for r in call.command.redirects]
        self._downloads_to(call)
        self._mentions(call, depth)

    def _inner(self, call: Call, name: str, depth: int) -> None:
        """The commands ``call`` runs for its program: wrappers, shells, eval and the like."""
        args = call.argv[1:]
        if name in _WRAPPERS:
            wrapped = _wrapped(name, args)
            if wrapped is None:
                return
            options, operands = wrapped
            if name == "sudo" and any(o in ("-s", "-i") for o in options):
                if operands:
                    self._string(call, None, operands, depth)
            elif name == "env" and (split := [o for o in options if o.startswith(("-S", "--split-string"))]):
                text = split[0][2:] if split[0].startswith("-S") else split[0].split("=", 1)[1]
                self._string(call, " ".join([text, *(w.text for w in operands)]), [], depth)
            elif name == "xargs":
                self._xargs(call, operands, depth)
            elif operands:
                self.call(self._sub_call(call, operands), depth)
        elif name in SHELLS or name in OTHER_SHELLS:
            self._shell(call, name, args, depth)
        elif name == "eval" and args:
            self._string(call, None, args, depth)
        elif name == "trap" and args and args[0].value not in ("-p", "-l", "-"):
            self._string(call, None, args[:1], depth)
        elif name in ("su", "sg", "script", "flock"):
            self._dash_c(call, name, args, depth)
        elif name == "ssh":
            _, operands = gnu_args(args, _SSH_VALUES, stop_at_operand=True)
            if len(operands) > 1:
                self._string(call, None, operands[1:], depth)
        elif name == "watch":
            options, operands = gnu_args(args, "nd", frozenset({"--interval", "--differences"}),
                                         stop_at_operand=True)
            if operands:
                if "-x" in options or "--exec" in options:
                    self.call(self._sub_call(call, operands), depth)
                else:
                    self._string(call, None, operands, depth)
        elif name in ("find", "gfind"):
            self._find_exec(call, args, depth)

    @staticmethod
    def _sub_call(call: Call, argv: list[Word], placeholder: list[Word] | None = None) -> Call:
        """The call a wrapper makes: ``argv``, a slice of ``call``'s words."""
        base, origin = call.command.text, call.command.start
        end = len(base) if argv[-1] is call.command.words[-1] else argv[-1].start + len(argv[-1].text) - origin
        return Call(argv, base[argv[0].start - origin:end].strip(), call.command, call.cwd, runs=call.runs,
                    output_runs=call.output_runs, placeholder=placeholder, wrapped=call.wrapped + 1)

    def _xargs(self, call: Call, operands: list[Word], depth: int) -> None:
        """xargs runs its operands with the words it reads appended: known when an echo feeds it."""
        if not operands:
            return
        inner = self._sub_call(call, operands)
        extra = (self.piped.get(id(call.command)) or _here_words(call.command)) if call.argv is call.command.words else []
        if extra:
            inner.argv = [*operands, *extra]
            inner.text = " ".join([inner.text, *(w.text for w in extra)])
        self.call(inner, depth)

    def _shell(self, call: Call, name: str, args: list[Word], depth: int) -> None:
        source = _script_source(call.argv)
        if isinstance(source, int):
            if name in SHELLS:
                self._string(call, None, [call.argv[source]], depth)
            else:
                self._unreadable(call, f"{name} -c runs text in another language")
        elif source == "stdin":
            for body in _here_bodies(call.command):
                self._string(call, None, [body], depth)

    def _dash_c(self, call: Call, name: str, args: list[Word], depth: int) -> None:
        """``su -c``, ``sg group -c``, ``script -c``, ``flock file -c``: a string; or, for
        ``flock file cmd …`` and ``sg group cmd``, a command."""
        for n, word in enumerate(args):
            value = word.value or ""
            if value in ("-c", "--command", "--session-command") and n + 1 < len(args):
                self._string(call, None, [args[n + 1]], depth)
                return
            if value.startswith(("--command=", "--session-command=")):
                self._string(call, value.split("=", 1)[1], [], depth)
                return
        if name in ("flock", "sg"):
            _, operands = gnu_args(args, "wE", frozenset({"--timeout", "--conflict-exit-code"}),
                                   stop_at_operand=True)
            if len(operands) > 1:
                if name == "sg":
                    self._string(call, None, operands[1:], depth)
                else:
                    self.call(self._sub_call(call, operands[1:]), depth)

    def _find_exec(self, call: Call, args: list[Word], depth: int) -> None:
        starts, actions = find_actions(args)
        for n, end, narrowed in actions:
            if args[n].value != "-delete" and end > n + 1:
                self.call(self._sub_call(call, args[n + 1:end], None if narrowed else starts), depth)

    def _piped_script(self, before, stage, cwd, *, runs: bool, depth: int) -> None:
        """``echo 'cmd' | sh``: the text a shell reads from the stage before it."""
        name = _stage_program(before)
        bodies = _here_bodies(before)
        if name == "cat" and len(before.words) == 1 and len(bodies) == 1:
            self._string(Call(stage.words, stage.text, stage, cwd, runs=runs), None, bodies, depth)
            return
        if isinstance(before, Command) and name in ("echo", "printf") and len(before.words) > 1:
            words = [w for w in before.words[1:] if w.value not in ("-n", "-e", "-E")]
            if all(w.value is not None for w in words) and words:
                text = " ".join(w.value for w in words).replace("\\n", "\n")
                shell_call = Call(stage.words, stage.text, stage, cwd, runs=runs)
                self._string(shell_call, text, [], depth)
                return
        self._unreadable_text(runs, f"what {_stage_program(stage)} reads from the pipe cannot be checked")

    def _string(self, call: Call, text: str | None, words: list[Word], depth: int) -> None:
        """A command string ``call`` runs: ``text``, or ``words`` joined with spaces."""
        if text is None:
            values = [w.value for w in words]
            if any(v is None for v in values):
                text = " ".join(self._approximate(w, call.cwd) for w in words)
                self._parse_into(text, call.cwd, runs=False, depth=depth, output_runs=call.output_runs)
                return
            text = " ".join(values)
        self._parse_into(text, call.cwd, runs=call.runs, depth=depth + 1, output_runs=call.output_runs)

    def _parse_into(self, text: str, cwd, *, runs: bool, depth: int, output_runs: bool = False) -> None:
        """Read a string a command runs. One that cannot be read is refused, as bash would run
        its lines up to the one it cannot parse; one that is only guessed at is skipped."""
        if depth > MAX_NESTING:
            if runs:
                raise BashSyntaxError("it nests commands in strings too deeply to check")
            return
        try:
            script = parse(text)
        except BashSyntaxError as exc:
            if runs:
                raise BashSyntaxError(f"a command string it runs cannot be read: {exc}") from None
            return
        if runs:
            self.reading.scripts.append(script)
        self.script(script, cwd, runs=runs, depth=depth, output_runs=output_runs)

    def _mentions(self, call: Call, depth: int) -> None:
        """Quoted arguments that read like a command line, and here-documents: the seatbelt
        reads them too, since so many programs run their arguments (ssh, docker exec, …)."""
        if depth + 1 > MAX_NESTING:
            return
        texts = [text for word in [*call.argv[1:], *call.command.assigns]
                 if word.quoted and re.search(r"[\s;&|<>()$`]", text := self._approximate(word, call.cwd))]
        texts += [self._approximate(body, call.cwd) for body in _here_bodies(call.command)]
        for text in texts:
            try:
                script = parse(text)
            except BashSyntaxError:
                continue
            self.script(script, call.cwd, runs=False, depth=depth + 1)

    def _approximate(self, word: Word, cwd) -> str:
        """The word's text with what cannot be known replaced by ``_``, $HOME expanded."""
        out = []
        for kind, value, _ in word.parts:
            if kind == "lit":
                out.append(value)
            elif kind == "tilde" and value == "":
                out.append(self.home)
            elif kind == "var" and value == "HOME":
                out.append(self.home)
            else:
                out.append("_")
        return "".join(out)

    def _unreadable(self, call: Call, why: str) -> None:
        self._unreadable_text(call.runs, why)

    def _unreadable_text(self, runs: bool, why: str) -> None:
        if runs:
            self.reading.unreadable.append(why)

    # --- the state the text carries from command to command ---

    def _cd(self, argv: list[Word], cwd: str | None) -> str | None:
        if not argv or program(argv[0]) not in ("cd", "pushd"):
            return cwd
        _, operands = gnu_args(argv[1:])
        if not operands:
            return self.home
        try:
            found = patterns(operands[0], cwd=cwd, home=self.home)
        except Unreadable:
            return None
        if not found or len(found) != 1 or re.search(r"(?<!\\)[*?\[]", found[0]) or operands[0].value == "-":
            return None
        path = _unescape(found[0])
        if not path.startswith("/"):
            if cwd is None:
                return None
            path = os.path.join(cwd, path)
        return os.path.normpath(path)

    def _downloads_to(self, call: Call) -> None:
        if call.program not in DOWNLOADERS:
            return
        options, _ = gnu_args(call.argv[1:], "oO", frozenset({"--output", "--output-document"}))
        targets = [o[2:] for o in options if o.startswith(("-o", "-O")) and len(o) > 2]
        targets += [o.split("=", 1)[1] for o in options if o.startswith(("--output=", "--output-document="))]
        targets += [r.target.value for r in call.command.redirects if r.op in (">", ">>", ">|") and r.target]
        for target in targets:
            if target and target != "-":
                self.downloaded.add(_path_key(target, call.cwd))

    def _runs_downloaded(self, call: Call) -> bool:
        if not self.downloaded or not call.argv:
            return False
        runs = [call.argv[0]]
        source = _script_source(call.argv)
        if isinstance(source, Word):
            runs.append(source)
        if call.program in ("source", ".") and len(call.argv) > 1:
            runs.append(call.argv[1])
        return any(w.value and _path_key(w.value, call.cwd) in self.downloaded for w in runs)

    @classmethod
    def _reads_stdin_script(cls, stage) -> bool:
        """Is what ``stage`` reads run as code: ``sh``, ``python -``, ``source /dev/stdin``,
        ``xargs bash -c``, or ``tee >(sh)``?"""
        if not isinstance(stage, Command) or any(r.op in ("<", "<<", "<<-", "<<<") for r in stage.redirects):
            return False
        argv = unwrap(stage.words)
        return _script_source(argv) == "stdin" or (
            bool(argv) and program(argv[0]) == "tee" and any(cls._runs_input(w) for w in argv[1:]))

    @classmethod
    def _runs_input(cls, word: Word) -> bool:
        """Is ``word`` a process substitution ``>(…)`` that runs what is written to it?"""
        return len(word.parts) == 1 and word.parts[0][:2] == ("sub", ">(") and any(
            cls._reads_stdin_script(stage) for pipeline in word.scripts[0].pipelines[:1]
            for stage in pipeline.stages[:1])


# find's options and tests that do not narrow which files it acts on
_FIND_EVERYTHING = frozenset({"-H", "-L", "-P", "-mindepth", "-maxdepth", "-depth", "-d", "-xdev", "-mount", "-noleaf",
                              "-follow", "-daystart", "-ignore_readdir_race", "-noignore_readdir_race", "-true",
                              "-type", "-xtype", "-print", "-print0", "-ls", "-O0", "-O1", "-O2", "-O3",
                              "-regextype", "-a", "-and"})
# primaries that take one argument, and the name tests among them, by what they match
_FIND_ONE_ARGUMENT = frozenset({"-name", "-iname", "-lname", "-ilname", "-path", "-ipath", "-wholename", "-iwholename",
                                "-regex", "-iregex", "-newer", "-anewer", "-cnewer", "-type", "-xtype", "-user",
                                "-group", "-uid", "-gid", "-perm", "-size", "-mtime", "-mmin", "-atime", "-amin",
                                "-ctime", "-cmin", "-used", "-links", "-inum", "-samefile", "-fstype", "-context",
                                "-maxdepth", "-mindepth", "-regextype", "-printf", "-fprint", "-fprint0", "-fls"})
_FIND_NAMES = {"-name": ("a", "Z", "0", "a.b", "x-y_1", ".a"), "-path": ("/a", "/Z/0", "./a.b/x-y_1", "/.a")}
_FIND_NAMES.update({"-iname": _FIND_NAMES["-name"], "-lname": _FIND_NAMES["-path"], "-ilname": _FIND_NAMES["-path"],
                    **dict.fromkeys(("-ipath", "-wholename", "-iwholename", "-regex", "-iregex"), _FIND_NAMES["-path"])})


def find_actions(args: list[Word]) -> tuple[list[Word], list[tuple[int, int, bool]]]:
    """find's starting points, and its actions (-exec, -execdir, -ok, -okdir, -delete) as
    ``(index, end, narrowed)``: where the action is, where its command ends, and whether a
    test it depends on narrows the files it acts on (so that ``{}`` is not every file).

    A test narrows when it can be false for some file and is not negated: ``-name '*'``,
    ``-regex '.*'``, ``-type d`` and ``! -name x`` narrow nothing. The tests before an action in
    its own ``-a`` chain count; ``A -o B -delete`` deletes where A is false, so A does not. A
    group in parentheses narrows when each of its ``-o`` branches does."""
    n = 0
    while n < len(args) and args[n].value in ("-H", "-L", "-P"):
        n += 1
    starts = []
    while n < len(args) and not args[n].text.startswith(("-", "(", "!", "\\(", "\\!")):
        starts.append(args[n])
        n += 1
    starts = starts or [Word(".", (("lit", ".", False),))]
    actions = []
    narrowed, negated = False, False
    groups: list[list[bool]] = []  # per open parenthesis: [narrowed before it, negated, each branch narrows]
    while n < len(args):
        value = args[n].value
        step = 1
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((k for k in range(n + 1, len(args)) if args[k].value in (";", "+")), len(args))
            actions.append((n, end, narrowed))
            narrowed = narrowed or not negated  # an -exec is also a test
            step = end + 1 - n
        elif value == "-delete":
            actions.append((n, n + 1, narrowed))
        elif value in ("!", "-not"):
            negated = not negated
            n += 1
            continue
        elif value in ("-o", "-or", ","):
            if groups:
                groups[-1][2] = groups[-1][2] and narrowed
            narrowed = groups[-1][0] if groups else False
        elif value == "(":
            groups.append([narrowed, negated, True])
        elif value == ")" and groups:
            before, group_negated, branches = groups.pop()
            narrowed = before or (branches and narrowed and not group_negated)
        elif value is None or value not in _FIND_EVERYTHING:
            narrowed = narrowed or (not negated and not _finds_everything(value, args[n + 1] if n + 1 < len(args)
                                                                            else None))
        if value in _FIND_ONE_ARGUMENT:
            step = 2
        negated = False
        n += step
    return starts, actions


def _finds_everything(test: str | None, argument: Word | None) -> bool:
    """Is ``test argument`` true of every file: ``-name '*'``, ``-path '*'``, ``-regex '.*'``?"""
    samples = _FIND_NAMES.get(test or "")
    if samples is None or argument is None or argument.value is None:
        return False
    if test.endswith("regex"):
        try:
            regex = re.compile(argument.value, re.S | (re.I if test == "-iregex" else 0))
        except re.error:
            return False
        return all(regex.fullmatch(sample) for sample in samples)
    return everything(argument.value, samples)


def _wrapped(name: str, args: list[Word]) -> tuple[list[str], list[Word]] | None:
    """A wrapper's options and the command it runs; None when its options say it runs none."""
    short, long, before = _WRAPPERS[name]
    options, operands = gnu_args(args, short, long, stop_at_operand=True)
    if any(o.split("=")[0] in _NOT_RUNNING.get(name, ()) for o in options):
        return None
    operands = operands[before:]
    while name in ("sudo", "env") and operands and re.match(r"[A-Za-z_]\w*=", operands[0].value or ""):
        operands = operands[1:]  # VAR=value before the command
    return options, operands


def unwrap(argv: list[Word]) -> list[Word]:
    """The command a chain of wrappers runs: ``sudo -E env X=1 nohup bash -s`` is ``bash -s``."""
    for _ in range(MAX_WRAPPERS + 1):
        if not argv or (name := program(argv[0])) not in _WRAPPERS:
            return argv
        wrapped = _wrapped(name, argv[1:])
        argv = wrapped[1] if wrapped else []
    return []  # wrapped too deeply to tell


def _echoed(stage) -> list[Word] | None:
    """The words ``echo``/``printf`` with literal arguments writes, split as xargs splits them."""
    if not isinstance(stage, Command) or _stage_program(stage) not in ("echo", "printf"):
        return None
    words = [w.value for w in stage.words[1:] if w.value not in ("-n", "-e", "-E")]
    if any(v is None for v in words):
        return None
    return _split(" ".join(words).replace("\\n", "\n"))


def _here_words(command: Command) -> list[Word]:
    """The words a here-string or here-document with literal text feeds a command (``xargs rm
    -rf <<< /``), split as xargs splits them."""
    texts = [body.value for body in _here_bodies(command)]
    return _split(" ".join(t for t in texts if t is not None))


def _here_bodies(command: Any) -> list[Word]:
    """What the here-documents and here-strings of ``command`` (a stage of any kind) feed it."""
    return [r.body or r.target for r in getattr(command, "redirects", ()) if r.op in ("<<", "<<-", "<<<")]


def _split(text: str) -> list[Word]:
    return [Word(v, (("lit", v, True),)) for v in text.split()]


def _stage_program(stage) -> str | None:
    argv = unwrap(stage.words) if isinstance(stage, Command) else []
    return program(argv[0]) if argv else None


def _path_key(path: str, cwd: str | None) -> str:
    return os.path.normpath(os.path.join(cwd or "", path))


def is_interpreter(name: str | None) -> bool:
    """A program that runs code given to it: a shell, python, perl, node, …"""
    return name is not None and (name in SHELLS or name in OTHER_SHELLS or bool(_INTERPRETER.fullmatch(name)))


_STDIN = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/thread-self/fd/0"})


def _script_source(argv: list[Word]):
    """Where an interpreter reads its program: ``"stdin"``, the index of a ``-c``/``-e`` string,
    a script file's Word, or None for a program that is not an interpreter."""
    if not argv:
        return None
    name = program(argv[0])
    if name in ("source", "."):
        return "stdin" if len(argv) > 1 and argv[1].value in _STDIN else None
    if not is_interpreter(name):
        return None
    if name in SHELLS or name in OTHER_SHELLS:
        inline = "c"
        values = "oO"
        long_values = frozenset({"--rcfile", "--init-file"})
    else:
        family = re.sub(r"[0-9.]+$", "", name)
        inline = _INLINE_FLAGS.get(family, "e")
        values = "WXIMrx" if family != "php" else "cdfz"
        long_values = frozenset()
    command_string = from_stdin = False
    n = 1
    while n < len(argv):
        value = argv[n].value
        if value is None:
            break  # an operand: the command string or the script
        if value in ("--", "-"):
            from_stdin |= value == "-"
            n += 1
            break
        if not value.startswith(("-", "+")) or value == "+":
            break
        if value.startswith("--"):
            n += 2 if value in long_values else 1
            continue
        flags = value[1:]
        command_string |= any(f in inline for f in flags)
        from_stdin |= name in SHELLS and "s" in flags
        n += 2 if flags[-1:] in values else 1
    if command_string:
        return n if n < len(argv) else "stdin"  # xargs bash -c: the string is what xargs reads
    if from_stdin or n >= len(argv) or argv[n].value in _STDIN:
        return "stdin"
    return argv[n]

