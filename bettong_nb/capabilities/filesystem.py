"""The filesystem capability: read and list files, and write them only when asked.

    from bettong_nb import capabilities as caps

    caps.filesystem()                            # read anywhere except credential files
    caps.filesystem(root="data")                 # read only below data/
    caps.filesystem(root="data", writable=True)  # also write_file and delete_file

    fs = caps.filesystem(root="data", writable=True)
    fs.write_file("notes/today.txt", "hello")    # the handlers work from Python too
    fs.read_file("notes/today.txt")              # "hello"

Paths, confinement and credential files are handled by :class:`bettong_nb._rooted.Root`, which
the EDN capability shares (its docstring has the details). In short: with a root, relative
paths start there and an absolute path is accepted when it lies below it; without one, paths
are used as given. A path is resolved one component at a time from a descriptor of the root,
so ``..`` at the root, absolute paths elsewhere and symlinks leading out are refused ("escapes
the allowed root"), also when a component is swapped for a symlink mid-call; a symlink that
stays inside is followed. Credential files (``.ssh/``, ``.env``, ``*.pem``, ``*.pfx``,
``.pgpass``, cloud CLI token stores ...: :data:`bettong_nb.secrets.CREDENTIAL_PATHS`), judged
on where the path really leads, are refused unless ``allow_secrets=True``. Writes are
a temp file renamed into place.

Results. Every message names the path as the model gave it: ``Wrote 5 bytes to notes.txt``,
``Deleted notes.txt``, ``No such file: notes.txt``. ``write_file`` creates missing parent
directories (inside the root, through descriptors) unless the missing part contains ``..``.
``read_file`` returns at most 100 000 characters per call with a bracketed note on how to
read on (``offset``/``limit``, counted in characters), describes binary files instead of
dumping them, replaces bytes that are not UTF-8 with U+FFFD and says how many it shows,
and answers ``(empty file)`` for an empty one. A page is found by decoding the file a chunk
at a time and dropping what lies before the offset, so memory stays under a few MB whatever
offset and file size the model picks. The time grows with the offset (about a second per few
hundred MB, bytes that are not UTF-8 included); the tool reads in a worker thread, so the
agent's event loop goes on meanwhile. ``list_dir`` shows at most 1000 entries; names holding
control characters are shown JSON-quoted.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..safety.rooted import Root, is_credential_path, json_type
from ..core.capability import Tool

__all__ = ["filesystem", "Filesystem", "is_credential_path", "MAX_READ_CHARS", "MAX_LIST_ENTRIES"]

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 1000
_HEAD_BYTES = 8192
_CHUNK_BYTES = 1 << 18

# Formats recognised by their first bytes; each is binary even when it holds no NUL byte.
_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "looks like a PNG image"),
    (b"\xff\xd8\xff", "looks like a JPEG image"),
    (b"GIF87a", "looks like a GIF image"),
    (b"GIF89a", "looks like a GIF image"),
    (b"%PDF-", "looks like a PDF document"),
    (b"PK\x03\x04", "looks like a ZIP archive (also .docx, .xlsx, .jar, .whl)"),
    (b"\x1f\x8b", "looks like gzip-compressed data"),
    (b"\xfd7zXZ\x00", "looks like xz-compressed data"),
    (b"7z\xbc\xaf\x27\x1c", "looks like a 7-Zip archive"),
    (b"\x28\xb5\x2f\xfd", "looks like zstd-compressed data"),
    (b"\x7fELF", "looks like an ELF executable or library"),
    (b"SQLite format 3\x00", "looks like an SQLite database"),
    (b"\x00asm", "looks like a WebAssembly module"),
    (b"\x93NUMPY", "looks like a NumPy array"),
    (b"PAR1", "looks like a Parquet file"),
]
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONTROL_BYTES = frozenset(range(9)) | frozenset(range(14, 32)) - {27}



@dataclass(eq=False)
class Filesystem:
    """File tools for an agent; build it with :func:`filesystem`."""

    root: str | os.PathLike | None = None
    writable: bool = False
    allow_secrets: bool = False
    id: str = field(default="filesystem", init=False)
    instructions: str = field(init=False)
    tools: list[Tool] = field(init=False)

    def __post_init__(self) -> None:
        self._root = Root(self.root, allow_secrets=self.allow_secrets, owner="a filesystem capability")
        self.instructions = self._instructions()
        self.tools = self._tools()

    # --- what the model sees ------------------------------------------------------------------

    def _instructions(self) -> str:
        text = "Use the file tools, not a shell, to read and list files."
        if self.writable:
            text += " You can also create, overwrite and delete files with write_file and delete_file."
        if self.root is not None:
            text += f" Every path is confined to {os.fspath(self.root)}; relative paths start there."
        if not self.writable:
            text += " You can read files but cannot create, change or delete them."
        if not self.allow_secrets:
            text += " Credential files (SSH and GPG keys, .env files, cloud and registry credentials) are refused."
        return text

    def _tools(self) -> list[Tool]:
        path = {"type": "string", "description": "File path.", "required": True}
        tools = [
            Tool(
                name="read_file",
                handler=self._read_file_in_thread,
                description=(f"Read a UTF-8 text file. At most {MAX_READ_CHARS} characters come back per call; "
                             "pass offset to continue a long file. Binary files are described, not shown."),
                parameters={
                    "path": path,
                    "offset": {"type": "integer", "description": "Characters to skip first (default 0)."},
                    "limit": {"type": "integer",
                              "description": f"Most characters to return (default and maximum {MAX_READ_CHARS})."},
                },
            ),
            Tool(
                name="list_dir",
                handler=self.list_dir,
                description=f'List a directory. Directory names end with "/". At most {MAX_LIST_ENTRIES} entries.',
                parameters={"path": {"type": "string", "description": 'Directory path (default ".").'}},
            ),
        ]
        if self.writable:
            tools += [
                # Writes run alone: two calls of one step on the same path must not race.
                Tool(
                    name="write_file",
                    handler=self.write_file,
                    concurrent=False,
                    description="Create or overwrite a file with text (UTF-8), creating missing parent directories.",
                    parameters={"path": path,
                                "content": {"type": "string", "description": "The whole new content.",
                                            "required": True}},
                ),
                Tool(
                    name="delete_file",
                    handler=self.delete_file,
                    concurrent=False,
                    description="Delete a single file (not a directory).",
                    parameters={"path": path},
                ),
            ]
        return tools

    # --- handlers -----------------------------------------------------------------------------

    def read_file(self, path: str | None = None, offset: Any = None, limit: Any = None) -> str:
        """The text of a file, at most :data:`MAX_READ_CHARS` characters from ``offset``."""
        start = _whole(offset, "offset", default=0, minimum=0)
        count = min(_whole(limit, "limit", default=MAX_READ_CHARS, minimum=1), MAX_READ_CHARS)
        return self._root.read(path, lambda fd, info: _read_text(fd, info.st_size, path, start, count),
                               directory_note="it is a directory; use list_dir")

    async def _read_file_in_thread(self, path: str | None = None, offset: Any = None, limit: Any = None) -> str:
        """The ``read_file`` tool: :meth:`read_file` in a worker thread, since reading up to a deep
        offset of a large file takes a while and must not hold up the agent's event loop."""
        return await asyncio.to_thread(self.read_file, path, offset, limit)

    def list_dir(self, path: str | None = None) -> str:
        """Entries of a directory, one a line, directories ending in "/", sorted."""
        entries = self._root.list("." if path is None else path, file_note="it is a file; use read_file")
        if not entries:
            return "(empty directory)"
        lines = [_display_name(e) for e in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"({len(entries) - MAX_LIST_ENTRIES} more entries not shown; {len(entries)} in all)")
        return "\n".join(lines)

    def write_file(self, path: str | None = None, content: str | None = None) -> str:
        """Create or replace a file atomically; returns ``Wrote <N> bytes to <path>``."""
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ValueError(f"content must be a string, not {json_type(content)}; write JSON as text")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("content is not valid Unicode text (it holds a lone surrogate)") from None
        self._root.write(path, data)
        return f"Wrote {len(data)} bytes to {path}"

    def delete_file(self, path: str | None = None) -> str:
        """Delete one file; returns ``Deleted <path>``."""
        self._root.unlink(path, directory_note="it is a directory; delete_file only deletes files")
        return f"Deleted {path}"


def _marked(error: UnicodeDecodeError) -> tuple[str, int]:
    return _MARK, error.end


_MARK = "\udcff"  # stands for one undecodable sequence; strict UTF-8 decoding never yields a surrogate
codecs.register_error("bettong_nb.mark", _marked)
_UTF8 = codecs.getincrementaldecoder("utf-8")


def _decoded_marked(chunk: bytes, state: tuple, final: bool) -> str:
    """``chunk`` decoded from the decoder ``state`` with each undecodable sequence as _MARK: the
    same characters "replace" gives (one per sequence), but told apart from a U+FFFD that is
    really in the file. A Python call per sequence, so only for the chunks a page shows."""
    decoder = _UTF8("bettong_nb.mark")
    decoder.setstate(state)
    return decoder.decode(chunk, final=final)


def _read_text(fd: int, size: int, shown: str, offset: int, limit: int) -> str:
    head = os.pread(fd, _HEAD_BYTES, 0)
    kind = _binary_kind(head, shown)
    if kind is not None:
        return f"{shown} is a binary file ({size:,} bytes; {kind}); its bytes are not shown."
    # Decoded a chunk at a time and dropped up to the offset, so memory stays a few MB
    # whatever the offset and the file's size. A file no longer than 4 bytes per character
    # up to the window's end is also counted to its end, so its length in characters is known.
    # Counting runs at C speed ("replace" has a fast path; an error handler of our own would be
    # called once per bad sequence: minutes for a file of them); only a chunk the page shows is
    # decoded again, from the same state, with the bad sequences marked.
    count_to_end = size <= 4 * (offset + limit) + 4
    decoder = _UTF8("replace")
    seen = 0  # characters decoded so far
    window: list[str] = []
    wanted = limit
    more = at_end = False
    while not at_end:
        chunk = os.read(fd, _CHUNK_BYTES)
        at_end = not chunk
        state = decoder.getstate()
        text = decoder.decode(chunk, final=at_end)
        if seen + len(text) > offset:
            start = max(0, offset - seen)
            if wanted:
                text = _decoded_marked(chunk, state, at_end)
            piece = text[start:start + wanted]
            window.append(piece)
            wanted -= len(piece)
            more = more or start + len(piece) < len(text)
        seen += len(text)
        if more and not count_to_end:
            break
    if at_end and offset and offset >= seen:
        raise ValueError(f"offset {offset} is past the end of {shown} ({seen} characters)")
    if not seen:
        return "(empty file)"
    shown_text = "".join(window)
    end = offset + len(shown_text)
    notes = []
    replaced = shown_text.count(_MARK)
    if replaced:
        shown_text = shown_text.replace(_MARK, "\ufffd")
        notes.append(f"{shown} is not valid UTF-8: {replaced} undecodable byte sequence(s) are shown as \ufffd.")
    if offset or more:
        whole = f"{seen:,} characters" if at_end else f"a {size:,}-byte file"
        follow = f"call read_file with offset={end} to read more" if more else "that is the end of the file"
        notes.append(f"Showed {len(shown_text):,} characters from offset {offset} of {whole}; {follow}.")
    if notes:
        shown_text += "\n\n[" + " ".join(notes) + "]"
    return shown_text


def _binary_kind(head: bytes, shown: str) -> str | None:
    """A description of the file's type when ``head`` says it is binary, else None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(_UTF16_BOMS) and b"\x00" in head:
        return "looks like UTF-16 text, not UTF-8"
    controls = sum(1 for b in head if b in _CONTROL_BYTES)
    if b"\x00" not in head and controls * 10 <= len(head):
        return None
    import mimetypes  # only needed here; it reads system tables on first use

    guessed, _ = mimetypes.guess_type(shown, strict=False)
    return f"type guessed from the name: {guessed}" if guessed else "type unknown"


def _display_name(name: str) -> str:
    """Names with control characters (a newline would split the listing) are shown JSON-quoted."""
    if name.isprintable():
        return name
    return json.dumps(name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def _whole(value: Any, name: str, *, default: int, minimum: int) -> int:
    """A whole-number argument; models sometimes send "200" or 200.0 for 200."""
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return value


def filesystem(root: str | os.PathLike | None = None, *, writable: bool = False, allow_secrets: bool = False,
               **unknown: Any) -> Filesystem:
    """File tools: ``read_file`` and ``list_dir``, plus ``write_file`` and ``delete_file`` when
    ``writable``. With ``root`` nothing outside it can be reached; credential files are refused
    unless ``allow_secrets``.

        caps.filesystem(root="data", writable=True)
    """
    if "read_only" in unknown:
        raise TypeError("filesystem no longer takes read_only - reading is the default. "
                        "Pass writable=True to allow writes.")
    if unknown:
        raise TypeError(f"filesystem() got unknown option(s) {', '.join(sorted(unknown))}; "
                        "it takes root, writable and allow_secrets")
    return Filesystem(root=root, writable=writable, allow_secrets=allow_secrets)
