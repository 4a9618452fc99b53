"""The notebook bridge in real JupyterLab and real Notebook 7, in Debian's chromium.

A cell of the notebook itself drives the bridge with top-level await, as the agent's notebook
tools will (``fe = await frontend.connect(); await fe.cells() ...``); the tests check what the
page shows, what an undo restores and what the saved .ipynb holds. One server for the module
(JupyterLab serves Notebook 7's /notebooks/ pages too), one notebook file per test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from support.bridge_driver import MARK, Driver
from support.browser import browser, lab, open_notebook, open_notebook7  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

HIGHLIGHT = ".bettong-proposal-target"


def _notebook(path: Path, cells: list) -> None:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _code(source: str, outputs=(), count=None):
    cell = nbformat.v4.new_code_cell(source, outputs=list(outputs), execution_count=count)
    return cell


def _driver():
    return _code(MARK)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def results(tmp_path):
    return tmp_path / "results"


def _sources(page, scope=None) -> list[str]:
    """What the page shows of each cell's source (the editor's text; rendered Markdown's text)."""
    scope = scope if scope is not None else page
    return scope.locator(".jp-Notebook").first.evaluate("""notebook => [...notebook.querySelectorAll('.jp-Cell')].map(
        cell => (cell.classList.contains('jp-mod-rendered') ? cell.querySelector('.jp-RenderedMarkdown')
                                                            : cell.querySelector('.cm-content')).innerText.trim())""")


def _wait(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


def test_cells_and_hello_in_jupyterlab(lab, page, results):
    displayed = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="},
                                       metadata={"image/png": {"width": 4}})
    cells = [
        nbformat.v4.new_markdown_cell("# Six cells\n\nThe bridge lists them *all*."),
        _code("print('hi')\n6 * 7", [nbformat.v4.new_output("stream", name="stdout", text="hi\n"),
                                    nbformat.v4.new_output("execute_result", data={"text/plain": "42"},
                                                           execution_count=3)], 3),
        nbformat.v4.new_raw_cell("raw text", metadata={"format": "text/plain"}),
        _code("show()", [displayed, nbformat.v4.new_output("error", ename="ValueError", evalue="bad",
                                                           traceback=["ValueError: bad"])], 4),
        nbformat.v4.new_markdown_cell("A note", metadata={"tags": ["note"]}),
        _driver(),
    ]
    _notebook(lab.root_dir / "six.ipynb", cells)
    saved = nbformat.read(lab.root_dir / "six.ipynb", as_version=4)
    open_notebook(page, lab, "six.ipynb")
    driver = Driver(page, results)
    # Loaded as a person's notebook has it: from the next cell on, each cell's start connects too
    # (the exam lock reads the page's metadata), at the same time as the cell's own first connect.
    driver.run("get_ipython().run_line_magic('load_ext', 'bettong_nb')")

    got = driver.run("""
        fe = await frontend.connect()
        result = {"app": fe.app, "path": fe.path, "versions": fe.versions, "cells": await fe.cells(),
                  "current": frontend.current_cell_id(), "metadata": await fe.notebook_metadata(),
                  "same": fe is await frontend.connect()}
        import asyncio  # a request from another thread and event loop (answers go to the loop that asked)
        result["threaded"] = len(await asyncio.to_thread(lambda: asyncio.run(fe.cells())))
        result["one"] = [await fe.cell(c["id"]) for c in result["cells"][:5]] + [await fe.cell("no-such-id")]
    """)
    assert got["app"] == "JupyterLab" and got["path"] == "six.ipynb" and got["versions"]["protocol"] == 1
    assert got["same"]  # connect() is cached for the kernel
    assert got["threaded"] == 6
    assert got["metadata"]["kernelspec"]["name"] == "python3"
    listed = got["cells"]
    assert [c["id"] for c in listed] == [c.id for c in saved.cells]
    assert [c["cell_type"] for c in listed] == ["markdown", "code", "raw", "code", "markdown", "code"]
    assert [c["source"] for c in listed[:5]] == [c.source for c in saved.cells[:5]]
    assert listed[5]["source"].startswith(MARK) and got["current"] == listed[5]["id"]
    assert listed[1]["outputs"] == saved.cells[1].outputs and listed[1]["execution_count"] == 3
    assert listed[3]["outputs"] == saved.cells[3].outputs
    assert listed[2]["metadata"] == {"format": "text/plain"} and listed[4]["metadata"] == {"tags": ["note"]}
    assert "outputs" not in listed[0]
    assert got["one"] == [*listed[:5], None]  # one cell read alone is the same dict; an unknown id is None



def _idle(page) -> None:
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=30_000)


def test_a_reload_a_kernel_change_and_a_restart_keep_the_bridge(lab, page, results):
    _notebook(lab.root_dir / "lives.ipynb", [_code("n = 1"), _driver()])
    open_notebook(page, lab, "lives.ipynb")
    driver = Driver(page, results)
    pid = driver.run("""
        import os
        fe = await frontend.connect()
        result = os.getpid()
    """)

    # A reloaded page takes over the comm the kernel opened to the page before, at once.
    page.reload()
    _idle(page)
    same, cells, seconds = driver.run("""
        import time
        t = time.perf_counter()
        again = await frontend.connect()
        result = [again is fe, len(await again.cells()), time.perf_counter() - t]
    """)
    assert same and cells == 2 and seconds < 2

    # Another kernel for the notebook (Kernel > Change Kernel...): a new connection, served too.
    page.get_by_role("menuitem", name="Kernel").click()
    page.get_by_text("Change Kernel…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("select").select_option(label="Python 3 (ipykernel)")
    dialog.get_by_role("button", name="Select").click()
    _wait(lambda: page.locator(".jp-Dialog").count() == 0, "the dialog closed")
    _idle(page)
    changed = driver.run("""
        import os
        fe = await frontend.connect(timeout=20)
        result = [os.getpid(), fe.path, len(await fe.cells())]
    """)
    assert changed[0] != pid and changed[1:] == ["lives.ipynb", 2]

    # A restart keeps the page's kernel connection and its comm target; the new kernel connects anew.
    (session,) = [s for s in json.loads(lab._api("GET", "/api/sessions")) if s["path"] == "lives.ipynb"]
    lab._api("POST", f"/api/kernels/{session['kernel']['id']}/restart")
    _idle(page)
    # The status bar may still show the old kernel's Idle: give the page time to meet the new one.
    restarted = driver.run("""
        import os
        fe = await frontend.connect(timeout=20)
        result = [os.getpid(), fe.app, len(await fe.cells())]
    """)
    assert restarted[0] not in (pid, changed[0]) and restarted[1:] == ["JupyterLab", 2]


def test_edits_show_in_the_page_one_undo_restores_and_the_file_keeps_them(lab, page, results):
    _notebook(lab.root_dir / "edit.ipynb", [nbformat.v4.new_markdown_cell("# Edit me"), _code("a = 1"),
                                            _code("doomed = True"), _driver()])
    open_notebook(page, lab, "edit.ipynb")
    driver = Driver(page, results)

    got = driver.run("""
        fe = await frontend.connect()
        ids = {c["source"]: c["id"] for c in await fe.cells()}
        top = await fe.insert_cell(after=None, cell_type="markdown", source="Inserted *at the top*")
        below = await fe.insert_cell(after=ids["a = 1"], cell_type="code", source="b = 2", metadata={"tags": ["new"]})
        await fe.set_source(ids["a = 1"], "a = 100", metadata={"bettong": {"proposal": "p1"}})
        await fe.delete_cell(ids["doomed = True"])
        result = {"ids": ids, "top": top, "below": below, "cells": await fe.cells()}
    """)
    cells = got["cells"]
    target = got["ids"]["a = 1"]
    assert [c["id"] for c in cells[:4]] == [got["top"], got["ids"]["# Edit me"], target, got["below"]]
    assert [c["source"] for c in cells[:4]] == ["Inserted *at the top*", "# Edit me", "a = 100", "b = 2"]
    assert cells[2]["metadata"] == {"bettong": {"proposal": "p1"}} and cells[3]["metadata"] == {"tags": ["new"]}
    assert len(cells) == 5
    shown = _sources(page)
    assert shown[2:4] == ["a = 100", "b = 2"] and "at the top" in shown[0] and len(shown) == 5

    # One Ctrl-Z in the cell's editor takes back the whole set_source, its metadata included.
    page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+z")
    _wait(lambda: _sources(page)[2] == "a = 1", "Ctrl-Z restores the source")
    # And z in command mode brings back the deleted cell (the last change to the list of cells).
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    _wait(lambda: len(_sources(page)) == 6, "z restores the deleted cell")
    after = driver.run("""
        fe = await frontend.connect()
        result = await fe.cells()
    """)
    assert [c["source"] for c in after[:5]] == ["Inserted *at the top*", "# Edit me", "a = 1", "b = 2", "doomed = True"]
    assert after[2]["metadata"] == {}

    # Metadata and outputs reach the page and the saved file.
    driver.run(f"""
        fe = await frontend.connect()
        await fe.set_metadata({target!r}, "bettong", {{"provenance": "agent", "turn": 1}})
        await fe.set_metadata({target!r}, "tags", ["x"])
        await fe.set_metadata({target!r}, "tags", None)
        await fe.set_outputs({target!r}, [
            {{"output_type": "stream", "name": "stdout", "text": "hello from the agent\\n"}},
            {{"output_type": "execute_result", "data": {{"text/plain": "4"}}, "metadata": {{}}, "execution_count": 7}},
        ], 7)
        await fe.save()
    """)
    target_node = page.locator(".jp-Notebook .jp-Cell").nth(2)
    assert "[7]" in target_node.locator(".jp-InputPrompt").inner_text()
    assert "hello from the agent" in target_node.locator(".jp-OutputArea").inner_text()
    saved = nbformat.read(lab.root_dir / "edit.ipynb", as_version=4)
    (cell,) = [c for c in saved.cells if c.id == target]
    assert cell.metadata == {"bettong": {"provenance": "agent", "turn": 1}}
    assert cell.execution_count == 7 and [o.output_type for o in cell.outputs] == ["stream", "execute_result"]
    assert cell.outputs[0].text == "hello from the agent\n" and cell.outputs[1].data["text/plain"] == "4"

    # highlight outlines one cell, None clears; refusals are FrontendErrors naming the op.
    driver.run(f"""
        fe = await frontend.connect()
        await fe.highlight({target!r})
    """)
    assert page.locator(HIGHLIGHT).count() == 1
    assert page.locator(HIGHLIGHT).locator(".cm-content").inner_text().strip() == "a = 1"
    errors = driver.run("""
        fe = await frontend.connect()
        await fe.highlight(None)
        result = []
        for call in (fe.highlight("nope"), fe.delete_cell("nope"), fe._request("frobnicate"),
                     fe.insert_cell(after=None, cell_type="sql", source="")):
            try:
                await call
            except frontend.FrontendError as err:
                result.append(str(err))
    """)
    assert page.locator(HIGHLIGHT).count() == 0
    assert errors == ['highlight: no cell with id "nope" in edit.ipynb', 'delete_cell: no cell with id "nope" in edit.ipynb',
                      'frobnicate: unknown op "frobnicate"', "insert_cell: cell_type must be one of code, markdown, raw"]


def test_an_edit_marks_the_notebook_dirty_and_shows_in_another_view(lab, page, results):
    _notebook(lab.root_dir / "views.ipynb", [_code("v = 1"), _driver()])
    open_notebook(page, lab, "views.ipynb")
    driver = Driver(page, results)
    go, done = results / "go", results / "done"
    # The edit comes from a task that outlives the cell: only then is the notebook clean before it.
    driver.run(f"""
        import asyncio, pathlib
        fe = await frontend.connect()
        (target,) = [c["id"] for c in await fe.cells() if c["source"] == "v = 1"]
        async def later():
            while not pathlib.Path({str(go)!r}).exists():
                await asyncio.sleep(0.05)
            await fe.set_source(target, "v = 2")
            pathlib.Path({str(done)!r}).touch()
        task = asyncio.ensure_future(later())
    """)
    page.locator(".jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="views.ipynb")
    _wait(lambda: "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "saved")
    # A second view of the same notebook
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="views.ipynb").click(button="right")
    page.get_by_text("New View for Notebook", exact=True).click()
    _wait(lambda: page.locator(".jp-NotebookPanel").count() == 2, "a second view")
    go.touch()
    _wait(done.exists, "the edit")
    _wait(lambda: "jp-mod-dirty" in (tab.first.get_attribute("class") or ""), "dirty after the edit")
    panels = page.locator(".jp-NotebookPanel")
    for i in range(2):
        _wait(lambda: _sources(page, panels.nth(i))[0] == "v = 2", f"view {i} shows the edit")


def test_two_notebooks_open_at_once_each_change_only_themselves(lab, page, results):
    for name in ("left", "right"):
        _notebook(lab.root_dir / f"{name}.ipynb", [_code(f"side = {name!r}"), _driver()])
    open_notebook(page, lab, "left.ipynb")
    page.locator(".jp-DirListing-item", has_text="right.ipynb").dblclick()
    visible = lambda: page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")  # noqa: E731
    _wait(lambda: "right.ipynb" in (page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").inner_text()),
          "right.ipynb opened")
    _idle(page)
    body = """
        fe = await frontend.connect()
        first = (await fe.cells())[0]["id"]
        await fe.insert_cell(after=first, cell_type="markdown", source=f"written from {fe.path}")
        await fe.set_metadata(first, "bettong", fe.path)
        await fe.save()
        result = [fe.path, [c["source"] for c in await fe.cells()]]
    """
    right = Driver(page, results, scope=visible()).run(body)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="left.ipynb").click()
    _wait(lambda: "left.ipynb" in page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").inner_text(),
          "left.ipynb in front")
    left = Driver(page, results, scope=visible()).run(body)
    assert right[0] == "right.ipynb" and right[1][:2] == ["side = 'right'", "written from right.ipynb"]
    assert left[0] == "left.ipynb" and left[1][:2] == ["side = 'left'", "written from left.ipynb"]
    assert len(left[1]) == len(right[1]) == 3
    for name in ("left", "right"):
        saved = nbformat.read(lab.root_dir / f"{name}.ipynb", as_version=4)
        assert [c.source for c in saved.cells[:2]] == [f"side = {name!r}", f"written from {name}.ipynb"]
        assert saved.cells[0].metadata == {"bettong": f"{name}.ipynb"}


def test_notebook7_page(lab, page, results):
    _notebook(lab.root_dir / "seven.ipynb", [nbformat.v4.new_markdown_cell("# Notebook 7"), _code("n = 7"),
                                             _driver()])
    open_notebook7(page, lab, "seven.ipynb")
    driver = Driver(page, results)
    got = driver.run("""
        fe = await frontend.connect()
        cells = await fe.cells()
        new = await fe.insert_cell(after=cells[1]["id"], cell_type="code", source="m = 8")
        await fe.set_source(cells[1]["id"], "n = 70")
        await fe.set_outputs(new, [{"output_type": "stream", "name": "stdout", "text": "from the agent"}], 9)
        await fe.highlight(new)
        result = [fe.app, fe.path, frontend.current_cell_id() == cells[2]["id"], new]
    """, timeout=60)
    assert got[:3] == ["Notebook", "seven.ipynb", True]
    assert _sources(page)[1:3] == ["n = 70", "m = 8"]
    node = page.locator(".jp-Notebook .jp-Cell").nth(2)
    assert "jp-mod-" in (node.get_attribute("class") or "") and page.locator(HIGHLIGHT).count() == 1
    assert "bettong-proposal-target" in node.get_attribute("class")
    assert "from the agent" in node.locator(".jp-OutputArea").inner_text()
