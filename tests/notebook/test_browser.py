"""Approval buttons clicked in real JupyterLab, in Debian's chromium driven by Playwright.

A ``%%agent --approve`` cell whose scripted model asks for two tool calls: Allow the first,
Deny the second with a reason. The tool must run once, the model must read the reason, and
the cell must show the answer and both tool calls as expandable blocks, each with its one line
of record in place of its prompt ("allowed by you", "denied: <reason>") — still there when the
saved notebook is reopened and when it is exported with nbconvert.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from support import TESTS
from support.browser import JupyterLab, cell, chromium, open_notebook, run_cell, wait_idle
from support.notebooks import WIDGET
from support.servers import LoopbackServer

pytestmark = pytest.mark.browser

NOTEBOOK = TESTS / "notebooks" / "approve_buttons.ipynb"


@pytest.fixture
def lab(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    server = JupyterLab(root, tmp_path / "state").start()
    yield server
    server.stop()


def _check_record(output, expect) -> None:
    blocks = output.locator("details.bettong-tool")
    expect(blocks).to_have_count(2)
    expect(blocks.nth(0).locator("summary")).to_contain_text('append_note(text="first") → ok · allowed by you')
    expect(blocks.nth(1).locator("summary")).to_contain_text(
        'append_note(text="second") → denied: only one note, please')
    blocks.nth(1).locator("summary").click()  # expand: arguments and the reason are inside
    expect(blocks.nth(1)).to_contain_text("reason: only one note, please")


def test_allow_then_deny_with_a_reason(lab):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        open_notebook(page, lab, NOTEBOOK.name)
        run_cell(page, 0)
        wait_idle(page, 0)

        run_cell(page, 1)
        first = page.locator(".bettong-approval.bettong-call-call_0_0")
        expect(first).to_contain_text("append_note", timeout=30_000)
        expect(first).to_contain_text('"text": "first"')
        expect(first).to_contain_text("capability: notes")
        expect(first.locator("input")).to_have_attribute("placeholder", "reason (optional)")
        first.get_by_role("button", name="Allow", exact=True).click()

        second = page.locator(".bettong-approval.bettong-call-call_0_1")
        expect(second).to_contain_text('"text": "second"', timeout=30_000)
        second.locator("input").fill("only one note, please")
        second.get_by_role("button", name="Deny", exact=True).click()
        wait_idle(page, 1)

        output = cell(page, 1).locator(".jp-OutputArea")
        expect(output.locator(".bettong-markdown strong")).to_have_text("one", timeout=10_000)  # rendered here, sanitised
        expect(output).to_contain_text("Wrote one note; the second was denied.")
        _check_record(output, expect)
        expect(page.locator(".bettong-approval")).to_have_count(0)  # decided prompts give way to their record
        expect(output).to_contain_text("2 requests")

        run_cell(page, 2)
        wait_idle(page, 2)
        page.keyboard.press("Control+s")  # the record must survive saving
        expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=10_000)

    saved = nbformat.read(lab.root_dir / NOTEBOOK.name, as_version=4)
    outputs = saved.cells[1].outputs
    assert not [o for o in outputs if WIDGET in o.get("data", {})]  # a reopened notebook has no widget to lose
    assert any("allowed by you" in o.get("data", {}).get("text/html", "") for o in outputs)
    exported = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--stdout",
                               str(lab.root_dir / NOTEBOOK.name)],
                              capture_output=True, text=True, timeout=60, check=True).stdout
    text = re.sub(r"<[^>]+>", "", exported)
    assert 'append_note(text="first") → ok · allowed by you' in html.unescape(text)
    assert 'append_note(text="second") → denied: only one note, please' in html.unescape(text)
    assert "Error displaying widget" not in exported and "interactive widgets" not in exported

    root = lab.root_dir
    assert (root / "notes.txt").read_text() == "first\n"  # the tool ran once
    requests = json.loads((root / "requests.json").read_text())
    results = [b["content"] for b in requests[1][-1]["content"]]
    assert results == ["appended 'first'", "ERROR: append_note was not allowed: only one note, please"]


def test_stop_ends_a_waiting_cell_and_code_lands_in_a_new_cell(tmp_path):
    """The toolbar's stop button on a cell waiting for a 30 s loopback model: idle within 2 s with
    one line, and the next cell on the same session works. Then -f code: the answer's code in a
    new cell below, not run."""
    from playwright.sync_api import expect

    from support.slow_model import SlowModel

    model = SlowModel()
    root = tmp_path / "root"
    root.mkdir()
    answer = "Here:\n```python\nMARK = 'from the agent'\n```"
    with LoopbackServer(model) as server:
        cells = [
            "%load_ext bettong_nb\nimport bettong_nb\nfrom bettong_nb.providers.scripted import Scripted\n"
            f"chat = bettong_nb.openai(base_url='{server.url}/v1', api_key='k', max_retries=0).session()\n"
            f"coder = bettong_nb.agent(provider=Scripted([{answer!r}]))",
            "%%agent chat\nslow question",
            "%%agent chat\nquick question",
            "%%agent coder -f code\nwrite it",
        ]
        kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata=kernel),
                       root / "stop.ipynb")
        lab = JupyterLab(root, tmp_path / "state").start()
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                open_notebook(page, lab, "stop.ipynb")
                run_cell(page, 0)
                wait_idle(page, 0)
                run_cell(page, 1)
                assert model.arrived.wait(30), "the model never got the request"
                page.locator('[data-jp-item-name="interrupt"] button, '
                             'jp-button[data-command="notebook:interrupt-kernel"]').first.click()
                wait_idle(page, 1, timeout_ms=2_000)
                output = cell(page, 1).locator(".jp-OutputArea")
                expect(output.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                                      ).last).to_have_text("interrupted — the session is unchanged")
                expect(output).not_to_contain_text("Traceback")

                run_cell(page, 2)
                wait_idle(page, 2)
                expect(cell(page, 2).locator(".jp-OutputArea")).to_contain_text("answer to quick question")

                run_cell(page, 3)
                wait_idle(page, 3)
                added = cell(page, 4)
                expect(added.locator(".jp-InputArea-editor")).to_have_text("MARK = 'from the agent'")
                expect(added.locator(".jp-InputPrompt")).to_have_text("[ ]:")  # a new cell, never run
                expect(cell(page, 3).locator(".jp-OutputArea")).to_contain_text("The code is in a new cell below")
                # ONE new cell (Shift+Enter on the last cell adds an empty one after it too)
                expect(page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor",
                                    has_text=re.compile(r"^MARK = 'from the agent'$"))).to_have_count(1)
        finally:
            lab.stop()
    # the stopped turn was never kept: the session's one turn is the quick question
    assert [r.json()["messages"][-1]["content"] for r in server.requests] == ["slow question", "quick question"]
    assert len(server.requests[1].json()["messages"]) == 2  # system + the quick question: nothing from the stop
