"""The shell capability: the policy's corpora (the seatbelt, the splitter, the allowlist), then
real bash runs: processes that must not outlive a call, secrets a command must not reach, output."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import re
import string
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

import bettong_nb
from bettong_nb import secrets
from bettong_nb.capabilities.shell.process import Output as _Output
from bettong_nb.capabilities.shell.process import _cgroups
from bettong_nb.capabilities.shell.reading import read
from bettong_nb.capabilities.shell.capability import DEFAULT_DENY, Shell, isolation, shell
from bettong_nb.core.capability import invoke, registry, schemas
from support import REPO, TESTS
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call
from support.tools import model_reads

CORPORA = TESTS / "corpora"
REFUSED = json.loads((CORPORA / "shell_refused.json").read_text())
ALLOWED = json.loads((CORPORA / "shell_allowed.json").read_text())
SPLIT = json.loads((CORPORA / "shell_split.json").read_text())
UNREADABLE = json.loads((CORPORA / "shell_unreadable.json").read_text())
ALLOWLIST = json.loads((CORPORA / "shell_allowlist.json").read_text())
HOME = os.path.expanduser("~")


def run(cap: Shell, command, **args) -> str:
    """The model's view: through the registry and invoke, redacted, errors as text."""
    return model_reads(cap, "run_shell", command=command, **args)


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

def ids(cases, key="command"):
    return [repr(c[key])[:80] for c in cases]


@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_catastrophic_commands_are_refused(case):
    assert shell().refusal(case["command"].replace("<HOME>", HOME)) == case["reason"]


@pytest.mark.parametrize("case", ALLOWED, ids=ids(ALLOWED))
def test_innocent_look_alikes_are_allowed(case):
    assert shell().refusal(case["command"].replace("<HOME>", HOME)) is None, case["why"]


def test_the_corpora_cover_every_default_rule():
    assert len(REFUSED) >= 500 and len(ALLOWED) >= 200
    assert {c["reason"] for c in REFUSED} == {reason for _, reason in DEFAULT_DENY}


@pytest.mark.parametrize("case", SPLIT, ids=ids(SPLIT))
def test_the_splitter_finds_every_command_a_line_runs(case):
    assert [call.text for call in read(case["command"], cwd="/tmp", home=HOME).calls if call.runs] == case["runs"]


@pytest.mark.parametrize("case", UNREADABLE, ids=ids(UNREADABLE))
def test_what_the_policy_cannot_read_is_refused(case):
    reason = shell().refusal(case["command"])
    assert reason.startswith("the policy cannot read this command ("), reason
    assert shell(allow=[".*"]).refusal(case["command"]) == reason
    assert run(shell(), case["command"]) == f"ERROR: refused: {reason}; the command was not run"


@pytest.mark.parametrize("case", ALLOWLIST, ids=ids(ALLOWLIST))
def test_the_allowlist_is_a_boundary(tmp_path, case):
    """Every command a line runs must be allowed; what is refused does not run at all."""
    cap = shell(root=tmp_path, allow=case["allow"], timeout=10)
    assert (cap.refusal(case["command"]) is not None) == case["refused"], cap.refusal(case["command"])
    text = run(cap, case["command"])
    created = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran-"))
    if case["refused"]:
        assert text.startswith("ERROR: refused: "), text
        assert created == []
    else:
        assert text.startswith("exit "), text
        assert created == sorted(case["creates"])


def test_the_allowlist_names_the_command_it_does_not_match():
    cap = shell(allow=[r"^git (status|log|diff)\b"])
    assert cap.refusal("git status; cat /etc/passwd") == (
        "this shell only runs commands matching its allowlist ('cat /etc/passwd' does not match)")
    assert cap.refusal("cat /etc/passwd") == "this shell only runs commands matching its allowlist"
    assert cap.refusal("git status; curl x | sh") == (
        "this shell only runs commands matching its allowlist ('curl x' does not match)")
    assert shell(allow=[r"^bash -c\b"]).refusal('bash -c "$CMD"') == (
        '`"$CMD"` holds a parameter expansion, `$CMD`; with an allow list only static words run')
    assert shell(allow=[r"^bash\b", r"^git\b"]).refusal("git log | bash") == (
        "this shell only runs commands matching its allowlist, and what bash reads from the pipe cannot be checked")


def test_a_refusal_is_a_public_dry_run_that_runs_nothing(tmp_path):
    flag = tmp_path / "ran"
    cap = shell(root=tmp_path, allow=[r"^touch\b"])
    assert cap.refusal(f"touch {flag}") is None
    assert cap.refusal(f"touch {flag}; reboot") == (
        "this shell only runs commands matching its allowlist ('reboot' does not match)")
    assert not flag.exists()
    readme = (REPO / "README.md").read_text()
    assert ".refusal(" in readme and "refusal(command" in readme


@pytest.mark.parametrize("root, dir, command, reason", [
    ("/", None, "rm -rf *", "recursive delete of /"),
    ("/", None, "rm -rf .", "recursive delete of /"),
    ("/", "usr", "rm -rf ./*", "recursive delete of /"),
    ("/", "usr", "rm -rf ..", "recursive delete of /"),
    ("/", "usr", "rm -rf local", None),
    ("{tmp}", None, "rm -rf *", None),
    ("{tmp}", None, "rm -rf " + "../" * 40, "recursive delete of /"),
    ("{tmp}", None, "cd / && rm -rf *", "recursive delete of /"),
    ("{tmp}", None, "cd /tmp && rm -rf *", None),
    ("{tmp}", None, "cd \"$HOME\" && rm -rf *", "recursive delete of /"),
    ("{tmp}", None, "cd $UNKNOWN && rm -rf *", None),
    ("{tmp}", None, "chmod 777 .", None),
    ("/etc", None, "chmod 777 .", "making / world-writable"),
    ("/dev", None, "cat img > sda", "writing straight to a device"),
])
def test_relative_paths_are_read_from_the_directory_the_command_runs_in(tmp_path, root, dir, command, reason):
    assert shell(root=root.format(tmp=tmp_path)).refusal(command, dir=dir) == reason


def test_the_home_directory_is_protected_however_it_is_written(monkeypatch, tmp_path):
    home = tmp_path / "people" / "alice"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    cap = shell()
    for spelling in [str(home), f"{home}/", f"{home}/.", f"{home}/*", "~", "~/", "$HOME", "${HOME}", '"$HOME"/*',
                     f"{tmp_path}/people/alice/../alice", "~/.*"]:
        assert cap.refusal(f"rm -rf {spelling}") == "recursive delete of /", spelling
    assert cap.refusal(f"rm -rf {tmp_path}/people") is None
    assert cap.refusal("rm -rf ~/build") is None


HOME_OPERATORS = json.loads((CORPORA / "shell_home.json").read_text())


@pytest.mark.parametrize("command, reason", [*HOME_OPERATORS["refused"], *((c, None) for c, _ in HOME_OPERATORS["allowed"])],
                         ids=lambda v: repr(v)[:60])
def test_bashs_operators_on_the_home_directory_are_evaluated(monkeypatch, tmp_path, command, reason):
    monkeypatch.setenv("HOME", HOME_OPERATORS["home"])
    assert shell(root=tmp_path).refusal(command) == reason


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


LONG = {
    "sudo-flags": "sudo -u " * 60 + "x",  # exponential if flag values were ambiguous
    "nested-functions": "f(){ " * 4000,
    "many-rm": "rm " * 4000,
    "many-dd": "dd " * 4000,
    "quotes": "'" * 20000,
    "nested-substitutions": "$(" * 5000,
    "nested-parameters": "${" * 5000,
    "nested-arithmetic": "echo $(( " * 3000,  # exponential if (( were retried as a subshell each time
    "nested-arrays": "x=(" * 3000,
    "nested-subshells": "(" * 3000 + "a" + ")" * 3000,
    "backticks": "`" * 5001,
    "a long pipeline": "a | " * 3000 + "a",
    "many commands": "a;" * 3000,
    "many wrappers": "sudo " * 5000 + "rm -rf /",
    "many operands": "rm -rf " + "a " * 20000 + "/",
    "many quoted arguments": "echo " + "'a b' " * 2000,
    "many dot-dots": "rm -rf /" + "../" * 20000,
    "many globs": "rm -rf " + "/*" * 2000,
    "huge braces": "rm -rf /" + "{a,b}" * 30 + " /{1..100000000}",
    "a long here-document": "cat <<EOF\n" + "line $(x)\n" * 2000 + "EOF",
    "many functions": "".join(f"f{i}(){{ f{i + 1}|f{i + 1}& }};" for i in range(1000)),
    "many finds": "find / " + "-name a -o " * 3000 + "-delete",
}


@pytest.mark.parametrize("command", LONG.values(), ids=LONG.keys())
def test_a_long_command_is_checked_quickly(command):
    # Not a speed measurement (python -m bench is): a guard against work that grows
    # exponentially with the input, which would take minutes here, not seconds.
    started = time.process_time()
    reason = shell().refusal(command)
    assert reason is None or isinstance(reason, str)
    assert time.process_time() - started < 10.0  # CPU seconds


def test_random_text_never_breaks_the_policy():
    rng = random.Random(11)
    alphabet = list("ab /*~$`'\"\\(){}[]<>|&;#!=\n\t-") + ["$(", "${", "<<", "EOF", "((", "))", "if ", "fi", "rm -rf /"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
        reason = shell().refusal(text)
        assert reason is None or isinstance(reason, str), text


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


# Spellings of a variable that redaction cannot follow: the variable must not be there at all.
SPELLINGS = ["echo $V", "echo $V | rev", "echo ${V#*:*:}", "echo $V | tr ':' ' '", "echo ${V:0:25}; echo ${V:25}",
             "echo $V | base64", "echo $V | xxd -p", "echo $V | sed 's/./& /g'", "printenv V | cut -c20-", "env"]
VALUE_SECRETS = {  # (value, the secret in it)
    "url password": ("postgres://admin:Zq9vXw2Lm4Np7Rt1@db.example:5432/x", "Zq9vXw2Lm4Np7Rt1"),
    "url token": ("https://Zq9vXw2Lm4Np7Rt1Yh@git.example/x.git", "Zq9vXw2Lm4Np7Rt1Yh"),
    "token shape": ("--header=ghp_" + "Zq9vXw2Lm4Np7Rt1" * 2 + "ab", "Zq9vXw2Lm4Np7Rt1" * 2),
}


@pytest.mark.parametrize("secret", VALUE_SECRETS)
@pytest.mark.parametrize("command", SPELLINGS)
def test_a_variable_whose_value_holds_a_credential_is_stripped(monkeypatch, secret, command):
    value, hidden = VALUE_SECRETS[secret]
    monkeypatch.setenv("V", value)  # not a credential-like name
    monkeypatch.setenv("BETTONG_PLAIN_URL", "https://example.org/x")
    with secrets.revealed():
        text = direct(shell(), command + "; echo done; printenv BETTONG_PLAIN_URL")
    flat = re.sub(r"\s", "", text)
    assert not any(part in flat or part[::-1] in flat for part in (hidden[:8], hidden[-8:])), text
    assert text.endswith("done\nhttps://example.org/x"), text


# A "kernel" started with secrets in its environment runs these through the shell tool, with
# redaction off, and prints what came back: the only defence tested is that the command
# cannot read them. {pid} is the kernel's pid, {needle} the start of the API key.
PROC_PROBES = {
    "ppid environ": "tr '\\0' '\\n' < /proc/$PPID/environ",
    "pid environ": "cat /proc/{pid}/environ",
    "pid cmdline": "cat /proc/{pid}/cmdline",
    "self/..": "cat /proc/self/../{pid}/environ /proc/self/../$PPID/environ",
    "init environ": "cat /proc/1/environ",
    "every environ, base64": ("for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; done 2>/dev/null"
                              " | tr '\\0' '\\n' | grep -a -e KEY -e PASSWORD | base64 -w0"),
    "every environ, hex": ("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a -e KEY -e PASSWORD"
                           " | od -An -tx1 | tr -d ' \\n'"),
    "ancestors, base64": ("p=$$; while [ \"$p\" -gt 1 ]; do cat /proc/$p/environ; "
                          "p=$(cut -d' ' -f4 /proc/$p/stat); done 2>/dev/null | tr '\\0' '\\n' | grep -a -e KEY"
                          " -e PASSWORD | base64 -w0"),
    "mem": "python3 - {pid} {needle} <<'PY'\n" + textwrap.dedent("""\
        import sys
        pid, needle, hits = sys.argv[1], sys.argv[2].encode(), 0
        try:
            regions = open(f"/proc/{pid}/maps").read().splitlines()
            mem = open(f"/proc/{pid}/mem", "rb", 0)
        except OSError as e:
            sys.exit(print("unreadable", e.errno))
        for line in regions:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            try:
                mem.seek(start)
                hits += mem.read(end - start).count(needle)
            except (OSError, ValueError, OverflowError):
                pass
        print("hits", hits)
        """) + "PY",
}
# Every way to undo the namespaces' /proc: run only inside them (as root beside the kernel they
# would unmount the machine's /proc). Each prints what it finds of the kernel's environment
# and of its command line, where a PLANTED token sits, as base64.
_FOUND = " 2>/dev/null | tr '\\0' '\\n' | grep -a -e KEY -e PASSWORD -e PLANTED | base64 -w0"
_EVERY = "cat {d}/[0-9]*/environ {d}/[0-9]*/cmdline {d}/[0-9]*/task/*/environ"
_NESTED = "python3 - <<'PY'\n" + textwrap.dedent("""\
    import ctypes, glob, os, tempfile
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare(0x10000000 | 0x00020000)  # a user and mount namespace of its own, all capabilities in it
    for flags in (0, 2):
        libc.umount2(b"/proc", flags)
    where = tempfile.mkdtemp()
    libc.mount(b"proc", where.encode(), b"proc", 0, None)
    libc.mount(b"/", where.encode(), None, 4096 | 16384, None)  # MS_BIND | MS_REC
    for path in glob.glob("/proc/[0-9]*/*") + glob.glob(where + "/**/[0-9]*/*"):
        if path.endswith(("/environ", "/cmdline")):
            try:
                print(open(path, "rb").read().replace(b"\\0", b"\\n").decode(errors="replace"))
            except OSError:
                pass
    """) + "PY"
UNDO_PROBES = {
    "umount": "umount /proc 2>/dev/null; umount -l /proc 2>/dev/null; " + _EVERY.format(d="/proc") + _FOUND,
    "remount private": ("mount --make-rprivate / 2>/dev/null; mount --make-private /proc 2>/dev/null; "
                        "umount -l /proc 2>/dev/null; " + _EVERY.format(d="/proc") + _FOUND),
    "proc elsewhere": ('d=$(mktemp -d); mount -t proc proc "$d" 2>/dev/null; ' + _EVERY.format(d='"$d"') + _FOUND),
    "nsenter": "nsenter -t 1 -a sh -c 'umount -l /proc; " + _EVERY.format(d="/proc") + "'" + _FOUND,
    "unshare -r": "unshare -r -m sh -c 'umount -l /proc; " + _EVERY.format(d="/proc") + "'" + _FOUND,
    "unshare --user": "unshare --user --mount sh -c 'umount -l /proc; " + _EVERY.format(d="/proc") + "'" + _FOUND,
    "unshare, new proc": ("unshare -r -m -p -f --mount-proc sh -c 'umount /proc; umount /proc; "
                          + _EVERY.format(d="/proc") + "'" + _FOUND),
    "chroot": "chroot /proc/1/root sh -c 'umount -l /proc; " + _EVERY.format(d="/proc") + "'" + _FOUND,
    "pivot_root": ("unshare -m sh -c 'mount --bind / /mnt && cd /mnt && pivot_root . mnt && umount -l /mnt/proc; "
                   + _EVERY.format(d="/mnt/proc") + "'" + _FOUND),
    "nested namespaces in-process": _NESTED + _FOUND,
}
KERNEL = """
import asyncio, json, os, sys
from bettong_nb import secrets
from bettong_nb.capabilities.shell.capability import shell

async def main():
    cap = shell(isolate=sys.argv[1] == "1", timeout=30)
    probes = json.loads(sys.argv[2])
    with secrets.revealed():
        return {name: await cap.run_shell(command.replace("{pid}", str(os.getpid())).replace("{needle}", sys.argv[3]))
                for name, command in probes.items()}

print(json.dumps(asyncio.run(main())))
"""


def _kernel_sees(isolate: bool, secret_values: dict[str, str], probes: dict[str, str],
                 planted: str = "PLANTED") -> dict[str, str]:
    """Run ``probes`` from a kernel whose environment holds ``secret_values`` and whose command
    line, and its parent's, hold ``planted``."""
    env = {**os.environ, **secret_values, "PYTHONPATH": str(REPO)}
    needle = secret_values["DEEPSEEK_API_KEY"][:20]
    kernel = [sys.executable, "-c", KERNEL, "1" if isolate else "0", json.dumps(probes), needle, planted]
    done = subprocess.run(["bash", "-c", '"$@"; exit $?', planted, *kernel],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _random_secrets() -> dict[str, str]:
    rng = random.SystemRandom()
    return {"DEEPSEEK_API_KEY": "sk-" + "".join(rng.choices(string.ascii_letters + string.digits, k=40)),
            "MY_PASSWORD": "pw-" + "".join(rng.choices(string.ascii_letters + string.digits, k=24))}


def _decodings(text: str) -> list[bytes]:
    """The output as it is, and decoded as base64 and as hex where it reads as such."""
    body = text.split("\n", 1)[-1].strip()
    out = [text.encode()]
    for decode in (lambda b: base64.b64decode(b + "=" * (-len(b) % 4)), bytes.fromhex):
        try:
            out.append(decode(body))
        except ValueError:
            pass
    return out


def _leaks(seen: dict[str, str], values: list[str]) -> dict[str, str]:
    return {name: text[:200] for name, text in seen.items()
            if any(v.encode() in form for v in values for form in _decodings(text))
            or re.search(r"^hits [1-9]", text.split("\n", 1)[-1])}


def test_a_command_cannot_read_the_kernels_secrets_from_proc():
    values = _random_secrets()
    isolated = _kernel_sees(True, values, PROC_PROBES)
    assert all(text.startswith("exit ") for text in isolated.values()), isolated
    if isolation() != "none":
        assert _leaks(isolated, list(values.values())) == {}
    # beside the kernel, root reads anything; another user is stopped by the non-dumpable mark
    beside = _leaks(_kernel_sees(False, values, PROC_PROBES), list(values.values()))
    if os.geteuid() == 0:
        assert {"ppid environ", "pid environ", "every environ, base64", "every environ, hex", "mem"} <= set(beside)
    else:
        assert not {"ppid environ", "pid environ", "mem"} & set(beside)


@pytest.fixture(scope="module")
def undone():
    """What each way of undoing the namespaces found, run once from one planted kernel."""
    if isolation() == "none":
        pytest.skip("no namespaces here")
    values = _random_secrets()
    planted = "PLANTED" + uuid.uuid4().hex
    return _kernel_sees(True, values, UNDO_PROBES, planted), [*values.values(), planted]


@pytest.mark.parametrize("probe", UNDO_PROBES)
def test_a_command_cannot_undo_its_namespaces(undone, probe):
    """Not as root in its namespaces: it holds no capabilities there, and the mounts of any
    namespace it makes inside are locked."""
    seen, values = undone
    assert seen[probe].startswith("exit "), seen[probe]
    assert _leaks({probe: seen[probe]}, values) == {}, seen[probe]


def test_the_python_process_is_marked_non_dumpable():
    """Its /proc entries then belong to root: another process of a non-root user cannot read them."""
    program = ("import asyncio, ctypes, sys\nfrom bettong_nb.capabilities.shell import shell\n"
               "libc = ctypes.CDLL(None)\nbefore = libc.prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
               "asyncio.run(shell().run_shell('true'))\nprint(before, libc.prctl(3, 0, 0, 0, 0))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.split() == ["1", "0"], done.stderr


@pytest.mark.parametrize("where", ["head", "tail"])
@pytest.mark.parametrize("small", [True, False], ids=["all-kept", "streamed"])
@pytest.mark.parametrize("encode", ["plain", "base64"])
def test_a_secret_astride_the_cut_is_redacted_whole(monkeypatch, tmp_path, where, small, encode):
    secret = "QZ" + "".join(random.choices(string.ascii_uppercase + string.digits, k=38))
    monkeypatch.setenv("BETTONG_TEST_TOKEN", secret)  # a credential-named value: the shell strips it
    shown = base64.b64encode(secret.encode()).decode() if encode == "base64" else secret
    (tmp_path / "secret").write_text(shown)
    limit = 400
    after = 2000 if small else 30000  # the streamed case keeps only a head and a tail
    redacted = 0
    for offset in range(1, len(shown), 3):  # the secret starts `offset` characters before the cut
        if where == "head":
            before = limit // 4 - offset
        else:
            before = 2 * limit + after - (limit - limit // 4) - len(shown) + offset
        command = (f"head -c {before} /dev/zero | tr '\\0' .; cat secret; "
                   f"head -c {after if where == 'head' else 2 * limit + after - before - len(shown)} /dev/zero"
                   " | tr '\\0' .")
        text = direct(shell(root=tmp_path, max_output=limit), command)
        assert "characters truncated" in text
        assert not any(shown[i:i + 4] in text for i in range(len(shown) - 3)), (offset, text)
        redacted += "[redacted]" in text  # shown whole, unless the cut drops all of it
    assert redacted >= len(range(1, len(shown), 3)) // 2


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


# Every way a job can leave its parent's process group, session or tree; {m} is the marker.
DETACHED = [
    "set -m; sleep {m} &",
    "setsid sleep {m} &",
    "setsid -f sleep {m}",
    "nohup sleep {m} > /dev/null 2>&1 &",
    "(sleep {m} &)",
    "( (setsid sleep {m} &) &)",
    "sleep {m} & disown",
    "bash -c 'sleep {m} & disown' &",
    "sh -c 'setsid sleep {m} < /dev/null > /dev/null 2>&1 &'",
    "exec > /dev/null 2>&1; setsid sleep {m} &",
    "(trap '' TERM HUP; exec setsid sleep {m}) &",
    "setsid bash -c 'trap \"\" TERM; sleep {m}' &",
    "set -m; (setsid nohup sleep {m} &) ; disown -a",
    # without a marker in the environment, the session or the parent chain: only a cgroup finds them
    "env -i setsid -f sleep {m}",
    "env -i setsid -f /bin/sh -c 'sleep {m}'",
    "env -i bash -c '(setsid sleep {m} &)'",
    ("env -i python3 -c 'import os\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
     "  os.execvp(\"sleep\", [\"sleep\", \"{m}\"])'"),
]
# What isolate=False cannot find without a cgroup, as documented
UNTRACKABLE = {job for job in DETACHED if job.startswith("env -i")}
MODES = [pytest.param(True, id="isolated"), pytest.param(False, id="not-isolated")]


@pytest.mark.parametrize("isolate", MODES)
@pytest.mark.parametrize("job", DETACHED)
def test_no_job_outlives_the_call_however_it_detaches(job, isolate):
    if not isolate and job in UNTRACKABLE and _cgroups() is None:
        pytest.skip("no cgroup to make here: isolate=False cannot find what clears its environment and session")
    mark = marker()
    started = time.monotonic()
    text = run(shell(timeout=30, isolate=isolate), job.format(m=mark) + "\nsleep 0.1; echo returned")
    assert text.startswith("exit 0"), text
    assert time.monotonic() - started < 5, "a detached process holding the pipe must not keep the call waiting"
    assert settled_alive(mark) == []


@pytest.mark.parametrize("isolate", MODES)
@pytest.mark.parametrize("job", DETACHED[:7])
def test_no_job_outlives_a_timeout_however_it_detaches(job, isolate):
    mark = marker()
    text = run(shell(timeout=0.3, isolate=isolate), job.format(m=mark) + f"\necho waiting; sleep {mark}9")
    assert text.startswith("ERROR: command timed out after 0.3 s and was killed"), text
    assert settled_alive(mark) == []


def test_without_namespaces_each_command_has_a_cgroup_of_its_own_that_goes_with_it():
    base = _cgroups()
    if base is None:
        pytest.skip("no cgroup to make here")
    mark = marker()
    text = run(shell(isolate=False), f"env -i setsid -f sleep {mark}; cat /proc/self/cgroup")
    mine = text.split("\n")[-1].split(":", 2)[2]
    assert re.fullmatch(rf".*/bettong-shell-{os.getpid()}-[0-9a-f]{{12}}", mine), text
    assert settled_alive(mark) == []
    assert not [n for n in os.listdir(base) if n.startswith(f"bettong-shell-{os.getpid()}-")]


@pytest.mark.parametrize("isolate", MODES)
def test_a_job_that_forks_as_it_is_killed_is_killed_too(isolate):
    mark = marker()
    command = f"for i in 1 2 3 4 5 6 7 8; do (while :; do setsid sleep {mark} & sleep 0.01; done) & done; sleep 0.2"
    assert run(shell(timeout=30, isolate=isolate), command) == "exit 0\n(no output)"
    assert settled_alive(mark) == []


def test_isolation_says_what_applies_and_the_instructions_tell_the_model():
    kind = isolation()
    assert kind in ("namespaces", "pid namespace", "none")
    if kind == "none":
        assert "not isolated" in shell().instructions
        return
    assert "own process namespace" in shell().instructions
    assert "not isolated" in shell(isolate=False).instructions
    # only the command's own processes are visible; the Python process is not among them
    pids = run(shell(), "ls /proc | grep -E '^[0-9]+$'").split("\n")[1:]
    assert str(os.getpid()) not in pids and len(pids) < 10
    assert run(shell(), "echo $PPID") in ("exit 0\n0", "exit 0\n1")
    assert str(os.getpid()) in run(shell(isolate=False), "echo $PPID")


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
        return await asyncio.gather(cap.run_shell("sleep 1; echo a"), cap.run_shell("sleep 1; echo b"))

    started = time.monotonic()
    assert asyncio.run(both()) == ["exit 0\na", "exit 0\nb"]
    assert time.monotonic() - started < 1.8  # one after the other would take 2 s


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
