"""Run code in a notebook's own kernel from a cell of that notebook, the way a person would, and
read back what it computed: for tests of the notebook bridge (bettong_nb.notebook.frontend).

    driver = Driver(page, results_dir)             # the notebook's cell whose source starts "# driver"
    ids = driver.run("fe = await frontend.connect()\\nresult = [c['id'] for c in await fe.cells()]")

The body runs with top-level await in the driver cell (its source is replaced with the body and
the cell run with Ctrl-Enter); it sets ``result`` (JSON, anything else as its repr), which is
written to a file the test reads. An exception in the body fails :meth:`Driver.run` with the
kernel's traceback.
"""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from pathlib import Path
from typing import Any

__all__ = ["Driver", "MARK", "DriverError"]

MARK = "# driver"

TEMPLATE = """{mark}
import json as _json, os as _os, traceback as _traceback
from bettong_nb.notebook import frontend
result = None
try:
{body}
    _out = {{"result": result}}
except BaseException:
    _out = {{"error": _traceback.format_exc()}}
with open({tmp!r}, "w") as _f:
    _f.write(_json.dumps(_out, default=repr))
_os.replace({tmp!r}, {path!r})
"""

_runs = itertools.count(1)


class DriverError(AssertionError):
    pass


class Driver:
    def __init__(self, page, results: Path, scope=None):
        self.page = page
        self.scope = scope if scope is not None else page  # e.g. the visible notebook panel
        self.results = Path(results)
        self.results.mkdir(parents=True, exist_ok=True)

    def cell(self):
        """The driver cell's node in the page."""
        return self.scope.locator(".jp-Notebook .jp-CodeCell").filter(
            has=self.page.locator(".cm-content", has_text=MARK))

    def _not_started(self) -> bool:
        prompt = self.cell().first.locator(".jp-InputPrompt").inner_text(timeout=5_000)
        return "*" not in prompt and not any(c.isdigit() for c in prompt)

    def run(self, body: str, timeout: float = 30.0) -> Any:
        n = next(_runs)
        path, tmp = self.results / f"{n}.json", self.results / f"{n}.tmp"
        code = TEMPLATE.format(mark=MARK, body=textwrap.indent(textwrap.dedent(body).strip(), "    "),
                               tmp=str(tmp), path=str(path))
        editor = self.cell().locator(".jp-InputArea-editor")
        editor.click()
        self.page.keyboard.press("Control+a")
        # insert_text types no keys: no auto-closed brackets, no auto-indent of the lines.
        self.page.keyboard.insert_text(code)
        self.page.keyboard.press("Control+Enter")
        deadline = time.monotonic() + timeout
        pressed = time.monotonic()
        while not path.exists():
            if time.monotonic() - pressed > 3 and self._not_started():
                # A page whose kernel is still connecting drops the run (the prompt stays "[ ]",
                # never "[*]"): ask again.
                editor.click()
                self.page.keyboard.press("Control+Enter")
                pressed = time.monotonic()
            if time.monotonic() > deadline:
                shown = self.cell().first.inner_text(timeout=5_000) if self.cell().count() else "(no driver cell)"
                shot = self.results / f"{n}.png"
                self.page.screenshot(path=str(shot))
                raise DriverError(f"the driver cell did not finish within {timeout:g} s:\n{body}\n"
                                  f"The driver cell shows ({shot} is the page):\n{shown}")
            time.sleep(0.05)
        out = json.loads(path.read_text())
        if "error" in out:
            raise DriverError(f"the driver cell raised:\n{out['error']}")
        return out["result"]
