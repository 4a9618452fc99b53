"""The demo notebooks open in real JupyterLab (Debian's chromium, Playwright) without a change:
opened, their kernel started, and saved, each file is byte for byte what is committed, so a reader
never sees an unsaved-changes mark they did not make."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from support import REPO
from support.browser import JupyterLab, chromium, kernel_ready, open_notebook

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted((REPO / "notebooks").glob("0*.ipynb"))


def saved_by_jupyterlab(page, path: Path, timeout: float = 30) -> bytes:
    """Save the open notebook with Ctrl+S and return what JupyterLab wrote."""
    before = path.stat().st_mtime_ns
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + timeout
    while path.stat().st_mtime_ns == before:
        assert time.monotonic() < deadline, f"JupyterLab did not save {path.name}"
        time.sleep(0.1)
    time.sleep(0.5)  # the write is one call, but let it finish before reading
    return path.read_bytes()


def test_opening_and_saving_a_demo_notebook_changes_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, root / notebook.name)
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            first = NOTEBOOKS[0]
            open_notebook(page, lab, first.name)
            for notebook in NOTEBOOKS:
                if notebook is not first:  # opened from the file browser, as a reader would: no page load
                    page.locator(".jp-DirListing-item", has_text=notebook.name).dblclick()
                    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.wait_for(timeout=60_000)
                    deadline = time.monotonic() + 60
                    while not kernel_ready(lab, notebook.name):
                        assert time.monotonic() < deadline, f"{notebook.name}: its kernel did not start"
                        time.sleep(0.1)
                    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=60_000)
                # not dirty on opening: the tab carries no unsaved-changes mark
                assert page.locator(".jp-mod-current.jp-mod-dirty").count() == 0, notebook.name
                saved = saved_by_jupyterlab(page, root / notebook.name)
                assert saved == notebook.read_bytes(), notebook.name
    finally:
        lab.stop()
