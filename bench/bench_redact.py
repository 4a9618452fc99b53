"""W5: how long redaction takes on a large tool result (``python -m bench.bench_redact``).

Workload: 1 MB of mixed tool output (log lines, ``ls -l``, JSON, a traceback, prose,
wrapped base64, hex) with 50 distinct secret values in it, some several times, some
base64-, URL-, JSON- or hex-encoded. Floor: the same text through one precompiled
``re.subn`` of the 50 plain values only — less work than redaction does (no encoded forms,
no token shapes), measured in the same run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import string
from typing import Callable
from urllib.parse import quote

from bettong_nb import capabilities, secrets
from bettong_nb.core.capability import invoke, registry

from .common import row, sample

__all__ = ["measure", "workload"]

SIZE = 1_000_000
TARGET_MS = 20.0
_ALNUM = string.ascii_letters + string.digits


def _secret_values(rng: random.Random) -> list[str]:
    """50 distinct values shaped like real credentials."""
    def pick(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    makers = [
        lambda: "sk-" + pick(_ALNUM, 48),
        lambda: "sk-" + pick("0123456789abcdef", 32),
        lambda: "sk-ant-api03-" + pick(_ALNUM + "-_", 93) + "AA",
        lambda: "ghp_" + pick(_ALNUM, 36),
        lambda: pick(_ALNUM + "+/", 40),                      # an AWS secret access key
        lambda: pick("0123456789abcdef", 32),                 # a hex API token
        lambda: pick(_ALNUM + "-_", rng.randint(16, 43)),     # a urlsafe token
        lambda: pick(_ALNUM + "!@#$%^&*/+= ", rng.randint(10, 24)),  # a password
        lambda: "xoxb-" + pick(string.digits, 12) + "-" + pick(_ALNUM, 24),
    ]
    values: set[str] = set()
    while len(values) < 50:
        values.add(makers[len(values) % len(makers)]())
    return sorted(values)


def _filler(rng: random.Random) -> Callable[[], str]:
    words = ("the of and to in is for that with on as are this be by from or have an not "
             "request response user cache worker config value error timeout retry table "
             "column index build test module package import deploy server client").split()
    levels = ["INFO", "DEBUG", "WARN", "ERROR"]

    def log() -> str:
        return (f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z {rng.choice(levels):5} "
                f"[worker-{rng.randint(1, 8)}] GET /api/v1/{rng.choice(words)}?page={rng.randint(1, 50)} "
                f"{rng.choice([200, 200, 200, 304, 404, 500])} {rng.randint(1, 900)}ms")

    def ls() -> str:
        name = "_".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        return (f"-rw-r--r--  1 jovyan users {rng.randint(0, 10**7):>9} May {rng.randint(1, 28):2d} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {name}.{rng.choice(['py', 'csv', 'json', 'md'])}")

    def record() -> str:
        return json.dumps({"id": rng.randint(1, 10**6), "name": " ".join(rng.choice(words) for _ in range(3)),
                           "score": round(rng.random(), 4), "tags": rng.sample(words, 2),
                           "created": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"}, indent=1)

    def code() -> str:
        a, b = rng.sample(words, 2)
        site = "/opt/conda/lib/python3.11/site-packages"
        return rng.choice([f'  File "{site}/{a}/{b}.py", line {rng.randint(1, 999)}, in {a}_{b}',
                           f"    {a}_{b} = self.{a}({b}, timeout={rng.randint(1, 60)})",
                           f"def {a}_{b}(self, {a}: str, {b}: int = {rng.randint(0, 9)}) -> dict:"])

    def prose() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(8, 20))).capitalize() + "."

    def blob() -> str:
        data = base64.b64encode(rng.randbytes(rng.randint(40, 400))).decode()
        return "\n".join(data[i:i + 76] for i in range(0, len(data), 76))

    def hexdump() -> str:
        return rng.randbytes(30).hex()

    kinds = [log] * 12 + [ls] * 6 + [record] * 4 + [code] * 6 + [prose] * 6 + [blob, hexdump]
    return lambda: rng.choice(kinds)()


def workload(seed: int = 7) -> tuple[str, list[str]]:
    """(about 1 MB of output, the 50 secret values in it)."""
    rng = random.Random(seed)
    values = _secret_values(rng)
    filler = _filler(rng)
    leaks = []
    for i, value in enumerate(values):
        for _ in range(1 + i % 6):  # some values occur once, some up to six times
            form = i % 5
            leaks.append(
                f"export API_TOKEN={value}" if form == 0 else
                base64.b64encode(f"user:{value}\n".encode()).decode() if form == 1 else
                f"GET /login?next=%2F&token={quote(value, safe='')} 302" if form == 2 else
                json.dumps({"auth": {"password": value}}) if form == 3 else
                f"secret bytes: {value.encode().hex()}")
    lines: list[str] = []
    size = sum(len(line) + 1 for line in leaks)
    while size < SIZE:
        line = filler()
        lines.append(line)
        size += len(line) + 1
    for leak in leaks:
        lines.insert(rng.randrange(len(lines) + 1), leak)
    return "\n".join(lines)[:SIZE], values


def measure(repeat: int = 30) -> list[dict]:
    text, values = workload()
    floor = re.compile("|".join(map(re.escape, sorted(values, key=len, reverse=True))))
    # the warm-up compiles the matcher once, as the first tool result of a session would
    wall, cpu = sample(lambda: secrets.redact(text, extra=values), repeat)
    floor_wall, _ = sample(lambda: floor.subn(secrets.REDACTED, text), repeat)
    small = text[:2000]
    small_wall, small_cpu = sample(lambda: secrets.redact(small, extra=values), repeat)
    return [
        row("W5 redact 1 MB holding 50 secret values", wall, cpu, floor=floor_wall, target=TARGET_MS,
            target_kind="ms"),
        row("W5 redact a 2 KB tool result", small_wall, small_cpu, target=1.0, target_kind="ms"),
        row("W5 describe a variable beside 40,000 records holding passwords", *_huge_namespace(repeat),
            target=1000, target_kind="ms"),
    ]


def _huge_namespace(repeat: int) -> tuple[list[float], list[float]]:
    """``describe_variable`` in a namespace of 200 lists of 200 dicts with a password each: the walk
    for the namespace's known secrets is bounded."""
    ns = {f"v{i}": [{"password": f"pw-{i}-{j}-long-enough", "n": j} for j in range(200)] for i in range(200)}
    ns["target"] = "ordinary"
    tools = registry([capabilities.namespace(ns)])
    return sample(lambda: asyncio.run(invoke(tools, "describe_variable", {"name": "target"})), repeat)


if __name__ == "__main__":
    for result in measure():
        print(json.dumps(result))
