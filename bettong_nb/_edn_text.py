"""The lossless EDN syntax tree and the text-splicing edits built on it (private to bettong_nb).

    tree = parse(text)                        # render(tree) == text, byte for byte
    locate(tree, [Keyword("port")])           # the address of the node holding the value
    set_in_str(text, [Keyword("port")], 9090)  # only the value's text changes

:mod:`bettong_nb.edn` re-exports the public names; the values and the printer live there.
Every edit reads its result back and compares it with the data it should hold
(:func:`verify`); when they differ the edit is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .edn import (_CHAR_NAMES, Char, EdnError, EdnList, EdnMap, EdnSet, EdnSyntaxError, Keyword, Symbol, Tagged,
                  _canon, _is_index, _nonempty, assoc_in, dissoc_in, dumps, edn_equal)

__all__ = ["Node", "parse", "render", "locate", "node_at", "node_of", "set_in_str", "delete_in_str", "verify",
           "read_first", "read_whole", "edit_set", "edit_delete"]


# --- the lossless syntax tree -----------------------------------------------------------------

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


def _is_semantic(node: Node) -> bool:
    """A node that is data, not whitespace, a comment or a ``#_`` form."""
    return node.kind not in ("whitespace", "comment") and not node.discard


def _semantic_indices(node: Node) -> list[int]:
    return [i for i, child in enumerate(node.children) if _is_semantic(child)]


# Java's Character.isWhitespace, as Clojure's reader uses, minus the no-break spaces; a comma
# too, and a byte-order mark, which editors on Windows put at the start of a file
_WHITESPACE = re.compile(r"(?:(?![\u00a0\u2007\u202f\x85])[\s,\ufeff])+")
_ATOM = re.compile(r'(?:[^\s,()\[\]{}";]|[\u00a0\u2007\u202f\x85])+')
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_COLLECTIONS = {"(": ("list", ")"), "[": ("vector", "]"), "{": ("map", "}"), "#{": ("set", "}"), "#(": ("list", ")")}


def _position(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}, column {pos - text.rfind(chr(10), 0, pos)}"


class _Reader:
    """Reads nodes one at a time, so that a caller can stop after the first form."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int) -> None:
        raise EdnSyntaxError(f"{message} at {_position(self.text, pos)}")

    def take(self, kind: str, end: int) -> Node:
        node = Node(kind, self.text[self.pos:end])
        self.pos = end
        return node

    def atom_end(self, pos: int) -> int:
        match = _ATOM.match(self.text, pos)
        return match.end() if match else pos

    def node(self) -> Node | None:
        """The next node, or None at the end of the text or at a closing bracket."""
        text, pos = self.text, self.pos
        if pos >= len(text) or text[pos] in ")]}":
            return None
        c = text[pos]
        if match := _WHITESPACE.match(text, pos):
            return self.take("whitespace", match.end())
        if c == ";":
            end = text.find("\n", pos)
            return self.take("comment", len(text) if end < 0 else end)
        if c == '"' or text.startswith('#"', pos):
            match = _STRING.match(text, pos + (c == "#"))
            if not match:
                self.fail("Unterminated string in EDN", pos)
            return self.take("token", match.end())
        if c == "\\":
            if pos + 1 >= len(text):
                self.fail("A backslash at the end of EDN text is not a character", pos)
            return self.take("token", self.atom_end(pos + 2))  # the next character is taken as is: \; \(
        if c in "([{" or text.startswith(("#{", "#("), pos):
            return self.collection(text[pos:pos + 1 + (c == "#")])
        if text.startswith("#_", pos):
            return self.wrapper("#_", 1, discard=True)
        if text.startswith("##", pos):
            return self.take("token", self.atom_end(pos + 2))
        if c == "#":
            end = self.atom_end(pos + 1)
            if end == pos + 1:
                self.fail("A # in EDN must start a tag, a set or a #_ discard", pos)
            return self.wrapper(text[pos:end], 1)
        if c == "^":
            return self.wrapper("^", 2)
        if c in "'`~@":
            return self.wrapper("~@" if text.startswith("~@", pos) else c, 1)
        return self.take("token", self.atom_end(pos))

    def collection(self, opener: str) -> Node:
        start = self.pos
        kind, close = _COLLECTIONS[opener]
        node = Node(kind, opener, close=close)
        self.pos += len(opener)
        while (child := self.node()) is not None:
            node.children.append(child)
        if self.pos >= len(self.text):
            self.fail(f"Unterminated collection in EDN: the {opener} opened", start)
        if self.text[self.pos] != close:
            self.fail(f"Mismatched {self.text[self.pos]} in EDN (the {opener} at "
                      f"{_position(self.text, start)} needs {close})", self.pos)
        self.pos += 1
        return node

    def wrapper(self, prefix: str, forms: int, *, discard: bool = False) -> Node:
        start = self.pos
        node = Node("wrapper", prefix, discard=discard)
        self.pos += len(prefix)
        while forms:
            child = self.node()
            if child is None:
                self.fail(f"{prefix} is not followed by the form it applies to in EDN", start)
            node.children.append(child)
            forms -= _is_semantic(child)
        return node

    def stray(self) -> None:
        if self.pos < len(self.text):
            self.fail(f"Unmatched {self.text[self.pos]} in EDN", self.pos)


def parse(text: str) -> Node:
    """The lossless syntax tree of ``text`` (a ``root`` node); ``render(parse(text)) == text``."""
    reader = _Reader(text)
    root = Node("root")
    while (child := reader.node()) is not None:
        root.children.append(child)
    reader.stray()
    return root


def render(node: Node) -> str:
    """The text of a tree or node."""
    out: list[str] = []

    def walk(n: Node) -> None:
        out.append(n.text)
        for child in n.children:
            walk(child)
        out.append(n.close)

    walk(node)
    return "".join(out)


# --- from nodes to values ---------------------------------------------------------------------

_NAMED_CHARS = {name: c for c, name in _CHAR_NAMES.items()}
_UNESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "b": "\b", "f": "\f"}
_STRING_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([0-7]{1,3})|(.))", re.S)
_INT = re.compile(r"([+-]?)(?:(0|[1-9][0-9]*)|0[xX]([0-9a-fA-F]+)|0([0-7]+)|([1-9][0-9]?)[rR]([0-9a-zA-Z]+))N?")
_FLOAT = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?(M)?")
_RATIO = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_SYMBOLIC = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}


def _unescape(match: re.Match) -> str:
    hex_digits, octal, other = match.groups()
    if hex_digits:
        return chr(int(hex_digits, 16))
    if octal:
        if int(octal, 8) > 0o377:
            raise EdnSyntaxError(f"Octal escape \\{octal} in an EDN string is above \\377")
        return chr(int(octal, 8))
    if other not in _UNESCAPES:
        raise EdnSyntaxError(f"Unsupported escape \\{other} in an EDN string")
    return _UNESCAPES[other]


def _char(text: str) -> Char:
    body = text[1:]
    if len(body) == 1:
        return Char(body)
    if body in _NAMED_CHARS:
        return Char(_NAMED_CHARS[body])
    if re.fullmatch(r"u[0-9a-fA-F]{4}", body):
        return Char(chr(int(body[1:], 16)))
    if re.fullmatch(r"o[0-7]{1,3}", body) and int(body[1:], 8) <= 0o377:
        return Char(chr(int(body[1:], 8)))
    raise EdnSyntaxError(f"Unsupported character in EDN: {text}")


def _number(text: str) -> int | float | Decimal | Fraction:
    if match := _INT.fullmatch(text):
        sign, decimal, hexadecimal, octal, radix, digits = match.groups()
        if decimal is not None:
            n = int(decimal)
        elif hexadecimal:
            n = int(hexadecimal, 16)
        elif octal:
            n = int(octal, 8)
        else:
            try:
                n = int(digits, int(radix))
            except ValueError:
                raise EdnSyntaxError(f"Invalid number in EDN: {text}") from None
        return -n if sign == "-" else n
    match = _FLOAT.fullmatch(text)
    if match and any(match.groups()):  # a bare 09 is neither octal nor a float
        return Decimal(text[:-1]) if match[3] else float(text)
    if match := _RATIO.fullmatch(text):
        if int(match[2]) == 0:
            raise EdnSyntaxError(f"Ratio with a zero denominator in EDN: {text}")
        ratio = Fraction(int(match[1]), int(match[2]))
        return ratio.numerator if ratio.denominator == 1 else ratio
    raise EdnSyntaxError(f"Invalid number in EDN: {text}")


def _check_name(name: str, text: str) -> None:
    namespace, slash, local = name.partition("/")
    if name != "/" and (not name or name.endswith(":") or "::" in name or (slash and not (namespace and local))):
        raise EdnSyntaxError(f"Invalid symbol or keyword in EDN: {text}")


def _token(text: str) -> Any:
    c = text[0]
    if c == '"':
        return _STRING_ESCAPE.sub(_unescape, text[1:-1])
    if c == "\\":
        return _char(text)
    if c == "#":
        if text in _SYMBOLIC:
            return _SYMBOLIC[text]
        raise EdnSyntaxError(f"{text} is not EDN" + (" (regular expressions are Clojure code)" if text[1] == '"' else ""))
    if text in ("nil", "true", "false"):
        return None if text == "nil" else text == "true"
    if c in "0123456789" or (c in "+-" and text[1:2].isascii() and text[1:2].isdigit()):
        return _number(text)
    if c == ":":
        if text.startswith("::"):
            raise EdnSyntaxError(f"Auto-resolved keywords like {text} are Clojure code, not EDN")
        _check_name(text[1:], text)
        return Keyword(text[1:])
    _check_name(text, text)
    return Symbol(text)


def _qualify(key: Any, namespace: str) -> Any:
    """A key of ``#:ns{…}``: a bare keyword or symbol takes the namespace, ``:_/k`` drops it."""
    if isinstance(key, (Keyword, Symbol)):
        if key.name.startswith("_/"):
            return type(key)(key.name[2:])
        if "/" not in key.name:
            return type(key)(f"{namespace}/{key.name}")
    return key


def _map_view(node: Node) -> tuple[Node, str | None, list[int]] | None:
    """The map node inside ``node``, its ``#:ns`` namespace, and the step from ``node`` to it."""
    if node.kind == "map":
        return node, None, []
    if node.kind == "wrapper" and node.text.startswith("#:"):
        i = _semantic_indices(node)[0]
        if node.children[i].kind == "map":
            return node.children[i], node.text[2:], [i]
    return None


def _entries(node: Node, namespace: str | None = None) -> list[tuple[Any, int, int]]:
    """(key, key position, value position) for each entry of a map node."""
    positions = _semantic_indices(node)
    if len(positions) % 2:
        raise EdnSyntaxError("A map in EDN needs an even number of forms: key, value, key, value")
    entries, seen = [], set()
    for k, v in zip(positions[::2], positions[1::2]):
        key = _value(node.children[k])
        if namespace is not None:
            key = _qualify(key, namespace)
        canon = _canon(key)
        if canon in seen:
            raise EdnSyntaxError(f"Duplicate key in an EDN map: {dumps(key)}")
        seen.add(canon)
        entries.append((key, k, v))
    return entries


def _values(node: Node) -> list[Any]:
    return [_value(child) for child in node.children if _is_semantic(child)]


def _value(node: Node) -> Any:
    """The data a semantic node stands for."""
    if node.kind == "token":
        return _token(node.text)
    if node.kind == "vector":
        return tuple(_values(node))
    if node.kind == "map":
        return EdnMap((key, _value(node.children[v])) for key, _, v in _entries(node))
    if node.kind == "set":
        items = _values(node)
        result = EdnSet(items)
        if len(result) != len(items):
            raise EdnSyntaxError(f"Duplicate item in an EDN set: {dumps(EdnSet(items))}")
        return result
    if node.kind == "list" and node.text == "(":
        return EdnList(_values(node))
    prefix = node.text
    if node.kind == "wrapper" and prefix == "^":
        return _value(node.children[_semantic_indices(node)[-1]])
    if node.kind == "wrapper" and prefix.startswith("#:"):
        view = _map_view(node)
        if view is None or prefix.startswith("#::"):
            raise EdnSyntaxError(f"{prefix} must be followed by a map, and names its namespace in EDN")
        map_node, namespace, _ = view
        return EdnMap((key, _value(map_node.children[v])) for key, _, v in _entries(map_node, namespace))
    if node.kind == "wrapper" and prefix == "'":  # (quote x), as Clojure reads it; found in lein profiles
        return EdnList((Symbol("quote"), _value(node.children[_semantic_indices(node)[0]])))
    if node.kind == "wrapper" and prefix.startswith("#") and prefix[1:2].isalpha():
        _check_name(prefix[1:], prefix)
        return Tagged(prefix[1:], _value(node.children[_semantic_indices(node)[0]]))
    raise EdnSyntaxError(f"{prefix}… is Clojure code, not EDN data")


def _first_value(tree: Node) -> Any:
    positions = _semantic_indices(tree)
    return _value(tree.children[positions[0]]) if positions else None


def read_first(text: str) -> Any:
    """The first EDN form in ``text`` (anything after it is not read), or None if there is none."""
    reader = _Reader(text)
    while (node := reader.node()) is not None:
        if _is_semantic(node):
            return _value(node)
    reader.stray()
    return None


def read_whole(text: str) -> Any:
    """The data of the first form of ``text``, which must be valid EDN throughout."""
    return _first_value(parse(text))


# --- navigating and editing the tree ----------------------------------------------------------

def node_at(tree: Node, address: Sequence[int]) -> Node:
    """The node at ``address``, a list of child positions from the root (see :func:`locate`)."""
    for i in address:
        tree = tree.children[i]
    return tree


def _target(tree: Node, address: list[int]) -> list[int] | None:
    """Step from the root into its first form, and over metadata: ``^:private {…}`` is the map.

    Tagged literals are not stepped into: ``#inst "…"`` is one value, replaced whole.
    """
    node = node_at(tree, address)
    if node.kind == "root":
        positions = _semantic_indices(node)
        if not positions:
            return None
        address = [*address, positions[0]]
        node = node.children[positions[0]]
    while node.kind == "wrapper" and node.text == "^":
        i = _semantic_indices(node)[-1]
        address, node = [*address, i], node.children[i]
    return address


def _child(node: Node, key: Any) -> list[int] | None:
    if view := _map_view(node):
        map_node, namespace, step = view
        for k, _, v in _entries(map_node, namespace):
            if edn_equal(k, key):
                return [*step, v]
        return None
    if node.kind == "vector" and _is_index(key):
        positions = _semantic_indices(node)
        if 0 <= key < len(positions):
            return [positions[key]]
    return None


def locate(tree: Node, path: Sequence) -> list[int] | None:
    """The address of the node that holds the value at ``path`` in the first form, or None.

        tree = parse("{:server {:port 8080}}")
        node_at(tree, locate(tree, [Keyword("server"), Keyword("port")])).text   # "8080"
    """
    address = _target(tree, [])
    for key in path:
        step = None if address is None else _child(node_at(tree, address), key)
        if step is None:
            return None
        address = _target(tree, address + step)
    return address


def node_of(value: Any) -> Node:
    """The node for ``value`` printed as EDN. Editors look it up in this module when they run,
    so tests can swap ``_edn_text.node_of`` for one that returns garbage and check that
    verification catches it."""
    root = parse(dumps(value))
    return root.children[_semantic_indices(root)[0]]


def verify(updated: str, expected: Any) -> None:
    """Raise unless ``updated`` reads back as exactly ``expected``."""
    try:
        actual = _first_value(parse(updated))
    except EdnSyntaxError as exc:
        raise EdnError(f"Edit would have produced unreadable EDN; file left alone ({exc})") from None
    if not edn_equal(actual, expected):
        raise EdnError("Edit would have changed more than the value asked for; file left alone")


def _replace(tree: Node, address: list[int], node: Node) -> None:
    node_at(tree, address[:-1]).children[address[-1]] = node


def _newline_indent(separator: str, newline: str) -> str:
    """The line break and indentation that start the line after ``separator``."""
    return newline + separator[separator.rfind("\n") + 1:]


def _append_entry(map_node: Node, key: Node, value: Node, newline: str) -> None:
    """Add ``key value`` after the map's last entry, laid out like that entry."""
    children = map_node.children
    positions = _semantic_indices(map_node)
    if positions:
        last_key, last_value = positions[-2], positions[-1]
        before = children[last_key - 1] if last_key else None
        if before is None or before.kind != "whitespace":
            indent = " "
        elif "\n" in before.text:
            indent = _newline_indent(before.text, newline)  # a new line in the last key's column
        else:
            indent = before.text  # an inline map stays inline, commas and all
        at = last_value + 1
        # a comment on the last entry's line stays with that entry
        after = [child.kind for child in children[at:at + 2]]
        if after[:1] == ["comment"]:
            at += 1
        elif after == ["whitespace", "comment"] and "\n" not in children[at].text:
            at += 2
    else:
        indent, at = "", len(children)
    added = [key, Node("whitespace", " "), value]
    if at and children[at - 1].kind == "comment":
        if "\n" not in indent:
            indent = newline + indent  # or the new entry would end up inside the comment
        if children[at - 1].text.endswith("\r"):
            # the comment holds the \r of its \r\n: the entry goes in between and brings its own \r
            indent = indent.replace("\r\n", "\n", 1)
            added.append(Node("whitespace", "\r"))
    children[at:at] = [Node("whitespace", indent), *added] if indent else added


def _describe(node: Node) -> str:
    if node.kind == "token":
        return node.text
    if node.kind == "wrapper":
        return f"a {node.text} value"
    return f"a {node.kind}"


def edit_set(text: str, path: list, value: Any) -> tuple[str, Any]:
    """:func:`set_in_str` that also returns the data the new text holds."""
    _nonempty(path)
    tree = parse(text)
    expected = assoc_in(_first_value(tree), path, value)
    address = locate(tree, path)
    if address is not None:
        _replace(tree, address, node_of(value))
    else:
        _add(tree, path, value, "\r\n" if "\r\n" in text else "\n")
    updated = render(tree)
    verify(updated, expected)
    return updated, expected


def _add(tree: Node, path: list, value: Any, newline: str) -> None:
    """Add the missing end of ``path`` to the deepest map on it that exists."""
    for depth in range(len(path) - 1, -1, -1):
        address = locate(tree, path[:depth])
        if address is not None:
            break
    else:
        raise EdnError("The text holds no EDN value to add a key to; write the whole value instead")
    key = path[depth]
    for inner in reversed(path[depth + 1:]):
        value = EdnMap([(inner, value)])
    node = node_at(tree, address)
    if node.kind == "token" and node.text == "nil":
        _replace(tree, address, node_of(EdnMap([(key, value)])))  # nil is where the map goes
        return
    view = _map_view(node)
    if view is None:
        raise EdnError(f"Cannot add the key {dumps(key)} to {_describe(node)}; only maps take new keys")
    _append_entry(view[0], node_of(key), node_of(value), newline)


def edit_delete(text: str, path: list) -> tuple[str, Any]:
    """:func:`delete_in_str` for a non-empty path, also returning the data the new text holds."""
    tree = parse(text)
    expected = dissoc_in(_first_value(tree), path)
    map_node, namespace, _ = _map_view(node_at(tree, locate(tree, path[:-1])))
    _, k, v = next(entry for entry in _entries(map_node, namespace) if edn_equal(entry[0], path[-1]))
    children = map_node.children
    # from the whitespace before the key through the value: what follows (a comment) stays
    start = k - 1 if k and children[k - 1].kind == "whitespace" else k
    end = v + 1
    if k == 0 and end < len(children) and children[end].kind == "whitespace":
        end += 1  # the first entry: the next one moves up to the brace
    del children[start:end]
    follows = children[start] if start < len(children) else None
    if start and children[start - 1].kind == "comment" and not (
            follows and follows.kind == "whitespace" and follows.text.startswith("\n")):
        children.insert(start, Node("whitespace", "\n"))  # what follows must not join the comment
    updated = render(tree)
    verify(updated, expected)
    return updated, expected


def set_in_str(text: str, path: Sequence, value: Any) -> str:
    """``text`` with the value at ``path`` set and every other byte the same.

    An existing value's node is replaced; a missing key is added after the last entry of the
    deepest map on the path, in that entry's column, wrapped in maps for the rest of the path.
    The result is read back and must equal the expected data, or EdnError is raised.
    """
    return edit_set(text, list(path), value)[0]


def delete_in_str(text: str, path: Sequence) -> str:
    """``text`` without the map entry at ``path``; comments around it stay."""
    return edit_delete(text, _nonempty(list(path)))[0]

