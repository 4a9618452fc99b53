"""bettong_nb: LLM agents for Jupyter. An agent starts with nothing; capabilities give it tools.

    import bettong_nb
    from bettong_nb import capabilities as caps

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("What is in data/?")
    print(result.output, bettong_nb.usage.summary(result.usage))

In a notebook: ``%load_ext bettong_nb`` and a ``%%agent`` cell.

Layers, each importing only from the ones below it:
- core: options, agent (the loop), session, batch, capability (the protocol), provider (the
  seam), approvals, events, usage, results, frames, secrets, http — no IPython, no widgets,
  no notebook;
- providers/ and capabilities/: implementations of the two protocols, using the core's
  public pieces, never the loop's internals;
- notebook/ and cli: consumers of events, plus magics, widgets and display. The notebook layer
  installs what it needs into the core (display formatters, the person who approves) at
  ``%load_ext``.
"""

from . import capability, events, secrets, usage
from .agent import Agent, ModelAgent
from .approvals import Allow, ApprovalRequest, Deny, approve_all, ask_in_terminal
from .capability import Capability, Tool, ToolOutput, tool
from .images import Image
from .provider import Provider, ProviderError, Request, Response
from .results import RunResult, ToolCall
from .session import Session
from .usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Agent", "ModelAgent", "Session", "RunResult", "ToolCall", "ApprovalRequest", "Allow", "Deny", "Usage",
    "Capability", "Tool", "ToolOutput", "tool", "Image", "Provider", "ProviderError", "Request", "Response",
    "agent", "deepseek", "openai", "anthropic", "ollama", "offline", "approve_all", "ask_in_terminal",
    "capability", "capabilities", "events", "secrets", "usage", "providers", "edn",
    "load_ipython_extension", "unload_ipython_extension",
]

# Built-in agents live with their providers; they load on first touch, keeping `import bettong_nb` fast.
_FACTORIES = {"deepseek": "openai", "openai": "openai", "anthropic": "anthropic", "ollama": "ollama",
              "offline": "offline"}


def agent(provider=None, **options) -> ModelAgent:
    """An agent over any provider (a Provider object or a callable request -> Response).
    Without one, the DeepSeek provider is used."""
    if provider is None:
        from .providers.openai import deepseek

        return deepseek(**options)
    return ModelAgent(provider=provider, **options)


def __getattr__(name: str):
    import importlib

    if name in _FACTORIES:
        return getattr(importlib.import_module(f"{__name__}.providers.{_FACTORIES[name]}"), name)
    if name in ("capabilities", "providers", "edn", "notebook"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'bettong_nb' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext bettong_nb``: registers the %%agent magic and the notebook displays."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
