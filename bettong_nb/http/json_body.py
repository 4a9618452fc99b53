"""Request bodies assembled from JSON pieces that were encoded once.

    reuse = Reuse()                                    # one per provider: its previous request
    reuse.next_request()
    messages = Encoded("[" + reuse.joined(transcript, lambda m: encode(wire_message(m))) + "]")
    tools = reuse.json(tool_list, lambda: Encoded(encode(tool_list)))
    payload = body({"model": "m", "messages": messages, "tools": tools})   # bytes, as json.dumps gives

A transcript only grows and its message dicts are never changed once made, so what a request
shares with the one before it (the system prompt, the history, the tool schemas: the cached
prefix) encodes to the same bytes again. :class:`Reuse` keeps those bytes by identity, and
:func:`body` puts them in place unchanged: the result is byte for byte
``json.dumps(fields, ensure_ascii=False).encode()``.

What comes back (a response body, a stream event, a model's tool arguments) is read with
:func:`loads`, for which no JSON text, however deep, is anything but a value or a ValueError.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

__all__ = ["Encoded", "Reuse", "array", "body", "encode", "loads", "depth_within", "MAX_DEPTH"]

T = TypeVar("T")

# json.dumps(value, ensure_ascii=False) without building an encoder on every call
encode: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False).encode


# How deep a value read from a server or a model may nest. Real ones nest a few levels (a body
# around tool arguments around the model's data); what goes deeper is hostile. Under the limit,
# every later walk of the value (cleaning, redacting, encoding the next request, saving) stays far
# from Python's recursion limit; 100,000 brackets would crash the parser itself.
MAX_DEPTH = 100


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, where JSON nested deeper than :data:`MAX_DEPTH` raises ValueError
    like any other text that is not JSON, so each reader's one ``except ValueError`` covers it."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    else:
        opening = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
        # counting is cheap, and most text has too few brackets to nest that deep
        if sum(map(text.count, opening)) <= MAX_DEPTH or depth_within(value, MAX_DEPTH):
            return value
    raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")


def depth_within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


class Encoded(str):
    """JSON text already encoded; :func:`body` inserts it as it stands."""


def array(items: Iterable[str]) -> Encoded:
    """A JSON array of already-encoded items (empty ones are skipped)."""
    return Encoded("[" + ", ".join(item for item in items if item) + "]")


def body(fields: Mapping[str, Any]) -> bytes:
    """``json.dumps(fields, ensure_ascii=False).encode()`` where any value may be :class:`Encoded`."""
    return ("{" + ", ".join(f"{encode(key)}: {value if isinstance(value, Encoded) else encode(value)}"
                            for key, value in fields.items()) + "}").encode()


class Reuse:
    """What the previous request encoded, by the identity of what it encoded: correct for
    anything not mutated once encoded (transcript messages and blocks, tool lists).

    :meth:`joined` reuses the pieces of the items a request shares, as a prefix, with the one
    before it; :meth:`json` reuses any one piece the previous request made (or this one did).
    Only the latest request's pieces are kept, each with its object, so an id is never reused
    while its piece lives."""

    def __init__(self) -> None:
        self._previous: dict[tuple, tuple[Any, Any]] = {}
        self._current: dict[tuple, tuple[Any, Any]] = {}
        self._items: list = []
        self._pieces: list[str] = []

    def next_request(self) -> None:
        """Start a request: keep what the last one used, drop the rest."""
        self._previous, self._current = self._current, {}

    def json(self, item: Any, make: Callable[[], T], context: Hashable = ()) -> T:
        """``make()``, or what it gave for this very ``item`` before; ``context`` is whatever
        else the piece depends on (compared by value)."""
        key = (id(item), context)
        entry = self._current.get(key) or self._previous.get(key)
        if entry is None:
            entry = (item, make())
        self._current[key] = entry
        return entry[1]

    def joined(self, items: Sequence[Any], piece: Callable[[Any], str],
               reused: Callable[[Any], Any] | None = None) -> str:
        """``", ".join(piece(item) for item in items)``, empty pieces left out. The items the
        previous call began with (the same objects in the same places) keep their pieces, and
        ``reused(item)`` is called for each of them instead: a format whose pieces depend on
        the items before them keeps its running state that way."""
        previous, pieces = self._items, self._pieces
        shared, most = 0, min(len(items), len(previous))
        while shared < most and items[shared] is previous[shared]:
            shared += 1
        if reused is not None:
            for item in items[:shared]:
                reused(item)
        pieces = pieces[:shared] + [piece(item) for item in items[shared:]]
        self._items, self._pieces = list(items), pieces
        return ", ".join(p for p in pieces if p)
