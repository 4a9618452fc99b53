"""MCP servers as capabilities, against a real server built with the SDK (tests/support/mcp_server.py),
over stdio and over Streamable HTTP on 127.0.0.1, driven by agents on a scripted loopback model."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbclient
import nbformat
import pytest

import bettong_nb
from bettong_nb import Deny
from bettong_nb import capabilities as caps
from bettong_nb.capabilities.mcp import MAX_RESTARTS, McpError
from bettong_nb.core.capability import ToolOutput
from support import TESTS
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

SERVER = str(TESTS / "support" / "mcp_server.py")
SECRET = "zq81-mcp-test-value-4471"  # no well-known token shape: only the capability knows it is secret
TOOLS = ["echo", "slow", "raising", "picture", "show_env", "show_header", "document", "measure", "crash", "add_tool"]


# --- helpers ------------------------------------------------------------------------------------

def entries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def calls(log: Path, tool: str) -> list[dict]:
    return [e for e in entries(log) if e.get("tool") == tool]


def server_pids(log: Path) -> set[int]:
    """Every process the server's log names: each server, its parent (the guard), its grandchild."""
    pids = set()
    for e in entries(log):
        pids.update(e[k] for k in ("pid", "ppid", "grandchild") if k in e)
    return pids - {os.getpid()}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended, whoever reaps it


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p for p in found if alive(p)}


def still_alive(pids: set[int], seconds: float = 5) -> set[int]:
    deadline = time.monotonic() + seconds
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stdio_server(log: Path, *extra: str, **options) -> caps.mcp:
    return caps.mcp(command=[sys.executable, SERVER, str(log), *extra], **options)


def agent_on(model: LoopbackServer, cap, **options):
    return bettong_nb.openai(base_url=model.url, api_key="k", capabilities=[cap], **options)


def tool_results(body: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


# --- fixtures: one stdio server and one HTTP server for the module ------------------------------

@pytest.fixture(scope="module")
def stdio(tmp_path_factory):
    log = tmp_path_factory.mktemp("mcp-stdio") / "calls.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BETTONG_MCP_TEST_TOKEN", "held-by-the-parent-only")  # credential-named: stripped
        mp.setenv("BETTONG_MCP_TEST_PLAIN", "plain-value")
        cap = stdio_server(log, env={"DEEPSEEK_API_KEY": SECRET}, timeout=1)
        cap.tools  # starts it while the variables are set
    yield cap, log
    cap.close()


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    log = tmp_path_factory.mktemp("mcp-http") / "calls.jsonl"
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, str(log), "--http", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the HTTP MCP server did not come up"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", log
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def http_cap(http):
    url, log = http
    cap = caps.mcp(url=url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=1)
    yield cap, log
    cap.close()


# --- an agent calls each tool -------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_agent_calls_each_tool_through_the_normal_path(transport, request):
    cap, log = request.getfixturevalue("stdio" if transport == "stdio" else "http_cap")
    secret_call = (tool_call("show_env", {"name": "DEEPSEEK_API_KEY"}, "c3") if transport == "stdio"
                   else tool_call("show_header", {"name": "authorization"}, "c3"))
    script = ChatScript([
        chat_message(tool_calls=[tool_call("echo", {"text": "hello"}, "c1"), tool_call("picture", {}, "c2"),
                                 secret_call, tool_call("raising", {}, "c4"),
                                 tool_call("slow", {"seconds": 1.4}, "c5")]),
        chat_message("All done."),
    ])
    with LoopbackServer(script) as model:
        result = agent_on(model, cap).run("use every tool")
    first, second = [r.json() for r in model.requests]

    assert [t["function"]["name"] for t in first["tools"]][:len(TOOLS)] == TOOLS  # the server's order
    echo = first["tools"][0]["function"]
    assert echo["description"] == "Repeat the text."
    assert echo["parameters"] == {"type": "object", "properties": {"text": {"title": "Text", "type": "string"}},
                                  "required": ["text"], "title": "echoArguments"}  # as the server gave it
    assert "The test-tools server: echo repeats its text." in first["messages"][0]["content"]

    results = tool_results(second)
    assert results["c1"] == "echo: hello"
    assert results["c2"] == "[1 image]"
    assert results["c3"] in ("DEEPSEEK_API_KEY=[redacted]", "authorization=[redacted]")
    # the capability redacted its own secret before the loop saw it: the tool frame still counts it
    assert [c.redactions for c in result.tool_calls] == [0, 0, 1, 0, 0]
    assert result.tool_frame()["redactions"].tolist() == [0, 0, 1, 0, 0]
    assert results["c4"] == "ERROR: Error executing tool raising: the raising tool refuses, as designed"
    assert results["c5"] == "ERROR: the call to slow took longer than 1 s and was cancelled"
    assert all(SECRET not in r.text for r in model.requests)
    assert [c.status for c in result.tool_calls] == ["ok", "ok", "ok", "error", "error"]
    assert {c.capability for c in result.tool_calls} == {"mcp:test-tools"}  # the id: mcp:<the server's name>
    assert result.output == "All done." and result.done

    time.sleep(0.6)  # past the 1.4 s the slow call asked for: the server was told to stop it
    assert calls(log, "slow")[-1]["args"] == {"seconds": 1.4}
    assert not [e for e in entries(log) if e.get("finished")]


def test_a_denied_call_never_reaches_the_server_and_arun_shares_the_session(stdio):
    cap, log = stdio
    script = ChatScript([
        chat_message(tool_calls=[tool_call("echo", {"text": "denied-call-7731"}, "d1"),
                                 tool_call("show_env", {"name": "BETTONG_MCP_TEST_TOKEN"}, "d2"),
                                 tool_call("show_env", {"name": "BETTONG_MCP_TEST_PLAIN"}, "d3")]),
        chat_message("ok"),
    ])
    approve = lambda req: Deny("not this one") if req.tool == "echo" else True
    with LoopbackServer(script) as model:
        # arun on a loop of its own, while the session was opened for run(): one capability, both loops
        result = asyncio.run(agent_on(model, cap, approve_fn=approve).arun("go"))
    assert [c.status for c in result.tool_calls] == ["denied", "ok", "ok"]
    assert not [c for c in calls(log, "echo") if c["args"]["text"] == "denied-call-7731"]
    results = tool_results(model.requests[1].json())
    assert results["d1"] == "ERROR: echo was not allowed: not this one"
    assert results["d2"] == "BETTONG_MCP_TEST_TOKEN=(unset)"  # credential-named: stripped from the child
    assert results["d3"] == "BETTONG_MCP_TEST_PLAIN=plain-value"


def test_results_images_resources_and_structured_content(http_cap):
    cap, _ = http_cap

    async def both():
        return await cap.call_tool("picture"), await cap.call_tool("document"), await cap.call_tool("measure")

    picture, document, measure = asyncio.run(both())
    assert isinstance(picture, ToolOutput) and picture.text == "[1 image]"
    (image,) = picture.images
    assert image.media_type == "image/png" and image.data.startswith(b"\x89PNG\r\n\x1a\n")
    assert image.data[16:24] == (2).to_bytes(4, "big") * 2  # the server's 2x2 picture
    assert document.text == "Here it is:\nthe notes" and document.redactions == 0
    assert json.loads(measure.text) == {"width": 3, "unit": "cm"}


@pytest.mark.parametrize("era", ["2026 over HTTP", "2025 over stdio"])
def test_a_changed_tool_list_reaches_the_next_run(era, http, tmp_path):
    # 2026: the change comes down a subscriptions/listen stream; 2025: as a plain notification
    cap = caps.mcp(url=http[0]) if era.startswith("2026") else stdio_server(tmp_path / "log", "--legacy")
    script = ChatScript([chat_message(tool_calls=[tool_call("add_tool", {}, "a1")]), chat_message("added"),
                         chat_message(tool_calls=[tool_call("extra", {}, "a2")]), chat_message("done")])
    try:
        with LoopbackServer(script) as model:
            agent = agent_on(model, cap)
            agent.run("add a tool")
            result = agent.run("use it")
        bodies = [r.json() for r in model.requests]
        names = [[t["function"]["name"] for t in b["tools"]] for b in bodies]
        assert "extra" not in names[0] and names[2][-1] == "extra"
        assert result.tool_calls[0].result == "extra"
        assert cap._conn.client.protocol_version.startswith(era[:4])
    finally:
        cap.close()


def test_id_instructions_and_a_tool_subset(http):
    url, _ = http
    mine = caps.mcp(url=url, id="mine", tools=["slow", "echo"], instructions="Mine.")
    typo = caps.mcp(url=url, tools=["echo", "ecco"])
    try:
        assert (mine.id, mine.instructions) == ("mine", "Mine.")
        assert [t.name for t in mine.tools] == ["echo", "slow"]
        with pytest.raises(McpError, match="has no tool ecco; it has: echo, slow"):
            typo.tools
    finally:
        mine.close()
        typo.close()


# --- crashes, restarts, giving up ---------------------------------------------------------------

def test_a_crash_is_an_error_on_that_call_then_the_server_restarts_then_gives_up(tmp_path):
    log = tmp_path / "calls.jsonl"
    cap = stdio_server(log, "--grandchild", id="crashy")
    script = ChatScript([chat_message(tool_calls=[tool_call("crash", {}, "k1")]),
                         chat_message(tool_calls=[tool_call("echo", {"text": "again"}, "k2")]),
                         chat_message("recovered")])
    try:
        with LoopbackServer(script) as model:
            result = agent_on(model, cap).run("crash it")
        crashed, echoed = result.tool_calls
        assert crashed.status == "error" and crashed.result.startswith(
            "ERROR: MCP server 'test-tools' stopped during the call to crash (")
        assert "it restarts on the next call" in crashed.result
        assert crashed.result.endswith("Its last stderr:\ntest server starting")
        assert (echoed.status, echoed.result) == ("ok", "echo: again")
        first, second = [e["pid"] for e in entries(log) if "pid" in e]
        assert first != second and not alive(first)

        async def crash() -> str:
            with pytest.raises(McpError) as err:
                await cap.call_tool("crash")
            return str(err.value)

        errors = [asyncio.run(crash()) for _ in range(MAX_RESTARTS + 1)]  # the first, then 3 restarts
        assert all("restarts on the next call" in e for e in errors[:-1]), errors
        assert "will not be restarted again (3 restarts in a row all ended the same way)" in errors[-1]
        with pytest.raises(McpError, match="gave up on MCP server 'test-tools'.*await start\\(\\) to try again"):
            asyncio.run(cap.call_tool("echo", {"text": "x"}))
        assert len([e for e in entries(log) if "pid" in e]) == 2 + MAX_RESTARTS
        assert asyncio.run(cap.start()) is cap
        assert asyncio.run(cap.call_tool("echo", {"text": "back"})).text == "echo: back"
    finally:
        cap.close()
    assert still_alive(server_pids(log)) == set()


# --- lifecycle: close, a killed parent, a kernel shutdown ---------------------------------------

def test_close_stops_the_server_and_everything_it_started(tmp_path):
    log = tmp_path / "calls.jsonl"
    cap = stdio_server(log, "--grandchild")
    before = descendants(os.getpid())
    asyncio.run(cap.start())
    started = descendants(os.getpid()) - before
    assert server_pids(log) <= started and len(started) == 3  # the guard, the server, its sleep
    cap.close()
    cap.close()  # idempotent
    assert still_alive(started) == set()
    assert "stopped" in repr(cap)

    # used again, it starts anew; closed from another thread, it stops
    assert asyncio.run(cap.call_tool("echo", {"text": "x"})).text == "echo: x"
    again = descendants(os.getpid()) - before
    assert again and not again & started
    closer = threading.Thread(target=cap.close)
    closer.start()
    closer.join(15)
    assert still_alive(again) == set()


def test_a_killed_python_leaves_no_server_behind(tmp_path):
    log = tmp_path / "calls.jsonl"
    holder = tmp_path / "holder.py"
    holder.write_text(
        "import asyncio, sys, time\n"
        "from bettong_nb import capabilities as caps\n"
        f"cap = caps.mcp(command=[sys.executable, {SERVER!r}, {str(log)!r}, '--grandchild'])\n"
        "asyncio.run(cap.start())\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(holder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        pids = descendants(proc.pid)
        assert server_pids(log) <= pids and len(pids) == 3
    finally:
        proc.kill()  # no atexit, no close(): only the guard's parent-death signal is left
        proc.wait()
    assert still_alive(pids) == set()


def test_a_kernel_shutdown_stops_the_server(tmp_path):
    log = tmp_path / "calls.jsonl"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys\n"
        "import bettong_nb\n"
        "from bettong_nb import capabilities as caps\n"
        "from bettong_nb.providers.scripted import Scripted\n"
        f"cap = caps.mcp(command=[sys.executable, {SERVER!r}, {str(log)!r}, '--grandchild'],\n"
        f"               env={{'DEEPSEEK_API_KEY': {SECRET!r}}})\n"
        "await cap.start()\n"
        "print(cap.id, [t.name for t in cap.tools][:2])\n"
        "script = Scripted([[('show_env', {'name': 'DEEPSEEK_API_KEY'})], 'Shown.'])\n"
        "r = await bettong_nb.agent(provider=script, capabilities=[cap]).arun('show the key')\n"
        "print(r.tool_calls[0].result, r.tool_frame()['redactions'].tolist())")])
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(output.text for output in nb.cells[0].outputs)
    # the server's secret, scrubbed by the capability itself, still counts in the tool frame
    assert printed.splitlines() == ["mcp:test-tools ['echo', 'slow']", "DEEPSEEK_API_KEY=[redacted] [1]"]
    pids = server_pids(log)
    assert len(pids) == 3  # the guard, the server, its sleep
    assert still_alive(pids) == set()


# --- construction, secrets, imports -------------------------------------------------------------

@pytest.mark.parametrize("options, error", [
    ({}, "exactly one of command"),
    ({"command": ["x"], "url": "http://127.0.0.1/mcp"}, "exactly one of command"),
    ({"command": "uvx server"}, "not a string"),
    ({"command": []}, "non-empty list"),
    ({"url": "ftp://host/mcp"}, "http:// or https://"),
    ({"url": "http://127.0.0.1/mcp", "env": {"A": "b"}}, "env and cwd are for a stdio server"),
    ({"command": ["x"], "headers": {"A": "b"}}, "headers are for a Streamable HTTP server"),
    ({"command": ["x"], "timeout": 0}, "timeout is in seconds"),
    ({"command": ["x"], "tools": "echo"}, "list of tool names"),
])
def test_bad_options_fail_at_construction(options, error):
    with pytest.raises((ValueError, TypeError), match=error):
        caps.mcp(**options)


def test_headers_and_url_credentials_never_show_in_the_repr_or_errors():
    token, port = "hdr-secret-value-9911", free_port()  # nothing listens there
    cap = caps.mcp(url=f"http://someone:url-password-5521@127.0.0.1:{port}/mcp?x=1",
                   headers={"Authorization": f"Bearer {token}"}, id="remote")
    shown = repr(cap)
    assert shown == f"MCP(url='http://127.0.0.1:{port}/mcp', id='remote', stopped)"
    with pytest.raises(McpError, match="could not be reached: ConnectError") as err:
        cap.tools
    for text in (shown, str(err.value)):
        assert token not in text and "url-password-5521" not in text
    assert asyncio.run(cap.aclose()) is None


def test_a_command_that_does_not_exist_is_a_clear_error(tmp_path):
    cap = caps.mcp(command=["no-such-mcp-server-here"])
    with pytest.raises(McpError, match="(?s)could not start.*cannot run 'no-such-mcp-server-here'"):
        cap.tools
    cap.close()


def test_importing_the_capabilities_does_not_import_the_sdk():
    code = ("import sys\nfrom bettong_nb import capabilities as caps\n"
            "cap = caps.mcp(command=['x'])\nprint(sorted(m for m in ('mcp', 'httpx2', 'anyio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
