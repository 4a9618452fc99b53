"""Wikipedia: encyclopaedic facts, no API key. The tool is ``wikipedia_search``.

    caps.wikipedia()               # en.wikipedia.org
    caps.wikipedia("lt")           # lt.wikipedia.org; the article URLs follow the edition
"""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import quote, urlsplit

from .base import RESULTS_TAIL, SearchCapability, SearchError, Source, dig, fetch_json, seconds, strip_tags

__all__ = ["wikipedia", "parse_wikipedia"]

SOURCE = Source(
    "Wikipedia", "wikipedia", "https://{language}.wikipedia.org",
    "Search Wikipedia ({host}) for encyclopaedic articles: people, places, history, science, definitions. "
    + RESULTS_TAIL,
    "wikipedia_search searches Wikipedia ({host}). Prefer it for settled facts - people, places, history, "
    "definitions - and cite the article URLs.")
# Wikimedia asks API clients to say who they are; generic library agents get throttled first.
HEADERS = {"User-Agent": "bettong_nb/0.1 (LLM agent library for Jupyter; python-httpx)", "Accept": "application/json"}
_LANGUAGE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")  # en, lt, simple, zh-yue, be-tarask


def _article_url(site: str, title: str) -> str:
    # Readable like Wikipedia's own links: spaces become _, and only what would end or
    # corrupt the URL (? # % ") is escaped, so "Who Framed Roger Rabbit?" still works.
    path = "".join(quote(ch) if ch in '?#%"' else ch for ch in title.replace(" ", "_"))
    return f"{site}/wiki/{path}"


def parse_wikipedia(body: object, site: str = "https://en.wikipedia.org") -> list[dict]:
    """``[{"title", "url", "snippet"}]`` from an ``action=query&list=search`` answer.

    Article URLs are built on ``site``, the edition that was searched.
    """
    site = site.rstrip("/")
    hits = dig(body, "query", "search")
    if not isinstance(hits, list):
        return []
    return [{"title": hit.get("title"),
             "url": _article_url(site, str(hit["title"])) if hit.get("title") else None,
             "snippet": strip_tags(hit.get("snippet"))}
            for hit in hits if isinstance(hit, dict)]


def wikipedia(language: str = "en", *, max_results: int = 5, snippet_length: int = 300, timeout: float = 15.0,
              base_url: str | None = None, instructions: str | None = None,
              description: str | None = None) -> SearchCapability:
    """Wikipedia's search, in the ``language`` edition (``"en"``, ``"lt"``, ``"simple"``...).

    No key needed. ``base_url`` replaces ``https://<language>.wikipedia.org``, for the
    requests and the article URLs alike (a mirror, or a test server).
    """
    timeout = seconds(timeout)
    if not isinstance(language, str) or not _LANGUAGE.fullmatch(language):
        raise ValueError(f"language must be a Wikipedia edition code such as 'en' or 'lt', not {language!r}")
    site = SOURCE.endpoint(base_url or SOURCE.base_url.format(language=language), "")
    host = urlsplit(site).netloc or site
    edition = replace(SOURCE, description=SOURCE.description.format(host=host),
                      instructions=SOURCE.instructions.format(host=host))

    async def backend(*, query: str, max_results: int) -> list[dict]:
        body = await fetch_json(SOURCE, "GET", site + "/w/api.php", headers=HEADERS, timeout=timeout, params={
            "action": "query", "list": "search", "format": "json", "srsearch": query, "srlimit": max_results})
        error = dig(body, "error")
        if error:  # the API reports a bad request with HTTP 200 and an error object
            info = dig(error, "info") or dig(error, "code") or error
            raise SearchError(f"Wikipedia search failed: {info}", source=SOURCE.name)
        return parse_wikipedia(body, site)

    return edition.capability(backend, max_results=max_results, snippet_length=snippet_length,
                              instructions=instructions, description=description)
