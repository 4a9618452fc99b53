"""bettong_nb: LLM agents for Jupyter. An agent starts with nothing; capabilities give it tools.

    import bettong_nb
    from bettong_nb import capabilities as caps

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("What is in data/?")
    print(result.output, bettong_nb.usage.summary(result.usage))

In a notebook: ``%load_ext bettong_nb`` and a ``%%agent`` cell.
"""

from . import capability, events, secrets, usage
from .agent import (Agent, ApprovalRequest, Deny, ModelAgent, RunResult, ToolCall, agent, anthropic,
                    approve_all, ask_in_terminal, deepseek, ollama, openai)
from .capability import Capability, Tool, tool
from .providers.base import Provider, ProviderError, Request, Response
from .session import Session
from .usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Agent", "ModelAgent", "Session", "RunResult", "ToolCall", "ApprovalRequest", "Deny", "Usage",
    "Capability", "Tool", "tool", "Provider", "ProviderError", "Request", "Response",
    "agent", "deepseek", "openai", "anthropic", "ollama", "approve_all", "ask_in_terminal",
    "capability", "capabilities", "events", "secrets", "usage", "providers", "edn",
    "load_ipython_extension", "unload_ipython_extension",
]


def __getattr__(name: str):
    # Submodules with heavier imports load on first touch, keeping `import bettong_nb` fast.
    if name in ("capabilities", "providers", "edn", "notebook"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'bettong_nb' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext bettong_nb``: registers the %%agent magic and the notebook displays."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
