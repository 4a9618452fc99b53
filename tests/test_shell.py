"""The shell capability: the seatbelt's corpora, then real bash runs."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

import bettong_nb
from bettong_nb import secrets
from bettong_nb.capabilities._shell_process import Output as _Output
from bettong_nb.capabilities.shell import DEFAULT_DENY, Shell, shell
from bettong_nb.capability import invoke, registry, schemas
from servers import ChatScript, LoopbackServer, chat_message, tool_call

CORPORA = Path(__file__).parent / "corpora"
REFUSED = json.loads((CORPORA / "shell_refused.json").read_text())
ALLOWED = json.loads((CORPORA / "shell_allowed.json").read_text())


def run(cap: Shell, command, **args) -> str:
    """The model's view: through the registry and invoke, redacted, errors as text."""
    return asyncio.run(invoke(registry([cap]), "run_shell", {"command": command, **args}))[0]


def direct(cap: Shell, command, **args) -> str:
    return asyncio.run(cap.run_shell(command, **args))


def marker() -> str:
    """A sleep duration no other process on the machine uses, to find the children by."""
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


def alive(mark: str) -> list[str]:
    """Command lines of live (not zombie) processes that mention ``mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark in cmdline and state not in "ZX":
            found.append(f"{pid}: {cmdline}")
    return found


def settled_alive(mark: str, within: float = 2.0) -> list[str]:
    """Processes still alive after giving SIGKILL's delivery a moment."""
    deadline = time.monotonic() + within
    while (left := alive(mark)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def reference_truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + f"\n... [{len(text) - limit} characters truncated] ...\n" + text[len(text) - (limit - head):]


# --- the seatbelt: policy only, nothing runs ----------------------------------------------------

@pytest.mark.parametrize("case", REFUSED, ids=[c["command"] for c in REFUSED])
def test_catastrophic_commands_are_refused(case):
    assert shell().refusal(case["command"]) == case["reason"]


@pytest.mark.parametrize("case", ALLOWED, ids=[c["command"] for c in ALLOWED])
def test_innocent_look_alikes_are_allowed(case):
    assert shell().refusal(case["command"]) is None, case["why"]


def test_the_corpora_cover_every_default_rule():
    assert len(REFUSED) >= 50 and len(ALLOWED) >= 20
    assert {c["reason"] for c in REFUSED} == {reason for _, reason in DEFAULT_DENY}


def test_a_refusal_reaches_the_model_and_nothing_runs(tmp_path):
    flag = tmp_path / "ran"
    text = run(shell(root=tmp_path), f"touch {flag}; rm -rf /")
    assert text.startswith("ERROR: refused: recursive delete of /")
    assert "not run" in text
    assert not flag.exists()


def test_a_quoted_dangerous_command_is_a_known_false_positive():
    assert run(shell(), 'echo "rm -rf /"').startswith("ERROR: refused: recursive delete of /")
    assert run(shell(deny_defaults=False), 'echo "rm -rf /"') == "exit 0\nrm -rf /"


def test_an_empty_allowlist_refuses_everything():
    cap = shell(allow=[])
    assert cap.refusal("echo hi") == "this shell only runs commands matching its allowlist"
    assert run(cap, "echo hi") == (
        "ERROR: refused: this shell only runs commands matching its allowlist; the command was not run")


def test_an_allowlist_runs_only_matching_commands_and_the_defaults_still_apply():
    cap = shell(allow=[r"^(echo|rm) "])
    assert run(cap, "echo hi") == "exit 0\nhi"
    assert "only runs commands matching its allowlist" in run(cap, "ls /")
    assert cap.refusal("rm -rf /") == "recursive delete of /"
    assert "allowlist" in cap.instructions


def test_deny_rules_come_first_and_a_missing_reason_reads_denied_by_policy():
    cap = shell(deny=[(r"\bgit\s+push\b", "pushing is for humans"), (r"^rm\b", None)])
    assert run(cap, "git push origin main") == "ERROR: refused: pushing is for humans; the command was not run"
    assert cap.refusal("rm -rf /") == "denied by policy"
    assert cap.refusal("rm -rf /tmp/x") == "denied by policy"
    assert cap.refusal("git status") is None


def test_turning_the_defaults_off_keeps_the_users_rules():
    cap = shell(deny_defaults=False, deny=[("mkfs", "no formatting here")])
    assert cap.refusal("rm -rf /") is None
    assert cap.refusal("mkfs.ext4 /dev/sda1") == "no formatting here"
    assert "seatbelt" not in cap.instructions


@pytest.mark.parametrize("options, message", [
    ({"deny": [("(unclosed", "x")]}, "deny regex '(unclosed' does not compile"),
    ({"deny": ["sudo"]}, "deny takes (regex, reason) pairs"),
    ({"allow": ["[bad"]}, "allow regex '[bad' does not compile"),
    ({"allow": "^ls"}, "allow takes a list of regexes"),
    ({"timeout": 0}, "timeout is in seconds and must be positive"),
    ({"timeout": "30"}, "timeout is in seconds"),
    ({"max_output": 0}, "max_output must be a positive number"),
])
def test_bad_options_fail_when_the_capability_is_built(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        shell(**options)


@pytest.mark.parametrize("command", [
    "sudo -u " * 60 + "x",  # exponential if flag values were ambiguous
    "f(){ " * 4000,
    "rm " * 4000,
    "dd " * 4000,
    "'" * 20000,
], ids=["sudo-flags", "nested-functions", "many-rm", "many-dd", "quotes"])
def test_a_long_command_is_checked_quickly(command):
    started = time.perf_counter()
    shell().refusal(command)
    assert time.perf_counter() - started < 1.0


# --- the capability ------------------------------------------------------------------------------

def test_shell_offers_run_shell():
    cap = shell()
    assert cap.id == "shell"
    assert schemas(registry([cap])) == [{
        "name": "run_shell",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."},
                "dir": {"type": "string", "description": "Directory to run in, relative to the shell's root if it "
                        "has one. Default: the root, or the current directory."},
            },
            "required": ["command"],
        },
        "description": "Run a bash command. Returns the exit code on the first line, then the combined stdout "
                       "and stderr. Use it for things the other tools can't do.",
    }]
    assert "stdin closed" in cap.instructions and "killed after 120 s" in cap.instructions
    assert "seatbelt (not a sandbox)" in cap.instructions and 'echo "rm -rf /"' in cap.instructions


def test_the_instructions_do_not_change_between_runs(tmp_path):
    assert shell(root=tmp_path).instructions == shell(root=tmp_path / "other").instructions


def test_the_package_re_exports_the_constructor():
    from bettong_nb import capabilities

    assert capabilities.shell is shell


# --- real runs -------------------------------------------------------------------------------------

def test_shell_returns_exit_code_and_output():
    assert run(shell(), "echo hi") == "exit 0\nhi"


def test_stderr_is_merged_in_order():
    assert run(shell(), "echo one; echo two 1>&2; echo three") == "exit 0\none\ntwo\nthree"


def test_a_failing_command_is_a_result_not_an_error():
    assert run(shell(), "exit 3") == "exit 3\n(no output)"
    text = run(shell(), "ls /bettong-does-not-exist; echo after")
    assert text.startswith("exit 0\n") and "No such file" in text and text.endswith("after")
    assert run(shell(), "false").startswith("exit 1\n")


@pytest.mark.parametrize("command, code", [("kill -TERM $$", 143), ("kill -KILL $$", 137), ("kill -INT $$", 130)])
def test_a_signal_killed_command_reports_128_plus_the_signal(command, code):
    assert run(shell(), command) == f"exit {code}\n(no output)"


def test_stdin_is_closed_so_cat_returns_at_once():
    started = time.monotonic()
    assert run(shell(timeout=10), "cat; read line; echo read=$?") == "exit 0\nread=1"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("command", ["   ", "", None])
def test_a_blank_command_is_refused(command):
    assert run(shell(), command) == "ERROR: command must not be blank"


def test_a_missing_command_is_refused():
    assert asyncio.run(invoke(registry([shell()]), "run_shell", {}))[0] == "ERROR: command must not be blank"


def test_the_command_starts_in_the_root(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "marker.txt").write_text("x")
    cap = shell(root=tmp_path)
    real = os.path.realpath(tmp_path)
    assert run(cap, "pwd") == f"exit 0\n{real}"
    assert run(cap, "pwd", dir=".") == f"exit 0\n{real}"
    assert run(cap, "pwd; ls", dir="sub") == f"exit 0\n{real}/sub\nmarker.txt"
    assert run(cap, "pwd", dir=f"{tmp_path}/sub") == f"exit 0\n{real}/sub"


def test_without_a_root_dir_is_any_directory(tmp_path):
    assert run(shell(), "pwd", dir=str(tmp_path)) == f"exit 0\n{os.path.realpath(tmp_path)}"
    assert run(shell(), "pwd") == f"exit 0\n{os.getcwd()}"


@pytest.mark.parametrize("dir", ["/etc", "..", "../x", "sub/../..", "out", "out/deeper", "{tmp}/rootx"])
def test_dir_may_not_escape_the_root(tmp_path, dir):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "rootx").mkdir()  # shares the root's name as a prefix
    (tmp_path / "outside" / "deeper").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path / "outside")
    flag = tmp_path / "ran"
    text = run(shell(root=root), f"touch {flag}", dir=dir.format(tmp=tmp_path))
    assert text == f"ERROR: {dir.format(tmp=tmp_path)} escapes the allowed root {root}"
    assert not flag.exists()


def test_a_symlink_that_stays_inside_the_root_is_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert run(shell(root=tmp_path), "pwd", dir="link") == f"exit 0\n{os.path.realpath(tmp_path / 'real')}"


def test_a_root_reached_through_a_symlink_confines_to_its_target(tmp_path):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    cap = shell(root=tmp_path / "alias")
    assert run(cap, "pwd", dir="sub") == f"exit 0\n{os.path.realpath(tmp_path / 'real' / 'sub')}"
    assert "escapes the allowed root" in run(cap, "pwd", dir="..")


@pytest.mark.parametrize("dir, message", [("missing", "No such directory: {real}/missing"),
                                          ("file.txt", "No such directory: {real}/file.txt"),
                                          ("", "dir must not be blank"), ("  ", "dir must not be blank")])
def test_a_bad_dir_is_reported(tmp_path, dir, message):
    (tmp_path / "file.txt").write_text("x")
    text = run(shell(root=tmp_path), "pwd", dir=dir)
    assert text == "ERROR: " + message.format(real=os.path.realpath(tmp_path))


def test_secret_named_variables_are_stripped_from_the_child(monkeypatch):
    monkeypatch.setenv("FOO_TOKEN", "tok-1234567890")
    monkeypatch.setenv("BETTONG_PLAIN", "visible")
    env = direct(shell(), "env")
    assert "FOO_TOKEN" not in env
    assert "BETTONG_PLAIN=visible" in env and "PATH=" in env and "HOME=" in env
    with secrets.revealed():  # the tool redacts its own output before cutting it
        assert "FOO_TOKEN=tok-1234567890" in direct(shell(strip_secrets=False), "env")
    assert "tok-1234567890" not in direct(shell(strip_secrets=False), "env")
    assert "tok-1234567890" not in run(shell(strip_secrets=False), "env")


def test_truncated_output_keeps_a_quarter_head_and_the_tail():
    text = run(shell(max_output=500), "seq 1 20000")
    full = "\n".join(str(i) for i in range(1, 20001))
    assert text == "exit 0\n" + reference_truncate(full, 500)
    assert len(text) < 700 and text.startswith("exit 0\n1\n2\n3") and text.endswith("20000")
    assert f"[{len(full) - 500} characters truncated]" in text


def test_output_is_trimmed_before_it_is_truncated():
    assert run(shell(), "printf '\\n\\n   hello  \\n\\n\\n'") == "exit 0\nhello"
    assert run(shell(), "printf '   \\n\\t\\n'") == "exit 0\n(no output)"
    # 40 characters of text between long runs of blanks fit a 40-character limit once trimmed
    command = "printf ' %.0s' {1..5000}; printf 'x%.0s' {1..40}; printf '\\n%.0s' {1..5000}"
    assert run(shell(max_output=40), command) == "exit 0\n" + "x" * 40
    assert run(shell(max_output=300), "seq 1 20000 | tr '\\n' ' '").count("characters truncated") == 1


def test_output_exactly_at_the_limit_is_unchanged():
    assert run(shell(max_output=10), "printf 'exactly10!'") == "exit 0\nexactly10!"
    assert "1 characters truncated" in run(shell(max_output=10), "printf 'exactly11!!'")


def test_the_streaming_trim_and_truncate_match_the_whole_string_version():
    rng = random.Random(7)
    alphabet = ["a", "b", " ", "\n", "\t", "é", "€", "😀", "  \n  "]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        if rng.random() < 0.3:
            text = " " * rng.randrange(300) + text + "\n" * rng.randrange(300)
        limit = rng.randrange(1, 120)
        data = text.encode()
        output, at = _Output(limit), 0
        while at < len(data):  # chunk boundaries fall inside multi-byte characters too
            step = rng.randrange(1, 40)
            output.feed(data[at:at + step])
            at += step
        assert output.value() == reference_truncate(text.strip(), limit), (text, limit)


def test_invalid_utf8_is_replaced_not_fatal():
    assert run(shell(), "printf 'ok \\377\\376 ok'") == "exit 0\nok \ufffd\ufffd ok"


def test_a_flood_of_output_is_read_in_bounded_memory():
    size = 200_000_000
    tracemalloc.start()
    try:
        text = direct(shell(timeout=60), f"head -c {size} /dev/zero | tr '\\0' a")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "exit 0\n" + "a" * 5000 + f"\n... [{size - 20000} characters truncated] ...\n" + "a" * 15000
    assert peak < 8_000_000, f"peak {peak} bytes while reading {size}"


def test_an_endless_flood_times_out_with_bounded_partial_output():
    started = time.monotonic()
    text = run(shell(timeout=0.5, max_output=1000), "yes flood")
    assert time.monotonic() - started < 5
    assert text.startswith("ERROR: command timed out after 0.5 s and was killed\nflood\nflood")
    assert "characters truncated" in text and len(text) < 1200


def test_an_overrunning_command_is_killed_with_its_whole_process_group():
    mark = marker()
    command = (
        f"sleep {mark}1 & "
        f"bash -c 'sleep {mark}2 & wait' & "  # a grandchild
        f"(trap '' TERM; exec sleep {mark}3) & "  # ignores SIGTERM and holds the output pipe
        f"(trap '' TERM; exec sleep {mark}4 >/dev/null 2>&1) & "  # ignores SIGTERM, pipe closed
        f"echo started; sleep {mark}5"
    )
    started = time.monotonic()
    text = run(shell(timeout=0.5), command)
    elapsed = time.monotonic() - started
    assert text == "ERROR: command timed out after 0.5 s and was killed\nstarted"
    assert elapsed < 5
    assert settled_alive(mark) == []


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace():
    mark = marker()
    started = time.monotonic()
    text = run(shell(timeout=0.3), f"trap '' TERM; echo partial; sleep {mark}")
    assert text == "ERROR: command timed out after 0.3 s and was killed\npartial"
    assert 0.3 < time.monotonic() - started < 5
    assert settled_alive(mark) == []


def test_a_timeout_with_no_output_says_only_that():
    assert run(shell(timeout=0.2), "sleep 5") == "ERROR: command timed out after 0.2 s and was killed\n"


def test_background_jobs_end_when_the_command_returns():
    mark = marker()
    started = time.monotonic()
    assert run(shell(timeout=30), f"sleep {mark} & echo started") == "exit 0\nstarted"
    assert time.monotonic() - started < 5, "a background job holding the pipe must not keep the call waiting"
    assert settled_alive(mark) == []


def test_only_a_process_that_detaches_itself_outlives_the_call():
    mark = marker()
    started = time.monotonic()
    try:
        assert run(shell(timeout=30), f"setsid sleep {mark} & sleep 0.2; echo started") == "exit 0\nstarted"
        assert time.monotonic() - started < 5, "a detached process holding the pipe must not keep the call waiting"
        assert len(alive(mark)) == 1
    finally:
        for line in alive(mark):
            os.kill(int(line.split(":")[0]), 9)


def test_a_cancelled_call_kills_the_command():
    mark = marker()

    async def cancel_midway():
        task = asyncio.ensure_future(shell().run_shell(f"sleep {mark} & sleep {mark}"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert settled_alive(mark) == []


def test_the_handler_does_not_block_the_event_loop():
    async def both():
        cap = shell()
        return await asyncio.gather(cap.run_shell("sleep 0.4; echo a"), cap.run_shell("sleep 0.4; echo b"))

    started = time.monotonic()
    assert asyncio.run(both()) == ["exit 0\na", "exit 0\nb"]
    assert time.monotonic() - started < 0.75


def test_options_are_carried_into_the_tool(tmp_path):
    assert run(shell(timeout=0.4), "sleep 5").startswith("ERROR: command timed out after 0.4 s")
    assert len(run(shell(max_output=300), "seq 1 20000")) < 500
    assert os.path.realpath(tmp_path) in run(shell(root=tmp_path), "pwd", dir=".")
    assert "escapes the allowed root" in run(shell(root=tmp_path), "pwd", dir="/etc")


# --- through the agent loop ------------------------------------------------------------------------

def test_a_model_runs_commands_through_the_loop(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    script = ChatScript([
        chat_message(tool_calls=[tool_call("run_shell", {"command": "cat a.txt; exit 4"}, id="c1"),
                                 tool_call("run_shell", {"command": "rm -rf /"}, id="c2")]),
        chat_message("done"),
    ])
    with LoopbackServer(script) as server:
        result = bettong_nb.openai(base_url=server.url, api_key="sk-test",
                                   capabilities=[shell(root=tmp_path)]).run("look")
    assert result.output == "done"
    second = server.requests[1].json()
    results = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert results == {"c1": "exit 4\nalpha",
                       "c2": "ERROR: refused: recursive delete of /; the command was not run"}
    assert "stdin closed" in second["messages"][0]["content"]
    assert [(c.tool, c.capability) for c in result.tool_calls] == [("run_shell", "shell")] * 2
