"""Shared benchmark plumbing: timing with CPU time, the mock server process, result rows."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent


def sample(fn: Callable[[], object], repeat: int, warmup: int = 3) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return walls, cpus


def row(name: str, walls: list[float], cpus: list[float] | None, *, floor: list[float] | None = None,
        floor_cpus: list[float] | None = None, target: float, target_kind: str, scale: float = 1e3,
        unit: str = "ms") -> dict:
    """A result row. ``target_kind`` "ratio" compares the median with the floor's, "ms" is absolute
    (at most), "at least" is a rate that must reach the target (MB/s: higher is better). With
    ``floor_cpus`` the ratio is of CPU medians (the floor column shows the floor's CPU)."""
    median = statistics.median(walls) * scale
    cpu_median = statistics.median(cpus) * scale if cpus else None
    if floor_cpus:
        floor_median = statistics.median(floor_cpus) * scale
        ratio = cpu_median / floor_median
    else:
        floor_median = statistics.median(floor) * scale if floor else None
        ratio = median / floor_median if floor_median else None
    return {"name": name, "unit": unit, "median": median, "min": min(walls) * scale, "max": max(walls) * scale,
            "cpu_median": cpu_median, "floor_median": floor_median, "ratio": ratio, "target": target,
            "target_kind": target_kind}


@contextlib.contextmanager
def mock_server(latency: float = 0.0, calls: int = 1) -> Iterator[str]:
    """The mock model server in its own process (its CPU is not billed to the client); ``calls``
    tool calls in the step that asks for tools."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.mock_server", "--latency", str(latency),
                             "--calls", str(calls)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"mock server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(5)


def passed(r: dict) -> bool:
    if r["target_kind"] == "at least":
        return r["median"] >= r["target"]
    value = r["ratio"] if r["target_kind"] == "ratio" else r["median"]
    return value is not None and value <= r["target"]


def table(rows: list[dict]) -> str:
    head = f"| {'workload':<52} | median | min | max | cpu median | floor | ratio | target | ok |"
    lines = [head, "|" + "---|" * 9]
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    for r in rows:
        target = {"ratio": f"<= {r['target']}x", "at least": f">= {r['target']} {r['unit']}"}.get(
            r["target_kind"], f"<= {r['target']} {r['unit']}")
        lines.append(f"| {r['name']:<52} | {fmt(r['median'])} {r['unit']} | {fmt(r['min'])} | {fmt(r['max'])} | "
                     f"{fmt(r['cpu_median'])} | {fmt(r['floor_median'])} | {fmt(r['ratio'])} | {target} | "
                     f"{'yes' if passed(r) else 'NO'} |")
    return "\n".join(lines)
