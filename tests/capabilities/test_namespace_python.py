"""The namespace (read-only) and python (approved) capabilities, with plain dicts."""

import copy

import numpy as np
import pandas as pd
import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
from support.tools import model_reads


call = model_reads


class BadRepr:
    def __repr__(self):
        raise RuntimeError("repr exploded")


@pytest.fixture
def ns():
    return {
        "df": pd.DataFrame({"city": ["Vilnius", "Riga", None], "temp": [1.5, 2.0, np.nan]}),
        "arr": np.arange(12, dtype=float).reshape(3, 4),
        "cfg": {"a": 1, "b": [1, 2, 3]},
        "items": list(range(1000)),
        "bad": BadRepr(),
        "big": "x" * 50_000,
        "_private": 1,
        "In": [],
        "np": np,
    }


def test_list_variables_shows_type_shape_size_and_hides_private_names(ns):
    text = call(caps.namespace(ns), "list_variables")
    lines = dict(line.split(": ", 1) for line in text.splitlines())
    assert set(lines) == {"arr", "bad", "big", "cfg", "df", "items"}
    assert lines["df"].startswith("DataFrame, 3x2, ") and lines["arr"].startswith("ndarray, 3x4, 96 B")
    assert lines["items"].startswith("list, len 1000")


def test_names_limit_what_is_visible(ns):
    cap = caps.namespace(ns, names=["df"])
    assert call(cap, "list_variables").startswith("df: DataFrame")
    assert call(cap, "describe_variable", name="arr") == \
        "ERROR: \"No variable called 'arr' is visible; list_variables shows what is\""
    assert "Only these names are visible: df" in cap.instructions


def test_describe_a_dataframe_without_changing_it(ns):
    before = ns["df"].copy()
    text = call(caps.namespace(ns), "describe_variable", name="df", rows=2)
    assert text.startswith("df: DataFrame 3 rows x 2 columns")
    assert "dtypes:" in text and "temp    float64" in text
    assert "head(2):" in text and "Riga" in text
    assert "describe():" in text and "null counts:" in text and "city    1" in text
    pd.testing.assert_frame_equal(ns["df"], before)


def test_describe_series_array_dict_list_and_odd_objects(ns):
    ns["s"] = pd.Series([1, 2, None], name="v")
    cap = caps.namespace(ns)
    assert "Series 'v', 3 values, dtype float64" in call(cap, "describe_variable", name="s")
    arr = call(cap, "describe_variable", name="arr")
    assert "shape (3, 4), dtype float64" in arr and "min 0.0, max 11.0, mean 5.5" in arr
    assert "dict with 2 keys" in call(cap, "describe_variable", name="cfg")
    assert "list of 1000 items" in call(cap, "describe_variable", name="items")
    assert "BadRepr instance at" in call(cap, "describe_variable", name="bad")  # a raising repr is no crash


def test_output_is_bounded_with_a_note(ns):
    text = call(caps.namespace(ns, max_chars=300), "describe_variable", name="big")
    assert len(text) < 400 and "[cut: showing 300 of" in text


def test_namespace_output_is_redacted(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "hunter2-is-long-enough")
    text = call(caps.namespace({"conn": "postgres://u:hunter2-is-long-enough@db"}), "describe_variable", name="conn")
    assert "hunter2-is-long-enough" not in text and "[redacted]" in text


def test_without_a_dict_outside_ipython_it_says_what_to_pass():
    import subprocess
    import sys

    code = ("import asyncio; from bettong_nb import capabilities as caps; from bettong_nb.core.capability import "
            "invoke, registry; print(asyncio.run(invoke(registry([caps.namespace()]), 'list_variables', {}))[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "no IPython shell is running: pass the namespace dict" in out


def test_the_agent_sees_the_description_and_nothing_changes(ns):
    snapshot = {k: copy.deepcopy(v) for k, v in ns.items() if k != "np"}
    model = Scripted([[("describe_variable", {"name": "df"})], "A small weather table."])
    result = bettong_nb.agent(provider=model, capabilities=[caps.namespace(ns)]).run("what is df?")
    sent = model.requests[1].messages[-1]["content"][0]["content"]
    assert "DataFrame 3 rows x 2 columns" in sent and result.output == "A small weather table."
    for k, v in snapshot.items():
        assert type(ns[k]) is type(v)
    pd.testing.assert_frame_equal(ns["df"], snapshot["df"])


# --- python -----------------------------------------------------------------------------------

def test_run_python_captures_output_value_and_errors():
    ns = {"x": 2}
    cap = caps.python(ns, require_approval=False)
    assert call(cap, "run_python", code="print('hi')\nx * 21") == "stdout:\nhi\nvalue:\n42"
    assert call(cap, "run_python", code="import sys\nprint('warn', file=sys.stderr)") == "stderr:\nwarn"
    assert call(cap, "run_python", code="y = x + 1") == "(no output)" and ns["y"] == 3
    err = call(cap, "run_python", code="def f():\n    return 1/0\nf()")
    assert err.startswith("exception:\n") and "ZeroDivisionError: division by zero" in err and "line 2" in err
    assert call(cap, "run_python", code="def (:") .startswith("ERROR: SyntaxError")


def test_run_python_times_out_and_the_namespace_stays_usable():
    ns = {}
    cap = caps.python(ns, timeout=0.3, require_approval=False)
    assert "ran past 0.3 s" in call(cap, "run_python", code="n = 0\nwhile True:\n    n += 1")
    assert ns["n"] > 0
    assert call(cap, "run_python", code="try:\n    while True: pass\nexcept Exception:\n    'swallowed'").endswith(
        "interrupted")
    assert call(cap, "run_python", code="1 + 1") == "value:\n2"


def test_run_python_output_is_bounded():
    text = call(caps.python({}, require_approval=False), "run_python", code="print('y' * 50000)")
    assert len(text) < 10_200 and "[cut" in text


def test_every_call_needs_a_person_even_when_the_agent_allows_all():
    ns = {}
    model = Scripted([[("run_python", {"code": "touched = True"})], "ok"])
    result = bettong_nb.agent(provider=model, capabilities=[caps.python(ns)]).run("go")  # approve_fn: allow all
    call_ = result.tool_calls[0]
    assert call_.status == "denied" and "needs a person's approval" in call_.result and "touched" not in ns


def test_an_approve_fn_that_asks_a_person_is_enough(monkeypatch):
    import io

    class Terminal(io.StringIO):  # a person typing: stdin and stdout are a terminal
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    monkeypatch.setattr("sys.stdout", Terminal())
    ns = {}
    model = Scripted([[("run_python", {"code": "touched = True"})], "ok"])
    bettong_nb.agent(provider=model, capabilities=[caps.python(ns)], approve_fn=bettong_nb.ask_in_terminal).run("go")
    assert ns["touched"] is True


def test_opting_out_runs_without_asking():
    ns = {}
    model = Scripted([[("run_python", {"code": "touched = True"})], "ok"])
    bettong_nb.agent(provider=model, capabilities=[caps.python(ns, require_approval=False)]).run("go")
    assert ns["touched"] is True
