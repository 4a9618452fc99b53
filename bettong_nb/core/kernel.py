"""Where we are running: an IPython shell, a Jupyter kernel, or neither. Imports nothing to
find out (IPython is only looked at when it is already loaded)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ipython_shell", "jupyter_kernel"]


def ipython_shell() -> Any:
    """The running IPython shell (terminal or kernel), else None."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def jupyter_kernel() -> Any:
    """The Jupyter kernel this code runs in, else None (a terminal IPython has no kernel)."""
    return getattr(ipython_shell(), "kernel", None)
