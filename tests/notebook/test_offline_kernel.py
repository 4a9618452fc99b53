"""The keyless notebook in a real kernel (nbclient), one notebook: the offline demo model describes
then queries a ``--data`` frame or folder, lists then reads files and the saved notebook's cells,
answers a follow-up from its own turn, and says that ``%agent explain`` / ``%agent fix`` need a
real model; a bare ``--data`` says how; the price warning comes once, on a priced model only;
typos get a guess; ``--help`` opens with its usage line."""

from __future__ import annotations

import os

import nbclient
import nbformat

from support.keyless import FILES_AND_DATA, PRICES_AND_TYPOS
from support.notebooks import answers, data, stdout

SETUP = """%load_ext bettong_nb
import bettong_nb
import pandas as pd
from bettong_nb.providers.scripted import Scripted
moons = pd.DataFrame({"moon": ["Io", "Europa", "Titan", "Phobos"], "planet": ["Jupiter", "Jupiter", "Saturn", "Mars"]})
files = bettong_nb.offline(root="data")
priced = bettong_nb.agent(provider=Scripted(["hi", "ok", "ok"]), prices={"input": 1, "output": 1})"""
CELLS = [
    ("setup", SETUP),
    ("sql", "%%agent --data moons\nWhich planet has the most moons?"),
    ("oops", "print(undefined_name)"),
    ("explain", "%agent explain"),
    ("fix", "%agent fix"),
    ("fixed", "_agent_result.tool_calls"),
    ("orbits", "orbits = [1, 4, 9]  # the orbits, in years"),
    ("nbread", "%%agent --notebook\nWhat does the orbits cell do?"),
    ("5e1f0a2b", "radius_km = 6371  # Earth's mean radius"),  # an id as JupyterLab makes them: no word
    ("nbwords", "%%agent --notebook\nWhich radius do we use?"),
    *FILES_AND_DATA,
    *PRICES_AND_TYPOS,
]
AT = {cell_id: index for index, (cell_id, _) in enumerate(CELLS)}
MISSIONS = "mission,target,agency\nVoyager 1,Jupiter,NASA\nGalileo,Jupiter,NASA\nCassini-Huygens,Saturn,NASA/ESA/ASI\n"


def _calls(cell) -> list[str]:
    """The cell's tool calls as its text form lists them, without their results' status."""
    (activity,) = [t for t in data(cell, "text/plain") if t.startswith("· ")]
    return [line.removeprefix("· ").rsplit(" → ", 1)[0] for line in activity.splitlines()]


def _stderr(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")


def test_the_keyless_notebook_in_a_kernel(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)  # the default session is the offline model
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "missions.csv").write_text(MISSIONS)
    (tmp_path / "data" / "notes.txt").write_text("The launch window opens on 3 May.\n")
    cells = []
    for cell_id, source in CELLS:
        cells.append(nbformat.v4.new_code_cell(source))
        cells[-1].id = cell_id
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "keyless.ipynb")
    nb = nbformat.read(tmp_path / "keyless.ipynb", as_version=4)
    # As a Jupyter server starts a notebook's kernel: JPY_SESSION_NAME names the notebook.
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute(
        env={**os.environ, "JPY_SESSION_NAME": "keyless.ipynb"})
    ran = {cell_id: nb.cells[index] for cell_id, index in AT.items()}
    errors = [(c.id, o.ename) for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert errors == [("oops", "NameError")]  # a usage error is one line on stderr, no traceback

    # SQL: the frame described, then queried; the answer is the query's result; no price talk
    assert [c.split("(")[0] for c in _calls(ran["sql"])] == ["describe_data", "query_data"]
    (answer,) = answers(ran["sql"])
    assert "SELECT planet, count(*) AS moons FROM moons GROUP BY planet ORDER BY moons DESC, planet" in answer
    assert "| Jupiter | 2 |" in answer and "I have no tools" not in answer
    assert "full price" not in str(ran["sql"].outputs)

    for cell in (ran["explain"], ran["fix"]):
        (line,) = answers(cell)
        assert len(line.splitlines()) == 1
        assert line.startswith("`NameError: name 'undefined_name' is not defined`: explaining or fixing an error "
                               "needs a real model")
        assert "bettong_nb.deepseek()" in line and "%config AgentMagics.model" in line
    assert any("no python code block; no cell was added" in t for t in data(ran["fix"], "text/plain"))
    assert data(ran["fixed"], "text/plain") == ["[]"]  # fix called no tool: it only said what it needs

    # the saved notebook's cells: listed, then the one the question names (by its id), nothing else
    assert _calls(ran["nbread"]) == ["list_cells()", 'read_cell(cell_id="orbits")']
    (answer,) = answers(ran["nbread"])
    assert "orbits = [1, 4, 9]  # the orbits, in years" in answer and "Jupiter" not in answer
    # named by no id: the cell that shares the question's words, not one that talks of cells and
    # notebooks as the instructions --notebook appends to the prompt do
    assert _calls(ran["nbwords"]) == ["list_cells()", 'read_cell(cell_id="5e1f0a2b")']

    # files: listed, then read; the follow-up answers from its own turn's reads only
    assert _calls(ran["files1"]) == ['list_dir(path=".")', 'read_file(path="missions.csv")']
    assert "Cassini-Huygens" in answers(ran["files1"])[0]
    assert _calls(ran["files2"]) == ['read_file(path="notes.txt")']
    (answer,) = answers(ran["files2"])
    assert "The launch window opens on 3 May." in answer and "Cassini" not in answer

    # --data with a folder: its files listed, the one asked about described, then queried
    assert [c.split("(")[0] for c in _calls(ran["folder"])] == ["query_data", "describe_data", "query_data"]
    assert "| NASA | 2 |" in answers(ran["folder"])[0]
    assert _stderr(ran["bare"]).startswith("UsageError: --data names what the agent may query with SQL in this cell")
    assert "--data sales,data/" in _stderr(ran["bare"])

    # a priced model hears of new tools once a conversation, in plain words; a free one never
    warned = [t for cell in (ran["price1"], ran["price2"], ran["price3"]) for t in data(cell, "text/plain")
              if "full price" in t]
    assert warned == ["⚠ New tools in this conversation (query_data, describe_data): this request pays full price "
                      "for its whole prompt once, instead of the provider's cheaper cached rate."]
    assert warned[0] in data(ran["price2"], "text/plain")
    assert not [c for c in nb.cells if "cached prefix" in str(c.outputs) or "tools appended" in str(c.outputs)]

    assert _stderr(ran["typo"]).strip() == \
        "UsageError: unrecognized arguments: --aprove (did you mean --approve?) (see %%agent --help)"
    assert _stderr(ran["command"]).startswith("UsageError: Unknown %agent command 'usgae' (did you mean usage?). ")
    helped = stdout(ran["help"])
    assert helped.startswith("usage: %%agent [TARGET] [--new]") and "::" not in helped
