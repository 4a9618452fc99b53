"""The command line, run as a real subprocess."""

import os
import subprocess
import sys

from support import REPO
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call



def cli(*args, env=None, timeout=60):
    environ = {k: v for k, v in os.environ.items() if k not in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "bettong_nb", *args], capture_output=True, text=True,
                          env=environ, cwd=REPO, timeout=timeout)


def test_offline_demo_uses_real_tools_and_prints_usage():
    proc = cli("--offline", "--root", "notebooks/data", "What data is in this folder?")
    assert proc.returncode == 0, proc.stderr
    assert "offline demo model" in proc.stdout
    assert "missions.csv" in proc.stdout and "Mariner 10" in proc.stdout  # read through the filesystem tool
    assert '· list_dir(path=".") → ok' in proc.stderr  # the core's text printer, as in a terminal IPython
    assert '· read_file(path="missions.csv") → ok' in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].strip().startswith("3 requests")


def test_a_missing_key_is_a_one_line_error():
    proc = cli("hello")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: No DeepSeek API key: pass api_key= or set DEEPSEEK_API_KEY"


def test_an_http_error_is_a_one_line_error():
    with LoopbackServer(ChatScript([])) as server:  # an exhausted script answers 500
        proc = cli("hello", "--base-url", server.url, env={"DEEPSEEK_API_KEY": "sk-cli-test-123"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines[-1].startswith("error: ") and "HTTP 500" in lines[-1]
    assert [line.split()[:2] for line in lines[:-1]] == [["↻", "retry"]] * 2, "each retry is shown, then one error"
    assert "sk-cli-test-123" not in proc.stderr


def test_runs_against_a_server_with_root_and_shell(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    script = ChatScript([chat_message(tool_calls=[tool_call("run_shell", {"command": "cat a.txt"})]),
                         chat_message("It says alpha.")])
    with LoopbackServer(script) as server:
        proc = cli("read a.txt", "--root", str(tmp_path), "--shell", "--base-url", server.url, "--model", "m1",
                   "--max-steps", "4", env={"DEEPSEEK_API_KEY": "sk-x"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "It says alpha."
    body = server.requests[1].json()
    assert body["model"] == "m1" and body["messages"][-1]["content"] == "exit 0\nalpha"
    assert {t["function"]["name"] for t in body["tools"]} == {"read_file", "list_dir", "run_shell"}


def test_hitting_the_step_limit_exits_one():
    script = ChatScript([chat_message(tool_calls=[tool_call("list_dir", {})])] * 2)
    with LoopbackServer(script) as server:
        proc = cli("loop", "--root", ".", "--base-url", server.url, "--max-steps", "2", env={"DEEPSEEK_API_KEY": "k"})
    assert proc.returncode == 1 and "no final answer" in proc.stdout
