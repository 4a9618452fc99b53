"""Exports opened where people open them: the notebook in real JupyterLab, the page in Chromium
with every request it makes recorded."""

from __future__ import annotations

import pytest

from support.browser import JupyterLab, chromium, open_notebook
from support.images import image_session

pytestmark = pytest.mark.browser


def test_an_exported_notebook_reopens_in_jupyterlab_and_the_page_fetches_nothing(tmp_path):
    from playwright.sync_api import expect

    root = tmp_path / "root"
    root.mkdir()
    chat = image_session()
    chat.export(root / "chat.ipynb")
    page_path = chat.export(tmp_path / "chat.html")
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_notebook(page, lab, "chat.ipynb")
            markdown = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown")
            expect(markdown).to_have_count(3)
            expect(markdown.nth(0).locator("h1")).to_contain_text("bettong_nb session · 2 turns")
            expect(markdown.nth(1)).to_contain_text("What is this?")
            expect(markdown.nth(1)).to_contain_text("It is a red square.")
            expect(markdown.nth(2).locator("h2")).to_contain_text("Turn 2")
            blocks = page.locator(".jp-OutputArea details.bettong-tool")
            expect(blocks).to_have_count(2)
            expect(blocks.nth(0).locator("summary")).to_contain_text("plot() → ok")
            blocks.nth(0).locator("summary").click()
            expect(blocks.nth(0)).to_contain_text("a red square")
            # the prompt's image (an attachment) and the tools' (image outputs) all decode
            shown = page.locator(".jp-MarkdownCell img, .jp-OutputArea .jp-RenderedImage img")
            expect(shown).to_have_count(3)
            for index in range(3):
                assert shown.nth(index).evaluate("img => img.complete && img.naturalWidth === 2")

            viewer = browser.new_page()
            fetched = []
            viewer.on("request", lambda request: fetched.append(request.url))
            viewer.goto(page_path.as_uri())
            viewer.wait_for_load_state("networkidle")
            assert [url for url in fetched if not url.startswith("data:")] == [page_path.as_uri()]
            images = viewer.locator("img.bettong-image")
            expect(images).to_have_count(3)
            assert images.evaluate_all("all => all.every(img => img.complete && img.naturalWidth === 2)")
            expect(viewer.locator("details.bettong-tool")).to_have_count(2)
    finally:
        lab.stop()
