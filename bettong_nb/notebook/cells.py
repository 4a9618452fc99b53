"""Which notebook cell a run starts from, and what each cell cost.

    %agent usage --by cell          # tokens and cost per cell, the cell's first line beside it
    %agent usage chat --by cell

``%load_ext bettong_nb`` installs a :class:`CellFinder` in the core
(:func:`bettong_nb.core.kernel.install_cell`): each model request and tool call then records the
cell id the frontend sent with the execute request (JupyterLab and Notebook send ``cellId`` in
its metadata), or ``In[n]`` where none came (nbclient, a terminal IPython, older frontends).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CellFinder", "first_line", "usage_by_cell", "LINE_CHARS"]

LINE_CHARS = 80  # of a cell's first line, shown beside its usage


def first_line(code: str) -> str:
    """A cell's first line; for a cell magic (``%%agent``) with the first line of its body after
    it, since that says what the cell asked."""
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[0] if not lines[0].startswith("%%") or len(lines) == 1 else f"{lines[0]} · {lines[1]}"
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"


class CellFinder:
    """The cell running now in ``shell``: its id from the execute request, else ``In[n]``;
    remembers each cell's first line for :func:`usage_by_cell`."""

    def __init__(self, shell: Any):
        self.shell = shell
        self.lines: dict[str, str] = {}

    def __call__(self) -> str | None:
        kernel = getattr(self.shell, "kernel", None)
        parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else {}
        parent = parent if isinstance(parent, dict) else {}
        cell = (parent.get("metadata") or {}).get("cellId")
        code = (parent.get("content") or {}).get("code")
        if not isinstance(cell, str) or not cell:
            number = getattr(self.shell, "execution_count", None)
            if not isinstance(number, int):
                return None
            cell = f"In[{number}]"
            history = self.shell.user_ns.get("In") if hasattr(self.shell, "user_ns") else None
            if code is None and isinstance(history, list) and 0 <= number < len(history):
                code = history[number]
        if isinstance(code, str) and cell not in self.lines:
            self.lines[cell] = first_line(code)
        return cell


def usage_by_cell(ledger: Any, lines: dict[str, str] | None = None):
    """One row per notebook cell of a session (or anything with ``usage_frame()``), in the order
    the cells first ran: its first line, requests, tokens and cost. Requests made outside a
    notebook cell are one row, ``cell`` NA."""
    import pandas as pd

    frame = ledger.usage_frame()
    frame = frame.assign(cell=frame["cell"].astype(object).where(frame["cell"].notna(), None))
    order = list(dict.fromkeys(frame["cell"]))
    rows = []
    for cell in order:
        part = frame[frame["cell"].isna()] if cell is None else frame[frame["cell"] == cell]
        rows.append({"cell": cell, "first_line": (lines or {}).get(cell, "") if cell is not None else "",
                     "requests": len(part), "prompt_tokens": int(part["prompt_tokens"].sum()),
                     "completion_tokens": int(part["completion_tokens"].sum()),
                     "cost_total": float("nan") if part["cost_total"].isna().any() else part["cost_total"].sum()})
    table = pd.DataFrame(rows, columns=["cell", "first_line", "requests", "prompt_tokens", "completion_tokens",
                                        "cost_total"])
    table.attrs["currency"] = frame.attrs.get("currency")
    return table
