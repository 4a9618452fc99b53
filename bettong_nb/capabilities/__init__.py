"""Every built-in capability, one module each, re-exported here. None is on unless passed.

    from bettong_nb import capabilities as caps
    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data"), caps.shell()])
"""

# Imported eagerly on purpose: a module named like its constructor (search.py / search()) would
# otherwise replace the constructor on this package the first time something imported it.
# `import bettong_nb` itself does not import this package, so it stays fast; mcp imports the
# MCP SDK only when a server starts.
from .brave import brave
from .duckdb import duckdb
from .duckduckgo import duckduckgo
from .edn import edn
from .filesystem import filesystem
from .google import google
from .mcp import mcp
from .namespace import namespace
from .python import python
from .search import search
from .serper import serper
from .shell import shell
from .tavily import tavily
from .wikipedia import wikipedia

__all__ = ["filesystem", "shell", "edn", "search", "duckduckgo", "wikipedia", "google", "tavily",
           "brave", "serper", "namespace", "python", "duckdb", "mcp"]
