"""The exam lock in real JupyterLab (headless Debian chromium): a notebook whose metadata says
``"bettong_nb": {"agent": "off"}`` refuses %%agent cells and runs started in its cells, one line
each; the kernel knows its notebook from the path the Jupyter server gave it."""

from __future__ import annotations

import nbformat
import pytest

from support.browser import JupyterLab, cell, chromium, open_notebook, run_cell, wait_idle
from support.notebooks import PRICED_BOT as SETUP

pytestmark = pytest.mark.browser


def test_a_locked_notebook_refuses_agents_in_jupyterlab(tmp_path):
    from playwright.sync_api import expect

    root = tmp_path / "root"
    (root / "exam").mkdir(parents=True)
    cells = (SETUP, "%%agent bot\nWhat is a bettong?", "bot.run('hi')", "%agent policy", "1 + 1")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["bettong_nb"] = {"agent": "off"}
    nbformat.write(notebook, root / "exam" / "final.ipynb")
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_notebook(page, lab, "exam/final.ipynb")
            for index in range(len(cells)):
                run_cell(page, index)
                wait_idle(page, index)
            refusal = "PolicyError: agents are off in this notebook"
            for index in (1, 2):
                output = cell(page, index).locator(".jp-OutputArea")
                expect(output).to_contain_text(refusal, timeout=10_000)
                text = output.inner_text().strip()
                assert text.startswith(refusal) and "\n" not in text, text  # one line, no answer
            shown = cell(page, 3).locator(".jp-OutputArea")
            expect(shown).to_contain_text(str(root / "exam" / "final.ipynb"), timeout=10_000)
            expect(cell(page, 4).locator(".jp-OutputArea")).to_contain_text("2")  # the rest of Python works
    finally:
        lab.stop()


def test_the_page_keeps_the_lock_when_the_saved_file_is_gone(tmp_path):
    """The kernel's JPY_SESSION_NAME is the path at its start: after the file moves (a rename),
    only the page's metadata, read through the extension, still says the notebook is locked."""
    from playwright.sync_api import expect

    root = tmp_path / "root"
    root.mkdir()
    cells = (SETUP, "%%agent bot\nWhat is a bettong?", "bot.run('hi')")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["bettong_nb"] = {"agent": "off"}
    nbformat.write(notebook, root / "quiz.ipynb")
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_notebook(page, lab, "quiz.ipynb")
            run_cell(page, 0)
            wait_idle(page, 0)
            (root / "quiz.ipynb").rename(root / "elsewhere.ipynb")  # the kernel's path now names nothing
            for index in (1, 2):
                run_cell(page, index)
                wait_idle(page, index)
                output = cell(page, index).locator(".jp-OutputArea")
                expect(output).to_contain_text("PolicyError: agents are off in this notebook", timeout=10_000)
    finally:
        lab.stop()
