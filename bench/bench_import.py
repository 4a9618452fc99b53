"""W4: what importing bettong_nb, and loading it into IPython, costs a fresh process.

The floor is the same fresh process doing nothing (interpreter start-up), so the row's median
is the cost on top of it: ``import bettong_nb`` vs ``pass``; ``%load_ext bettong_nb`` is timed
inside a fresh IPython shell, after IPython itself is up, as a kernel would see it.
"""

from __future__ import annotations

import subprocess
import sys
import time

from .common import ROOT, row

LOAD_EXT = """
import time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
started = time.perf_counter()
shell.run_line_magic("load_ext", "bettong_nb")
print(time.perf_counter() - started)
"""


def _wall(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def measure(repeat: int = 15) -> list[dict]:
    ours, floor = [], []
    for _ in range(repeat):
        floor.append(_wall("pass"))
        ours.append(_wall("import bettong_nb"))
    added = [max(0.0, a - b) for a, b in zip(sorted(ours), sorted(floor))]
    load_ext = [float(subprocess.run([sys.executable, "-c", LOAD_EXT], cwd=ROOT, check=True, capture_output=True,
                                     text=True).stdout.strip().splitlines()[-1]) for _ in range(repeat)]
    return [row("W4 import bettong_nb (added to a bare interpreter)", added, None, target=150, target_kind="ms"),
            row("W4 %load_ext bettong_nb in a fresh IPython", load_ext, None, target=120, target_kind="ms")]
