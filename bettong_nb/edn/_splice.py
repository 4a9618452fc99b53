"""Edits spliced into EDN text: only the bytes of the value change, and the change is read back.

    set_in_str(text, [Keyword("port")], 9090)    # "8080" becomes "9090", nothing else moves
    delete_in_str(text, [Keyword("debug")])      # the entry goes; the comments around it stay

An edit finds its place by scanning (:mod:`._walk`), replaces one span of the text, and checks
the result before returning it: the forms the new text holds at the seam are read and must be
the values asked for, the form before the seam must end where it did, and reading must come
back in step with the old text just after the seam. Everything else is the same bytes read
the same way, so the new text holds exactly the data it should, and nothing else changed.
When a check fails, EdnError says so and no text is returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._data import bad_index, cannot_set, no_such_key, nonempty, vector_item
from ._pieces import COLLECTION_KINDS, Piece, piece_at
from ._syntax import qualify
from ._tree import Node, is_semantic, parse, render
from ._values import EdnError, EdnMap, EdnSyntaxError, canon, edn_equal, is_index
from ._walk import Step, map_entries, map_view, read_piece, semantic_children, walk
from ._writer import dumps

__all__ = ["node_of", "set_in_str", "delete_in_str"]


def node_of(value: Any) -> Node:
    """The node for ``value`` printed as EDN. Edits look it up in this module when they run,
    so tests can swap ``_splice.node_of`` for one that returns garbage and check that the
    read-back catches it."""
    return next(child for child in parse(dumps(value)).children if is_semantic(child))


def _printed(value: Any) -> str:
    return render(node_of(value))


def set_in_str(text: str, path: Sequence, value: Any) -> str:
    """``text`` with the value at ``path`` set and every other byte the same.

    An existing value's text is replaced; a missing key is added after the last entry of the
    deepest map on the path, in that entry's column, wrapped in maps for the rest of the path.
    The result is read back and must hold the expected data, or EdnError is raised.
    """
    path = nonempty(list(path))
    steps = walk(text, path)
    if len(steps) == len(path) + 1:
        return _replace(text, steps[-1], value)
    if not steps:
        raise EdnError("The text holds no EDN value to add a key to; write the whole value instead")
    # the errors and their order are assoc_in's on the data: the deepest value found decides
    step, key = steps[-1], path[len(steps) - 1]
    for inner in reversed(path[len(steps):]):
        value = EdnMap([(inner, value)])
    node = step.node
    if node.kind == "token" and text[node.start:node.end] == "nil":
        return _replace(text, step, EdnMap([(key, value)]))  # nil is where the map goes
    if view := map_view(text, node):
        return _add_entry(text, *view, key, value)
    if node.kind == "vector":
        size = len(semantic_children(text, node))
        if is_index(key) and key == size:
            raise EdnError(f"Cannot add the key {dumps(key)} to a vector; only maps take new keys")
        raise bad_index(size, key)
    raise cannot_set(key, read_piece(text, node))


def delete_in_str(text: str, path: Sequence) -> str:
    """``text`` without the map entry at ``path``; comments around it stay."""
    path = nonempty(list(path))
    *parents, key = path
    steps = walk(text, parents)
    holder = steps[-1].node if len(steps) == len(parents) + 1 else None
    if holder is not None and holder.kind == "vector" and is_index(key):
        raise vector_item(path)
    view = map_view(text, holder) if holder is not None else None
    if view is None:
        raise no_such_key(path)
    pieces, entries = map_entries(text, *view)
    wanted = canon(key)
    k, v = next(((k, v) for entry_key, k, v in entries if canon(entry_key) == wanted), (None, None))
    if k is None:
        raise no_such_key(path)
    # from the whitespace before the key through the value: what follows (a comment) stays
    start = k - 1 if k and pieces[k - 1].kind == "whitespace" else k
    end = v + 1
    if k == 0 and end < len(pieces) and pieces[end].kind == "whitespace":
        end += 1  # the first entry: the next one moves up to the brace
    follows = pieces[end] if end < len(pieces) else None
    # what follows must not join a comment that now ends just before it
    joins = start and pieces[start - 1].kind == "comment" and not (
        follows and follows.kind == "whitespace" and text.startswith("\n", follows.start))
    return _splice(text, Step(pieces[k], view[0], pieces), pieces[start].start, pieces[end - 1].end,
                   "\n" if joins else "", [])


def _replace(text: str, step: Step, value: Any) -> str:
    return _splice(text, step, step.node.start, step.node.end, _printed(value), [(value, None)])


def _add_entry(text: str, map_piece: Piece, namespace: str | None, key: Any, value: Any) -> str:
    """Add ``key value`` after the map's last entry, laid out like that entry."""
    pieces, _ = map_entries(text, map_piece, namespace)
    forms = [i for i, piece in enumerate(pieces) if piece.semantic]
    newline = "\r\n" if "\r\n" in text else "\n"
    if forms:
        last_key, last_value = forms[-2], forms[-1]
        before = pieces[last_key - 1] if last_key else None
        space = text[before.start:before.end] if before is not None and before.kind == "whitespace" else None
        if space is None:
            indent = " "
        elif "\n" in space:
            indent = newline + space[space.rfind("\n") + 1:]  # a new line in the last key's column
        else:
            indent = space  # an inline map stays inline, commas and all
        at = last_value + 1
        # a comment on the last entry's line stays with that entry
        after = [piece.kind for piece in pieces[at:at + 2]]
        if after[:1] == ["comment"]:
            at += 1
        elif after == ["whitespace", "comment"] and "\n" not in text[pieces[at].start:pieces[at].end]:
            at += 2
    else:
        indent, at = "", len(pieces)
    tail = ""
    if at and pieces[at - 1].kind == "comment":
        if "\n" not in indent:
            indent = newline + indent  # or the new entry would end up inside the comment
        if text[pieces[at - 1].end - 1] == "\r":
            # the comment holds the \r of its \r\n: the entry goes in between and brings its own \r
            indent = indent.replace("\r\n", "\n", 1)
            tail = "\r"
    inserted = indent + _printed(key) + " " + _printed(value) + tail
    pos = pieces[at].start if at < len(pieces) else map_piece.end - 1
    return _splice(text, Step(map_piece, map_piece, pieces), pos, pos, inserted, [(key, namespace), (value, None)])


def _splice(text: str, where: Step, start: int, end: int, inserted: str, expected: list[tuple[Any, str | None]]) -> str:
    """``text`` with ``start:end`` replaced by ``inserted``, once the result reads back as it should.

    ``where.siblings`` are the pieces of the collection (or top level) the span is in; the
    forms in ``inserted`` must read as the ``expected`` values (a key of ``#:ns{…}`` is read
    with its namespace).
    """
    updated = text[:start] + inserted + text[end:]
    try:
        _check(text, updated, where, start, end, inserted, expected)
    except EdnSyntaxError as exc:
        raise EdnError(f"Edit would have produced unreadable EDN; file left alone ({exc})") from None
    return updated


def _changed() -> EdnError:
    return EdnError("Edit would have changed more than the value asked for; file left alone")


def _check(text: str, updated: str, where: Step, start: int, end: int, inserted: str,
           expected: list[tuple[Any, str | None]]) -> None:
    siblings, parent = where.siblings, where.parent
    seam = start + len(inserted)
    shift = seam - end  # how far the old text after the span moved
    # Read again from the last form before the span, or from just past it when it cannot run
    # on into what follows (a collection or a string): it must end where it did.
    before = [piece for piece in siblings if piece.semantic and piece.end <= start]
    if not before:
        pos = 0 if parent is None else parent.head
    elif before[-1].kind in COLLECTION_KINDS or text[before[-1].start] == '"':
        pos = before[-1].end
    else:
        again = piece_at(updated, before[-1].start)
        if again is None or again.end != before[-1].end:
            raise _changed()
        pos = again.end
    found = []
    while pos < seam:
        piece = piece_at(updated, pos)
        if piece is None or (piece.end > seam and piece.kind != "whitespace"):
            raise _changed()  # the new text runs into the old, or a comment or #_ swallows some of it
        if piece.semantic:
            if piece.start < start:
                raise _changed()
            found.append(piece)
        pos = piece.end
    # Reading must be back in step: where it stands in the new text is a place where the old
    # text's pieces start or end, past the span (whitespace may run across the seam).
    old = end
    while old < pos - shift and (piece := piece_at(text, old)) is not None:
        old = piece.end
    if old != pos - shift:
        raise _changed()
    if len(found) != len(expected):
        raise _changed()
    for piece, (value, namespace) in zip(found, expected):
        got = read_piece(updated, piece)
        if not edn_equal(got if namespace is None else qualify(got, namespace), value):
            raise _changed()
