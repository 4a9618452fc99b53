"""Every benchmark in one go: ``python -m bench`` (``--quick`` for fewer repeats).

Prints one table: median, min, max (wall), CPU median, the floor measured in the same run, the
ratio to it and the target. Exits 0 even when a target is missed: the table says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time

from .common import table

# module -> keyword arguments of its measure() for a full and a quick run
SUITES = {
    "bench.bench_loop": ({"repeat": 200}, {"repeat": 50}),
    "bench.bench_tracing": ({"repeat": 200}, {"repeat": 50}),
    "bench.bench_parallel": ({"repeat": 10}, {"repeat": 3}),
    "bench.bench_import": ({"repeat": 15}, {"repeat": 5}),
    "bench.bench_redact": ({"repeat": 30}, {"repeat": 10}),
    "bench.bench_sanitize": ({"repeat": 30}, {"repeat": 10}),
    "bench.bench_shell": ({"repeat": 50}, {"repeat": 15}),
    "bench.bench_stream": ({"repeat": 200}, {"repeat": 50}),
    "bench.bench_edn": ({"repeat": 7}, {"repeat": 3}),
    "bench.bench_browser": ({"tokens": 10_000, "turns": 3}, {"tokens": 2_000, "turns": 1}),
    "bench.bench_notebook_agent": ({"repeat": 10}, {"repeat": 3}),
    "bench.bench_dask": ({"repeat": 3}, {"repeat": 1}),
    "bench.bench_frontend": ({"repeat": 20}, {"repeat": 5}),
    "bench.bench_duckdb": ({"repeat": 7}, {"repeat": 2}),
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args()
    rows = []
    for module, (full, quick) in SUITES.items():
        started = time.perf_counter()
        rows += importlib.import_module(module).measure(**(quick if args.quick else full))
        print(f"  {module}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(f"bettong_nb benchmarks, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {platform.machine()}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
