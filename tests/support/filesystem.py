"""Directory trees for the filesystem tests: a snapshot of every entry, and races that swap a
path component while a tool uses it.

    before = snapshot(root); ...; assert snapshot(root) == before
    race(2.0, (place, state_a, state_b), lambda: tally(outcomes, "read", read))
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

__all__ = ["snapshot", "race", "tally", "ACCEPTABLE"]


def snapshot(top: Path) -> dict[str, tuple]:
    """Every entry below ``top``: directories, symlink targets and file bytes."""
    seen: dict[str, tuple] = {}
    start = len(str(top)) + 1

    def walk(directory: str) -> None:
        with os.scandir(directory) as it:
            for entry in it:
                rel = entry.path[start:]
                if entry.is_symlink():
                    seen[rel] = ("link", os.readlink(entry.path))
                elif entry.is_dir():
                    seen[rel] = ("dir",)
                    walk(entry.path)
                else:
                    with open(entry.path, "rb") as f:
                        seen[rel] = ("file", f.read())

    walk(str(top))
    return seen


def _flip(stop: threading.Event, place: Path, *states: Path) -> None:
    """Move each of ``states`` into ``place`` and back, over and over, until stopped.

    A write can create ``place`` as a new directory while it is empty; that one is swept away.
    """
    ours = {os.lstat(state).st_ino for state in states}
    while not stop.is_set():
        for state in states:
            try:
                os.rename(state, place)
                os.rename(place, state)
            except FileNotFoundError:
                pass
            except OSError:
                if os.lstat(place).st_ino not in ours:
                    shutil.rmtree(place, ignore_errors=True)


def race(seconds: float, flipper_args: tuple, body) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=_flip, args=(stop, *flipper_args))
    thread.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            body()
    finally:
        stop.set()
        thread.join()


ACCEPTABLE = ("escapes the allowed root", "No such file", "No such directory", "kept changing", "is not a directory")


def tally(outcomes: dict, kind: str, action) -> None:
    """Run one action of a race: it succeeds without showing outside data, or is refused for a
    reason a race can give. Counts the outcome under ``kind`` or "refused"."""
    try:
        text = action()
    except (OSError, ValueError) as exc:
        assert any(a in str(exc) for a in ACCEPTABLE), str(exc)
        assert "OUTSIDE" not in str(exc)
        outcomes["refused"] += 1
    else:
        assert "OUTSIDE" not in text
        outcomes[kind] += 1
