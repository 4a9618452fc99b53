"""Reading rendered HTML as a browser would: its tags, attributes and visible text, and URLs.

    doc = Document(fragment); doc.tags, doc.text
    browser_url(" JavaScript:x")   # 'javascript:x'
"""

from __future__ import annotations

import html.parser

__all__ = ["Document", "browser_url"]


class Document(html.parser.HTMLParser):
    """Tags, attributes and visible text of a rendered fragment."""

    def __init__(self, fragment: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(fragment)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def unknown_decl(self, data):  # <![CDATA[ ... ]]> must never reach the output as markup
        raise AssertionError(f"declaration in the output: {data!r}")

    def handle_comment(self, data):
        raise AssertionError(f"comment in the output: {data!r}")


def browser_url(value: str) -> str:
    """How a browser reads an attribute URL: controls and spaces trimmed, tabs and newlines removed."""
    return "".join(c for c in value if c not in "\t\n\r").strip("".join(map(chr, range(33)))).lower()
