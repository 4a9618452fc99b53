"""The lexical grammar of EDN, shared by every reader in the package, and the meaning of one token.

    TOKEN.match(text, pos).lastgroup      # "whitespace", "string", "open", "tag", ...
    skip_collection(text, pos)            # the end of the collection whose opener is at pos
    atom_value(":db/url")                 # Keyword("db/url")

Three readers use this grammar: the value reader (:mod:`._reader`), the lossless tree
(:mod:`._tree`) and the piece scanner (:mod:`._pieces`). A token's extent never depends on
what came before it, only on where it starts, so all three split text the same way.
Nesting is limited to :data:`MAX_DEPTH` levels so that every value can be printed, hashed and
compared (those recurse); deeper text is refused with a clear error.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ._values import Char, EdnSyntaxError, Keyword, Symbol
from ._writer import CHAR_NAMES

__all__ = ["MAX_DEPTH", "TOKEN", "TRIVIA_THEN_TOKEN", "WHITESPACE", "PREFIX_KINDS", "CLOSERS", "forms_taken",
           "position", "fail", "unterminated", "mismatched", "not_followed", "unmatched", "too_deep",
           "bad_token", "skip_collection", "atom_value", "string_value", "check_name", "qualify"]

MAX_DEPTH = 256

# Java's Character.isWhitespace, as Clojure's reader uses, minus the no-break spaces (U+00A0,
# U+2007, U+202F; and U+0085, which Java does not count): Python's \s without those four
_SPACES = r"\t\n\x0b\x0c\r\x1c-\x1f \u1680\u2000-\u2006\u2008-\u200a\u2028\u2029\u205f\u3000"
# a comma is whitespace too, and so is a byte-order mark at the start of a token: editors on
# Windows put one at the start of a file
WHITESPACE = "[" + _SPACES + r",\ufeff]"
_ATOM = "[^" + _SPACES + r',()\[\]{}";]'  # one character of a bare token
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'  # possessive: an unterminated string fails in one pass

# One token at a given position. The order matters: the first alternative that matches wins,
# exactly as Clojure's reader decides on a token's first characters.
_ALTERNATIVES = (
    # first the most common token: a bare one that starts with none of the characters below
    r"(?P<atom>[^" + _SPACES + r',()\[\]{}";#\\^\'`~@]' + _ATOM + "*+)"
    r"|(?P<string>#?" + _STRING + ")"
    r"|(?P<open>[(\[{]|#[{(])"
    r"|(?P<close>[)\]}])"
    r"|(?P<char>\\." + _ATOM + "*+)"
    r"|(?P<discard>#_)"
    r"|(?P<symbolic>##" + _ATOM + "*+)"
    r"|(?P<tag>#" + _ATOM + "++)"
    r"|(?P<meta>\^)"
    r"|(?P<quote>~@|['`~@])"
    r"|(?P<bad_string>#?\")"
    r"|(?P<bad_hash>#)"
    r"|(?P<bad_backslash>\\)"
)
TOKEN = re.compile(r"(?P<whitespace>" + WHITESPACE + r"++)|(?P<comment>;[^\n]*+)|" + _ALTERNATIVES, re.S)
# The value reader's pattern: whitespace and comments folded into the token after them, so
# that one match is one token that matters; ``end`` matches after the last one.
TRIVIA_THEN_TOKEN = re.compile(r"(?:" + WHITESPACE + r"++|;[^\n]*+)*+(?:" + _ALTERNATIVES + r"|(?P<end>\Z))",
                               re.S)
PREFIX_KINDS = frozenset({"discard", "tag", "meta", "quote"})
CLOSERS = {"(": ")", "[": "]", "{": "}", "#{": "}", "#(": ")"}


def forms_taken(prefix: str) -> int:
    """How many forms a prefix applies to: two for ``^`` (the metadata and the value), else one."""
    return 2 if prefix == "^" else 1


# --- messages -----------------------------------------------------------------------------------

def position(text: str, pos: int) -> str:
    """``line 3, column 7`` for an offset into ``text``."""
    return f"line {text.count(chr(10), 0, pos) + 1}, column {pos - text.rfind(chr(10), 0, pos)}"


def fail(text: str, message: str, pos: int) -> EdnSyntaxError:
    """The error to raise for ``message`` about the text at ``pos``."""
    return EdnSyntaxError(f"{message} at {position(text, pos)}")


def _clip(token: str, limit: int = 80) -> str:
    """A token for a message, cut short when it is long: a hostile file can hold a megabyte symbol."""
    return token if len(token) <= limit else f"{token[:limit]}… ({len(token):,} characters)"


def unterminated(text: str, opener: str, pos: int) -> EdnSyntaxError:
    return fail(text, f"Unterminated collection in EDN: the {opener} opened", pos)


def mismatched(text: str, opener: str, opened_at: int, pos: int) -> EdnSyntaxError:
    return fail(text, f"Mismatched {text[pos]} in EDN (the {opener} at {position(text, opened_at)} needs "
                      f"{CLOSERS[opener]})", pos)


def not_followed(text: str, prefix: str, pos: int) -> EdnSyntaxError:
    return fail(text, f"{prefix} is not followed by the form it applies to in EDN", pos)


def unmatched(text: str, pos: int) -> EdnSyntaxError:
    return fail(text, f"Unmatched {text[pos]} in EDN", pos)


def too_deep(text: str, pos: int) -> EdnSyntaxError:
    return fail(text, f"EDN nested more than {MAX_DEPTH} levels deep is not read", pos)


def bad_token(text: str, kind: str, pos: int) -> EdnSyntaxError:
    """The error for a ``bad_*`` match of :data:`TOKEN`."""
    if kind == "bad_string":
        return fail(text, "Unterminated string in EDN", pos)
    if kind == "bad_hash":
        return fail(text, "A # in EDN must start a tag, a set or a #_ discard", pos)
    return fail(text, "A backslash at the end of EDN text is not a character", pos)


# --- skipping a collection without reading it ----------------------------------------------------

# Runs of tokens that hold no brackets, then one bracket: a loop over brackets, not tokens.
# Tokens start and end exactly where TOKEN's do (a backslash starts a character only at the
# start of a token, as after #_ or ', and a # alone is an error), so the brackets are the real ones.
_RUN = re.compile(
    r"(?:" + WHITESPACE + r"++|;[^\n]*+|#?" + _STRING + r"|\\." + _ATOM + r"*+|#_|~@|[\^'`~@]"
    r"|(?:#(?=" + _ATOM + r")|[^" + _SPACES + r',()\[\]{}";#\\])' + _ATOM + r"*+)*+"
    r"(?:(?P<open>[(\[{]|#[{(])|(?P<close>[)\]}])|(?P<end>\Z)|(?P<bad>.))", re.S)


def skip_collection(text: str, pos: int) -> int:
    """The offset just past the collection whose opening bracket (``{``, ``#{`` ...) is at ``pos``.

    Brackets, strings, characters and comments are checked on the way; what the tokens in
    between mean is not (a ``#_`` with nothing after it inside goes unnoticed).
    """
    opened: list[int] = []  # where the opening bracket of each collection still open starts
    for match in _RUN.finditer(text, pos):
        group = match.lastindex
        if group == 1:
            opened.append(match.start(1))
        elif group == 2:
            at, opened_at = match.end() - 1, opened.pop()
            # "#{" and "#(" close like "{" and "("
            if (_PAIRS.get(text[opened_at]) or _PAIRS[text[opened_at + 1]]) != text[at]:
                raise mismatched(text, _opener(text, opened_at), opened_at, at)
            if not opened:
                return at + 1
        elif group == 3:
            raise unterminated(text, _opener(text, opened[-1]), opened[-1])
        else:
            at = match.start(4)
            raise bad_token(text, TOKEN.match(text, at).lastgroup, at)
    raise AssertionError("the skip pattern matches at every position")


_PAIRS = {opener: closer for opener, closer in CLOSERS.items() if len(opener) == 1}


def _opener(text: str, at: int) -> str:
    return text[at:at + 2] if text[at] == "#" else text[at]


# --- the value of one token ----------------------------------------------------------------------

_NAMED_CHARS = {name: c for c, name in CHAR_NAMES.items()}
_UNESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "b": "\b", "f": "\f"}
_STRING_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([0-7]{1,3})|(.))", re.S)
_INT = re.compile(r"([+-]?)(?:(0|[1-9][0-9]*)|0[xX]([0-9a-fA-F]+)|0([0-7]+)|([1-9][0-9]?)[rR]([0-9a-zA-Z]+))N?")
_FLOAT = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?(M)?")
_RATIO = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_SYMBOLIC = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}


def _unescape(match: re.Match) -> str:
    hex_digits, octal, other = match.groups()
    if hex_digits:
        return chr(int(hex_digits, 16))
    if octal:
        if int(octal, 8) > 0o377:
            raise EdnSyntaxError(f"Octal escape \\{octal} in an EDN string is above \\377")
        return chr(int(octal, 8))
    if other not in _UNESCAPES:
        raise EdnSyntaxError(f"Unsupported escape \\{other} in an EDN string")
    return _UNESCAPES[other]


def string_value(token: str) -> str:
    """The string a ``"…"`` token stands for; ``#"…"`` (a regular expression) is refused."""
    if token[0] == "#":
        raise EdnSyntaxError(f"{_clip(token)} is not EDN (regular expressions are Clojure code)")
    body = token[1:-1]
    return _STRING_ESCAPE.sub(_unescape, body) if "\\" in body else body


def _char(token: str) -> Char:
    body = token[1:]
    if len(body) == 1:
        return Char(body)
    if body in _NAMED_CHARS:
        return Char(_NAMED_CHARS[body])
    if re.fullmatch(r"u[0-9a-fA-F]{4}", body):
        return Char(chr(int(body[1:], 16)))
    if re.fullmatch(r"o[0-7]{1,3}", body) and int(body[1:], 8) <= 0o377:
        return Char(chr(int(body[1:], 8)))
    raise EdnSyntaxError(f"Unsupported character in EDN: {_clip(token)}")


def _number(token: str) -> int | float | Decimal | Fraction:
    if match := _INT.fullmatch(token):
        sign, decimal, hexadecimal, octal, radix, digits = match.groups()
        if decimal is not None:
            n = int(decimal)
        elif hexadecimal:
            n = int(hexadecimal, 16)
        elif octal:
            n = int(octal, 8)
        else:
            n = int(digits, int(radix))  # a digit beyond the radix is a ValueError: invalid
        return -n if sign == "-" else n
    match = _FLOAT.fullmatch(token)
    if match and any(match.groups()):  # a bare 09 is neither octal nor a float
        return Decimal(token[:-1]) if match[3] else float(token)
    if match := _RATIO.fullmatch(token):
        numerator, denominator = int(match[1]), int(match[2])
        if denominator == 0:
            raise EdnSyntaxError(f"Ratio with a zero denominator in EDN: {_clip(token)}")
        ratio = Fraction(numerator, denominator)
        return ratio.numerator if ratio.denominator == 1 else ratio
    raise ValueError(token)


def check_name(name: str, token: str) -> None:
    """Refuse a symbol, keyword or tag name that Clojure would not read."""
    namespace, slash, local = name.partition("/")
    if name != "/" and (not name or name.endswith(":") or "::" in name or (slash and not (namespace and local))):
        raise EdnSyntaxError(f"Invalid symbol or keyword in EDN: {_clip(token)}")


def atom_value(token: str) -> Any:
    """The value of a bare token, a character literal or a ``##`` token: ``nil``, ``42``, ``:k``, ``\\a``."""
    c = token[0]
    if c == "\\":
        return _char(token)
    if c == "#":
        if token in _SYMBOLIC:
            return _SYMBOLIC[token]
        raise EdnSyntaxError(f"{_clip(token)} is not EDN")
    if token in ("nil", "true", "false"):
        return None if token == "nil" else token == "true"
    if c in "0123456789" or (c in "+-" and token[1:2].isascii() and token[1:2].isdigit()):
        if token.isascii() and token.isdigit() and (c != "0" or len(token) == 1) and len(token) < 19:
            return int(token)  # the common case, without the regular expressions
        try:
            return _number(token)
        except EdnSyntaxError:
            raise
        except ValueError:
            limit = sys.get_int_max_str_digits()  # Python refuses longer integers (quadratic to convert)
            if limit and len(token) > limit and (_INT.fullmatch(token) or _RATIO.fullmatch(token)):
                raise EdnSyntaxError(f"Number in EDN has too many digits to read ({len(token):,} characters; "
                                     f"integers of up to {limit:,} digits are read): {_clip(token, 40)}") from None
            raise EdnSyntaxError(f"Invalid number in EDN: {_clip(token)}") from None
    if c == ":":
        if token.startswith("::"):
            raise EdnSyntaxError(f"Auto-resolved keywords like {_clip(token)} are Clojure code, not EDN")
        check_name(token[1:], token)
        return Keyword(token[1:])
    check_name(token, token)
    return Symbol(token)


def qualify(key: Any, namespace: str) -> Any:
    """A key of ``#:ns{…}``: a bare keyword or symbol takes the namespace, ``:_/k`` drops it."""
    if isinstance(key, (Keyword, Symbol)):
        if key.name.startswith("_/"):
            return type(key)(key.name[2:])
        if "/" not in key.name:
            return type(key)(f"{namespace}/{key.name}")
    return key
