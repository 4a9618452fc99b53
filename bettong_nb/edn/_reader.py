"""Reading EDN text into values: one regular expression finds each token, one loop builds the values.

    read_first('{:a [1 2]} ignored')   # EdnMap({Keyword('a'): (1, 2)})
    read_next(text, pos)               # (value, start, end) of the next form at or after pos
    read_whole(text)                   # the first form; the rest of the text must be sound too

There is no recursion: collections and prefixes (``#inst``, ``^meta``) wait on a stack, which
is limited to :data:`~._syntax.MAX_DEPTH` levels.
"""

from __future__ import annotations

from typing import Any

from ._pieces import piece_at, root_pieces
from ._syntax import (CLOSERS, MAX_DEPTH, PREFIX_KINDS, TRIVIA_THEN_TOKEN, atom_value, bad_token, check_name, fail,
                      mismatched, not_followed, position, qualify, string_value, too_deep, unmatched, unterminated)
from ._values import EdnList, EdnSyntaxError, Symbol, Tagged, canon, map_of, set_of
from ._writer import shown

__all__ = ["NO_FORM", "read_next", "read_first", "read_whole"]

NO_FORM: Any = object()  # what read_next finds when a closing bracket or the end comes first
_ATOM_KINDS = frozenset({"atom", "char", "symbolic"})


def read_next(text: str, pos: int = 0) -> tuple[Any, int, int]:
    """The value of the next form at or after ``pos``, where it starts and where it ends.

    When a closing bracket or the end of the text comes before any form, the value is
    :data:`NO_FORM` and both offsets say where that bracket or end is. What a ``#_`` discards
    and the metadata after ``^`` are scanned, not read: they need not be valid values.
    """
    atoms: dict[str, Any] = {}  # a document repeats its keywords: each is read once
    # A frame is [opener, items, start, namespace] for a collection, or [prefix, None, start,
    # None] for a prefix waiting for its form; the namespace is that of an enclosing #:ns.
    stack: list[list] = []
    items: list | None = None  # the items of the collection on top of the stack, if that is one
    start = -1  # where the form being read at the top level starts
    while True:
        for match in TRIVIA_THEN_TOKEN.finditer(text, pos):
            kind = match.lastgroup
            if kind in _ATOM_KINDS:
                token = match.group(kind)
                try:
                    value = atoms[token]
                except KeyError:
                    value = atoms[token] = _token_value(text, atom_value, token, match.start(kind))
            elif kind == "string":
                token = match.group(kind)
                value = token[1:-1] if "\\" not in token and token[0] == '"' else _token_value(
                    text, string_value, token, match.start(kind))
            elif kind == "close":
                at = match.start(kind)
                if not stack:
                    return NO_FORM, at, at
                opener, done, opened_at, namespace = stack.pop()
                if done is None:
                    raise not_followed(text, opener, opened_at)
                if CLOSERS[opener] != text[at]:
                    raise mismatched(text, opener, opened_at, at)
                value = _collection(text, opener, done, namespace, opened_at)
                items = stack[-1][1] if stack else None
            elif kind == "discard":
                pos = piece_at(text, match.start(kind)).end  # the discarded form is scanned, not read
                break
            elif kind == "open" or kind in PREFIX_KINDS:
                at = match.start(kind)
                if not stack:
                    start = at
                elif len(stack) >= MAX_DEPTH:
                    raise too_deep(text, at)
                opener = match.group(kind)
                if kind == "open":
                    namespace = None
                    if opener == "{" and items is None and stack and stack[-1][0][:2] == "#:":
                        namespace = stack[-1][0][2:]
                    items = []
                    stack.append([opener, items, at, namespace])
                    continue
                if opener.startswith("#::"):
                    raise EdnSyntaxError(f"{opener} must be followed by a map, and names its namespace in EDN")
                stack.append([opener, None, at, None])
                items = None
                if opener == "^":
                    pos = _past_metadata(text, match.end(), at)
                    break
                continue
            elif kind == "end":
                if not stack:
                    return NO_FORM, len(text), len(text)
                opener, waiting, opened_at, _ = stack[-1]
                raise unterminated(text, opener, opened_at) if waiting is not None else not_followed(
                    text, opener, opened_at)
            else:
                raise bad_token(text, kind, match.start(kind))
            if items is not None:  # the common case: one more item for the collection being read
                items.append(value)
                continue
            if not stack:
                return value, (start if kind == "close" else match.start(kind)), match.end()
            # the form completes the prefix waiting for it, which is a form in turn, and so on
            is_map = kind == "close" and opener == "{"
            while stack and stack[-1][1] is None:
                prefix, _, at, _ = stack.pop()
                value = _prefixed(text, prefix, value, is_map, at)
                is_map = False
            if not stack:
                return value, start, match.end()
            items = stack[-1][1]
            items.append(value)
        else:
            raise AssertionError("the token pattern matches at every position")


def _past_metadata(text: str, pos: int, at: int) -> int:
    """Where the metadata after a ``^`` at ``at`` ends; it is scanned, as what it says is dropped."""
    while (piece := piece_at(text, pos)) is not None:
        if piece.semantic:
            return piece.end
        pos = piece.end
    raise not_followed(text, "^", at)


def _token_value(text: str, convert: Any, token: str, at: int) -> Any:
    try:
        return convert(token)
    except EdnSyntaxError as exc:
        raise EdnSyntaxError(f"{exc} at {position(text, at)}") from None


def _collection(text: str, opener: str, items: list, namespace: str | None, at: int) -> Any:
    if opener == "{":
        if len(items) % 2:
            raise fail(text, "A map in EDN needs an even number of forms: key, value, key, value", at)
        keys = items[0::2]
        if namespace is not None:
            keys = [qualify(key, namespace) for key in keys]
        result = map_of(keys, items[1::2])
        if len(result) != len(keys):
            raise fail(text, f"Duplicate key in an EDN map: {shown(_first_repeat(keys), 80)}", at)
        return result
    if opener == "[":
        return tuple(items)
    if opener == "(":
        return EdnList(items)
    if opener == "#{":
        result = set_of(items)
        if len(result) != len(items):
            raise fail(text, f"Duplicate item in an EDN set: {shown(_first_repeat(items), 80)}", at)
        return result
    raise fail(text, "#(… is Clojure code, not EDN data", at)


def _first_repeat(items: list) -> Any:
    seen = set()
    for item in items:
        key = canon(item)
        if key in seen:
            return item
        seen.add(key)
    raise AssertionError("no item repeats")


def _prefixed(text: str, prefix: str, value: Any, is_map: bool, at: int) -> Any:
    """The value of ``prefix`` applied to the form read after it (``is_map``: that form was ``{…}``)."""
    if prefix == "^":
        return value  # metadata is dropped
    if prefix.startswith("#:"):
        if not is_map:
            raise fail(text, f"{prefix} must be followed by a map, and names its namespace in EDN", at)
        return value  # its keys were qualified as the map was read
    if prefix == "'":  # (quote x), as Clojure reads it; found in lein profiles
        return EdnList((Symbol("quote"), value))
    if prefix[0] == "#" and prefix[1:2].isalpha():
        _token_value(text, lambda tag: check_name(tag[1:], tag), prefix, at)
        return Tagged(prefix[1:], value)
    raise fail(text, f"{prefix}… is Clojure code, not EDN data", at)


def read_first(text: str) -> Any:
    """The first EDN form in ``text`` (anything after it is not read), or None if there is none."""
    value, _, end = read_next(text)
    if value is NO_FORM:
        if end < len(text):
            raise unmatched(text, end)
        return None
    return value


def read_whole(text: str) -> Any:
    """The data of the first form of ``text``; the rest must be sound EDN too (balanced, terminated)."""
    value, _, end = read_next(text)
    for _ in root_pieces(text, end):
        pass  # raises on a stray bracket or a broken form after the first
    return None if value is NO_FORM else value
