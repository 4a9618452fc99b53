"""Notebooks run in real kernels (nbclient: no widget frontend), and what their cells showed.

    nb = run_notebook([setup_code, "%%agent bot\\nhi"], tmp_path)
    data(nb.cells[1], "text/html"), stdout(nb.cells[1])
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import nbclient
import nbformat

__all__ = ["run_notebook", "data", "answers", "stdout", "WIDGET", "PRICED_BOT"]

WIDGET = "application/vnd.jupyter.widget-view+json"
# A first cell: the extension, and `bot`, a priced agent whose every answer is "ok" with 10 + 2 tokens.
PRICED_BOT = """%load_ext bettong_nb
import bettong_nb
def model(request):
    return bettong_nb.Response([{"type": "text", "text": "ok"}], usage=bettong_nb.Usage(1, 10, 2, 12))
bot = bettong_nb.agent(provider=model, prices={"input": 1.0, "output": 2.0})"""


def run_notebook(notebook: nbformat.NotebookNode | Iterable[str], where: Path, *, timeout: float = 60,
                 kernel: str = "python3", env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Execute ``notebook`` (or a notebook of these code cells) with ``where`` as its folder
    (``env``: the kernel's environment, as a server gives it); fails naming the cell when any
    cell raised."""
    if not isinstance(notebook, nbformat.NotebookNode):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in notebook])
    nbclient.NotebookClient(notebook, timeout=timeout, kernel_name=kernel,
                            resources={"metadata": {"path": str(where)}}).execute(**({"env": env} if env else {}))
    for index, cell in enumerate(notebook.cells):
        errors = [o for o in cell.get("outputs", ()) if o.output_type == "error"]
        assert not errors, (index, errors)
    return notebook


def data(cell, mime: str) -> list[str]:
    """What the cell displayed in ``mime``, in order."""
    return [o.data[mime] for o in cell.outputs if o.output_type in ("display_data", "execute_result")
            and o.data.get(mime)]


def stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def answers(cell) -> list[str]:
    """The answers the cell showed, as the model wrote them (the Markdown an answer renders
    from is its text/plain; its HTML is the sanitised rendering)."""
    return [o.data["text/plain"] for o in cell.outputs if o.output_type in ("display_data", "execute_result")
            and 'class="bettong-markdown"' in o.data.get("text/html", "")]
