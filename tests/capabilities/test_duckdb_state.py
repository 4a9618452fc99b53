"""DuckDB: no query leaves anything behind for the next one, and no value reaches the model cut
before it was redacted (issue 24).

* Every refused query of tests/corpora/duckdb_refused.jsonl and every query of
  tests/corpora/duckdb_allowed.jsonl leaves the catalog as it found it: tables, views, macros,
  secrets, sequences, types and settings. Table functions take only the named parameters they
  allow, and each query runs in a transaction that is rolled back, which the last test checks
  with the parameter allowlist opened.
* Every secret shape of tests/corpora/secrets_exposures.jsonl, placed so that it straddles the
  60-character cut of a cell, leaks no part of itself: in query results, describe_data samples,
  column names and error messages quoting values.
"""

from __future__ import annotations

import importlib
import json
import random

import pandas as pd
import pytest

from bettong_nb import capabilities as caps
from bettong_nb.safety import secrets
from support import TESTS
from support.environment import quiet_environment  # noqa: F401  (autouse: no credential of this machine takes part)
from support.duckdb_tree import CANARY, CASES, SECRET, guarded, tree  # noqa: F401  (fixtures)
from support.secrets_corpus import EXPOSURES, corpus_case
from support.tools import model_reads


duckdb_module = importlib.import_module("bettong_nb.capabilities.duckdb")  # the package's duckdb is the function
ALLOWED = [json.loads(line) for line in (TESTS / "corpora" / "duckdb_allowed.jsonl").read_text().splitlines()
           if line.strip()]
# DuckDB's own (internal) views, functions and types are left out: binding a system view such as
# duckdb_logs fills in its column count, which is DuckDB's cache, not something a query made.
CATALOG = ["duckdb_tables()", "duckdb_views() WHERE NOT internal", "duckdb_functions() WHERE NOT internal",
           "duckdb_secrets()", "duckdb_sequences()", "duckdb_types() WHERE NOT internal", "duckdb_settings()"]
CUT = 60  # the text table's longest cell


def catalog(cap) -> dict[str, list]:
    """Everything a query could leave behind, read on both of the capability's databases."""
    with cap._lock:
        return {(database, name): sorted(map(repr, con.execute(f"SELECT * FROM {name}").fetchall()))
                for database, con in (("logged", cap._con), ("unlogged", cap._unlogged)) for name in CATALOG}


@pytest.fixture(scope="module")
def pristine(guarded):  # noqa: F811
    """The shared capability's catalog before any query of this module: each query must leave it
    so (read once, since reading it costs more than most queries)."""
    return catalog(guarded)


def sql_of(case, tree):  # noqa: F811
    return case["sql"].replace("{root}", str(tree / "root")).replace("{outside}", str(tree / "outside"))


def test_the_allowed_corpus_is_big_enough():
    assert len(ALLOWED) >= 25 and len({c["id"] for c in ALLOWED}) == len(ALLOWED)
    assert sum("reject" in c["id"] for c in CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_a_refused_query_leaves_nothing_behind(case, tree, guarded, pristine, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tree / "cwd")
    with pytest.raises(Exception) as refused:
        guarded.query(sql_of(case, tree))
    assert case["error"] in str(refused.value)
    assert catalog(guarded) == pristine


@pytest.mark.parametrize("case", ALLOWED, ids=[c["id"] for c in ALLOWED])
def test_an_allowed_query_answers_and_leaves_nothing_behind(case, tree, guarded, pristine, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tree / "cwd")
    out = guarded.query(sql_of(case, tree))
    assert out.data.attrs["total_rows"] == case["rows"], out.text
    assert CANARY not in out.text and SECRET not in out.text
    assert catalog(guarded) == pristine


def test_the_rejects_of_a_credential_file_never_reach_a_later_query(tree, guarded):  # noqa: F811
    """The issue's attack, in order: the first query is refused, so the second finds no table."""
    with pytest.raises(PermissionError, match="does not take store_rejects"):
        guarded.query("SELECT * FROM read_csv('.e*', columns={'n':'INTEGER'}, store_rejects=true, rejects_table='rj')")
    with pytest.raises(ValueError, match="rj does not exist"):
        guarded.query("SELECT csv_line FROM rj")


def test_even_an_allowed_option_that_made_a_table_would_leave_nothing(tree, monkeypatch):  # noqa: F811
    """The second layer: were store_rejects allowed, its table is rolled back with the query."""
    cap = caps.duckdb(tree / "root")
    options = {**duckdb_module._NAMED_PARAMETERS}
    options["read_csv"] = options["read_csv"] | {"store_rejects", "rejects_table"}
    monkeypatch.setattr(duckdb_module, "_NAMED_PARAMETERS", options)
    before = catalog(cap)
    out = cap.query("SELECT * FROM read_csv('data.csv', columns={'a': 'INTEGER', 'b': 'INTEGER'}, header=true, "
                    "store_rejects=true, rejects_table='rj')")
    assert out.data.attrs["total_rows"] == 0  # both lines rejected: b is not a number
    assert catalog(cap) == before
    with pytest.raises(ValueError, match="rj does not exist"):
        cap.query("SELECT * FROM rj")


# --- redacted before cut ------------------------------------------------------------------------

def starts(length: int) -> list[int]:
    """Where a value of ``length`` characters starts so that the cut falls inside it."""
    first = max(0, CUT - length + 1)
    return sorted({first, (first + CUT - 1) // 2, CUT - 2})


def fragments(forbidden: set[str]) -> set[str]:
    """Every 12-character piece of every forbidden form: a cut secret leaks its pieces."""
    return {form[i:i + 12] for form in forbidden for i in range(max(1, len(form) - 11))}


def leaked(forbidden: set[str], text: str) -> list[str]:
    flat = text.replace("\\n", "").replace("\\r", "").replace("\n", "").replace("\r", "")
    return sorted(piece for piece in fragments(forbidden) if piece in text or piece in flat)


def exposed(case, monkeypatch):
    """The case's output, its forbidden forms, and the agent key held as an agent would hold it."""
    output, agent_key, env, forbidden = corpus_case(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    secrets.hold([agent_key])
    return output, forbidden


def astride(case) -> list[str]:
    """The case's output placed so that the cut falls inside it, with words before it ending in a
    blank (glued to letters, a token is no longer its shape)."""
    output = corpus_case(case)[0]
    rng = random.Random(case["id"])
    return ["".join(rng.choice("abcdefgh ") for _ in range(start - 1)) + " " * min(start, 1) + output
            for start in starts(len(output))]


@pytest.fixture(scope="module")
def exposure_tables():
    """One capability for the whole corpus, each case's values in tables of its own (``t<i>`` as
    rows, ``named<i>`` as column names): making a connection for each case cost more than the case."""
    tables = {}
    for i, case in enumerate(EXPOSURES):
        values = astride(case)
        tables[f"t{i}"] = pd.DataFrame({"v": values, "n": range(len(values))})
        tables[f"named{i}"] = pd.DataFrame({v: [1] for v in values})
    return caps.duckdb(tables=tables)


@pytest.mark.parametrize("case", EXPOSURES, ids=lambda c: c["id"])
def test_a_secret_astride_the_cut_is_redacted_whole_everywhere_a_value_is_shown(case, exposure_tables, monkeypatch):
    output, forbidden = exposed(case, monkeypatch)
    cap, i = exposure_tables, EXPOSURES.index(case)
    values = astride(case)
    assert all(output in v for v in values)
    shown = [model_reads(cap, "query_data", sql=f"SELECT v, n FROM t{i}"),
             model_reads(cap, "describe_data", path=f"t{i}"),
             model_reads(cap, "query_data", sql=f"SELECT * FROM named{i}"),
             model_reads(cap, "describe_data", path=f"named{i}")]
    for n in range(len(values)):  # an error quotes the first value it fails on
        shown += [model_reads(cap, "query_data", sql=f"SELECT CAST(v AS {kind}) FROM t{i} WHERE n = {n}")
                  for kind in ("INTEGER", "JSON", "DATE")]
    for text in shown:
        assert leaked(forbidden, text) == [], text


def test_the_cut_still_cuts_and_plain_text_is_shown():
    cap = caps.duckdb(tables={"t": pd.DataFrame({"v": ["x" * 100, "short | text\nline"]})})
    text = cap.query("SELECT v FROM t").text
    assert "x" * (CUT - 1) + "…" in text and "x" * CUT not in text
    assert "short \\| text\\nline" in text
