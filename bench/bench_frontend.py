"""The notebook bridge's round trip, measured in real JupyterLab and Chromium.

    python -m bench.bench_frontend           # needs /usr/bin/chromium and playwright

A 300-cell notebook (Markdown, code with stream and result outputs, a small PNG every 20th cell,
some 0.2 MB of JSON) is opened in JupyterLab; a cell of it awaits ``fe.cells()`` repeatedly and
times each call in the kernel: the request on the comm, the page serialising every cell, the
answer back over the websocket and decoded. Without Chromium or Playwright the row is skipped,
and the reason printed.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
from pathlib import Path

from .common import ROOT, row

__all__ = ["measure", "CELLS"]

CELLS = 300


def filler_cells(count: int) -> list:
    """``count`` cells of an ordinary data notebook: headings, code with text outputs, now and
    then a ~5 kB image."""
    import nbformat

    png = base64.b64encode(bytes.fromhex("89504e470d0a1a0a") + os.urandom(4000)).decode()
    out = []
    for i in range(count):
        if i % 3 == 0:
            out.append(nbformat.v4.new_markdown_cell(f"## Step {i}\n\nWe look at *part {i}* of the data, " * 3))
            continue
        outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"row {i}: " + "x" * 200 + "\n"),
                   nbformat.v4.new_output("execute_result", data={"text/plain": repr(list(range(i % 40)))},
                                          execution_count=i)]
        if i % 20 == 1:
            outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}))
        out.append(nbformat.v4.new_code_cell(f"df_{i} = load({i})\ndf_{i}.describe()\n" * 2, outputs=outputs,
                                             execution_count=i))
    return out


def write_notebook(path: Path, cells: list) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _notebook(path: Path, cells: int) -> None:
    import nbformat

    # the driver first: a windowed notebook renders only what is in view
    write_notebook(path, [nbformat.v4.new_code_cell("# driver"), *filler_cells(cells - 1)])


def unavailable() -> str | None:
    if not os.path.exists("/usr/bin/chromium"):
        return "/usr/bin/chromium is missing"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def run(cells: int = CELLS, repeat: int = 20) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.bridge_driver import Driver
    from support.browser import JupyterLab, chromium, open_notebook

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        _notebook(root / "big.ipynb", cells)
        lab = JupyterLab(root, Path(tmp) / "state").start()
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                open_notebook(page, lab, "big.ipynb")
                return Driver(page, Path(tmp) / "results").run(f"""
                    import json, time
                    fe = await frontend.connect()
                    for _ in range(3):
                        await fe.cells()  # warm up both sides
                    walls = []
                    for _ in range({repeat}):
                        t = time.perf_counter()
                        got = await fe.cells()
                        walls.append(time.perf_counter() - t)
                    result = {{"walls": walls, "cells": len(got), "bytes": len(json.dumps(got))}}
                """, timeout=120)
        finally:
            lab.stop()


def measure(repeat: int = 20, cells: int = CELLS) -> list[dict]:
    why = unavailable()
    if why is not None:
        print(f"  bench.bench_frontend: skipped: {why}", file=sys.stderr)
        return []
    m = run(cells, repeat)
    print(f"  bench.bench_frontend: cells() of {m['cells']} cells, {m['bytes'] / 1e6:.2f} MB of JSON", file=sys.stderr)
    return [row(f"F1 notebook bridge: cells() of a {cells}-cell notebook, round trip", m["walls"], None,
                target=300, target_kind="ms")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_frontend")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cells", type=int, default=CELLS)
    args = parser.parse_args()
    from .common import table

    print(table(measure(args.repeat, args.cells)))
