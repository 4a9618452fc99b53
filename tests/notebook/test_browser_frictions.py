"""The small frictions of issue 26, in real JupyterLab (Debian's chromium, Playwright): one notebook
whose cells, run in turn on one page and one kernel, show the keyless offline model at work (SQL
describe → query, files list → read, notebook list_cells → read_cell, a follow-up answered from its
own turn, explain saying a model is needed), a single sync tool's running clock, a batch's estimate
and its line after Stop, the image note of {fig}, --data with a folder and bare, the price warning
once and only where a request costs money, did-you-mean, --help, a headless decision's record,
and an MCP result's redaction counted in the tool frame. The saved file keeps what was decided."""

from __future__ import annotations

import json
import re
import time

import nbformat
import pytest

from support import TESTS
from support.keyless import FILES_AND_DATA, PRICES_AND_TYPOS
from support.browser import browser, cell, lab, open_notebook, run_cell, wait_idle  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

SERVER = str(TESTS / "support" / "mcp_server.py")
SECRET = "zq81-frictions-value-5182"  # no token shape: only the MCP capability knows it is secret
MISSIONS = """mission,target,launch_year,agency
Voyager 1,Jupiter,1977,NASA
Galileo,Jupiter,1989,NASA
Cassini-Huygens,Saturn,1997,NASA/ESA/ASI
Rosetta,Comet 67P,2004,ESA
Juno,Jupiter,2011,NASA
"""
SETUP = f"""%load_ext bettong_nb
import sys, threading, time
import matplotlib.pyplot as plt, pandas as pd
import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
moons = pd.DataFrame({{"moon": ["Io", "Europa", "Titan", "Phobos"], "planet": ["Jupiter", "Jupiter", "Saturn", "Mars"]}})
files = bettong_nb.offline(root="data")
def nap(seconds: float) -> str:
    '''Rest a while.'''
    time.sleep(seconds)
    return "rested"
napper = bettong_nb.agent(provider=Scripted([[("nap", {{"seconds": 2.2}})], "Rested."]),
                          capabilities=[{{"id": "rest", "tools": [bettong_nb.tool(nap)]}}])
def slow_label(request):
    time.sleep(0.1)
    return bettong_nb.Response([{{"type": "text", "text": "ok"}}], usage=bettong_nb.Usage(1, 10, 2, 12))
batcher = bettong_nb.agent(provider=slow_label)
looker = bettong_nb.agent(provider=Scripted(["A rising line."]))
priced = bettong_nb.agent(provider=Scripted(["hi", "ok", "ok"]), prices={{"input": 1, "output": 1}})
touched = []
def touch(path: str) -> str:
    '''Touch a file.'''
    touched.append(path)
    return "touched"
toucher = bettong_nb.agent(provider=Scripted([[("touch", {{"path": "a"}})], "Touched."]),
                           capabilities=[{{"id": "fs", "tools": [bettong_nb.tool(touch)]}}])
server = caps.mcp(command=[sys.executable, {SERVER!r}, "mcp.log"], env={{"DEEPSEEK_API_KEY": {SECRET!r}}})
threading.Thread(target=lambda: server.tools, daemon=True).start()  # starts while the cells before it run
mcpbot = bettong_nb.agent(provider=Scripted([[("show_env", {{"name": "DEEPSEEK_API_KEY"}})], "Shown."]),
                          capabilities=[server])
%config AgentMagics.approval_timeout = 1
%config AgentMagics.headless_policy = 'allow'"""
CELLS = [  # (id, source); the ids name the cells in the test below
    ("setup", SETUP),
    ("orbits", "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([1, 2, 3], [1, 4, 9]); ax.set_title('orbits')"),
    ("sql", "%%agent --data moons\nWhich planet has the most moons?"),
    ("nbread", "%%agent --notebook\nWhat does the orbits cell do?"),
    *FILES_AND_DATA,
    ("oops", "print(undefined_name)"),
    ("explain", "%agent explain"),
    ("nap", "%%agent napper\nRest a while"),
    ("batch", "results = batcher.map([str(i) for i in range(40)], concurrency=1)"),
    ("fig", "%%agent looker\nWhat does {fig} show?"),
    *PRICES_AND_TYPOS,
    ("approve", "%%agent toucher --approve\nTouch a"),
    ("mcp", "%%agent mcpbot -o shown\nShow the key"),
    ("frame", "print(touched, shown.tool_frame()['redactions'].tolist())"),
]
AT = {cell_id: index for index, (cell_id, _) in enumerate(CELLS)}


@pytest.fixture(scope="module")
def notebook(lab):
    data = lab.root_dir / "data"
    data.mkdir()
    (data / "missions.csv").write_text(MISSIONS)
    (data / "notes.txt").write_text("The launch window opens on 3 May.\n")
    cells = []
    for cell_id, source in CELLS:
        made = nbformat.v4.new_code_cell(source)
        made.id = cell_id
        cells.append(made)
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=kernel), lab.root_dir / "frictions.ipynb")
    return lab.root_dir / "frictions.ipynb"


def _run(page, cell_id: str, timeout_ms: float = 30_000):
    run_cell(page, AT[cell_id])
    wait_idle(page, AT[cell_id], timeout_ms)
    return _output(page, cell_id)


def _output(page, cell_id: str):
    return cell(page, AT[cell_id]).locator(".jp-OutputArea")


def _calls(output) -> list[str]:
    return [s.strip() for s in output.locator("details.bettong-tool summary").all_inner_texts()]


def _table(output) -> list[list[str]]:
    rows = output.locator(".bettong-markdown table tr")
    return [row.split("\t") for row in rows.all_inner_texts()]


def test_every_friction_in_one_notebook(lab, browser, notebook):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    open_notebook(page, lab, notebook.name)
    _run(page, "setup", 60_000)
    _run(page, "orbits")

    # The keyless model: SQL described then queried, answered from the query; no price talk
    sql = _run(page, "sql")
    assert _table(sql)[:2] == [["planet", "moons"], ["Jupiter", "2"]]  # the answer's table, rendered
    calls = _calls(sql)
    assert [c.split("(")[0] for c in calls] == ["describe_data", "query_data"], calls
    assert "I have no tools" not in sql.inner_text() and "full price" not in sql.inner_text()

    # the notebook through the page: listed, then the cell the question names is read
    read = _run(page, "nbread")
    calls = _calls(read)
    assert [c.split(" →")[0] for c in calls] == ["list_cells()", 'read_cell(cell_id="orbits")'], calls
    expect(read).to_contain_text("ax.set_title('orbits')")
    assert "Jupiter" not in read.inner_text()  # the first turn's results answer nothing here

    # files: listed, then read; the follow-up answers from its own turn
    first = _run(page, "files1")
    assert [c.split("(")[0] for c in _calls(first)] == ["list_dir", "read_file"]
    expect(first).to_contain_text("Cassini-Huygens")
    second = _run(page, "files2")
    expect(second).to_contain_text("The launch window opens on 3 May.")
    assert "Cassini" not in second.inner_text()

    # --data with a folder: SQL over its files; a bare --data says how
    folder = _run(page, "folder")
    # its files listed (a query of the folder), the one asked about described, then queried
    assert [c.split("(")[0] for c in _calls(folder)] == ["query_data", "describe_data", "query_data"]
    assert _table(folder)[1] == ["NASA", "3"]
    expect(_run(page, "bare")).to_contain_text("--data names what the agent may query")

    # explain without a real model: one line saying one is needed and how
    _run(page, "oops")
    explained = _run(page, "explain")
    expect(explained).to_contain_text("explaining or fixing an error needs a real model")
    expect(explained).to_contain_text("%config AgentMagics.model")

    # one sync tool: shown running, its clock ticking, from its start
    run_cell(page, AT["nap"])
    nap = _output(page, "nap")
    # wait_for polls at least every 0.5 s (expect's backoff grows to 1 s): it sees the clock's first seconds
    nap.locator("details.bettong-tool summary", has_text=re.compile(r"nap\(seconds=2\.2\) → running\s*· [12]\.\d s")
                ).wait_for(timeout=10_000)
    wait_idle(page, AT["nap"])
    expect(nap.locator("details.bettong-tool summary")).to_contain_text("→ ok")
    expect(nap).not_to_contain_text("waiting for the model")

    # a batch tells the time left while it runs; stopped, its line counts what ran
    run_cell(page, AT["batch"])
    batch = _output(page, "batch")
    expect(batch).to_contain_text(re.compile(r"/40 · .* · about [\d.]+ m?s left"), timeout=15_000)
    page.locator('[data-jp-item-name="interrupt"] button, '
                 'jp-button[data-command="notebook:interrupt-kernel"]').first.click()
    wait_idle(page, AT["batch"], 5_000)
    line = batch.locator(".bettong-progress").inner_text()
    counted = re.match(r"(\d+)/40 · (\d+) done · 0 failed · (\d+) cancelled · ", line)
    assert counted and counted[1] == counted[2] and int(counted[2]) + int(counted[3]) == 40, line
    assert int(counted[3]) > 0 and "left" not in line

    # {fig}: the cell says an image went with the prompt
    expect(_run(page, "fig")).to_contain_text("1 image sent with the prompt")

    # the price warning: only on a priced model, in plain words, once a conversation (more new tools: no more)
    _run(page, "price1")
    expect(_run(page, "price2")).to_contain_text(
        "this request pays full price for its whole prompt once, instead of the provider's cheaper cached rate")
    third = _run(page, "price3")
    assert "full price" not in third.inner_text() and "cached prefix" not in third.inner_text()

    # typos get a guess; --help opens with its usage, TARGET first, no reST '::'
    expect(_run(page, "typo")).to_contain_text("unrecognized arguments: --aprove (did you mean --approve?)")
    expect(_run(page, "command")).to_contain_text("(did you mean usage?)")
    helped = _run(page, "help").inner_text().strip()
    assert helped.startswith("usage: %%agent [TARGET]") and "::" not in helped, helped[:200]

    # nobody clicks: the headless policy allows after the timeout, and the cell says who decided
    approved = _run(page, "approve")
    expect(approved).to_contain_text("allowed automatically (headless policy): no decision within 1 s")

    # an MCP result whose secret the capability redacted counts in the tool frame
    shown = _run(page, "mcp")
    expect(shown).to_contain_text("[redacted]")
    assert SECRET not in shown.inner_text()
    expect(_run(page, "frame")).to_contain_text("['a'] [1]")

    before = notebook.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 15
    while notebook.stat().st_mtime_ns == before:
        assert time.monotonic() < deadline, "JupyterLab did not save the notebook"
        time.sleep(0.1)
    time.sleep(0.3)
    page.close()
    saved = nbformat.read(notebook, as_version=4)
    kept = "".join(str(o.get("data", "")) for o in saved.cells[AT["approve"]].outputs)
    assert "allowed automatically (headless policy): no decision within 1 s" in kept
    assert SECRET not in json.dumps([c.outputs for c in saved.cells])
