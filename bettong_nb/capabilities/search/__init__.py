"""Web search as a capability: the builder and what sources share (``base``), and one module per
named source.

    from bettong_nb import capabilities as caps
    caps.search(id="runbooks", backend=my_search)      # your own source
    caps.duckduckgo()                                  # a named one
"""

from .base import SearchCapability, SearchError, search
from .brave import brave
from .duckduckgo import duckduckgo
from .google import google
from .serper import serper
from .tavily import tavily
from .wikipedia import wikipedia

__all__ = ["SearchCapability", "SearchError", "search", "duckduckgo", "wikipedia", "google", "tavily", "brave",
           "serper"]
