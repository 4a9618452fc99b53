"""The offline demo model in a real kernel (nbclient): ``%%agent --data df`` answers with a SQL query
over the frame, and ``%agent explain`` / ``%agent fix`` answer one line naming the error and how to
set a real model."""

from __future__ import annotations

import nbclient
import nbformat

from support.notebooks import answers, data

SETUP = """%load_ext bettong_nb
import pandas as pd
moons = pd.DataFrame({"moon": ["Io", "Europa", "Titan", "Phobos"], "planet": ["Jupiter", "Jupiter", "Saturn", "Mars"]})"""


def test_data_cells_query_and_errors_are_sent_to_a_real_model(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)  # the default session is the offline model
    cells = [SETUP, "%%agent --data moons\nWhich planet has the most moons?", "print(undefined_name)",
             "%agent explain", "%agent fix", "_agent_result.tool_calls"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [(i, o.ename) for i, c in enumerate(nb.cells) for o in c.outputs if o.output_type == "error"]
    assert errors == [(2, "NameError")]

    (answer,) = answers(nb.cells[1])
    assert "SELECT planet, count(*) AS moons FROM moons GROUP BY planet ORDER BY moons DESC, planet" in answer
    assert "| Jupiter | 2 |" in answer and "I have no tools" not in answer

    for cell in nb.cells[3:5]:
        (line,) = answers(cell)
        assert len(line.splitlines()) == 1
        assert line.startswith("`NameError: name 'undefined_name' is not defined`: explaining or fixing an error "
                               "needs a real model")
        assert "bettong_nb.deepseek()" in line and "%config AgentMagics.model" in line
    assert any("no python code block; no cell was added" in t for t in data(nb.cells[4], "text/plain"))
    assert data(nb.cells[5], "text/plain") == ["[]"]  # fix called no tool: it only said what it needs
