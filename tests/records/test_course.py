"""course_usage: a folder of student submissions — saved sessions and notebooks run in real
kernels — read into one frame, a row per file."""

from __future__ import annotations

import json
import math

import nbformat

import bettong_nb
from bettong_nb.providers.scripted import Scripted
from support.notebooks import run_notebook

NOTEBOOK_SETUP = """\
%load_ext bettong_nb
import bettong_nb
from bettong_nb.providers.scripted import Scripted

def read_note(path: str) -> str:
    \"\"\"Read a note.\"\"\"
    return "buy milk"

def delete_all(path: str) -> str:
    \"\"\"Delete everything.\"\"\"
    return "gone"

def used(prompt, completion):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

bot = bettong_nb.agent(provider=Scripted([
    {"tool_calls": [("read_note", {"path": "a"}), ("delete_all", {"path": "/"})], "usage": used(100, 10)},
    {"text": "Done.", "usage": used(20, 5)}, {"text": "Second.", "usage": used(30, 3)}]),
                       capabilities=[{"id": "notes", "tools": [bettong_nb.tool(read_note), bettong_nb.tool(delete_all)]}],
                       approve_fn=lambda request: request.tool != "delete_all", prices={"input": 1, "output": 2})
"""


def _session_file(path):
    def look(city: str) -> str:
        """Look."""
        return city

    agent = bettong_nb.agent(provider=Scripted([[("look", {"city": "Oslo"}), ("look", {"city": "Rome"})], "ok",
                                                [("look", {"city": "Lima"})], "again"]),
                             capabilities=[{"id": "w", "tools": [bettong_nb.tool(look)]}],
                             approve_fn=lambda request: request.args["city"] != "Rome", prices={"input": 1, "output": 1})
    chat = agent.session()
    chat.run("one")
    chat.run("two")
    chat.save(path)
    return chat


def test_a_folder_of_sessions_and_notebooks_is_one_row_each(tmp_path):
    submissions = tmp_path / "submissions"
    (submissions / "bob").mkdir(parents=True)
    chat = _session_file(submissions / "alice.json")

    nb = run_notebook([NOTEBOOK_SETUP, "%%agent bot\nTidy up", "%%agent bot\nAnd?", "x = 1"], tmp_path)
    # the cell an agent wrote carries its provenance (what the notebook capability stamps)
    nb.cells[3].metadata["bettong_nb"] = [{"action": "insert", "model": "m", "decided_by": "you"}]
    nbformat.write(nb, submissions / "bob" / "work.ipynb")
    (submissions / "carol.json").write_text("{not json")
    (submissions / ".ipynb_checkpoints").mkdir()
    (submissions / ".ipynb_checkpoints" / "work-checkpoint.ipynb").write_text("{}")

    frame = bettong_nb.course_usage(submissions)
    assert list(frame.columns) == ["file", "requests", "prompt_tokens", "completion_tokens", "cost", "tools",
                                   "approved", "denied", "agent_cells", "error"]
    rows = {row.file.rsplit("/", 1)[-1]: row for row in frame.itertuples()}
    assert sorted(rows) == ["alice.json", "carol.json", "work.ipynb"]  # checkpoints are not submissions

    alice = rows["alice.json"]
    assert (alice.requests, alice.prompt_tokens, alice.completion_tokens) == (
        chat.usage.requests, chat.usage.prompt_tokens, chat.usage.completion_tokens)
    assert math.isclose(alice.cost, chat.cost()) and alice.tools == "look"
    assert (alice.approved, alice.denied, alice.agent_cells, alice.error) == (2, 1, 0, "")

    work = rows["work.ipynb"]
    assert work.requests == 3 and work.tools == "read_note, delete_all"
    assert (work.approved, work.denied, work.agent_cells) == (1, 1, 1)
    assert (work.prompt_tokens, work.completion_tokens) == (150, 18)
    assert math.isclose(work.cost, (150 * 1 + 18 * 2) / 1e6)  # the usage lines' costs, summed

    carol = rows["carol.json"]
    assert carol.error.startswith("ResumeError") and math.isnan(carol.cost) and carol.requests == 0

    # a list of files works the same, and a notebook with cleared outputs still shows its provenance
    cleared = nbformat.read(submissions / "bob" / "work.ipynb", as_version=4)
    for cell in cleared.cells:
        cell.outputs = [] if cell.cell_type == "code" else cell.get("outputs")
    nbformat.write(cleared, tmp_path / "cleared.ipynb")
    listed = bettong_nb.course_usage([submissions / "alice.json", tmp_path / "cleared.ipynb"])
    assert listed["requests"].tolist() == [alice.requests, 0] and listed["agent_cells"].tolist() == [0, 1]
    assert json.loads((submissions / "alice.json").read_text())["format"] == "bettong_nb.session"
