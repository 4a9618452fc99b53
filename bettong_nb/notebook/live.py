"""The live notebook the ``notebook`` capability works in, installed at ``%load_ext bettong_nb``.

    %%agent chat --notebook
    Clean up the loading cells and add a plot of revenue per month

Three modes, said once per kernel in the cell that first meets one:

- live: bettong_nb's JupyterLab / Notebook 7 extension answers (:mod:`.frontend`): the agent
  reads the page's cells, proposals wait for Accept (:mod:`.proposals`), and ``run_cell`` runs
  the cell's source in this kernel, as the person would, and puts the outputs on the cell (the
  page cannot run a cell while the ``%%agent`` cell keeps the kernel busy);
- saved file: no extension (VS Code, Colab, nbclient, the classic notebook) but the kernel knows
  its notebook's file (``__session__``, ``JPY_SESSION_NAME``): cells are read from it, maybe
  stale, and every change is refused;
- nothing: neither; the tools say so.
"""

from __future__ import annotations

import os
from typing import Any

from ..capabilities.notebook import Change, Decision, SavedNotebook
from . import frontend
from .proposals import PROMPT_CELL, propose

__all__ = ["open_notebook", "LiveNotebook", "saved_path", "run_in_kernel", "NO_EXTENSION"]

NO_EXTENSION = ("bettong_nb's notebook extension is not in this page (VS Code, Colab, nbclient or papermill, the "
                "classic notebook)")
_told: set[str] = set()  # the modes already said in this kernel


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _prompt_cell() -> str | None:
    return PROMPT_CELL.get() or frontend.current_cell_id()


def saved_path(shell: Any = None) -> str | None:
    """The notebook file this kernel serves, when the kernel knows it (the server's
    ``JPY_SESSION_NAME``, which ipykernel also puts in ``__session__``); None otherwise."""
    shell = shell or _shell()
    names = [getattr(shell, "user_ns", {}).get("__session__"), os.environ.get("JPY_SESSION_NAME")]
    for name in names:
        if not isinstance(name, str) or not name.endswith(".ipynb"):
            continue
        # The server names it from its root; the kernel runs in the notebook's folder.
        for candidate in (name, os.path.basename(name)):
            if os.path.isfile(candidate):
                return os.path.abspath(candidate)
    return None


def _say_once(mode: str, text: str) -> None:
    if mode not in _told:
        _told.add(mode)
        from .runner import muted

        muted(text)


class _Nowhere(SavedNotebook):
    """Neither the extension nor a known file: the tools say so."""

    def __init__(self) -> None:
        super().__init__("", why=NO_EXTENSION)
        self.mode = "nowhere"

    async def cells(self) -> list[dict]:
        raise ValueError(f"the notebook's cells cannot be read here: {NO_EXTENSION}, and the kernel does not know "
                         "the notebook's file")


class LiveNotebook:
    """The notebook's page, through the extension."""

    def __init__(self, fe: Any, shell: Any):
        self.fe, self.shell = fe, shell
        self.mode = f"the live notebook {fe.path or ''} in {fe.app or 'the page'}".replace("  ", " ")

    async def cells(self) -> list[dict]:
        return await self.fe.cells()

    def prompt_cell_id(self) -> str | None:
        return _prompt_cell()

    async def propose(self, change: Change) -> Decision:
        return await propose(self.fe, change, prompt_cell=self.prompt_cell_id())

    async def run(self, cell_id: str, source: str) -> list[dict]:
        outputs, count = await run_in_kernel(self.shell, source)
        await self.fe.set_outputs(cell_id, outputs, count)
        return outputs


async def open_notebook() -> Any:
    """The notebook the capability works in now (see the module doc)."""
    shell = _shell()
    fe = await frontend.connect()
    if fe is not None:
        book = LiveNotebook(fe, shell)
        _say_once("live", f"The agent works in {book.mode}: it proposes changes you accept or reject here, "
                          "and runs a cell only when you allow it.")
        return book
    path = saved_path(shell)
    if path is None:
        _say_once("none", f"The agent cannot see this notebook: {NO_EXTENSION}, and the kernel does not know its file.")
        return _Nowhere()
    book = SavedNotebook(path, why=NO_EXTENSION, prompt_cell=_prompt_cell())
    _say_once("saved", f"The agent reads {path} as last saved ({NO_EXTENSION}); it cannot change or run cells here.")
    return book


async def run_in_kernel(shell: Any, source: str) -> tuple[list[dict], int | None]:
    """Run ``source`` in the user's namespace as a cell (history, execution count, magics) and
    return its outputs as nbformat dicts and its execution count; nothing reaches the running
    cell's own output."""
    from IPython.utils.capture import capture_output

    errors: list[dict] = []
    own = shell.__dict__.get("_showtraceback")

    def keep_error(etype: Any, evalue: Any, stb: list[str]) -> None:
        errors.append({"output_type": "error", "ename": getattr(etype, "__name__", str(etype)),
                       "evalue": str(evalue), "traceback": list(stb)})

    shell._showtraceback = keep_error
    try:
        with capture_output(display=True) as captured:
            result = await shell.run_cell_async(source, store_history=True)
    finally:
        if own is None:
            del shell._showtraceback
        else:
            shell._showtraceback = own
    outputs: list[dict] = []
    if captured.stdout:
        outputs.append({"output_type": "stream", "name": "stdout", "text": captured.stdout})
    if captured.stderr:
        outputs.append({"output_type": "stream", "name": "stderr", "text": captured.stderr})
    count = result.execution_count
    for shown in captured._outputs:
        if shown.get("update"):  # another display's update (the agent's own live view), not this cell's
            continue
        data, metadata = shown["data"], shown.get("metadata") or {}
        if "transient" in shown:
            outputs.append({"output_type": "display_data", "data": data, "metadata": metadata})
        else:
            outputs.append({"output_type": "execute_result", "data": data, "metadata": metadata,
                            "execution_count": count})
    return outputs + errors, count
