"""Tavily, a search API built for LLM agents. The tool is ``tavily_search``.

    caps.tavily()                  # TAVILY_API_KEY from the environment
    caps.tavily(search_depth="advanced")
"""

from __future__ import annotations

from .base import RESULTS_TAIL, SearchCapability, Source, dig, keyed, results_from

__all__ = ["tavily", "parse_tavily", "MAX_RESULTS"]

SOURCE = Source(
    "Tavily", "tavily", "https://api.tavily.com",
    f"Search the open web with Tavily, a search engine built for AI agents; each snippet is the passage "
    f"of the page most relevant to the query. {RESULTS_TAIL}",
    "tavily_search searches the open web through Tavily. Use it for current information and cite the "
    "URLs you relied on.",
    env="TAVILY_API_KEY", signup="https://app.tavily.com", max_results=20)  # the API's ceiling for max_results
MAX_RESULTS = SOURCE.max_results


def parse_tavily(body: object) -> list[dict]:
    """``results[]`` as results; each hit's ``content`` is its snippet."""
    return results_from(dig(body, "results"), snippet="content")


@keyed
def tavily(api_key: str | None = None, *, search_depth: str = "basic", max_results: int = 5,
           snippet_length: int = 300, timeout: float = 15.0, base_url: str | None = None,
           instructions: str | None = None, description: str | None = None) -> SearchCapability:
    """Tavily results; ``api_key`` defaults to TAVILY_API_KEY.

    ``search_depth`` is ``"basic"`` or ``"advanced"`` (slower, costs more credits).
    """
    if search_depth not in ("basic", "advanced"):
        raise ValueError(f"search_depth must be 'basic' or 'advanced', not {search_depth!r}")
    return SOURCE.json_api(
        api_key, "/search", parse_tavily,
        lambda key, query, n: {"method": "POST",
                               "headers": {"Authorization": f"Bearer {key}", "Accept": "application/json"},
                               "json_body": {"query": query, "max_results": n, "search_depth": search_depth}},
        base_url=base_url, timeout=timeout, max_results=max_results, snippet_length=snippet_length,
        instructions=instructions, description=description)
