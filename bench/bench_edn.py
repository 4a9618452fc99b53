"""W7: EDN reads and edits on a 5 MB realistic file, in MB/s (``python -m bench.bench_edn``).

The file is ``bench/edn_workload.py``'s document of 5,000,000 characters (seeded, so the same
in every run): a config section, 200 services and about 10,600 events with nested maps,
vectors, sets, lists, keywords, namespaced keywords, strings with escapes, ratios, decimals,
chars, ``#inst``/``#uuid`` literals, ``#_`` discards and comments. Both rows act on a key of
the last event (near the end of the file):

* **read**: ``edn.get_in_file(path, [":events", n, ":payload", ":ratio"])``.
* **edit**: ``edn.set_in_file`` of the same key, alternating two values so that every call
  changes the file: the value's text is spliced in, the seam read back and checked, the
  file's new data read (it is the return value) and the file replaced atomically.

A row's figures are the file's size in MB divided by the seconds one call takes (wall time;
``cpu median`` by CPU time), so higher is better: the median must reach the target.
"""

from __future__ import annotations

import os
import tempfile

from bettong_nb import edn

from .common import row, sample
from .edn_workload import generate, near_end_path

__all__ = ["measure"]

SIZE = 5_000_000
READ_TARGET_MB_S = 5.0
EDIT_TARGET_MB_S = 2.0


def _rates(seconds: list[float], megabytes: float) -> list[float]:
    return [megabytes / s for s in seconds]


def measure(repeat: int = 7) -> list[dict]:
    text = generate(SIZE)
    keys = near_end_path(text)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "data.edn")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        megabytes = os.path.getsize(path) / 1e6
        old = edn.dumps(edn.get_in_file(path, keys))
        values = ["1/2", "3/4"]
        calls = iter(range(repeat + 1))
        read_walls, read_cpus = sample(lambda: edn.get_in_file(path, keys), repeat, warmup=1)
        edit_walls, edit_cpus = sample(lambda: edn.set_in_file(path, keys, values[next(calls) % 2]), repeat, warmup=1)
        with open(path, encoding="utf-8", newline="") as f:
            edited = f.read()
    # the last event's :ratio is the last in the file, and only its text changed
    head, found, tail = text.rpartition(":ratio " + old)
    assert found and edited == head + ":ratio " + values[repeat % 2] + tail, "an edit changed more than its value"
    name = f"W7 EDN, {megabytes:.1f} MB file, key near the end:"
    return [
        row(f"{name} edn.get_in_file", _rates(read_walls, megabytes), _rates(read_cpus, megabytes),
            target=READ_TARGET_MB_S, target_kind="at least", scale=1, unit="MB/s"),
        row(f"{name} edn.set_in_file (verified splice)", _rates(edit_walls, megabytes), _rates(edit_cpus, megabytes),
            target=EDIT_TARGET_MB_S, target_kind="at least", scale=1, unit="MB/s"),
    ]


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
