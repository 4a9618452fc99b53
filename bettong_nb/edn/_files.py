"""EDN files: read a value, or change one in place and replace the file atomically.

    get_in_file("config.edn", [":server", ":port"])          # 8080
    set_in_file("config.edn", [":server", ":port"], "9090")  # only "8080" changes in the file
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import Any, Callable

from ._data import assoc_in, dissoc_in, nonempty, parse_path, parse_value
from ._reader import read_whole
from ._splice import delete_in_str, set_in_str
from ._values import EdnError, EdnSyntaxError, edn_equal
from ._walk import get_in_text
from ._writer import pretty

__all__ = ["read_file", "write_file", "get_in_file", "set_in_file", "update_in_file", "delete_in_file", "verify"]


def _read_text(path: str | os.PathLike) -> str:
    with open(path, encoding="utf-8", newline="") as f:  # newline="" keeps \r\n byte for byte
        return f.read()


def _write_text(path: str | os.PathLike, text: str) -> None:
    """Replace the file (the target of a symlink) atomically: a temp file, then a rename."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o644
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def verify(updated: str, expected: Any) -> None:
    """Raise unless ``updated`` reads back as exactly ``expected``."""
    try:
        actual = read_whole(updated)
    except EdnSyntaxError as exc:
        raise EdnError(f"Edit would have produced unreadable EDN; file left alone ({exc})") from None
    if not edn_equal(actual, expected):
        raise EdnError("Edit would have changed more than the value asked for; file left alone")


def read_file(path: str | os.PathLike) -> Any:
    """The data of the file's first form (the whole file must be valid EDN)."""
    return read_whole(_read_text(path))


def write_file(path: str | os.PathLike, data: Any) -> Any:
    """Write ``data`` pretty-printed, replacing the file and any comments in it; returns ``data``."""
    _write_text(path, _rewritten(data))
    return data


def _rewritten(data: Any) -> str:
    """``data`` pretty-printed, checked to read back the same."""
    text = pretty(data) + "\n"
    verify(text, data)
    return text


def get_in_file(path: str | os.PathLike, keys: Any = ()) -> Any:
    """The value at ``keys`` in the file (see :func:`parse_path`), or None if it is missing.

    Only the maps and vectors on the way are read; the rest of the file is scanned.
    """
    keys = parse_path(keys)
    text = _read_text(path)
    return get_in_text(text, keys) if keys else read_whole(text)


def _store(path: str | os.PathLike, text: str, edit: Callable[[str], str], rewrite: Callable[[Any], Any],
           preserve_formatting: bool) -> Any:
    """Write the edited text (or the rewritten data, pretty-printed) and return the file's new data."""
    if preserve_formatting:
        updated = edit(text)
        data = read_whole(updated)
    else:
        data = rewrite(read_whole(text))
        updated = _rewritten(data)
    _write_text(path, updated)
    return data


def set_in_file(path: str | os.PathLike, keys: Any, value: Any, *, preserve_formatting: bool = True) -> Any:
    """Set the value at ``keys``; a string ``value`` is EDN text. Returns the file's new data.

    Only the value's text changes; with ``preserve_formatting=False`` the file is rewritten
    pretty-printed instead, and its comments are lost.
    """
    text = _read_text(path)
    keys, value = nonempty(parse_path(keys)), parse_value(value)
    return _store(path, text, lambda t: set_in_str(t, keys, value), lambda data: assoc_in(data, keys, value),
                  preserve_formatting)


def update_in_file(path: str | os.PathLike, keys: Any, fn: Callable[..., Any], *args: Any,
                   preserve_formatting: bool = True) -> Any:
    """Set the value at ``keys`` to ``fn(old_value, *args)``; returns the file's new data.

        update_in_file("config.edn", [":server", ":port"], lambda port: port + 1)

    What ``fn`` returns is data, not EDN text: a string stays a string.
    """
    keys = nonempty(parse_path(keys))
    text = _read_text(path)
    new = fn(get_in_text(text, keys), *args)
    return _store(path, text, lambda t: set_in_str(t, keys, new), lambda data: assoc_in(data, keys, new),
                  preserve_formatting)


def delete_in_file(path: str | os.PathLike, keys: Any, *, preserve_formatting: bool = True) -> Any:
    """Remove the map entry at ``keys`` (``No such key: …`` when it is not there); returns the new data."""
    keys = nonempty(parse_path(keys))
    text = _read_text(path)
    return _store(path, text, lambda t: delete_in_str(t, keys), lambda data: dissoc_in(data, keys),
                  preserve_formatting)
