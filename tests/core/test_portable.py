"""Agents, providers and capabilities pickle to their settings (for Dask workers): never a key,
and they work again where they are unpickled, reading the key from that environment."""

import asyncio
import base64
import json
import pickle
import sys
from dataclasses import replace

import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
from support import TESTS
from support.servers import LoopbackServer, Reply, chat_message

KEY = "sk-test-4f9a1c7e2b8d6a5f3e0c9b7a"
MCP_SERVER = str(TESTS / "support" / "mcp_server.py")


def assert_no_key(data: bytes, key: str = KEY) -> None:
    raw = key.encode()
    forms = [raw] + [base64.b64encode(b"x" * shift + raw)[4:-4] for shift in range(3)]
    assert not any(form in data for form in forms), "the key (or its base64) is in the pickle"


@pytest.mark.parametrize("preset", ["deepseek", "openai", "anthropic"])
def test_an_explicit_api_key_is_never_pickled(preset):
    agent = getattr(bettong_nb, preset)(api_key=KEY)
    data = pickle.dumps(agent)
    assert_no_key(data)
    import cloudpickle  # what dask ships a task graph with

    assert_no_key(cloudpickle.dumps(agent))
    assert pickle.loads(data).provider._known_key() != KEY


def test_an_unpickled_agent_reads_the_key_from_its_own_environment(monkeypatch):
    seen = []

    def handle(request):
        seen.append(request.headers.get("authorization"))
        return Reply.json(chat_message("hello"))

    with LoopbackServer(handle) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key=KEY, max_retries=0, timeout=7)
        data = pickle.dumps(agent)
        monkeypatch.setenv("OPENAI_API_KEY", "key-of-the-worker")
        copy = pickle.loads(data)
        assert copy.run("hi").output == "hello"
        monkeypatch.delenv("OPENAI_API_KEY")
        with pytest.raises(bettong_nb.ProviderError, match="set OPENAI_API_KEY"):
            pickle.loads(data).run("hi")
    assert seen == ["Bearer key-of-the-worker"]
    assert copy.provider.transport.timeout.read == 7 and copy.provider.transport.max_retries == 0


@pytest.mark.parametrize("make", [
    lambda url: bettong_nb.anthropic(base_url=url, model="claude-x", max_retries=1),
    lambda url: bettong_nb.ollama(base_url=url, model="qwen3:8b"),
    lambda url: bettong_nb.agent(provider=Scripted(default="scripted answer"), max_steps=3),
    lambda url: bettong_nb.offline(),
], ids=["anthropic", "ollama", "scripted", "offline"])
def test_every_provider_survives_a_round_trip(make):
    agent = make("http://127.0.0.1:9")
    copy = pickle.loads(pickle.dumps(agent))
    assert type(copy.provider) is type(agent.provider)
    assert getattr(copy.provider, "_settings", None) == getattr(agent.provider, "_settings", None)
    assert replace(copy.options, provider=None) == replace(agent.options, provider=None)
    if isinstance(agent.provider, (Scripted, type(bettong_nb.offline().provider))):
        assert copy.run("hello").done


def test_capabilities_pickle_to_their_settings_and_work_again(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("kept on disk")
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,3\nsouth,4\n")
    monkeypatch.chdir(tmp_path)
    fs, sql = caps.filesystem(root="."), caps.duckdb(root=".")
    shell = caps.shell(root=str(tmp_path), timeout=5)
    fs2, sql2, shell2 = (pickle.loads(pickle.dumps(c)) for c in (fs, sql, shell))
    monkeypatch.chdir("/")  # the copies are pinned where the originals were
    assert fs2.read_file("notes.txt") == "kept on disk"
    assert "7" in asyncio.run(sql2.query_data("SELECT sum(amount) AS total FROM 'sales.csv'")).text
    assert sql2._con is not sql._con
    assert "kept on disk" in asyncio.run(shell2.run_shell("cat notes.txt"))


def test_an_mcp_capability_travels_without_its_secrets(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    cap = caps.mcp(command=[sys.executable, MCP_SERVER, str(log)], env={"BETTONG_TRAVEL_TOKEN": KEY, "MODE": "plain"})
    data = pickle.dumps(cap)
    assert_no_key(data)
    monkeypatch.setenv("BETTONG_TRAVEL_TOKEN", "value-of-the-worker")
    copy = pickle.loads(data)
    assert copy.env == {"MODE": "plain", "BETTONG_TRAVEL_TOKEN": "value-of-the-worker"}
    try:
        shown = asyncio.run(copy.call_tool("show_env", {"name": "BETTONG_TRAVEL_TOKEN"}))
        # set, redacted as a secret by the capability itself (not only by the loop after it), and counted
        assert "(unset)" not in shown.text and KEY not in shown.text and shown.redactions == 1
        assert asyncio.run(copy.call_tool("show_env", {"name": "MODE"})).text == "MODE=plain"
    finally:
        copy.close()
    assert [json.loads(line)["tool"] for line in log.read_text().splitlines() if "tool" in line] == ["show_env"] * 2
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(caps.mcp(url="http://127.0.0.1:9/mcp", headers={"Authorization": f"Bearer {KEY}"}))
