"""Rendering model and tool text: HTML that fetches and runs nothing (checked tag by tag and
in a real browser), terminal text without control sequences, and text that always encodes.

The corpora are tests/corpora/render_html.jsonl (Markdown and HTML answers) and
tests/corpora/terminal_text.jsonl; every case is checked against the same rules, and some
also say what must survive (visible text, links, data images)."""

from __future__ import annotations

import html
import html
import json
import time

import pytest

from bettong_nb.core import approvals
from bettong_nb.safety.sanitize import clean_text, html_answer, markdown_html, safe_link, terminal_text
from support import TESTS
from support.html_checks import Document, browser_url

CORPORA = TESTS / "corpora"
RENDER = [json.loads(line) for line in (CORPORA / "render_html.jsonl").read_text().splitlines() if line]
TERMINAL = [json.loads(line) for line in (CORPORA / "terminal_text.jsonl").read_text().splitlines() if line]

# What a browser may be handed: tags that load nothing by themselves, and per tag the
# attributes that cannot run script or name a resource to fetch.
SAFE_TAGS = set("p div span br hr h1 h2 h3 h4 h5 h6 b i u s em strong small mark del ins sub sup kbd samp var tt "
                "dfn abbr cite q blockquote pre code ul ol li dl dt dd table caption thead tbody tfoot tr td th "
                "figure figcaption details summary section article header footer aside ruby rt rp wbr time a img".split())
SAFE_ATTRIBUTES = {"title", "alt", "width", "height", "colspan", "rowspan", "scope", "start", "reversed", "type",
                   "value", "open", "href", "src", "rel", "class", "style"}
IMAGE_TYPES = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,", "data:image/webp;base64,")


def assert_inert(fragment: str) -> Document:
    """Every tag and attribute of ``fragment`` is one that neither fetches nor runs anything."""
    doc = Document(fragment)
    for tag, attrs in doc.tags:
        assert tag in SAFE_TAGS, f"unsafe tag <{tag}> in {fragment[:300]!r}"
        for name, value in attrs.items():
            assert name in SAFE_ATTRIBUTES and not name.startswith("on"), f"attribute {name} on <{tag}>"
            value = value or ""
            if name == "href":
                assert tag == "a" and browser_url(value).startswith(("http:", "https:", "mailto:", "#")), value
            if name == "src":
                assert tag == "img" and browser_url(value).startswith(IMAGE_TYPES), value
            if name == "style":
                assert tag in ("td", "th") and "url" not in value.lower() and value.startswith("text-align:"), value
            if name == "class":
                assert tag == "code" and value.startswith("language-"), value
            assert "javascript:" not in browser_url(value) and "url(" not in value.lower()
    raw = fragment.lower()
    for marker in ("<script", "<style", "<iframe", "<svg", "<math", "<object", "<embed", "<link", "<meta", "<base",
                   "<form", "<!--", "<![cdata["):  # as markup; escaped text reads &lt;script
        assert marker not in raw, marker
    return doc


def render(case: dict) -> str:
    return (markdown_html if case["kind"] == "markdown" else html_answer)(case["input"])


def test_the_render_corpus_is_big_and_varied():
    ids = [c["id"] for c in RENDER]
    assert len(ids) == len(set(ids)) and len(RENDER) >= 150
    assert sum(c["kind"] == "markdown" for c in RENDER) >= 100 and sum(c["kind"] == "html" for c in RENDER) >= 60


@pytest.mark.parametrize("case", RENDER, ids=[c["id"] for c in RENDER])
def test_render_corpus(case):
    started = time.process_time()
    out = render(case)
    assert time.process_time() - started < 3, "rendering must stay linear"
    doc = assert_inert(out)
    visible = "".join(doc.text)
    for text in case.get("visible", []):
        assert text in visible, f"{text!r} not shown: {visible[:500]!r}"
    for text in case.get("contains", []):
        assert text in out
    for text in case.get("absent", []):
        assert text not in out
    hrefs = [a["href"] for tag, a in doc.tags if tag == "a"]
    assert set(case.get("links", [])) <= set(hrefs), hrefs
    assert sum(tag == "img" for tag, _ in doc.tags) == case.get("images", 0)
    assert all(a.get("rel") == "noopener noreferrer nofollow" for tag, a in doc.tags if tag == "a")


def test_the_examples_from_the_issue():
    for text in ["`one`` ![x](https://e.example/1.png)", "\\`![x](https://e.example/2.png)`",
                 "before ```![x](https://e.example/3.png) after"]:
        out = markdown_html(text)
        assert "<img" not in out and "[image: x &lt;https://e.example/" in out


def test_safe_link_reads_urls_like_a_browser():
    assert safe_link(" https://ok.example/") == "https://ok.example/"
    assert safe_link("HTTPS://OK.EXAMPLE/") == "HTTPS://OK.EXAMPLE/"
    assert safe_link("#part") == "#part"
    for url in ["java\tscript:alert(1)", "\x00javascript:x", "data:text/html,x", "vbscript:x", "//ok.example/x",
                "relative/path", "ftp://host/x", "file:///etc/passwd", ""]:
        assert safe_link(url) is None, url


def test_markdown_that_is_only_prose_round_trips():
    out = markdown_html("Plain *prose* with a [link](https://ok.example/) and `code` — ünïcödé.")
    assert out == ('<p>Plain <em>prose</em> with a <a href="https://ok.example/" rel="noopener noreferrer nofollow">'
                   'link</a> and <code>code</code> — ünïcödé.</p>\n')


# --- in a real browser: nothing is requested, no script runs, every URL is one the browser deems safe

@pytest.fixture(scope="module")
def browser_page():
    from support.browser import chromium

    with chromium() as browser:
        page = browser.new_page()
        yield page
        page.close()


def test_the_whole_render_corpus_in_chromium_fetches_and_runs_nothing(browser_page):
    page = browser_page
    requests, dialogs = [], []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.abort()))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    body = "".join(f'<section data-case="{html.escape(c["id"])}">{render(c)}</section>'
                   for c in RENDER if len(c["input"]) < 20_000)
    # controls, not sanitised: they prove the page would notice a fetch and a script
    control = ('<img src="https://control.example/fetched.png">'
               '<img src="data:image/png;base64,AA==" onerror="alert(\'control\')">')
    page.set_content(f"<!doctype html><html><head></head><body>{control}{body}</body></html>", wait_until="load")
    page.wait_for_timeout(300)
    found = page.evaluate("""() => {
        const out = [];
        for (const el of document.querySelectorAll('*')) {
            for (const attr of el.attributes) {
                if (/^on/i.test(attr.name)) out.push(el.tagName + ' ' + attr.name);
            }
            if (typeof el.href === 'string' && el.href && !el.getAttribute('href').startsWith('#')) {
                const protocol = new URL(el.href, 'https://base.example/').protocol;
                if (!['http:', 'https:', 'mailto:'].includes(protocol)) out.push(el.tagName + ' ' + el.href);
            }
        }
        for (const img of document.images) {
            if (!img.currentSrc.startsWith('data:image/')) out.push('img ' + img.currentSrc);
        }
        return out;
    }""")
    assert found == ["IMG onerror", "img https://control.example/fetched.png"]
    assert dialogs == ["control"] and requests == ["https://control.example/fetched.png"]
    assert page.evaluate("() => document.querySelectorAll('a[href], img[src], table, pre').length") > 25


# --- terminals ----------------------------------------------------------------------------------

UNSAFE_FOR_TERMINALS = {*map(chr, range(0x00, 0x09)), *map(chr, range(0x0B, 0x20)), *map(chr, range(0x7F, 0xA0)),
                        "\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def test_the_terminal_corpus_is_big():
    ids = [c["id"] for c in TERMINAL]
    assert len(ids) == len(set(ids)) and len(TERMINAL) >= 50


@pytest.mark.parametrize("case", TERMINAL, ids=[c["id"] for c in TERMINAL])
def test_terminal_corpus(case):
    out = terminal_text(case["text"])
    assert not UNSAFE_FOR_TERMINALS & set(out), [c for c in out if c in UNSAFE_FOR_TERMINALS]
    if "expect" in case:
        assert out == case["expect"]
    for text in case.get("keeps", []):
        assert text in out
    for text in case.get("drops", []):
        assert text not in out
    assert terminal_text(out) == out


def test_clean_terminal_text_is_returned_as_is():
    text = "ordinary output\twith tabs\nand lines — ünïcödé 你好 😀"
    assert terminal_text(text) is text


def test_terminal_text_is_linear_on_hostile_input():
    for text in ["\x1b]" * 200_000, "\x1b[" * 200_000, "\x1bP" * 200_000, "\x9d" * 300_000, "\r" * 300_000]:
        started = time.process_time()
        out = terminal_text(text)
        assert time.process_time() - started < 2 and not UNSAFE_FOR_TERMINALS & set(out)


# --- text that always encodes -------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("plain ascii", "plain ascii"),
    ("ünïcödé 你好 😀", "ünïcödé 你好 😀"),
    ("lone \ud800 high", "lone \ufffd high"),
    ("lone \udfff low", "lone \ufffd low"),
    ("\udcff\udcfe escaped bytes", "\ufffd\ufffd escaped bytes"),
    ("pair \ud83d\ude00 spelled in halves", "pair 😀 spelled in halves"),
    ("reversed \ude00\ud83d pair", "reversed \ufffd\ufffd pair"),
    ("\ud800", "\ufffd"),
    ("end \ud83d", "end \ufffd"),
    ("", ""),
])
def test_clean_text(text, expected):
    out = clean_text(text)
    assert out == expected
    json.dumps({"content": out}, ensure_ascii=False).encode("utf-8")  # what a request body does
    out.encode("utf-8")


def test_clean_text_returns_clean_text_itself():
    for text in ["ascii", "ünïcödé", "😀" * 10]:
        assert clean_text(text) is text
TROJAN = {  # what a model might write, and how a person must see it
    "rm -rf /tmp/\u202eexe.sh": "rm -rf /tmp/⟨U+202E⟩exe.sh",
    "if access_level != \"user\u202e \u2066// Check if admin\u2069 \u2066\":": (
        "if access_level != \"user⟨U+202E⟩ ⟨U+2066⟩// Check if admin⟨U+2069⟩ ⟨U+2066⟩\":"),
    "a\u200bb\u200dc\ufeffd\u2060e\u00adf": "a⟨U+200B⟩b⟨U+200D⟩c⟨U+FEFF⟩d⟨U+2060⟩e⟨U+00AD⟩f",
    "curl x\rrm -rf ~": "curl x⟨U+000D⟩rm -rf ~",
    "echo \x1b[8mhidden\x1b[0m": "echo ⟨U+001B⟩[8mhidden⟨U+001B⟩[0m",
    "tag\U000e0041\U000e007f": "tag⟨U+E0041⟩⟨U+E007F⟩",
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2067\u2068": "".join(
        f"⟨U+{ord(c):04X}⟩" for c in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2067\u2068"),
    "plain text, tabs\tand\nnewlines, héllo 日本": "plain text, tabs\tand\nnewlines, héllo 日本",
}


@pytest.mark.parametrize("text", list(TROJAN))
def test_what_a_person_judges_shows_every_invisible_character(text):
    from bettong_nb.notebook.display import decision_text
    from bettong_nb.records.terminal import args_preview

    from bettong_nb.safety.sanitize import visible_controls

    assert visible_controls(text) == TROJAN[text]
    request = approvals.ApprovalRequest("run_shell", {"command": text}, "shell", "c1")
    for shown in (decision_text(request, "allowed"), args_preview({"command": text})):
        assert not any(c in shown for c in "\u202e\u2066\u200b\r\x1b"), shown
        if text.isascii():  # json writes controls as escapes (\r, \u001b): visible already
            assert "\\r" in shown or "\\u001b" in shown
        elif text != list(TROJAN)[-1]:
            assert "⟨U+" in shown


def test_the_terminal_prompt_shows_a_bidi_control(monkeypatch, capsys):
    monkeypatch.setattr("builtins.input", lambda: "n")
    request = approvals.ApprovalRequest("run_shell", {"command": "ls \u202eexe.sh"}, "shell", "c1")
    approvals.ask_in_terminal(request)
    assert "⟨U+202E⟩" in capsys.readouterr().out


def test_the_approval_widget_shows_a_bidi_control():
    import asyncio

    from bettong_nb.notebook.approvals import _Prompt

    loop = asyncio.new_event_loop()
    try:
        request = approvals.ApprovalRequest("run\u202e_shell", {"command": "ls \u202eexe.sh"}, "sh\u2066ell", "c1")
        prompt = _Prompt(request, loop, loop.create_future())
        header = prompt.widget.children[0].value
        assert header.count("⟨U+202E⟩") == 2 and "⟨U+2066⟩" in header
        assert not any(c in header for c in "\u202e\u2066")
        prompt.close()
    finally:
        loop.close()
