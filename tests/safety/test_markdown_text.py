"""Model Markdown written back as Markdown for any viewer (``sanitize.markdown_text``), and the
writers the exports put around it (``markdown_literal``, ``markdown_code``, ``markdown_fence``).

Every case of tests/corpora/render_markdown.jsonl is written, then rendered by two independent
parsers — mistune and markdown-it (GFM: tables, strikethrough, bare-URL links) — both set to let
raw HTML and every link scheme through, so whatever is safe is safe because of what was written.
The rendered HTML must hold no fetching image, no raw tag, no script link, no event handler, and
still show every word the answer showed. Exported files are checked the same way, and an
exported notebook is opened in real JupyterLab, every request it makes recorded.
"""

from __future__ import annotations

import functools
import json
import random
import re
import time
import urllib.parse

import pytest

import bettong_nb
from bettong_nb import Deny
from bettong_nb.core.provider import Response
from bettong_nb.providers.scripted import Scripted
from bettong_nb.safety.sanitize import markdown_code, markdown_fence, markdown_html, markdown_literal, markdown_text
from support.html_checks import Document, browser_url
from support import TESTS

CORPUS = [json.loads(line) for line in (TESTS / "corpora" / "render_markdown.jsonl").read_text()
          .splitlines() if line]
ATTACKER = "attacker.example"

# What a Markdown renderer emits by itself; any other tag came from raw HTML.
MARKDOWN_TAGS = set("p h1 h2 h3 h4 h5 h6 em strong del s code pre ul ol li blockquote hr br a img table thead tbody "
                    "tr th td".split())
MARKDOWN_ATTRIBUTES = {"href", "src", "alt", "title", "start", "style", "class"}
IMAGE_SOURCES = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,",
                 "data:image/webp;base64,")
# What a GFM viewer may also link in text (bare "ftp://host", "//host"): links, never fetches
LINK_SCHEMES = ("http:", "https:", "mailto:", "#", "ftp:", "//")


def source(case: dict) -> str:
    """The case's input (long ones are stored as [text, times] parts)."""
    return case["input"] if "input" in case else "".join(text * times for text, times in case["parts"])


@functools.cache
def renderers() -> dict:
    """Two CommonMark implementations, both letting raw HTML and any link scheme through."""
    import mistune
    from markdown_it import MarkdownIt

    permissive = mistune.HTMLRenderer(escape=False, allow_harmful_protocols=True)
    gfm = MarkdownIt("gfm-like", {"html": True})
    gfm.validateLink = lambda url: True
    return {"mistune": mistune.create_markdown(escape=False, renderer=permissive, plugins=["strikethrough", "table"]),
            "markdown-it": gfm.render}


class Rendered(Document):
    """Tags, attributes and visible text of rendered HTML; comments, declarations and
    processing instructions fail."""

    def handle_pi(self, data):
        raise AssertionError(f"a processing instruction was rendered: {data[:200]!r}")

    @property
    def visible(self) -> str:
        return "".join(self.text)

    def hrefs(self) -> list[str]:
        return [attrs.get("href") for tag, attrs in self.tags if tag == "a"]


def assert_inert(fragment: str, *, images: int | None = 0, ours: frozenset = frozenset()) -> Rendered:
    """``fragment`` holds only what Markdown makes (and the tags in ``ours``), no image but
    ``images`` data: ones (None: any number), no script link."""
    doc = Rendered(fragment)
    for tag, attrs in doc.tags:
        assert tag in MARKDOWN_TAGS | ours, f"raw <{tag}> rendered: {fragment[:400]!r}"
        for name, value in attrs.items():
            value = value or ""
            assert name in MARKDOWN_ATTRIBUTES and not name.startswith("on"), f"{name} on <{tag}>"
            assert not browser_url(value).startswith(("javascript:", "vbscript:", "data:text", "data:image/svg")), value
            if name == "href":
                assert tag == "a" and browser_url(value).startswith(LINK_SCHEMES), f"link to {value[:200]!r}"
            if name == "src":
                assert tag == "img" and browser_url(value).startswith(IMAGE_SOURCES), f"image from {value[:200]!r}"
            if name == "style":
                assert tag in ("th", "td") and re.fullmatch(r"text-align:\s*(left|right|center);?", value), value
            if name == "class":
                assert tag == "code" and value.startswith("language-"), value
    assert images is None or sum(tag == "img" for tag, _ in doc.tags) == images
    return doc


def words(text: str) -> set[str]:
    """The words of ``text``; percent-escapes decoded, as markdown-it shows the URLs it links."""
    return set(re.findall(r"\w+", urllib.parse.unquote(text)))


def spaced(text: str) -> str:
    return " ".join(text.split())


# --- the corpus ---------------------------------------------------------------------------------

def test_the_corpus_is_big_and_varied():
    ids = [c["id"] for c in CORPUS]
    assert len(ids) == len(set(ids)) and len(CORPUS) >= 150
    kinds = [c["kind"] for c in CORPUS]
    assert kinds.count("markdown") >= 120 and {"literal", "code", "fence"} <= set(kinds)
    assert sum(len(source(c)) > 20_000 for c in CORPUS) >= 5


@pytest.mark.parametrize("case", [c for c in CORPUS if c["kind"] == "markdown"], ids=lambda c: c["id"])
def test_written_markdown_renders_inert_in_two_parsers(case):
    text = source(case)
    started = time.process_time()
    written = markdown_text(text)
    assert time.process_time() - started < 3, "writing must stay linear"
    assert "\r" not in written and "\x00" not in written
    shown = words(Rendered(markdown_html(text)).visible)  # what the answer shows in the notebook
    for name, render in renderers().items():
        doc = assert_inert(render(written), images=case.get("images", 0))
        missing = shown - words(doc.visible)
        assert not missing, f"{name} lost {sorted(missing)[:20]}"
        for expected in case.get("visible", []):
            assert spaced(expected) in spaced(doc.visible), f"{name}: {expected!r} not in {spaced(doc.visible)[:400]!r}"
        assert set(case.get("links", [])) <= set(doc.hrefs()), (name, doc.hrefs())


@pytest.mark.parametrize("case", [c for c in CORPUS if c["kind"] == "literal"], ids=lambda c: c["id"])
def test_literal_text_shows_exactly_as_written(case):
    written = markdown_literal(case["input"])
    for name, render in renderers().items():
        doc = assert_inert(render(written))
        assert spaced(doc.visible) == spaced(case["input"]), name
        assert {tag for tag, _ in doc.tags} <= {"p", "br", "a"}, (name, doc.tags)  # a: a bare URL, linkified


@pytest.mark.parametrize("case", [c for c in CORPUS if c["kind"] == "code"], ids=lambda c: c["id"])
def test_a_code_span_holds_exactly_its_text(case):
    written = markdown_code(case["input"])
    for name, render in renderers().items():
        doc = assert_inert(render(written))
        assert [tag for tag, _ in doc.tags] == ["p", "code"], (name, written)
        assert doc.visible.strip("\n") == case["input"].replace("\n", " "), (name, written)


@pytest.mark.parametrize("case", [c for c in CORPUS if c["kind"] == "fence"], ids=lambda c: c["id"])
def test_a_fence_holds_exactly_its_text(case):
    written = markdown_fence(case["input"], "text")
    body = case["input"].replace("\r\n", "\n").replace("\r", "\n").removesuffix("\n")
    for name, render in renderers().items():
        doc = assert_inert(render(written))
        assert [tag for tag, _ in doc.tags] == ["pre", "code"], (name, written)
        assert doc.visible == (body + "\n" if body else "") + "\n", (name, written)  # the last: after </pre>


# Pieces of Markdown, HTML and URLs that interact: spliced at random (seeded), they make inputs
# no hand-written case thought of. A bare URL eating a code span's fence was found this way.
FRAGMENTS = ["`", "``", "```", "~~~", "\\", "\\`", "![", "[", "]", "(", ")", "<", ">", "&", "#", "&#33;", "&#91;",
             "&lt;", "\n", "\n\n", "    ", "- ", "1. ", "> ", "|", "|---|---|\n", "---", "===", "*", "**", "_", "~~",
             "!", ":", "$", "\"", "x", " ", "\t", "\r", "\x00", "<b>", "<div>", "</div>", "<!--", "-->",
             f"https://{ATTACKER}/p.png", "http://", "www.x.example", "mailto:a@b.example", "ftp://f.example/",
             f"<img src=https://{ATTACKER}/i.png>", f"`<img src=https://{ATTACKER}/c.png>`", "javascript:alert(1)",
             "<http://a.example/>", f"[r]: https://{ATTACKER}/r.png\n", "![x][r]"]


@pytest.mark.parametrize("seed", range(4))
def test_random_splices_of_hostile_fragments_render_inert(seed):
    rng = random.Random(seed)
    for _ in range(150):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 40)))
        written = markdown_text(text)
        for name, render in renderers().items():
            try:
                assert_inert(render(written))
            except AssertionError as error:
                raise AssertionError(f"{name}: {text!r} was written as {written!r}") from error


def test_the_examples_from_the_issue():
    for n, text in enumerate(["`one`` ![x](https://e.example/1.png)", "\\`![x](https://e.example/2.png)`",
                              "before ```![x](https://e.example/3.png) after"], 1):
        written = markdown_text(text)
        assert f"\\[image: x `https://e.example/{n}.png`\\]" in written
        for render in renderers().values():
            assert "<img" not in render(written)


# --- readable for the normal case ---------------------------------------------------------------

ANSWER = """# Results

The run took **3 steps** and *one* retry (see `run.log`); snake_case names stay as they are.

- first point
- second point, with a [link](https://docs.example/page)
  1. nested
  2. list

> A quote.

```python
print("hello")
```

| name | value |
|:-----|------:|
| a    | 1     |
"""


def test_a_normal_answer_stays_readable():
    """All that changes is how the link's address and the table's rows are spelled."""
    assert markdown_text(ANSWER) == (ANSWER.replace("(https://docs.example/page)", "(<https://docs.example/page>)")
                                     .replace("|:-----|------:|\n| a    | 1     |\n", "| :-- | --: |\n| a | 1 |"))


@pytest.mark.parametrize("text", [
    ANSWER,
    "Setext\n======\n\nline  \nbreak and a\\\nbackslash break\n\n***\n\n~~~\n```\n~~~\n\n# C# ###\n\n## \\#",
    "1. one\n\n   para\n\n2. two\n\n* star\n* list\n\n+ plus\n\n7) seven\n8) eight",
    "***both*** **strong *em* strong** ~~gone~~ <https://auto.example/> & &amp; &copy; 50% $5 C:\\dir\\",
    "> one\n>> two\n\n> ```\n> code\n> ```\n\n| a | b |\n|---|---|\n| `x` | **y** |",
])
def test_benign_markdown_renders_the_same_after_writing(text):
    """Rewriting changes how the Markdown is spelled, not what it shows."""
    render = renderers()["mistune"]
    assert render(markdown_text(text)) == render(text)


# --- exports ------------------------------------------------------------------------------------

HOSTILE = [source(c) for c in CORPUS if c["kind"] == "markdown" and len(source(c)) < 2_000]


def hostile_session() -> bettong_nb.Session:
    """A session whose answers, thinking, tool name, arguments and denial reason all hold the corpus."""

    def lookup(query: str) -> str:
        """Look something up."""
        return f"found ![r](https://{ATTACKER}/result.png) for {query}"

    def denied(request) -> Deny | bool:
        return Deny(f"no ![d](https://{ATTACKER}/reason.png) <img src=https://{ATTACKER}/reason2.png>") \
            if request.tool == "lookup" and "deny" in json.dumps(request.args) else True

    half = len(HOSTILE) // 2
    turns = [
        Response(content=[{"type": "thinking", "text": f"hmm ![t](https://{ATTACKER}/thinking.png)"},
                          {"type": "tool_use", "id": "c1", "name": "lookup",
                           "input": {"query": f"` ![a](https://{ATTACKER}/args.png) `"}},
                          {"type": "tool_use", "id": "c2", "name": "lookup", "input": {"query": "deny"}},
                          {"type": "tool_use", "id": "c3", "name": f"x` ![n](https://{ATTACKER}/name.png) `",
                           "input": {}}],
                 stop_reason="tool_use", model="scripted"),
        "\n\n".join(HOSTILE[:half]),
        "\n\n".join(HOSTILE[half:]),
    ]
    agent = bettong_nb.agent(provider=Scripted(turns), capabilities=[{"id": "look", "tools": [bettong_nb.tool(lookup)]}],
                             approve_fn=denied)
    chat = agent.session()
    chat.run(f"Find it ![p](https://{ATTACKER}/prompt.png)")
    chat.run("And the rest?")
    return chat


def test_exported_markdown_and_notebook_cells_render_inert(tmp_path):
    chat = hostile_session()
    written = chat.export(tmp_path / "chat.md").read_text()
    notebook = json.loads(chat.export(tmp_path / "chat.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]
    for name, render in renderers().items():
        for text in [written, *cells]:
            # an answer holds the corpus' data: image; <details> is the export's own, for the system prompt
            assert_inert(render(text), images=None, ours=frozenset({"details", "summary"}))
        shown = Rendered(render(written)).visible
        for piece in ("thinking.png", "args.png", "reason.png", "reason2.png", "name.png", "prompt.png", "result.png"):
            assert f"{ATTACKER}/{piece}" in shown, (name, piece)  # shown as text, never fetched
    assert "lookup" in written and "denied" in written


# --- in a real browser: JupyterLab renders the exported notebook and fetches nothing ------------

@pytest.mark.browser
def test_an_exported_notebook_of_hostile_answers_fetches_nothing_in_jupyterlab(tmp_path):
    from support.browser import JupyterLab, chromium, open_notebook

    root = tmp_path / "root"
    root.mkdir()
    path = hostile_session().export(root / "chat.ipynb")
    notebook = json.loads(path.read_text())
    # a control the sanitiser never saw: it proves the page would notice a fetch and a script link
    notebook["cells"].append({"cell_type": "markdown", "id": "control", "metadata": {},
                              "source": "![c](https://control.example/fetched.png) [j](javascript:void(0))"})
    path.write_text(json.dumps(notebook))
    lab = JupyterLab(root, tmp_path / "state").start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            outside: list[str] = []
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(lab.url)
                       else (outside.append(route.request.url), route.abort()))
            open_notebook(page, lab, "chat.ipynb")
            markdown = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown")
            markdown.last.wait_for()
            count = sum(c["cell_type"] == "markdown" for c in notebook["cells"])
            assert markdown.count() == count
            for index in range(count):  # every cell rendered in view, as a reader scrolls
                markdown.nth(index).scroll_into_view_if_needed()
                page.wait_for_timeout(100)
            page.wait_for_timeout(500)
            found = page.evaluate("""() => {
                const out = [];
                for (const el of document.querySelectorAll('.jp-RenderedMarkdown *')) {
                    for (const attr of el.attributes) if (/^on/i.test(attr.name)) out.push(el.tagName + ' ' + attr.name);
                    if (el.tagName === 'A' && el.getAttribute('href') && !el.getAttribute('href').startsWith('#')) {
                        const protocol = new URL(el.href, location.href).protocol;
                        if (!['http:', 'https:', 'mailto:'].includes(protocol)) out.push('a ' + el.href);
                    }
                    if (el.tagName === 'IMG' && !el.src.startsWith('data:')) out.push('img ' + el.src);
                    if (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'SVG', 'VIDEO', 'AUDIO'].includes(el.tagName.toUpperCase()))
                        out.push(el.tagName);
                }
                return out;
            }""")
            assert found == ["img https://control.example/fetched.png"]  # the control's javascript: link is
            assert outside == ["https://control.example/fetched.png"]     # removed by JupyterLab itself
            shown = markdown.evaluate_all("all => all.map(cell => cell.textContent)")
            assert f"`one`` [image: x https://{ATTACKER}/mismatch.png]" in shown[1] and "Turn 2" in shown[2]
    finally:
        lab.stop()
