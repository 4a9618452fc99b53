"""The course policy and the exam lock in real kernels (nbclient): %%agent, %agent commands and
runs started in a cell, sync and async."""

from __future__ import annotations

import json
import os

import nbclient
import nbformat
import pytest

from support.notebooks import PRICED_BOT, stdout

LOCKED = {"bettong_nb": {"agent": "off"}}


def execute(cells, folder, *, metadata=None, env=None, name="work.ipynb", tell_path=True):
    """Save a notebook of ``cells`` as ``folder/name`` and run it, errors allowed, in a kernel
    started with ``env`` (and JPY_SESSION_NAME, as a Jupyter server sets it, when ``tell_path``)."""
    folder.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells],
                                        metadata=metadata or {})
    path = folder / name
    nbformat.write(notebook, path)
    environment = {key: value for key, value in os.environ.items() if key != "BETTONG_NB_POLICY"}
    environment.update(env or {})
    if tell_path:
        environment["JPY_SESSION_NAME"] = str(path)
    nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}}).execute(env=environment)
    return notebook


def errors(cell) -> list[tuple[str, str]]:
    return [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]


def one_line_refusal(cell, *words):
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert error.ename == "PolicyError", error
    assert "\n" not in error.evalue and all(w in error.evalue for w in words), error.evalue
    assert len(error.traceback) == 1, error.traceback  # one line, not a traceback through the library


@pytest.fixture
def config(tmp_path, monkeypatch):
    """Jupyter config folders of this test only (so no policy of the machine counts)."""
    folder = tmp_path / "config"
    folder.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(folder))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "nothing"))
    return folder


CELLS = [
    PRICED_BOT,
    "%%agent bot\nhi",
    "r = bot.run('hi'); print(r.output)",
    "r = await bot.arun('hi'); print(r.output)",
    "%agent usage",
    "%agent policy",
]


def test_the_exam_lock_refuses_every_way_in(tmp_path, config):
    nb = execute(CELLS, tmp_path / "exam", metadata=LOCKED)
    assert errors(nb.cells[0]) == []
    for cell in nb.cells[1:5]:
        one_line_refusal(cell, "agents are off in this notebook", "exam lock")
    assert errors(nb.cells[5]) == [] and "agents are off in this notebook" in stdout(nb.cells[5])
    # The same cells in a notebook without the lock run.
    nb = execute(CELLS, tmp_path / "free")
    assert [errors(cell) for cell in nb.cells] == [[]] * len(CELLS)
    assert stdout(nb.cells[2]).strip() == "ok" and stdout(nb.cells[3]).strip() == "ok"
    assert "No course policy" in stdout(nb.cells[5]) and "agents allowed" in stdout(nb.cells[5])


def test_locked_folders_lock_notebooks_under_them_with_or_without_their_path(tmp_path, config):
    exams = tmp_path / "exams"
    (config / "bettong_nb_policy.json").write_text(json.dumps({"locked_folders": [str(exams)],
                                                               "message": "Ask your teacher."}))
    for tell_path in (True, False):  # without JPY_SESSION_NAME (nbclient, papermill) its folder counts
        nb = execute(CELLS, exams / "week1", tell_path=tell_path)
        for cell in nb.cells[1:5]:
            one_line_refusal(cell, f"notebooks under {exams}", "locked_folders", "Ask your teacher.")
        assert str(config / "bettong_nb_policy.json") in stdout(nb.cells[5])
    nb = execute(CELLS, tmp_path / "homework")
    assert [errors(cell) for cell in nb.cells] == [[]] * len(CELLS)


SETUP = PRICED_BOT + """
def big(request):
    return bettong_nb.Response([{"type": "text", "text": "ok"}], usage=bettong_nb.Usage(1, 200, 2, 202))
course = bettong_nb.agent(provider=big, model="course-model")
noted = []
def note(text: str) -> str:
    \"\"\"Write a note.\"\"\"
    noted.append(text)
    return "noted"
def calls_note(request):
    if len(request.messages) == 1:
        return bettong_nb.Response([{"type": "tool_use", "id": "t1", "name": "note", "input": {"text": "a"}}])
    return bettong_nb.Response([{"type": "text", "text": "done"}])
noter = bettong_nb.agent(provider=calls_note, model="course-model", approve_fn=True,
                         capabilities=[{"id": "notes", "instructions": None, "tools": [bettong_nb.tool(note)]}])"""


def test_the_policy_rules_hold_in_percent_agent_cells(tmp_path, config):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"allowed_models": ["course-model"], "token_budget": {"kernel": 500},
                                "approvals_required": True}))
    cells = [
        SETUP,
        "%%agent bot\nhi",  # the bot names no model: not an allowed one
        "r = bot.run('hi')",
        "r = noter.run('go'); print(noted, r.tool_calls[0].status)",  # nobody to approve: denied
        "%%agent course\nhi",
        "r = await course.arun('hi'); print(r.done, r.output)",
        "r = course.run('hi'); print(r.done, r.stop_reason)",
        "%agent policy",
    ]
    nb = execute(cells, tmp_path / "class", env={"BETTONG_NB_POLICY": str(path)})
    assert errors(nb.cells[0]) == []
    text = json.dumps(nb.cells[1].outputs)
    assert "allowed_models" in text and str(path) in text
    one_line_refusal(nb.cells[2], "allowed_models", str(path))
    assert stdout(nb.cells[3]).strip() == "[] denied"
    assert errors(nb.cells[4]) == [] and "ok" in json.dumps(nb.cells[4].outputs)
    assert stdout(nb.cells[5]).strip() == "True ok"
    # 202 tokens an answer (and about 90 a request's estimate): the third passes the kernel's 500.
    assert stdout(nb.cells[6]).strip() == "False budget"
    shown = stdout(nb.cells[7])
    assert "allowed_models" in shown and "approvals_required = true" in shown and str(path) in shown
