"""Nothing secret travels or leaks through an error: every provider, capability and agent built
with keys and credentialed URLs pickles without them (in any spelling); each MCP failure path
with a secret in the server's env= says nothing of it, tested on the capability itself and on
what a loopback model server received; the child environment loses every credential-bearing
value, whatever its name."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import sys
from urllib.parse import quote, quote_plus

import cloudpickle
import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.capabilities.mcp import McpError
from bettong_nb.core.capability import ToolError
from bettong_nb.providers.scripted import Scripted
from bettong_nb.safety import secrets
from support import TESTS
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

PASSWORD = "pw-Qx7Lr2Zt9Kc4"     # no token shape, in no environment: only where it sits says it is one
QUERY_KEY = "qk-Vb8Nm3Hj6Ff1"
KEY = "key-Wd5Ys0Pe2Gu8Ai"
SERVER = str(TESTS / "support" / "mcp_server.py")


def spellings(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, quote(secret, safe="").encode(), quote_plus(secret).encode(), raw.hex().encode(),
            *(base64.b64encode(b"x" * shift + raw)[4:-4] for shift in range(3))]


def assert_nothing_of(data: bytes, *values: str) -> None:
    for value in values:
        assert not any(form in data for form in spellings(value)), f"{value} travels in the pickle"


URL = f"http://user:{PASSWORD}@127.0.0.1:9/v1?api_key={QUERY_KEY}"

MADE = {
    "openai": lambda: bettong_nb.openai(api_key=KEY, base_url=URL),
    "deepseek": lambda: bettong_nb.deepseek(api_key=KEY, base_url=URL),
    "anthropic": lambda: bettong_nb.anthropic(api_key=KEY, base_url=URL),
    "ollama": lambda: bettong_nb.ollama(base_url=URL),
    "openai provider": lambda: bettong_nb.openai(api_key=KEY, base_url=URL).provider,
    "brave": lambda: caps.brave(api_key=KEY, base_url=URL),
    "tavily": lambda: caps.tavily(api_key=KEY, base_url=URL),
    "serper": lambda: caps.serper(api_key=KEY, base_url=URL),
    "google": lambda: caps.google(api_key=KEY, cx="cx-1", base_url=URL),
    "mcp stdio env": lambda: caps.mcp(command=["server"], env={"DSN": f"postgres://u:{PASSWORD}@db/x",
                                                             "CONFIG": f"https://h/?token={QUERY_KEY}",
                                                             "SERVICE_KEY": KEY}),
    "mcp url": lambda: caps.mcp(url=URL, id="remote"),
    "agent with all": lambda: bettong_nb.openai(api_key=KEY, base_url=URL, capabilities=[
        caps.brave(api_key=KEY, base_url=URL), caps.mcp(url=URL, id="remote")]),
}


@pytest.mark.parametrize("name", list(MADE))
def test_no_key_or_url_credential_enters_a_pickle(name, monkeypatch):
    for variable in ("BRAVE_API_KEY", "TAVILY_API_KEY", "SERPER_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(variable, "the-workers-own-key")  # what an unpickled source reads
    made = MADE[name]()
    for dump in (pickle.dumps, cloudpickle.dumps):
        assert_nothing_of(dump(made), PASSWORD, QUERY_KEY, KEY)
    # unpickled where the URL is not in the environment: a clear error that says how
    data = pickle.dumps(made)
    if name == "mcp stdio env":  # its env= values come back by name, from the worker's environment
        monkeypatch.setenv("DSN", "postgres://u:the-workers@db/x")
        assert pickle.loads(data).env == {"DSN": "postgres://u:the-workers@db/x"}
        return
    with pytest.raises(RuntimeError, match=r"held credentials.*LocalCluster\(env="):
        pickle.loads(data)
    # where a variable holds it (any name), the whole URL comes back
    monkeypatch.setenv("PROXY_URL", URL)
    copy = pickle.loads(data)
    urls = [getattr(getattr(copy, "options", None), "base_url", None), getattr(copy, "base_url", None),
            getattr(copy, "url", None), (getattr(copy, "made_by", None) or (None, {}))[1].get("base_url")]
    assert URL in urls, urls


def test_another_secret_in_a_setting_refuses_to_travel():
    made = caps.mcp(command=["server", "--token", "ghp_" + "a1" * 18])
    with pytest.raises(TypeError, match="holds a credential"):
        pickle.dumps(made)


# --- the environment a child gets ---------------------------------------------------------------

STRIPPED = {  # values under plain names that hold a credential somewhere
    "DATABASE_URL": f"postgres://app:{PASSWORD}@db/x",
    "SEARCH_URL": f"https://h/search?q=1&api_key={QUERY_KEY}",
    "FEED_URL": f"https://h/feed?token={QUERY_KEY}",
    "CALLBACK": f"https://h/cb#access_token={QUERY_KEY}&state=1",
    "JDBC": f"jdbc:sqlserver://db:1433;user=app;password={PASSWORD}",
    "PGCONN": f"host=db user=app password={PASSWORD}",
    "ENCODED": f"https://h/x?api%5Fkey={QUERY_KEY}",
    "UPPER": f"https://h/x?API_KEY={QUERY_KEY}",
    "LONE_TOKEN": f"https://{KEY}@git.example/repo.git",
    "SHAPED": "ghp_" + "b2" * 18,
}
KEPT = {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "PAGE_URL": "https://h/x?page=2&sort=asc",
        "GIT_URL": "git@github.example:me/repo.git", "LANG": "C.UTF-8", "EQUATION": "x=1 y=2"}


def test_the_child_environment_loses_every_credential_bearing_value():
    env = secrets.stripped_env({**STRIPPED, **KEPT})
    assert env == KEPT


# --- MCP: every failure path, with a secret in the server's env= -------------------------------

ENV = {"DSN": f"postgres://app:{PASSWORD}@db/x", "CONFIG": f"https://h/?token={QUERY_KEY}", "SERVICE_KEY": KEY}
PRINT_ENV = "import os, sys; print(os.environ['DSN'], os.environ['CONFIG'], os.environ['SERVICE_KEY'], "
FAILING = {
    "hangs at start": (PRINT_ENV + "file=sys.stderr, flush=True); import time; time.sleep(60)", "did not start"),
    "crashes at start": (PRINT_ENV + "file=sys.stderr, flush=True); sys.exit(3)", "could not start"),
    "bad handshake": (PRINT_ENV + "flush=True); print(os.environ['DSN'], file=sys.stderr, flush=True); "
                      "import time; time.sleep(60)", "did not start|could not start"),
}


def _text_of(error: BaseException) -> str:
    return f"{error} {error!r}"


def _assert_clean(text: str) -> None:
    for value in (PASSWORD, QUERY_KEY, KEY):
        assert not any(form.decode() in text for form in spellings(value)), f"{value} in: {text}"


@pytest.mark.parametrize("name", list(FAILING))
def test_a_server_that_fails_to_start_says_nothing_of_its_env(name):
    code, says = FAILING[name]
    # long enough for the child to print its env (the secret the error must not repeat), no longer
    cap = caps.mcp(command=[sys.executable, "-c", code], env=ENV, start_timeout=1.2, id="failing")
    try:
        with pytest.raises(McpError, match=says) as caught:
            asyncio.run(cap.start())
        _assert_clean(_text_of(caught.value))
        if name != "bad handshake":
            assert "Its last stderr" in str(caught.value) and "[redacted]" in str(caught.value)
        # the same failure reached through a run: the model server sees nothing of it either
        with LoopbackServer(ChatScript([chat_message("ok")])) as model:
            agent = bettong_nb.openai(base_url=model.url, api_key="k", model="m", capabilities=[cap])
            with pytest.raises(Exception) as run_error:
                agent.run("go")
            _assert_clean(_text_of(run_error.value))
            _assert_clean(" ".join(r.text for r in model.requests))
    finally:
        cap.close()


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    log = tmp_path_factory.mktemp("mcp-secret") / "calls.jsonl"
    cap = caps.mcp(command=[sys.executable, SERVER, str(log)], env=ENV, timeout=1, id="held")
    yield cap
    cap.close()


@pytest.mark.parametrize("variable", list(ENV))
def test_a_direct_call_returns_no_secret_without_the_loop(running, variable):
    # the capability's own scrub, with no agent loop redacting after it
    output = asyncio.run(running.call_tool("show_env", {"name": variable}))
    text = getattr(output, "text", output)
    assert text.startswith(f"{variable}=") and "[redacted]" in text and getattr(output, "redactions", 1) >= 1
    _assert_clean(text)


def test_a_tool_error_and_a_timeout_say_nothing_of_the_env(running):
    with pytest.raises(TimeoutError) as timed_out:
        asyncio.run(running.call_tool("slow", {"seconds": 5}))
    _assert_clean(_text_of(timed_out.value))
    calls = [tool_call("show_env", {"name": name}, id=f"c{i}") for i, name in enumerate(ENV)]
    with LoopbackServer(ChatScript([chat_message(tool_calls=calls), chat_message("done")])) as model:
        agent = bettong_nb.openai(base_url=model.url, api_key="k", model="m", capabilities=[running])
        assert agent.run("show them").output == "done"
        sent = json.dumps([r.json() for r in model.requests])
    assert sent.count("[redacted]") >= 3
    _assert_clean(sent)


def test_an_mcp_server_naming_itself_like_a_capability_gets_its_own_id(tmp_path):
    cap = caps.mcp(command=[sys.executable, SERVER, str(tmp_path / "log")])
    try:
        assert cap.id.startswith("mcp:"), cap.id  # never the server's own name alone
    finally:
        cap.close()
    twins = [caps.filesystem(root=str(tmp_path)), {"id": "filesystem", "tools": []}]
    with pytest.raises(ToolError, match="Two capabilities have the id 'filesystem'"):
        bettong_nb.agent(provider=Scripted(["x"]), capabilities=twins).run("x")


# --- search sources: their HTTP failures, on the capability itself ------------------------------

@pytest.mark.parametrize("source", ["brave", "tavily", "serper", "google"])
@pytest.mark.parametrize("status", [401, 403, 429, 500])
def test_a_search_sources_own_error_holds_no_key_or_url_credential(source, status):
    from support.servers import Reply

    def echo(request):  # a hostile or careless API: the key and the URL's password come back
        body = json.dumps({"error": {"message": f"bad key {KEY} for {request.path} {PASSWORD}"}})
        return Reply(status, body.encode(), {"Content-Type": "application/json", "Retry-After": "0"})

    with LoopbackServer(echo) as api:
        url = api.url.replace("http://", f"http://user:{PASSWORD}@") + f"/x?api_key={QUERY_KEY}"
        made = {"brave": lambda: caps.brave(api_key=KEY, base_url=url),
                "tavily": lambda: caps.tavily(api_key=KEY, base_url=url),
                "serper": lambda: caps.serper(api_key=KEY, base_url=url),
                "google": lambda: caps.google(api_key=KEY, cx="cx-1", base_url=url)}[source]()
        with pytest.raises(Exception) as caught:
            asyncio.run(made.tools[0].handler(query="q"))
    _assert_clean(_text_of(caught.value))


# --- every built-in capability's failures, with a secret in reach -------------------------------

SECRET_ENV = "zt-Rk4Wq9Lm2Xc7Vb5"  # only its variable's name makes it a secret


def _failing_calls(tmp_path):
    (tmp_path / "note.txt").write_text(f"the value is {SECRET_ENV}\n")
    (tmp_path / "bad.csv").write_text(f'a,b\n1,"{SECRET_ENV}\n')
    (tmp_path / "bad.edn").write_text(f'{{:k "{SECRET_ENV}" :unclosed [')
    return [
        (caps.python({}, require_approval=False), "run_python",
         {"code": "import os\nraise ValueError('boom ' + os.environ['SVC_TOKEN'])"}),
        (caps.shell(root=str(tmp_path)), "run_shell", {"command": "cat note.txt >&2; exit 3"}),
        (caps.filesystem(root=str(tmp_path)), "read_file", {"path": f"missing-{SECRET_ENV}.txt"}),
        (caps.edn(root=str(tmp_path)), "read_edn", {"path": "bad.edn"}),
        (caps.duckdb(root=str(tmp_path)), "query_data", {"sql": f"SELECT * FROM read_csv('bad.csv') WHERE b = '{SECRET_ENV}' AND x"}),
        (caps.namespace({"cfg": 1}), "describe_variable", {"name": SECRET_ENV}),
    ]


def test_every_capabilitys_failure_reaches_neither_the_model_nor_the_person_with_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("SVC_TOKEN", SECRET_ENV)
    for capability, tool, args in _failing_calls(tmp_path):
        script = [chat_message(tool_calls=[tool_call(tool, args, id="c1")]), chat_message("done")]
        with LoopbackServer(ChatScript(script)) as model:
            agent = bettong_nb.openai(base_url=model.url, api_key="k", model="m", capabilities=[capability],
                                      approve_fn=lambda request: True)
            result = agent.run("try it")
            # what went back to the model: the tool results (its own call may hold what it wrote)
            received = [json.dumps(m) for r in model.requests for m in r.json()["messages"] if m["role"] == "tool"]
        call = result.tool_calls[0]
        assert call.status == "error" or any(w in str(call.result) for w in ("exit", "exception")), \
            (tool, call.status, call.result)  # python and the shell report failures as data
        assert "[redacted]" in str(call.result) or tool in ("edn", "read_edn", "query_data"), call.result
        shown = f"{call.result} {call.traceback} {call.why() if call.status == 'denied' else ''}"
        assert received, tool
        for text in (shown, *received):
            assert SECRET_ENV not in text, (tool, text)
        capability_close = getattr(capability, "close", None)
        if capability_close:
            capability_close()
