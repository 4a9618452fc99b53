"""The lossless syntax tree of EDN text: every space, comment and bracket kept as a node.

    tree = parse(text)                         # render(tree) == text, byte for byte
    address = locate(tree, [Keyword("port")])  # child positions from the root
    node_at(tree, address).text                # "8080"

Edits do not build this tree (they work on offsets, see :mod:`._splice`); it is here for
callers that want to look at or rearrange the text themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._syntax import (CLOSERS, MAX_DEPTH, PREFIX_KINDS, TOKEN, bad_token, forms_taken, mismatched, not_followed,
                      too_deep, unmatched, unterminated)
from ._walk import walk

__all__ = ["Node", "parse", "render", "node_at", "locate", "is_semantic"]

_KINDS = {"(": "list", "[": "vector", "{": "map", "#{": "set", "#(": "list"}


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


def is_semantic(node: Node) -> bool:
    """A node that is data, not whitespace, a comment or a ``#_`` form."""
    return node.kind not in ("whitespace", "comment") and not node.discard


def parse(text: str) -> Node:
    """The lossless syntax tree of ``text`` (a ``root`` node); ``render(parse(text)) == text``."""
    root = Node("root")
    frames: list[list] = [[root, 0, 0]]  # a node being filled, where it starts, forms it still takes
    for match in TOKEN.finditer(text):
        kind, at = match.lastgroup, match.start()
        if kind in ("whitespace", "comment"):
            frames[-1][0].children.append(Node(kind, match[kind]))
            continue
        if kind == "open" or kind in PREFIX_KINDS:
            if len(frames) > MAX_DEPTH:
                raise too_deep(text, at)
            opener = match[kind]
            node = (Node(_KINDS[opener], opener, close=CLOSERS[opener]) if kind == "open" else
                    Node("wrapper", opener, discard=kind == "discard"))
            frames[-1][0].children.append(node)
            frames.append([node, at, 0 if kind == "open" else forms_taken(opener)])
            continue
        if kind == "close":
            node, opened_at, _ = frames[-1]
            if node.kind == "root":
                raise unmatched(text, at)
            if node.kind == "wrapper":
                raise not_followed(text, node.text, opened_at)
            if node.close != text[at]:
                raise mismatched(text, node.text, opened_at, at)
            frames.pop()
        elif kind.startswith("bad"):
            raise bad_token(text, kind, at)
        else:
            node = Node("token", match[kind])
            frames[-1][0].children.append(node)
        while frames[-1][2] and is_semantic(node):  # a prefix takes the form just completed
            frame = frames[-1]
            frame[2] -= 1
            if frame[2]:
                break
            frames.pop()
            node = frame[0]
    node, opened_at, _ = frames[-1]
    if node.kind == "wrapper":
        raise not_followed(text, node.text, opened_at)
    if node.kind != "root":
        raise unterminated(text, node.text, opened_at)
    return root


def render(node: Node) -> str:
    """The text of a tree or node."""
    out: list[str] = []

    def add(n: Node) -> None:
        out.append(n.text)
        for child in n.children:
            add(child)
        out.append(n.close)

    add(node)
    return "".join(out)


def node_at(tree: Node, address: Sequence[int]) -> Node:
    """The node at ``address``, a list of child positions from the root (see :func:`locate`)."""
    for i in address:
        tree = tree.children[i]
    return tree


def _size(node: Node) -> int:
    return len(node.text) + sum(map(_size, node.children)) + len(node.close)


def locate(tree: Node, path: Sequence) -> list[int] | None:
    """The address of the node that holds the value at ``path`` in the first form, or None.

        tree = parse("{:server {:port 8080}}")
        node_at(tree, locate(tree, [Keyword("server"), Keyword("port")])).text   # "8080"

    The path is followed in the rendered text, as an edit follows it.
    """
    steps = walk(render(tree), path)
    if len(steps) != len(path) + 1:
        return None
    wanted = steps[-1].node
    address, node, pos = [], tree, 0
    while True:
        pos += len(node.text)
        for i, child in enumerate(node.children):
            size = _size(child)
            if pos <= wanted.start and wanted.end <= pos + size:
                address.append(i)
                node = child
                break
            pos += size
        if (pos, pos + size) == (wanted.start, wanted.end):
            return address
