"""Without bettong_nb's extension but with a person at a widget frontend (VS Code, Colab, the
classic notebook): insert_cell puts ONE new cell below the %%agent cell through IPython's
set_next_input, in a real InteractiveShell; nothing else changes, and headless denies all."""

from __future__ import annotations

import asyncio

import nbformat
import pytest

from bettong_nb import capabilities as caps
from bettong_nb.capabilities.notebook import SavedNotebook
from bettong_nb.core import hooks
from bettong_nb.core.approvals import Denied
from bettong_nb.notebook import live
from support.ipython_shell import ip  # noqa: F401  (ip is a fixture)


@pytest.fixture
def below(ip, tmp_path, monkeypatch):
    cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("%%agent bot --notebook\nTidy up")]
    for cell, cell_id in zip(cells, ("load", "agent")):
        cell.id = cell_id
    path = tmp_path / "tidy.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    monkeypatch.setattr(live, "_placed_in", None)
    book = live.BelowPrompt(SavedNotebook(path, why=live.NO_EXTENSION, prompt_cell="agent", shown="tidy.ipynb"), ip)

    async def opener():
        return book

    hooks.provide(open_notebook=opener)
    ip.rl_next_input = None
    yield ip, path
    hooks.provide(open_notebook=live.open_notebook)


def _call(tool, **args):
    async def go():
        return await tool(**args)

    return asyncio.run(go())


def test_one_new_cell_goes_below_the_agent_cell_and_nothing_else_changes(below):
    shell, path = below
    before = path.read_bytes()
    nb = caps.notebook(edit=True, run=True)
    assert "insert_cell can put one new code cell below the %%agent cell" in _call(nb.list_cells)

    said = _call(nb.insert_cell, source="y = x + 1\u202e  # check", after_cell_id="load")
    assert said == ("The new cell was put below the %%agent cell (not below cell load: only there is possible), not "
                    "run: the user reviews it and runs it or not. No other change can be made in this notebook here.")
    assert shell.rl_next_input == "y = x + 1⟨U+202E⟩  # check"  # the payload, hidden characters written out

    # One per cell: a second insert in the same cell is refused and the first stays.
    with pytest.raises(Denied, match="already put its one new cell below itself"):
        _call(nb.insert_cell, source="z = 3")
    assert shell.rl_next_input == "y = x + 1⟨U+202E⟩  # check"
    for refused, args in ((nb.edit_cell, {"cell_id": "load", "source": "x = 2"}), (nb.delete_cell, {"cell_id": "load"})):
        with pytest.raises(Denied, match="no cell can be changed here: bettong_nb's notebook extension is not"):
            _call(refused, **args)
    with pytest.raises(Denied, match="only a code cell"):
        shell.execution_count += 1  # a later cell: its one insert is free again, but not as markdown
        _call(nb.insert_cell, source="# Notes", cell_type="markdown")
    with pytest.raises(Denied, match="no cell can be run here"):
        _call(nb.run_cell, cell_id="load")
    assert path.read_bytes() == before

    # The next cell may put its own one.
    assert _call(nb.insert_cell, source="z = 3").startswith("The new cell was put below the %%agent cell, not run")
    assert shell.rl_next_input == "z = 3"


def test_without_a_widget_frontend_the_kernel_puts_no_cell_below(ip, tmp_path, monkeypatch):
    # A plain shell has no frontend at all: open_notebook gives the saved file, which refuses inserts.
    cells = [nbformat.v4.new_code_cell("x = 1")]
    cells[0].id = "load"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "plain.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", "plain.ipynb")
    ip.rl_next_input = None
    nb = caps.notebook(edit=True)
    with pytest.raises(Denied, match="the new cell was rejected: no change can be made here"):
        _call(nb.insert_cell, source="y = 2")
    assert ip.rl_next_input is None
