"""The demo notebooks (notebooks/*.ipynb) as a reader gets them: each runs top to bottom from its
cassette, with no key and no network, in a fresh venv built only from binder/ the way
repo2docker builds one (requirements.txt, then postBuild from the repository root), and shows
what it promises. Also: the committed notebooks carry no outputs, and the hand-written cassettes
are byte for byte what notebooks/record.py records.

The venv is built once per binder/requirements.txt and kept under
~/.cache/bettong-nb/binder-venvs/<hash> (BETTONG_BINDER_VENVS moves it); postBuild runs every
session, on a copy of this checkout, since it installs the code under test. Where no package
index can be reached the notebooks run in this interpreter instead, with a warning; under
CI=true that fails instead.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterator

import nbformat
import pandas as pd
import pytest
from support import REPO
from support.notebooks import answers as _answers

NOTEBOOKS = REPO / "notebooks"
BINDER = REPO / "binder"
CASSETTES = NOTEBOOKS / "cassettes"
RECORD = NOTEBOOKS / "record.py"
NAMES = ("01-quickstart", "02-data-exploration", "03-teaching-capabilities", "04-sql-exploration",
         "05-notebook-agent")
FAKE_TOKEN = "demo-7f3a9c2e51b8-not-a-real-token"  # set by 03's redaction cell
WIDGET = "application/vnd.jupyter.widget-view+json"
VENVS = Path(os.environ.get("BETTONG_BINDER_VENVS") or Path.home() / ".cache" / "bettong-nb" / "binder-venvs")


def _env(python: Path) -> dict[str, str]:
    """This environment without the variables that would make a notebook go live; for the
    binder venv's ``python``, without PYTHONPATH too (the venv runs its own install, as on Binder)."""
    dropped = ("BETTONG_LIVE", "DEEPSEEK_API_KEY") + (("PYTHONPATH",) if python != Path(sys.executable) else ())
    return {k: v for k, v in os.environ.items() if k not in dropped}


def _run(command: list, **kw) -> None:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stdout[-3000:]}"
                           f"\n{done.stderr[-3000:]}")


def _build_venv() -> Path:
    """The binder venv's python: built from binder/requirements.txt unless cached, then postBuild."""
    requirements = BINDER / "requirements.txt"
    key = hashlib.sha256(requirements.read_bytes() + sys.version.encode() + sys.base_prefix.encode()).hexdigest()
    venv = VENVS / key[:16]
    python = venv / "bin" / "python"
    if not (venv / "built").exists():  # written last, so a half-built venv is rebuilt
        shutil.rmtree(venv, ignore_errors=True)
        started = time.monotonic()
        _run([sys.executable, "-m", "venv", venv], timeout=300)
        _run([python, "-m", "pip", "install", "--disable-pip-version-check", "-r", requirements], timeout=1800)
        (venv / "built").write_text(f"{time.monotonic() - started:.0f} s to build from {requirements}\n")
    # repo2docker runs postBuild in a copy of the repository, from its root, with the env's pip
    # first on PATH. A copy here too: its build/ folder never goes stale, the checkout stays clean.
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    copy = Path(tempfile.mkdtemp(prefix="bettong-binder-"))
    try:
        for name in filter(None, listed):
            if (REPO / name).is_file():
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, copy / name)
        _run(["bash", copy / "binder" / "postBuild"], cwd=copy, timeout=600,
             env={**_env(python), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)})
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return python


@pytest.fixture(scope="module")
def binder_python() -> Iterator[Path]:
    VENVS.mkdir(parents=True, exist_ok=True)
    # Held while this module runs: a second test session on this machine waits rather than
    # rebuilding or reinstalling the venv under the first one's notebooks.
    with open(VENVS / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            python = _build_venv()
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            if os.environ.get("CI") == "true":
                pytest.fail(f"could not build the binder venv: {exc}", pytrace=False)
            warnings.warn(f"binder venv unavailable, running the notebooks in this interpreter: {exc}")
            python = Path(sys.executable)
        yield python


@pytest.fixture(scope="module")
def executed(binder_python, tmp_path_factory) -> dict:
    """Every notebook replayed by ``record.py --check`` (as CI and a reader run them)."""
    out = tmp_path_factory.mktemp("executed")
    _run([binder_python, RECORD, "--check", "--out", out], cwd=out, env=_env(binder_python), timeout=600)
    ran = {name: nbformat.read(out / f"{name}.ipynb", as_version=4) for name in NAMES}
    return {"env": json.loads((out / "environment.json").read_text()), "python": binder_python, **ran}


def _cell(nb, source_start: str):
    """The code cell whose source starts so (after the %load_ext line every notebook opens with)."""
    (cell,) = [c for c in nb.cells
               if c.cell_type == "code" and c.source.removeprefix("%load_ext bettong_nb\n").startswith(source_start)]
    return cell


def _data(cell, mime: str) -> list[str]:
    return [o.data[mime] for o in cell.outputs if o.output_type in ("display_data", "execute_result")
            and o.data.get(mime) is not None]


def _stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _rows(text: str) -> list[list[str]]:
    """The rows of a DataFrame's text/plain, header first, its wrapped column blocks joined."""
    blocks = [[line.rstrip(" \\").split() for line in block.splitlines()] for block in text.split("\n\n")]
    rows = blocks[0]
    for block in blocks[1:]:  # the same rows again, with more columns; data rows repeat the index
        rows = [row + more[0 if i == 0 else 1:] for i, (row, more) in enumerate(zip(rows, block))]
    return rows


def test_the_notebooks_ran_in_the_binder_venv_with_its_pins(executed):
    env, python = executed["env"], executed["python"]
    assert env["kernel_python"] == env["python"] == str(python)  # the kernel is the venv's, not this one
    prefix = env["prefix"]
    if python != Path(sys.executable):
        assert env["kernel_bettong_nb"].startswith(prefix), "bettong_nb must come from postBuild's install"
        pins = dict(line.split("==") for line in (BINDER / "requirements.txt").read_text().splitlines()
                    if "==" in line and not line.startswith("#"))
        assert {name: env[name] for name in pins} == pins


def test_quickstart(executed):
    nb = executed["01-quickstart"]
    assert _stdout(_cell(nb, "result = agent.run")).splitlines() == [
        "get_weather({'city': 'Hobart'}) -> 'light rain, 12 °C'",
        "Light rain and 12 °C in Hobart today, so take a raincoat."]

    first, follow_up = (_cell(nb, f"%%agent chat\n{q}") for q in ("Compare", "Which"))
    assert _answers(first) == [
        "Hobart has light rain at 12 °C; Darwin is sunny at 31 °C, 19 degrees warmer."]
    activity = _data(first, "text/plain")[0].splitlines()
    assert activity == ['· get_weather(city="Hobart") → ok', '· get_weather(city="Darwin") → ok']
    assert _answers(follow_up) == ["Darwin: sunny and 31 °C, while Hobart is rainy and 12 °C."]

    (transcript,) = _data(next(c for c in nb.cells if c.source == "chat"), "text/html")
    assert "Session · 2 turns" in transcript and "You · turn 2" in transcript and "<details" in transcript

    usage = _rows(_data(_cell(nb, "usage = chat.usage_frame()"), "text/plain")[0])
    assert usage[0] == ["turn", "step", "cell", "model", "prompt_tokens", "completion_tokens", "cache_hit_tokens",
                        "cost_total", "price_source"]
    assert [row[1:3] + row[4:5] for row in usage[1:]] == [["1", "1", "hand-written"], ["1", "2", "hand-written"],
                                                          ["2", "1", "hand-written"]]
    assert all(row[3].startswith("In[") for row in usage[1:])  # nbclient sends no cell id: In[n]

    # The offline demo model ran the same tool with no key and no cassette, and said what it is.
    demo = _stdout(_cell(nb, "demo = bettong_nb.offline"))
    assert demo.startswith("`get_weather(city='Hobart')` returned:\n```\nlight rain, 12 °C\n```")
    assert "offline demo model" in demo

    tiny = _stdout(_cell(nb, "tiny_model = ")).splitlines()
    assert tiny[0] == "{'city': 'Hobart'} -> light rain, 12 °C"  # what the real model asked for
    assert tiny[1] and "12 °C" not in tiny[1]  # and what it made of the answer


def test_data_exploration(executed):
    nb = executed["02-data-exploration"]
    assert _data(_cell(nb, "files = "), "text/plain") == ["['read_file', 'list_dir']"]  # nothing that writes

    found = _cell(nb, "explorer = ")
    plain = _data(found, "text/plain")[0]  # the text form %load_ext installs: answer, calls, usage
    assert plain.count("\n  · ") == 4 and "\n  3 requests" in plain
    transcript = _data(found, "text/html")[0]
    for call in ('list_dir(path=&quot;.&quot;)', *(f'read_file(path=&quot;{n}.csv&quot;)'
                                                  for n in ("planets", "moons", "missions"))):
        assert call in transcript
    assert "Neptune,ice giant,24622" in transcript  # the real file, read through the tool

    # The offline demo model, no key and no cassette: it listed the folder, then read the file the
    # question names, and its answer quotes that file's lines: the header and the Saturn missions.
    demo = _stdout(_cell(nb, "demo = bettong_nb.offline"))
    assert demo.splitlines()[:2] == ["list_dir({'path': '.'})", "read_file({'path': 'missions.csv'})"]
    missions = (NOTEBOOKS / "data" / "missions.csv").read_text().splitlines()
    (quoted,) = re.findall(r"```\n(.*?)\n```", demo, re.S)
    assert quoted.splitlines() == [missions[0], *(line for line in missions if ",Saturn," in line)]
    assert "offline demo model" in demo.splitlines()[-1]

    assert "Kepler's third law" in _stdout(_cell(nb, "planets = pd.read_csv"))

    usage = _rows(_data(_cell(nb, "usage = found.usage_frame(full=True)"), "text/plain")[0])
    assert [row[:2] for row in usage[1:]] == [["0", "1"], ["1", "2"], ["2", "3"]]
    tools = _rows(_data(_cell(nb, "tools = found.tool_frame()"), "text/plain")[0])
    csv_chars = sum(len((NOTEBOOKS / "data" / f"{n}.csv").read_text()) for n in ("planets", "moons", "missions"))
    assert tools[2:] == [["list_dir", "1", str(len("README.md\nmissions.csv\nmoons.csv\nplanets.csv"))],
                         ["read_file", "3", str(csv_chars)]]

    plots = [_data(_cell(nb, start), "image/png") for start in ("ax = planets.plot.scatter", "usage.plot.bar")]
    assert all(len(images) == 1 and len(images[0]) > 1000 for images in plots)

    # The figure went to the model as an image: replay matched the request on the PNG's hash.
    sent = _cell(nb, "%%agent analyst\nThis is the planets'")
    assert _answers(sent)[0].startswith("Yes. On the log-log axes the eight points lie on one straight line")
    first = next(json.loads(line)["request"] for line in _cassette("02-data-exploration")
                 if "This is the planets'" in line)
    text, image, question = first["messages"][-1]["content"]
    assert text["text"].startswith("This is the planets'") and question["text"].startswith("\nDoes it show")
    assert image["type"] == "image" and image["media_type"] == "image/png" and len(image["sha256"]) == 64

    failing = _cell(nb, "moons_per_planet = ")
    assert [(o.output_type, o.ename) for o in failing.outputs] == [("error", "KeyError")]
    explained = _cell(nb, "%agent explain analyst")
    assert _answers(explained)[0].startswith("`moons_per_planet` has no key `'Saturn'`")
    fixed = _cell(nb, "%agent fix analyst")
    assert "```python\nmoons_per_planet = {" in _answers(fixed)[0]
    assert _data(fixed, "text/plain")[-1] == "The code is in a new cell below (not run)."


def test_teaching_capabilities(executed):
    nb = executed["03-teaching-capabilities"]
    assert "'name': 'local_time'" in _data(_cell(nb, "import os"), "text/plain")[0]
    assert _stdout(_cell(nb, "bare = ")).startswith("I have no tool for reading a clock")
    assert _stdout(_cell(nb, "chat = ")).splitlines() == ["It is 14:05 in Hobart.",
                                                         "local_time({'city': 'Hobart'}) -> '14:05'"]

    approval = _cell(nb, "%%agent mailer --approve")
    assert not _data(approval, WIDGET)  # headless: no prompt was shown
    assert "→ denied: no one approved it: no widget frontend" in _data(approval, "text/plain")[0]
    assert _stdout(_cell(nb, "emailed = ")).splitlines() == [
        ("denied | no one approved it: no widget frontend is connected to this kernel (a headless run); "
         "the headless policy denies tool calls that need approval"),
        "outbox: []"]

    redacted = _cell(nb, 'print("redactions:"')
    assert _stdout(redacted) == "redactions: 1\n"
    assert "'content': 'service up; connected with token [redacted]'" in _data(redacted, "text/plain")[0]
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert FAKE_TOKEN not in outputs

    usage = _rows(_data(_cell(nb, 'chat.run("And in London?")'), "text/plain")[0])
    assert usage[0][3] == "cache_hit_tokens"
    hits = [int(row[4]) for row in usage[1:]]
    assert len(hits) == 5 and hits == sorted(set(hits)), hits  # grows with every request, across 3 turns


def _shop_revenue() -> pd.DataFrame:
    """Revenue per year (rows) and category (columns), computed with pandas alone from notebooks/shop."""
    shop = NOTEBOOKS / "shop"
    sales = pd.concat([pd.read_parquet(path) for path in sorted((shop / "sales").glob("*.parquet"))])
    lines = sales.merge(pd.read_csv(shop / "products.csv"), on="product_id", validate="many_to_one")
    lines["revenue"] = lines["quantity"] * lines["unit_price"] * (1 - lines["discount"])
    lines["year"] = pd.to_datetime(lines["order_date"]).dt.year
    return lines.groupby(["year", "category"])["revenue"].sum().unstack()


def test_sql_exploration(executed):
    nb = executed["04-sql-exploration"]
    expected = _shop_revenue()
    assert _data(_cell(nb, "sql = caps.duckdb"), "text/plain") == ["['query_data', 'describe_data']"]

    # The SQL tools ran for real on notebooks/shop: what they returned is in the transcript.
    found = _cell(nb, "analyst = ")
    transcript = _data(found, "text/html")[0]
    for call in ('describe_data(path=&quot;sales/*.parquet&quot;)', 'describe_data(path=&quot;products.csv&quot;)',
                 "query_data(sql=&quot;SELECT p.category"):
        assert call in transcript
    rows = sum(len(pd.read_parquet(path)) for path in (NOTEBOOKS / "shop" / "sales").glob("*.parquet"))
    assert f"sales/*.parquet: {rows:,} rows, 8 columns" in transcript
    assert f"Garden | 2022 | {expected.loc[2022, 'Garden']:.2f}" in transcript
    plain = _data(found, "text/plain")[0]
    assert plain.count("\n  · ") == 3 and "\n  3 requests" in plain

    # The person's frame: every number matches pandas' own computation over the same files.
    table = _rows(_data(_cell(nb, "revenue = answer.frames()[-1]"), "text/plain")[0])
    assert table[0] == ["category", *expected.columns] and table[1] == ["year"]
    shown = pd.DataFrame([[float(v) for v in row[1:]] for row in table[2:]],
                         index=[int(row[0]) for row in table[2:]], columns=table[0][1:])
    assert list(shown.index) == [2022, 2023, 2024, 2025]
    pd.testing.assert_frame_equal(shown, expected, check_names=False, check_index_type=False, atol=0.006, rtol=0)

    (plot,) = _data(_cell(nb, "ax = (by_year / 1e6).plot"), "image/png")
    assert base64.b64decode(plot).startswith(b"\x89PNG\r\n\x1a\n") and len(plot) > 5000

    growth = 100 * (expected.loc[2025] / expected.loc[2022] - 1)
    fastest = growth.idxmax()
    (typed,) = _data(_cell(nb, "@dataclass"), "text/plain")
    match = re.fullmatch(r"Growth\(category='(\w+)', revenue_2022=([\d.]+), revenue_2025=([\d.]+), "
                         r"growth_percent=([\d.]+)\)", typed)
    assert match, typed
    assert match[1] == fastest
    assert abs(float(match[2]) - expected.loc[2022, fastest]) < 0.006
    assert abs(float(match[3]) - expected.loc[2025, fastest]) < 0.006
    assert abs(float(match[4]) - growth[fastest]) < 0.05
    check = _rows(_data(_cell(nb, "(100 * (by_year.loc[2025]"), "text/plain")[0])
    assert [row[0] for row in check[1:-1]] == list(growth.sort_values(ascending=False).index)

    usage = _rows(_data(_cell(nb, "usage = chat.usage_frame()"), "text/plain")[0])
    assert usage[0][:5] == ["turn", "step", "cell", "model", "prompt_tokens"] and usage[0][-2:] == ["cost_total",
                                                                                          "price_source"]
    assert [row[1:3] for row in usage[1:]] == [["1", "1"], ["1", "2"], ["1", "3"], ["2", "1"], ["2", "2"]]
    assert all(float(row[-2]) > 0 and row[-1] == "given" for row in usage[1:])
    total = _stdout(_cell(nb, 'print(f"{len(usage)} requests'))
    assert re.fullmatch(r"5 requests, [\d,]+ prompt tokens, \$0\.\d{4} in all\n", total), total

    # The offline demo model, no cassette: its SQL ran on the real files; pandas agrees with the frame.
    demo = _cell(nb, "demo = bettong_nb.offline")
    assert "query_data(sql=&quot;SELECT channel, count(*) AS n FROM" in _data(demo, "text/html")[0]
    assert ("SELECT channel, count(*) AS n FROM 'sales/2024.parquet' WHERE year(order_date) = 2024 "
            "GROUP BY channel") in _data(demo, "text/plain")[0]
    sales = pd.read_parquet(NOTEBOOKS / "shop" / "sales" / "2024.parquet")
    counts = sales[pd.to_datetime(sales["order_date"]).dt.year == 2024]["channel"].value_counts()
    frame = _rows(_data(_cell(nb, "orders.frames()[-1]"), "text/plain")[0])
    assert frame[0] == ["channel", "n"]
    assert [(row[1], int(row[2])) for row in frame[1:]] == list(counts.items())


def test_notebook_agent(executed):
    nb = executed["05-notebook-agent"]
    density = _cell(nb, "import math")
    assert "5.511412e+12" in _data(density, "text/plain")[0]  # the slip the agent is asked about

    # Headless (nbclient): the agent reads the saved file, says so once, and shows no buttons.
    looked = _cell(nb, "%%agent helper --notebook\nWhat does")
    assert not _data(looked, WIDGET)
    assert _data(looked, "text/plain")[0].splitlines() == ["· list_cells() → ok", '· read_cell(cell_id="e9a2f6c1") → ok']
    assert [h for h in _data(looked, "text/plain") if "as last saved" in h][0].endswith(
        "it cannot change or run cells here.")
    assert "10¹⁵ times too large" in _answers(looked)[0]
    # What the model read (the cassette holds the requests replay answered): the saved cells, named
    # by the file's name (no machine's folder), the density cell whole.
    results = [block["content"] for line in _cassette("05-notebook-agent")
               for block in json.loads(line)["request"]["messages"][-1]["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]
    listed, read, edit, insert, run = results
    assert listed.startswith("16 cells, from the saved file 05-notebook-agent.ipynb (it may be stale); changes "
                             "and runs are refused: bettong_nb's notebook extension is not in this page")
    assert "[4] id=e9a2f6c1 code: 'import math\\n\\nvolume = 4 / 3" in listed
    assert 'planets["mass_1e24_kg"] * 1e24 / volume   # kg per ...?' in read

    # Both proposals denied with the reason, the model told; the run denied: nobody can Allow.
    proposed = _cell(nb, "%%agent helper --notebook\nFix the units")
    assert not _data(proposed, WIDGET)
    edit_line, insert_line = _data(proposed, "text/plain")[0].splitlines()
    assert edit_line.startswith('· edit_cell(cell_id="e9a2f6c1"') and "→ denied: the edit of cell e9a2f6c1 was " \
        "rejected: no change can be made here: bettong_nb's notebook extension" in edit_line
    assert insert_line.startswith('· insert_cell(after_cell_id="e9a2f6c1"') and \
        "→ denied: the new cell was rejected: no change can be made here" in insert_line
    for result in (edit, insert):
        assert result.endswith("no change can be made here: bettong_nb's notebook extension is not in this page "
                               "(VS Code, Colab, nbclient or papermill, the classic notebook); the notebook is "
                               "unchanged"), result
    assert "```python\nimport math\n\nradius_cm = " in _answers(proposed)[0]
    ran = _cell(nb, "%%agent helper --notebook\nRun the density cell")
    assert _data(ran, "text/plain")[0].startswith('· run_cell(cell_id="e9a2f6c1") → denied: no one approved it: '
                                                  "no widget frontend is connected to this kernel")
    assert run == ("ERROR: run_cell was not allowed: no one approved it: no widget frontend is connected to this "
                   "kernel (a headless run); the headless policy denies tool calls that need approval")
    # Nothing changed: the density cell's source is as saved, and the history holds no change.
    saved = nbformat.read(NOTEBOOKS / "05-notebook-agent.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == [c.source for c in saved.cells]
    history = _rows(_data(_cell(nb, "%agent history"), "text/plain")[0])
    assert history[0] == ["Empty", "DataFrame"] and history[1] == [
        "Columns:", "[time,", "action,", "cell,", "cell_index,", "model,", "session,", "turn,", "prompt_cell,",
        "decided_by,", "diff_sha256]"]

    # The offline demo model, no key and no cassette: list_cells, then read_cell on the cell that
    # shares the question's words; its answer quotes both, the listing's refusal of changes first.
    demo = _cell(nb, "%%agent demo --notebook")
    assert not _data(demo, WIDGET)
    assert _data(demo, "text/plain")[0].splitlines() == ["· list_cells() → ok", '· read_cell(cell_id="e9a2f6c1") → ok']
    (answer,) = _answers(demo)
    assert answer.startswith("list_cells shows:\n```\n16 cells, from the saved file 05-notebook-agent.ipynb (it may "
                             "be stale); changes and runs are refused: bettong_nb's notebook extension is not in "
                             "this page"), answer
    assert next(c.source for c in saved.cells if c.id == "e9a2f6c1") in answer
    assert "offline demo model" in answer.splitlines()[-1]


def _cassette(stem: str) -> list[str]:
    return (CASSETTES / f"{stem}.jsonl").read_text(encoding="utf-8").splitlines()


def test_committed_notebooks_carry_no_outputs_and_say_where_their_answers_come_from():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == list(NAMES)
    used = set()
    for name in NAMES:
        text = (NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        # Stored as JupyterLab writes them, so opening one marks nothing unsaved (the browser test,
        # tests/notebook/test_browser_demo_format.py, opens and saves each in a real JupyterLab).
        assert text == nbformat.writes(nb) + "\n" and nb.nbformat_minor == 5, name
        assert all(cell.get("id") for cell in nb.cells), name
        assert nb.metadata.kernelspec == {"display_name": "Python 3 (ipykernel)", "language": "python",
                                          "name": "python3"}, name
        assert {"codemirror_mode", "pygments_lexer", "version"} <= set(nb.metadata.language_info), name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (name, cell.source[:40])
            assert not cell.metadata.get("execution"), name
        assert "widgets" not in nb.metadata, name
        intro = nb.cells[0].source
        assert nb.cells[0].cell_type == "markdown" and "BETTONG_LIVE=1" in intro and "DEEPSEEK_API_KEY" in intro
        cassettes = set(re.findall(r'cassette\("cassettes/([\w.-]+)\.jsonl"\)',
                                   "\n".join(c.source for c in nb.cells)))
        assert cassettes, name
        for stem in cassettes:
            kind = "real recording" if _models(stem) != {"hand-written"} else "hand-written"
            assert f"`cassettes/{stem}.jsonl`" in intro and kind in intro, (name, stem, kind)
        used |= cassettes
    assert used == {p.stem for p in CASSETTES.glob("*.jsonl")}, "every cassette is used, every one used exists"


def _models(stem: str) -> set[str]:
    return {json.loads(line)["response"]["model"] for line in _cassette(stem)}


def test_cassettes_hold_no_machine_specific_text():
    home, tmp = str(Path.home()), tempfile.gettempdir()
    for path in CASSETTES.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        assert str(REPO) not in text and home not in text and f"{tmp}/" not in text, path.name
        assert FAKE_TOKEN not in text, path.name
    assert _models("01-quickstart-smollm2") == {"SmolLM2-135M-Instruct.Q4_1.gguf"}


def test_hand_written_cassettes_are_what_record_py_records(executed, tmp_path):
    _run([executed["python"], RECORD, "--scripted-only", "--no-verify", "--cassettes", tmp_path],
         cwd=tmp_path, env=_env(executed["python"]), timeout=600)
    recorded = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert recorded == ["01-quickstart.jsonl", "02-data-exploration.jsonl", "03-teaching-capabilities.jsonl",
                        "04-sql-exploration.jsonl", "05-notebook-agent.jsonl"]
    for name in recorded:
        assert (tmp_path / name).read_bytes() == (CASSETTES / name).read_bytes(), name
