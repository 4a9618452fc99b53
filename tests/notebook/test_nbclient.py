"""The magics in real kernels: notebooks run by nbclient (no widget frontend). Interrupts in a
live kernel are in test_kernel_interrupts.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from support import TESTS
from support.notebooks import WIDGET, answers, data as _data, run_notebook, stdout as _stdout

NOTEBOOKS = TESTS / "notebooks"


def _execute(name: str, tmp_path: Path, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)  # the default session must be the offline one
    shutil.copy(NOTEBOOKS / name, tmp_path / name)
    return run_notebook(nbformat.read(tmp_path / name, as_version=4), tmp_path)


def test_magics_notebook(tmp_path, monkeypatch):
    nb = _execute("magics.ipynb", tmp_path, monkeypatch)
    run = nb.cells[1]
    (activity,) = [h for h in _data(run, "text/html") if "bettong-live" in h]
    assert '<details class="bettong-tool bettong-call-call_0_0"' in activity
    assert "read_note(path=&quot;todo.txt&quot;)</code> →" in activity and ">ok</span>" in activity
    assert "&lt;b&gt;contents of todo.txt&lt;/b&gt;" in activity  # a tool result is shown escaped
    assert answers(run) == ["The note says **buy milk**."]
    assert any("The note says <strong>buy milk</strong>." in h for h in _data(run, "text/html"))
    assert _data(run, "text/plain")[-1] == "2 requests 150 tokens (120 in, 30 out) [100 cached, 83% of input] · cost $0.00009"

    lines = _stdout(nb.cells[2]).splitlines()
    assert lines[0] == "True The note says **buy milk**. ['ok']"  # -o VAR and _agent_result, set when the cell ended
    assert lines[1] == 'What does todo.txt say? Keep code as is: def f(): return {"a": todo.txt}'

    assert answers(nb.cells[3]) == ["Second turn: still **milk**."]
    (usage,) = _data(nb.cells[4], "text/html")
    assert "cost_total" in usage and usage.count("<tr>") == 3  # one body row per request
    (sessions,) = _data(nb.cells[5], "text/plain")
    assert sessions.splitlines()[1].split()[1:4] == ["bot", "agent", "2"]
    (offline,) = answers(nb.cells[6])
    assert "offline demo model" in offline
    (transcript,) = _data(nb.cells[7], "text/html")
    assert "You · turn 1" in transcript and "You · turn 2" in transcript and "<details" in transcript
    assert "<script" not in transcript


def test_an_approval_without_a_frontend_is_denied_by_the_headless_policy(tmp_path, monkeypatch):
    nb = _execute("headless_approval.ipynb", tmp_path, monkeypatch)
    first, told = _stdout(nb.cells[2]).splitlines()
    ran, status, elapsed = first.split(" ", 2)
    assert ran == "[]" and status == "denied"
    assert float(elapsed) < 20  # decided by the frontend probe, well within the approval timeout
    assert told == ("ERROR: delete_everything was not allowed: no one approved it: no widget frontend is connected "
                    "to this kernel (a headless run); the headless policy denies tool calls that need approval")
    run = nb.cells[1]
    assert not _data(run, WIDGET)  # no prompt was ever shown, so no widget is left in the notebook
    assert answers(run) == ["I was not allowed to delete it."]
    assert ">denied by the headless policy: no widget frontend is connected" in _data(run, "text/html")[0]


def test_task_mode_returns_at_once_and_wait_joins(tmp_path, monkeypatch):
    nb = _execute("task_mode.ipynb", tmp_path, monkeypatch)
    assert _stdout(nb.cells[2]).splitlines() == ["returned before the answer: True", "Background answer. True 1"]


def test_every_headless_decision_is_recorded_saying_who_made_it(tmp_path, monkeypatch):
    # With headless_policy "allow" the calls run, and the saved cell says they were allowed by the
    # policy, not by a person; with "deny" it says the policy denied them. Both --quiet and not.
    notebook = nbformat.read(NOTEBOOKS / "headless_approval.ipynb", as_version=4)
    cases = (("allow", "", "['/']", "allowed automatically (headless policy)"),
             ("allow", " --quiet", "['/']", "allowed automatically (headless policy)"),
             ("deny", "", "[]", "denied by the headless policy"))
    cells = [notebook.cells[0].source]  # one kernel: each case a fresh bot under its policy
    for policy, flags, _, _ in cases:
        cells += [f"%config AgentMagics.headless_policy = {policy!r}\nran.clear()\n"
                  "bot = bettong_nb.agent(provider=Scripted([[('delete_everything', {'path': '/'})], 'No.']), "
                  "capabilities=bot.options.capabilities)",
                  f"%%agent bot --approve{flags} -o res\nDelete everything", "print(ran)"]
    nb = run_notebook(cells, tmp_path)
    for index, (policy, flags, ran, said) in enumerate(cases):
        agent_cell, printed = nb.cells[2 + 3 * index], nb.cells[3 + 3 * index]
        saved = "".join(_data(agent_cell, "text/html") + _data(agent_cell, "text/plain"))
        assert f"{said}: no widget frontend is connected to this kernel" in saved, (policy, flags, saved)
        assert "allowed by you" not in saved
        assert _stdout(printed).strip() == ran
