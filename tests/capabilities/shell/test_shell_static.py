"""With an allow list only static commands run (issue 24): every hostile command of the corpus is
refused with a reason naming its construct and plants nothing, though plain bash in the same
directory runs it (``live``); every static command of the corpus runs through the capability."""

from __future__ import annotations

import json
import subprocess

import pytest

from bettong_nb.capabilities.shell.capability import shell
from support import TESTS
from support.tools import model_reads

CORPUS = json.loads((TESTS / "corpora" / "shell_static.json").read_text())
PLANTED = "PWNED"


def allow_list(name) -> list[str]:
    if isinstance(name, dict):
        return CORPUS["allow"][name["base"]] + name["extra"]
    return CORPUS["allow"][name]


def prepared(path):
    """A directory with a script that plants the file, a list holding $(…), a git repository,
    a directory named echo and a file named --output=PWNED (for globs to find)."""
    path.mkdir(exist_ok=True)
    subprocess.run(["bash", "-c", CORPUS["setup"]], cwd=path, check=True, capture_output=True)
    return path


def ids(cases):
    return [repr(c["command"])[:70] for c in cases]


def test_the_corpus_is_large_and_hostile():
    assert len(CORPUS["refused"]) >= 100 and len(CORPUS["allowed"]) >= 40
    assert sum(c["live"] for c in CORPUS["refused"]) >= 150


@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "not-isolated"])
@pytest.mark.parametrize("case", CORPUS["refused"], ids=ids(CORPUS["refused"]))
def test_a_command_that_is_not_static_is_refused_and_plants_nothing(tmp_path, case, isolate):
    cap = shell(root=prepared(tmp_path / "cap"), allow=allow_list(case["allow"]), isolate=isolate, timeout=10)
    reason = cap.refusal(case["command"])
    assert reason is not None and case["construct"] in reason, reason
    assert model_reads(cap, "run_shell", command=case["command"]) == f"ERROR: refused: {reason}; the command was not run"
    assert not (tmp_path / "cap" / PLANTED).exists()
    if isolate:  # the same command in plain bash does plant it: the corpus is hostile, not merely odd
        raw = prepared(tmp_path / "raw")
        subprocess.run(["bash", "-c", case["command"]], cwd=raw, capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=10)
        assert (raw / PLANTED).exists() == case["live"]


@pytest.mark.parametrize("case", CORPUS["allowed"], ids=ids(CORPUS["allowed"]))
def test_a_static_command_still_runs(tmp_path, case):
    cap = shell(root=prepared(tmp_path), allow=allow_list(case["allow"]), timeout=10)
    assert cap.refusal(case["command"]) is None
    text = model_reads(cap, "run_shell", command=case["command"])
    assert text.startswith("exit 0\n"), text
    if case["stdout"] is not None:
        assert text[len("exit 0\n"):].startswith(case["stdout"] or "(no output)"), text
    assert not (tmp_path / PLANTED).exists()


def test_the_reason_names_the_construct_as_written():
    cap = shell(allow=[r"^echo\b"])
    assert cap.refusal("echo '(touch X)'; echo \"\\$$_\"; echo ${_@P}") == (
        '`"\\$$_"` holds a parameter expansion, `$_`; with an allow list only static words run')
    assert cap.refusal("echo ${_@P}") == (
        "`${_@P}` is a parameter expansion (a transformation); with an allow list only static words run")
    assert cap.refusal("echo *.txt") == ("`*.txt` is a glob bash expands from the files here; with an allow list "
                                         "only static words run (quote it or name the files)")
    assert cap.refusal("echo x > out") == (
        "this shell only runs commands matching its allowlist ('> out' writes a file, and a write must match on its own)")


def test_without_an_allow_list_the_seatbelt_alone_decides():
    for case in CORPUS["refused"]:
        if case["allow"] == "echo" and "PWNED" not in case["command"].split(">")[-1]:
            assert shell().refusal(case["command"]) is None, case["command"]
