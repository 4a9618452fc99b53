"""The EDN capability: read one value of an EDN file, and (when writable) change or remove it in place.

    from bettong_nb import capabilities as caps
    caps.edn(root="config")                  # read_edn
    caps.edn(root="config", writable=True)   # read_edn, set_edn, delete_edn

The model names a value by a key path, a JSON array of EDN strings (``[":server", ":port"]``).
Edits keep comments, blank lines, key order and hand formatting (see :mod:`bettong_nb.edn`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .. import edn as _edn
from ..capability import Tool

__all__ = ["edn", "EdnCapability"]

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
            decoded = json.loads(key_path)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            return decoded
    return key_path if isinstance(key_path, list) else [key_path]


def _shown(items: list) -> str:
    return " ".join(k if isinstance(k, str) else _edn.dumps(k) for k in items)


@dataclass(eq=False)
class EdnCapability:
    """Tools for ``.edn`` files; build it with :func:`edn`. The handlers work from Python too."""

    root: str | os.PathLike | None = None
    writable: bool = False
    id: str = field(default="edn", init=False)
    instructions: str = field(init=False)
    tools: list[Tool] = field(init=False)

    def __post_init__(self) -> None:
        # pinned when built, so a later chdir cannot move the root
        self._root = None if self.root is None else os.path.abspath(os.path.expanduser(os.fspath(self.root)))
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
                Tool(name="set_edn", handler=self.set_edn,
                     description=("Set one value in an EDN file in place, keeping comments, blank lines, key order"
                                  " and formatting. A missing key is added to its map, and missing maps on the way"
                                  " are created."),
                     parameters={"path": path, "key_path": {**key_path, "required": True},
                                 "value": {"type": "string", "description": _VALUE, "required": True}}),
                Tool(name="delete_edn", handler=self.delete_edn,
                     description=("Remove a key and its value from a map in an EDN file, keeping the comments and"
                                  " formatting around it."),
                     parameters={"path": path, "key_path": {**key_path, "required": True}}),
            ]
        return tools

    def _file(self, path: Any) -> str:
        """The canonical path of an existing regular file, below the root when there is one.

        Confinement here is a check on the resolved path (symlinks followed), not a guarantee:
        a symlink swapped in between the check and the use is not caught. The filesystem
        capability has the hardened, descriptor-based resolver.
        """
        text = "" if path is None else str(path)
        if not text.strip():
            raise ValueError("path must not be blank")
        if self._root is None:
            resolved = os.path.realpath(text)
        else:
            root = os.path.realpath(self._root)
            resolved = os.path.realpath(os.path.join(self._root, text))  # an absolute path stays absolute
            if os.path.commonpath([root, resolved]) != root:
                raise PermissionError(f"{text} escapes the allowed root {os.fspath(self.root)}")
        if not os.path.isfile(resolved):
            raise FileNotFoundError(f"No such file: {resolved}")
        return resolved

    def read_edn(self, path: str, key_path: list | None = None) -> str:
        file = self._file(path)
        keys = _key_path(key_path)
        value = _edn.get_in_file(file, keys)
        if value is None:
            return f"No value at {_shown(keys)} in {file}" if keys else f"No value in {file}"
        return _edn.pretty(value) + "\n"

    def set_edn(self, path: str, key_path: list, value: Any) -> str:
        file = self._file(path)
        keys = _key_path(key_path)
        _edn.set_in_file(file, keys, value)
        return f"Set {_shown(keys)} to {_shown([value])} in {file}"

    def delete_edn(self, path: str, key_path: list) -> str:
        file = self._file(path)
        keys = _key_path(key_path)
        _edn.delete_in_file(file, keys)
        return f"Removed {_shown(keys)} from {file}"


def edn(root: str | os.PathLike | None = None, *, writable: bool = False) -> EdnCapability:
    """Tools to read (and, with ``writable=True``, edit) EDN files, confined to ``root`` if given."""
    return EdnCapability(root=root, writable=writable)
