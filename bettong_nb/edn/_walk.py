"""Finding the value at a key path in EDN text, reading only what lies on the path.

    found = walk(text, [Keyword("server"), Keyword("port")])
    found[-1].node                     # the Piece of 8080, when the whole path exists
    get_in_text(text, [Keyword("server"), Keyword("port")])   # 8080

Maps (also ``#:ns{…}``) are entered by key and vectors by index, and metadata (``^:private
{…}``) is stepped over, as Clojure's ``get-in`` does on the data. The keys of each map on the
way are read and checked (duplicates, an odd number of forms); the values beside the path are
only scanned. The whole text is scanned for balanced brackets and terminated strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ._pieces import Piece, children, piece_at
from ._reader import read_next
from ._syntax import MAX_DEPTH, fail, qualify, too_deep, unmatched
from ._values import canon, is_index
from ._writer import shown

__all__ = ["Step", "walk", "find", "get_in_text", "read_piece", "map_view", "map_entries", "semantic_children"]


@dataclass(slots=True, frozen=True)
class Step:
    """The piece holding the value at one point of a path, the piece it is directly inside (a
    collection or a ``^`` wrapper; None at the top level), and all the pieces in that one."""

    node: Piece
    parent: Piece | None
    siblings: list[Piece]


def read_piece(text: str, piece: Piece) -> Any:
    """The value of a semantic piece."""
    value, start, end = read_next(text, piece.start)
    if (start, end) != (piece.start, piece.end):
        raise AssertionError(f"read {start}..{end} for {piece}")
    return value


def semantic_children(text: str, piece: Piece) -> list[Piece]:
    return [child for child in children(text, piece) if child.semantic]


def map_view(text: str, piece: Piece) -> tuple[Piece, str | None] | None:
    """The map piece inside ``piece`` and the namespace of its ``#:ns``, or None if it is no map."""
    if piece.kind == "map":
        return piece, None
    if piece.kind == "wrapper" and text.startswith("#:", piece.start):
        inner = semantic_children(text, piece)[0]
        if inner.kind == "map":
            return inner, text[piece.start + 2:piece.head]
    return None


def map_entries(text: str, map_piece: Piece, namespace: str | None) -> tuple[list[Piece], list[tuple[Any, int, int]]]:
    """The map's pieces and its entries as (key, position of the key piece, position of the value piece)."""
    pieces = children(text, map_piece)
    forms = [i for i, piece in enumerate(pieces) if piece.semantic]
    if len(forms) % 2:
        raise fail(text, "A map in EDN needs an even number of forms: key, value, key, value", map_piece.start)
    entries, seen = [], set()
    for k, v in zip(forms[::2], forms[1::2]):
        key = read_piece(text, pieces[k])
        if namespace is not None:
            key = qualify(key, namespace)
        if (c := canon(key)) in seen:
            raise fail(text, f"Duplicate key in an EDN map: {shown(key, 80)}", pieces[k].start)
        seen.add(c)
        entries.append((key, k, v))
    return pieces, entries


def _target(text: str, step: Step) -> Step:
    """Step over metadata: the value of ``^:private {…}`` is the map. Tagged literals are not
    stepped into: ``#inst "…"`` is one value."""
    for _ in range(MAX_DEPTH):
        if step.node.kind != "wrapper" or text[step.node.start] != "^":
            return step
        pieces = children(text, step.node)
        step = Step([piece for piece in pieces if piece.semantic][-1], step.node, pieces)
    raise too_deep(text, step.node.start)


def _child(text: str, piece: Piece, key: Any) -> Step | None:
    if view := map_view(text, piece):
        pieces, entries = map_entries(text, *view)
        wanted = canon(key)
        return next((Step(pieces[v], view[0], pieces) for k, _, v in entries if canon(k) == wanted), None)
    if piece.kind == "vector" and is_index(key):
        pieces = children(text, piece)
        items = [child for child in pieces if child.semantic]
        if 0 <= key < len(items):
            return Step(items[key], piece, pieces)
    return None


def _top_level(text: str) -> list[Piece]:
    """The top-level pieces. The first form's children are listed to find where it ends, and
    the walk starts with them, so that its text is scanned once."""
    pieces, pos, first = [], 0, True
    while (piece := piece_at(text, pos, open_ended=first)) is not None:
        if piece.end < 0:
            children(text, piece)
        first = first and not piece.semantic
        pieces.append(piece)
        pos = piece.end
    if pos < len(text):
        raise unmatched(text, pos)
    return pieces


def walk(text: str, path: Sequence) -> list[Step]:
    """A Step for the first form and for each key of ``path`` that exists, in order.

    ``len(walk(text, path)) == len(path) + 1`` when the whole path exists; an empty list
    when the text holds no form.
    """
    pieces = _top_level(text)
    top = next((piece for piece in pieces if piece.semantic), None)
    if top is None:
        return []
    steps = [_target(text, Step(top, None, pieces))]
    for key in path:
        step = _child(text, steps[-1].node, key)
        if step is None:
            break
        steps.append(_target(text, step))
    return steps


def find(text: str, path: Sequence) -> Piece | None:
    """The piece of the value at ``path`` in the first form of ``text``, or None where a key is missing."""
    steps = walk(text, path)
    return steps[-1].node if len(steps) == len(path) + 1 else None


def get_in_text(text: str, path: Sequence) -> Any:
    """The value at ``path`` in the first form of ``text``, or None where a key is missing."""
    piece = find(text, path)
    return None if piece is None else read_piece(text, piece)
