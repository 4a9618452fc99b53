"""Google's results through serper.dev, no Google Cloud project needed. The tool is ``serper_search``.

    caps.serper()                  # SERPER_API_KEY from the environment
"""

from __future__ import annotations

from .base import RESULTS_TAIL, SearchCapability, Source, dig, keyed, results_from

__all__ = ["serper", "parse_serper"]

SOURCE = Source(
    "Serper", "serper", "https://google.serper.dev",
    f"Search Google's results for the open web (through serper.dev). {RESULTS_TAIL}",
    "serper_search returns Google's results for the open web. Use it for current information and cite "
    "the URLs you relied on.",
    env="SERPER_API_KEY", signup="https://serper.dev")


def parse_serper(body: object) -> list[dict]:
    """``organic[]`` as results; ``link`` is the URL. Ads, "people also ask" and the like are left out."""
    return results_from(dig(body, "organic"), url="link")


@keyed
def serper(api_key: str | None = None, *, max_results: int = 5, snippet_length: int = 300, timeout: float = 15.0,
           base_url: str | None = None, instructions: str | None = None,
           description: str | None = None) -> SearchCapability:
    """Google results via serper.dev; ``api_key`` defaults to SERPER_API_KEY."""
    return SOURCE.json_api(
        api_key, "/search", parse_serper,
        lambda key, query, n: {"method": "POST", "headers": {"X-API-KEY": key, "Accept": "application/json"},
                               "json_body": {"q": query, "num": n}},
        base_url=base_url, timeout=timeout, max_results=max_results, snippet_length=snippet_length,
        instructions=instructions, description=description)
