"""EDN: read and print values, and edit files in place without losing a comment.

    from bettong_nb import edn

    edn.get_in_file("config.edn", [":server", ":port"])          # 8080
    edn.set_in_file("config.edn", [":server", ":port"], "9090")  # only "8080" changes in the file
    edn.update_in_file("config.edn", [":server", ":port"], lambda port: port + 1)
    edn.delete_in_file("config.edn", [":debug"])

    edn.loads('{:a [1 2] :b #{"x"}}')   # EdnMap({Keyword('a'): (1, 2), Keyword('b'): EdnSet({'x'})})
    edn.dumps({edn.Keyword("a"): 1})    # '{:a 1}'

A key in a path is EDN text (``":server"``, ``'"name"'``, ``"0"``) or a value (``Keyword("server")``,
``0``); an int indexes a vector. A path is a list or tuple of keys, so a vector used as a key
goes inside it: ``["[1 2]"]``. A string value given to ``set_in_file`` is EDN text too:
``"9090"`` is a number, ``'"localhost"'`` a string and ``"localhost"`` a symbol.

EDN in Python::

    nil true false               None True False
    42 42N  1.5  1.5M  1/2       int int  float  decimal.Decimal  fractions.Fraction
    "text"  \\a  :ns/kw  sym      str  Char("a")  Keyword("ns/kw")  Symbol("sym")
    [1 2]                        tuple (a list or tuple you pass is written as a vector)
    (1 2)                        EdnList, a tuple subclass
    {:a 1}                       EdnMap, immutable and ordered (a dict you pass works too)
    #{1 2}                       EdnSet, immutable (a set you pass works too)
    #inst "…"  #uuid "…"         Tagged("inst", "…"): kept as written, never converted
    #:db{:id 1}                  EdnMap({Keyword("db/id"): 1})
    'x                           EdnList((Symbol("quote"), Symbol("x")))
    ^{:doc "x"} [1]              (1,): metadata is dropped

Every value is hashable, so maps and vectors can be map keys and set members. Equality
follows Clojure (:func:`edn_equal`, and ``==`` on EdnMap, EdnSet and Tagged): ``1`` is not
``1.0``, ``true`` is not ``1``, and a vector equals a list with the same items. Python's own
``==`` on tuples says ``(1,) == (True,)``, so compare data with :func:`edn_equal`.

Edits work on a lossless syntax tree (:func:`parse`, where ``render(parse(text)) == text``):
only the node of the value changes, so comments, blank lines, key order and hand
formatting survive. Every edited text is read back and compared with the data the edit
should produce; when they differ nothing is written. Files are replaced atomically.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "EdnError", "EdnSyntaxError", "Keyword", "Symbol", "Char", "Tagged", "EdnList", "EdnMap", "EdnSet",
    "edn_equal", "loads", "dumps", "pretty", "parse_key", "parse_path", "parse_value",
    "get_in", "assoc_in", "dissoc_in",
    "read_file", "write_file", "get_in_file", "set_in_file", "update_in_file", "delete_in_file",
    "Node", "parse", "render", "locate", "node_at", "node_of", "set_in_str", "delete_in_str", "verify",
]


class EdnError(ValueError):
    """An EDN value cannot be read, found or changed; the message says why."""


class EdnSyntaxError(EdnError):
    """The text is not valid EDN."""


# --- values -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Keyword:
    """``:name``; a namespace is part of the name: ``Keyword("db/url")`` is ``:db/url``."""

    name: str


@dataclass(frozen=True, slots=True)
class Symbol:
    """A bare word such as ``localhost`` or ``clojure.core/inc``."""

    name: str


@dataclass(frozen=True, slots=True)
class Char:
    """A character literal: ``\\a``, ``\\newline``."""

    char: str

    def __post_init__(self) -> None:
        if len(self.char) != 1:
            raise ValueError(f"a Char holds one character, not {self.char!r}")


@dataclass(frozen=True, slots=True, eq=False)
class Tagged:
    """A tagged literal kept as written: ``#inst "2024-01-02"`` is ``Tagged("inst", "2024-01-02")``."""

    tag: str
    value: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tagged) and edn_equal(self, other)

    def __hash__(self) -> int:
        return hash(_canon(self))


class EdnList(tuple):
    """An EDN list ``(1 2)``; a tuple subclass, so it stays apart from a vector (a plain tuple)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"EdnList({tuple(self)!r})"


class EdnMap(Mapping):
    """An EDN map: immutable, hashable and in insertion order; keys match by EDN equality.

        m = EdnMap({Keyword("port"): 8080})
        m[Keyword("port")]                      # 8080
        m.assoc(Keyword("host"), "localhost")   # a new map; m is unchanged
    """

    __slots__ = ("_entries",)

    def __init__(self, items: Mapping | Iterable[tuple[Any, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        # keyed by the canonical form so that 1, 1.0 and true stay three keys
        self._entries = {_canon(k): (k, v) for k, v in pairs}

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._entries[_canon(key)][1]
        except KeyError:
            raise KeyError(key) from None

    def __iter__(self):
        return (k for k, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and edn_equal(self, other)

    def __hash__(self) -> int:
        return hash(_canon(self))

    def __repr__(self) -> str:
        return "EdnMap({" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "})"

    def assoc(self, key: Any, value: Any) -> EdnMap:
        """A copy with ``key`` set: an existing key keeps its place, a new one goes last."""
        return EdnMap([*self.items(), (key, value)])

    def dissoc(self, key: Any) -> EdnMap:
        """A copy without ``key``."""
        gone = _canon(key)
        return EdnMap(pair for canon, pair in self._entries.items() if canon != gone)


class EdnSet(AbstractSet):
    """An EDN set: immutable, hashable, in the order written; members match by EDN equality."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items = {_canon(x): x for x in items}

    def __contains__(self, item: object) -> bool:
        try:
            return _canon(item) in self._items
        except TypeError:
            return False

    def __iter__(self):
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractSet) and edn_equal(self, other)

    def __hash__(self) -> int:
        return hash(_canon(self))

    def __repr__(self) -> str:
        return "EdnSet({" + ", ".join(map(repr, self)) + "})" if self._items else "EdnSet()"


def _canon(value: Any) -> Any:
    """A hashable stand-in that is equal exactly when the EDN values are (Clojure's ``=``)."""
    if value is None or isinstance(value, (str, Keyword, Symbol, Char)):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        # NaN equals NaN here, unlike Clojure: otherwise a file holding ##NaN could never be verified
        return ("float", value) if value == value else ("nan",)
    if isinstance(value, Fraction):
        return ("int", value.numerator) if value.denominator == 1 else ("ratio", value)
    if isinstance(value, Decimal):
        return ("decimal", value)
    if isinstance(value, Tagged):
        return ("tagged", value.tag, _canon(value.value))
    if isinstance(value, Mapping):
        return ("map", frozenset((_canon(k), _canon(v)) for k, v in value.items()))
    if isinstance(value, AbstractSet):
        return ("set", frozenset(map(_canon, value)))
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(map(_canon, value)))  # a list equals a vector, as in Clojure
    raise TypeError(f"{type(value).__name__} is not an EDN value")


def edn_equal(a: Any, b: Any) -> bool:
    """Clojure's ``=``: ``1`` is not ``1.0`` or ``true``, ``[1 2]`` equals ``(1 2)``, ``:a`` is not ``"a"``."""
    return _canon(a) == _canon(b)


def _is_index(key: Any) -> bool:
    return isinstance(key, int) and not isinstance(key, bool)


def _is_vector(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and not isinstance(value, EdnList)


# --- printing ---------------------------------------------------------------------------------

_CHAR_NAMES = {"\n": "newline", " ": "space", "\t": "tab", "\r": "return", "\b": "backspace", "\f": "formfeed"}
_STRING_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')


def _quote(s: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _STRING_ESCAPES.get(m[0], f"\\u{ord(m[0]):04x}"), s) + '"'


def _char_text(c: str) -> str:
    if c in _CHAR_NAMES:
        return "\\" + _CHAR_NAMES[c]
    if (c.isspace() or not c.isprintable()) and ord(c) <= 0xFFFF:
        return f"\\u{ord(c):04x}"
    return "\\" + c


def dumps(value: Any) -> str:
    """``value`` as EDN on one line, as Clojure's ``pr-str`` writes it: ``{:a 1, :b [2 3]}``."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "##NaN"
        return repr(value) if math.isfinite(value) else ("##Inf" if value > 0 else "##-Inf")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise EdnError(f"{value} has no EDN form as a decimal; use a float")
        return f"{value}M"
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, Keyword):
        return ":" + value.name
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, Char):
        return _char_text(value.char)
    if isinstance(value, Tagged):
        return f"#{value.tag} {dumps(value.value)}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{dumps(k)} {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, AbstractSet):
        return "#{" + " ".join(map(dumps, value)) + "}"
    if isinstance(value, EdnList):
        return "(" + " ".join(map(dumps, value)) + ")"
    if isinstance(value, (tuple, list)):
        return "[" + " ".join(map(dumps, value)) + "]"
    raise TypeError(f"{type(value).__name__} cannot be written as EDN")


def pretty(value: Any, *, width: int = 72) -> str:
    """Like :func:`dumps`, but a collection wider than ``width`` gets one entry per line."""
    return _pretty(value, 0, width)


def _pretty(value: Any, column: int, width: int) -> str:
    flat = dumps(value)
    if column + len(flat) <= width:
        return flat
    if isinstance(value, Tagged):
        head = f"#{value.tag} "
        return head + _pretty(value.value, column + len(head), width)
    if isinstance(value, Mapping):
        entries = []
        for k, v in value.items():
            key = dumps(k)
            entries.append(f"{key} {_pretty(v, column + 2 + len(key), width)}")
        return "{" + (",\n" + " " * (column + 1)).join(entries) + "}"
    if isinstance(value, AbstractSet):
        opener, closer = "#{", "}"
    elif isinstance(value, EdnList):
        opener, closer = "(", ")"
    elif isinstance(value, (tuple, list)):
        opener, closer = "[", "]"
    else:
        return flat
    inner = column + len(opener)
    return opener + ("\n" + " " * inner).join(_pretty(x, inner, width) for x in value) + closer


# --- the lossless syntax tree -----------------------------------------------------------------

@dataclass(eq=False, slots=True)
class Node:
    """A piece of EDN text; :func:`render` gives the text back byte for byte.

    ``kind`` is whitespace, comment, token, list, vector, map, set, wrapper or root. ``text``
    is the whole text of whitespace, a comment or a token; a collection's opening bracket
    (``#{`` for a set); or a wrapper's prefix (``^``, ``#_``, ``#inst``, ``#:ns``, ``'``).
    A wrapper owns the forms its prefix applies to (two for ``^``: the metadata and the
    value) and the whitespace and comments between them. ``#_`` wrappers are ``discard``.
    """

    kind: str
    text: str = ""
    children: list[Node] = field(default_factory=list)
    close: str = ""
    discard: bool = False


def _is_semantic(node: Node) -> bool:
    """A node that is data, not whitespace, a comment or a ``#_`` form."""
    return node.kind not in ("whitespace", "comment") and not node.discard


def _semantic_indices(node: Node) -> list[int]:
    return [i for i, child in enumerate(node.children) if _is_semantic(child)]


# Java's Character.isWhitespace, as Clojure's reader uses, minus the no-break spaces; a comma
# too, and a byte-order mark, which editors on Windows put at the start of a file
_WHITESPACE = re.compile(r"(?:(?![\u00a0\u2007\u202f\x85])[\s,\ufeff])+")
_ATOM = re.compile(r'(?:[^\s,()\[\]{}";]|[\u00a0\u2007\u202f\x85])+')
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_COLLECTIONS = {"(": ("list", ")"), "[": ("vector", "]"), "{": ("map", "}"), "#{": ("set", "}"), "#(": ("list", ")")}


def _position(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}, column {pos - text.rfind(chr(10), 0, pos)}"


class _Reader:
    """Reads nodes one at a time, so that a caller can stop after the first form."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int) -> None:
        raise EdnSyntaxError(f"{message} at {_position(self.text, pos)}")

    def take(self, kind: str, end: int) -> Node:
        node = Node(kind, self.text[self.pos:end])
        self.pos = end
        return node

    def atom_end(self, pos: int) -> int:
        match = _ATOM.match(self.text, pos)
        return match.end() if match else pos

    def node(self) -> Node | None:
        """The next node, or None at the end of the text or at a closing bracket."""
        text, pos = self.text, self.pos
        if pos >= len(text) or text[pos] in ")]}":
            return None
        c = text[pos]
        if match := _WHITESPACE.match(text, pos):
            return self.take("whitespace", match.end())
        if c == ";":
            end = text.find("\n", pos)
            return self.take("comment", len(text) if end < 0 else end)
        if c == '"' or text.startswith('#"', pos):
            match = _STRING.match(text, pos + (c == "#"))
            if not match:
                self.fail("Unterminated string in EDN", pos)
            return self.take("token", match.end())
        if c == "\\":
            if pos + 1 >= len(text):
                self.fail("A backslash at the end of EDN text is not a character", pos)
            return self.take("token", self.atom_end(pos + 2))  # the next character is taken as is: \; \(
        if c in "([{" or text.startswith(("#{", "#("), pos):
            return self.collection(text[pos:pos + 1 + (c == "#")])
        if text.startswith("#_", pos):
            return self.wrapper("#_", 1, discard=True)
        if text.startswith("##", pos):
            return self.take("token", self.atom_end(pos + 2))
        if c == "#":
            end = self.atom_end(pos + 1)
            if end == pos + 1:
                self.fail("A # in EDN must start a tag, a set or a #_ discard", pos)
            return self.wrapper(text[pos:end], 1)
        if c == "^":
            return self.wrapper("^", 2)
        if c in "'`~@":
            return self.wrapper("~@" if text.startswith("~@", pos) else c, 1)
        return self.take("token", self.atom_end(pos))

    def collection(self, opener: str) -> Node:
        start = self.pos
        kind, close = _COLLECTIONS[opener]
        node = Node(kind, opener, close=close)
        self.pos += len(opener)
        while (child := self.node()) is not None:
            node.children.append(child)
        if self.pos >= len(self.text):
            self.fail(f"Unterminated collection in EDN: the {opener} opened", start)
        if self.text[self.pos] != close:
            self.fail(f"Mismatched {self.text[self.pos]} in EDN (the {opener} at "
                      f"{_position(self.text, start)} needs {close})", self.pos)
        self.pos += 1
        return node

    def wrapper(self, prefix: str, forms: int, *, discard: bool = False) -> Node:
        start = self.pos
        node = Node("wrapper", prefix, discard=discard)
        self.pos += len(prefix)
        while forms:
            child = self.node()
            if child is None:
                self.fail(f"{prefix} is not followed by the form it applies to in EDN", start)
            node.children.append(child)
            forms -= _is_semantic(child)
        return node

    def stray(self) -> None:
        if self.pos < len(self.text):
            self.fail(f"Unmatched {self.text[self.pos]} in EDN", self.pos)


def parse(text: str) -> Node:
    """The lossless syntax tree of ``text`` (a ``root`` node); ``render(parse(text)) == text``."""
    reader = _Reader(text)
    root = Node("root")
    while (child := reader.node()) is not None:
        root.children.append(child)
    reader.stray()
    return root


def render(node: Node) -> str:
    """The text of a tree or node."""
    out: list[str] = []

    def walk(n: Node) -> None:
        out.append(n.text)
        for child in n.children:
            walk(child)
        out.append(n.close)

    walk(node)
    return "".join(out)


# --- from nodes to values ---------------------------------------------------------------------

_NAMED_CHARS = {name: c for c, name in _CHAR_NAMES.items()}
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


def _char(text: str) -> Char:
    body = text[1:]
    if len(body) == 1:
        return Char(body)
    if body in _NAMED_CHARS:
        return Char(_NAMED_CHARS[body])
    if re.fullmatch(r"u[0-9a-fA-F]{4}", body):
        return Char(chr(int(body[1:], 16)))
    if re.fullmatch(r"o[0-7]{1,3}", body) and int(body[1:], 8) <= 0o377:
        return Char(chr(int(body[1:], 8)))
    raise EdnSyntaxError(f"Unsupported character in EDN: {text}")


def _number(text: str) -> int | float | Decimal | Fraction:
    if match := _INT.fullmatch(text):
        sign, decimal, hexadecimal, octal, radix, digits = match.groups()
        if decimal is not None:
            n = int(decimal)
        elif hexadecimal:
            n = int(hexadecimal, 16)
        elif octal:
            n = int(octal, 8)
        else:
            try:
                n = int(digits, int(radix))
            except ValueError:
                raise EdnSyntaxError(f"Invalid number in EDN: {text}") from None
        return -n if sign == "-" else n
    match = _FLOAT.fullmatch(text)
    if match and any(match.groups()):  # a bare 09 is neither octal nor a float
        return Decimal(text[:-1]) if match[3] else float(text)
    if match := _RATIO.fullmatch(text):
        if int(match[2]) == 0:
            raise EdnSyntaxError(f"Ratio with a zero denominator in EDN: {text}")
        ratio = Fraction(int(match[1]), int(match[2]))
        return ratio.numerator if ratio.denominator == 1 else ratio
    raise EdnSyntaxError(f"Invalid number in EDN: {text}")


def _check_name(name: str, text: str) -> None:
    namespace, slash, local = name.partition("/")
    if name != "/" and (not name or name.endswith(":") or "::" in name or (slash and not (namespace and local))):
        raise EdnSyntaxError(f"Invalid symbol or keyword in EDN: {text}")


def _token(text: str) -> Any:
    c = text[0]
    if c == '"':
        return _STRING_ESCAPE.sub(_unescape, text[1:-1])
    if c == "\\":
        return _char(text)
    if c == "#":
        if text in _SYMBOLIC:
            return _SYMBOLIC[text]
        raise EdnSyntaxError(f"{text} is not EDN" + (" (regular expressions are Clojure code)" if text[1] == '"' else ""))
    if text in ("nil", "true", "false"):
        return None if text == "nil" else text == "true"
    if c in "0123456789" or (c in "+-" and text[1:2].isascii() and text[1:2].isdigit()):
        return _number(text)
    if c == ":":
        if text.startswith("::"):
            raise EdnSyntaxError(f"Auto-resolved keywords like {text} are Clojure code, not EDN")
        _check_name(text[1:], text)
        return Keyword(text[1:])
    _check_name(text, text)
    return Symbol(text)


def _qualify(key: Any, namespace: str) -> Any:
    """A key of ``#:ns{…}``: a bare keyword or symbol takes the namespace, ``:_/k`` drops it."""
    if isinstance(key, (Keyword, Symbol)):
        if key.name.startswith("_/"):
            return type(key)(key.name[2:])
        if "/" not in key.name:
            return type(key)(f"{namespace}/{key.name}")
    return key


def _map_view(node: Node) -> tuple[Node, str | None, list[int]] | None:
    """The map node inside ``node``, its ``#:ns`` namespace, and the step from ``node`` to it."""
    if node.kind == "map":
        return node, None, []
    if node.kind == "wrapper" and node.text.startswith("#:"):
        i = _semantic_indices(node)[0]
        if node.children[i].kind == "map":
            return node.children[i], node.text[2:], [i]
    return None


def _entries(node: Node, namespace: str | None = None) -> list[tuple[Any, int, int]]:
    """(key, key position, value position) for each entry of a map node."""
    positions = _semantic_indices(node)
    if len(positions) % 2:
        raise EdnSyntaxError("A map in EDN needs an even number of forms: key, value, key, value")
    entries, seen = [], set()
    for k, v in zip(positions[::2], positions[1::2]):
        key = _value(node.children[k])
        if namespace is not None:
            key = _qualify(key, namespace)
        canon = _canon(key)
        if canon in seen:
            raise EdnSyntaxError(f"Duplicate key in an EDN map: {dumps(key)}")
        seen.add(canon)
        entries.append((key, k, v))
    return entries


def _values(node: Node) -> list[Any]:
    return [_value(child) for child in node.children if _is_semantic(child)]


def _value(node: Node) -> Any:
    """The data a semantic node stands for."""
    if node.kind == "token":
        return _token(node.text)
    if node.kind == "vector":
        return tuple(_values(node))
    if node.kind == "map":
        return EdnMap((key, _value(node.children[v])) for key, _, v in _entries(node))
    if node.kind == "set":
        items = _values(node)
        result = EdnSet(items)
        if len(result) != len(items):
            raise EdnSyntaxError(f"Duplicate item in an EDN set: {dumps(EdnSet(items))}")
        return result
    if node.kind == "list" and node.text == "(":
        return EdnList(_values(node))
    prefix = node.text
    if node.kind == "wrapper" and prefix == "^":
        return _value(node.children[_semantic_indices(node)[-1]])
    if node.kind == "wrapper" and prefix.startswith("#:"):
        view = _map_view(node)
        if view is None or prefix.startswith("#::"):
            raise EdnSyntaxError(f"{prefix} must be followed by a map, and names its namespace in EDN")
        map_node, namespace, _ = view
        return EdnMap((key, _value(map_node.children[v])) for key, _, v in _entries(map_node, namespace))
    if node.kind == "wrapper" and prefix == "'":  # (quote x), as Clojure reads it; found in lein profiles
        return EdnList((Symbol("quote"), _value(node.children[_semantic_indices(node)[0]])))
    if node.kind == "wrapper" and prefix.startswith("#") and prefix[1:2].isalpha():
        _check_name(prefix[1:], prefix)
        return Tagged(prefix[1:], _value(node.children[_semantic_indices(node)[0]]))
    raise EdnSyntaxError(f"{prefix}… is Clojure code, not EDN data")


def _first_value(tree: Node) -> Any:
    positions = _semantic_indices(tree)
    return _value(tree.children[positions[0]]) if positions else None


def loads(text: str) -> Any:
    """The first EDN form in ``text`` (anything after it is not read), or None if there is none."""
    reader = _Reader(text)
    while (node := reader.node()) is not None:
        if _is_semantic(node):
            return _value(node)
    reader.stray()
    return None


# --- paths and values from the model ----------------------------------------------------------

def parse_key(key: Any) -> Any:
    """A path element: a string is read as one EDN form (``":server"`` -> ``Keyword("server")``,
    ``"0"`` -> 0); a string that does not read, or reads as nil, stays a string; anything else
    is already a key."""
    if not isinstance(key, str):
        return key
    try:
        value = loads(key)
    except EdnSyntaxError:
        return key
    return key if value is None else value


def parse_path(path: Any) -> list:
    """A list or tuple is a path of keys; anything else is a path of one key."""
    if isinstance(path, (list, tuple)):
        return [parse_key(k) for k in path]
    return [parse_key(path)]


def parse_value(value: Any) -> Any:
    """A string is read as one EDN form (``""`` is nil); anything else is already a value."""
    return loads(value) if isinstance(value, str) else value


def _show_path(path: Sequence) -> str:
    return " ".join(map(dumps, path))


def _nonempty(path: list) -> list:
    if not path:
        raise EdnError("path must name at least one key")
    return path


# --- data operations (Clojure's get-in, assoc-in and dissoc) -----------------------------------

def get_in(data: Any, path: Sequence) -> Any:
    """The value at ``path``, or None where a key is missing; an int indexes a vector."""
    for key in path:
        if isinstance(data, Mapping):
            data = data.get(key)
        elif _is_vector(data) and _is_index(key) and 0 <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def assoc_in(data: Any, path: Sequence, value: Any) -> Any:
    """``data`` with ``value`` at ``path``; missing maps on the way are created, and a
    vector takes an index up to its length (which appends)."""
    key, rest = _nonempty(list(path))[0], path[1:]
    if rest:
        value = assoc_in(get_in(data, [key]), rest, value)
    if data is None:
        return EdnMap([(key, value)])
    if isinstance(data, Mapping):
        return EdnMap(data).assoc(key, value)
    if _is_vector(data):
        if _is_index(key) and 0 <= key <= len(data):
            return (*data[:key], value, *data[key + 1:])
        raise EdnError(f"A vector is indexed by a whole number from 0 to {len(data)}, not {dumps(key)}")
    shown = dumps(data)
    if len(shown) > 40:
        shown = shown[:39] + "…"
    raise EdnError(f"Cannot set {dumps(key)} inside {shown}: only maps and vectors hold keys")


def dissoc_in(data: Any, path: Sequence) -> Any:
    """``data`` without the map key at ``path``; raises when it is not there."""
    *parents, key = _nonempty(list(path))
    holder = get_in(data, parents)
    if _is_vector(holder) and _is_index(key):
        raise EdnError(f"{_show_path(path)} is an item of a vector; only map keys can be removed "
                       "(set the whole vector instead)")
    if not (isinstance(holder, Mapping) and key in holder):
        raise EdnError(f"No such key: {_show_path(path)}")
    smaller = EdnMap(holder).dissoc(key)
    return assoc_in(data, parents, smaller) if parents else smaller


# --- navigating and editing the tree ----------------------------------------------------------

def node_at(tree: Node, address: Sequence[int]) -> Node:
    """The node at ``address``, a list of child positions from the root (see :func:`locate`)."""
    for i in address:
        tree = tree.children[i]
    return tree


def _target(tree: Node, address: list[int]) -> list[int] | None:
    """Step from the root into its first form, and over metadata: ``^:private {…}`` is the map.

    Tagged literals are not stepped into: ``#inst "…"`` is one value, replaced whole.
    """
    node = node_at(tree, address)
    if node.kind == "root":
        positions = _semantic_indices(node)
        if not positions:
            return None
        address = [*address, positions[0]]
        node = node.children[positions[0]]
    while node.kind == "wrapper" and node.text == "^":
        i = _semantic_indices(node)[-1]
        address, node = [*address, i], node.children[i]
    return address


def _child(node: Node, key: Any) -> list[int] | None:
    if view := _map_view(node):
        map_node, namespace, step = view
        for k, _, v in _entries(map_node, namespace):
            if edn_equal(k, key):
                return [*step, v]
        return None
    if node.kind == "vector" and _is_index(key):
        positions = _semantic_indices(node)
        if 0 <= key < len(positions):
            return [positions[key]]
    return None


def locate(tree: Node, path: Sequence) -> list[int] | None:
    """The address of the node that holds the value at ``path`` in the first form, or None.

        tree = parse("{:server {:port 8080}}")
        node_at(tree, locate(tree, [Keyword("server"), Keyword("port")])).text   # "8080"
    """
    address = _target(tree, [])
    for key in path:
        step = None if address is None else _child(node_at(tree, address), key)
        if step is None:
            return None
        address = _target(tree, address + step)
    return address


def node_of(value: Any) -> Node:
    """The node for ``value`` printed as EDN. Editors call it through the module, so tests can
    swap it for one that returns garbage and check that verification catches it."""
    root = parse(dumps(value))
    return root.children[_semantic_indices(root)[0]]


def verify(updated: str, expected: Any) -> None:
    """Raise unless ``updated`` reads back as exactly ``expected``."""
    try:
        actual = _first_value(parse(updated))
    except EdnSyntaxError as exc:
        raise EdnError(f"Edit would have produced unreadable EDN; file left alone ({exc})") from None
    if not edn_equal(actual, expected):
        raise EdnError("Edit would have changed more than the value asked for; file left alone")


def _replace(tree: Node, address: list[int], node: Node) -> None:
    node_at(tree, address[:-1]).children[address[-1]] = node


def _newline_indent(separator: str, newline: str) -> str:
    """The line break and indentation that start the line after ``separator``."""
    return newline + separator[separator.rfind("\n") + 1:]


def _append_entry(map_node: Node, key: Node, value: Node, newline: str) -> None:
    """Add ``key value`` after the map's last entry, laid out like that entry."""
    children = map_node.children
    positions = _semantic_indices(map_node)
    if positions:
        last_key, last_value = positions[-2], positions[-1]
        before = children[last_key - 1] if last_key else None
        if before is None or before.kind != "whitespace":
            indent = " "
        elif "\n" in before.text:
            indent = _newline_indent(before.text, newline)  # a new line in the last key's column
        else:
            indent = before.text  # an inline map stays inline, commas and all
        at = last_value + 1
        # a comment on the last entry's line stays with that entry
        after = [child.kind for child in children[at:at + 2]]
        if after[:1] == ["comment"]:
            at += 1
        elif after == ["whitespace", "comment"] and "\n" not in children[at].text:
            at += 2
    else:
        indent, at = "", len(children)
    added = [key, Node("whitespace", " "), value]
    if at and children[at - 1].kind == "comment":
        if "\n" not in indent:
            indent = newline + indent  # or the new entry would end up inside the comment
        if children[at - 1].text.endswith("\r"):
            # the comment holds the \r of its \r\n: the entry goes in between and brings its own \r
            indent = indent.replace("\r\n", "\n", 1)
            added.append(Node("whitespace", "\r"))
    children[at:at] = [Node("whitespace", indent), *added] if indent else added


def _describe(node: Node) -> str:
    if node.kind == "token":
        return node.text
    if node.kind == "wrapper":
        return f"a {node.text} value"
    return f"a {node.kind}"


def _set_text(text: str, path: list, value: Any) -> tuple[str, Any]:
    _nonempty(path)
    tree = parse(text)
    expected = assoc_in(_first_value(tree), path, value)
    address = locate(tree, path)
    if address is not None:
        _replace(tree, address, node_of(value))
    else:
        _add(tree, path, value, "\r\n" if "\r\n" in text else "\n")
    updated = render(tree)
    verify(updated, expected)
    return updated, expected


def _add(tree: Node, path: list, value: Any, newline: str) -> None:
    """Add the missing end of ``path`` to the deepest map on it that exists."""
    for depth in range(len(path) - 1, -1, -1):
        address = locate(tree, path[:depth])
        if address is not None:
            break
    else:
        raise EdnError("The text holds no EDN value to add a key to; write the whole value instead")
    key = path[depth]
    for inner in reversed(path[depth + 1:]):
        value = EdnMap([(inner, value)])
    node = node_at(tree, address)
    if node.kind == "token" and node.text == "nil":
        _replace(tree, address, node_of(EdnMap([(key, value)])))  # nil is where the map goes
        return
    view = _map_view(node)
    if view is None:
        raise EdnError(f"Cannot add the key {dumps(key)} to {_describe(node)}; only maps take new keys")
    _append_entry(view[0], node_of(key), node_of(value), newline)


def _delete_text(text: str, path: list) -> tuple[str, Any]:
    tree = parse(text)
    expected = dissoc_in(_first_value(tree), path)
    map_node, namespace, _ = _map_view(node_at(tree, locate(tree, path[:-1])))
    _, k, v = next(entry for entry in _entries(map_node, namespace) if edn_equal(entry[0], path[-1]))
    children = map_node.children
    # from the whitespace before the key through the value: what follows (a comment) stays
    start = k - 1 if k and children[k - 1].kind == "whitespace" else k
    end = v + 1
    if k == 0 and end < len(children) and children[end].kind == "whitespace":
        end += 1  # the first entry: the next one moves up to the brace
    del children[start:end]
    follows = children[start] if start < len(children) else None
    if start and children[start - 1].kind == "comment" and not (
            follows and follows.kind == "whitespace" and follows.text.startswith("\n")):
        children.insert(start, Node("whitespace", "\n"))  # what follows must not join the comment
    updated = render(tree)
    verify(updated, expected)
    return updated, expected


def set_in_str(text: str, path: Sequence, value: Any) -> str:
    """``text`` with the value at ``path`` set and every other byte the same.

    An existing value's node is replaced; a missing key is added after the last entry of the
    deepest map on the path, in that entry's column, wrapped in maps for the rest of the path.
    The result is read back and must equal the expected data, or EdnError is raised.
    """
    return _set_text(text, list(path), value)[0]


def delete_in_str(text: str, path: Sequence) -> str:
    """``text`` without the map entry at ``path``; comments around it stay."""
    return _delete_text(text, _nonempty(list(path)))[0]


# --- files ------------------------------------------------------------------------------------

def _read_text(path: str | os.PathLike) -> str:
    with open(path, encoding="utf-8", newline="") as f:  # newline="" keeps \r\n byte for byte
        return f.read()


def _write_text(path: str | os.PathLike, text: str) -> None:
    """Replace the file (the target of a symlink) atomically: a temp file, then a rename."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o644
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def read_file(path: str | os.PathLike) -> Any:
    """The data of the file's first form (the whole file must be valid EDN)."""
    return _first_value(parse(_read_text(path)))


def write_file(path: str | os.PathLike, data: Any) -> Any:
    """Write ``data`` pretty-printed, replacing the file and any comments in it; returns ``data``."""
    text = pretty(data) + "\n"
    verify(text, data)
    _write_text(path, text)
    return data


def get_in_file(path: str | os.PathLike, keys: Any = ()) -> Any:
    """The value at ``keys`` in the file (see :func:`parse_path`), or None if it is missing."""
    return get_in(read_file(path), parse_path(keys))


def _store(path: str | os.PathLike, text: str, keys: list, value: Any, preserve_formatting: bool) -> Any:
    if preserve_formatting:
        updated, data = _set_text(text, keys, value)
    else:
        data = assoc_in(_first_value(parse(text)), keys, value)
        updated = pretty(data) + "\n"
        verify(updated, data)
    _write_text(path, updated)
    return data


def set_in_file(path: str | os.PathLike, keys: Any, value: Any, *, preserve_formatting: bool = True) -> Any:
    """Set the value at ``keys``; a string ``value`` is EDN text. Returns the file's new data.

    Only the value's text changes; with ``preserve_formatting=False`` the file is rewritten
    pretty-printed instead, and its comments are lost.
    """
    return _store(path, _read_text(path), _nonempty(parse_path(keys)), parse_value(value), preserve_formatting)


def update_in_file(path: str | os.PathLike, keys: Any, fn: Callable[..., Any], *args: Any,
                   preserve_formatting: bool = True) -> Any:
    """Set the value at ``keys`` to ``fn(old_value, *args)``; returns the file's new data.

        update_in_file("config.edn", [":server", ":port"], lambda port: port + 1)

    What ``fn`` returns is data, not EDN text: a string stays a string.
    """
    keys = _nonempty(parse_path(keys))
    text = _read_text(path)
    new = fn(get_in(_first_value(parse(text)), keys), *args)
    return _store(path, text, keys, new, preserve_formatting)


def delete_in_file(path: str | os.PathLike, keys: Any, *, preserve_formatting: bool = True) -> Any:
    """Remove the map entry at ``keys`` (``No such key: …`` when it is not there); returns the new data."""
    keys = _nonempty(parse_path(keys))
    text = _read_text(path)
    if preserve_formatting:
        updated, data = _delete_text(text, keys)
    else:
        data = dissoc_in(_first_value(parse(text)), keys)
        updated = pretty(data) + "\n"
        verify(updated, data)
    _write_text(path, updated)
    return data
