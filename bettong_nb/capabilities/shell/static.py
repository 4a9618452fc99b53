"""The rule an allow list adds: only STATIC commands run, those whose every word is known
before bash runs them, so the text the allow regexes read is what bash runs.

    not_static(read("echo ${_@P}", cwd=None, home="/root"))
    # '`${_@P}` is a parameter expansion; with an allow list only static words run'

Static means quotes and plain words only. Refused, each with a reason naming the construct:
parameter, arithmetic, command and process substitution, tilde, brace and glob expansion
(bash fills a glob from the files here, so it is refused, not expanded: quote it or name the
files), assignments (``PATH=``, ``BASH_ENV=``, arrays, ``env X=…``, ``{fd}>``), here-documents
with expansions, ``for``/``select`` (they assign), ``[[ ]]`` and ``(( ))`` (arithmetic reads
names and subscripts as code), function definitions, every bash builtin that evaluates text,
defines names or changes how bash reads (``eval``, ``source``, ``.``, ``let``, ``declare``,
``read``, ``printf -v``, ``test -v``, ``trap``, ``alias``, ``shopt``, ``set``, ``hash``, …),
a program path that climbs with ``..`` or a quoted program name (``echo'x'`` is ``echox``, not
``echo``), a shell that runs a file or startup files (``bash x.sh``, ``bash < x``, ``bash -i``),
and ``xargs``/``find -exec`` running a shell or interpreter, or the files found (their input
becomes code). Strings that run (``bash -c '…'``, ``ssh host '…'``, ``echo '…' | sh``) must be
static too.
"""

from __future__ import annotations

import re

from .bash import Command, Compound, Function, Redirect, Script, Word
from .reading import (OTHER_SHELLS, SHELLS, _WRAPPERS, Call, Reading, _brace_at, _script_source, escape, find_actions,
                      glob, gnu_args, is_interpreter, program, unwrap)

__all__ = ["not_static", "file_writes", "STATIC_BUILTINS"]

_ONLY = "with an allow list only static words run"

# bash's builtins and keywords; a static command may use only these few of them, which neither
# evaluate their arguments nor define names (measured: `let`, `read`, `unset`, `declare`,
# `printf -v`, `test -v`, `mapfile -C`, `compgen -C` run a subscript's $(…) as code)
_BASH_NAMES = frozenset(
    ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown "
    "echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile "
    "popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true "
    "type typeset ulimit umask unalias unset wait coproc function select".split())
STATIC_BUILTINS = frozenset(
    ": [ bg break builtin caller cd command continue dirs disown echo exec exit false fg help jobs kill logout "
    "popd printf pushd pwd return shift suspend test times true type ulimit umask wait".split())
_OPTION_REFUSED = {"printf": ("-v",), "test": ("-v", "-R"), "[": ("-v", "-R"), "wait": ("-p",)}
_SHELL_STARTUP = re.compile(r"^(?:[-+][a-zA-Z]*[ilO][a-zA-Z]*|--(?:login|rcfile|init-file|interactive)\b.*)$")
_FILE_INPUT = frozenset({"<", "<>", "<&"})
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_HARMLESS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


def not_static(reading: Reading) -> str | None:
    """Why what ``reading`` runs is not static, naming the construct; None when it is."""
    for script in reading.scripts:
        if (why := _script(script)) is not None:
            return why
    for call in reading.calls:
        if call.runs and call.argv and (why := _call(call)) is not None:
            return why
    return None


# --- the tree: words and the constructs around them ---------------------------------------------

def _nodes(script: Script):
    """Every command, compound and function in ``script`` that bash runs as written."""
    for pipeline in script.pipelines:
        for stage in pipeline.stages:
            yield stage
            if isinstance(stage, Compound):
                for body in stage.bodies:
                    yield from _nodes(body)


def _script(script: Script) -> str | None:
    return _first(*(_node(node) for node in _nodes(script)))


def _node(node) -> str | None:
    if isinstance(node, Function):
        return f"`{_short(node.text)}` defines a function; {_ONLY}"
    if isinstance(node, Command):
        if node.assigns:
            return f"`{_short(node.assigns[0].text)}` assigns a variable; {_ONLY}"
        return _first(*(_word(w) for w in node.words), *(_redirect(r) for r in node.redirects))
    if node.kind in ("for", "select"):
        return f"`{node.kind}` assigns a loop variable; {_ONLY}"
    if node.kind == "[[":
        return f"`[[ … ]]` evaluates names and subscripts as arithmetic; {_ONLY} (use test or [ ])"
    if node.kind == "((":
        return f"`{_short(node.words[0].text)}` is arithmetic; {_ONLY}"
    patterns = node.words[1:] if node.kind == "case" else []  # matched, not expanded from the files
    return _first(*(_word(w, pattern=w in patterns) for w in node.words), *(_redirect(r) for r in node.redirects))


def file_writes(reading: Reading) -> list[str]:
    """The redirections that write a file (``> f``, ``>> f``, ``&> f``, ``<> f``; not
    ``/dev/null`` or a descriptor), as written: with an allow list each must match on its own,
    since a file written here can be run later (by ``bash f``, or by git from ``.git/config``)."""
    out = []
    for script in reading.scripts:
        for node in _nodes(script):
            for r in getattr(node, "redirects", ()):
                target = r.target.value if r.target is not None else None
                if r.op in _WRITES or (r.op == ">&" and target is not None and not re.fullmatch(r"[0-9]+-?|-", target)):
                    if target not in _HARMLESS:
                        out.append(r.text)
    return out


def _first(*reasons: str | None) -> str | None:
    return next((r for r in reasons if r is not None), None)


def _redirect(redirect: Redirect) -> str | None:
    if redirect.text.startswith("{"):
        return f"`{_short(redirect.text)}` assigns a descriptor to a variable; {_ONLY}"
    if redirect.body is not None and redirect.body.value is None:
        return f"`{redirect.text}` is a here-document with expansions; {_ONLY} (quote its delimiter)"
    # a here-string is not globbed; a file name is (when it matches one file)
    return None if redirect.target is None else _word(redirect.target, pattern=redirect.op == "<<<")


def _word(word: Word, *, pattern: bool = False) -> str | None:
    for kind, value, _ in word.parts:
        if kind != "lit":
            what, snippet = _expansion(kind, value, word.text)
            if snippet == word.text:
                return f"`{snippet}` is {what}; {_ONLY}"
            return f"`{_short(word.text)}` holds {what}, `{_short(snippet)}`; {_ONLY}"
    if pattern:
        return None
    text = "".join(escape(v) if quoted else v for _, v, quoted in word.parts)
    if _brace_at(text) is not None:
        return f"`{_short(word.text)}` is a brace expansion; {_ONLY}"
    if not isinstance(glob(text), str):
        return f"`{_short(word.text)}` is a glob bash expands from the files here; {_ONLY} (quote it or name the files)"
    return None


def _expansion(kind: str, value, text: str) -> tuple[str, str]:
    """What a word's expanding part is, and how it is written."""
    if kind == "tilde":
        return "a tilde expansion (of $HOME)", "~" + value
    if kind == "arith":
        return "an arithmetic expansion", "$((…))"
    if kind == "sub":
        return ("a process substitution", f"{value}…)") if value in ("<(", ">(") else \
            ("a command substitution", "$(…)" if value == "$(" else "`…`")
    if value is None:
        return "an array", text
    braced = "${" + value + "}"
    snippet = braced if braced in text or not re.fullmatch(r"[A-Za-z_]\w*|[@*#?$!0-9_-]", value) else "$" + value
    if value.startswith("!"):
        return "a parameter expansion (indirect)", snippet
    if value.endswith(("@P", "@E", "@A", "@K", "@a", "@k")):
        return "a parameter expansion (a transformation)", snippet
    return "a parameter expansion", snippet


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


# --- each program run: what it does with its words ----------------------------------------------

def _call(call: Call) -> str | None:
    head = call.argv[0]
    value = head.value or ""
    if head.value is not None and head.text != value:
        return f"the program name `{_short(head.text)}` is quoted; write it plainly ({_ONLY})"
    if "/" in value and ".." in value.split("/"):
        return f"the program path `{_short(value)}` climbs with `..`; name the program plainly ({_ONLY})"
    if "/" not in value and value in _BASH_NAMES and value not in STATIC_BUILTINS:
        return f"`{value}` is a bash builtin that evaluates text or defines names; {_ONLY}"
    name = call.program
    args = call.argv[1:]
    if "/" not in value and (flags := _OPTION_REFUSED.get(value)):
        if any(w.value in flags or (value == "printf" and (w.value or "").startswith("-v")) for w in args):
            return f"`{value} {flags[0]}` evaluates a name as code; {_ONLY}"
    if name in ("env", "sudo"):
        short, long, _ = _WRAPPERS[name]
        _, operands = gnu_args(args, short, long, stop_at_operand=True)
        if operands and re.match(r"[A-Za-z_]\w*=", operands[0].value or ""):
            return f"`{name} {_short(operands[0].text)}` sets a variable for what it runs; {_ONLY}"
    if name in SHELLS or name in OTHER_SHELLS:
        return _shell(call, name)
    if name == "xargs":
        inner = unwrap(call.argv)
        if inner and _runs_code(inner):
            return f"`xargs {program(inner[0])}` runs what xargs reads as code; {_ONLY}"
    if name in ("find", "gfind"):
        for n, end, _ in find_actions(args)[1]:
            inner = unwrap(args[n + 1:end])
            if inner and ("{}" in (inner[0].value or "{}") or _runs_code(inner)):
                return f"`find {args[n].value} {_short(inner[0].text)}` runs the files it finds as code; {_ONLY}"
    return None


def _runs_code(argv: list[Word]) -> bool:
    return is_interpreter(program(argv[0]))


def _shell(call: Call, name: str) -> str | None:
    source = _script_source(call.argv)
    options = call.argv[1:source] if isinstance(source, int) else call.argv[1:]
    for word in options:
        if word.value and _SHELL_STARTUP.match(word.value):
            return f"`{name} {word.value}` reads startup files or changes how bash reads; {_ONLY}"
    if isinstance(source, Word):
        return f"`{name} {_short(source.text)}` runs a file the allow list cannot read; {_ONLY}"
    if source == "stdin" and any(r.op in _FILE_INPUT for r in call.command.redirects):
        return f"`{_short(call.text)}` runs a file the allow list cannot read; {_ONLY}"
    return None
