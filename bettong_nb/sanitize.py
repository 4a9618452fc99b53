"""Model and tool text made safe for the place it is shown: a browser, a terminal, a request.

    markdown_html("**hi** ![x](https://evil.example/p.png)")   # '<p><strong>hi</strong> [image: x ...]</p>'
    html_answer('<p onclick="x()">hi</p><script>...</script>') # '<p>hi</p>'
    terminal_text("ok\\x1b]52;c;ZXZpbA==\\x07")                  # 'ok'
    clean_text("bad \\ud800 surrogate")                         # 'bad \\ufffd surrogate'

Browser. :func:`markdown_html` parses Markdown with mistune (the real CommonMark-style
parser, so what is code is what the parser says is code) through a renderer that never
emits a fetching image, a raw HTML fragment or a script link; :func:`html_answer` takes
HTML. Both end in the same allow-list pass (:func:`allowed_html`), which rebuilds the
document from tags and attributes it knows, every text and attribute value re-escaped:

* tags: structural and inline text tags only (``p``, headings, lists, tables, ``a``,
  ``img``, ``code``, ``pre``, ``details`` ...). ``script``, ``style``, ``iframe``,
  ``object``, ``embed``, ``svg``, ``math``, ``template``, ``noscript``, ``textarea``,
  ``audio``/``video``/``picture`` and the like go with their content; ``link``, ``meta``,
  ``base``, ``form`` controls and unknown tags go, their text stays. Comments,
  ``<!...>``, ``<?...>`` go.
* attributes: a short list per tag; ``on*``, ``style`` (bar ``text-align`` on table
  cells), ``srcset``, ``background``, ``xlink:href``, ``action``, ``formaction``,
  ``ping``, ``poster``, ``id``, ``class`` (bar ``language-*`` on ``code``) never pass.
* ``href``: ``http:``, ``https:``, ``mailto:`` or ``#fragment`` only, judged the way a
  browser reads the URL (entities decoded, tabs and newlines removed, leading controls
  and spaces stripped, any letter case); links get ``rel="noopener noreferrer nofollow"``.
* ``img src``: only ``data:image/{png,jpeg,gif,webp};base64,...``, which loads nothing.
  A Markdown image with any other URL becomes the text ``[image: alt <url>]``.
* the output is well nested: stray end tags are dropped and open tags closed, so an
  answer cannot close the container it is shown in.

The pass is a linear tokenizer of its own rather than ``html.parser``, which takes
quadratic time on malformed tags in the Pythons we support (150 KB of ``<a\\n`` took
minutes). Safety does not depend on tokenizing like a browser: whatever it decides,
nothing reaches the output but allow-listed tags and escaped text.

Terminal. :func:`terminal_text` removes escape sequences (CSI, OSC — titles, OSC 52
clipboard writes, hyperlinks —, DCS/SOS/PM/APC strings, two-byte ESC sequences, their
8-bit C1 forms), the other C0 and C1 controls and DEL (tab and newline stay; a carriage
return becomes a newline, so nothing can be overwritten on screen; backspaces go) and the
bidi controls U+061C, U+200E, U+200F, U+202A–U+202E and U+2066–U+2069.

Requests. :func:`clean_text` replaces what UTF-8 cannot encode (lone surrogates, from a
JSON ``"\\ud800"`` escape or a decoded file name) with U+FFFD, keeping valid surrogate
pairs as the character they spell; clean text comes back as is, at the cost of an
``isascii()`` or an encode.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any, Callable

from .images import MEDIA_TYPES

__all__ = ["markdown_html", "html_answer", "allowed_html", "safe_link", "terminal_text", "clean_text", "clean"]

# --- URLs ---------------------------------------------------------------------------------------

_URL_NOISE = re.compile(r"[\t\n\r]")  # browsers drop these anywhere in a URL
_LINK_SCHEMES = ("http:", "https:", "mailto:")
_DATA_IMAGE = re.compile(r"data:(?:" + "|".join(re.escape(t) for t in MEDIA_TYPES)
                         + r");base64,[A-Za-z0-9+/=\s]*", re.I)


def _browser_url(url: str) -> str:
    """The URL a browser would act on: controls and spaces trimmed, tabs and newlines gone."""
    return _URL_NOISE.sub("", url).strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f"
                                         "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")


def safe_link(url: str) -> str | None:
    """``url`` when a link to it is safe to show (``http:``, ``https:``, ``mailto:``,
    ``#fragment``), else None. ``url`` is the attribute's value with entities decoded."""
    seen = _browser_url(url)
    if seen.startswith("#") or seen.lower().startswith(_LINK_SCHEMES):
        return seen
    return None


def _safe_image(url: str) -> str | None:
    seen = _browser_url(url)
    return seen if _DATA_IMAGE.fullmatch(seen) else None


# --- the allow-list pass ------------------------------------------------------------------------

_NUMBER = re.compile(r"\d{1,4}")
_ATTRIBUTES: dict[str, dict[str, Callable[[str], str | None]]] = {}


def _allow(tags: str, **checks: Callable[[str], str | None]) -> None:
    for tag in tags.split():
        _ATTRIBUTES[tag] = {"title": str, **checks}


def _matching(pattern: str) -> Callable[[str], str | None]:
    compiled = re.compile(pattern, re.I)
    return lambda value: value.strip() if compiled.fullmatch(value.strip()) else None


def _number(value: str) -> str | None:
    return value.strip() if _NUMBER.fullmatch(value.strip()) else None


def _flag(value: str) -> str:
    return ""


_allow("p div span br hr h1 h2 h3 h4 h5 h6 b i u s em strong small mark del ins sub sup kbd samp var "
       "tt dfn abbr cite q blockquote pre ul dl dt dd caption thead tbody tfoot tr figure figcaption "
       "summary section article header footer aside ruby rt rp wbr time")
_allow("code", **{"class": _matching(r"language-[A-Za-z0-9_+#.-]{1,40}")})
_allow("a", href=safe_link)
_allow("img", src=_safe_image, alt=str, width=_number, height=_number)
_allow("ol", start=_number, reversed=_flag, type=_matching(r"[1aAiI]"))
_allow("li", value=_number)
_allow("table")
_allow("td th", colspan=_number, rowspan=_number, scope=_matching(r"row|col|rowgroup|colgroup"),
       style=_matching(r"text-align:\s*(?:left|right|center)\s*;?"))
_allow("details", open=_flag)

_VOID = frozenset("area base br col embed hr img input link meta param source track wbr keygen".split())
# Dropped with everything inside: what they hold is code, a resource or another document.
_DROP_WITH_CONTENT = frozenset(
    "script style template iframe frame frameset object embed applet svg math noscript noembed noframes "
    "textarea select title head xmp plaintext audio video canvas picture map".split())
_REQUIRED = {"a": "href", "img": "src"}  # without it the tag is pointless (an <img> is dropped)

# One token per match; every branch consumes what it scanned, so a tag never closed runs
# to the end (as browsers drop it) and the whole pass stays linear.
_TOKENS = re.compile(r"""
    (?P<comment><!--(?:-?>|.*?(?:--!?>|\Z)))
  | (?P<bogus><(?:[!?]|/(?![A-Za-z]))[^>]*+>?)
  | (?P<tag></?(?P<name>[A-Za-z][^\s/>]*+)(?P<attrs>(?:[^>"']++|"[^"]*+(?:"|\Z)|'[^']*+(?:'|\Z))*+)>?)
  | (?P<text>[^<]++|<)
""", re.S | re.X)
_ATTR = re.compile(r"""([^\s"'>/=]++)(?:\s*=\s*(?:"([^"]*+)"?|'([^']*+)'?|([^\s>]++)))?""")


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _start_tag(name: str, raw_attrs: str) -> str | None:
    """The rebuilt start tag, or None when the tag cannot be kept."""
    checks = _ATTRIBUTES[name]
    kept: dict[str, str] = {}
    for match in _ATTR.finditer(raw_attrs):
        attr = match[1].lower()
        if attr in checks and attr not in kept:
            raw = next((v for v in match.groups()[1:] if v is not None), "")
            value = checks[attr](html.unescape(raw))
            if value is not None:
                kept[attr] = value
    if name in _REQUIRED and _REQUIRED[name] not in kept:
        return None
    if name == "a":
        kept["rel"] = "noopener noreferrer nofollow"
    parts = [name] + [attr if value == "" and checks.get(attr) is _flag else f'{attr}="{_escape(value)}"'
                      for attr, value in kept.items()]
    return "<" + " ".join(parts) + ">"


def allowed_html(fragment: str) -> str:
    """``fragment`` rebuilt from allow-listed tags and attributes only, well nested, every text
    and value escaped (see the module docstring)."""
    out: list[str] = []
    open_tags: list[str] = []
    opened: dict[str, int] = {}  # how many of each name are open: an end tag is checked in O(1)
    skipping: str | None = None  # inside a tag dropped with its content
    depth = 0
    for token in _TOKENS.finditer(fragment):
        if token["text"] is not None:
            if skipping is None:
                out.append(_escape(html.unescape(token["text"])))
            continue
        if token["tag"] is None:
            continue  # comments, <!doctype>, <?...>, </ followed by no name
        name = token["name"].lower()
        closing = token["tag"].startswith("</")
        if skipping is not None:
            if name == skipping:
                depth += -1 if closing else 1
                if depth == 0:
                    skipping = None
            continue
        if name in _DROP_WITH_CONTENT and not closing:
            if name not in _VOID and not token["attrs"].rstrip().endswith("/"):
                skipping, depth = name, 1
            continue
        if name not in _ATTRIBUTES:
            continue
        if closing:
            if opened.get(name):
                while open_tags:
                    top = open_tags.pop()
                    opened[top] -= 1
                    out.append(f"</{top}>")
                    if top == name:
                        break
            continue
        tag = _start_tag(name, token["attrs"]) if token["tag"].endswith(">") else None
        if tag is None:  # an <a> without a safe href keeps its text; an unclosed tag is dropped
            continue
        out.append(tag)
        if name not in _VOID:
            open_tags.append(name)
            opened[name] = opened.get(name, 0) + 1
    out.extend(f"</{name}>" for name in reversed(open_tags))
    return "".join(out)


def html_answer(text: str) -> str:
    """An answer the model wrote in HTML, safe to display: :func:`allowed_html`."""
    return allowed_html(text)


# --- Markdown -----------------------------------------------------------------------------------

@functools.cache
def _markdown() -> Callable[[str], str]:
    import mistune  # imported on first use: importing bettong_nb stays cheap

    class Renderer(mistune.HTMLRenderer):
        """Links only to safe URLs, images only from data URLs, raw HTML shown as text."""

        def link(self, text: str, url: str, title: str | None = None) -> str:
            target = safe_link(url)
            if target is None:  # the text, and the address as text, so nothing is lost
                return text if text == _escape(url) else f"{text} ({_escape(url)})"
            attrs = f' title="{_escape(title)}"' if title else ""
            return f'<a href="{_escape(target)}"{attrs}>{text}</a>'

        def image(self, text: str, url: str, title: str | None = None) -> str:
            alt = _escape(html.unescape(re.sub(r"<[^>]*>", "", text)))
            source = _safe_image(url)
            if source is None:
                return f"[image: {alt} &lt;{_escape(url)}&gt;]"
            return f'<img src="{_escape(source)}" alt="{alt}">'

        def text(self, text: str) -> str:  # mistune leaves entities (&copy;) undecoded
            return _escape(html.unescape(text))

        def inline_html(self, html_text: str) -> str:
            return _escape(html_text)

        def block_html(self, html_text: str) -> str:
            return f"<p>{_escape(html_text.strip())}</p>\n"

    return mistune.create_markdown(escape=True, renderer=Renderer(escape=True),
                                   plugins=["strikethrough", "table"])


def markdown_html(text: str) -> str:
    """Markdown (a model's answer, a tool result) as HTML that fetches and runs nothing.

    Text nested too deeply for the parser is shown escaped in a ``<pre>`` instead.
    """
    try:
        rendered = _markdown()(text)
    except RecursionError:
        return f"<pre>{_escape(text)}</pre>"
    return allowed_html(rendered)


# --- terminals ----------------------------------------------------------------------------------

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE_CHAR = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_TERMINAL = re.compile(
    r"(?P<newline>\r\n?)"
    r"|(?:\x1b\[|\x9b)[0-?]*+[ -/]*+[@-~]"                                    # CSI
    # OSC, DCS, SOS, PM, APC strings, when terminated; a body stops at the next introducer,
    # so a failed attempt never rescans what the next one reads (linear time)
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x90\x98\x9c-\x9f]*+(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*+[0-~]"                                                       # other ESC sequences
    f"|[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")


def terminal_text(text: str) -> str:
    """``text`` without anything a terminal would act on: escape sequences, controls other
    than tab and newline (a carriage return becomes a newline), bidi controls."""
    if not _UNSAFE_CHAR.search(text):
        return text
    return _TERMINAL.sub(lambda m: "\n" if m["newline"] else "", text)


# --- requests -----------------------------------------------------------------------------------

def clean_text(text: str) -> str:
    """``text`` with whatever UTF-8 cannot encode (lone surrogates) replaced by U+FFFD; a
    surrogate pair becomes the character it spells. Clean text is returned as is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clean(value: Any) -> Any:
    """:func:`clean_text` through a JSON-like value (a message, a block, decoded arguments):
    every string cleaned, the same object back when nothing needed it."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        items = [(clean(k), clean(v)) for k, v in value.items()]
        same = all(k is k2 and v is v2 for (k, v), (k2, v2) in zip(value.items(), items))
        return value if same else dict(items)
    if isinstance(value, list):
        items = [clean(v) for v in value]
        return value if all(a is b for a, b in zip(value, items)) else items
    return value
