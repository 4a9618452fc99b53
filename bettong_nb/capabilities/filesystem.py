"""The filesystem capability: read and list files, and write them only when asked.

    from bettong_nb import capabilities as caps

    caps.filesystem()                            # read anywhere except credential files
    caps.filesystem(root="data")                 # read only below data/
    caps.filesystem(root="data", writable=True)  # also write_file and delete_file

    fs = caps.filesystem(root="data", writable=True)
    fs.write_file("notes/today.txt", "hello")    # the handlers work from Python too
    fs.read_file("notes/today.txt")              # "hello"

Paths. With a root, relative paths start at the root and an absolute path is accepted when
it names a place below the root (spelled as given or as its canonical path). Without a root,
paths are used as given, relative paths against the current directory.

Confinement. A path is resolved one component at a time from an open descriptor of the root
(``openat`` with ``O_NOFOLLOW``), never by comparing strings of resolved paths, so nothing
can slip out between a check and the use:

* ``..`` steps back along the descriptors already opened and is refused at the root itself,
  even when the rest of the path would come back in (``../root/a.txt``).
* A symlink is followed by hand (at most 40 hops): a relative target continues from the
  symlink's directory, an absolute target must lie below the root, spelled as the root was
  given or canonically. Targets that leave the root — directly, through a chain, dangling,
  or ``/`` — are refused.
* The final open, unlink or rename is done relative to the directory descriptor and never
  follows a symlink, so a component swapped for a symlink mid-call cannot redirect it.
* Refusals say the path "escapes the allowed root".

A symlink that stays inside the root is followed for every operation: reading, writing and
deleting act on its target, and ``list_dir`` marks it with "/" when the target is a directory.

Hard links and mounts are beyond path rules: a hard link to an outside file that someone else
made inside the root is an ordinary file with its own name, and ``read_file`` returns the
outside file's content. Writing it replaces the name with a new file (writes are a temp file
renamed into place), so the outside file keeps its content; deleting it removes only the
name inside the root. The same holds for a bind mount of an outside directory.

Credential files are refused unless ``allow_secrets=True``, judged on the resolved path (a
harmless-looking symlink to ``~/.ssh/id_rsa`` is refused; a symlink named ``x.pem`` to an
ordinary file is not): anything under ``.ssh/`` or ``.gnupg/``, ``.aws/credentials``,
``.env`` and ``.env.*``, ``*.pem``, ``*.key``, ``*.p12``, ``.netrc``, ``.npmrc``, ``.pypirc``,
``.git-credentials``, ``id_rsa*``, ``id_dsa*``, ``id_ecdsa*``, ``id_ed25519*``,
``.docker/config.json``, ``.kube/config`` and ``/proc/<pid>/environ``, at any depth and in
any letter case (case-insensitive filesystems would open them). The directories themselves
(``.ssh``) can still be listed.

Results. Every message names the path as the model gave it: ``Wrote 5 bytes to notes.txt``,
``Deleted notes.txt``, ``No such file: notes.txt``. ``write_file`` creates missing parent
directories (inside the root, through descriptors) unless the missing part contains ``..``.
``read_file`` returns at most 100 000 characters per call with a bracketed note on how to
read on (``offset``/``limit``, counted in characters), describes binary files instead of
dumping them, replaces bytes that are not UTF-8 with U+FFFD and says so, and answers
``(empty file)`` for an empty one. ``list_dir`` shows at most 1000 entries; names holding
control characters are shown JSON-quoted.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from ..capability import Tool

__all__ = ["filesystem", "Filesystem", "is_credential_path", "MAX_READ_CHARS", "MAX_LIST_ENTRIES"]

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 1000
MAX_SYMLINK_HOPS = 40  # the kernel's own limit
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_ATTEMPTS = 5  # a path that keeps being swapped under us is given up on after this many tries
_HEAD_BYTES = 8192

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_CREDENTIAL = re.compile(
    r"/\.ssh/|/\.gnupg/|/\.aws/credentials"
    r"|/\.env(?:\.|$)"
    r"|\.(?:pem|key|p12)$"
    r"|/\.(?:netrc|npmrc|pypirc|git-credentials)$"
    r"|/id_(?:rsa|dsa|ecdsa|ed25519)"
    r"|/\.docker/config\.json$|/\.kube/config$"
    r"|^/proc/[^/]+/(?:task/[^/]+/)?environ$",
    re.IGNORECASE,
)

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


def is_credential_path(path: str) -> bool:
    """True when the absolute, resolved ``path`` looks like a credential file.

    ``is_credential_path("/home/u/.ssh/id_rsa")`` is True; ``"/home/u/.ssh"`` (the directory
    itself) and ``"/srv/environment.md"`` are not.
    """
    return bool(_CREDENTIAL.search(path))


class _Changed(Exception):
    """The path was swapped while in use; the operation starts over."""


def _split(path: str) -> list[str]:
    """Path components; a trailing "/" or "/." becomes a final "." meaning "must be a directory"."""
    parts = [p for p in path.split("/") if p and p != "."]
    if parts and parts[-1] != ".." and (path.endswith("/") or path.endswith("/.")):
        parts.append(".")
    return parts


def _os_message(exc: OSError) -> str:
    return exc.strerror or str(exc)


@dataclass
class _Place:
    """Where a path led: open directory descriptors down to the directory holding ``name``."""

    stack: list[int]  # stack[0] is the base (the root, or "/" without one)
    names: list[str] = field(default_factory=list)  # components of stack[-1] below the base
    name: str | None = None  # the final component; None when the path is the directory itself
    missing: list[str] = field(default_factory=list)  # from the first component that is not there
    not_dir: str | None = None  # a component that is a file but was walked through
    followed: bool = False  # a symlink was followed on the way

    @property
    def dir_fd(self) -> int:
        return self.stack[-1]

    def close(self) -> None:
        while self.stack:
            os.close(self.stack.pop())

    def __enter__(self) -> "_Place":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
        # The root is pinned when the capability is built, so a later chdir cannot move it.
        self._root_abs = None if self.root is None else os.path.abspath(os.path.expanduser(os.fspath(self.root)))
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
                handler=self.read_file,
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
                Tool(
                    name="write_file",
                    handler=self.write_file,
                    description="Create or overwrite a file with text (UTF-8), creating missing parent directories.",
                    parameters={"path": path,
                                "content": {"type": "string", "description": "The whole new content.",
                                            "required": True}},
                ),
                Tool(
                    name="delete_file",
                    handler=self.delete_file,
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

        def attempt(place: _Place) -> str:
            mode = _mode(place)
            if mode is None:
                raise FileNotFoundError(f"No such file: {path}{_why_missing(place)}")
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(f"No such file: {path} (it is a directory; use list_dir)")
            if not stat.S_ISREG(mode):
                # FIFOs and devices can block or have side effects when opened.
                raise OSError(f"Cannot read {path}: it is not a regular file (a device, FIFO or socket)")
            try:
                fd = os.open(place.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=place.dir_fd)
            except FileNotFoundError:
                raise FileNotFoundError(f"No such file: {path}") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _Changed from None
                raise
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise _Changed
                return _read_text(fd, info.st_size, path, start, count)
            finally:
                os.close(fd)

        return self._run(path, "read", attempt)

    def list_dir(self, path: str | None = None) -> str:
        """Entries of a directory, one a line, directories ending in "/", sorted."""
        path = "." if path is None else path

        def attempt(place: _Place) -> str:
            if place.missing:
                raise FileNotFoundError(f"No such directory: {path}{_why_missing(place)}")
            if place.name is None:
                return self._listing(place.dir_fd, place.names)
            try:
                fd = os.open(place.name, _DIR_FLAGS, dir_fd=place.dir_fd)
            except FileNotFoundError:
                raise FileNotFoundError(f"No such directory: {path}") from None
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                mode = _mode(place)
                if mode is None or stat.S_ISDIR(mode):
                    raise _Changed from None
                raise NotADirectoryError(f"No such directory: {path} (it is a file; use read_file)") from None
            try:
                return self._listing(fd, [*place.names, place.name])
            finally:
                os.close(fd)

        return self._run(path, "list", attempt)

    def write_file(self, path: str | None = None, content: str | None = None) -> str:
        """Create or replace a file atomically; returns ``Wrote <N> bytes to <path>``."""
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ValueError(f"content must be a string, not {_json_type(content)}; write JSON as text")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("content is not valid Unicode text (it holds a lone surrogate)") from None

        def attempt(place: _Place) -> str:
            name = self._make_parents(place, path) if place.missing else place.name
            if name is None:
                raise IsADirectoryError(f"Cannot write {path}: it is a directory")
            try:
                info = os.stat(name, dir_fd=place.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise _Changed
            if info is not None and stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(f"Cannot write {path}: it is a directory")
            _atomic_write(place.dir_fd, name, data, info)
            return f"Wrote {len(data)} bytes to {path}"

        return self._run(path, "write", attempt)

    def delete_file(self, path: str | None = None) -> str:
        """Delete one file; returns ``Deleted <path>``."""

        def attempt(place: _Place) -> str:
            mode = _mode(place)
            if mode is None:
                raise FileNotFoundError(f"No such file: {path}{_why_missing(place)}")
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(f"No such file: {path} (it is a directory; delete_file only deletes files)")
            try:
                os.unlink(place.name, dir_fd=place.dir_fd)  # unlinkat never follows a symlink
            except FileNotFoundError:
                raise FileNotFoundError(f"No such file: {path}") from None
            except IsADirectoryError:
                raise _Changed from None
            return f"Deleted {path}"

        return self._run(path, "delete", attempt)

    # --- resolution ---------------------------------------------------------------------------

    def _run(self, path: Any, verb: str, attempt: Callable[[_Place], str]) -> str:
        _check_path(path)
        for _ in range(_ATTEMPTS):
            try:
                with self._resolve(path) as place:
                    return attempt(place)
            except _Changed:
                continue
            except OSError as exc:
                if exc.errno is None:  # one of ours, already worded for the model
                    raise
                if exc.errno == errno.ENAMETOOLONG:
                    raise OSError(f"Cannot {verb} {path}: a file name on the way is too long") from None
                raise OSError(f"Cannot {verb} {path}: {_os_message(exc)}") from None
        raise OSError(f"Cannot {verb} {path}: it kept changing while being resolved; try again")

    def _resolve(self, path: str) -> _Place:
        """Walk ``path`` and run the containment and credential checks on where it leads."""
        if self._root_abs is None:
            parts = _split(path) if path.startswith("/") else _split(os.getcwd()) + _split(path)
            base = "/"
        else:
            base = self._root_abs
            if path.startswith("/"):
                inside = self._below_root(path)
                if inside is None:
                    raise PermissionError(self._escape(path))
                parts = inside
            else:
                parts = _split(path)
        try:
            base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(f"The allowed root {os.fspath(self.root)} is not an existing directory") from None
        place = _Place([base_fd])
        try:
            self._walk(place, parts, path)
            resolved = self._canonical(place, path)
            if not self.allow_secrets and is_credential_path(resolved):
                raise PermissionError(self._credential(path, place, resolved))
        except BaseException:
            place.close()
            raise
        return place

    def _walk(self, place: _Place, parts: list[str], shown: str) -> None:
        pending = deque(parts)
        hops = 0
        via: tuple[str, str, int] | None = None  # the last symlink followed, and what was left after it
        while pending:
            part = pending.popleft()
            if part == ".":
                continue
            if part == "..":
                if len(place.stack) > 1:
                    os.close(place.stack.pop())
                    place.names.pop()
                elif self._root_abs is not None:
                    inside_link = via is not None and len(pending) >= via[2]
                    raise PermissionError(self._escape(shown, *(via[:2] if inside_link else ())))
                continue  # "/.." is "/"
            if pending:  # not the last component: it must be a directory to go on
                try:
                    fd = os.open(part, _DIR_FLAGS, dir_fd=place.dir_fd)
                except FileNotFoundError:
                    place.missing = [part, *pending]
                    return
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    target = _readlink(place.dir_fd, part)
                    if target is None:
                        if not _is_non_directory(place.dir_fd, part):
                            raise _Changed  # a directory again, or gone, since the open
                        place.missing, place.not_dir = [part, *pending], "/".join([*place.names, part])
                        return
                else:
                    place.stack.append(fd)
                    place.names.append(part)
                    continue
            else:
                target = _readlink(place.dir_fd, part)
                if target is None:
                    place.name = part
                    return
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise OSError(f"Cannot resolve {shown}: too many levels of symbolic links (a symlink loop?)")
            link = "/".join([*place.names, part])
            via = (link, target, len(pending))
            place.followed = True
            if target.startswith("/"):
                inside = self._below_root(target) if self._root_abs is not None else _split(target)
                if inside is None:
                    raise PermissionError(self._escape(shown, link, target))
                while len(place.stack) > 1:
                    os.close(place.stack.pop())
                place.names.clear()
                pending.extendleft(reversed(inside))
            else:
                pending.extendleft(reversed(_split(target)))

    def _below_root(self, path: str) -> list[str] | None:
        """The components of an absolute ``path`` below the root, or None when it is not below it."""
        parts = _split(path)
        for spelling in {self._root_abs, os.path.realpath(self._root_abs)}:
            prefix = _split(spelling)
            if parts[: len(prefix)] == prefix:
                return parts[len(prefix):]
        return None

    def _canonical(self, place: _Place, shown: str) -> str:
        """The absolute path ``place`` stands for; the part that does not exist is taken as written."""
        parts = list(place.names)
        for part in place.missing or ([place.name] if place.name else []):
            if part == ".":
                continue
            if part != "..":
                parts.append(part)
            elif parts:
                parts.pop()
            elif self._root_abs is not None:
                raise PermissionError(self._escape(shown))
        base = "/" if self._root_abs is None else os.path.realpath(self._root_abs)
        return os.path.join(base, *parts)

    def _make_parents(self, place: _Place, shown: str) -> str:
        """Create the missing directories of a write, through descriptors; returns the file name."""
        if place.not_dir:
            raise NotADirectoryError(f"Cannot write {shown}: {place.not_dir} is not a directory")
        if ".." in place.missing:
            raise FileNotFoundError(f"No such directory: {shown} (.. follows a directory that does not exist)")
        *dirs, name = place.missing
        if name == ".":
            raise IsADirectoryError(f"Cannot write {shown}: a path ending in / names a directory")
        for part in dirs:
            try:
                os.mkdir(part, dir_fd=place.dir_fd)
            except FileExistsError:
                pass  # made by someone else meanwhile; opened and checked below like any other
            try:
                fd = os.open(part, _DIR_FLAGS, dir_fd=place.dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
                    raise _Changed from None
                raise
            place.stack.append(fd)
            place.names.append(part)
        place.missing = []
        return name

    def _listing(self, fd: int, names: list[str]) -> str:
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                is_dir = entry.is_dir(follow_symlinks=False) or (
                    entry.is_symlink() and self._leads_to_directory([*names, entry.name]))
                entries.append(entry.name + "/" if is_dir else entry.name)
        if not entries:
            return "(empty directory)"
        entries.sort()
        lines = [_display_name(e) for e in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"({len(entries) - MAX_LIST_ENTRIES} more entries not shown; {len(entries)} in all)")
        return "\n".join(lines)

    def _leads_to_directory(self, names: list[str]) -> bool:
        """Whether a symlink found while listing leads to a directory the tools may enter."""
        shown = "/".join(names) if self._root_abs is not None else "/" + "/".join(names)
        try:
            with self._resolve(shown) as place:
                if place.missing:
                    return False
                if place.name is None:
                    return True
                return stat.S_ISDIR(os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False).st_mode)
        except (OSError, ValueError, _Changed):
            return False

    # --- messages -----------------------------------------------------------------------------

    def _escape(self, shown: str, link: str | None = None, target: str | None = None) -> str:
        text = f"{shown} escapes the allowed root {os.fspath(self.root)}"
        if link is not None:
            text += f" (the symlink {link} points to {target})"
        return text

    def _credential(self, shown: str, place: _Place, resolved: str) -> str:
        text = f"refusing to touch a credential file: {shown}"
        if place.followed:
            if self._root_abs is not None:
                resolved = os.path.relpath(resolved, os.path.realpath(self._root_abs))
            text += f" (it resolves to {resolved})"
        return text + ". Only a filesystem capability built with allow_secrets=True may touch credential files."


def _readlink(dir_fd: int, name: str) -> str | None:
    """The symlink's target, or None when ``name`` is not a symlink (or not there)."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _is_non_directory(dir_fd: int, name: str) -> bool:
    try:
        return not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _mode(place: _Place) -> int | None:
    """The file type and mode where ``place`` leads, None when nothing is there."""
    if place.missing:
        return None
    if place.name is None:
        return stat.S_IFDIR
    try:
        mode = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):  # it was not a symlink a moment ago, when the path was walked
        raise _Changed
    return mode


def _why_missing(place: _Place) -> str:
    return f" ({place.not_dir} is not a directory)" if place.not_dir else ""


def _atomic_write(dir_fd: int, name: str, data: bytes, existing: os.stat_result | None) -> None:
    """Write into a temp file in the same directory and rename it over ``name``.

    Readers see the old content or the new, never a part; rename replaces whatever ``name`` is
    and never follows it.
    """
    temp = f".bettong-{os.urandom(6).hex()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                 dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))  # overwriting keeps the file's mode
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _read_text(fd: int, size: int, shown: str, offset: int, limit: int) -> str:
    head = os.pread(fd, _HEAD_BYTES, 0)
    kind = _binary_kind(head, shown)
    if kind is not None:
        return f"{shown} is a binary file ({size:,} bytes; {kind}); its bytes are not shown."
    # A character takes at most 4 bytes, so this many bytes always covers the window asked for.
    budget = 4 * (offset + limit) + 4
    chunks, got = [], 0
    while got < budget:
        chunk = os.read(fd, min(1 << 20, budget - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    at_end = got < budget or not os.read(fd, 1)
    data = b"".join(chunks)
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=at_end)
    if at_end and offset and offset >= len(text):
        raise ValueError(f"offset {offset} is past the end of {shown} ({len(text)} characters)")
    if not text:
        return "(empty file)"
    window = text[offset:offset + limit]
    end = offset + len(window)
    notes = []
    replaced = text.count("\ufffd") - data.count("\ufffd".encode())
    if replaced:
        notes.append(f"{shown} is not valid UTF-8: {replaced} undecodable byte sequence(s) are shown as \ufffd.")
    if offset or end < len(text) or not at_end:
        whole = f"{len(text):,} characters" if at_end else f"a {size:,}-byte file"
        more = f"call read_file with offset={end} to read more" if end < len(text) or not at_end \
            else "that is the end of the file"
        notes.append(f"Showed {len(window):,} characters from offset {offset} of {whole}; {more}.")
    if notes:
        window += "\n\n[" + " ".join(notes) + "]"
    return window


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


def _check_path(path: Any) -> None:
    if path is None or (isinstance(path, str) and not path.strip()):
        raise ValueError("path must not be blank")
    if not isinstance(path, str):
        raise ValueError(f"path must be a string, not {_json_type(path)}")
    if "\x00" in path:
        raise ValueError(f"path {path!r} contains a NUL byte, which no file name can hold")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"path {path!r} is not valid Unicode text (it holds a lone surrogate)") from None
    if size > MAX_PATH_BYTES:
        raise ValueError(f"path is too long: {size} bytes, the limit is {MAX_PATH_BYTES}")
    for part in path.split("/"):
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise ValueError(f"path has a name that is too long: {part[:24]}... is {len(part.encode('utf-8'))} "
                             f"bytes, the limit is {MAX_NAME_BYTES}")


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


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


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
