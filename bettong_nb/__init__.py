"""bettong_nb: LLM agents for Jupyter. An agent starts with nothing; capabilities give it tools.

    import bettong_nb
    from bettong_nb import capabilities as caps

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("What is in data/?")
    print(result.output, bettong_nb.usage.summary(result.usage))

    chat = agent.session(); chat.run("..."); chat.save("chat.json")
    chat = bettong_nb.load_session("chat.json", agent)     # resume; chat.export("chat.html") to share

In a notebook: ``%load_ext bettong_nb`` and a ``%%agent`` cell.

The folders are the layers, bottom up; each imports only from those below it
(tests/core/test_layers.py holds every import to this, those inside functions included):

- ``safety/`` (secrets, sanitize, rooted paths) and ``edn/``: import nothing else of the package;
- ``errors``, then ``http/``: the errors every layer raises, one HTTP client;
- ``core/``: the loop, sessions, options, the capability protocol, the provider seam, approvals,
  events, usage, prices and budgets; no IPython, no widgets, nothing above it;
- ``providers/``, ``capabilities/``, ``records/`` (save, export, transcripts) and ``batches/``
  (local and Dask), beside each other;
- ``presets``: the ready-made agents (``deepseek()``, ``offline()``...);
- ``notebook/`` and ``cli``: magics, widgets, displays, the terminal;
- this front door, which fills the core's hooks (``core/hooks.py``): what the core offers but
  records and batches do (``Session.save``, ``RunResult.export``, ``Agent.map``), and installs
  the events' observer: OpenTelemetry spans (``records/tracing.py``) when a tracer provider is set.
"""

import importlib
import sys

from .core import approvals, capability, events, hooks, images, policy, provider, usage
from .core.agent import Agent, ModelAgent
from .core.approvals import Allow, ApprovalRequest, Deny, approve_all, ask_in_terminal
from .core.capability import Capability, Tool, ToolOutput, tool
from .core.images import Image
from .core.policy import PolicyError
from .core.provider import Provider, ProviderError, Request, Response
from .core.results import RunResult, ToolCall
from .core.session import Session
from .core.usage import Usage
from .errors import OptionError, ServiceError, UserError
from .presets import agent, anthropic, deepseek, offline, ollama, openai  # after .core.agent: `agent` is this function
from .safety import secrets

__version__ = "0.1.0"

__all__ = [
    "Agent", "ModelAgent", "Session", "load_session", "RunResult", "ToolCall", "ApprovalRequest", "Allow", "Deny", "Usage",
    "Capability", "Tool", "ToolOutput", "tool", "Image", "Provider", "ProviderError", "Request", "Response",
    "UserError", "OptionError", "ServiceError", "PolicyError", "policy",
    "agent", "deepseek", "openai", "anthropic", "ollama", "offline", "approve_all", "ask_in_terminal",
    "capability", "capabilities", "events", "secrets", "usage", "providers", "edn", "batch_usage", "course_usage",
    "load_ipython_extension", "unload_ipython_extension", "notebook_history",
]

# The flat module paths the README names keep working: `import bettong_nb.usage` is core.usage.
for _name, _module in {"approvals": approvals, "capability": capability, "events": events, "images": images,
                       "provider": provider, "secrets": secrets, "usage": usage, "policy": policy}.items():
    sys.modules.setdefault(f"{__name__}.{_name}", _module)


def _when_called(module: str, name: str):
    """A function of a higher layer, imported on its first call (keeps `import bettong_nb` light)."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module, __name__), name)(*args, **kwargs)

    call.__name__ = name
    return call


hooks.provide(save=_when_called(".records.saving", "save"), export=_when_called(".records.export", "export"),
              map_prompts=_when_called(".batches.local", "map_prompts"), amap=_when_called(".batches.local", "amap"),
              map_frame=_when_called(".batches.local", "map_frame"),
              dask_map_frame=_when_called(".batches.distributed", "map_frame"))



def _tracing():
    """The tracing observer, asked at each run: spans only once OpenTelemetry is loaded (whoever
    set a tracer provider imported it), so without it nothing is imported and nothing runs."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    tracing = sys.modules.get(f"{__name__}.records.tracing") or importlib.import_module(".records.tracing", __name__)
    return tracing.observer()


events.observe(_tracing)

_LAZY = {"capabilities": ".capabilities", "providers": ".providers", "edn": ".edn", "notebook": ".notebook"}


def __getattr__(name: str):
    # Heavier parts load on first touch, keeping `import bettong_nb` fast.
    if name in _LAZY:
        return importlib.import_module(_LAZY[name], __name__)
    if name == "load_session":
        return importlib.import_module(".records.saving", __name__).load_session
    if name == "notebook_history":  # which cells agents changed in a saved notebook (pandas loads only then)
        return importlib.import_module(".notebook.history", __name__).notebook_history
    if name == "course_usage":
        return importlib.import_module(".records.course", __name__).course_usage
    if name == "batch_usage":  # a batch's usage frame, a Dask one's included (dask loads only then)
        return importlib.import_module(".batches.distributed", __name__).batch_usage
    raise AttributeError(f"module 'bettong_nb' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext bettong_nb``: registers the %%agent magic and the notebook displays."""
    from .notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook.extension import unload_ipython_extension as unload

    unload(ipython)
