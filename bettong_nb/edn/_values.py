"""EDN values in Python, Clojure's equality over them, and the errors of the EDN package.

    Keyword("db/url")                    # :db/url
    EdnMap({Keyword("port"): 8080})      # {:port 8080}: immutable, ordered, hashable
    edn_equal(1, 1.0)                    # False, as in Clojure
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = ["EdnError", "EdnSyntaxError", "Keyword", "Symbol", "Char", "Tagged", "EdnList", "EdnMap", "EdnSet",
           "map_of", "set_of", "canon", "edn_equal", "is_index", "is_vector"]


class EdnError(ValueError):
    """An EDN value cannot be read, found or changed; the message says why."""


class EdnSyntaxError(EdnError):
    """The text is not valid EDN."""


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
        return hash(canon(self))


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
        self._entries = {canon(k): (k, v) for k, v in pairs}

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._entries[canon(key)][1]
        except KeyError:
            raise KeyError(key) from None

    def __iter__(self):
        return (k for k, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and edn_equal(self, other)

    def __hash__(self) -> int:
        return hash(canon(self))

    def __repr__(self) -> str:
        return "EdnMap({" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "})"

    def assoc(self, key: Any, value: Any) -> EdnMap:
        """A copy with ``key`` set: an existing key keeps its place, a new one goes last."""
        return EdnMap([*self.items(), (key, value)])

    def dissoc(self, key: Any) -> EdnMap:
        """A copy without ``key``."""
        gone = canon(key)
        return EdnMap(pair for c, pair in self._entries.items() if c != gone)


class EdnSet(AbstractSet):
    """An EDN set: immutable, hashable, in the order written; members match by EDN equality."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items = {canon(x): x for x in items}

    def __contains__(self, item: object) -> bool:
        try:
            return canon(item) in self._items
        except TypeError:
            return False

    def __iter__(self):
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractSet) and edn_equal(self, other)

    def __hash__(self) -> int:
        return hash(canon(self))

    def __repr__(self) -> str:
        return "EdnSet({" + ", ".join(map(repr, self)) + "})" if self._items else "EdnSet()"


# values that are their own canonical form: equal exactly when Clojure says so
_OWN_CANON = frozenset({str, Keyword, Symbol, Char, type(None)})


def map_of(keys: list, values: list) -> EdnMap:
    """The EdnMap of ``keys[i]: values[i]``, as a reader builds one (quickly when, as in most
    maps, every key is a keyword or a string); a repeated key leaves it shorter than ``keys``."""
    result = EdnMap.__new__(EdnMap)
    if _OWN_CANON.issuperset(map(type, keys)):
        result._entries = dict(zip(keys, zip(keys, values)))
    else:
        result._entries = {canon(k): (k, v) for k, v in zip(keys, values)}
    return result


def set_of(items: list) -> EdnSet:
    """The EdnSet of ``items``, as a reader builds one; a repeated item leaves it shorter."""
    result = EdnSet.__new__(EdnSet)
    result._items = dict(zip(items, items)) if _OWN_CANON.issuperset(map(type, items)) else {
        canon(x): x for x in items}
    return result


def canon(value: Any) -> Any:
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
        return ("tagged", value.tag, canon(value.value))
    if isinstance(value, Mapping):
        return ("map", frozenset((canon(k), canon(v)) for k, v in value.items()))
    if isinstance(value, AbstractSet):
        return ("set", frozenset(map(canon, value)))
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(map(canon, value)))  # a list equals a vector, as in Clojure
    raise TypeError(f"{type(value).__name__} is not an EDN value")


def edn_equal(a: Any, b: Any) -> bool:
    """Clojure's ``=``: ``1`` is not ``1.0`` or ``true``, ``[1 2]`` equals ``(1 2)``, ``:a`` is not ``"a"``."""
    return canon(a) == canon(b)


def is_index(key: Any) -> bool:
    """A whole number that can index a vector (``True`` is not one)."""
    return isinstance(key, int) and not isinstance(key, bool)


def is_vector(value: Any) -> bool:
    """A vector: a tuple or list that is not an EDN list."""
    return isinstance(value, (tuple, list)) and not isinstance(value, EdnList)
