"""The agent works in the notebook: it reads every cell, proposes edits a person accepts or
rejects, and runs cells a person allows: ``capabilities.notebook()``.

    caps.notebook()                          # read-only: list_cells, read_cell
    caps.notebook(edit=True, run=True)       # + insert_cell, edit_cell, delete_cell (proposals), run_cell
    caps.notebook(path="analysis.ipynb")     # a saved file, read-only (a script, a batch)

In a notebook (``%%agent --notebook``, or any agent after ``%load_ext bettong_nb``) the live
notebook is what ``%load_ext`` put in the core's ``open_notebook`` hook: bettong_nb's JupyterLab /
Notebook 7 extension shows every proposal as a diff with Accept and Reject, and nothing changes
before Accept. Without it (VS Code, Colab, nbclient, a script) the tools read the saved file when
one is known and say it may be stale; every change is refused.

No automatic yes changes or runs a cell: an edit is made only on a person's Accept in the
notebook, ``run_cell`` only on a person's own Allow (:func:`~bettong_nb.core.approvals.requires_person`).
Cell text reaches the model redacted like any tool result; an edit that would write a
``[redacted]`` placeholder over a real value is refused.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core import approvals, hooks
from ..core.approvals import Deny, Denied, requires_person
from ..core.capability import Tool, ToolOutput
from ..core.images import Image, ImageError
from ..safety.secrets import REDACTED
from ..safety.sanitize import terminal_text

__all__ = ["notebook", "NotebookCells", "Notebook", "SavedNotebook", "Change", "Decision", "read_saved",
           "MAX_SOURCE"]

EXCERPT = 160  # characters of a cell's source in list_cells
MAX_SOURCE = 100_000  # characters a proposed cell may hold
MAX_CELL_TEXT = 20_000  # characters of one cell's source or outputs read_cell returns
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True)
class Change:
    """One proposed change. ``action``: insert, edit or delete; ``cell_id``: the cell changed
    (edit, delete) or the one the new cell goes below (insert; None: at the top); ``old``: the
    source the proposal was made against; ``origin``: model, session and turn of the call."""

    action: str
    cell_id: str | None
    source: str
    old: str = ""
    cell_type: str = "code"
    origin: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """A proposal's end: ``accepted`` by a person (``cell_id``: the cell it made or changed), or
    not, with ``reason`` (the person's, or why nobody could be asked)."""

    accepted: bool
    reason: str = ""
    cell_id: str | None = None


class Notebook(Protocol):
    """What the capability needs of a notebook; the notebook layer provides the live one
    (``hooks.provide(open_notebook=...)``: an async function returning one)."""

    mode: str  # one line: where the cells come from, and whether changes and runs are possible

    async def cells(self) -> list[dict]: ...  # nbformat 4.5 cells: id, cell_type, source, metadata, outputs...

    def prompt_cell_id(self) -> str | None: ...  # the cell the agent runs in

    async def propose(self, change: Change) -> Decision: ...  # a person's decision, applied when accepted

    async def run(self, cell_id: str, source: str) -> list[dict]: ...  # the cell's outputs, shown on it


def read_saved(path: str | os.PathLike) -> list[dict]:
    """The cells of the .ipynb at ``path`` (sources joined into one str)."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the notebook {os.fspath(path)}: {error}") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"{os.fspath(path)} is not a notebook (no list of cells)")
    return [{**cell, "source": _joined(cell.get("source", ""))} for cell in cells if isinstance(cell, dict)]


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


class SavedNotebook:
    """A notebook read from its saved file at each call; it changes nothing and runs nothing."""

    def __init__(self, path: str | os.PathLike, *, why: str = "", prompt_cell: str | None = None):
        self.path, self._prompt = os.fspath(path), prompt_cell
        self.why = why or "only the live notebook (bettong_nb's JupyterLab or Notebook 7 extension) can change cells"
        self.mode = f"the saved file {self.path} (it may be stale); changes and runs are refused: {self.why}"

    async def cells(self) -> list[dict]:
        return read_saved(self.path)

    def prompt_cell_id(self) -> str | None:
        return self._prompt

    async def propose(self, change: Change) -> Decision:
        return Decision(False, f"no change can be made here: {self.why}")

    async def run(self, cell_id: str, source: str) -> list[dict]:
        raise Denied(Deny(f"no cell can be run here: {self.why}"))


# --- what the model reads ------------------------------------------------------------------------

def _output_summary(output: dict) -> str:
    kind = output.get("output_type")
    if kind == "error":
        return f"error {output.get('ename', '')}"
    if kind == "stream":
        return f"{output.get('name', 'stream')} {_line(_joined(output.get('text')))!r}"
    bundle = output.get("data") or {}
    if any(mime in bundle for mime in IMAGE_TYPES):
        return "image"
    if "text/plain" in bundle:
        return f"text {_line(_joined(bundle['text/plain']))!r}"
    return "+".join(sorted(bundle)) or str(kind)


def _line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _excerpt(source: str) -> str:
    return source if len(source) <= EXCERPT else source[:EXCERPT - 1] + "…"


def _cut(text: str, limit: int = MAX_CELL_TEXT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n… [cut {len(text) - limit} characters]"


def _output_text(output: dict) -> tuple[str, list[Image]]:
    kind = output.get("output_type")
    if kind == "error":
        trace = "\n".join(terminal_text(_joined(line)) for line in output.get("traceback") or ())
        return f"error {output.get('ename', '')}: {output.get('evalue', '')}\n{trace}".rstrip(), []
    if kind == "stream":
        return f"{output.get('name', 'stream')}:\n{terminal_text(_joined(output.get('text')))}", []
    bundle, images = output.get("data") or {}, []
    for mime in IMAGE_TYPES:
        if mime in bundle:
            try:
                images.append(Image(base64.b64decode(_joined(bundle[mime])), mime))
            except (ImageError, ValueError):
                pass  # a damaged image is described, not sent
    text = _joined(bundle.get("text/plain", ""))
    shown = f"{kind}:\n{terminal_text(text)}" if text else f"{kind}: {', '.join(sorted(bundle))}"
    return shown, images


class NotebookCells:
    """The ``notebook`` capability (see the module doc). Get one from :func:`notebook`."""

    def __init__(self, *, edit: bool = False, run: bool = False, path: str | os.PathLike | None = None,
                 id: str = "notebook"):
        self.edit, self.run, self.path, self.id = edit, run, path, id
        tools = [Tool("list_cells", self.list_cells,
                      "Every cell of the notebook in order: its id, type, execution count, the start of its "
                      "source and a summary of its outputs. The cell you run in is marked.", {}),
                 Tool("read_cell", self.read_cell, "A cell's full source and its outputs (text, errors, images).",
                      {"cell_id": {"type": "string", "description": "the cell's id, from list_cells",
                                   "required": True}})]
        if edit:
            source = {"type": "string", "description": "the cell's whole new source", "required": True}
            cell_id = {"type": "string", "description": "the cell's id, from list_cells", "required": True}
            tools += [
                Tool("insert_cell", self.insert_cell, "Propose a new cell; the user accepts or rejects it.",
                     {"source": source,
                      "after_cell_id": {"type": "string", "description": "the cell it goes below (default: the top)"},
                      "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "code (default) "
                                    "or markdown"}}),
                Tool("edit_cell", self.edit_cell, "Propose a cell's new source; the user accepts or rejects it.",
                     {"cell_id": cell_id, "source": source}),
                Tool("delete_cell", self.delete_cell, "Propose deleting a cell; the user accepts or rejects it.",
                     {"cell_id": cell_id}),
            ]
        if run:
            # requires_person: no approve_fn, headless policy or "allow always" runs a cell
            tools.append(requires_person(Tool(
                "run_cell", self.run_cell, "Run a cell as the user would (the user allows each run) and read its "
                "outputs.", {"cell_id": {"type": "string", "description": "the cell's id", "required": True}},
                concurrent=False)))
        self.tools = tools
        self.instructions: str | None = self._instructions()

    def _instructions(self) -> str:
        can = ["read the notebook's cells (list_cells, read_cell)"]
        if self.edit:
            can.append("propose changes the user accepts or rejects (insert_cell, edit_cell, delete_cell: a "
                       "rejection comes with the user's reason)")
        if self.run:
            can.append("run a cell when the user allows it (run_cell)")
        return ("You work in the user's Jupyter notebook: you can " + "; ".join(can) + ". Cells are named by "
                "their id from list_cells. Never change the cell you run in. Secrets in cells show as [redacted]; "
                "keep such lines as they are.")

    async def _notebook(self) -> Notebook:
        if self.path is not None:
            return SavedNotebook(self.path, why="this capability reads a saved file")
        if not hooks.provided("open_notebook"):
            raise ValueError("no notebook here: use it in a notebook after %load_ext bettong_nb, or give the "
                             "saved file: capabilities.notebook(path='analysis.ipynb')")
        return await hooks.call("open_notebook")

    async def _cell(self, book: Notebook, cell_id: str) -> tuple[int, dict, list[dict]]:
        if not isinstance(cell_id, str) or not cell_id:
            raise ValueError("cell_id must be a cell's id from list_cells")
        cells = await book.cells()
        for index, cell in enumerate(cells):
            if cell.get("id") == cell_id:
                return index, cell, cells
        raise ValueError(f"no cell with id {_line(cell_id, 60)!r} in this notebook; list_cells gives the ids")

    # --- reading ------------------------------------------------------------------------------

    async def list_cells(self) -> str:
        """Every cell in order, one line each."""
        book = await self._notebook()
        cells, here = await book.cells(), book.prompt_cell_id()
        lines = [f"{len(cells)} cells, from {book.mode}."]
        for index, cell in enumerate(cells):
            count = cell.get("execution_count")
            outputs = "; ".join(_output_summary(o) for o in cell.get("outputs") or ()) or "no output"
            mark = "  <- you run in this cell" if cell.get("id") == here else ""
            lines.append(f"[{index}] id={cell.get('id')} {cell.get('cell_type')}"
                         f"{'' if count is None else f' [{count}]'}: {_excerpt(_joined(cell.get('source')))!r}"
                         f" | {outputs}{mark}")
        return "\n".join(lines)

    async def read_cell(self, cell_id: str) -> ToolOutput:
        """The cell's whole source and its outputs, images as images."""
        book = await self._notebook()
        index, cell, _ = await self._cell(book, cell_id)
        parts = [f"cell [{index}] id={cell_id} {cell.get('cell_type')}, from {book.mode}",
                 "source:\n" + _cut(_joined(cell.get("source")))]
        images: list[Image] = []
        for output in cell.get("outputs") or ():
            text, found = _output_text(output)
            parts.append(text)
            images += found
        return ToolOutput("\n".join(parts[:2]) + "\n" + _cut("\n".join(parts[2:])), images=tuple(images))

    # --- proposals ------------------------------------------------------------------------------

    def _origin(self) -> dict:
        """Model, session and turn of the call being made, for the change's record."""
        request = approvals.current_call()
        scope = None if request is None else request.scope
        options = getattr(scope, "options", None)
        turns = getattr(scope, "turns", None)
        model = getattr(options, "model", None) or getattr(getattr(options, "provider", None), "model", None)
        return {"model": model if isinstance(model, str) else None, "session": None if scope is None else f"{id(scope):x}",
                "turn": turns + 1 if isinstance(turns, int) else None}

    @staticmethod
    def _checked_source(source: Any, old: str = "") -> str:
        if not isinstance(source, str):
            raise ValueError("source must be the cell's text")
        if len(source) > MAX_SOURCE:
            raise ValueError(f"the source is {len(source)} characters; a cell may hold at most {MAX_SOURCE}")
        if REDACTED in source and source.count(REDACTED) > old.count(REDACTED):
            raise ValueError(f"the source holds the placeholder {REDACTED}: it stands for a secret you cannot see, "
                             "and writing it would destroy the real value. Leave the lines that hold secrets "
                             "as they are (propose only the other changes, or ask the user)")
        return source

    def _not_the_prompt(self, book: Notebook, cell_id: str, cell: dict) -> None:
        if cell_id == book.prompt_cell_id() or _joined(cell.get("source")).lstrip().startswith("%%agent"):
            raise ValueError("that is an %%agent cell (the one you run in, or another prompt): it cannot be "
                             "changed or run by the agent")

    async def _propose(self, book: Notebook, change: Change) -> str:
        decision = await book.propose(change)
        what = {"insert": "the new cell", "edit": f"the edit of cell {change.cell_id}",
                "delete": f"deleting cell {change.cell_id}"}[change.action]
        if not decision.accepted:
            raise Denied(Deny(f"{what} was rejected: {decision.reason or 'no reason given'}; the notebook is "
                              "unchanged"))
        if change.action == "insert":
            return f"The user accepted {what}: its id is {decision.cell_id}."
        return f"The user accepted {what}; the notebook now holds it."

    async def insert_cell(self, source: str, after_cell_id: str | None = None, cell_type: str = "code") -> str:
        if cell_type not in ("code", "markdown"):
            raise ValueError(f"cell_type must be code or markdown; got {_line(str(cell_type), 40)!r}")
        source = self._checked_source(source)
        book = await self._notebook()
        if after_cell_id is not None:
            await self._cell(book, after_cell_id)
        return await self._propose(book, Change("insert", after_cell_id, source, cell_type=cell_type,
                                                origin=self._origin()))

    async def edit_cell(self, cell_id: str, source: str) -> str:
        book = await self._notebook()
        _, cell, _ = await self._cell(book, cell_id)
        self._not_the_prompt(book, cell_id, cell)
        old = _joined(cell.get("source"))
        source = self._checked_source(source, old)  # a secret's line kept as the model saw it is refused
        if source == old:
            return f"Cell {cell_id} already holds that source; nothing to propose."
        return await self._propose(book, Change("edit", cell_id, source, old, cell.get("cell_type", "code"),
                                                self._origin()))

    async def delete_cell(self, cell_id: str) -> str:
        book = await self._notebook()
        _, cell, _ = await self._cell(book, cell_id)
        self._not_the_prompt(book, cell_id, cell)
        return await self._propose(book, Change("delete", cell_id, "", _joined(cell.get("source")),
                                                cell.get("cell_type", "code"), self._origin()))

    # --- running --------------------------------------------------------------------------------

    async def run_cell(self, cell_id: str) -> str:
        book = await self._notebook()
        index, cell, _ = await self._cell(book, cell_id)
        self._not_the_prompt(book, cell_id, cell)
        if cell.get("cell_type") != "code":
            raise ValueError(f"cell {cell_id} is a {cell.get('cell_type')} cell; only code cells run")
        outputs = await book.run(cell_id, _joined(cell.get("source")))
        shown = "\n".join(_output_text(o)[0] for o in outputs) or "(no output)"
        return f"ran cell [{index}] id={cell_id}:\n" + _cut(shown)


def notebook(*, edit: bool = False, run: bool = False, path: str | os.PathLike | None = None) -> NotebookCells:
    """The notebook's cells as tools: read-only unless ``edit`` (proposals a person accepts) or
    ``run`` (runs a person allows); ``path``: a saved .ipynb instead of the live notebook."""
    for name, value in (("edit", edit), ("run", run)):
        if not isinstance(value, bool):
            raise TypeError(f"notebook({name}=...) takes True or False; got {value!r}")
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"notebook(path=...) takes a path to a saved .ipynb; got {type(path).__name__}")
    return NotebookCells(edit=edit, run=run, path=path)
