"""Where we are running: an IPython shell, a Jupyter kernel, or neither, and the notebook cell a
run starts from. Imports nothing to find out (IPython is only looked at when it is already
loaded; the cell comes from a finder the notebook layer installs at ``%load_ext bettong_nb``).

    kernel.install_cell(lambda: "a1b2c3")     # what the notebook layer does
    kernel.current_cell()                     # "a1b2c3"; None outside a notebook
"""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["ipython_shell", "jupyter_kernel", "install_cell", "current_cell"]

_cell_finder: list[Callable[[], str | None] | None] = [None]


def ipython_shell() -> Any:
    """The running IPython shell (terminal or kernel), else None."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def jupyter_kernel() -> Any:
    """The Jupyter kernel this code runs in, else None (a terminal IPython has no kernel)."""
    return getattr(ipython_shell(), "kernel", None)


def install_cell(finder: Callable[[], str | None] | None) -> Callable[[], str | None] | None:
    """Ask ``finder()`` for the cell each run starts from (None: no cell); returns the previous."""
    previous = _cell_finder[0]
    _cell_finder[0] = finder
    return previous


def current_cell() -> str | None:
    """The id of the notebook cell running now, as the installed finder tells it; None when
    none is installed or it cannot tell (a cell id is a label: a finder's failure costs no run)."""
    finder = _cell_finder[0]
    if finder is None:
        return None
    try:
        cell = finder()
    except Exception:
        return None
    return cell if isinstance(cell, str) and cell else None
