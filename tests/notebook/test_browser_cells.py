"""Per-cell usage in real JupyterLab (headless Debian chromium): JupyterLab sends each cell's id
with its execute request, so two %%agent cells are two rows of ``%agent usage --by cell``, each
named by its cell id with the cell's first line beside it."""

from __future__ import annotations

import nbformat
import pytest

from support.browser import JupyterLab, cell, chromium, open_notebook, run_cell, wait_idle
from support.notebooks import PRICED_BOT as SETUP

pytestmark = pytest.mark.browser


def test_usage_by_cell_in_jupyterlab(tmp_path):
    from playwright.sync_api import expect

    root = tmp_path / "root"
    root.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in (
        SETUP, "%%agent bot\nWhat is a bettong?", "%%agent bot\nAnd a quokka?", "%agent usage bot --by cell")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "cells.ipynb")
    ids = [c.id for c in notebook.cells]
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_notebook(page, lab, "cells.ipynb")
            for index in range(4):
                run_cell(page, index)
                wait_idle(page, index)
            table = cell(page, 3).locator(".jp-OutputArea table")
            expect(table).to_contain_text("%%agent bot · What is a bettong?", timeout=10_000)
            expect(table).to_contain_text("%%agent bot · And a quokka?")
            expect(table.locator("tbody tr")).to_have_count(2)
            text = table.inner_text()
    finally:
        lab.stop()
    assert ids[1] in text and ids[2] in text and "In[" not in text  # the ids JupyterLab sent, not In[n]
