"""bettong_nb: LLM agents for Jupyter. An agent starts with nothing; capabilities give it tools.

    import bettong_nb
    from bettong_nb import capabilities as caps

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("What is in data/?")
    print(result.output, bettong_nb.usage.summary(result.usage))

    chat = agent.session(); chat.run("..."); chat.save("chat.json")
    chat = bettong_nb.load_session("chat.json", agent)     # resume; chat.export("chat.html") to share

In a notebook: ``%load_ext bettong_nb`` and a ``%%agent`` cell.

Layers, each importing only from the ones below it:
- core: options, agent (the loop), session, batch, capability (the protocol), provider (the
  seam), approvals, events, usage, results, frames, secrets, http, saving and export (with
  transcript_html, the transcript HTML the notebook shows too) — no IPython, no widgets,
  no notebook;
- providers/ and capabilities/: implementations of the two protocols, using the core's
  public pieces, never the loop's internals;
- presets: the ready-made agents (deepseek(), offline()...), a provider with its options;
- notebook/ and cli: consumers of events, plus magics, widgets and display. The notebook layer
  installs what it needs into the core (display formatters, the person who approves) at
  ``%load_ext``.
"""

from . import capability, events, secrets, usage
from .agent import Agent, ModelAgent
from .approvals import Allow, ApprovalRequest, Deny, approve_all, ask_in_terminal
from .capability import Capability, Tool, ToolOutput, tool
from .errors import OptionError, ServiceError, UserError
from .images import Image
from .presets import (  # after .agent: `agent` is this function
    agent,
    anthropic,
    deepseek,
    offline,
    ollama,
    openai,
)
from .provider import Provider, ProviderError, Request, Response
from .results import RunResult, ToolCall
from .session import Session, load_session
from .usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Agent", "ModelAgent", "Session", "load_session", "RunResult", "ToolCall", "ApprovalRequest", "Allow", "Deny", "Usage",
    "Capability", "Tool", "ToolOutput", "tool", "Image", "Provider", "ProviderError", "Request", "Response",
    "UserError", "OptionError", "ServiceError",
    "agent", "deepseek", "openai", "anthropic", "ollama", "offline", "approve_all", "ask_in_terminal",
    "capability", "capabilities", "events", "secrets", "usage", "providers", "edn", "batch_usage",
    "load_ipython_extension", "unload_ipython_extension",
]

def __getattr__(name: str):
    # Heavier parts load on first touch, keeping `import bettong_nb` fast.
    import importlib

    if name in ("capabilities", "providers", "edn", "notebook"):
        return importlib.import_module(f"{__name__}.{name}")
    if name == "batch_usage":  # a batch's usage frame, a Dask one's included (dask loads only then)
        return importlib.import_module(f"{__name__}.distributed").batch_usage
    raise AttributeError(f"module 'bettong_nb' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext bettong_nb``: registers the %%agent magic and the notebook displays."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
