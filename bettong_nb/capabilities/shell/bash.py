# Our own bash parser, not bashlex or tree-sitter-bash: with reading.py it gets shell_split 65/65 and shell_unreadable 37/37 (bashlex 31/65, 34/37, 6x slower; tree-sitter-bash 33/65, 28/37, 7x faster): see reading.py's first line.
"""A bash parser for the shell policy: which simple commands a command line runs, and how.

    script = parse("git status; cat /etc/passwd")
    [p.stages[0].text for p in script.pipelines]   # ['git status', 'cat /etc/passwd']

It reads bash's grammar as bash does — quotes, escapes, line continuations, ``$(…)``,
backticks, ``<(…)``/``>(…)``, ``${…}``, ``$((…))``, here-documents and here-strings,
subshells, groups, ``if``/``while``/``until``/``for``/``select``/``case``, ``[[ … ]]``,
``(( … ))``, functions, pipelines and lists — into a small tree. What it cannot read with
confidence (an unterminated quote, ``coproc``, extended globs, a nesting deeper than
:data:`MAX_DEPTH`, a syntax error) raises :class:`BashSyntaxError`: the policy refuses what it
cannot read rather than guess. It never expands anything and never runs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Union

__all__ = ["BashSyntaxError", "Word", "Redirect", "Command", "Compound", "Function", "Pipeline",
           "Script", "parse", "MAX_DEPTH"]

MAX_DEPTH = 60  # nested constructs; deeper is refused, which also bounds the recursion


class BashSyntaxError(ValueError):
    """The text is not bash the parser can read with confidence."""


# A part of a word: ("lit", text, quoted), ("var", name, quoted) (for ${…} all that is inside the
# braces, operators too: "HOME:-/x"; None for an array's elements), ("tilde", user, False),
# ("sub", kind, quoted) for $( ` <( >(, ("arith", None, quoted). Quoted text is literal: no
# globbing, no brace expansion.
Part = tuple


@dataclass(eq=False)
class Word:
    """One shell word: its source ``text``, its ``parts``, and the scripts its expansion runs."""
    text: str
    parts: tuple[Part, ...]
    scripts: tuple["Script", ...] = ()
    start: int = 0

    @cached_property
    def value(self) -> str | None:
        """The word after quote removal, when nothing in it expands; else None."""
        if all(p[0] == "lit" for p in self.parts):
            return "".join(p[1] for p in self.parts)
        return None

    @cached_property
    def quoted(self) -> bool:
        return any(p[2] for p in self.parts)


@dataclass(eq=False)
class Redirect:
    op: str  # < > >> >| <> << <<- <<< <& >& &> &>>
    target: Word | None  # the file, descriptor or here-string; None for a here-document
    body: Word | None = None  # a here-document's text
    text: str = ""  # as written


@dataclass(eq=False)
class Command:
    """A simple command: assignments, words (the first names the program) and redirections."""
    text: str
    assigns: list[Word]
    words: list[Word]
    redirects: list[Redirect]
    start: int = 0


@dataclass(eq=False)
class Compound:
    """``(`` ``{`` ``if`` ``while`` ``until`` ``for`` ``select`` ``case`` ``[[`` ``((``."""
    kind: str
    bodies: list["Script"]  # the lists it runs, in order (a loop's condition, then its body)
    words: list[Word]  # words it expands itself: for-lists, case subjects and patterns, [[ ]] operands
    redirects: list[Redirect]
    text: str
    endless: bool = False  # for ((;;))
    header: str = ""  # a for or select loop's first line: it assigns a variable


@dataclass(eq=False)
class Function:
    name: str
    body: Compound
    text: str


Node = Union[Command, Compound, Function]


@dataclass(eq=False)
class Pipeline:
    stages: list[Node]
    background: bool = False  # ends with & (the whole and-or list it belongs to)
    conditional: bool = False  # after && or ||: it may not run


@dataclass(eq=False)
class Script:
    source: str
    pipelines: list[Pipeline] = field(default_factory=list)


_META = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_REDIRECT = re.compile(r"(?:[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\})?(?:<<<|<<-|<<|<>|<&|<|>>|>&|>\||>)|&>>|&>")
_SPECIAL_PARAMS = frozenset("@*#?-$!0123456789")
_CLOSERS = frozenset({"}", "fi", "then", "elif", "else", "do", "done", "esac"})
_COMPOUND_WORDS = frozenset({"{", "(", "((", "[[", "if", "while", "until", "for", "select", "case"})
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
         "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def parse(source: str) -> Script:
    """The syntax tree of ``source``; raises :class:`BashSyntaxError` for what it cannot read."""
    return _Parser(source).script()


class _Parser:
    def __init__(self, source: str, depth: int = 0):
        if depth > MAX_DEPTH:
            raise BashSyntaxError("it is nested too deeply to check")
        self.s = source
        self.i = 0
        self.depth = depth
        self.pending: list[tuple[Redirect, str, bool, bool]] = []  # here-documents awaiting a body
        self.not_arithmetic: set[int] = set()  # where (( turned out to open subshells: tried once

    # --- lists and pipelines ----------------------------------------------------------------

    def script(self) -> Script:
        script = Script(self.s, self.list(stops=frozenset()))
        if self.i < len(self.s):
            raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 10]!r}")
        self._finish_heredocs()
        return script

    def list(self, stops: frozenset, paren: bool = False, case: bool = False) -> list[Pipeline]:
        """And-or lists up to the end, a closing ``)`` (``paren``), a ``;;`` (``case``) or a
        reserved word in ``stops`` at the start of a command."""
        out: list[Pipeline] = []
        while True:
            self._skip_separators()
            if self._at_end_of_list(stops, paren, case):
                return out
            and_or = [self.pipeline()]
            while True:
                self._blanks()
                if self.s.startswith(("&&", "||"), self.i):
                    self.i += 2
                    self._skip_newlines()
                    and_or.append(self.pipeline())
                    and_or[-1].conditional = True
                    continue
                break
            out += and_or
            c = self._peek()
            if c == "&" and not self.s.startswith("&>", self.i):
                self.i += 1
                for p in and_or:
                    p.background = True
            elif c == ";" and not self.s.startswith(";;", self.i) and not self.s.startswith(";&", self.i):
                self.i += 1
            elif c == "\n":
                self._newline()
            elif self._at_end_of_list(stops, paren, case):
                return out
            else:
                raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 10]!r}")

    def _at_end_of_list(self, stops: frozenset, paren: bool, case: bool) -> bool:
        if self.i >= len(self.s):
            return True
        if self.s[self.i] == ")":
            if paren:
                return True
            raise BashSyntaxError("unexpected ')'")
        if self.s.startswith(";;", self.i) or self.s.startswith(";&", self.i):
            if case:
                return True
            raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 2]!r}")
        word = self._peek_reserved()
        if word in stops or (case and word == "esac"):
            return True
        if word in _CLOSERS:
            raise BashSyntaxError(f"unexpected {word!r}")
        return False

    def pipeline(self) -> Pipeline:
        self._blanks()
        while (word := self._peek_reserved()) in ("!", "time"):
            self.i += len(word)
            self._blanks()
            if word == "time" and self.s.startswith("-p", self.i) and self._word_ends(self.i + 2):
                self.i += 2
                self._blanks()
        stages = [self.command()]
        while True:
            self._blanks()
            if self.s.startswith("||", self.i) or not self.s.startswith("|", self.i):
                return Pipeline(stages)
            self.i += 2 if self.s.startswith("|&", self.i) else 1
            self._skip_newlines()
            stages.append(self.command())

    # --- commands ---------------------------------------------------------------------------

    def command(self) -> Node:
        self._blanks()
        start = self.i
        word = self._peek_reserved()
        if word == "coproc":
            raise BashSyntaxError("coproc is not supported")
        if word == "function":
            return self._function_keyword(start)
        if word in _COMPOUND_WORDS or self.s.startswith("(", self.i):
            node = self._compound()
            node.redirects = self._redirects()
            node.text = self.s[start:self.i].strip()
            return node
        if word is not None and (fn := self._function_parens(start, word)) is not None:
            return fn
        return self.simple()

    def _function_keyword(self, start: int) -> Function:
        self.i += len("function")
        self._blanks()
        name = self._raw_word()
        if not name:
            raise BashSyntaxError("function without a name")
        self._blanks()
        if self.s.startswith("(", self.i):
            self.i += 1
            self._blanks()
            self._expect(")")
        return self._function_body(start, name)

    def _function_parens(self, start: int, word: str) -> Function | None:
        after = self.i + len(word)
        m = re.compile(r"[ \t]*\([ \t]*\)").match(self.s, after)
        if not m:
            return None
        if any(c in word for c in "$`'\"\\=") or word in _CLOSERS:
            raise BashSyntaxError(f"bad function name {word!r}")
        self.i = m.end()
        return self._function_body(start, word)

    def _function_body(self, start: int, name: str) -> Function:
        self._skip_newlines()
        word = self._peek_reserved()
        if word not in _COMPOUND_WORDS and not self.s.startswith("(", self.i):
            raise BashSyntaxError(f"the body of function {name} is not a compound command")
        body = self._compound()
        body.redirects = self._redirects()
        body.text = self.s[start:self.i].strip()
        return Function(name, body, body.text)

    def _nested(self) -> "_Parser":
        """This parser one level deeper: the same text and position, so here-documents work."""
        if self.depth + 1 > MAX_DEPTH:
            raise BashSyntaxError("it is nested too deeply to check")
        self.depth += 1
        return self

    def _compound(self) -> Compound:
        self._nested()
        try:
            return self._compound_inner()
        finally:
            self.depth -= 1

    def _compound_inner(self) -> Compound:
        start = self.i
        word = self._peek_reserved()
        if self.s.startswith("((", self.i):
            arith = self._try_arith(self.i + 2)
            if arith is not None:
                return Compound("((", [], [arith], [], "")
        if self.s.startswith("(", self.i):
            self.i += 1
            body = self.list(frozenset(), paren=True)
            self._expect(")")
            return Compound("(", [Script(self.s, body)], [], [], "")
        assert word is not None
        self.i += len(word)
        if word == "{":
            body = self.list(frozenset({"}"}))
            self._expect_word("}")
            return Compound("{", [Script(self.s, body)], [], [], "")
        if word == "[[":
            return Compound("[[", [], self._conditional(), [], "")
        if word == "if":
            bodies = [self._script_until("then")]
            self._expect_word("then")
            bodies.append(self._script_until("elif", "else", "fi"))
            while True:
                end = self._peek_reserved()
                if end not in ("elif", "else", "fi"):
                    raise BashSyntaxError("an unterminated if")
                self.i += len(end)
                if end == "fi":
                    return Compound("if", bodies, [], [], "")
                if end == "else":
                    bodies.append(self._script_until("fi"))
                    continue
                bodies.append(self._script_until("then"))
                self._expect_word("then")
                bodies.append(self._script_until("elif", "else", "fi"))
        if word in ("while", "until"):
            condition = self._script_until("do")
            self._expect_word("do")
            body = self._script_until("done")
            self._expect_word("done")
            return Compound(word, [condition, body], [], [], "")
        if word in ("for", "select"):
            return self._for(word, start)
        if word == "case":
            return self._case()
        raise BashSyntaxError(f"unexpected {self.s[start:start + 10]!r}")

    def _script_until(self, *stops: str) -> Script:
        return Script(self.s, self.list(frozenset(stops)))

    def _for(self, kind: str, start: int) -> Compound:
        self._blanks()
        words: list[Word] = []
        endless = False
        if kind == "for" and self.s.startswith("((", self.i):
            arith = self._try_arith(self.i + 2)
            if arith is None:
                raise BashSyntaxError("unterminated for ((")
            words.append(arith)
            endless = re.fullmatch(r"\(\(\s*[^;]*;\s*;[^;]*\)\)", arith.text) is not None
        else:
            name = self._raw_word()
            if not _NAME.fullmatch(name or ""):
                raise BashSyntaxError(f"bad {kind} variable {name!r}")
            self._blanks()
            self._skip_newlines()
            if self._peek_reserved() == "in":
                self.i += 2
                while True:
                    self._blanks()
                    if self._peek() in (";", "\n", ""):
                        break
                    word = self.word()
                    if word is None:
                        raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 10]!r} in {kind}")
                    words.append(word)
        header = self.s[start:self.i].strip()
        self._blanks()
        if self._peek() == ";":
            self.i += 1
        self._skip_separators()
        if self._peek_reserved() == "{":
            self.i += 1
            body = self._script_until("}")
            self._expect_word("}")
        else:
            self._expect_word("do")
            body = self._script_until("done")
            self._expect_word("done")
        return Compound(kind, [body], words, [], "", endless=endless, header=header)

    def _case(self) -> Compound:
        self._blanks()
        subject = self.word()
        if subject is None:
            raise BashSyntaxError("case without a word")
        words, bodies = [subject], []
        self._skip_newlines()
        self._expect_word("in")
        while True:
            self._skip_separators()
            if self._peek_reserved() == "esac":
                self.i += 4
                return Compound("case", bodies, words, [], "")
            if self._peek() == "(":
                self.i += 1
            while True:
                self._blanks()
                pattern = self.word()
                if pattern is None:
                    raise BashSyntaxError("case pattern expected")
                words.append(pattern)
                self._blanks()
                if self._peek() == "|":
                    self.i += 1
                    continue
                self._expect(")")
                break
            bodies.append(Script(self.s, self.list(frozenset(), case=True)))
            for end in (";;&", ";;", ";&"):
                if self.s.startswith(end, self.i):
                    self.i += len(end)
                    break
            else:
                if self._peek_reserved() != "esac":
                    raise BashSyntaxError("unterminated case")

    def _conditional(self) -> list[Word]:
        """The operands of ``[[ … ]]``: ``( ) ! && || < >`` are operators there, not syntax."""
        words: list[Word] = []
        regex = False
        while True:
            self._blanks()
            self._skip_newlines()
            if self.i >= len(self.s):
                raise BashSyntaxError("unterminated [[")
            if self.s.startswith("]]", self.i) and self._word_ends(self.i + 2):
                self.i += 2
                return words
            for op in ("&&", "||", "(", ")", "!", "<", ">"):
                if self.s.startswith(op, self.i) and not regex:
                    self.i += len(op)
                    break
            else:
                word = self.word(regex=regex)
                if word is None:
                    raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 10]!r} in [[ ]]")
                words.append(word)
                regex = word.text == "=~"

    def simple(self) -> Command:
        start = self.i
        assigns: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        end = self.i
        while True:
            self._blanks()
            if self.i >= len(self.s):
                break
            redirect = self._redirect()
            if redirect is not None:
                redirects.append(redirect)
                end = self.i
                continue
            c = self.s[self.i]
            if c in ";|\n)" or (c == "&" and not self.s.startswith("&>", self.i)):
                break
            if c == "(":
                raise BashSyntaxError("unexpected '('")
            word = self.word()
            if word is None:
                raise BashSyntaxError(f"unexpected {self.s[self.i:self.i + 10]!r}")
            (words if words or not _ASSIGN.match(word.text) else assigns).append(word)
            end = self.i
        if not (assigns or words or redirects):
            raise BashSyntaxError(f"a command was expected at {self.s[start:start + 10]!r}"
                                  if start < len(self.s) else "the command ends too early")
        return Command(self.s[start:end], assigns, words, redirects, start)

    # --- redirections and here-documents --------------------------------------------------------

    def _redirects(self) -> list[Redirect]:
        out = []
        while True:
            self._blanks()
            redirect = self._redirect()
            if redirect is None:
                return out
            out.append(redirect)

    def _redirect(self) -> Redirect | None:
        if self.s.startswith(("<(", ">("), self.i):
            return None
        m = _REDIRECT.match(self.s, self.i)
        if not m:
            return None
        start = self.i
        op = m.group().lstrip("0123456789")
        if op.startswith("{"):
            op = op[op.index("}") + 1:]
        self.i = m.end()
        self._blanks()
        if op in ("<<", "<<-"):
            raw = self._raw_word()
            if not raw:
                raise BashSyntaxError("a here-document needs a delimiter")
            quoted = any(c in raw for c in "'\"\\")
            delimiter = re.sub(r"""\\(.)|['"]""", lambda q: q.group(1) or "", raw)
            redirect = Redirect(op, None, text=self.s[start:self.i])
            self.pending.append((redirect, delimiter, op == "<<-", quoted))
            return redirect
        target = self.word()
        if target is None:
            raise BashSyntaxError(f"the redirection {op} has no target")
        return Redirect(op, target, text=self.s[start:self.i])

    def _newline(self) -> None:
        """Consume a newline, then the bodies of the here-documents begun on its line."""
        self.i += 1
        pending, self.pending = self.pending, []
        for redirect, delimiter, strip_tabs, quoted in pending:
            lines_start = self.i
            body_end = None
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i:end]
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    body_end = self.i
                    self.i = min(end + 1, len(self.s))
                    break
                self.i = end + 1
            if body_end is None:  # bash reads to the end of the text, with a warning
                body_end = self.i = len(self.s)
            text = self.s[lines_start:body_end]
            if strip_tabs:
                text = re.sub(r"(?m)^\t+", "", text)
            redirect.body = (Word(text, (("lit", text, True),)) if quoted
                             else self._sub_parser(text)._heredoc_word())

    def _finish_heredocs(self) -> None:
        for redirect, _, _, _ in self.pending:
            redirect.body = Word("", (("lit", "", True),))
        self.pending = []

    def _heredoc_word(self) -> Word:
        """An unquoted here-document's body: expansions run, quotes are plain characters."""
        parts: list[Part] = []
        scripts: list[Script] = []
        self._expanding_text(parts, scripts, escapable="$`\\\n", closing=None)
        return Word(self.s, tuple(parts), tuple(scripts))

    # --- words ------------------------------------------------------------------------------

    def word(self, *, regex: bool = False) -> Word | None:
        """The word at the position, or None at an operator or the end."""
        start = self.i
        if start < len(self.s) and self.s[start] == "#":
            raise BashSyntaxError("a comment in the middle of a command")
        parts: list[Part] = []
        scripts: list[Script] = []
        lit: list[str] = []
        depth = 0  # parentheses inside a [[ =~ ]] regex
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "\\":
                if self.i + 1 >= len(self.s):
                    lit.append("\\")  # a trailing backslash is itself
                    self.i += 1
                elif self.s[self.i + 1] == "\n":
                    self.i += 2
                else:
                    self._flush(lit, parts, False)
                    parts.append(("lit", self.s[self.i + 1], True))
                    self.i += 2
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise BashSyntaxError("an unterminated single quote")
                self._flush(lit, parts, False)
                parts.append(("lit", self.s[self.i + 1:end], True))
                self.i = end + 1
            elif c == '"':
                self._flush(lit, parts, False)
                self.i += 1
                self._double_quoted(parts, scripts)
            elif c == "$" and self.s.startswith("$'", self.i):
                self._flush(lit, parts, False)
                parts.append(("lit", self._ansi_c(), True))
            elif c == "$" and self.s.startswith('$"', self.i):
                self._flush(lit, parts, False)
                self.i += 2
                self._double_quoted(parts, scripts)
            elif c in "$`":
                self._flush(lit, parts, False)
                self._expansion(parts, scripts, quoted=False)
            elif c in "<>" and self.s.startswith("(", self.i + 1):
                self._flush(lit, parts, False)
                kind = self.s[self.i:self.i + 2]
                self.i += 2
                scripts.append(self._until_paren())
                parts.append(("sub", kind, False))
            elif c == "~" and self.i == start:
                m = re.compile(r"~([A-Za-z0-9_.-]*|[+-])(?=/|$|[\s;&|()<>])").match(self.s, self.i)
                if m:
                    parts.append(("tilde", m.group(1), False))
                    self.i = m.end()
                else:
                    lit.append(c)
                    self.i += 1
            elif regex and c == "(":
                depth += 1
                lit.append(c)
                self.i += 1
            elif regex and c == ")" and depth:
                depth -= 1
                lit.append(c)
                self.i += 1
            elif regex and (c == "|" or (depth and c in " \t<>;&")):
                lit.append(c)
                self.i += 1
            elif c == "(" and _ASSIGN.fullmatch(self.s[start:self.i]):
                self._flush(lit, parts, False)
                self._array(parts, scripts)
            elif c in _META:
                if c == "(" and lit and lit[-1] in "@!+*?" and not regex:
                    raise BashSyntaxError("extended glob patterns are not supported")
                break
            else:
                lit.append(c)
                self.i += 1
        self._flush(lit, parts, False)
        if self.i == start:
            return None
        return Word(self.s[start:self.i], tuple(parts), tuple(scripts), start)

    def _array(self, parts: list[Part], scripts: list[Script]) -> None:
        """``name=( … )``: its elements are words, maybe with substitutions."""
        self._nested()
        try:
            self._array_elements(parts, scripts)
        finally:
            self.depth -= 1

    def _array_elements(self, parts: list[Part], scripts: list[Script]) -> None:
        self.i += 1
        while True:
            self._skip_separators(comments=True)
            if self._peek() == ")":
                self.i += 1
                parts.append(("var", None, False))
                return
            element = self.word()
            if element is None:
                raise BashSyntaxError("an unterminated array")
            scripts.extend(element.scripts)

    @staticmethod
    def _flush(lit: list[str], parts: list[Part], quoted: bool) -> None:
        if lit:
            parts.append(("lit", "".join(lit), quoted))
            lit.clear()

    def _double_quoted(self, parts: list[Part], scripts: list[Script]) -> None:
        before = len(parts)
        self._expanding_text(parts, scripts, escapable='$`"\\\n', closing='"')
        if len(parts) == before:
            parts.append(("lit", "", True))  # "" is a word of its own

    def _expanding_text(self, parts: list[Part], scripts: list[Script], *, escapable: str,
                        closing: str | None) -> None:
        """Text in which only expansions and a few escapes are special — a double-quoted string,
        or an unquoted here-document's body — up to ``closing`` or the end."""
        lit: list[str] = []
        while True:
            if self.i >= len(self.s):
                if closing:
                    raise BashSyntaxError("an unterminated double quote")
                break
            c = self.s[self.i]
            if c == closing:
                self.i += 1
                break
            if c == "\\" and self.i + 1 < len(self.s) and self.s[self.i + 1] in escapable:
                if self.s[self.i + 1] != "\n":
                    lit.append(self.s[self.i + 1])
                self.i += 2
            elif c in "$`":
                self._flush(lit, parts, True)
                self._expansion(parts, scripts, quoted=True)
            else:
                lit.append(c)
                self.i += 1
        self._flush(lit, parts, True)

    def _ansi_c(self) -> str:
        self.i += 2
        out = []
        while True:
            if self.i >= len(self.s):
                raise BashSyntaxError("an unterminated $'...' quote")
            c = self.s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c != "\\":
                out.append(c)
                self.i += 1
                continue
            m = re.compile(r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})"
                           r"|c(.)|(.))", re.S).match(self.s, self.i)
            if not m:
                raise BashSyntaxError("an unterminated $'...' quote")
            self.i = m.end()
            hexa, u4, u8, octal, control, other = m.groups()
            if hexa or u4 or u8:
                code = int(hexa or u4 or u8, 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
            elif octal:
                out.append(chr(int(octal, 8) & 0xFF))
            elif control:
                out.append(chr(ord(control) & 0x1F))
            else:
                out.append(_ANSI.get(other, "\\" + other))

    def _expansion(self, parts: list[Part], scripts: list[Script], *, quoted: bool) -> None:
        """At ``$`` or a backtick: a parameter, ``${…}``, ``$(…)``, ``$((…))`` or `` `…` ``."""
        self._nested()
        try:
            self._expansion_inner(parts, scripts, quoted)
        finally:
            self.depth -= 1

    def _expansion_inner(self, parts: list[Part], scripts: list[Script], quoted: bool) -> None:
        s, i = self.s, self.i
        if s[i] == "`":
            scripts.append(self._backticks(quoted))
            parts.append(("sub", "`", quoted))
            return
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if nxt == "(":
            if s.startswith("((", i + 1):
                arith = self._try_arith(i + 3)
                if arith is not None:
                    scripts.extend(arith.scripts)
                    parts.append(("arith", None, quoted))
                    return
            self.i = i + 2
            scripts.append(self._until_paren())
            parts.append(("sub", "$(", quoted))
        elif nxt and nxt in "[{":  # $[ … ], the old arithmetic, or ${ … }: subscripts, offsets are arithmetic
            self.i = i + 2
            body_start = self.i
            inner = self._balanced(nxt, "]" if nxt == "[" else "}")
            scripts.extend(inner)
            if nxt == "[":
                parts.append(("arith", None, quoted))
                return
            parts.append(("var", s[body_start:self.i - 1], quoted))  # ${HOME%/*}: the whole of it
        elif nxt and (nxt in _SPECIAL_PARAMS):
            self.i = i + 2
            parts.append(("var", nxt, quoted))
        elif m := _NAME.match(s, i + 1):
            self.i = m.end()
            parts.append(("var", m.group(), quoted))
        else:
            self.i = i + 1
            parts.append(("lit", "$", quoted))

    def _backticks(self, quoted: bool) -> Script:
        out = []
        i = self.i + 1
        while True:
            if i >= len(self.s):
                raise BashSyntaxError("an unterminated backtick")
            c = self.s[i]
            if c == "`":
                break
            if c == "\\" and i + 1 < len(self.s) and self.s[i + 1] in ("$`\\" + ('"' if quoted else "")):
                out.append(self.s[i + 1])
                i += 2
                continue
            out.append(c)
            i += 1
        self.i = i + 1
        return self._sub_parser("".join(out)).script()

    def _sub_parser(self, source: str) -> "_Parser":
        return _Parser(source, self.depth + 1)

    def _until_paren(self) -> Script:
        """After ``$(``, ``<(`` or ``>(``: the script up to its closing parenthesis."""
        self._nested()
        try:
            body = self.list(frozenset(), paren=True)
        finally:
            self.depth -= 1
        self._expect(")")
        return Script(self.s, body)

    def _try_arith(self, start: int) -> Word | None:
        """Arithmetic from ``start`` (after ``((``) to its ``))``; None if the parentheses say
        it is a subshell after all, as bash decides."""
        if start in self.not_arithmetic:
            return None
        saved = self.i
        self.i = start
        self._nested()
        try:
            scripts = self._balanced("(", ")", arithmetic=True)
        except BashSyntaxError:
            scripts = None
        finally:
            self.depth -= 1
        if scripts is None or not self.s.startswith(")", self.i):
            self.not_arithmetic.add(start)
            self.i = saved
            return None
        self.i += 1
        text = self.s[start - 2:self.i]
        return Word(text, (("arith", None, False),), tuple(scripts), start - 2)

    def _balanced(self, open_: str, close: str, arithmetic: bool = False) -> list[Script]:
        """Skip to the ``close`` matching an ``open_`` just passed, over quotes and nested
        expansions; return the scripts those expansions run."""
        scripts: list[Script] = []
        depth = 1
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "\\":
                self.i += 2
            elif c == "'" and not arithmetic:
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise BashSyntaxError("an unterminated single quote")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                parts: list[Part] = []
                self._double_quoted(parts, scripts)
            elif c in "$`":
                self._expansion([], scripts, quoted=True)
            elif c == open_:
                depth += 1
                self.i += 1
            elif c == close:
                depth -= 1
                self.i += 1
                if depth == 0:
                    return scripts
            else:
                self.i += 1
        raise BashSyntaxError(f"an unterminated {open_}")

    # --- the lexer's small steps ------------------------------------------------------------

    def _peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def _word_ends(self, at: int) -> bool:
        return at >= len(self.s) or self.s[at] in _META

    def _raw_word(self) -> str:
        """The characters up to the next blank or operator, quotes kept (for names, delimiters)."""
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in _META:
            c = self.s[self.i]
            if c in "'\"":
                end = self.s.find(c, self.i + 1)
                if end < 0:
                    raise BashSyntaxError("an unterminated quote")
                self.i = end + 1
            else:
                self.i += 2 if c == "\\" else 1
        self.i = min(self.i, len(self.s))
        return self.s[start:self.i]

    def _peek_reserved(self) -> str | None:
        """The plain word at the position (a reserved word if it is one), or None."""
        m = re.compile(r"[^\s;&|()<>'\"\\$`]+").match(self.s, self.i)
        if self.s.startswith(("((", "("), self.i):
            return "((" if self.s.startswith("((", self.i) else "("
        if not m or not self._word_ends(m.end()):
            return None
        return m.group()

    def _expect(self, text: str) -> None:
        self._blanks()
        if not self.s.startswith(text, self.i):
            found = self.s[self.i:self.i + 10] or "the end"
            raise BashSyntaxError(f"expected {text!r}, found {found!r}")
        self.i += len(text)

    def _expect_word(self, word: str) -> None:
        self._skip_separators()
        if self._peek_reserved() != word:
            found = self.s[self.i:self.i + 10] or "the end"
            raise BashSyntaxError(f"expected {word!r}, found {found!r}")
        self.i += len(word)

    def _blanks(self) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t":
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#" and (self.i == 0 or self.s[self.i - 1] in " \t\n;&|()<>"):
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                return

    def _skip_newlines(self) -> None:
        while True:
            self._blanks()
            if self._peek() != "\n":
                return
            self._newline()

    def _skip_separators(self, comments: bool = True) -> None:
        while True:
            self._blanks()
            c = self._peek()
            if c == "\n":
                self._newline()
            elif c == ";" and not self.s.startswith(";;", self.i) and not self.s.startswith(";&", self.i):
                self.i += 1
            else:
                return
