"""Every built-in capability, one module each, re-exported here. None is on unless passed.

    from bettong_nb import capabilities as caps
    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data"), caps.shell()])
"""

# Imported eagerly on purpose: a module named like its constructor (search.py / search()) would
# otherwise replace the constructor on this package the first time something imported it.
# `import bettong_nb` itself does not import this package, so it stays fast; mcp imports the
# MCP SDK only when a server starts.
from .duckdb import duckdb
from .edn import edn
from .filesystem import filesystem
from .mcp import mcp
from .namespace import namespace
from .notebook import notebook
from .python import python
from .search import brave, duckduckgo, google, search, serper, tavily, wikipedia
from .shell import shell

__all__ = ["filesystem", "shell", "edn", "search", "duckduckgo", "wikipedia", "google", "tavily",
           "brave", "serper", "namespace", "notebook", "python", "duckdb", "mcp"]
