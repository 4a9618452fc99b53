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
The tree, the reader built on it and the edits live in ``bettong_nb._edn_text``; this
module re-exports its public names (``Node``, ``parse``, ``set_in_str`` ...).
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
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from types import ModuleType
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


# --- reading ----------------------------------------------------------------------------------

def loads(text: str) -> Any:
    """The first EDN form in ``text`` (anything after it is not read), or None if there is none."""
    return _text().read_first(text)


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


# --- the syntax tree (bettong_nb._edn_text) ---------------------------------------------------

_TREE_NAMES = frozenset({"Node", "parse", "render", "locate", "node_at", "node_of", "set_in_str", "delete_in_str",
                         "verify"})


def _text() -> ModuleType:
    """The syntax-tree module. It builds on the values above, so it is imported when first needed
    (importing it at the top would be a cycle)."""
    from . import _edn_text

    return _edn_text


def __getattr__(name: str) -> Any:
    if name in _TREE_NAMES:
        return getattr(_text(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_TREE_NAMES})


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
    return _text().read_whole(_read_text(path))


def write_file(path: str | os.PathLike, data: Any) -> Any:
    """Write ``data`` pretty-printed, replacing the file and any comments in it; returns ``data``."""
    _write_text(path, _rewritten(data)[0])
    return data


def get_in_file(path: str | os.PathLike, keys: Any = ()) -> Any:
    """The value at ``keys`` in the file (see :func:`parse_path`), or None if it is missing."""
    return get_in(read_file(path), parse_path(keys))


def _store(path: str | os.PathLike, text: str, keys: list, value: Any, preserve_formatting: bool) -> Any:
    if preserve_formatting:
        updated, data = _text().edit_set(text, keys, value)
    else:
        updated, data = _rewritten(assoc_in(_text().read_whole(text), keys, value))
    _write_text(path, updated)
    return data


def _rewritten(data: Any) -> tuple[str, Any]:
    """``data`` pretty-printed, checked to read back the same; the text and the data."""
    text = pretty(data) + "\n"
    _text().verify(text, data)
    return text, data


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
    new = fn(get_in(_text().read_whole(text), keys), *args)
    return _store(path, text, keys, new, preserve_formatting)


def delete_in_file(path: str | os.PathLike, keys: Any, *, preserve_formatting: bool = True) -> Any:
    """Remove the map entry at ``keys`` (``No such key: …`` when it is not there); returns the new data."""
    keys = _nonempty(parse_path(keys))
    text = _read_text(path)
    if preserve_formatting:
        updated, data = _text().edit_delete(text, keys)
    else:
        updated, data = _rewritten(dissoc_in(_text().read_whole(text), keys))
    _write_text(path, updated)
    return data
