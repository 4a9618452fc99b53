"""Approval buttons clicked in real JupyterLab, in Debian's chromium driven by Playwright.

A ``%%agent --approve`` cell whose scripted model asks for two tool calls: Allow the first,
Deny the second with a reason. The tool must run once, the model must read the reason, and
the cell must show the answer and both tool calls as expandable blocks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.browser import JupyterLab, cell, chromium, open_notebook, run_cell, wait_idle

pytestmark = pytest.mark.browser

NOTEBOOK = Path(__file__).parent / "notebooks" / "approve_buttons.ipynb"


@pytest.fixture
def lab(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    server = JupyterLab(root, tmp_path / "state").start()
    yield server
    server.stop()


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
        expect(output.locator(".jp-RenderedMarkdown strong")).to_have_text("one", timeout=10_000)
        expect(output).to_contain_text("Wrote one note; the second was denied.")
        blocks = output.locator("details.bettong-tool")
        expect(blocks).to_have_count(2)
        expect(blocks.nth(0).locator("summary")).to_contain_text('append_note(text="first") → ok')
        expect(blocks.nth(1).locator("summary")).to_contain_text('append_note(text="second") → denied')
        blocks.nth(1).locator("summary").click()  # expand: arguments and the reason are inside
        expect(blocks.nth(1)).to_contain_text("reason: only one note, please")
        expect(output).to_contain_text("2 requests")
        for prompt, decision in ((first, "allowed"), (second, "denied: only one note, please")):
            expect(prompt).to_contain_text(decision)
            expect(prompt.locator("button:not([disabled])")).to_have_count(0)

        run_cell(page, 2)
        wait_idle(page, 2)

    root = lab.root_dir
    assert (root / "notes.txt").read_text() == "first\n"  # the tool ran once
    requests = json.loads((root / "requests.json").read_text())
    results = [b["content"] for b in requests[1][-1]["content"]]
    assert results == ["appended 'first'", "ERROR: append_note was not allowed: only one note, please"]
