"""Which cells an agent wrote or changed, when, with which model, and who accepted.

    bettong_nb.notebook_history("analysis.ipynb")     # a DataFrame, one row per accepted change
    %agent history                                      # this notebook's, this kernel's changes included

Each accepted change leaves an entry in its cell's metadata (``bettong_nb``: a list; a deleted
cell's entry stays on the ``%%agent`` cell that asked for it), so a saved notebook carries its
history. Importing this module needs neither IPython nor a kernel.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

__all__ = ["notebook_history", "history_rows", "COLUMNS"]

KEY = "bettong_nb"  # the cell metadata key of the provenance list (notebook/proposals.py writes it)
COLUMNS = ["time", "action", "cell", "cell_index", "model", "session", "turn", "prompt_cell", "decided_by",
           "diff_sha256"]


def history_rows(cells: Iterable[dict]) -> list[dict]:
    """The provenance entries in ``cells`` (nbformat cells), one dict each with its cell's index."""
    rows = []
    for index, cell in enumerate(cells):
        entries = (cell.get("metadata") or {}).get(KEY)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict):
                cell_id = entry.get("cell") or cell.get("id")
                here = entry.get("action") != "delete" and cell_id == cell.get("id")
                rows.append({**{c: entry.get(c) for c in COLUMNS}, "cell": cell_id,
                             "cell_index": index if here else None})
    return rows


def notebook_history(path: str | os.PathLike, *, also: Iterable[dict] = ()) -> Any:
    """A DataFrame of the changes recorded in the saved notebook at ``path``, oldest first;
    ``also``: entries not saved yet (``%agent history`` passes this kernel's)."""
    import pandas as pd

    from ..capabilities.notebook import read_saved

    rows = history_rows(read_saved(path))
    seen = {(r["cell"], r["time"], r["diff_sha256"]) for r in rows}
    rows += [{**{c: e.get(c) for c in COLUMNS}, "cell_index": None} for e in also
             if (e.get("cell"), e.get("time"), e.get("diff_sha256")) not in seen]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values("time", kind="stable", ignore_index=True) if len(frame) else frame
