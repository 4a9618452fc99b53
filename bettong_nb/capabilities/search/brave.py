"""Brave Search, an independent web index. The tool is ``brave_search``.

    caps.brave()                   # BRAVE_API_KEY from the environment
"""

from __future__ import annotations

from .base import RESULTS_TAIL, SearchCapability, Source, dig, keyed, results_from

__all__ = ["brave", "parse_brave", "MAX_RESULTS"]

SOURCE = Source(
    "Brave", "brave", "https://api.search.brave.com",
    f"Search the open web with Brave Search, an independent web index. {RESULTS_TAIL}",
    "brave_search searches the open web through Brave Search. Use it for current information and cite "
    "the URLs you relied on.",
    env="BRAVE_API_KEY", signup="https://api-dashboard.search.brave.com", max_results=20)  # the API refuses count > 20
MAX_RESULTS = SOURCE.max_results


def parse_brave(body: object) -> list[dict]:
    """``web.results[]`` as results; ``description`` (with <strong> highlights) is the snippet."""
    return results_from(dig(body, "web", "results"), snippet="description")


@keyed
def brave(api_key: str | None = None, *, max_results: int = 5, snippet_length: int = 300, timeout: float = 15.0,
          base_url: str | None = None, instructions: str | None = None,
          description: str | None = None) -> SearchCapability:
    """Brave web search results; ``api_key`` defaults to BRAVE_API_KEY."""
    return SOURCE.json_api(
        api_key, "/res/v1/web/search", parse_brave,
        lambda key, query, n: {"headers": {"X-Subscription-Token": key, "Accept": "application/json"},
                               "params": {"q": query, "count": n}},
        base_url=base_url, timeout=timeout, max_results=max_results, snippet_length=snippet_length,
        instructions=instructions, description=description)
