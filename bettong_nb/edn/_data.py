"""Key paths and values from a caller or a model, and Clojure's get-in, assoc-in and dissoc on data.

    parse_path([":server", "0"])                 # [Keyword("server"), 0]
    assoc_in(data, [Keyword("a"), 0], 1)         # a new value; data is unchanged
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._reader import read_first
from ._values import EdnError, EdnMap, EdnSyntaxError, is_index, is_vector
from ._writer import dumps, shown

__all__ = ["parse_key", "parse_path", "parse_value", "show_path", "nonempty", "get_in", "assoc_in", "dissoc_in",
           "bad_index", "cannot_set", "vector_item", "no_such_key"]


def parse_key(key: Any) -> Any:
    """A path element: a string is read as one EDN form (``":server"`` -> ``Keyword("server")``,
    ``"0"`` -> 0); a string that does not read, or reads as nil, stays a string; anything else
    is already a key."""
    if not isinstance(key, str):
        return key
    try:
        value = read_first(key)
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
    return read_first(value) if isinstance(value, str) else value


def show_path(path: Sequence) -> str:
    """A path for a message: ``:server :port``."""
    return " ".join(map(dumps, path))


def nonempty(path: list) -> list:
    """``path``, which an edit needs to name at least one key."""
    if not path:
        raise EdnError("path must name at least one key")
    return path


def get_in(data: Any, path: Sequence) -> Any:
    """The value at ``path``, or None where a key is missing; an int indexes a vector."""
    for key in path:
        if isinstance(data, Mapping):
            data = data.get(key)
        elif is_vector(data) and is_index(key) and 0 <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def assoc_in(data: Any, path: Sequence, value: Any) -> Any:
    """``data`` with ``value`` at ``path``; missing maps on the way are created, and a
    vector takes an index up to its length (which appends)."""
    key, rest = nonempty(list(path))[0], path[1:]
    if rest:
        value = assoc_in(get_in(data, [key]), rest, value)
    if data is None:
        return EdnMap([(key, value)])
    if isinstance(data, Mapping):
        return EdnMap(data).assoc(key, value)
    if is_vector(data):
        if is_index(key) and 0 <= key <= len(data):
            return (*data[:key], value, *data[key + 1:])
        raise bad_index(len(data), key)
    raise cannot_set(key, data)


def dissoc_in(data: Any, path: Sequence) -> Any:
    """``data`` without the map key at ``path``; raises when it is not there."""
    *parents, key = nonempty(list(path))
    holder = get_in(data, parents)
    if is_vector(holder) and is_index(key):
        raise vector_item(path)
    if not (isinstance(holder, Mapping) and key in holder):
        raise no_such_key(path)
    smaller = EdnMap(holder).dissoc(key)
    return assoc_in(data, parents, smaller) if parents else smaller


# --- the errors of assoc_in and dissoc_in, which edits in text raise too ------------------------

def bad_index(size: int, key: Any) -> EdnError:
    return EdnError(f"A vector is indexed by a whole number from 0 to {size}, not {dumps(key)}")


def cannot_set(key: Any, holder: Any) -> EdnError:
    return EdnError(f"Cannot set {dumps(key)} inside {shown(holder)}: only maps and vectors hold keys")


def vector_item(path: Sequence) -> EdnError:
    return EdnError(f"{show_path(path)} is an item of a vector; only map keys can be removed "
                    "(set the whole vector instead)")


def no_such_key(path: Sequence) -> EdnError:
    return EdnError(f"No such key: {show_path(path)}")
