"""Every built-in capability, one module each, re-exported here. None is on unless passed.

    from bettong_nb import capabilities as caps
    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data"), caps.shell()])
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["filesystem", "shell", "edn", "search", "duckduckgo", "wikipedia", "google", "tavily",
           "brave", "serper", "namespace", "python"]

# Loaded on first use so `import bettong_nb` stays fast and a notebook that only wants the
# filesystem never pays for the HTML parser of the search sources.
_MODULES = {name: name for name in __all__}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'bettong_nb.capabilities' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
