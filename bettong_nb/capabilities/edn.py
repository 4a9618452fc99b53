"""The EDN capability: read one value of an EDN file, and (when writable) change or remove it in place.

    from bettong_nb import capabilities as caps
    caps.edn(root="config")                  # read_edn
    caps.edn(root="config", writable=True)   # read_edn, set_edn, delete_edn

    ed = caps.edn(root="config", writable=True)
    ed.set_edn("app.edn", [":server", ":port"], "9090")   # "Set :server :port to 9090 in app.edn"

The model names a value by a key path, a JSON array of EDN strings (``[":server", ":port"]``).
Edits keep comments, blank lines, key order and hand formatting (see :mod:`bettong_nb.edn`).

Files are reached the way the filesystem capability reaches them (:class:`bettong_nb._rooted.Root`):
with a root, ``..``, absolute paths elsewhere and symlinks leading out are refused, also when a
directory is swapped for a symlink mid-call; credential files are refused unless
``allow_secrets=True``; an edit is read and replaced in the one file found, atomically.
Messages name the path as the model gave it. The tools load files of up to
:data:`MAX_FILE_BYTES` (UTF-8 only), and ``read_edn`` shows at most :data:`MAX_SHOWN_CHARS`
characters, saying how much it left out. Memory stays a small multiple of the file's size:
a read or an edit reads only the maps and vectors on its key path, and a value whose text is
longer than :data:`MAX_PRINTED_CHARS` is shown as written in the file rather than read and
pretty-printed (only its start would be shown anyway).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import edn as _edn
from ..safety.rooted import Root, read_up_to
from ..core.capability import Tool
from ..http.json_body import loads
from ..edn._walk import find, read_piece

__all__ = ["edn", "EdnCapability", "MAX_FILE_BYTES", "MAX_SHOWN_CHARS", "MAX_PRINTED_CHARS"]

MAX_FILE_BYTES = 50 << 20  # scanned at tens of megabytes a second; a larger file is a database's job
MAX_SHOWN_CHARS = 100_000
MAX_PRINTED_CHARS = 1 << 20  # a longer value is shown as written: reading it all to show the start is waste

_KEY_PATH = ('Where the value is: a JSON array of strings, each read as EDN. [":server", ":port"] '
             'is the :port in the :server map, [":flags", "0"] the first item of the vector under '
             ':flags, and ["\\"name\\""] a string key.')
_VALUE = ('The new value as EDN text, such as 8080, "localhost", :prod, [1, 2], {:a 1}. A string '
          'needs its double quotes; a bare word is read as a symbol.')


def _key_path(key_path: Any) -> list:
    """The model's key path as a list of keys."""
    if key_path is None:
        return []
    if isinstance(key_path, str) and key_path.lstrip().startswith("["):
        # models sometimes send the array as a JSON string: "[\":server\", \":port\"]"
        try:
            decoded = loads(key_path)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            return decoded
    return key_path if isinstance(key_path, list) else [key_path]


def _shown(items: list) -> str:
    return " ".join(k if isinstance(k, str) else _edn.dumps(k) for k in items)


def _loader(shown: str) -> Callable[[int, os.stat_result], str]:
    """Reads an open file as EDN text, refusing one too large to parse in reasonable time."""

    def too_large(size: str) -> ValueError:
        return ValueError(f"{shown} is too large for the EDN tools ({size}; the limit is {MAX_FILE_BYTES:,}"
                          " bytes); the filesystem's read_file can read it in pages")

    def load(fd: int, info: os.stat_result) -> str:
        if info.st_size > MAX_FILE_BYTES:
            raise too_large(f"{info.st_size:,} bytes")  # refused unread
        data = read_up_to(fd, MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise too_large(f"over {MAX_FILE_BYTES:,} bytes")  # it grew while being read
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{shown} is not UTF-8 text, so it is not EDN (byte {exc.start} is not valid)") from None

    return load


def _capped(text: str, *, as_written: bool = False) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    what = "characters of this value as written in the file" if as_written else "characters"
    return (text[:MAX_SHOWN_CHARS] + f"\n\n[Showed {MAX_SHOWN_CHARS:,} of {len(text):,} {what}; "
            "read a longer key_path to see one part of this value.]")


@dataclass(eq=False)
class EdnCapability:
    """Tools for ``.edn`` files; build it with :func:`edn`. The handlers work from Python too."""

    root: str | os.PathLike | None = None
    writable: bool = False
    allow_secrets: bool = False
    id: str = field(default="edn", init=False)
    instructions: str = field(init=False)
    tools: list[Tool] = field(init=False)

    def __post_init__(self) -> None:
        self._root = Root(self.root, allow_secrets=self.allow_secrets, owner="an edn capability")
        self.instructions = self._instructions()
        self.tools = self._tools()

    def _instructions(self) -> str:
        text = "EDN files have their own tools: read_edn reads one value by its key path, or the whole file."
        if self.writable:
            text += (" set_edn and delete_edn change or remove one value in place, keeping comments and"
                     " formatting; prefer them to write_file for .edn files.")
        if self.root is not None:
            text += f" Every path is confined to {os.fspath(self.root)}."
        if not self.writable:
            text += " These tools only read: you cannot change EDN files."
        return text

    def _tools(self) -> list[Tool]:
        path = {"type": "string", "description": "Path of the .edn file.", "required": True}
        key_path = {"type": "array", "items": {"type": "string"}, "description": _KEY_PATH}
        tools = [Tool(
            name="read_edn",
            handler=self.read_edn,
            description="Read one value of an EDN file, printed as EDN.",
            parameters={"path": path,
                        "key_path": {**key_path, "description": _KEY_PATH + " Omit it to read the whole file."}},
        )]
        if self.writable:
            tools += [
                # Edits run alone: two edits of one file in one step must not race.
                Tool(name="set_edn", handler=self.set_edn, concurrent=False,
                     description=("Set one value in an EDN file in place, keeping comments, blank lines, key order"
                                  " and formatting. A missing key is added to its map, and missing maps on the way"
                                  " are created."),
                     parameters={"path": path, "key_path": {**key_path, "required": True},
                                 "value": {"type": "string", "description": _VALUE, "required": True}}),
                Tool(name="delete_edn", handler=self.delete_edn, concurrent=False,
                     description=("Remove a key and its value from a map in an EDN file, keeping the comments and"
                                  " formatting around it."),
                     parameters={"path": path, "key_path": {**key_path, "required": True}}),
            ]
        return tools

    def read_edn(self, path: str, key_path: list | None = None) -> str:
        """The value at ``key_path`` printed as EDN, or the whole file without one."""
        keys = _key_path(key_path)
        text = self._root.read(path, _loader(path))
        piece = find(text, _edn.parse_path(keys))
        if piece is not None and piece.end - piece.start > MAX_PRINTED_CHARS:
            return _capped(text[piece.start:piece.end] + "\n", as_written=True)
        value = None if piece is None else read_piece(text, piece)
        if value is None:
            return f"No value at {_shown(keys)} in {path}" if keys else f"No value in {path}"
        return _capped(_edn.pretty(value) + "\n")

    def set_edn(self, path: str, key_path: list, value: Any) -> str:
        """Set one value in place; returns ``Set <keys> to <value> in <path>``."""
        keys = _key_path(key_path)
        self._edit(path, lambda text: _edn.set_in_str(text, _edn.parse_path(keys), _edn.parse_value(value)))
        return f"Set {_shown(keys)} to {_shown([value])} in {path}"

    def delete_edn(self, path: str, key_path: list) -> str:
        """Remove one map entry in place; returns ``Removed <keys> from <path>``."""
        keys = _key_path(key_path)
        self._edit(path, lambda text: _edn.delete_in_str(text, _edn.parse_path(keys)))
        return f"Removed {_shown(keys)} from {path}"

    def _edit(self, path: str, change: Callable[[str], str]) -> None:
        load = _loader(path)
        self._root.rewrite(path, lambda fd, info: change(load(fd, info)).encode("utf-8"))


def edn(root: str | os.PathLike | None = None, *, writable: bool = False,
        allow_secrets: bool = False) -> EdnCapability:
    """Tools to read (and, with ``writable=True``, edit) EDN files, confined to ``root`` if given;
    credential files are refused unless ``allow_secrets``.

        caps.edn(root="config", writable=True)
    """
    return EdnCapability(root=root, writable=writable, allow_secrets=allow_secrets)
