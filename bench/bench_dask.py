"""A batch on a Dask cluster against its floor (needs the dask extra).

W8: 2,000 rows in 8 partitions on a LocalCluster of 2 worker processes, a model answering after
100 ms, ``max_concurrency=40`` across the cluster: the floor is 2000 / 40 x 0.1 s = 5 s. The
cluster is started and warmed (each worker has imported the library and opened its pools) before
the timed runs; what is timed is ``map_frame(...).compute()``, the semaphore and the scheduler
syncs included.
"""

from __future__ import annotations

import importlib.util
import sys
import time

import bettong_nb

from .common import mock_server, row

ROWS, PARTITIONS, LATENCY, CONCURRENCY = 2000, 8, 0.1, 40


def measure(repeat: int = 3) -> list[dict]:
    if importlib.util.find_spec("distributed") is None:
        print("  bench.bench_dask: skipped: needs the dask extra (pip install -e '.[dask]')", file=sys.stderr)
        return []
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    floor = ROWS / CONCURRENCY * LATENCY
    frame = dd.from_pandas(pd.DataFrame({"text": [f"row {i}" for i in range(ROWS)]}), npartitions=PARTITIONS)
    with mock_server(LATENCY) as url, \
            LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                         host="127.0.0.1", env={"OPENAI_API_KEY": "bench"}) as cluster, Client(cluster):
        agent = bettong_nb.openai(base_url=url, model="bench")
        agent.map_frame(frame.head(80, npartitions=1, compute=False), prompt="Label: {text}",
                        max_concurrency=CONCURRENCY).compute()  # warm: imports and pools on both workers
        walls, cpus = [], []
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            out = agent.map_frame(frame, prompt="Label: {text}", output="label", max_concurrency=CONCURRENCY).compute()
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            assert out["label"].notna().all(), out["error"].dropna().head()
    return [row(f"W8 dask: {ROWS} rows, 8 partitions, 2 workers, c={CONCURRENCY}, 100 ms", walls, cpus,
                floor=[floor], target=1.2, target_kind="ratio", scale=1, unit="s")]


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
