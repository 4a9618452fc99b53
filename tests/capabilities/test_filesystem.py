"""The filesystem capability: adversarial path corpora, ordinary behaviour, races, and the loop.

Each line of tests/corpora/paths*.jsonl is one case run against a fresh fixture tree::

    {"id": ..., "op": "read|list|write|delete", "path": ..., "mode": "rooted" (default),
     "setup": "tree" (default), and one outcome: "exact" / "ok" (result text or substring),
     "error" (substring or list of substrings) / "exact_error", plus "lands" (a written file,
     relative to tmp) / "gone" (a deleted one) / "outside_ok" (the result may show outside data)}

Paths may use {tmp}, {root} and {outside}, and {x*N} for x repeated N times. After every case
nothing changed except what the case wrote or deleted.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import REPO, TESTS
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

import bettong_nb
from bettong_nb.capabilities.filesystem import MAX_READ_CHARS, filesystem, is_credential_path
from bettong_nb.core.capability import registry, schemas
from bettong_nb.providers.scripted import Scripted
from support.filesystem import race, snapshot, tally
from support.tools import model_reads

CORPORA = TESTS / "corpora"
SENTINEL = "OUTSIDE-SECRET"
CONTENT = "written by the corpus"
OPS = {"read": "read_file", "list": "list_dir", "write": "write_file", "delete": "delete_file"}


# --- the fixture tree ---------------------------------------------------------------------------

FILES = {
    "outside/secret.txt": "OUTSIDE-SECRET-7f3a",
    "outside/dir/inner.txt": "OUTSIDE-SECRET-inner",
    "outside/hard_target.txt": "OUTSIDE-SECRET-hardlinked",
    "root-evil/a.txt": "OUTSIDE-SECRET-evil",
    "root/a.txt": "alpha",
    "root/empty.txt": "",
    "root/sub/b.txt": "bravo",
    "root/sub/deeper/c.txt": "charlie",
    "root/sortme/a.txt": "",
    "root/sortme/b.txt": "",
    "root/%2e%2e/f.txt": "percent",
    "root/..%2fescape.txt": "literal",
    "root/.../dots.txt": "three dots",
    "root/..a": "dotdot-a",
    "root/ space.txt": "leading space",
    "root/\u00fcn\u00efc\u00f8d\u00e9.txt": "unicode",
    "root/\u65e5\u672c\u8a9e/\u30d5\u30a1\u30a4\u30eb.txt": "japanese",
    "root/emoji-\U0001f998.txt": "kangaroo",
    "root/caf\u00e9.txt": "nfc",
    "root/new\nline.txt": "newline name",
    "root/back\\slash.txt": "backslash",
    "root/-dash.txt": "dash",
    "root/~/home.txt": "tilde dir",
    # credentials
    "root/.env": "API_TOKEN=root-env",
    "root/.env.local": "x",
    "root/sub/.env": "x",
    "root/deep/x/.aws/credentials": "x",
    "root/.ssh/id_rsa": "PRIVATE KEY",
    "root/.ssh/config": "x",
    "root/server.pem": "x",
    "root/tls.key": "x",
    "root/bundle.p12": "x",
    "root/UPPER.PEM": "x",
    "root/.netrc": "x",
    "root/.npmrc": "x",
    "root/.pypirc": "x",
    "root/.git-credentials": "x",
    "root/id_rsa.pub": "x",
    "root/keys/id_ed25519": "x",
    "root/.docker/config.json": "x",
    "root/.kube/config": "x",
    "root/.gnupg/secring.gpg": "x",
    "root/bundle.pfx": "x",
    "root/keys/putty.ppk": "x",
    "root/.pgpass": "x",
    "root/.config/gcloud/application_default_credentials.json": "x",
    "root/.config/gcloud/credentials.db": "x",
    "root/.config/gcloud/access_tokens.db": "x",
    "root/.config/gcloud/legacy_credentials/me@example.com/adc.json": "x",
    "root/.config/gcloud/configurations/config_default": "[core]\nproject = demo",
    "root/.azure/accessTokens.json": "x",
    "root/.azure/msal_token_cache.json": "x",
    "root/.azure/azureProfile.json": "{\"subscriptions\": []}",
    "root/.vault-token": "x",
    "root/.cargo/credentials": "x",
    "root/.cargo/credentials.toml": "x",
    "root/.cargo/config.toml": "[build]",
    "root/android/release.keystore": "x",
    "root/java/trust.jks": "x",
    "root/_netrc": "x",
    "root/.terraformrc": "x",
    "root/infra/terraform.tfstate": "x",
    "root/.kaggle/kaggle.json": "x",
    "root/.cache/huggingface/token": "x",
    "root/.config/gh/hosts.yml": "x",
    "root/.aws/config": "[default]\nregion = eu-west-1",
    "root/.my.cnf": "x",
    "root/.htpasswd": "x",
    # look like credentials, are not
    "root/.envrc": "direnv",
    "root/environment.md": "env notes",
    "root/.environment": "dot environment",
    "root/keyboard-layout.md": "qwerty",
    "root/notes.key.txt": "key notes",
    "root/my.ssh.txt": "ssh notes",
    "root/kube/config": "plain kube",
    "root/docker/config.json": "{}",
}
DIRS = ["root/empty", "root/sortme/a-dir"]
LINKS = {  # name -> target, targets may use {tmp}, {root}, {outside}
    "rootlink": "root",
    "root/in_file": "a.txt",
    "root/in_file_abs": "{root}/a.txt",
    "root/in_dir": "sub",
    "root/in_dir_abs": "{root}/sub",
    "root/chain1": "chain2",
    "root/chain2": "chain3",
    "root/chain3": "a.txt",
    "root/out_file": "../outside/secret.txt",
    "root/out_abs": "{outside}/secret.txt",
    "root/out_dir": "../outside/dir",
    "root/out_chain1": "out_chain2",
    "root/out_chain2": "out_file",
    "root/out_dir_chain": "out_dir",
    "root/mixed": "sub/up_link",
    "root/sub/up_link": "../../outside/secret.txt",
    "root/dangling_in": "nothere.txt",
    "root/dangling_out": "../outside/nothere.txt",
    "root/dangling_out_abs": "/nonexistent-bettong-corpus/x",
    "root/to_slash": "/",
    "root/to_parent": "..",
    "root/to_self": ".",
    "root/to_tmp_abs": "{tmp}",
    "root/loop1": "loop2",
    "root/loop2": "loop1",
    "root/self_loop": "self_loop",
    "root/sub/up": "..",
    "root/sub/up2": "../..",
    "root/sub/deeper/to_a": "../../a.txt",
    "root/sub/sibling_in": "../empty",
    "root/via_rootlink": "{tmp}/rootlink/a.txt",
    "root/slash_then_in": "{root}/sub/../a.txt",
    "root/abs_dotdot_out": "{root}/../outside/secret.txt",
    "root/innocent.txt": ".ssh/id_rsa",
    "root/key_link.pem": "a.txt",
    "root/envlink": "sub/.env",
    "root/dir_to_ssh": ".ssh",
    "root/gcloud_link": ".config/gcloud",
    "root/notes_about_azure.txt": ".azure/msal_token_cache.json",
    "root/Bundle.PFX.lnk": "a.txt",
    **{f"root/lc{i}": f"lc{i + 1}" for i in range(45)},  # lc0 takes 46 hops, lc15 takes 31
    "root/lc45": "a.txt",
}


def build_tree(tmp: Path) -> None:
    for rel, text in FILES.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for rel in DIRS:
        (tmp / rel).mkdir(parents=True, exist_ok=True)
    for rel, target in LINKS.items():
        os.symlink(expand(target, tmp), tmp / rel)
    os.link(tmp / "outside/hard_target.txt", tmp / "root/hard.txt")


SETUPS = {"tree": build_tree}


def expand(template: str, tmp: Path) -> str:
    text = (template.replace("{tmp}", str(tmp)).replace("{root}", str(tmp / "root"))
            .replace("{outside}", str(tmp / "outside")))
    return re.sub(r"\{(.+?)\*(\d+)\}", lambda m: m.group(1) * int(m.group(2)), text)


def capability_for(mode: str, tmp: Path):
    if mode == "rooted":
        return filesystem(root=tmp / "root", writable=True)
    if mode == "secrets":
        return filesystem(root=tmp / "root", writable=True, allow_secrets=True)
    if mode == "via_link":
        return filesystem(root=tmp / "rootlink", writable=True)
    if mode == "missing_root":
        return filesystem(root=tmp / "no-such-root", writable=True)
    if mode == "free":
        return filesystem(writable=True)
    raise AssertionError(f"unknown mode {mode}")


call = model_reads


# --- the corpus ---------------------------------------------------------------------------------

def load_cases() -> list[dict]:
    cases = []
    for file in sorted(CORPORA.glob("paths*.jsonl")):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                cases.append({"source": f"{file.name}:{number}", **json.loads(line)})
    return cases


CASES = load_cases()


def test_the_corpus_is_big_and_well_formed():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    assert len(CASES) >= 200
    outcomes = {"exact", "ok", "error", "exact_error", "lands", "gone"}
    for case in CASES:
        assert case["op"] in OPS, case["source"]
        assert outcomes & case.keys(), case["source"]
        assert case.get("setup", "tree") in SETUPS, case["source"]
    assert {c["op"] for c in CASES} == set(OPS)


@pytest.fixture(scope="module")
def shared_tree(tmp_path_factory):
    """One tree for the cases that only read or list; each case checks it stayed unchanged."""
    tmp = tmp_path_factory.mktemp("shared")
    build_tree(tmp)
    return tmp, snapshot(tmp)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_path_corpus(case, request, monkeypatch):
    if case["op"] in ("read", "list") and case.get("setup", "tree") == "tree":
        tmp, before = request.getfixturevalue("shared_tree")
    else:
        tmp = request.getfixturevalue("tmp_path")
        SETUPS[case.get("setup", "tree")](tmp)
        before = snapshot(tmp)
    mode = case.get("mode", "rooted")
    if mode == "free":
        monkeypatch.chdir(tmp / "root")
    cap = capability_for(mode, tmp)
    args = {}
    if "path" in case:
        args["path"] = expand(case["path"], tmp) if isinstance(case["path"], str) else case["path"]
    if case["op"] == "write":
        args["content"] = case.get("content", CONTENT)

    text = call(cap, OPS[case["op"]], args)

    failed = text.startswith("ERROR: ")
    if "error" in case or "exact_error" in case:
        assert failed, f"expected an error, got {text!r}"
        message = text[len("ERROR: "):]
        if "exact_error" in case:
            assert message == case["exact_error"]
        for part in [case["error"]] if isinstance(case.get("error"), str) else case.get("error", []):
            assert part in message, f"{part!r} not in {message!r}"
    else:
        assert not failed, text
        if "exact" in case:
            assert text == case["exact"]
        if "ok" in case:
            assert case["ok"] in text
    if not case.get("outside_ok"):
        assert SENTINEL not in text

    allowed = set()
    if "lands" in case:
        landed = expand(case["lands"], tmp)
        content = args["content"] if args["content"] is not None else ""
        assert (tmp / landed).read_text(encoding="utf-8") == content
        assert not (tmp / landed).is_symlink()
        parts = Path(landed).parts
        allowed |= {os.path.join(*parts[:i]) for i in range(1, len(parts) + 1)}
    if "gone" in case:
        assert not os.path.lexists(tmp / case["gone"])
        allowed.add(case["gone"])
    after = snapshot(tmp)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= allowed, f"unexpected changes: {sorted(changed - allowed)}"
    assert not [k for k in after if ".bettong-" in k], "a temp file was left behind"


# --- what the model is told -----------------------------------------------------------------------

def test_reading_is_the_default_and_writing_must_be_asked_for():
    ro = filesystem()
    assert ro.id == "filesystem"
    assert [t.name for t in ro.tools] == ["read_file", "list_dir"]
    assert "cannot create, change or delete" in ro.instructions
    rw = filesystem(writable=True)
    assert [t.name for t in rw.tools] == ["read_file", "list_dir", "write_file", "delete_file"]
    assert "cannot create" not in rw.instructions
    assert "write_file and delete_file" in rw.instructions


def test_the_instructions_name_the_root_exactly_as_given():
    one, two = filesystem(root="/tmp/run-1"), filesystem(root="/tmp/run-2")
    assert "Every path is confined to /tmp/run-1;" in one.instructions
    assert one.instructions != two.instructions
    assert "confined" not in filesystem().instructions
    assert "Credential files" in filesystem().instructions
    assert "Credential files" not in filesystem(allow_secrets=True).instructions


def test_a_read_only_filesystem_has_no_write_tool(tmp_path):
    cap = filesystem(root=tmp_path)
    assert call(cap, "write_file", {"path": "x.txt", "content": "x"}) == \
        "ERROR: no capability provides a tool called write_file"
    assert call(cap, "delete_file", {"path": "x.txt"}) == "ERROR: no capability provides a tool called delete_file"
    assert not (tmp_path / "x.txt").exists()


def test_the_tool_schemas():
    tools = {s["name"]: s for s in schemas(registry([filesystem(writable=True)]))}
    assert tools["read_file"]["parameters"]["required"] == ["path"]
    assert tools["read_file"]["parameters"]["properties"]["offset"]["type"] == "integer"
    assert tools["read_file"]["parameters"]["properties"]["limit"]["type"] == "integer"
    assert tools["list_dir"]["parameters"]["required"] == []
    assert '"/"' in tools["list_dir"]["description"]
    assert tools["write_file"]["parameters"]["required"] == ["path", "content"]
    assert "parent directories" in tools["write_file"]["description"]
    assert tools["delete_file"]["parameters"]["required"] == ["path"]
    json.dumps(list(tools.values()))


def test_the_tools_list_is_identical_from_build_to_build():
    assert json.dumps(schemas(registry([filesystem(root="/srv", writable=True)]))) == \
        json.dumps(schemas(registry([filesystem(root="/srv", writable=True)])))


def test_the_option_that_used_to_mean_read_only_is_refused():
    with pytest.raises(TypeError, match="filesystem no longer takes read_only"):
        filesystem(read_only=False)
    with pytest.raises(TypeError, match="unknown option.*writeable"):
        filesystem(writeable=True)


@pytest.mark.parametrize("path", [
    "/home/u/.ssh/id_rsa", "/home/u/.aws/credentials", "/srv/app/.env", "/x/.env.local", "/etc/ssl/server.pem",
    "/x/a.p12", "/home/u/.netrc", "/home/u/.npmrc", "/home/u/.pypirc", "/home/u/.git-credentials",
    "/x/id_rsa.pub", "/x/id_ed25519", "/x/id_dsa", "/x/id_ecdsa", "/home/u/.docker/config.json",
    "/home/u/.kube/config", "/home/u/.gnupg/secring.gpg", "/etc/ssl/server.key", "/proc/123/environ",
    "/proc/1/task/1/environ", "/X/SERVER.PEM",
])
def test_credential_paths(path):
    assert is_credential_path(path)


@pytest.mark.parametrize("path", [
    "/srv/app/config.edn", "/home/u/notes.txt", "/etc/hosts", "/home/u/keyboard-layout.md",
    "/srv/environment.md", "/srv/.envrc", "/home/u/.ssh", "/home/u/.gnupg", "/x/pem", "/x/monkey",
    "/proc/123/cmdline",
])
def test_not_credential_paths(path):
    assert not is_credential_path(path)


# --- reading ------------------------------------------------------------------------------------

def test_a_long_file_comes_in_pages_that_say_how_to_go_on(tmp_path):
    text = "".join(f"{i:09d}\n" for i in range(60_000))  # 600 000 characters
    (tmp_path / "big.txt").write_text(text)
    fs = filesystem(root=tmp_path)
    first = fs.read_file("big.txt")
    # The first page does not read to the end, so it gives the size in bytes.
    assert first == text[:MAX_READ_CHARS] + ("\n\n[Showed 100,000 characters from offset 0 of a 600,000-byte file; "
                                             "call read_file with offset=100000 to read more.]")
    second = fs.read_file("big.txt", offset=100_000)
    assert second == text[100_000:200_000] + ("\n\n[Showed 100,000 characters from offset 100000 of 600,000 "
                                              "characters; call read_file with offset=200000 to read more.]")
    last = fs.read_file("big.txt", offset=550_000)
    assert last == text[550_000:] + ("\n\n[Showed 50,000 characters from offset 550000 of 600,000 characters; "
                                     "that is the end of the file.]")
    assert fs.read_file("big.txt", offset=10, limit=5) == text[10:15] + (
        "\n\n[Showed 5 characters from offset 10 of a 600,000-byte file; call read_file with offset=15 to read more.]")
    pages, offset = [], 0
    while offset < len(text):
        page = fs.read_file("big.txt", offset=offset)
        pages.append(page[:page.rindex("\n\n[")])
        offset += len(pages[-1])
    assert "".join(pages) == text
    with pytest.raises(ValueError, match="offset 600000 is past the end of big.txt \\(600000 characters\\)"):
        fs.read_file("big.txt", offset=600_000)


def test_pages_count_characters_not_bytes(tmp_path):
    text = "é" * 150_000 + "end"
    (tmp_path / "accents.txt").write_text(text)
    fs = filesystem(root=tmp_path)
    first = fs.read_file("accents.txt")
    assert first.startswith("é" * MAX_READ_CHARS + "\n\n[Showed 100,000 characters from offset 0")
    rest = fs.read_file("accents.txt", offset=MAX_READ_CHARS)
    assert rest.startswith("é" * 50_000 + "end\n\n[")
    assert "that is the end of the file" in rest


_MEMORY_PROBE = """
import json, os, resource, sys, tracemalloc
from bettong_nb.capabilities.filesystem import filesystem
root, size, offset = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(os.path.join(root, "big.txt"), "wb") as f:
    f.write(b"a text file with a long sparse tail\\n" * 300)
    f.truncate(size)  # a hole: no disk used, but every byte is read back as a NUL character
fs = filesystem(root=root)
fs.read_file("big.txt", limit=10)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
try:
    out = fs.read_file("big.txt", offset=offset)
except ValueError as exc:
    out = "ValueError: " + str(exc)
peak = tracemalloc.get_traced_memory()[1]
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
print(json.dumps({"peak": peak, "rss_kib": grown, "length": len(out), "tail": out[-200:]}))
"""


@pytest.mark.parametrize("size, offset, expected", [
    (64 << 20, 50_000_000, "from offset 50000000 of 67,108,864 characters; call read_file with offset=50100000"),
    (64 << 20, 67_100_000, "from offset 67100000 of 67,108,864 characters; that is the end of the file"),
    (64 << 20, 70_000_000, "ValueError: offset 70000000 is past the end of big.txt (67108864 characters)"),
    (1 << 40, 1_000_000, "from offset 1000000 of a 1,099,511,627,776-byte file; call read_file with offset=1100000"),
], ids=["deep-offset", "last-page", "past-the-end", "terabyte-sparse"])
def test_reading_at_any_offset_keeps_memory_bounded(tmp_path, size, offset, expected):
    root = REPO
    done = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(tmp_path), str(size), str(offset)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert expected in probe["tail"]
    assert probe["peak"] < 4 << 20 and probe["rss_kib"] < 16 << 10  # decoding up to the offset would take >= 64 MB


# (name, the body after a text head): 48 MB each, bytes a UTF-8 decoder rejects in every way.
# An error handler called per bad sequence took minutes for these (251 s for 200 MB).
NOT_UTF8 = [
    ("every byte invalid", b"\xff" * (48 << 20)),
    ("valid and invalid bytes alternating", b"a\xff" * (24 << 20)),
    ("three-byte sequences cut short", b"\xe2\x82a" * (16 << 20)),
    ("encoded surrogates", b"\xed\xa0\x80" * (16 << 20)),
]


@pytest.mark.parametrize("name,body", NOT_UTF8, ids=[n for n, _ in NOT_UTF8])
def test_reading_deep_into_bytes_that_are_not_utf8_leaves_the_loop_free(name, body, tmp_path):
    head = b"a text file that goes bad after its head\n" * 250
    (tmp_path / "bad.txt").write_bytes(head + body)
    whole = len((head + body).decode("utf-8", "replace"))
    offset = whole - 1_000
    model = Scripted([[("read_file", {"path": "bad.txt", "offset": offset})], "done"])
    agent = bettong_nb.agent(provider=model, capabilities=[filesystem(root=tmp_path)])
    gaps = []

    async def main():
        async def tick():
            while True:
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                gaps.append(time.perf_counter() - before)

        ticker = asyncio.create_task(tick())
        started = time.perf_counter()
        result = await agent.arun("read it")
        took = time.perf_counter() - started
        ticker.cancel()
        return result, took

    result, took = asyncio.run(main())
    page = model.requests[1].messages[-1]["content"][0]["content"]
    assert result.tool_calls[0].status == "ok" and page.endswith(
        f"from offset {offset} of {whole:,} characters; that is the end of the file.]")
    assert "undecodable byte sequence(s) are shown as \ufffd" in page and len(page) < 2_000
    assert max(gaps) < max(0.5, took / 2), "the read held up the event loop"


def test_pages_decode_the_same_across_read_chunks(tmp_path):
    chunk = 1 << 18  # the capability reads this many bytes at a time
    data = (b"a" * (chunk - 1) + "\u00e9".encode() + b"\xff" + "\U0001f998".encode() * 3 + b"b" * chunk
            + b"\xe2\x82" + b"c" * (chunk - 3) + "\u20ac".encode() + b"\xf0\x9f" + b"end")
    (tmp_path / "mixed.txt").write_bytes(data)
    whole = data.decode("utf-8", "replace")
    fs = filesystem(root=tmp_path)
    for offset in [chunk - 3, chunk - 1, chunk, 2 * chunk - 2, 2 * chunk + 3, 3 * chunk - 10]:
        page = fs.read_file("mixed.txt", offset=offset, limit=12)
        assert page.startswith(whole[offset:offset + 12] + "\n\n["), offset
        replaced = whole[offset:offset + 12].count("\ufffd")
        assert (f"{replaced} undecodable byte sequence(s)" in page) == bool(replaced)
    last = fs.read_file("mixed.txt", offset=len(whole) - 6)
    assert last.startswith(whole[-6:]) and f"of {len(whole):,} characters; that is the end of the file" in last


def test_offset_and_limit_are_checked(tmp_path):
    (tmp_path / "a.txt").write_text("0123456789")
    fs = filesystem(root=tmp_path)
    assert fs.read_file("a.txt", offset="2", limit=3.0).startswith("234\n\n[")
    assert fs.read_file("a.txt", limit=10**9) == "0123456789"
    for kwargs, message in [({"offset": -1}, "offset must be at least 0"), ({"limit": 0}, "limit must be at least 1"),
                            ({"offset": True}, "offset must be a whole number"),
                            ({"limit": "lots"}, "limit must be a whole number")]:
        with pytest.raises(ValueError, match=message):
            fs.read_file("a.txt", **kwargs)


@pytest.mark.parametrize("name, data, expected", [
    ("logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
     "logo.png is a binary file (1,032 bytes; looks like a PNG image)"),
    ("doc.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "looks like a PDF document"),
    ("archive", b"PK\x03\x04" + b"\x14\x00" * 20, "looks like a ZIP archive"),
    ("prog", b"\x7fELF\x02\x01\x01" + b"\x00" * 50, "looks like an ELF executable"),
    ("data.bin", b"abc\x00def" * 10, "type guessed from the name: application/octet-stream"),
    ("blob.zzq", b"\x00\x01\x02\x03" * 10, "type unknown"),
    ("controls", bytes(range(1, 9)) * 10, "is a binary file (80 bytes"),
    ("wide.txt", "hello".encode("utf-16"), "looks like UTF-16 text, not UTF-8"),
])
def test_binary_files_are_described_not_dumped(tmp_path, name, data, expected):
    (tmp_path / name).write_bytes(data)
    text = filesystem(root=tmp_path).read_file(name)
    assert expected in text
    assert text.endswith("its bytes are not shown.")
    assert "\x00" not in text and "\x01" not in text


def test_bytes_that_are_not_utf8_are_replaced_and_said_so(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("café crème\n".encode("latin-1"))
    (tmp_path / "real.txt").write_text("a \ufffd b")
    fs = filesystem(root=tmp_path)
    text = fs.read_file("latin1.txt")
    assert text.startswith("caf\ufffd cr\ufffdme\n")
    assert "[latin1.txt is not valid UTF-8: 2 undecodable byte sequence(s) are shown as \ufffd.]" in text
    assert fs.read_file("real.txt") == "a \ufffd b"  # a replacement character that was really there


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    fs = filesystem(root=tmp_path)
    with pytest.raises(OSError, match="Cannot read pipe: it is not a regular file"):
        fs.read_file("pipe")


# --- listing ------------------------------------------------------------------------------------

def test_list_dir_is_bounded_and_says_what_it_left_out(tmp_path):
    for i in range(1005):
        (tmp_path / f"f{i:04d}").touch()
    lines = filesystem(root=tmp_path).list_dir().split("\n")
    assert len(lines) == 1001
    assert lines[0] == "f0000" and lines[999] == "f0999"
    assert lines[1000] == "(5 more entries not shown; 1005 in all)"


def test_list_dir_sorts_after_marking_directories(tmp_path):
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "b.txt").touch()
    (tmp_path / "a.txt").touch()
    (tmp_path / ".hidden").touch()
    assert filesystem(root=tmp_path).list_dir(".") == ".hidden\na-dir/\na.txt\nb.txt"


# --- writing ------------------------------------------------------------------------------------

def test_writes_replace_the_file_whole(tmp_path):
    """A reader never sees a half-written file: each read is all of one version or the other."""
    fs = filesystem(root=tmp_path, writable=True)
    versions = ["A" * 300_000, "B" * 300_000]
    fs.write_file("f.txt", versions[0])
    stop, seen, torn = threading.Event(), set(), []

    def reader():
        while not stop.is_set():
            text = (tmp_path / "f.txt").read_text()
            if text in versions:
                seen.add(text[0])
            else:
                torn.append(len(text))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(60):
            fs.write_file("f.txt", versions[i % 2])
    finally:
        stop.set()
        thread.join()
    assert torn == []
    assert seen <= {"A", "B"} and seen
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_overwriting_keeps_the_mode(tmp_path):
    (tmp_path / "run.sh").write_text("old")
    os.chmod(tmp_path / "run.sh", 0o750)
    filesystem(root=tmp_path, writable=True).write_file("run.sh", "new")
    assert (tmp_path / "run.sh").read_text() == "new"
    assert (tmp_path / "run.sh").stat().st_mode & 0o777 == 0o750


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse the write halfway; the old content must survive."""
    (tmp_path / "f.txt").write_text("old content")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "from bettong_nb.capabilities.filesystem import filesystem\n"
        "fs = filesystem(sys.argv[1], writable=True)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "try:\n"
        "    print(fs.write_file('f.txt', 'x' * 5000))\n"
        "except OSError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=30,
                          cwd=REPO)
    assert done.stdout.strip() == "ERROR Cannot write f.txt: File too large", done.stderr
    assert (tmp_path / "f.txt").read_text() == "old content"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_write_read_list_delete_round_trip(tmp_path):
    cap = filesystem(root=tmp_path, writable=True)
    assert call(cap, "write_file", {"path": "a.txt", "content": "written"}) == "Wrote 7 bytes to a.txt"
    assert call(cap, "read_file", {"path": "a.txt"}) == "written"
    assert call(cap, "list_dir", {}) == "a.txt"
    assert call(cap, "delete_file", {"path": "a.txt"}) == "Deleted a.txt"
    assert call(cap, "list_dir", {"path": "."}) == "(empty directory)"
    assert call(cap, "read_file", {"path": "a.txt"}) == "ERROR: No such file: a.txt"


def test_a_relative_root_is_pinned_when_built(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("pinned")
    monkeypatch.chdir(tmp_path)
    fs = filesystem(root="data")
    monkeypatch.chdir("/")
    assert fs.read_file("a.txt") == "pinned"
    assert "confined to data;" in fs.instructions


# --- races: a path component swapped while the tools use it ---------------------------------------


def _race_tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "dir" / "secret.txt").write_text("OUTSIDE-SECRET")
    (outside / "dir" / "OUTSIDE-ONLY-NAME").write_text("x")
    (outside / "secret.txt").write_text("OUTSIDE-SECRET")
    (root / "flip_dir").mkdir(parents=True)
    (root / "flip_dir" / "secret.txt").write_text("inside")
    os.symlink("../outside/dir", root / "flip_link")
    (root / "t_file").write_text("inside")
    os.symlink("../outside/secret.txt", root / "t_link")
    return root, outside


def test_a_directory_swapped_for_a_symlink_out_never_leaks(tmp_path):
    root, outside = _race_tree(tmp_path)
    fs = filesystem(root=root, writable=True)
    before = snapshot(outside)
    outcomes = {"read": 0, "listed": 0, "wrote": 0, "refused": 0}

    def body():
        for action, kind in [(lambda: fs.read_file("flip/secret.txt"), "read"),
                             (lambda: fs.list_dir("flip"), "listed"),
                             (lambda: fs.write_file("flip/new.txt", "from the race"), "wrote")]:
            tally(outcomes, kind, action)
            assert not (outside / "dir" / "new.txt").exists()

    race(1.0, (root / "flip", root / "flip_dir", root / "flip_link"), body)
    assert snapshot(outside) == before
    assert outcomes["read"] and outcomes["listed"] and outcomes["wrote"] and outcomes["refused"], outcomes


def test_a_file_swapped_for_a_symlink_out_never_leaks(tmp_path):
    root, outside = _race_tree(tmp_path)
    fs = filesystem(root=root, writable=True)
    before = snapshot(outside)
    outcomes = {"read": 0, "wrote": 0, "refused": 0}

    def body():
        tally(outcomes, "read", lambda: fs.read_file("target"))
        tally(outcomes, "wrote", lambda: fs.write_file("target", "from the race"))
        assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET"

    race(1.0, (root / "target", root / "t_file", root / "t_link"), body)
    assert snapshot(outside) == before
    assert outcomes["read"] and outcomes["wrote"] and outcomes["refused"], outcomes


# --- the agent loop -------------------------------------------------------------------------------

def test_a_model_writes_then_reads_through_the_loop(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("OUTSIDE-SECRET")
    script = ChatScript([
        chat_message(tool_calls=[tool_call("write_file", {"path": "notes/hi.txt", "content": "héllo"}, id="c1")]),
        chat_message(tool_calls=[tool_call("read_file", {"path": "notes/hi.txt"}, id="c2"),
                                 tool_call("read_file", {"path": "../secret.txt"}, id="c3")]),
        chat_message("done"),
    ])
    with LoopbackServer(script) as server:
        result = bettong_nb.openai(base_url=server.url, api_key="sk-test",
                                   capabilities=[filesystem(root=root, writable=True)]).run("write, then read")
    assert result.output == "done"
    bodies = [r.json() for r in server.requests]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["read_file", "list_dir", "write_file", "delete_file"]
    assert f"Every path is confined to {root};" in bodies[0]["messages"][0]["content"]
    tool_results = lambda body: {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    assert tool_results(bodies[1]) == {"c1": "Wrote 6 bytes to notes/hi.txt"}
    third = tool_results(bodies[2])
    assert third["c2"] == "héllo"
    assert third["c3"] == f"ERROR: ../secret.txt escapes the allowed root {root}"
    assert (root / "notes" / "hi.txt").read_text() == "héllo"
    assert [c.tool for c in result.tool_calls] == ["write_file", "read_file", "read_file"]


def test_no_descriptor_is_left_open(tmp_path):
    build_tree(tmp_path)
    fs = capability_for("rooted", tmp_path)
    cases = [c for c in CASES if c.get("mode", "rooted") == "rooted" and isinstance(c.get("path"), str)]
    before = len(os.listdir("/proc/self/fd"))
    for case in cases:
        args = {"path": expand(case["path"], tmp_path)}
        if case["op"] == "write":
            args["content"] = CONTENT
        try:
            getattr(fs, OPS[case["op"]])(**args)
        except (OSError, ValueError):
            pass
    assert len(os.listdir("/proc/self/fd")) == before
