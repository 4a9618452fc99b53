"""%%agent --notebook where no page runs bettong_nb's extension (nbclient, papermill, VS Code):
the agent reads the saved file the kernel knows, and every change and run is denied."""

from __future__ import annotations

import os
import textwrap

import nbformat

from support.notebooks import WIDGET, data, run_notebook, stdout

SETUP = textwrap.dedent('''
    %load_ext bettong_nb
    import bettong_nb
    from bettong_nb.providers.scripted import Scripted
    model = Scripted([
        [("list_cells", {})],
        [("read_cell", {"cell_id": "load"})],
        [("edit_cell", {"cell_id": "load", "source": "x = 2"}), ("insert_cell", {"source": "y = 3"}),
         ("delete_cell", {"cell_id": "load"})],
        [("run_cell", {"cell_id": "load"})],
        "Nothing could be changed here.",
    ])
    bot = bettong_nb.agent(provider=model)
''')
CHECK = textwrap.dedent('''
    for call in _agent_result.tool_calls:
        print(call.tool, call.status, call.result.replace(chr(10), " / "))
    print("x =", x)
''')


def _notebook(path, setup=SETUP):
    cells = [nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell("x = 1  # the loading cell"),
             nbformat.v4.new_code_cell("%%agent bot --notebook\nTidy the loading cell"), nbformat.v4.new_code_cell(CHECK)]
    for cell, cell_id in zip(cells, ("setup", "load", "agent", "check")):
        cell.id = cell_id
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_headless_reads_the_saved_file_and_denies_every_change(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    path = tmp_path / "tidy.ipynb"
    _notebook(path)
    before = path.read_bytes()
    # As a Jupyter server starts a notebook's kernel: JPY_SESSION_NAME names the notebook.
    nb = run_notebook(nbformat.read(path, as_version=4), tmp_path, env={**os.environ, "JPY_SESSION_NAME": "tidy.ipynb"})
    lines = stdout(nb.cells[3]).splitlines()
    listed, read, edit, insert, delete, run, x = lines
    assert listed.startswith(f"list_cells ok 4 cells, from the saved file {path} (it may be stale)")
    assert "[1] id=load code: 'x = 1  # the loading cell'" in listed
    assert read.startswith("read_cell ok cell [1] id=load code") and "x = 1" in read
    for line in (edit, insert, delete):
        assert " denied " in line and "rejected: no change can be made here: bettong_nb's notebook extension is not" \
            in line, line
    assert run.startswith("run_cell denied") and x == "x = 1"
    assert path.read_bytes() == before
    agent_cell = nb.cells[2]
    assert not data(agent_cell, WIDGET)  # no proposal or prompt was shown
    notes = [h for h in data(agent_cell, "text/plain") if "as last saved" in h]
    assert notes == [f"The agent reads {path} as last saved (bettong_nb's notebook extension is not in this page "
                     "(VS Code, Colab, nbclient or papermill, the classic notebook)); it cannot change or run cells here."]


def test_headless_without_a_known_file_says_the_cells_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    path = tmp_path / "nowhere.ipynb"
    _notebook(path)
    nb = run_notebook(nbformat.read(path, as_version=4), tmp_path)
    first, read = stdout(nb.cells[3]).splitlines()[:2]
    assert read.startswith("read_cell error ERROR: the notebook's cells cannot be read here")
    assert first.startswith("list_cells error ERROR: the notebook's cells cannot be read here") and \
        "the kernel does not know the notebook's file" in first


def test_run_in_kernel_runs_a_cell_as_the_person_would_and_keeps_its_outputs(tmp_path):
    code = textwrap.dedent('''
        import json
        from bettong_nb.notebook.live import run_in_kernel
        shown, count = await run_in_kernel(get_ipython(), "print('hi')\\nfrom IPython.display import HTML, display\\n"
                                                          "display(HTML('<b>x</b>'))\\nanswer = 6 * 7\\nanswer")
        failed, _ = await run_in_kernel(get_ipython(), "1/0")
        print(json.dumps([shown, count, failed, answer]))
    ''')
    nb = run_notebook([code], tmp_path)
    (printed,) = stdout(nb.cells[0]).splitlines()[-1:]
    import json

    shown, count, failed, answer = json.loads(printed)
    assert shown[0] == {"output_type": "stream", "name": "stdout", "text": "hi\n"}
    assert shown[1]["output_type"] == "display_data" and shown[1]["data"]["text/html"] == "<b>x</b>"
    assert shown[2] == {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
                        "execution_count": count} and isinstance(count, int) and answer == 42
    assert [o["output_type"] for o in failed] == ["error"] and failed[0]["ename"] == "ZeroDivisionError"
    assert len(nb.cells[0].outputs) == 1  # nothing of the inner runs reached the running cell


def test_agent_history_reads_the_notebooks_own_file(tmp_path):
    entry = {"action": "edit", "cell": "load", "model": "m-1", "session": "s", "turn": 2, "prompt_cell": "agent",
             "decided_by": "you", "time": "2026-12-02T06:00:00+00:00", "diff_sha256": "e" * 64}
    cells = [nbformat.v4.new_code_cell("%load_ext bettong_nb"),
             nbformat.v4.new_code_cell("x = 1", metadata={"bettong_nb": [entry]}),
             nbformat.v4.new_code_cell("h = %agent history\nprint(h[['action', 'cell', 'model', 'decided_by']]"
                                       ".to_dict('records'))")]
    cells[1].id = "load"
    path = tmp_path / "hist.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    nb = run_notebook(nbformat.read(path, as_version=4), tmp_path, env={**os.environ, "JPY_SESSION_NAME": "hist.ipynb"})
    assert stdout(nb.cells[2]).strip() == "[{'action': 'edit', 'cell': 'load', 'model': 'm-1', 'decided_by': 'you'}]"
