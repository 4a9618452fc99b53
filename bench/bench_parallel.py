"""Parallel tool calls: the model asks for 4 calls of 200 ms each in one step.

    python -m bench.bench_parallel

One run is 2 model calls (the mock server in its own process) and 4 calls of a sync tool that
sleeps 200 ms, as a blocking tool (a file, a database, a subprocess) does. Run one after
another they take 0.8 s; side by side the run takes what one call takes plus the two model
calls. The floor is one call's 200 ms.
"""

from __future__ import annotations

import time

import bettong_nb

from .common import mock_server, row, sample

CALLS, SECONDS = 4, 0.2


def slow_probe(n: int = 1) -> str:
    time.sleep(SECONDS)
    return str(n * 3)


def measure(repeat: int = 10) -> list[dict]:
    tool = {"name": "run_probe", "description": "Multiply n by three, slowly.",
            "parameters": {"n": {"type": "integer", "required": True}}, "handler": slow_probe}
    with mock_server(calls=CALLS) as url:
        agent = bettong_nb.openai(base_url=url, api_key="sk-bench", model="bench",
                                  capabilities=[{"id": "bench", "tools": [tool]}])
        result = agent.run("go")
        assert result.output == "Done: 9." and [c.result for c in result.tool_calls] == ["9"] * CALLS
        walls, cpus = sample(lambda: agent.run("go"), repeat, warmup=1)
    return [row(f"P1 {CALLS} tool calls of {SECONDS * 1000:.0f} ms in one step: run()", walls, cpus,
                floor=[SECONDS] * repeat, target=300, target_kind="ms")]


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
