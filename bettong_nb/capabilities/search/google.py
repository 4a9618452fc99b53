"""Google, through the Custom Search JSON API. The tool is ``google_search``.

    caps.google()                  # GOOGLE_API_KEY and GOOGLE_CSE_ID from the environment
    caps.google(api_key="AIza...", cx="0123456789abcdef")

The API needs a key and a Programmable Search Engine id (``cx``) and returns at most 10
results per query. Google has closed it to new customers; serper() gives Google's results
without a Google Cloud project.
"""

from __future__ import annotations

import os

from .base import RESULTS_TAIL, SearchCapability, Source, dig, keyed, results_from

__all__ = ["google", "parse_google", "MAX_RESULTS"]

SOURCE = Source(
    "Google", "google", "https://www.googleapis.com",
    f"Search the open web with Google (a Programmable Search Engine). {RESULTS_TAIL}",
    "google_search searches the open web through Google. Use it for current information and cite "
    "the URLs you relied on.",
    env="GOOGLE_API_KEY", signup="https://developers.google.com/custom-search/v1/overview",
    max_results=10)  # the API refuses num > 10
MAX_RESULTS = SOURCE.max_results


def parse_google(body: object) -> list[dict]:
    """``items[]`` as results; a search with no hits has no ``items`` at all."""
    return results_from(dig(body, "items"), url="link")


@keyed
def google(api_key: str | None = None, cx: str | None = None, *, max_results: int = 5, snippet_length: int = 300,
           timeout: float = 15.0, base_url: str | None = None, instructions: str | None = None,
           description: str | None = None) -> SearchCapability:
    """Google results; ``api_key`` defaults to GOOGLE_API_KEY and ``cx`` to GOOGLE_CSE_ID.

    ``max_results`` above 10 is refused here, since the API would refuse every search.
    """
    key = SOURCE.api_key(api_key)  # the key is asked for first, then the engine
    engine = (cx if cx is not None else os.environ.get("GOOGLE_CSE_ID", "")).strip()
    if not engine:
        raise ValueError("Google search needs a search engine id: pass cx=..., or set GOOGLE_CSE_ID in the "
                         "environment (create a Programmable Search Engine at "
                         "https://programmablesearchengine.google.com and copy its Search engine ID)")
    # the key travels in the query string: that is how this API takes it
    return SOURCE.json_api(
        key, "/customsearch/v1", parse_google,
        lambda key, query, n: {"headers": {"Accept": "application/json"},
                               "params": {"key": key, "cx": engine, "q": query, "num": min(n, MAX_RESULTS)}},
        base_url=base_url, timeout=timeout, max_results=max_results, snippet_length=snippet_length,
        instructions=instructions, description=description)
