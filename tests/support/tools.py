"""What the model reads back from a tool: the text the loop would send it, redacted.

    model_reads(caps.filesystem(root=tmp), "read_file", path="a.txt")
    model_reads(caps.filesystem(root=tmp), "read_file", {"path": "a.txt"})
    model_reads(caps.duckduckgo(...), query="bettong")        # a capability's only tool
"""

from __future__ import annotations

from typing import Any, Mapping

from bettong_nb.core._sync import run_sync
from bettong_nb.core.capability import capability_tools, invoke, registry

__all__ = ["model_reads", "tool_result"]


def tool_result(capability: Any, tool: str | None = None, args: Mapping[str, Any] | None = None, /,
                **kwargs: Any) -> tuple[str, int]:
    """``(text, redactions)`` of one call, through the same invoke the loop uses. ``tool`` None
    is the capability's only tool. Calls share one event loop, so HTTP clients are reused."""
    if tool is None:
        (only,) = capability_tools(capability)
        tool = only["name"] if isinstance(only, Mapping) else only.name
    return run_sync(invoke(registry([capability]), tool, {**(args or {}), **kwargs}))


def model_reads(capability: Any, tool: str | None = None, args: Mapping[str, Any] | None = None, /,
                **kwargs: Any) -> str:
    return tool_result(capability, tool, args, **kwargs)[0]
