"""Paths confined to a root and resolved through directory descriptors: the one mechanism the
filesystem and EDN capabilities use to reach files.

    root = Root("data", owner="a filesystem capability")
    root.write("notes/today.txt", b"hello")                # atomic; missing directories are made
    root.read("notes/today.txt", lambda fd, info: os.pread(fd, info.st_size, 0))   # b"hello"
    root.rewrite("notes/today.txt", lambda fd, info: os.read(fd, 100).upper())     # one file, found once
    root.list("notes")                                     # ["today.txt"]
    root.unlink("notes/today.txt")
    root.read("../x", ...)                                 # PermissionError: ../x escapes the allowed root data

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
deleting act on its target, and :meth:`Root.list` marks it with "/" when the target is a
directory.

Hard links and mounts are beyond path rules: a hard link to an outside file that someone else
made inside the root is an ordinary file with its own name, and reading it gives the outside
file's content. Writing it replaces the name with a new file (writes are a temp file renamed
into place), so the outside file keeps its content; deleting it removes only the name inside
the root. The same holds for a bind mount of an outside directory.

Credential files are refused unless ``allow_secrets=True``, judged on the resolved path (a
harmless-looking symlink to ``~/.ssh/id_rsa`` is refused; a symlink named ``x.pem`` to an
ordinary file is not) by :func:`bettong_nb.secrets.is_credential_path`, whose
``CREDENTIAL_PATHS`` lists them: SSH and GPG directories and key files, ``*.pem``,
``*.key``, PKCS#12 ``*.p12``/``*.pfx``, PuTTY ``*.ppk``, ``*.jks``/``*.keystore``,
``.env`` files, the AWS, Google Cloud, Azure, Kaggle, Hugging Face and GitHub CLI
credential stores, ``.npmrc``, ``.pypirc``, ``.docker/config.json``, ``.kube/config``,
``.cargo/credentials``, ``.terraformrc``, ``.vault-token``, ``.git-credentials``,
``.netrc``, ``.pgpass``, ``/proc/<pid>/environ`` and ``/proc/<pid>/mem``, at any depth and
in any letter case (case-insensitive filesystems would open them). The directories
themselves (``.ssh``) can still be listed.

Failures raise OSError (or PermissionError, ValueError) with a message for the model that
names the path as it was given: ``No such file: notes.txt``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from .secrets import is_credential_path

__all__ = ["Root", "is_credential_path", "read_up_to", "json_type", "MAX_PATH_BYTES", "MAX_NAME_BYTES"]

MAX_SYMLINK_HOPS = 40  # the kernel's own limit
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_ATTEMPTS = 5  # a path that keeps being swapped under us is given up on after this many tries

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the type check must not hang the open
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

T = TypeVar("T")
Use = Callable[[int, os.stat_result], T]  # called with an open descriptor of a regular file and its fstat


def read_up_to(fd: int, limit: int) -> bytes:
    """The next ``limit`` bytes of ``fd``, fewer only at the end of the file."""
    chunks, got = [], 0
    while got < limit:
        chunk = os.read(fd, min(1 << 20, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def json_type(value: Any) -> str:
    """How a value decoded from the model's JSON is named in a message: ``an object``, ``a number``."""
    return {dict: "an object", list: "an array", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


class _Changed(Exception):
    """The path was swapped while in use; the operation starts over."""


def _split(path: str) -> list[str]:
    """Path components; a trailing "/" or "/." becomes a final "." meaning "must be a directory"."""
    parts = [p for p in path.split("/") if p and p != "."]
    if parts and parts[-1] != ".." and (path.endswith("/") or path.endswith("/.")):
        parts.append(".")
    return parts


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


class Root:
    """Files below ``root`` (everywhere when it is None); ``owner`` names the capability in
    the credential refusal ("Only a filesystem capability built with allow_secrets=True ...")."""

    def __init__(self, root: str | os.PathLike | None = None, *, allow_secrets: bool = False,
                 owner: str = "a capability") -> None:
        self.root = root
        self.allow_secrets = allow_secrets
        self.owner = owner
        # The root is pinned now, so a later chdir cannot move it.
        self._root_abs = None if root is None else os.path.abspath(os.path.expanduser(os.fspath(root)))

    # --- operations ---------------------------------------------------------------------------

    def read(self, path: Any, use: Use[T], *, directory_note: str = "it is a directory") -> T:
        """``use(fd, info)`` on the regular file at ``path``, opened for reading; what it returns.

        ``directory_note`` ends the message when ``path`` is a directory: ``No such file: x (<note>)``.
        """
        return self._run(path, "read", lambda place: _use_file(place, path, directory_note, use))

    def rewrite(self, path: Any, change: Use[bytes], *, directory_note: str = "it is a directory") -> None:
        """Replace the regular file at ``path`` with ``change(fd, info)`` atomically, keeping its mode.

        The file is found once, so what ``change`` reads is the file that is replaced. Nothing
        is written when ``change`` raises.
        """

        def attempt(place: _Place) -> None:
            data, info = _use_file(place, path, directory_note, lambda fd, info: (change(fd, info), info))
            _atomic_write(place.dir_fd, place.name, data, info)

        self._run(path, "write", attempt)

    def write(self, path: Any, data: bytes) -> None:
        """Create or replace the file at ``path`` atomically, making missing parent directories."""

        def attempt(place: _Place) -> None:
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

        self._run(path, "write", attempt)

    def unlink(self, path: Any, *, directory_note: str = "it is a directory") -> None:
        """Delete the file at ``path`` (not a directory)."""

        def attempt(place: _Place) -> None:
            mode = _mode(place)
            if mode is None:
                raise FileNotFoundError(f"No such file: {path}{_why_missing(place)}")
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(f"No such file: {path} ({directory_note})")
            try:
                os.unlink(place.name, dir_fd=place.dir_fd)  # unlinkat never follows a symlink
            except FileNotFoundError:
                raise FileNotFoundError(f"No such file: {path}") from None
            except IsADirectoryError:
                raise _Changed from None

        self._run(path, "delete", attempt)

    def list(self, path: Any, *, file_note: str = "it is a file") -> list[str]:
        """The names in the directory at ``path``, sorted; a directory's name ends in "/"."""

        def attempt(place: _Place) -> list[str]:
            if place.missing:
                raise FileNotFoundError(f"No such directory: {path}{_why_missing(place)}")
            if place.name is None:
                return self._entries(place.dir_fd, place.names)
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
                raise NotADirectoryError(f"No such directory: {path} ({file_note})") from None
            try:
                return self._entries(fd, [*place.names, place.name])
            finally:
                os.close(fd)

        return self._run(path, "list", attempt)

    # --- resolution ---------------------------------------------------------------------------

    def _run(self, path: Any, verb: str, attempt: Callable[[_Place], T]) -> T:
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
                raise OSError(f"Cannot {verb} {path}: {exc.strerror or exc}") from None
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

    def _entries(self, fd: int, names: list[str]) -> list[str]:
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                is_dir = entry.is_dir(follow_symlinks=False) or (
                    entry.is_symlink() and self._leads_to_directory([*names, entry.name]))
                entries.append(entry.name + "/" if is_dir else entry.name)
        return sorted(entries)

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
        return text + f". Only {self.owner} built with allow_secrets=True may touch credential files."


def _use_file(place: _Place, shown: str, directory_note: str, use: Use[T]) -> T:
    mode = _mode(place)
    if mode is None:
        raise FileNotFoundError(f"No such file: {shown}{_why_missing(place)}")
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"No such file: {shown} ({directory_note})")
    if not stat.S_ISREG(mode):
        # FIFOs and devices can block or have side effects when opened.
        raise OSError(f"Cannot read {shown}: it is not a regular file (a device, FIFO or socket)")
    try:
        fd = os.open(place.name, _FILE_FLAGS, dir_fd=place.dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(f"No such file: {shown}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Changed from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Changed
        return use(fd, info)
    finally:
        os.close(fd)


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
    and never follows it. The data reaches the disk before the rename, so a crash cannot leave
    an empty file in place of the old one.
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
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _check_path(path: Any) -> None:
    if path is None or (isinstance(path, str) and not path.strip()):
        raise ValueError("path must not be blank")
    if not isinstance(path, str):
        raise ValueError(f"path must be a string, not {json_type(path)}")
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
