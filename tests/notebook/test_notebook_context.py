"""The agent sees what the person sees, in a real IPython InteractiveShell: {Err} and {Err[n]},
%agent explain and fix, DataFrames with their dtypes, -f code|text|html, and --data frames."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import bettong_nb
from bettong_nb.notebook import errorlog, interpolation
from bettong_nb.providers.scripted import Scripted
from support.servers import ChatScript, LoopbackServer, chat_message
from support.ipython_shell import final, ip, magics_of, ok, run_cell, tool_agent  # noqa: F401  (ip is a fixture)

SECRET = "sk-live-0123456789abcdefghijklmnop"


def _cell(shell, code):
    """Run a numbered cell (as a notebook does); return (result, captured)."""
    with capture_output() as captured:
        result = shell.run_cell(code, store_history=True)
    return result, captured


def _prompt(model, index=-1):
    return model.requests[index].messages[-1]["content"]


def _raise_key_error(ip):
    result, _ = _cell(ip, 'costs = {"tea": 2.5}\ncosts["cost"]')
    assert isinstance(result.error_in_exec, KeyError)
    return result.execution_count


def test_err_is_the_last_error_with_its_code_and_a_plain_traceback(ip):
    model = Scripted(["first", "second", "third"])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    failed = _raise_key_error(ip)
    ok(ip, "%%agent bot\nWhy? {Err}")
    sent = _prompt(model)
    assert sent.startswith(f'Why? In [{failed}]:\ncosts = {{"tea": 2.5}}\ncosts["cost"]\n\n')
    assert "\x1b[" not in sent  # no colours
    assert "----> 2 costs[\"cost\"]" in sent and sent.rstrip().endswith("KeyError: 'cost'")

    _cell(ip, "1 / 0")  # a later error: {Err} moves on, {Err[n]} stays
    ok(ip, f"%%agent bot\n{{Err}} and {{Err[{failed}]}}")
    last, named = _prompt(model).split(" and In [")
    assert last.rstrip().endswith("ZeroDivisionError: division by zero") and named.rstrip().endswith("'cost'")

    captured = ok(ip, "%%agent bot\nand {Err[999]}")
    assert _prompt(model) == "and {Err[999]}"  # sent as written, and the cell says why
    assert captured.stdout.splitlines()[0] == ("{Err[999]} did not resolve (KeyError: 'cell 999 raised no error "
                                               "that was recorded'); sent as written")


def test_err_is_redacted_and_bounded(ip, monkeypatch):
    monkeypatch.setenv("BILLING_API_KEY", SECRET)
    model = Scripted(["ok", "ok"])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    _cell(ip, "import os\nraise RuntimeError('key ' + os.environ['BILLING_API_KEY'])")
    ok(ip, "%%agent bot\n{Err}")
    assert SECRET not in _prompt(model) and "[redacted]" in _prompt(model)

    long_code = "\n".join(f"x{i} = {i}" for i in range(3000)) + "\nraise ValueError('v' * 20000 + ' the end')"
    _cell(ip, long_code)
    ok(ip, "%%agent bot\n{Err}")
    sent = _prompt(model)
    assert len(sent) < errorlog.CODE_CHARS + errorlog.TRACEBACK_CHARS + 300
    assert "x0 = 0" in sent and "more characters" in sent  # the code's start
    assert "characters before)" in sent and sent.endswith("vvv the end")  # the traceback's end


TOKEN = "tokv4lue-Zx9Qw8Er7Ty6Ui5Op4As3Df2"  # no known shape: only the environment makes it a secret


def _pieces(secret: str, size: int = 6) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def test_a_secret_astride_a_bound_never_reaches_the_model_in_any_piece(ip, monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", TOKEN)
    # Where each bound cuts: inside the token at its start, middle and end, and just around it.
    offsets = [-1, 1, 9, 17, 25, len(TOKEN) - 1, len(TOKEN) + 1]
    cells = [f"import os\nraise ValueError(os.environ['MY_API_TOKEN'] + 'y' * {errorlog.TRACEBACK_CHARS - k})"
             for k in offsets]  # the traceback's last TRACEBACK_CHARS characters
    cells += ["#" * (errorlog.CODE_CHARS - len("\nt = '") - k) + f"\nt = '{TOKEN}'\nraise KeyError(1)"
              for k in offsets]  # the code's first CODE_CHARS characters
    with LoopbackServer(ChatScript([chat_message("ok")] * (3 * len(cells)))) as server:
        ip.user_ns["bot"] = bettong_nb.openai(base_url=server.url, api_key="k", model="m")
        for cell in cells:
            _cell(ip, cell)
            ok(ip, "%%agent bot\n{Err}")
        for k in offsets:  # a value's str() and a frame's rows, cut at their bounds
            ip.user_ns["note"] = ["n" * (interpolation.VALUE_CHARS - 2 - k) + TOKEN]
            ip.user_ns["frame"] = pd.Series(["w" * (interpolation.PREVIEW_CHARS - 45 - k) + TOKEN])
            ok(ip, "%%agent bot\n{note} {frame}")
        assert len(server.requests) == 3 * len(offsets)
        for request in server.requests:
            assert "[redacted]" in request.text or "characters" in request.text
            assert not {piece for piece in _pieces(TOKEN) if piece in request.text}


def test_an_undefined_name_is_sent_as_written_and_the_cell_says_so(ip):
    model = Scripted(["ok"])
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), cfg={"a": 1})
    ok(ip, "%config AgentMagics.run_mode = 'await'")  # a notebook's cell: the notes are muted lines
    captured = ok(ip, "%%agent bot\nLook at {sales_df}, {cfg[b]}, {cfg[a]} and {sales_df} again")
    assert _prompt(model) == "Look at {sales_df}, {cfg[b]}, 1 and {sales_df} again"
    notes = [d["text/plain"] for d in final(captured) if "bettong-note" in d.get("text/html", "")]
    assert notes == ["{sales_df} is not defined; sent as written",
                     "{cfg[b]} did not resolve (KeyError: 'b'); sent as written"]


def test_explain_sends_the_failing_cell_and_shows_the_answer(ip):
    model = Scripted(["The dict has no key **cost**: use `costs['tea']`."])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    result, _ = run_cell(ip, "%agent explain bot")
    assert isinstance(result.error_in_exec, UsageError) and "Nothing to explain: no cell has raised" in \
        str(result.error_in_exec)
    failed = _raise_key_error(ip)
    ip.rl_next_input = None
    captured = ok(ip, "%agent explain bot")
    sent = _prompt(model)
    assert sent.startswith("A notebook cell raised the error below. Explain what went wrong and propose a fix.\n\n"
                           f"In [{failed}]:\ncosts = ")
    assert "KeyError: 'cost'" in sent
    assert "The dict has no key **cost**" in captured.stdout  # shown in the cell (a terminal here)
    assert ip.rl_next_input is None  # explain adds no cell


@pytest.mark.parametrize("mode", ["block", "await"])
def test_the_magics_own_usage_errors_are_not_errors_to_explain(ip, mode):
    ok(ip, f"%config AgentMagics.run_mode = '{mode}'")
    model = Scripted(["Explained."])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    for line in ("%agent explain bot", "%agent explain bot", "%agent explain nobody", "%agent nonsense"):
        result, _ = run_cell(ip, line)
        assert isinstance(result.error_in_exec, UsageError)
        result, _ = run_cell(ip, "%agent explain bot")
        assert "Nothing to explain: no cell has raised" in str(result.error_in_exec)
    failed = _raise_key_error(ip)
    run_cell(ip, "%%agent bot --max-steps 0\nx")  # refused by the magic
    run_cell(ip, "%agent fix bot extra words")
    ok(ip, "%agent explain bot")
    assert f"In [{failed}]:\ncosts = " in _prompt(model) and "KeyError: 'cost'" in _prompt(model)
    assert len(model.requests) == 1

    _cell(ip, "from IPython.core.error import UsageError\nraise UsageError('the person raised it')")
    assert "the person raised it" in str(magics_of(ip).errors)  # only the library's own are skipped


def test_fix_puts_the_code_in_one_new_cell_and_runs_nothing(ip):
    answer = ("The key is `tea`.\n\n```python\ncosts = {\"tea\": 2.5}\nFIXED = costs[\"tea\"]\n```\n")
    model = Scripted([answer])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    _raise_key_error(ip)
    ip.rl_next_input = None
    captured = ok(ip, "%agent fix bot")
    assert "one ```python code block" in _prompt(model)
    assert ip.rl_next_input == 'costs = {"tea": 2.5}\nFIXED = costs["tea"]'
    assert "FIXED" not in ip.user_ns  # proposed, never run
    assert "The code is in a new cell below (not run)." in str(final(captured))


@pytest.mark.parametrize("mode", ["block", "await"])
def test_format_code_joins_the_kernels_blocks_into_one_cell(ip, mode):
    ok(ip, f"%config AgentMagics.run_mode = '{mode}'")
    answer = ("First:\n```python\na = 1\n```\nNot this one:\n```javascript\nalert(1)\n```\n"
              "Then:\n```\nb = a + 1\n```\nand\n~~~py\nRAN = True\n~~~\n")
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted([answer, "No code here."]))
    ip.rl_next_input = None
    captured = ok(ip, "%%agent bot -f code -o res\nwrite it")
    assert ip.rl_next_input == "a = 1\n\nb = a + 1\n\nRAN = True"
    assert "RAN" not in ip.user_ns
    assert ip.user_ns["res"].code_blocks() == ["a = 1", "alert(1)", "b = a + 1", "RAN = True"]
    if mode == "await":  # the answer is shown as usual, as Markdown
        assert any("bettong-markdown" in d.get("text/html", "") and d.get("text/plain", "").startswith("First:")
                   for d in final(captured))
    ip.rl_next_input = None
    captured = ok(ip, "%%agent bot --format code\nagain")
    assert ip.rl_next_input is None
    assert "The answer has no python code block; no cell was added." in str(final(captured)) + captured.stdout


LISTED = "Here:\n\n1. Fix it:\n   ```python\n   x = 1\n   if x:\n       print(x)\n   ```\n2. Done.\n"


@pytest.mark.parametrize("answer, blocks", [
    (LISTED, ["x = 1\nif x:\n    print(x)"]),  # a list item's indentation is not the code's
    ("- a\n\n  ```\n  if b:\n      c = 2\n  ```\n", ["if b:\n    c = 2"]),
    ("> ```py\n> q = 1\n>\n> r = 2\n> ```\n", ["q = 1\n\nr = 2"]),  # a block quote's > goes
    ("  ```\n  if s:\n        t = 2\n ```\n", ["if s:\n      t = 2"]),  # the fence's own indentation, no more
    ("````python\ns = \"\"\"\n```\n\"\"\"\n````\n", ['s = """\n```\n"""']),  # a longer fence holds shorter ones
    ("~~~~ python title=x.py\nu = \"\"\"\n~~~\n\"\"\"\n~~~~\n", ['u = """\n~~~\n"""']),  # the info's first word
    ("```js\nalert(1)\n```\n```\nopen = True", ["open = True"]),  # another language; left open
    ("    indented = 1\n\n``` python\nv = 1\n```", ["v = 1"]),  # an indented block is not a fence
    ("Use ```x = 1``` inline.\n", []),  # a code span
], ids=["list item", "bullet", "block quote", "indented fence", "longer fence", "tildes", "open", "indented code",
        "code span"])
def test_code_blocks_are_the_fences_the_markdown_parser_reads(answer, blocks):
    assert bettong_nb.core.results.code_blocks(answer, "python") == blocks
    for block in blocks:
        compile(block, "<block>", "exec")  # what a new cell would run, were it run


def test_fix_takes_a_fence_inside_a_list_item_without_its_indentation(ip):
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted([LISTED]))
    _raise_key_error(ip)
    ip.rl_next_input = None
    ok(ip, "%agent fix bot")
    assert ip.rl_next_input == "x = 1\nif x:\n    print(x)"


def test_format_text_and_html(ip):
    ok(ip, "%config AgentMagics.run_mode = 'await'")
    model = Scripted(["**not bold** <b>raw</b>", '<p onclick="steal()">Hi <script>x()</script><b>there</b></p>'])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    captured = ok(ip, "%%agent bot -f text\nplain please")
    assert {"text/plain": "**not bold** <b>raw</b>"} in final(captured)
    captured = ok(ip, "%%agent bot -f html\nhtml please")
    assert _prompt(model).startswith("html please\n\n(Answer as an HTML fragment")
    (shown,) = [d["text/html"] for d in final(captured) if "bettong-html-answer" in d.get("text/html", "")]
    assert "<b>there</b>" in shown and "onclick" not in shown and "<script" not in shown


def test_a_wide_dataframe_carries_its_dtypes_and_null_counts():
    narrow = pd.DataFrame({"a": [1, 2], "b": ["x", None]})
    assert "Columns (dtype, nulls)" not in interpolation.interpolate("{df}", {"df": narrow})
    wide = pd.DataFrame({f"col{i}": [1.5, None, 3.0] if i % 2 else ["x", "y", None] for i in range(8)})
    wide["when"] = pd.to_datetime(["2024-01-01", None, "2024-03-01"])
    text = interpolation.interpolate("{df}", {"df": wide})
    assert text.startswith("DataFrame (3 × 9):\n")
    columns = text.split("Columns (dtype, nulls):\n")[1].splitlines()
    assert [line.split() for line in columns] == [[c, str(wide[c].dtype), "1", "null"] for c in wide.columns]
    assert len({line.index(" null") for line in columns}) == 1  # a table: the counts line up
    huge = pd.DataFrame({f"c{i}": range(3) for i in range(500)})
    text = interpolation.interpolate("{df}", {"df": huge})
    assert "… (440 more columns)" in text and len(text) <= interpolation.PREVIEW_CHARS + 3000


def _odd_frames() -> dict[str, object]:
    zones = pd.date_range("2024-01-01", periods=12, freq="h", tz="America/Argentina/Buenos_Aires")
    return {
        "tz-aware datetimes": pd.DataFrame({f"when_{i}": zones for i in range(100)}),
        "repeated names": pd.DataFrame([[1, 2.5, "x", None, 5, 6, 7]], columns=list("aabbccd")),
        "multiindex": pd.DataFrame(np.ones((3, 80)), columns=pd.MultiIndex.from_product([["m" * 50, "n"], range(40)])),
        "names not str": pd.DataFrame({(1, 2): [1], 3.5: [2], None: [3], "a": [4], "b": [5], "c": [6]}),
        "huge cells": pd.DataFrame({f"c{i}": ["z" * 100_000] * 12 for i in range(30)}),
        "huge series": pd.Series(["z" * 100_000] * 12),
        "long names": pd.DataFrame({"n" * 5_000 + str(i): [1] for i in range(70)}),
        "long dtypes": pd.DataFrame({f"c{i}": pd.Categorical([f"{'v' * 200}{j}" for j in range(12)]) for i in range(70)}),
    }


@pytest.mark.parametrize("name", list(_odd_frames()))
def test_a_frame_preview_stays_within_its_bound_whatever_the_frame(name):
    frame = _odd_frames()[name]
    text = interpolation.interpolate("{df}", {"df": frame})
    assert len(text) <= interpolation.PREVIEW_CHARS
    assert text.startswith(f"{type(frame).__name__} ({' × '.join(map(str, frame.shape))}):\n")
    if frame.ndim == 2 and frame.shape[1] > interpolation.FEW_COLUMNS:
        listed = text.split("Columns (dtype, nulls):\n")[1].splitlines()
        assert len(listed) >= min(frame.shape[1], 10)  # the list is there, not crowded out by the rows
        assert listed[0].split()[-2:] == [str(int(frame.iloc[:, 0].isna().sum())), "null"]


def test_repeated_column_names_are_listed_one_line_each():
    frame = _odd_frames()["repeated names"]
    listed = interpolation.interpolate("{df}", {"df": frame}).split("Columns (dtype, nulls):\n")[1]
    assert [line.split()[:2] for line in listed.splitlines()] == [
        [name, str(kind)] for name, kind in zip("aabbccd", frame.dtypes)]
    assert str(frame.dtypes.iloc[0]) != str(frame.dtypes.iloc[1])  # each line is its own column's
    assert listed.splitlines()[3].split()[-2:] == ["1", "null"]


def test_a_secret_in_a_cell_pandas_would_cut_is_redacted_first(monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", TOKEN)
    for at in (30, 45, 58):  # pandas cuts a cell to 60 characters: inside the token
        frame = pd.DataFrame({"note": ["q" * at + TOKEN, "plain"], "n": [1, 2]})
        text = interpolation.interpolate("{df}", {"df": frame})
        assert "plain" in text and ("[redacted]" in text or at > 50)  # pandas may cut the marker too
        assert not {piece for piece in _pieces(TOKEN) if piece in text}


def test_data_adds_sql_over_the_named_frames_for_one_cell(ip):
    sales = pd.DataFrame({"region": ["north", "south", "north"], "amount": [10, 20, 5]})
    targets = pd.DataFrame({"region": ["north", "south"], "target": [20, 15]})
    sql = ("SELECT s.region, sum(amount) AS total, any_value(target) AS target FROM sales s "
           "JOIN targets t USING (region) GROUP BY s.region ORDER BY s.region")
    model = Scripted([[("query_data", {"sql": sql})], "North missed by 5.", "ok"])
    seen = []
    ip.user_ns.update(sales=sales, targets=targets, bot=tool_agent(model, seen))
    ok(ip, "%%agent bot --data sales,targets -o res\nWho missed the target?")
    res = ip.user_ns["res"]
    assert [t["name"] for t in model.requests[0].tools] == ["note", "query_data", "describe_data"]
    (frame,) = res.frames()
    assert frame.to_dict("list") == {"region": ["north", "south"], "total": [15, 20], "target": [20, 15]}
    assert res.output == "North missed by 5."
    ok(ip, "%%agent bot\nand now?")  # the next cell has the target's own capabilities only
    assert [t["name"] for t in model.requests[2].tools] == ["note"]
    for cell, message in (("%%agent bot --data nope\nx", "--data: no variable named 'nope'"),
                          ("%%agent bot --data sales,1x\nx", "--data: no variable named '1x'")):
        result, _ = run_cell(ip, cell)
        assert isinstance(result.error_in_exec, UsageError) and message in str(result.error_in_exec)
    for name in ("sales", "targets"):
        ip.user_ns.pop(name)


def test_data_on_a_later_cell_of_a_session_tells_the_model_its_tables(ip):
    """The session keeps its first system prompt (the cached prefix): a --data cell after the
    first carries its tables in its own prompt and the query tool's description, and works."""
    from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

    df1 = pd.DataFrame({"k": [1, 2, 3], "x": [10, 20, 12]})
    script = ChatScript([chat_message("Hello."),
                         chat_message(tool_calls=[tool_call("query_data", {"sql": "SELECT sum(x) AS s FROM df1"})]),
                         chat_message("The sum is 42.")])
    with LoopbackServer(script) as server:
        ip.user_ns.update(df1=df1, bot=bettong_nb.openai(base_url=server.url + "/v1", api_key="sk-test"))
        ok(ip, "%%agent bot\nhello")
        captured = ok(ip, "%%agent bot --data df1 -o res\nwhat is the sum of x?")
        bodies = [request.json() for request in server.requests]
    first, second, third = bodies
    assert second["messages"][0] == first["messages"][0], "the system prompt, and its cache, are kept"
    asked = second["messages"][-1]["content"]
    assert asked.startswith("what is the sum of x?\n\n") and "Tables: df1." in asked
    (query,) = [t for t in second["tools"] if t["function"]["name"] == "query_data"]
    assert "Tables: df1." in query["function"]["description"]
    assert "system prompt this turn would build differs" not in captured.stdout + captured.stderr
    assert third["messages"][-1]["role"] == "tool" and "42" in third["messages"][-1]["content"]
    assert ip.user_ns["res"].frames()[-1].to_dict("list") == {"s": [42]}
    ip.user_ns.pop("df1")


HELD = "hunter2-correct-horse-battery"  # no known shape, in no environment: only its name hides it
HOLDERS = """
import dataclasses, pandas as pd
@dataclasses.dataclass
class Conn:
    host: str
    password: str
db_password = {held!r}
cfg = {{"host": "db", "api_key": {held!r}}}
conn = Conn("db", {held!r})
people = pd.DataFrame({{"user": ["ann", "bob"], "api_key": [{held!r}, "other-key-000000"], "n": [1, 2]}})
tokens = pd.Series([{held!r}], name="token")
pasted = "copied: " + db_password
"""


@pytest.mark.parametrize("field", ["{db_password}", "{cfg}", "{cfg[api_key]}", "{conn}", "{conn.password}",
                                   "{people}", "{tokens}", "{pasted}", "{Err}"])
def test_what_the_namespace_capability_hides_no_other_view_shows(ip, field):
    _cell(ip, HOLDERS.format(held=HELD))
    _cell(ip, "def connect(db_password):\n    raise ValueError('refused: ' + db_password)\nconnect(cfg['api_key'])")
    model = Scripted(["ok"])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    ok(ip, f"%%agent bot\nLook: {field}")
    sent = _prompt(model)
    assert HELD not in sent and ("[hidden]" in sent or "[redacted]" in sent), sent
    # the namespace capability itself, on the same variables
    view = bettong_nb.capabilities.namespace(ip.user_ns)
    for name in ("db_password", "cfg", "conn", "people", "tokens", "pasted"):
        assert HELD not in view.describe_variable(name)


def test_explain_and_data_hide_what_the_namespace_capability_hides(ip):
    _cell(ip, HOLDERS.format(held=HELD))
    _cell(ip, "def connect(db_password):\n    raise ValueError('refused: ' + db_password)\nconnect(cfg['api_key'])")
    model = Scripted(["Because.", [("query_data", {"sql": "SELECT * FROM people"})], "Two people."])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    ok(ip, "%agent explain bot")
    ok(ip, "%%agent bot --data people\nWho is there?")
    texts = [json.dumps(r.messages) for r in model.requests]
    assert len(texts) == 3 and "refused: [redacted]" in texts[0]
    assert "[hidden]" in texts[2] and "ann" in texts[2]  # the column is there, its values hidden
    assert not any(HELD in text for text in texts)
    result, _ = run_cell(ip, "%%agent bot --data tokens\nx")
    assert isinstance(result.error_in_exec, UsageError) and "named like a credential" in str(result.error_in_exec)


def test_a_data_cell_on_the_offline_model_shows_no_cache_jargon(ip):
    # The offline demo costs nothing: a --data cell after an ordinary one adds tools to the
    # conversation, and the cell says nothing about prompt caches or full prices.
    ip.user_ns["moons"] = pd.DataFrame({"planet": ["Saturn", "Jupiter"], "moons": [146, 95]})
    ip.user_ns["bot"] = bettong_nb.offline()
    ok(ip, "%%agent bot\nhello")
    captured = ok(ip, "%%agent bot --data moons\nWhich planet has the most moons?")
    shown = captured.stdout + captured.stderr + "".join(
        str(o.data) for o in captured.outputs)
    assert "full price" not in shown and "cached prefix" not in shown and "tools appended" not in shown
    ip.user_ns.pop("moons")


def test_data_takes_a_folder_beside_frames_and_a_bare_data_says_how(ip, tmp_path, monkeypatch):
    (tmp_path / "shop").mkdir()
    pd.DataFrame({"region": ["north", "south"], "target": [20, 15]}).to_parquet(tmp_path / "shop" / "targets.parquet")
    (tmp_path / "shop" / ".env").write_text("DB_PASSWORD=hunter2-folder-secret\n")
    monkeypatch.chdir(tmp_path)
    sales = pd.DataFrame({"region": ["north", "south", "north"], "amount": [10, 20, 5]})
    sql = ("SELECT s.region, sum(amount) AS total, any_value(t.target) AS target FROM sales s "
           "JOIN 'targets.parquet' t USING (region) GROUP BY s.region ORDER BY s.region")
    for line in ("--data sales,shop/", "--data shop,sales"):  # a trailing / or a folder that exists
        model = Scripted([[("query_data", {"sql": sql}), ("query_data", {"sql": "SELECT * FROM read_csv('.env')"})],
                          "North missed by 5."])
        ip.user_ns.update(sales=sales, bot=tool_agent(model, []))
        ok(ip, f"%%agent bot {line} -o res\nWho missed the target?")
        first, second = ip.user_ns["res"].tool_calls
        assert first.status == "ok" and first.data.to_dict("list") == {
            "region": ["north", "south"], "total": [15, 20], "target": [20, 15]}, line
        assert "hunter2" not in second.result  # the folder is read-only SQL with credential files refused
    for cell, message in (("%%agent bot --data\nx", "--data names what the agent may query"),
                          ("%%agent bot --data nothere/\nx", "--data: no folder 'nothere/'"),
                          ("%%agent bot --data shop/,shop/\nx", "--data takes one folder at most"),
                          ("%%agent bot --data nope\nx", "no variable named 'nope' in your namespace, and no folder")):
        result, _ = run_cell(ip, cell)
        assert isinstance(result.error_in_exec, UsageError) and message in str(result.error_in_exec), \
            (cell, result.error_in_exec)
    ip.user_ns.pop("sales")
