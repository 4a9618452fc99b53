"""The DuckDB capability, on real DuckDB and real files.

* tests/corpora/duckdb_refused.jsonl: escape and write attempts, one a line
  (``{"id", "sql", "error"}``, ``{root}`` and ``{outside}`` filled in), each refused with a message
  holding ``error``, with no file created, changed or removed anywhere in the test tree (the
  process's working directory included) and neither the canary outside the root nor a
  credential file's content in what comes back.
* Analytic queries over the demo shop data (scripts/make_sales.py, written small into a temp
  folder), each checked against the same answer computed with pandas from the same files.
* Bounds, the timeout (the event loop keeps running), Excel/pyarrow tables, describe_data, and
  an agent calling the tools through a loopback model server.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time

import pandas as pd
import pyarrow as pa
import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.capabilities.duckdb import MAX_DATA_BYTES, MAX_DATA_ROWS
from bettong_nb.core.capability import ToolOutput, invoke, registry
from support import REPO
from support.duckdb_tree import CANARY, CASES, SECRET, guarded, tree  # noqa: F401  (fixtures)
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call
from support.filesystem import snapshot

# Were DuckDB's lookup of Python variables on, ``FROM secret_frame`` would find this one.
secret_frame = pd.DataFrame({"s": [SECRET]})


def _make_sales():
    spec = importlib.util.spec_from_file_location("make_sales", REPO / "scripts" / "make_sales.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the escape corpus ------------------------------------------------------------------------



def test_the_corpus_is_big_enough():
    assert len(CASES) >= 60 and len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_escape_and_write_attempts_are_refused(case, tree, guarded, monkeypatch):
    monkeypatch.chdir(tree / "cwd")  # a relative write or read would land here
    sql = case["sql"].replace("{root}", str(tree / "root")).replace("{outside}", str(tree / "outside"))
    before = snapshot(tree)
    with pytest.raises(Exception) as refused:
        guarded.query(sql)
    message = str(refused.value)
    assert case["error"] in message
    assert CANARY not in message and SECRET not in message
    assert snapshot(tree) == before, "nothing is created, changed or removed"


def test_after_the_corpus_the_capability_still_answers(tree, guarded, monkeypatch):
    monkeypatch.chdir(tree / "cwd")
    for case in CASES:  # every attempt again, on the same connection, in one go
        sql = case["sql"].replace("{root}", str(tree / "root")).replace("{outside}", str(tree / "outside"))
        with pytest.raises(Exception):
            guarded.query(sql)
    out = guarded.query("SELECT sum(a) AS total FROM 'data.csv'")
    assert out.data["total"].tolist() == [3]
    assert guarded.query("SELECT b FROM sales ORDER BY a").data["b"].tolist() == ["x", "y"]


def test_duckdb_itself_refuses_outside_reads_and_config_changes(tree, guarded):
    """The configuration lock holds below the statement check, too (the query runs unchecked here)."""
    for sql in (f"SELECT * FROM read_text('{tree}/outside/canary.txt')",
                "SET enable_external_access = true", "SET allowed_directories = ['/']",
                "SET lock_configuration = false", "INSTALL httpfs", "CALL disable_logging()"):
        with pytest.raises(Exception) as refused:
            guarded._run(sql)
        assert CANARY not in str(refused.value)
    assert guarded.query("SELECT count(*) AS n FROM 'data.csv'").data["n"].tolist() == [2]


def test_a_credential_file_reached_by_a_glob_is_refused_while_the_same_glob_without_it_works(tree, guarded):
    with pytest.raises(PermissionError, match=r"opened a credential file \(conf/\.env\)"):
        guarded.query("SELECT filename, content FROM read_text('conf/*')")
    out = guarded.query("SELECT content FROM read_text('conf/*.csv')")
    assert out.data["content"].tolist() == ["line\nok\n"]


def test_a_query_asked_again_is_checked_again_and_reads_the_files_again(tree, guarded):
    """What is remembered per SQL text is only that a plan passed; a refusal is never remembered as
    a pass, and the answer itself is read anew."""
    refused = "SELECT * FROM pg_catalog.pg_settings"
    for _ in range(3):
        with pytest.raises(PermissionError, match="duckdb_settings"):
            guarded.query(refused)
        assert guarded.query("SELECT count(*) AS n FROM 'data.csv'").data["n"].tolist() == [2]
    for _ in range(2):
        with pytest.raises(PermissionError, match=r"opened a credential file \(conf/\.env\)"):
            guarded.query("SELECT filename, content FROM read_text('conf/*')")
    data = tree / "root" / "again.csv"
    data.write_text("a\n1\n")
    assert guarded.query("SELECT sum(a) AS s FROM 'again.csv'").data["s"].tolist() == [1]
    data.write_text("a\n1\n2\n")
    assert guarded.query("SELECT sum(a) AS s FROM 'again.csv'").data["s"].tolist() == [3]
    data.unlink()


def test_a_literal_path_is_judged_each_time_it_is_asked(tree, guarded):
    """A query naming only literal paths of plain files is judged before it runs, not through the
    file log; the judgement is made anew each time: the same text refused once the name became a
    symlink to a credential file, and answered again once it is a plain file."""
    swapped = tree / "root" / "swap.csv"
    swapped.write_text("n\n1\n")
    try:
        for round_ in range(3):
            assert guarded.query("SELECT n FROM 'swap.csv'").data["n"].tolist() == [1]
            swapped.unlink()
            swapped.symlink_to(tree / "root" / "conf" / ".env")
            with pytest.raises(PermissionError, match="swap.csv is a credential file") as refused:
                guarded.query("SELECT n FROM 'swap.csv'")
            assert SECRET not in str(refused.value)
            swapped.unlink()
            swapped.write_text("n\n1\n")
    finally:
        swapped.unlink()


@pytest.mark.parametrize("swapped", ["top/root/part", "top/root", "top"])
def test_a_remembered_query_is_judged_again_when_a_folder_on_its_path_becomes_a_symlink(tmp_path, swapped):
    """A query's checks are remembered with what its paths resolved to: a folder below the root,
    the root itself or a folder above it swapped for a symlink leading into a credential folder
    has the same text refused, and answered again once it is put back."""
    root, keys = tmp_path / "top" / "root", tmp_path / "home" / ".ssh"
    (root / "part").mkdir(parents=True)
    (root / "part" / "t.csv").write_text("n\n1\n")
    for below in ("t.csv", "part/t.csv", "root/part/t.csv"):  # where each swap leads the same path
        (keys / below).parent.mkdir(parents=True, exist_ok=True)
        (keys / below).write_text(f"n\n{SECRET}\n")
    db = caps.duckdb(root)
    folder, kept = tmp_path / swapped, tmp_path / "kept"
    for _ in range(2):
        for _ in range(2):
            assert db.query("SELECT n FROM 'part/t.csv'").data["n"].tolist() == [1]
        folder.rename(kept)
        folder.symlink_to(keys)
        with pytest.raises(PermissionError, match="credential file") as refused:
            db.query("SELECT n FROM 'part/t.csv'")
        assert SECRET not in str(refused.value)
        folder.unlink()
        kept.rename(folder)


def test_judged_queries_leave_the_file_log_empty_and_a_glob_is_still_judged_by_it(tree, guarded):
    """A query whose every file was judged before it ran runs where nothing logs; a glob runs on
    the logged database, whose log it reads and empties."""
    log = "SELECT count(*) FROM duckdb_logs()"
    for _ in range(3):
        assert guarded.query("SELECT sum(a) AS s FROM 'data.csv'").data["s"].tolist() == [3]
        assert guarded._con.execute(log).fetchone()[0] == 0
    with pytest.raises(PermissionError, match=r"opened a credential file \(conf/\.env\)"):
        guarded.query("SELECT filename, content FROM read_text('conf/*')")
    out = guarded.query("SELECT content FROM read_text('conf/*.csv')")  # nothing the first opened is charged
    assert out.data["content"].tolist() == ["line\nok\n"]
    assert guarded._con.execute(log).fetchone()[0] == 0
    with pytest.raises(PermissionError, match=r"opened a credential file \(settings\.csv\)"):
        guarded.query(f"SELECT * FROM read_text('{tree / 'root'}/settings' || '.csv')")  # a computed path
    assert guarded._con.execute(log).fetchone()[0] == 0


def test_a_query_whose_result_grew_or_shrank_since_it_last_ran_comes_whole(tmp_path):
    """The fetch is sized by the query's last result; a file rewritten since is read whole anyway."""
    import duckdb as raw

    db = caps.duckdb(tmp_path)
    for rows, step in [(10, 1), (300_000, 1), (0, 1), (5, 1), (2_000_000, 997), (250_000, 1), (3, 1)]:
        with raw.connect() as con:
            con.execute(f"COPY (SELECT range AS n, repeat('x', (range % 7)::INTEGER) AS s FROM range({rows}) "
                        f"WHERE range % {step} = 0) TO '{tmp_path / 'g.parquet'}' (FORMAT parquet)")
        for _ in range(2):
            out = db.query("SELECT n, s FROM 'g.parquet'")
            expected = list(range(0, rows, step))
            assert sorted(out.data["n"].tolist()) == expected and out.data.attrs["total_rows"] == len(expected)
            assert not out.data.attrs["truncated"]


@pytest.mark.parametrize("values", [
    [2 ** 53 - 1], [2 ** 53], [2 ** 53 + 1], [-(2 ** 53 - 1)], [-(2 ** 53)], [-(2 ** 53) - 1],
    [2 ** 62, 2 ** 62], [-(2 ** 62), -(2 ** 62), -5], [0], [-1], [1, -3], [None],
], ids=lambda v: "_".join(map(str, v)))
def test_a_sum_is_exact_on_either_side_of_two_to_the_53(values):
    """sum() of BIGINTs is a HUGEINT: read through doubles while that is exact, else exactly."""
    frame = pd.DataFrame({"g": ["a"] * len(values) + ["b"], "x": pd.array(values + [7], dtype="Int64")})
    db = caps.duckdb(tables={"t": frame})
    want = None if values == [None] else sum(values)
    for _ in range(2):  # the second run takes the way remembered from the first
        out = db.query("SELECT sum(x) FILTER (WHERE g = 'a') AS s, sum(x) FILTER (WHERE g = 'b') AS b FROM t")
        got = out.data["s"].tolist()[0]
        assert (got is pd.NA) if want is None else (got == want and isinstance(got, int)), got
        assert out.text.splitlines()[1].split(" | ")[0] == ("NULL" if want is None else str(want))
        kind = out.data["s"].dtype
        assert kind == ("Int64" if want is None else "int64" if -(2 ** 63) <= want < 2 ** 63 else object)
        assert out.data["b"].tolist() == [7]


def test_a_sparse_filter_keeps_every_row_in_order(analyst):
    """A filter's vectors hold a few rows each; fetched by rows, none is lost or repeated."""
    out = analyst.query("SELECT range AS n FROM range(3000000) WHERE range % 997 = 5 ORDER BY n")
    assert out.data["n"].tolist() == list(range(5, 3_000_000, 997))
    out = analyst.query("SELECT range AS n FROM range(3000000) WHERE range % 997 = 5")
    assert sorted(out.data["n"].tolist()) == list(range(5, 3_000_000, 997))
    assert out.data.attrs["total_rows"] == len(range(5, 3_000_000, 997)) and not out.data.attrs["truncated"]


# --- analytic queries against known data ------------------------------------------------------

@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shop")
    _make_sales().make_sales(folder, rows_per_year=3000)
    return folder


@pytest.fixture(scope="module")
def frames(shop):
    """The same files read with pandas, for the expected answers."""
    parts = []
    for path in sorted((shop / "sales").glob("*.parquet")):
        part = pd.read_parquet(path)
        part["file"] = path.name
        parts.append(part)
    sales = pd.concat(parts, ignore_index=True)
    sales["order_date"] = pd.to_datetime(sales["order_date"])
    sales["revenue"] = sales["quantity"] * sales["unit_price"] * (1 - sales["discount"])
    sales["year"] = sales["order_date"].dt.year
    products = pd.read_csv(shop / "products.csv")
    regions = pd.DataFrame(json.loads((shop / "regions.json").read_text()))
    targets = pd.DataFrame({"region_id": regions["region_id"], "target": [1000.0 * (i + 1) for i in range(len(regions))]})
    return {"sales": sales, "products": products, "regions": regions, "targets": targets}


@pytest.fixture(scope="module")
def analyst(shop, frames):
    return caps.duckdb(shop, tables={"targets": frames["targets"]})


REVENUE = "quantity * unit_price * (1 - discount)"


def _grouped(frame, by, **aggs):
    return frame.groupby(by, as_index=False).agg(**aggs).sort_values(by).reset_index(drop=True)


QUERIES = {
    "count-all": (
        "SELECT count(*) AS n FROM 'sales/*.parquet'",
        lambda f: pd.DataFrame({"n": [len(f["sales"])]})),
    "count-per-year": (
        "SELECT year(order_date) AS year, count(*) AS n FROM 'sales/*.parquet' GROUP BY year ORDER BY year",
        lambda f: _grouped(f["sales"], "year", n=("order_id", "size"))),
    "revenue-per-region": (
        f"SELECT region_id, sum({REVENUE}) AS revenue FROM 'sales/*.parquet' GROUP BY region_id ORDER BY region_id",
        lambda f: _grouped(f["sales"], "region_id", revenue=("revenue", "sum"))),
    "revenue-per-category-join-csv": (
        f"SELECT category, sum({REVENUE}) AS revenue FROM 'sales/*.parquet' JOIN 'products.csv' USING (product_id) "
        "GROUP BY category ORDER BY category",
        lambda f: _grouped(f["sales"].merge(f["products"], on="product_id"), "category", revenue=("revenue", "sum"))),
    "revenue-per-region-name-join-json": (
        f"SELECT r.name, sum({REVENUE}) AS revenue FROM 'sales/*.parquet' s JOIN read_json('regions.json') r "
        "USING (region_id) GROUP BY r.name ORDER BY r.name",
        lambda f: _grouped(f["sales"].merge(f["regions"], on="region_id"), "name", revenue=("revenue", "sum"))),
    "top-products-by-units": (
        "SELECT product_id, sum(quantity) AS units FROM 'sales/*.parquet' GROUP BY product_id "
        "ORDER BY units DESC, product_id LIMIT 5",
        lambda f: _grouped(f["sales"], "product_id", units=("quantity", "sum"))
        .sort_values(["units", "product_id"], ascending=[False, True]).head(5)),
    "avg-discount-per-channel": (
        "SELECT channel, avg(discount) AS avg_discount FROM 'sales/*.parquet' GROUP BY channel ORDER BY channel",
        lambda f: _grouped(f["sales"], "channel", avg_discount=("discount", "mean"))),
    "monthly-revenue-2024": (
        f"SELECT month(order_date) AS month, sum({REVENUE}) AS revenue FROM 'sales/2024.parquet' "
        "GROUP BY month ORDER BY month",
        lambda f: _grouped(f["sales"][f["sales"].year == 2024].assign(month=lambda d: d.order_date.dt.month),
                           "month", revenue=("revenue", "sum"))),
    "distinct-products-per-region": (
        "SELECT region_id, count(DISTINCT product_id) AS products FROM 'sales/*.parquet' GROUP BY ALL ORDER BY region_id",
        lambda f: _grouped(f["sales"], "region_id", products=("product_id", "nunique"))),
    "running-total-2023": (
        f"SELECT month, revenue, sum(revenue) OVER (ORDER BY month) AS running FROM (SELECT month(order_date) AS month, "
        f"sum({REVENUE}) AS revenue FROM 'sales/2023.parquet' GROUP BY month) ORDER BY month",
        lambda f: _grouped(f["sales"][f["sales"].year == 2023].assign(month=lambda d: d.order_date.dt.month),
                           "month", revenue=("revenue", "sum")).assign(running=lambda d: d.revenue.cumsum())),
    "best-product-per-category": (
        f"SELECT category, product_id, sum({REVENUE}) AS revenue FROM 'sales/*.parquet' JOIN 'products.csv' "
        "USING (product_id) GROUP BY category, product_id QUALIFY row_number() OVER (PARTITION BY category ORDER BY revenue DESC) = 1 "
        "ORDER BY category",
        lambda f: _grouped(f["sales"].merge(f["products"], on="product_id"), ["category", "product_id"],
                           revenue=("revenue", "sum")).sort_values("revenue", ascending=False)
        .groupby("category").head(1).sort_values("category")),
    "online-share-per-year": (
        "SELECT year(order_date) AS year, avg((channel = 'online')::INTEGER) AS online FROM 'sales/*.parquet' "
        "GROUP BY year ORDER BY year",
        lambda f: _grouped(f["sales"].assign(online=lambda d: (d.channel == "online").astype(int)), "year",
                           online=("online", "mean"))),
    "median-price-per-category": (
        "SELECT category, median(unit_price) AS median_price FROM 'sales/*.parquet' JOIN 'products.csv' "
        "USING (product_id) GROUP BY category ORDER BY category",
        lambda f: _grouped(f["sales"].merge(f["products"], on="product_id"), "category",
                           median_price=("unit_price", "median"))),
    "rarely-sold-in-ireland-2022": (
        "SELECT product_id, count(s.order_id) AS orders FROM 'products.csv' LEFT JOIN "
        "(SELECT * FROM 'sales/2022.parquet' WHERE region_id = 'IE') s USING (product_id) "
        "GROUP BY product_id HAVING count(s.order_id) < 3 ORDER BY product_id",
        lambda f: f["sales"][(f["sales"].year == 2022) & (f["sales"].region_id == "IE")].groupby("product_id")
        .size().reindex(f["products"].product_id, fill_value=0).rename("orders").reset_index().query("orders < 3")),
    "big-orders": (
        "SELECT count(*) AS n FROM 'sales/*.parquet' WHERE quantity >= 5",
        lambda f: pd.DataFrame({"n": [int((f["sales"].quantity >= 5).sum())]})),
    "max-order-value": (
        f"SELECT max({REVENUE}) AS biggest FROM 'sales/*.parquet'",
        lambda f: pd.DataFrame({"biggest": [f["sales"].revenue.max()]})),
    "rows-per-file": (
        "SELECT parse_filename(filename) AS file, count(*) AS n FROM read_parquet('sales/*.parquet', filename = true) "
        "GROUP BY file ORDER BY file",
        lambda f: _grouped(f["sales"], "file", n=("order_id", "size"))),
    "products-per-category-csv": (
        "SELECT category, count(*) AS n, avg(list_price) AS avg_price FROM read_csv('products.csv') "
        "GROUP BY category ORDER BY category",
        lambda f: _grouped(f["products"], "category", n=("product_id", "size"), avg_price=("list_price", "mean"))),
    "regions-json": (
        "SELECT region_id, manager FROM 'regions.json' ORDER BY region_id",
        lambda f: f["regions"][["region_id", "manager"]].sort_values("region_id")),
    "year-over-year-growth": (
        "WITH y AS (SELECT year(order_date) AS year, count(*) AS n FROM 'sales/*.parquet' GROUP BY year) "
        "SELECT year, n, coalesce(n - lag(n) OVER (ORDER BY year), 0) AS growth FROM y ORDER BY year",
        lambda f: _grouped(f["sales"], "year", n=("order_id", "size")).assign(growth=lambda d: d.n.diff().fillna(0))),
    "weekday-counts": (
        "SELECT isodow(order_date) AS weekday, count(*) AS n FROM 'sales/*.parquet' GROUP BY weekday ORDER BY weekday",
        lambda f: _grouped(f["sales"].assign(weekday=lambda d: d.order_date.dt.day_of_week + 1), "weekday",
                           n=("order_id", "size"))),
    "registered-table-join": (
        f"SELECT region_id, sum({REVENUE}) / any_value(target) AS ratio FROM 'sales/*.parquet' JOIN targets "
        "USING (region_id) GROUP BY region_id ORDER BY region_id",
        lambda f: _grouped(f["sales"], "region_id", revenue=("revenue", "sum")).merge(f["targets"], on="region_id")
        .assign(ratio=lambda d: d.revenue / d.target)[["region_id", "ratio"]]),
    "quantile-quantity": (
        "SELECT channel, quantile_cont(quantity, 0.9) AS p90 FROM 'sales/*.parquet' GROUP BY channel ORDER BY channel",
        lambda f: f["sales"].groupby("channel", as_index=False).quantity.quantile(0.9)
        .rename(columns={"quantity": "p90"})),
    "describe-a-file": (
        "SELECT column_name FROM (DESCRIBE 'sales/2024.parquet')",
        lambda f: pd.DataFrame({"column_name": [c for c in f["sales"].columns
                                                if c not in ("file", "revenue", "year")]})),
    "summarize-a-file": (
        "SELECT column_name, count FROM (SUMMARIZE 'products.csv') ORDER BY column_name",
        lambda f: pd.DataFrame({"column_name": sorted(f["products"].columns), "count": len(f["products"])})),
    "having-busy-categories": (
        "SELECT category, count(*) AS orders FROM 'sales/*.parquet' JOIN 'products.csv' USING (product_id) "
        "GROUP BY category HAVING count(*) > 2000 ORDER BY category",
        lambda f: _grouped(f["sales"].merge(f["products"], on="product_id"), "category", orders=("order_id", "size"))
        .query("orders > 2000")),
    "catalog-lists-the-registered-tables": (  # the catalog views read only allowed listings
        "SELECT table_name FROM information_schema.tables ORDER BY table_name",
        lambda f: pd.DataFrame({"table_name": ["targets"]})),
    "show-tables": (
        "SHOW TABLES",
        lambda f: pd.DataFrame({"name": ["targets"]})),
    "exact-integer-sum": (  # sum() of BIGINT is a HUGEINT
        "SELECT sum(order_id) AS s, sum(quantity) AS q FROM 'sales/*.parquet'",
        lambda f: pd.DataFrame({"s": [int(f["sales"].order_id.sum())], "q": [int(f["sales"].quantity.sum())]})),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_analytic_queries_match_pandas(name, analyst, frames):
    sql, expected = QUERIES[name]
    out = analyst.query(sql)
    want = expected(frames).reset_index(drop=True)
    got = out.data.reset_index(drop=True)
    assert len(want), "the expected answer is not empty"
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, check_exact=False, rtol=1e-9)
    assert out.data.attrs["total_rows"] == len(want) and not out.data.attrs["truncated"]
    assert out.text.splitlines()[0].startswith(f"{want.columns[0]} (")


def test_the_analytic_corpus_is_big_enough():
    assert len(QUERIES) >= 20


# --- the text table and the data --------------------------------------------------------------

def test_a_long_result_is_bounded_for_the_model_and_whole_for_the_person(analyst, frames):
    rows = int((frames["sales"].year == 2022).sum())
    out = analyst.query("SELECT * FROM 'sales/2022.parquet' ORDER BY order_id")
    assert isinstance(out, ToolOutput) and len(out.data) == rows
    lines = out.text.splitlines()
    assert lines[0] == ("order_id (BIGINT) | order_date (DATE) | product_id (INTEGER) | region_id (VARCHAR) | "
                        "channel (VARCHAR) | quantity (INTEGER) | unit_price (DOUBLE) | discount (DOUBLE)")
    assert len(lines) == 1 + 50 + 1
    assert lines[1].startswith("1 | 2022-01-01 | ")
    assert lines[-1].startswith(f"… {rows - 50:,} more rows ({rows:,} rows in all, 50 shown)")


def test_max_rows_and_max_chars_bound_the_text(shop):
    narrow = caps.duckdb(shop, max_rows=3, max_chars=600)
    out = narrow.query("SELECT order_id, channel FROM 'sales/2023.parquet' ORDER BY order_id")
    assert len(out.text.splitlines()) == 1 + 3 + 1 and "more rows" in out.text
    wide = narrow.query("SELECT repeat('x', 500) AS long_text, * FROM 'sales/2023.parquet' ORDER BY order_id")
    assert len(wide.text) <= 600 and "more rows" in wide.text
    assert "x" * 59 + "…" in wide.text  # a long cell is cut
    assert len(wide.data.loc[0, "long_text"]) == 500, "the person's frame keeps whole values"


def test_the_person_gets_at_most_max_data_rows(analyst):
    out = analyst.query(f"SELECT range AS n FROM range({MAX_DATA_ROWS + 7})")
    assert len(out.data) == MAX_DATA_ROWS and out.data["n"].iloc[-1] == MAX_DATA_ROWS - 1
    assert out.data.attrs["total_rows"] == MAX_DATA_ROWS + 7 and out.data.attrs["truncated"]
    assert f"({MAX_DATA_ROWS + 7:,} rows in all, 50 shown)" in out.text


def test_a_wide_result_is_kept_up_to_max_data_bytes_and_the_kernel_stays_small(tmp_path):
    """About 800 MB of text rows: the frame keeps the first MAX_DATA_BYTES of them, every row is
    counted, the model is told, and the process grows by far less than the result (measured in a
    fresh process: fetching it whole peaked at several GB)."""
    script = tmp_path / "wide.py"
    script.write_text(f"""
import json, resource, sys
sys.path.insert(0, {str(REPO)!r})
import pandas as pd
from bettong_nb import capabilities as caps
sql = caps.duckdb(tables={{"t": pd.DataFrame({{"a": [1]}})}}, memory_limit="200MB", threads=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = sql.query("SELECT range AS n, repeat('x', 1000) AS text FROM range(800000)")
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"kept": len(out.data), "total": out.data.attrs["total_rows"],
                  "truncated": out.data.attrs["truncated"], "last": int(out.data["n"].iloc[-1]),
                  "bytes": int(out.data.memory_usage(deep=True).sum()), "grown_mb": grown / 1024,
                  "text": out.text.splitlines()[-1]}}))
""")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["total"] == 800_000 and got["truncated"]
    assert 0 < got["kept"] < 800_000 and got["last"] == got["kept"] - 1, "the first rows, in order"
    assert MAX_DATA_BYTES * 0.9 < got["bytes"] <= MAX_DATA_BYTES * 1.01
    assert got["text"] == (f"The result kept as a DataFrame holds only the first {got['kept']:,} rows "
                           f"(the limit is {MAX_DATA_ROWS:,} rows and {MAX_DATA_BYTES // 1_000_000:,} MB).")
    assert got["grown_mb"] < 500, f"the kernel grew by {got['grown_mb']:.0f} MB for an 800 MB result"


def test_huge_integers_and_wide_decimals_stay_exact(tmp_path):
    frame = pd.DataFrame({"x": [9007199254740993, 2]})  # 2**53 + 1: a double cannot hold it
    sql = caps.duckdb(tables={"t": frame})
    out = sql.query("SELECT sum(x) AS s FROM t;  -- HUGEINT")
    assert out.text.splitlines() == ["s (HUGEINT)", "9007199254740995", "(1 row)"]
    assert out.data["s"].dtype == "int64" and out.data["s"].tolist() == [9007199254740995]
    out = sql.query("SELECT 12345678901234567890123::HUGEINT AS h, NULL::HUGEINT AS n, "
                    "1234567890.1234567891::DECIMAL(38,10) AS d, 1.25::DECIMAL(5,2) AS small, 1 AS h")
    assert out.text.splitlines()[1] == "12345678901234567890123 | NULL | 1234567890.1234567891 | 1.25 | 1"
    row = out.data.iloc[0].tolist()
    assert row[0] == 12345678901234567890123 and isinstance(row[0], int)
    assert out.data.dtypes.iloc[1] == "Int64" and row[1] is pd.NA
    assert str(row[2]) == "1234567890.1234567891", "a Decimal, not a float"
    assert row[3] == 1.25 and row[4] == 1


def test_a_query_asked_again_after_its_file_changed_columns_gets_them_exactly(tmp_path):
    """What a query's wide columns were is remembered by its text; a file rewritten with other
    columns (wider, moved, more, fewer) is answered as it is now."""
    import duckdb as raw

    def write(select):
        with raw.connect() as con:
            con.execute(f"COPY ({select}) TO '{tmp_path / 'f.parquet'}' (FORMAT parquet)")

    big = 12345678901234567890123
    db = caps.duckdb(tmp_path)
    for select, header, row in [
        ("SELECT 1::BIGINT AS x, 'a' AS y", "x (BIGINT) | y (VARCHAR)", [1, "a"]),
        (f"SELECT {big}::DECIMAL(38,0) AS x, 'a' AS y", "x (DECIMAL(38,0)) | y (VARCHAR)", [big, "a"]),
        (f"SELECT 'b' AS y, 5 AS z, {big}::DECIMAL(38,0) AS x", "y (VARCHAR) | z (INTEGER) | x (DECIMAL(38,0))",
         ["b", 5, big]),
        ("SELECT 'c' AS y", "y (VARCHAR)", ["c"]),
    ]:
        write(select)
        for _ in range(2):
            out = db.query("SELECT * FROM 'f.parquet'")
            assert out.text.splitlines()[0] == header
            assert out.data.iloc[0].tolist() == row
    assert str(out.data.iloc[0, 0]) == "c"
    write("SELECT 9007199254740993::BIGINT AS s UNION ALL SELECT 2")  # its sum is a HUGEINT
    out = db.query("SELECT sum(s) AS s FROM 'f.parquet'")
    assert out.data["s"].tolist() == [9007199254740995] and out.text.startswith("s (HUGEINT)")
    write("SELECT 1.5::DOUBLE AS s")  # now a DOUBLE
    out = db.query("SELECT sum(s) AS s FROM 'f.parquet'")
    assert out.data["s"].tolist() == [1.5] and out.text.startswith("s (DOUBLE)")


def test_nulls_newlines_and_pipes_are_shown_unambiguously(analyst):
    out = analyst.query("SELECT NULL::INTEGER AS n, 'a|b' AS p, 'two\nlines' AS t, '' AS empty")
    assert out.text.splitlines()[1] == "NULL | a\\|b | two\\nlines | "
    assert out.text.endswith("(1 row)")


def test_a_short_result_asked_again_reads_the_same_whatever_its_types(monkeypatch):
    """A query asked again whose last result was short takes its values once as Python objects for
    its size, its HUGEINT columns and its text table: text and frame equal the first run's, NULLs of
    every type, long and secret-bearing text included; a wide one reads the same on either way."""
    monkeypatch.setenv("BETTONG_TEST_API_KEY", "sk-cellsecret-0123456789abcdef")
    db = caps.duckdb(tables={"t": pd.DataFrame({"x": [1, 2, 3]})}, max_rows=3)
    sql = ("SELECT x, x::DOUBLE / 2 AS half, CASE WHEN x = 2 THEN NULL ELSE 'v' || x END AS s, "
           "DATE '2024-01-01' + x::INTEGER AS d, TIMESTAMP '2024-01-01 10:00' + to_hours(x) AS ts, "
           "CASE WHEN x = 1 THEN NULL ELSE x END AS maybe, x > 1 AS flag, "
           "CASE WHEN x = 3 THEN NULL ELSE x > 2 END AS maybe_flag, [x, NULL] AS l, {'k': x} AS st, "
           "'\\x00\\x01'::BLOB AS b, 1.25::DECIMAL(5,2) AS dec, sum(x) OVER () AS total, "
           "CASE WHEN x = 3 THEN NULL ELSE sum(x) OVER (ORDER BY x) END AS running, "
           "CASE WHEN x = 1 THEN repeat('long|text ', 20) || 'sk-cellsecret-0123456789abcdef' END AS note, "
           "NULL::DOUBLE AS nothing FROM t ORDER BY x")
    first = db.query(sql)
    assert "cellsecret" not in first.text and "NULL" in first.text
    for _ in range(2):
        again = db.query(sql)
        assert again.text == first.text
        pd.testing.assert_frame_equal(again.data, first.data)
    assert [t for _, t in db._run(sql).types][12:14] == ["HUGEINT", "HUGEINT"]
    wide = "SELECT repeat('y', 400000) AS s, range AS n FROM range(5)"
    for _ in range(2):
        out = db.query(wide)
        assert out.data["n"].tolist() == [0, 1, 2, 3, 4] and out.data["s"].str.len().tolist() == [400000] * 5
        assert out.text.splitlines()[1:4] == ["y" * 59 + f"… | {n}" for n in range(3)]


def test_an_empty_result_keeps_its_columns(analyst):
    out = analyst.query("SELECT order_id FROM 'sales/2022.parquet' WHERE quantity < 0")
    assert list(out.data.columns) == ["order_id"] and len(out.data) == 0
    assert out.text == "order_id (BIGINT)\n(0 rows)"


def test_sql_errors_are_clear(analyst):
    with pytest.raises(ValueError, match="syntax error"):
        analyst.query("SELEC 1")
    with pytest.raises(ValueError, match="No files found|does not exist"):
        analyst.query("SELECT * FROM 'missing.parquet'")
    with pytest.raises(ValueError, match="non-blank string"):
        analyst.query("   ")


# --- describe_data ----------------------------------------------------------------------------

def test_describe_parquet_csv_json_and_a_glob(analyst, frames):
    text = analyst.describe("sales/2024.parquet")
    rows = int((frames["sales"].year == 2024).sum())
    assert text.startswith(f"sales/2024.parquet: {rows:,} rows, 8 columns\n  order_id  BIGINT\n  order_date  DATE\n")
    assert "First rows:\norder_id (BIGINT) | order_date (DATE)" in text
    assert len(text.split("First rows:\n")[1].splitlines()) == 1 + 5
    assert analyst.describe("sales/*.parquet").startswith(f"sales/*.parquet: {len(frames['sales']):,} rows")
    assert analyst.describe("products.csv").startswith(f"products.csv: {len(frames['products'])} rows, 5 columns")
    assert analyst.describe("regions.json").startswith(f"regions.json: {len(frames['regions'])} rows, 4 columns")
    assert analyst.describe("targets").startswith(f"targets: {len(frames['targets'])} rows, 2 columns")


def test_describe_tsv_ndjson_and_excel(tmp_path):
    frame = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "people": [709_000, 10_000_000, 7_000_000]})
    frame.to_csv(tmp_path / "cities.tsv", sep="\t", index=False)
    frame.to_json(tmp_path / "cities.ndjson", orient="records", lines=True)
    frame.to_excel(tmp_path / "cities.xlsx", index=False)
    db = caps.duckdb(tmp_path)
    for name in ("cities.tsv", "cities.ndjson", "cities.xlsx"):
        text = db.describe(name)
        assert text.startswith(f"{name}: 3 rows, 2 columns\n  city  VARCHAR\n  people  BIGINT\n"), text
        assert "Lima | 10000000" in text
    assert db.query("SELECT sum(people) AS total FROM 'cities.xlsx'").data["total"].tolist() == [frame.people.sum()]


def test_describe_refusals(tree, guarded):
    with pytest.raises(ValueError, match="describe_data reads CSV, TSV, Parquet"):
        guarded.describe("keys.pem")
    with pytest.raises(PermissionError, match="credential file"):
        guarded.describe("settings.csv")
    with pytest.raises(PermissionError, match=r"opened a credential file \(more/\.env\.csv\)"):
        guarded.describe("more/*.csv")  # the glob matches .env.csv
    assert guarded.describe("more/ok.csv").startswith("more/ok.csv: 1 rows, 1 columns")
    with pytest.raises(PermissionError, match="only files inside the data folder"):
        guarded.describe("../outside/canary.csv")


def test_pyarrow_tables_are_read_only_views():
    table = pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    db = caps.duckdb(tables={"t": table})
    out = db.query("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k")
    assert out.data.to_dict("list") == {"k": ["a", "b"], "s": [4, 2]}
    assert out.text == "k (VARCHAR) | s (HUGEINT)\na | 4\nb | 2\n(2 rows)"
    with pytest.raises(PermissionError, match="not UPDATE"):
        db.query("UPDATE t SET v = 0")
    with pytest.raises(PermissionError, match="only files inside the data folder"):
        db.query("SELECT * FROM read_csv('/etc/passwd')")  # no root: no files at all


def test_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="needs root= .* or tables="):
        caps.duckdb()
    with pytest.raises(TypeError, match="unknown option.*writable"):
        caps.duckdb(tmp_path, writable=True)
    with pytest.raises(TypeError, match="pandas, polars or pyarrow"):
        caps.duckdb(tables={"t": [1, 2]})
    with pytest.raises(FileNotFoundError, match="not an existing directory"):
        caps.duckdb(tmp_path / "missing")
    with pytest.raises(ValueError, match="timeout"):
        caps.duckdb(tmp_path, timeout=0)


def test_importing_the_capabilities_does_not_import_duckdb():
    code = ("import sys, bettong_nb.capabilities as c; c.duckdb; "
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'openpyxl') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert done.stdout.strip() == "[]"


# --- time limits and the event loop -----------------------------------------------------------

SLOW = "SELECT sum(hash(a.range * b.range)) AS h FROM range(300000) a, range(300000) b"


def test_a_slow_query_is_interrupted_at_its_timeout_while_the_loop_runs(shop):
    db = caps.duckdb(shop, timeout=1, threads=2)
    reg = registry([db])

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        text, _ = await invoke(reg, "query_data", {"sql": SLOW})
        elapsed = time.monotonic() - started
        stop.set()
        await task
        return text, elapsed, ticks

    text, elapsed, ticks = asyncio.run(main())
    assert text.startswith("ERROR: the query ran longer than 1 s and was stopped")
    assert 0.9 <= elapsed < 3.0
    assert ticks >= 0.6 * elapsed / 0.05, "the event loop kept running while the query did"
    assert db.query("SELECT 42 AS answer").data["answer"].tolist() == [42], "the connection is usable again"


def test_cancelling_the_tool_call_stops_its_query(shop):
    db = caps.duckdb(shop, timeout=60, threads=2)

    async def main():
        call = asyncio.create_task(db.query_data(SLOW))
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        started = time.monotonic()
        out = await db.query_data("SELECT 7 AS n")  # waits for the connection the slow query held
        return out, time.monotonic() - started

    out, waited = asyncio.run(main())
    assert out.data["n"].tolist() == [7] and waited < 3, "the slow query was interrupted, not left to run 60 s"


def test_memory_is_capped_and_nothing_spills_to_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # DuckDB's default spill folder is .tmp in the working directory
    big_sort = "SELECT count(*) AS n FROM (SELECT range FROM range(20000000) ORDER BY hash(range))"
    with pytest.raises(MemoryError, match=r"more than the memory limit \(30MB\)"):
        caps.duckdb(tables={"t": pd.DataFrame({"a": [1]})}, memory_limit="30MB").query(big_sort)
    assert list(tmp_path.iterdir()) == []
    assert caps.duckdb(tables={"t": pd.DataFrame({"a": [1]})}, memory_limit="2GB").query(big_sort).data["n"].tolist() \
        == [20_000_000]


def test_concurrent_calls_each_get_their_own_answer(analyst, frames):
    async def main():
        return await asyncio.gather(*(analyst.query_data(f"SELECT count(*) AS n FROM 'sales/{y}.parquet'")
                                      for y in (2022, 2023, 2024, 2025)))

    counts = [out.data["n"].iloc[0] for out in asyncio.run(main())]
    assert counts == [int((frames["sales"].year == y).sum()) for y in (2022, 2023, 2024, 2025)]


# --- an agent using it ------------------------------------------------------------------------

def test_an_agent_queries_data_end_to_end(shop, frames):
    revenue_sql = (f"SELECT region_id, round(sum({REVENUE}), 2) AS revenue FROM 'sales/*.parquet' "
                   "GROUP BY region_id ORDER BY revenue DESC")
    script = ChatScript([
        chat_message(tool_calls=[tool_call("describe_data", {"path": "sales/2024.parquet"}, id="c1")]),
        chat_message(tool_calls=[tool_call("query_data", {"sql": revenue_sql}, id="c2")]),
        chat_message(tool_calls=[tool_call("query_data", {"sql": "SELECT * FROM read_text('*')"}, id="c3")]),
        chat_message("The South East sells most."),
    ])
    (shop / ".env").write_text(f"TOKEN={SECRET}\n")
    try:
        with LoopbackServer(script) as server:
            result = bettong_nb.openai(base_url=server.url, api_key="sk-test",
                                       capabilities=[caps.duckdb(shop)]).run("Which region sells most?")
    finally:
        (shop / ".env").unlink()
    assert result.output == "The South East sells most."
    bodies = [r.json() for r in server.requests]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["query_data", "describe_data"]
    assert "'sales/2024.parquet'" in bodies[0]["messages"][0]["content"], "the instructions show how to name files"
    tools = {m["tool_call_id"]: m["content"] for m in bodies[3]["messages"] if m["role"] == "tool"}
    rows = int((frames["sales"].year == 2024).sum())
    assert tools["c1"].startswith(f"sales/2024.parquet: {rows:,} rows, 8 columns")
    expected = _grouped(frames["sales"], "region_id", revenue=("revenue", "sum")).sort_values("revenue", ascending=False)
    lines = tools["c2"].splitlines()
    assert lines[0] == "region_id (VARCHAR) | revenue (DOUBLE)" and lines[-1] == f"({len(expected)} rows)"
    assert [line.split(" | ")[0] for line in lines[1:-1]] == expected.region_id.tolist()
    assert [float(line.split(" | ")[1]) for line in lines[1:-1]] == pytest.approx(expected.revenue.round(2).tolist())
    assert tools["c3"].startswith("ERROR: the query opened a credential file (.env)") and SECRET not in json.dumps(bodies)
    assert [c.tool for c in result.tool_calls] == ["describe_data", "query_data", "query_data"]


# --- the demo data ----------------------------------------------------------------------------

def test_the_shipped_demo_data_is_what_the_script_writes(tmp_path):
    shipped = REPO / "notebooks" / "shop"
    written = _make_sales().make_sales(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(
        p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file() and p.name != "README.md")
    for path in written:
        twin = shipped / path.relative_to(tmp_path)
        if path.suffix == ".parquet":
            pd.testing.assert_frame_equal(pd.read_parquet(path), pd.read_parquet(twin))
        else:
            assert path.read_bytes() == twin.read_bytes()
    assert sum(p.stat().st_size for p in written) < 5_000_000


def test_no_progress_bar_is_drawn_in_the_persons_cell(tmp_path):
    sql = caps.duckdb(root=tmp_path)
    for con in (sql._con, sql._unlogged):
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
