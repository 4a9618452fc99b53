"""capabilities.notebook: what the model reads of a notebook, and that no change or run happens
without a person. A saved .ipynb (a script's mode) and a notebook object that keeps its cells in
memory (standing in for the live page, which tests/notebook/test_browser_notebook_agent.py drives)."""

from __future__ import annotations

import base64
import importlib
import io
import json
from pathlib import Path

import nbformat
import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.capabilities.notebook import Change, Decision
from bettong_nb.core import hooks
from bettong_nb.providers.scripted import Scripted

nbcap = importlib.import_module("bettong_nb.capabilities.notebook")  # the package's `notebook` is the function

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
KEY = "sk-ant-api03-" + "Q" * 40


def six_cells(tmp_path: Path) -> Path:
    cells = [
        nbformat.v4.new_markdown_cell("# Revenue"),
        nbformat.v4.new_code_cell("import pandas as pd\ndf = pd.read_csv('sales.csv')", execution_count=1),
        nbformat.v4.new_code_cell(f"client = make_client(api_key='{KEY}')", execution_count=2),
        nbformat.v4.new_code_cell("df.plot()", execution_count=3, outputs=[
            nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode(),
                                                         "text/plain": "<Figure>"})]),
        nbformat.v4.new_code_cell("1/0", execution_count=4, outputs=[
            nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                   traceback=["\x1b[31mZeroDivisionError\x1b[0m: division by zero"])]),
        nbformat.v4.new_code_cell("%%agent --notebook\ntidy up"),
    ]
    path = tmp_path / "six.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def ids(path: Path) -> list[str]:
    return [c.id for c in nbformat.read(path, as_version=4).cells]


def sent(model: Scripted, step: int = 1) -> list:
    """The tool results the model got in request ``step``."""
    return [b for b in model.requests[step].messages[-1]["content"] if b.get("type") == "tool_result"]


def text_of(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_a_saved_notebook_is_listed_and_read_redacted_with_images(tmp_path):
    path = six_cells(tmp_path)
    cell = ids(path)
    model = Scripted([[("list_cells", {})], [("read_cell", {"cell_id": cell[2]}), ("read_cell", {"cell_id": cell[3]}),
                                             ("read_cell", {"cell_id": cell[4]})], "done"])
    bettong_nb.agent(provider=model, capabilities=[caps.notebook(path=path)]).run("look")
    listing = text_of(sent(model, 1)[0])
    assert listing.startswith(f"6 cells, from the saved file {path}")
    assert f"[1] id={cell[1]} code [1]: \"import pandas as pd\\ndf = pd.read_csv" in listing
    assert f"[3] id={cell[3]} code [3]: 'df.plot()' | image" in listing
    assert "error ZeroDivisionError" in listing and KEY not in listing and "[redacted]" in listing
    secret, plot, error = sent(model, 2)
    assert KEY not in text_of(secret) and "api_key='[redacted]'" in text_of(secret)
    assert plot["images"][0]["media_type"] == "image/png"  # the figure reaches the model as an image
    assert "error ZeroDivisionError: division by zero" in text_of(error) and "\x1b" not in text_of(error)


def test_a_saved_notebook_refuses_every_change_and_every_run(tmp_path, monkeypatch):
    path = six_cells(tmp_path)
    before, cell = path.read_bytes(), ids(path)
    _a_person_at_the_terminal(monkeypatch)
    model = Scripted([[("edit_cell", {"cell_id": cell[1], "source": "x = 1"}),
                       ("insert_cell", {"source": "y = 2"}), ("delete_cell", {"cell_id": cell[0]})],
                      [("run_cell", {"cell_id": cell[1]})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.notebook(path=path, edit=True, run=True)],
                              approve_fn=bettong_nb.ask_in_terminal).run("change it")
    assert [c.status for c in result.tool_calls] == ["denied"] * 4
    assert all("this capability reads a saved file" in c.result for c in result.tool_calls)
    assert path.read_bytes() == before


def test_read_only_unless_asked():
    assert [t.name for t in caps.notebook().tools] == ["list_cells", "read_cell"]
    assert [t.name for t in caps.notebook(edit=True).tools][2:] == ["insert_cell", "edit_cell", "delete_cell"]
    assert caps.notebook(run=True).tools[-1].name == "run_cell"
    with pytest.raises(TypeError, match="edit=.... takes True or False"):
        caps.notebook(edit="yes")


def test_without_a_notebook_the_tool_says_how_to_give_one():
    hooks.provide(open_notebook=None)
    model = Scripted([[("list_cells", {})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.notebook()]).run("look")
    assert "no notebook here" in result.tool_calls[0].result and "path=" in result.tool_calls[0].result


# --- a notebook that keeps its cells in memory, deciding as told ---------------------------------

class Book:
    mode = "the test's notebook"

    def __init__(self, path: Path, decide):
        self.cells_ = [dict(c, source=c["source"]) for c in nbcap.read_saved(path)]
        self.decide, self.asked, self.ran = decide, [], []

    async def cells(self):
        return [dict(c) for c in self.cells_]

    def prompt_cell_id(self):
        return self.cells_[-1]["id"]

    async def propose(self, change: Change) -> Decision:
        self.asked.append(change)
        accepted, reason = self.decide(change)
        if not accepted:
            return Decision(False, reason)
        index = next(i for i, c in enumerate(self.cells_) if c["id"] == change.cell_id)
        self.cells_[index] = dict(self.cells_[index], source=change.source)
        return Decision(True, cell_id=change.cell_id)

    async def run(self, cell_id, source):
        self.ran.append(source)
        return [{"output_type": "stream", "name": "stdout", "text": f"ran {len(source)} chars, {KEY}\n"}]


@pytest.fixture
def book(tmp_path):
    made = []

    def install(decide):
        book = Book(six_cells(tmp_path), decide)

        async def opener():
            return book

        hooks.provide(open_notebook=opener)
        made.append(book)
        return book

    yield install
    hooks.provide(open_notebook=None)


def _a_person_at_the_terminal(monkeypatch, answers="y\n" * 5):
    class Terminal(io.StringIO):  # a person typing: stdin and stdout are a terminal
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal(answers))
    monkeypatch.setattr("sys.stdout", Terminal())


def test_an_accepted_edit_and_a_rejection_whose_reason_reaches_the_model(book):
    notebook = book(lambda change: (change.source != "bad", "use the loader in utils.py"))
    cell = [c["id"] for c in notebook.cells_]
    model = Scripted([[("edit_cell", {"cell_id": cell[1], "source": "df = load()"})],
                      [("edit_cell", {"cell_id": cell[1], "source": "bad"})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.notebook(edit=True)]).run("tidy")
    first, second = result.tool_calls
    assert first.status == "ok" and "accepted" in first.result and notebook.cells_[1]["source"] == "df = load()"
    assert second.status == "denied" and "use the loader in utils.py" in second.result
    assert "use the loader in utils.py" in text_of(sent(model, 2)[0])
    change = notebook.asked[0]
    assert change.old.startswith("import pandas") and change.origin["model"] == "scripted"


def test_edits_that_would_harm_are_refused_before_anyone_is_asked(book):
    notebook = book(lambda change: (True, ""))
    cell = [c["id"] for c in notebook.cells_]
    calls = [
        ("edit_cell", {"cell_id": cell[2], "source": "client = make_client(api_key='[redacted]')  # tidied"}),
        ("insert_cell", {"source": "token = '[redacted]'"}),
        ("edit_cell", {"cell_id": cell[5], "source": "%%agent\nsomething else"}),  # the agent's own cell
        ("delete_cell", {"cell_id": cell[5]}),
        ("edit_cell", {"cell_id": "cell-of-another-notebook", "source": "x"}),
        ("insert_cell", {"source": "x" * (nbcap.MAX_SOURCE + 1)}),
        ("insert_cell", {"source": "x", "cell_type": "raw"}),
        ("run_cell", {"cell_id": cell[5]}),
    ]
    result = bettong_nb.agent(provider=Scripted([[c] for c in calls] + ["done"]),
                              capabilities=[caps.notebook(edit=True)]).run("go")
    why = [c.result for c in result.tool_calls]
    assert "placeholder [redacted]" in why[0] and "placeholder [redacted]" in why[1]
    assert "%%agent cell" in why[2] and "%%agent cell" in why[3]
    assert "no cell with id 'cell-of-another-notebook'" in why[4]
    assert f"at most {nbcap.MAX_SOURCE}" in why[5] and "code or markdown" in why[6]
    assert "no capability provides a tool called run_cell" in why[7]  # not offered without run=True
    assert notebook.asked == [] and KEY in notebook.cells_[2]["source"]


def test_run_cell_never_runs_on_an_automatic_yes(book):
    notebook = book(lambda change: (True, ""))
    cell = notebook.cells_[1]["id"]
    model = Scripted([[("run_cell", {"cell_id": cell})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.notebook(run=True)], approve_fn=True).run("go")
    assert result.tool_calls[0].status == "denied" and "needs a person's approval" in result.tool_calls[0].result
    assert notebook.ran == []


def test_run_cell_after_a_persons_yes_returns_the_outputs_redacted(book, monkeypatch):
    notebook = book(lambda change: (True, ""))
    cell = notebook.cells_[1]["id"]
    _a_person_at_the_terminal(monkeypatch)
    model = Scripted([[("run_cell", {"cell_id": cell})], "done"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.notebook(run=True)],
                              approve_fn=bettong_nb.ask_in_terminal).run("go")
    assert notebook.ran == [notebook.cells_[1]["source"]]
    got = text_of(sent(model)[0])
    assert got.startswith(f"ran cell [1] id={cell}:\nstdout:\nran ") and KEY not in got and "[redacted]" in got
    assert result.tool_calls[0].status == "ok"


def test_the_saved_file_reader_says_what_is_wrong(tmp_path):
    (tmp_path / "bad.ipynb").write_text("{not json")
    (tmp_path / "list.ipynb").write_text(json.dumps({"cells": "no"}))
    with pytest.raises(ValueError, match="cannot read the notebook"):
        nbcap.read_saved(tmp_path / "bad.ipynb")
    with pytest.raises(ValueError, match="is not a notebook"):
        nbcap.read_saved(tmp_path / "list.ipynb")
