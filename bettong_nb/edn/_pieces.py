"""EDN text as pieces: one level of the lossless tree at a time, with offsets instead of copies.

    piece = piece_at(text, 0)          # Piece("map", start=0, end=5210, head=1)
    children(text, piece)              # its whitespace, comments, keys and values, each a Piece
    list(root_pieces(text))            # the top level; raises on a stray bracket

A collection inside a piece is skipped by bracket matching (:func:`~._syntax.skip_collection`),
not read, so listing the entries of a large map costs a scan of its text and nothing more.
This is how values are found and edited without building a tree of the whole document.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ._syntax import (CLOSERS, PREFIX_KINDS, TOKEN, bad_token, forms_taken, mismatched, not_followed,
                      skip_collection, unmatched, unterminated)

__all__ = ["Piece", "piece_at", "children", "root_pieces", "COLLECTION_KINDS"]

_KINDS = {"(": "list", "[": "vector", "{": "map", "#{": "set", "#(": "list"}
COLLECTION_KINDS = frozenset(_KINDS.values())
_TOKEN_KINDS = frozenset({"string", "char", "symbolic", "atom"})


@dataclass(slots=True)
class Piece:
    """Where one node of the lossless tree (see :class:`~._tree.Node`) lies in the text.

    ``kind`` is whitespace, comment, token, list, vector, map, set or wrapper; ``head`` is
    where the contents of a collection or wrapper begin (after ``{`` or ``#inst``). ``end``
    is -1 for a collection found with ``open_ended=True`` until :func:`children` lists it.
    """

    kind: str
    start: int
    end: int
    head: int = 0
    discard: bool = False
    listed: list[Piece] | None = field(default=None, repr=False, compare=False)  # children, once listed

    @property
    def semantic(self) -> bool:
        """Data, not whitespace, a comment or a ``#_`` form."""
        return self.kind not in ("whitespace", "comment") and not self.discard


def piece_at(text: str, pos: int, *, open_ended: bool = False) -> Piece | None:
    """The piece that starts at ``pos``, or None at a closing bracket or the end of the text.

    With ``open_ended``, a collection is not skipped: its end is found when its children are
    listed, so that a caller about to list them scans its text once.
    """
    match = TOKEN.match(text, pos)
    if match is None:
        return None
    kind = match.lastgroup
    if kind in ("whitespace", "comment"):
        return Piece(kind, pos, match.end())
    if kind in _TOKEN_KINDS:
        return Piece("token", pos, match.end())
    if kind == "open":
        return Piece(_KINDS[match[kind]], pos, -1 if open_ended else skip_collection(text, pos), match.end())
    if kind == "close":
        return None
    if kind in PREFIX_KINDS:
        return Piece("wrapper", pos, _prefixed_end(text, match), match.end(), kind == "discard")
    raise bad_token(text, kind, pos)


def _prefixed_end(text: str, match) -> int:
    """Where the forms a prefix applies to end; prefixes inside it (``#_ #_ a b``) are followed
    on a stack, not by recursion."""
    frames = [[match[match.lastgroup], match.start(), forms_taken(match[match.lastgroup])]]
    pos = match.end()
    while True:
        token = TOKEN.match(text, pos)
        kind = token.lastgroup if token else "close"
        if kind in ("whitespace", "comment"):
            pos = token.end()
            continue
        if kind == "close":
            prefix, at, _ = frames[-1]
            raise not_followed(text, prefix, at)
        if kind in PREFIX_KINDS:
            frames.append([token[kind], pos, forms_taken(token[kind])])
            pos = token.end()
            continue
        if kind == "open":
            pos = skip_collection(text, pos)
        elif kind in _TOKEN_KINDS:
            pos = token.end()
        else:
            raise bad_token(text, kind, pos)
        while frames:  # a form ends at pos
            frame = frames[-1]
            frame[2] -= 1
            if frame[2]:
                break
            frames.pop()
            if frame[0] == "#_":
                break  # a discarded form is not one of the forms the prefix around it takes
        if not frames:
            return pos


def children(text: str, piece: Piece) -> list[Piece]:
    """The pieces directly inside a collection or wrapper (listed once, then remembered)."""
    if piece.listed is None:
        piece.listed = _wrapped(text, piece) if piece.kind == "wrapper" else _contents(text, piece)
    return piece.listed


def _contents(text: str, piece: Piece) -> list[Piece]:
    found, pos = [], piece.head
    while (child := piece_at(text, pos)) is not None:
        found.append(child)
        pos = child.end
    opener = text[piece.start:piece.head]
    if piece.end < 0:  # open-ended: this is where it ends
        if pos == len(text):
            raise unterminated(text, opener, piece.start)
        if text[pos] != CLOSERS[opener]:
            raise mismatched(text, opener, piece.start, pos)
        piece.end = pos + 1
    elif pos != piece.end - 1:
        raise AssertionError(f"the scan of {piece} lost its way at {pos}")
    return found


def _wrapped(text: str, piece: Piece) -> list[Piece]:
    """The pieces of a wrapper. Its last form ends where the wrapper does, so it is not scanned
    again: stepping through ``^:a ^:b ^:c {…}`` costs one scan, not one per ``^``."""
    wanted = forms_taken(text[piece.start:piece.head])
    found, pos = [], piece.head
    while True:
        match = TOKEN.match(text, pos)
        kind = match.lastgroup
        if wanted == 1 and kind not in ("whitespace", "comment", "discard"):
            if kind == "open":
                found.append(Piece(_KINDS[match[kind]], pos, piece.end, match.end()))
            elif kind in PREFIX_KINDS:
                found.append(Piece("wrapper", pos, piece.end, match.end()))
            else:
                found.append(Piece("token", pos, piece.end))
            return found
        child = piece_at(text, pos)
        found.append(child)
        wanted -= child.semantic
        pos = child.end


def root_pieces(text: str, pos: int = 0) -> Iterator[Piece]:
    """The top-level pieces from ``pos`` to the end; a closing bracket there is an error."""
    while (piece := piece_at(text, pos)) is not None:
        yield piece
        pos = piece.end
    if pos < len(text):
        raise unmatched(text, pos)
