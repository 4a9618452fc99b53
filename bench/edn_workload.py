"""A deterministic, realistic EDN document of any size, for the EDN benchmark and tests.

    text = generate(5_000_000)          # about 5 MB; the same text for the same size and seed
    near_end_path(text)                 # a key path into the last event: [":events", 10638, ...]

The document is one map shaped like an application's data file: a config section, a map of
services, a long vector of events and a short section at the end. It holds nested maps,
vectors, sets and lists, keywords and namespaced keywords, strings with escapes, ratios,
decimals, big integers, chars, ``#inst`` and ``#uuid`` literals, ``#_`` discards and comments.
"""

from __future__ import annotations

import random

__all__ = ["generate", "near_end_path"]

_WORDS = ("alpha beta gamma delta order invoice customer shipment region pool cache worker queue "
          "retry timeout billing audit ledger report export import sync token session").split()
_NAMESPACES = ("order", "invoice", "user", "db", "http", "job")


def _string(rng: random.Random) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 8)))
    escape = rng.choice(["", "", "", '\\"quoted\\"', "\\n", "\\t", "\\\\path", "caf\u00e9", "\\u00e9"])
    return f'"{words}{" " + escape if escape else ""}"'


def _inst(rng: random.Random) -> str:
    return (f'#inst "20{rng.randint(10, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'
            f'T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.000-00:00"')


_SCALARS = [
    lambda rng: str(rng.randint(-10**6, 10**6)),
    lambda rng: f"{rng.uniform(-1e3, 1e3):.3f}",
    lambda rng: f"{rng.randint(1, 99)}/{rng.randint(100, 199)}",
    lambda rng: f"{rng.randint(0, 10**4)}.{rng.randint(0, 99):02d}M",
    lambda rng: f"{rng.randint(10**18, 10**19)}N",
    lambda rng: rng.choice(["\\a", "\\Z", "\\newline", "\\space", "\\u00e9", "\\("]),
    lambda rng: ":" + rng.choice(_WORDS),
    lambda rng: f":{rng.choice(_NAMESPACES)}/{rng.choice(_WORDS)}",
    _string,
    _inst,
    lambda rng: rng.choice(["true", "false", "nil"]),
    lambda rng: f'#uuid "{rng.getrandbits(128):032x}"',
]


def _scalar(rng: random.Random) -> str:
    return rng.choice(_SCALARS)(rng)


def _record(rng: random.Random, index: int) -> str:
    tags = " ".join(sorted({":" + rng.choice(_WORDS) for _ in range(rng.randint(1, 4))}))
    path = " ".join(_string(rng) for _ in range(rng.randint(1, 3)))
    lines = [
        f"{{:id {index}",
        f" :at {_inst(rng)}",
        f" :kind :{rng.choice(_NAMESPACES)}/{rng.choice(_WORDS)}",
        f" :tags #{{{tags}}}",
        f" :path ({path})",
        f" :amounts [{' '.join(_scalar(rng) for _ in range(rng.randint(2, 6)))}]",
        f" :payload {{:note {_string(rng)}",
        f"           :ratio {rng.randint(1, 9)}/{rng.randint(10, 19)}",
        f"           :grade \\{rng.choice('ABCDEF')}",
        f"           :extra {{{' '.join(f':{w} {_scalar(rng)}' for w in rng.sample(_WORDS, rng.randint(1, 4)))}}}}}",
    ]
    if index % 7 == 0:
        lines.insert(1, " ;; flagged for review")
    if index % 11 == 0:
        lines.insert(2, f" #_{{:old-id {index - 1}}}")
    return "\n  ".join(lines) + "}"


def generate(size: int, *, seed: int = 18) -> str:
    """An EDN document of at least ``size`` characters (mostly ASCII), the same for the same arguments."""
    rng = random.Random(seed)
    head = [
        ";; Generated application data (bench/edn_workload.py)",
        "{:config {:db {:url \"jdbc:postgresql://db.internal:5432/app\" :pool-size 20 :timeout-ms 30000}",
        "          :http {:port 8080 :host \"0.0.0.0\" :cors #{\"https://a.example\" \"https://b.example\"}}",
        "          :features #:feature{:search true :beta false :_/legacy nil}}",
        " ;; one entry per service",
        " :services {",
    ]
    for i in range(200):
        head.append(f"   :svc-{i:04d} {{:name {_string(rng)} :replicas {rng.randint(1, 9)} "
                    f":weights [{' '.join(_scalar(rng) for _ in range(4))}] :owner :team/{rng.choice(_WORDS)}}}")
    head[-1] += "}"
    head.append(" ;; the event log, oldest first")
    parts = ["\n".join(head), "\n :events ["]
    length = sum(map(len, parts))
    index = 0
    while length < size - 400:
        record = ("\n  " if index else "") + _record(rng, index)
        parts.append(record)
        length += len(record)
        index += 1
    parts.append("]\n ;; written last\n :audit {:last-run #inst \"2024-06-01T00:00:00.000-00:00\" "
                 ":checked 4/5 :by :user/ops}}\n")
    return "".join(parts)


def near_end_path(text: str) -> list:
    """A key path into the last event of a generated document: [":events", n, ":payload", ":ratio"]."""
    last = text.rindex("\n  {:id ") + len("\n  {:id ")
    return [":events", int(text[last:text.index("\n", last)]), ":payload", ":ratio"]
