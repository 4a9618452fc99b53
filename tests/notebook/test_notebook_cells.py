"""Per-cell usage: each model request and tool call records the notebook cell it ran from, and
``%agent usage --by cell`` adds them up per cell, the cell's first line beside it — in a real
kernel driven by nbclient (which sends no cell id: cells are ``In[n]``), and in plain Python."""

from __future__ import annotations

import json
import math

import bettong_nb
from bettong_nb.core import kernel
from bettong_nb.notebook.cells import first_line, usage_by_cell
from support.notebooks import PRICED_BOT as SETUP, run_notebook, stdout



def test_usage_by_cell_in_a_kernel(tmp_path):
    nb = run_notebook([SETUP, "%%agent bot\nWhat is a bettong?", "%%agent bot\nAnd a quokka?\nBe brief.",
                       "import json\nby = %agent usage bot --by cell\nprint(json.dumps(by.to_dict('records')))",
                       "print(json.dumps(_agent_session.usage_frame()['cell'].tolist()))"], tmp_path)
    rows = json.loads(stdout(nb.cells[3]))
    assert [(r["cell"], r["first_line"], r["requests"], r["prompt_tokens"]) for r in rows] == [
        ("In[2]", "%%agent bot · What is a bettong?", 1, 10), ("In[3]", "%%agent bot · And a quokka?", 1, 10)]
    assert math.isclose(rows[0]["cost_total"], (10 * 1.0 + 2 * 2.0) / 1e6)
    assert json.loads(stdout(nb.cells[4])) == ["In[2]", "In[3]"]


def test_a_session_saved_and_loaded_keeps_its_cells(tmp_path):
    def model(request):
        if request.messages[-1]["role"] == "user" and isinstance(request.messages[-1]["content"], str):
            return bettong_nb.Response([{"type": "tool_use", "id": "t1", "name": "note", "input": {}}],
                                       stop_reason="tool_use", usage=bettong_nb.Usage(1, 10, 2, 12))
        return bettong_nb.Response([{"type": "text", "text": "ok"}], usage=bettong_nb.Usage(1, 10, 2, 12))

    note = {"id": "notes", "instructions": None,
            "tools": [{"name": "note", "description": "Notes.", "parameters": {}, "handler": lambda: "noted"}]}
    agent = bettong_nb.agent(provider=model, capabilities=[note])
    chat = agent.session()
    previous = kernel.install_cell(lambda: "cell-a")
    try:
        chat.run("one")
        kernel.install_cell(lambda: "cell-b")
        chat.run("two")
    finally:
        kernel.install_cell(previous)
    assert chat.usage_frame()["cell"].tolist() == ["cell-a"] * 2 + ["cell-b"] * 2
    assert chat.tool_frame()["cell"].tolist() == ["cell-a", "cell-b"]
    chat.save(tmp_path / "chat.json")
    loaded = bettong_nb.load_session(tmp_path / "chat.json", agent)
    assert loaded.usage_frame()["cell"].tolist() == ["cell-a"] * 2 + ["cell-b"] * 2
    assert [c.cell for c in loaded.tool_calls] == ["cell-a", "cell-b"]
    table = usage_by_cell(loaded, {"cell-a": "first"})
    assert table[["cell", "first_line", "requests", "prompt_tokens"]].values.tolist() == [
        ["cell-a", "first", 2, 20], ["cell-b", "", 2, 20]]

    old = json.loads((tmp_path / "chat.json").read_text())  # a file saved before cells were recorded
    for record in old["requests"] + old["tool_calls"]:
        del record["cell"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert bettong_nb.load_session(tmp_path / "old.json", agent).usage_frame()["cell"].isna().all()


def test_a_failing_finder_costs_no_run():
    def broken():
        raise RuntimeError("no kernel here")

    previous = kernel.install_cell(broken)
    try:
        ok = bettong_nb.Response([{"type": "text", "text": "ok"}])
        result = bettong_nb.agent(provider=lambda request: ok).run("x")
    finally:
        kernel.install_cell(previous)
    assert result.output == "ok" and result.requests[0].cell is None


def test_first_line():
    assert first_line("\n\n  x = 1\ny = 2") == "x = 1"
    magic = "%%agent chat --approve\n\nSummarise {report}\nthen stop"
    assert first_line(magic) == "%%agent chat --approve · Summarise {report}"
    assert first_line("%%agent") == "%%agent" and first_line("") == ""
    assert len(first_line("y" * 500)) == 80
