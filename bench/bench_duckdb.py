"""W: what ``query_data`` adds to DuckDB (``python -m bench.bench_duckdb``).

Workload: a generated Parquet file of 10^5, 10^6 and 10^7 rows (id, region, amount, price, note)
in a temp dir, and three query shapes over each: a 100,000-row result (``LIMIT``), an
aggregate (``GROUP BY`` with ``sum()`` of integers, a HUGEINT read exactly) and a filter
(every 1000th row). Measured: ``DuckDB.query`` (checks, plan check, a connection of its own,
the file log where a path needs it, frame and text table), 15 times each: the smallest take 3 ms,
where a median of fewer samples moves by several percent between runs. Floor: the same SQL through a plain ``duckdb.connect()`` fetched with
``.df()``, measured in the same run, each call next to one of ours. The ratio is of CPU time (all
of DuckDB's threads included): what a query costs, steadier than wall time on a busy machine.
"""

from __future__ import annotations

import os
import tempfile

import duckdb as _duckdb

from bettong_nb import capabilities

from .common import row, sample

__all__ = ["measure"]

SIZES = (100_000, 1_000_000, 10_000_000)
TARGET = 1.2
SHAPES = {
    "100,000-row result": "SELECT * FROM {file} LIMIT 100000",
    "aggregate": "SELECT region, count(*) AS n, sum(amount) AS total, avg(price) AS mean FROM {file} "
                 "GROUP BY region ORDER BY region",
    "filter": "SELECT id, region, amount FROM {file} WHERE id % 1000 = 7",
}


def _write(folder: str, rows: int) -> str:
    name = f"sales_{rows}.parquet"
    with _duckdb.connect() as con:
        con.execute(f"COPY (SELECT i AS id, 'region ' || (i % 17) AS region, (i * 7919) % 100000 AS amount, "
                    f"((i * 31) % 1000) / 10.0 AS price, 'note ' || (i % 101) AS note FROM range({rows}) t(i)) "
                    f"TO '{os.path.join(folder, name)}' (FORMAT parquet)")
    return name


def measure(repeat: int = 15) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tool = capabilities.duckdb(root=folder)
        raw = _duckdb.connect()
        for size in SIZES:
            name = _write(folder, size)
            for shape, template in SHAPES.items():
                ours = template.format(file=f"'{name}'")
                plain = template.format(file=f"'{os.path.join(folder, name)}'")
                # interleaved, so a busy machine slows both alike
                floor, floor_cpus, walls, cpus = [], [], [], []
                for _ in range(repeat):
                    wall, cpu = sample(lambda: raw.execute(plain).df(), 1, warmup=1)
                    floor += wall
                    floor_cpus += cpu
                    wall, cpu = sample(lambda: tool.query(ours), 1, warmup=1)
                    walls += wall
                    cpus += cpu
                rows.append(row(f"query_data {size:.0e} rows: {shape}", walls, cpus, floor=floor,
                                floor_cpus=floor_cpus, target=TARGET, target_kind="ratio"))
        raw.close()
    return rows


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
