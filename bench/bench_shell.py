"""W6: one ``run_shell("true")`` round trip (``python -m bench.bench_shell``).

The call goes through the registry and ``invoke`` as a model's would: the seatbelt, the
stripped environment, spawning bash in its own session, reading its output, cleaning up its
process group and redacting the result. All calls share one event loop. Floor: a blocking
``subprocess.run(["bash", "-c", "true"])``, measured in the same run.
"""

from __future__ import annotations

import asyncio
import subprocess

from bettong_nb.capabilities.shell.capability import shell
from bettong_nb.core.capability import invoke, registry

from .common import row, sample

__all__ = ["measure"]

TARGET_MS = 15.0


def measure(repeat: int = 50) -> list[dict]:
    tools = registry([shell()])
    loop = asyncio.new_event_loop()
    try:
        def round_trip() -> None:
            text, _ = loop.run_until_complete(invoke(tools, "run_shell", {"command": "true"}))
            assert text == "exit 0\n(no output)", text

        floor, _ = sample(lambda: subprocess.run(["bash", "-c", "true"], check=True), repeat)
        walls, cpus = sample(round_trip, repeat)
    finally:
        loop.close()
    return [row('W6 run_shell("true") through invoke', walls, cpus, floor=floor,
                target=TARGET_MS, target_kind="ms")]


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
