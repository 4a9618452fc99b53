"""The namespace capability never shows a credential: the hostile namespaces of
tests/corpora/namespaces_hostile.jsonl, looked at directly and through an agent whose model is
a server on 127.0.0.1 (the assertions are on the bytes it received).

Each case is Python that builds a namespace around ``{S}``, a secret. Every case runs with a
long secret; cases marked ``"short": true`` (the secret sits under a credential name, so it is
hidden by structure, not by redaction) also run with one shorter than MIN_SECRET_LENGTH."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import types

import numpy as np
import pandas as pd
import pytest
from support import REPO, TESTS
from support.servers import ChatScript, LoopbackServer, Reply, chat_message, tool_call
from support.environment import quiet_environment  # noqa: F401  (autouse: no credential of this machine takes part)

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.core.capability import invoke, registry

CASES = [json.loads(line) for line in
         (TESTS / "corpora" / "namespaces_hostile.jsonl").read_text().splitlines() if line]
SECRETS = {"long": "Zq81kPWm42sRTj77dAx0", "short": "hu7!Zq"}
VARIANTS = [(case, length) for case in CASES for length in ("long", "short") if length == "long" or case["short"]]


def build(case: dict, secret: str, monkeypatch) -> dict:
    for name, value in case.get("env", {}).items():
        monkeypatch.setenv(name, value.replace("{S}", secret))
    ns = {"pd": pd, "np": np, "os": os, "collections": collections, "dataclasses": dataclasses, "types": types}
    exec(case["setup"].replace("{S}", secret), ns)
    return ns


def call(cap, tool: str, **args) -> str:
    return asyncio.run(invoke(registry([cap]), tool, args))[0]


def views(ns: dict) -> dict[str, str]:
    """Everything the capability says about ``ns``: the listing and each variable described."""
    cap = caps.namespace(ns)
    listing = call(cap, "list_variables")
    names = [line.split(":", 1)[0] for line in listing.splitlines()]
    return {"": listing, **{name: call(cap, "describe_variable", name=name, rows=10) for name in names}}


def test_the_corpus_is_big_and_varied():
    assert len(CASES) >= 60 and len({c["id"] for c in CASES}) == len(CASES)
    assert sum(c["short"] for c in CASES) >= 40 and any("env" in c for c in CASES)


@pytest.mark.parametrize("case, length", VARIANTS, ids=[f"{c['id']}-{n}" for c, n in VARIANTS])
def test_hostile_namespace(case, length, monkeypatch):
    secret = SECRETS[length]
    ns = build(case, secret, monkeypatch)
    shown = views(ns)
    assert len(shown) > 1, shown[""]
    for name, text in shown.items():
        assert secret not in text, f"{name!r} shows the secret:\n{text}"
        assert "ERROR" not in text
    for name, expected in case.get("shows", {}).items():
        for part in expected:
            assert part in shown[name], f"{name!r} should show {part!r}:\n{shown[name]}"
    if "Lazy" in ns:
        assert ns["Lazy"].calls == 0  # a property is never read


@pytest.fixture(scope="module")
def model_server():
    with LoopbackServer(lambda request: Reply.json({"error": {"message": "no script"}}, status=500)) as server:
        yield server


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hostile_namespace_at_the_model(case, monkeypatch, model_server):
    secret = SECRETS["short" if case["short"] else "long"]
    ns = build(case, secret, monkeypatch)
    names = [n for n in views(ns) if n]
    calls = [tool_call("list_variables", {})] + [tool_call("describe_variable", {"name": n}) for n in names]
    model_server.requests.clear()
    model_server.handler = ChatScript([chat_message(tool_calls=calls), chat_message("done")])
    result = bettong_nb.openai(base_url=model_server.url, api_key="sk-test-namespace-key-0001",
                               capabilities=[caps.namespace(ns)]).run("look")
    assert result.output == "done" and len(model_server.requests) == 2
    sent = model_server.requests[1].body.decode("utf-8")
    tool_texts = [m["content"] for m in model_server.requests[1].json()["messages"] if m["role"] == "tool"]
    assert len(tool_texts) == len(calls) and not any(t.startswith("ERROR") for t in tool_texts)
    assert secret not in sent and all(secret not in t for t in tool_texts)


def test_nothing_in_the_namespace_is_changed(monkeypatch):
    ns = build(next(c for c in CASES if c["id"] == "frame-password-column"), SECRETS["long"], monkeypatch)
    before = ns["df"].copy()
    views(ns)
    pd.testing.assert_frame_equal(ns["df"], before)


def test_a_huge_namespace_is_looked_at():
    # How long it takes is bench W5's namespace row (python -m bench).
    ns = {f"v{i}": [{"password": f"pw-{i}-{j}-long-enough", "n": j} for j in range(200)] for i in range(200)}
    ns["target"] = "ordinary"
    cap = caps.namespace(ns)
    assert call(cap, "describe_variable", name="target") == "target: str of 8 characters:\nordinary"


def test_an_ordinary_frame_is_described_exactly_as_pandas_describes_it():
    df = pd.read_csv(REPO / "notebooks" / "data" / "missions.csv")
    text = call(caps.namespace({"df": df}, max_chars=100_000), "describe_variable", name="df")
    assert f"head(5):\n{df.head(5).to_string()}\n" in text
    assert f"describe():\n{df.describe(include='all').to_string()}\n" in text
