"""What a person sees of a proposal (the diff: inert, hidden characters shown), what an accepted
change records, and the history read back from a saved notebook."""

from __future__ import annotations

import re

import nbformat

import bettong_nb
from bettong_nb.capabilities.notebook import Change
from bettong_nb.notebook.history import history_rows
from bettong_nb.notebook.proposals import diff_html, provenance
from bettong_nb.safety.sanitize import visible_controls as visible


def test_a_diff_is_escaped_coloured_and_shows_what_hides():
    old = "x = 1\nprint(x)\n"
    new = "x = 2\nprint(x)\n<script>alert(1)</script><img src=x onerror=alert(2)>\nok = 'a\u202eb\u200bc'\n"
    shown = diff_html(old, new)
    assert "<script" not in shown and "<img" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert "\u202e" not in shown and "\u200b" not in shown
    assert "⟨U+202E⟩" in shown and "⟨U+200B⟩" in shown and "hidden or bidi characters" in shown
    assert re.search(r"<span style='color:[^']+'>-x = 1</span>", shown)
    assert re.search(r"<span style='color:[^']+'>\+x = 2</span>", shown)


def test_visible_names_every_invisible_character_and_leaves_text_alone():
    assert visible("plain\ttext\n") == "plain\ttext\n"
    assert visible("a\u2066b\u2069\ufeff\x1b[2J") == "a⟨U+2066⟩b⟨U+2069⟩⟨U+FEFF⟩⟨U+001B⟩[2J"


def test_a_huge_diff_is_bounded():
    shown = diff_html("", "\n".join(f"line {n}" for n in range(5000)))
    assert shown.count("\n") < 500 and "more lines of the diff" in shown


def test_provenance_says_what_who_when_and_hashes_the_diff():
    change = Change("edit", "c1", "x = 2\n", "x = 1\n", origin={"model": "m", "session": "s1", "turn": 3})
    entry = provenance(change, prompt_cell="p", cell_id="c1")
    assert {k: entry[k] for k in ("action", "cell", "model", "session", "turn", "prompt_cell", "decided_by")} == \
        {"action": "edit", "cell": "c1", "model": "m", "session": "s1", "turn": 3, "prompt_cell": "p",
         "decided_by": "you"}
    assert entry["time"].endswith("+00:00") and len(entry["diff_sha256"]) == 64
    assert provenance(change, prompt_cell="p", cell_id="c1")["diff_sha256"] == entry["diff_sha256"]


def test_history_of_a_saved_notebook(tmp_path):
    made = {"action": "insert", "cell": "new", "model": "m", "time": "2026-12-02T06:00:00+00:00",
            "decided_by": "you", "diff_sha256": "a" * 64}
    edited = {"action": "edit", "cell": "old", "model": "m", "time": "2026-12-02T06:01:00+00:00",
              "decided_by": "you", "diff_sha256": "b" * 64}
    gone = {"action": "delete", "cell": "gone", "model": "m", "time": "2026-12-02T06:02:00+00:00",
            "decided_by": "you", "diff_sha256": "c" * 64}
    cells = [nbformat.v4.new_code_cell("old", metadata={"bettong_nb": [edited]}),
             nbformat.v4.new_code_cell("%%agent --notebook\ngo", metadata={"bettong_nb": [gone]}),
             nbformat.v4.new_code_cell("new", metadata={"bettong_nb": [made, "not an entry"]}),
             nbformat.v4.new_code_cell("plain", metadata={"bettong_nb": "not a list"})]
    for cell, cell_id in zip(cells, ("old", "prompt", "new", "plain")):
        cell.id = cell_id
    path = tmp_path / "h.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    frame = bettong_nb.notebook_history(path)
    assert list(frame["action"]) == ["insert", "edit", "delete"]
    assert list(frame["cell"]) == ["new", "old", "gone"]
    assert frame["cell_index"].tolist()[:2] == [2, 0] and frame["cell_index"].isna().tolist()[2]
    unsaved = {**edited, "time": "2026-12-02T07:00:00+00:00", "diff_sha256": "d" * 64}
    assert len(bettong_nb.notebook_history(path, also=[edited, unsaved])) == 4  # the saved one is not doubled
    assert len(history_rows([{"metadata": {}}])) == 0
