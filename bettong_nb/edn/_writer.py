"""Printing EDN: one line as Clojure's ``pr-str`` does, or pretty with one entry per line.

    dumps({Keyword("a"): [1, 2]})     # '{:a [1 2]}'
    pretty(data, width=40)            # wide collections broken over lines
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ._values import Char, EdnError, EdnList, Keyword, Symbol, Tagged

__all__ = ["CHAR_NAMES", "dumps", "pretty", "shown"]

CHAR_NAMES = {"\n": "newline", " ": "space", "\t": "tab", "\r": "return", "\b": "backspace", "\f": "formfeed"}
_STRING_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')


def _quote(s: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _STRING_ESCAPES.get(m[0], f"\\u{ord(m[0]):04x}"), s) + '"'


def _char_text(c: str) -> str:
    if c in CHAR_NAMES:
        return "\\" + CHAR_NAMES[c]
    if (c.isspace() or not c.isprintable()) and ord(c) <= 0xFFFF:
        return f"\\u{ord(c):04x}"
    return "\\" + c


def _scalar(value: Any) -> str | None:
    """The text of a value that holds no other values; None for a collection or tagged value."""
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
    return None


def _brackets(value: Any) -> tuple[str, str]:
    if isinstance(value, AbstractSet):
        return "#{", "}"
    if isinstance(value, EdnList):
        return "(", ")"
    if isinstance(value, (tuple, list)):
        return "[", "]"
    raise TypeError(f"{type(value).__name__} cannot be written as EDN")


def dumps(value: Any) -> str:
    """``value`` as EDN on one line, as Clojure's ``pr-str`` writes it: ``{:a 1, :b [2 3]}``."""
    text = _scalar(value)
    if text is not None:
        return text
    if isinstance(value, Tagged):
        return f"#{value.tag} {dumps(value.value)}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{dumps(k)} {dumps(v)}" for k, v in value.items()) + "}"
    opener, closer = _brackets(value)
    return opener + " ".join(map(dumps, value)) + closer


def _pieces(value: Any) -> Iterator[str]:
    """The text of :func:`dumps` in pieces, so that a caller can stop early."""
    text = _scalar(value)
    if text is not None:
        yield text
    elif isinstance(value, Tagged):
        yield f"#{value.tag} "
        yield from _pieces(value.value)
    elif isinstance(value, Mapping):
        yield "{"
        for i, (k, v) in enumerate(value.items()):
            if i:
                yield ", "
            yield from _pieces(k)
            yield " "
            yield from _pieces(v)
        yield "}"
    else:
        opener, closer = _brackets(value)
        yield opener
        for i, item in enumerate(value):
            if i:
                yield " "
            yield from _pieces(item)
        yield closer


def _flat_within(value: Any, limit: int) -> str | None:
    """:func:`dumps` of ``value`` if it is at most ``limit`` characters, else None, found without
    printing more than ``limit`` characters (pretty-printing a large value stays linear)."""
    out, size = [], 0
    for piece in _pieces(value):
        size += len(piece)
        if size > limit:
            return None
        out.append(piece)
    return "".join(out)


def shown(value: Any, limit: int = 40) -> str:
    """:func:`dumps` of ``value`` cut to ``limit`` characters for a message: ``{:a 1, :b…``."""
    flat = _flat_within(value, limit)
    if flat is not None:
        return flat
    out, size = [], 0
    for piece in _pieces(value):
        out.append(piece)
        size += len(piece)
        if size >= limit:
            break
    return "".join(out)[:limit - 1] + "…"


def pretty(value: Any, *, width: int = 72) -> str:
    """Like :func:`dumps`, but a collection wider than ``width`` gets one entry per line."""
    return _pretty(value, 0, width)


def _pretty(value: Any, column: int, width: int) -> str:
    flat = _flat_within(value, width - column)
    if flat is not None:
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
    if _scalar(value) is not None:
        return dumps(value)
    opener, closer = _brackets(value)
    inner = column + len(opener)
    return opener + ("\n" + " " * inner).join(_pretty(x, inner, width) for x in value) + closer
