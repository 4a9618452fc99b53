"""The agent in the notebook, measured in real JupyterLab and Chromium.

    python -m bench.bench_notebook_agent     # needs /usr/bin/chromium and playwright

A 300-cell notebook (Markdown, code with stream and result outputs, a small PNG every 20th cell)
is opened in JupyterLab. Two figures:

* **list_cells**: the tool's round trip as the model's call makes it, timed in the kernel: the
  request on the comm, the page serialising every cell, the answer back, the listing made;
* **Accept -> page**: from the click on Accept to the edited source in the page's editor, and
  to the animation frame that paints it (observed in the page, one clock), for a
  ``%%agent --notebook`` cell whose scripted model proposes one edit per turn.

Without Chromium or Playwright the rows are skipped, and the reason printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from .bench_frontend import filler_cells, unavailable, write_notebook
from .common import ROOT, row

__all__ = ["measure", "CELLS"]

CELLS = 300


# Clicks Accept and times, on the page's clock, the click to the mutation of the target cell's
# editor that shows the edit, and to the next animation frame (the one that paints it).
ACCEPT_TIMED = """(button, want) => new Promise((done, fail) => {
    const editor = document.querySelectorAll('.jp-Notebook .jp-Cell')[2].querySelector('.cm-content');
    let started;
    const give_up = setTimeout(() => { watch.disconnect(); fail(new Error(`the editor never showed ${want}`)); },
                               30000);
    const watch = new MutationObserver(() => {
        if (editor.innerText.trim() !== want) return;
        const shown = performance.now();
        watch.disconnect();
        clearTimeout(give_up);
        requestAnimationFrame(() => done([(shown - started) / 1000, (performance.now() - started) / 1000]));
    });
    watch.observe(editor, {childList: true, subtree: true, characterData: true});
    started = performance.now();
    button.click();
})"""


def _notebook(path: Path, cells: int, edits: int) -> None:
    import nbformat

    turns = [[("edit_cell", {"cell_id": "target", "source": f"v = {n + 1}"})] for n in range(edits)] + ["done"]
    setup = ("%load_ext bettong_nb\nimport bettong_nb\nfrom bettong_nb.providers.scripted import Scripted\n"
             f"bot = bettong_nb.agent(provider=Scripted({turns!r}))")
    out = [nbformat.v4.new_code_cell("# driver"), nbformat.v4.new_code_cell(setup),
           nbformat.v4.new_code_cell("v = 0"), nbformat.v4.new_code_cell("%%agent bot --notebook\nedit")]
    out[2].id = "target"
    write_notebook(path, out + filler_cells(cells - len(out)))


def run(cells: int = CELLS, repeat: int = 10) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.bridge_driver import Driver
    from support.browser import JupyterLab, cell, chromium, open_notebook, run_cell, wait_idle

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        _notebook(root / "big.ipynb", cells, repeat)
        lab = JupyterLab(root, Path(scratch) / "state").start()
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                open_notebook(page, lab, "big.ipynb")
                run_cell(page, 1)
                wait_idle(page, 1)
                listed = Driver(page, Path(scratch) / "results").run(f"""
                    import time
                    from bettong_nb import capabilities as caps
                    cap = caps.notebook()
                    await cap.list_cells()  # the first connects
                    result = []
                    for _ in range({repeat}):
                        started = time.perf_counter()
                        text = await cap.list_cells()
                        result.append(time.perf_counter() - started)
                    assert text.startswith("{cells} cells"), text[:200]
                """, timeout=120)
                accepted = []
                run_cell(page, 3)
                editor = cell(page, 2).locator(".cm-content")
                for n in range(repeat):
                    # The one proposal waiting: a decided one keeps its disabled buttons a moment
                    # after its edit shows, and a click on those would change nothing.
                    button = page.locator(".bettong-proposal").get_by_role("button", name="Accept", exact=True,
                                                                           disabled=False)
                    button.wait_for(timeout=30_000)
                    accepted.append(button.evaluate(ACCEPT_TIMED, f"v = {n + 1}"))
                wait_idle(page, 3)
                assert editor.inner_text().strip() == f"v = {repeat}"
        finally:
            lab.stop()
    return {"listed": listed, "accepted": accepted}


def measure(cells: int = CELLS, repeat: int = 10) -> list[dict]:
    why = unavailable()
    if why is not None:
        print(f"  bench.bench_notebook_agent: skipped: {why}", file=sys.stderr)
        return []
    m = run(cells, repeat)
    return [row(f"N1 list_cells of a {cells}-cell notebook (JupyterLab)", m["listed"], None, target=300,
                target_kind="ms"),
            row("N2 Accept clicked -> edit in the page's editor", [shown for shown, _ in m["accepted"]], None,
                target=200, target_kind="ms"),
            row("N2 Accept clicked -> edit painted (next frame)", [painted for _, painted in m["accepted"]], None,
                target=200, target_kind="ms")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_notebook_agent")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    from .common import table

    started = time.perf_counter()
    print(table(measure(repeat=args.repeat)))
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
