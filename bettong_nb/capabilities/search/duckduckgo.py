"""DuckDuckGo: the open web, no API key. The tool is ``duckduckgo_search``.

    from bettong_nb import capabilities as caps
    agent = bettong_nb.deepseek(capabilities=[caps.duckduckgo()])

It reads DuckDuckGo's no-JavaScript results page, which sometimes answers a program with a
bot challenge instead of results; the model is told so (and can use another source) rather
than being told there were no results.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

from .base import RESULTS_TAIL, SearchCapability, SearchError, Source, SourceTransport, seconds

__all__ = ["duckduckgo", "parse_duckduckgo", "unwrap_duckduckgo_url"]

SOURCE = Source(
    "DuckDuckGo", "duckduckgo", "https://html.duckduckgo.com",
    f"Search the open web with DuckDuckGo: web pages, news, documentation, anything recent. {RESULTS_TAIL}",
    "duckduckgo_search searches the open web through DuckDuckGo. Use it for current information and "
    "anything you are not sure of, and cite the URLs you relied on.")
# The no-JS page is meant for browsers; one that does not look like one is challenged sooner.
HEADERS = {
    "User-Agent": ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "Chrome/124.0.0.0 Safari/537.36"),
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.9",
}
CHALLENGE = ("DuckDuckGo answered with a bot challenge (its anomaly / captcha page) instead of search results, "
             "so this search could not be done. This is not 'no results': use another search source, or try "
             "DuckDuckGo again later.")


def unwrap_duckduckgo_url(href: str | None) -> str:
    """The real address behind a result link: ``//duckduckgo.com/l/?uddg=<encoded>`` is
    decoded, a protocol-relative link gets ``https:``, and DuckDuckGo's own ad and
    navigation links give ``""``.
    """
    href = (href or "").strip()
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    own = parts.netloc == "" or parts.netloc == "duckduckgo.com" or parts.netloc.endswith(".duckduckgo.com")
    if own and parts.path.startswith("/l/"):
        return (parse_qs(parts.query).get("uddg") or [""])[0]
    if parts.scheme not in ("http", "https") or (own and parts.path.startswith("/y.js")):
        return ""
    return href


class _ResultsPage(HTMLParser):
    """Walks the page once: result blocks, their title link and snippet, and the markers of
    a challenge page or of a genuine "no results" answer."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[dict] = []
        self.challenge = False
        self.no_results = False
        self.results_section = False
        self._current: dict | None = None
        self._in_ad = False
        self._capture: tuple[str, str, list[str]] | None = None  # (field, tag, text parts)
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        classes = set(attr.get("class", "").split())
        if self._capture is not None:
            if tag == self._capture[1]:
                self._depth += 1
            return
        if attr.get("id") == "challenge-form" or "anomaly.js" in attr.get("action", "") \
                or any(c.startswith("anomaly-modal") for c in classes):
            self.challenge = True
        if classes & {"no-results", "result--no-result"}:
            self.no_results = True
        if attr.get("id") == "links" or "results" in classes:
            self.results_section = True
        if "result" in classes:  # a new result block: what follows belongs to it
            self._current, self._in_ad = None, "result--ad" in classes
        if "result__a" in classes:
            self._current = {"title": "", "url": unwrap_duckduckgo_url(attr.get("href")), "snippet": None}
            if not self._in_ad:
                self.results.append(self._current)
            self._start("title", tag)
        elif "result__snippet" in classes and self._current is not None and self._current["snippet"] is None:
            self._start("snippet", tag)

    def _start(self, name: str, tag: str) -> None:
        self._capture, self._depth = (name, tag, []), 1

    def handle_endtag(self, tag: str) -> None:
        if self._capture is None or tag != self._capture[1]:
            return
        self._depth -= 1
        if self._depth == 0:
            name, _, parts = self._capture
            self._current[name] = " ".join("".join(parts).split())  # type: ignore[index]
            self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._capture[2].append(data)
        elif " ".join(data.split()) == "No results.":
            self.no_results = True


def _read(page: str) -> _ResultsPage:
    parser = _ResultsPage()
    parser.feed(page)
    parser.close()
    return parser


def parse_duckduckgo(page: str, *, status: int = 200) -> list[dict]:
    """``[{"title", "url", "snippet"}]`` from a results page, in page order, ads left out.

    A challenge page raises :class:`SearchError` saying so; so does a page with neither
    results nor DuckDuckGo's "no results" marker, since calling that "no results" would be
    a guess. ``status`` 202 is how DuckDuckGo answers a client it has flagged.
    """
    parser = _read(page)
    results = [r for r in parser.results if r["url"]]
    if results:
        return results
    if parser.challenge or status == 202:
        raise SearchError(CHALLENGE, source=SOURCE.name, status=status)
    if parser.no_results or parser.results_section:
        return []
    raise SearchError(f"DuckDuckGo answered (HTTP {status}) with a page that has no search results on it and "
                      "is not its 'no results' page; it may be blocking this client or have changed its layout. "
                      "Use another search source.", source=SOURCE.name, status=status)


def duckduckgo(*, max_results: int = 5, snippet_length: int = 300, timeout: float = 15.0,
               base_url: str | None = None, instructions: str | None = None,
               description: str | None = None) -> SearchCapability:
    """The open web through DuckDuckGo's no-JS page (``/html/`` on html.duckduckgo.com).

    No key needed. ``instructions=""`` sends none; ``base_url`` points it elsewhere (tests).
    """
    timeout = seconds(timeout)
    endpoint = SOURCE.endpoint(base_url, "/html/")

    async def backend(*, query: str, max_results: int) -> list[dict]:
        transport = SourceTransport(SOURCE, timeout=timeout)
        response = await transport.request("GET", endpoint, params={"q": query}, headers=HEADERS, check=False)
        status, page = response.status_code, response.text
        if not 200 <= status < 300:
            if _read(page).challenge:
                raise SearchError(CHALLENGE, source=SOURCE.name, status=status)
            raise transport.status_error(status, page)
        return parse_duckduckgo(page, status=status)[:max_results]  # the page has what it has

    return SOURCE.capability(backend, max_results=max_results, snippet_length=snippet_length,
                             instructions=instructions, description=description)
