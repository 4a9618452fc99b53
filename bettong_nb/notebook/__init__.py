"""The notebook face of bettong_nb: the ``%%agent`` magic, live displays, approval buttons and
a progress bar for batches. The core never imports this package; ``%load_ext bettong_nb``
installs what it needs into the core (display formatters, the person who approves, the bar).

    %load_ext bettong_nb
    from bettong_nb.notebook import ask_with_buttons   # approve_fn with Allow / Deny buttons

Names load on first use, so importing the package stays cheap (no IPython widgets, no pandas).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ask_with_buttons", "ButtonApprover", "frontend_connected", "result_html", "session_html", "AgentMagics",
           "interpolate", "WidgetProgress", "StopOnInterrupt", "ErrorLog"]

_HOMES = {
    "ask_with_buttons": "approvals", "ButtonApprover": "approvals", "frontend_connected": "approvals",
    "result_html": "display", "session_html": "display", "AgentMagics": "magics",
    "interpolate": "interpolation", "WidgetProgress": "progress", "StopOnInterrupt": "interrupts",
    "ErrorLog": "errorlog",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
