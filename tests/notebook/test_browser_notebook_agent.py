"""%%agent --notebook in real JupyterLab and Notebook 7 (Debian's chromium, Playwright): a scripted
model lists the cells, proposes edits a person accepts or rejects with the buttons in the cell,
and runs a cell after Allow. One server for the module, one notebook file per test."""

from __future__ import annotations

import json
import re
import textwrap
import time

import nbformat
import pytest

from support.browser import (browser, cell, kernel_ready, lab, open_notebook, open_notebook7, run_cell,  # noqa: F401
                             wait_idle)  # (browser and lab are fixtures)

pytestmark = pytest.mark.browser

HIGHLIGHT = ".bettong-proposal-target"
DUMP = ("import json\nwith open('calls.json', 'w') as f:\n"
        "    json.dump([[c.tool, c.status, c.result] for c in _agent_result.tool_calls]\n"
        "              + [['model got', m['content']] for m in model.requests[-1].messages[-1:]], f, default=str)")


def _setup(turns: list) -> str:
    return textwrap.dedent(f"""
        %load_ext bettong_nb
        import bettong_nb
        from bettong_nb.providers.scripted import Scripted
        model = Scripted({turns!r})
        bot = bettong_nb.agent(provider=model)
    """).strip()


def _write(path, sources: list[tuple[str, str]]) -> None:
    cells = []
    for cell_id, source in sources:
        made = nbformat.v4.new_markdown_cell(source) if cell_id == "title" else nbformat.v4.new_code_cell(source)
        made.id = cell_id
        cells.append(made)
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=kernel), path)


def _source(page, index: int) -> str:
    return cell(page, index).locator(".cm-content").inner_text().strip()


def _wait(condition, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    yield page
    context.close()


def test_accept_undo_reject_and_run_in_jupyterlab(lab, page):
    from playwright.sync_api import expect

    turns = [[("list_cells", {})], [("edit_cell", {"cell_id": "load", "source": "df = 100"})],
             [("edit_cell", {"cell_id": "plot", "source": "print('<b>bad</b>')"})],
             [("run_cell", {"cell_id": "plot"})], "Done."]
    _write(lab.root_dir / "six.ipynb", [("setup", _setup(turns)), ("title", "# Revenue"), ("load", "df = 1"),
                                        ("plot", "print('plotted', 6 * 7)"), ("agent", "%%agent bot --notebook\nTidy up"),
                                        ("dump", DUMP)])
    open_notebook(page, lab, "six.ipynb")
    run_cell(page, 0)
    wait_idle(page, 0)
    run_cell(page, 4)

    proposal = page.locator(".bettong-proposal")
    expect(proposal).to_contain_text("Edit cell load", timeout=30_000)
    expect(proposal.locator(".bettong-diff")).to_contain_text("+df = 100")
    expect(proposal.locator(".bettong-diff")).to_contain_text("-df = 1")
    expect(page.locator(HIGHLIGHT)).to_have_count(1)  # the target is outlined while it waits
    assert _source(page, 2) == "df = 1"  # nothing changes before Accept
    proposal.get_by_role("button", name="Accept", exact=True).click()
    _wait(lambda: _source(page, 2) == "df = 100", "the accepted edit shows in the page")

    second = page.locator(".bettong-proposal", has_text="Edit cell plot")
    expect(second.locator(".bettong-diff")).to_contain_text("+print('<b>bad</b>')", timeout=30_000)
    expect(second.locator(".bettong-diff b")).to_have_count(0)  # the diff's HTML is text, never markup
    second.locator("input").fill("keep the plot as it is")
    second.get_by_role("button", name="Reject", exact=True).click()

    approval = page.locator(".bettong-approval")
    expect(approval).to_contain_text("run_cell", timeout=30_000)
    approval.get_by_role("button", name="Allow", exact=True).click()
    wait_idle(page, 4)
    expect(cell(page, 3).locator(".jp-OutputArea")).to_contain_text("plotted 42")  # the run's output, on its cell
    expect(page.locator(HIGHLIGHT)).to_have_count(0)
    output = cell(page, 4).locator(".jp-OutputArea")
    expect(output).to_contain_text("accepted by you")
    expect(output).to_contain_text("rejected: keep the plot as it is")
    expect(page.locator(".bettong-proposal")).to_have_count(0)  # decided proposals give way to their record

    run_cell(page, 5)
    wait_idle(page, 5)
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=10_000)
    calls = json.loads((lab.root_dir / "calls.json").read_text())
    listed, accepted, rejected, ran, got = calls
    assert listed[1] == "ok" and listed[2].startswith("6 cells, from the live notebook six.ipynb in JupyterLab")
    assert "id=agent code" in listed[2] and "<- you run in this cell" in listed[2]
    assert accepted[:2] == ["edit_cell", "ok"] and "accepted" in accepted[2]
    assert rejected[:2] == ["edit_cell", "denied"] and "keep the plot as it is" in rejected[2]
    assert ran[:2] == ["run_cell", "ok"] and "plotted 42" in ran[2]
    assert "plotted 42" in json.dumps(got)  # the run's output reached the model

    saved = nbformat.read(lab.root_dir / "six.ipynb", as_version=4)
    load, plot = saved.cells[2], saved.cells[3]
    assert load.source == "df = 100"
    (entry,) = load.metadata["bettong_nb"]
    assert entry["action"] == "edit" and entry["model"] == "scripted" and entry["decided_by"] == "you"
    assert entry["prompt_cell"] == "agent" and entry["cell"] == "load" and len(entry["diff_sha256"]) == 64
    assert plot.source == "print('plotted', 6 * 7)" and "bettong_nb" not in plot.metadata  # the rejected cell
    assert plot.outputs[0]["text"] == "plotted 42\n"

    # One Ctrl-Z in the edited cell takes the agent's edit back.
    cell(page, 2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+z")
    _wait(lambda: _source(page, 2) == "df = 1", "Ctrl-Z restores the cell")


def test_reject_and_stop_in_notebook7(lab, page):
    from playwright.sync_api import expect

    turns = [[("edit_cell", {"cell_id": "load", "source": "df = 2"})],
             [("insert_cell", {"source": "never = True", "after_cell_id": "load"})], "Done."]
    path = lab.root_dir / "seven.ipynb"
    _write(path, [("setup", _setup(turns)), ("load", "df = 1"), ("agent", "%%agent bot --notebook\nTidy up")])
    open_notebook7(page, lab, "seven.ipynb")
    run_cell(page, 0)
    wait_idle(page, 0)
    run_cell(page, 2)

    proposal = page.locator(".bettong-proposal")
    expect(proposal).to_contain_text("Edit cell load", timeout=30_000)
    proposal.locator("input").fill("not now")
    proposal.get_by_role("button", name="Reject", exact=True).click()
    waiting = page.locator(".bettong-proposal", has_text="Insert a new code cell")
    expect(waiting).to_contain_text("+never = True", timeout=30_000)
    page.locator('[data-jp-item-name="interrupt"] button, jp-button[data-command="notebook:interrupt-kernel"]'
                 ).first.click()
    wait_idle(page, 2, timeout_ms=1_000)  # Stop while a proposal waits ends the cell within a second
    # nothing was inserted (Shift+Enter on the last cell added the empty one after it)
    expect(page.locator(".jp-Notebook .jp-Cell .cm-content", has_text=re.compile("^never = True$"))
           ).to_have_count(0)
    assert _source(page, 1) == "df = 1"
    expect(page.locator(HIGHLIGHT)).to_have_count(0)
    expect(cell(page, 2).locator(".jp-OutputArea")).to_contain_text("rejected: not now")


def test_two_notebooks_open_at_once_each_edit_only_themselves(lab, page):
    from playwright.sync_api import expect

    sides = {"left": [[("edit_cell", {"cell_id": "right-side", "source": "side = 'stolen'"})],
                      [("edit_cell", {"cell_id": "left-side", "source": "side = 'LEFT'"})], "Done."],
             "right": [[("edit_cell", {"cell_id": "right-side", "source": "side = 'RIGHT'"})], "Done."]}
    for name, turns in sides.items():
        _write(lab.root_dir / f"{name}.ipynb", [("setup", _setup(turns)), (f"{name}-side", f"side = {name!r}"),
                                               ("agent", "%%agent bot --notebook\nTidy up"), ("dump", DUMP)])
    open_notebook(page, lab, "left.ipynb")
    page.locator(".jp-DirListing-item", has_text="right.ipynb").dblclick()
    tab = lambda name: page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"{name}.ipynb")  # noqa: E731
    expect(tab("right")).to_have_class(re.compile("lm-mod-current"), timeout=30_000)
    _wait(lambda: kernel_ready(lab, "right.ipynb") and kernel_ready(lab, "left.ipynb"), "both kernels", timeout=60)
    for name, wanted in (("right", "side = 'RIGHT'"), ("left", "side = 'LEFT'")):
        tab(name).click()
        expect(tab(name)).to_have_class(re.compile("lm-mod-current"))
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        cells = panel.locator(".jp-Notebook .jp-Cell")
        for index in (0, 2):
            cells.nth(index).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Control+Enter")
            if index == 0:
                _wait(lambda: any(c.isdigit() for c in cells.nth(0).locator(".jp-InputPrompt").inner_text()), "setup")
        proposal = panel.locator(".bettong-proposal")
        expect(proposal).to_contain_text(f"Edit cell {name}-side", timeout=30_000)
        proposal.get_by_role("button", name="Accept", exact=True).click()
        _wait(lambda: cells.nth(1).locator(".cm-content").inner_text().strip() == wanted, f"{name} edited")
        expect(panel.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea")).to_contain_text(
            "accepted by you", timeout=15_000)
        cells.nth(3).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")
        # Saved before the dump cell's count arrives, the notebook turns dirty again when it does.
        _wait(lambda: any(c.isdigit() for c in cells.nth(3).locator(".jp-InputPrompt").inner_text()), f"{name} dump")
        page.keyboard.press("Control+s")
        _wait(lambda: "jp-mod-dirty" not in (tab(name).get_attribute("class") or ""), f"{name} saved")
    left = nbformat.read(lab.root_dir / "left.ipynb", as_version=4)
    right = nbformat.read(lab.root_dir / "right.ipynb", as_version=4)
    assert left.cells[1].source == "side = 'LEFT'" and right.cells[1].source == "side = 'RIGHT'"
    assert [c.id for c in left.cells] == ["setup", "left-side", "agent", "dump"]
    stolen = json.loads((lab.root_dir / "calls.json").read_text())[0]  # left ran last
    assert stolen[:2] == ["edit_cell", "error"] and "no cell with id 'right-side' in this notebook" in stolen[2]
