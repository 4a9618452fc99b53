"""The EDN capability: its tools, what they say to the model, and where they may reach."""

import itertools
import json
import os
import re
import stat
from collections import Counter

import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb import edn as edn_module
from bettong_nb.capabilities.edn import MAX_FILE_BYTES, MAX_SHOWN_CHARS
from bettong_nb.core.capability import registry, schemas
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call
# the flipping thread and the tree snapshot of the filesystem's race tests
from support.filesystem import race, snapshot, tally
from support.tools import tool_result

CONFIG = """;; service
{:server {:host "localhost"
          :port 8080}   ; the public port
 :flags [:a :b]
 "name" "svc"
 :debug false}
"""


def call(cap, name, args):
    text, redactions = tool_result(cap, name, args)
    assert redactions == 0  # nothing here looks like a credential
    return text


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "config.edn").write_text(CONFIG)
    return folder


def test_edn_reads_by_default_and_writes_only_when_asked(root):
    reader = caps.edn()
    assert reader.id == "edn"
    assert [t.name for t in reader.tools] == ["read_edn"]
    assert "cannot change EDN files" in reader.instructions
    writer = caps.edn(writable=True)
    assert [t.name for t in writer.tools] == ["read_edn", "set_edn", "delete_edn"]
    assert "cannot change" not in writer.instructions
    assert "set_edn" in writer.instructions and "write_file" in writer.instructions
    assert call(reader, "set_edn", {"path": str(root / "config.edn"), "key_path": [":debug"], "value": "true"}) == (
        "ERROR: no capability provides a tool called set_edn")


def test_the_option_that_used_to_mean_read_only_is_refused():
    with pytest.raises(TypeError):
        caps.edn(read_only=True)


def test_the_root_is_announced(root):
    assert f" Every path is confined to {root}." in caps.edn(root).instructions
    assert "confined" not in caps.edn().instructions


def test_the_schemas_ask_for_json_arrays_of_strings():
    by_name = {s["name"]: s for s in schemas(registry([caps.edn(writable=True)]))}
    read, set_, delete = by_name["read_edn"], by_name["set_edn"], by_name["delete_edn"]
    assert read["parameters"]["required"] == ["path"]
    assert set_["parameters"]["required"] == ["path", "key_path", "value"]
    assert delete["parameters"]["required"] == ["path", "key_path"]
    for schema in (read, set_, delete):
        assert schema["parameters"]["properties"]["key_path"]["type"] == "array"
        assert schema["parameters"]["properties"]["key_path"]["items"] == {"type": "string"}
    assert "whole file" in read["parameters"]["properties"]["key_path"]["description"]


def _descriptions(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "description" and isinstance(item, str):
                yield item
            else:
                yield from _descriptions(item)
    elif isinstance(value, list):
        for item in value:
            yield from _descriptions(item)


def test_bracketed_examples_in_the_descriptions_are_valid_json():
    examples = [m for text in _descriptions(schemas(registry([caps.edn(writable=True)])))
                for m in re.findall(r"\[[^\[\]]*\]", text)]
    assert {'[":server", ":port"]', '[":flags", "0"]', "[1, 2]"} <= set(examples)
    for example in examples:
        json.loads(example)
    # and each example path means what the description says
    assert edn_module.parse_path(json.loads('[":flags", "0"]')) == [edn_module.Keyword("flags"), 0]
    assert edn_module.parse_path(json.loads('["\\"name\\""]')) == ["name"]


def test_edn_tools_change_one_value_in_place(root):
    cap = caps.edn(root, writable=True)
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":server", ":port"]}) == "8080\n"
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":server", ":port"], "value": "9090"}) == (
        "Set :server :port to 9090 in config.edn")
    assert (root / "config.edn").read_text() == CONFIG.replace("8080", "9090")
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":server", ":host"]}) == '"localhost"\n'
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":debug"]}) == "false\n"
    assert call(cap, "delete_edn", {"path": "config.edn", "key_path": [":debug"]}) == "Removed :debug from config.edn"
    assert (root / "config.edn").read_text() == CONFIG.replace("8080", "9090").replace("\n :debug false", "")


def test_the_read_tool_prints_values_as_edn(root):
    cap = caps.edn(root)
    whole = call(cap, "read_edn", {"path": "config.edn"})
    assert ":server" in whole and whole.endswith("\n")
    assert edn_module.edn_equal(edn_module.loads(whole), edn_module.read_file(root / "config.edn"))
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":flags"]}) == "[:a :b]\n"
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":flags", "1"]}) == ":b\n"
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": ['"name"']}) == '"svc"\n'


def test_the_read_tool_reports_a_missing_value(root):
    assert call(caps.edn(root), "read_edn", {"path": "config.edn", "key_path": [":nope"]}) == (
        "No value at :nope in config.edn")
    assert call(caps.edn(root), "read_edn", {"path": "./config.edn", "key_path": [":server", ":nope"]}) == (
        "No value at :server :nope in ./config.edn")
    (root / "empty.edn").write_text(";; nothing yet\n")
    assert call(caps.edn(root), "read_edn", {"path": "empty.edn"}) == "No value in empty.edn"


@pytest.mark.parametrize("key_path", [
    [":server", ":port"],
    '[":server", ":port"]',          # the array sent as a JSON string
    [":server", ":port", ],
])
def test_key_paths_from_the_model_are_decoded(root, key_path):
    assert call(caps.edn(root), "read_edn", {"path": "config.edn", "key_path": key_path}) == "8080\n"


def test_a_key_path_may_hold_numbers_and_a_single_key(root):
    cap = caps.edn(root, writable=True)
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":flags", 0]}) == ":a\n"
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": ":debug"}) == "false\n"
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":flags", 1], "value": ":z"}).startswith(
        "Set :flags 1 to :z in ")
    assert edn_module.get_in_file(root / "config.edn", [":flags"]) == (edn_module.Keyword("a"),
                                                                      edn_module.Keyword("z"))


def test_values_from_the_model_are_edn_text(root):
    cap = caps.edn(root, writable=True)
    call(cap, "set_edn", {"path": "config.edn", "key_path": [":server", ":host"], "value": '"example.org"'})
    call(cap, "set_edn", {"path": "config.edn", "key_path": [":db"], "value": '{:url "jdbc:pg" :pool [1, 2]}'})
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":retries"], "value": 3}).startswith(
        "Set :retries to 3 in ")
    data = edn_module.read_file(root / "config.edn")
    assert edn_module.edn_equal(data, edn_module.loads(
        '{:server {:host "example.org" :port 8080} :flags [:a :b] "name" "svc" :debug false'
        ' :db {:url "jdbc:pg" :pool [1 2]} :retries 3}'))
    assert ";; service" in (root / "config.edn").read_text()


def test_edn_failures_come_back_as_strings(root):
    cap = caps.edn(root, writable=True)
    for name, args in [("read_edn", {}), ("set_edn", {"key_path": [":a"], "value": "1"}),
                       ("delete_edn", {"key_path": [":a"]})]:
        assert call(cap, name, {"path": "missing.edn", **args}) == "ERROR: No such file: missing.edn"
        assert call(cap, name, {"path": "config.edn/x.edn", **args}) == (
            "ERROR: No such file: config.edn/x.edn (config.edn is not a directory)")
    (root / "folder.edn").mkdir()
    assert call(cap, "read_edn", {"path": "folder.edn"}) == "ERROR: No such file: folder.edn (it is a directory)"
    assert call(cap, "set_edn", {"path": "folder.edn", "key_path": [":a"], "value": "1"}) == (
        "ERROR: No such file: folder.edn (it is a directory)")
    assert call(cap, "delete_edn", {"path": "config.edn", "key_path": [":nope"]}) == "ERROR: No such key: :nope"
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [], "value": "1"}) == (
        "ERROR: path must name at least one key")
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":a"], "value": "{:open"}).startswith(
        "ERROR: Unterminated collection in EDN")
    assert call(cap, "read_edn", {"path": "  "}) == "ERROR: path must not be blank"
    (root / "broken.edn").write_text("{:a 1")
    assert call(cap, "read_edn", {"path": "broken.edn"}).startswith("ERROR: Unterminated collection in EDN")
    assert (root / "config.edn").read_text() == CONFIG


@pytest.mark.parametrize("path", ["../outside.edn", "sub/../../outside.edn", "{tmp}/outside.edn", "/etc/hosts",
                                  "{tmp}/root-sibling/x.edn", "link.edn", "linked-dir/x.edn"])
def test_the_tools_honour_a_root(root, path):
    tmp = root.parent
    (tmp / "outside.edn").write_text("{:secret 1}")
    (tmp / "root-sibling").mkdir()
    (tmp / "root-sibling" / "x.edn").write_text("{:secret 1}")
    (root / "link.edn").symlink_to(tmp / "outside.edn")
    (root / "linked-dir").symlink_to(tmp / "root-sibling")
    cap = caps.edn(root, writable=True)
    path = path.format(tmp=tmp)
    refusal = f"ERROR: {path} escapes the allowed root {root}"
    assert call(cap, "read_edn", {"path": path}).startswith(refusal)
    assert call(cap, "set_edn", {"path": path, "key_path": [":secret"], "value": "2"}).startswith(refusal)
    assert call(cap, "delete_edn", {"path": path, "key_path": [":secret"]}).startswith(refusal)
    assert (tmp / "outside.edn").read_text() == "{:secret 1}"
    assert (tmp / "root-sibling" / "x.edn").read_text() == "{:secret 1}"


def test_paths_inside_the_root_work_however_they_are_spelled(root):
    (root / "sub").mkdir()
    (root / "sub" / "inner.edn").write_text("{:n 1}")
    (root / "alias.edn").symlink_to(root / "sub" / "inner.edn")
    cap = caps.edn(root)
    for path in ["sub/inner.edn", "sub/../sub/inner.edn", str(root / "sub" / "inner.edn"), "alias.edn"]:
        assert call(cap, "read_edn", {"path": path, "key_path": [":n"]}) == "1\n"


def test_the_root_is_pinned_when_the_capability_is_built(root, monkeypatch):
    monkeypatch.chdir(root.parent)
    cap = caps.edn("root")
    monkeypatch.chdir(root)
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":server", ":port"]}) == "8080\n"


# --- credential files -----------------------------------------------------------------------------

CREDENTIALS = [".env", "deploy/.env.production", ".ssh/config.edn", "keys/server.key", "tls/cert.pem",
               "home/.aws/credentials", "Home/.SSH/Keys.EDN"]


@pytest.fixture
def with_credentials(root):
    for rel in CREDENTIALS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('{:user "ci-bot"}')
    (root / "harmless.edn").symlink_to(".ssh/config.edn")
    return root


@pytest.mark.parametrize("path", [*CREDENTIALS, "harmless.edn", "sub/../.env"])
def test_credential_files_are_refused(with_credentials, path):
    root = with_credentials
    cap = caps.edn(root, writable=True)
    for name, args in [("read_edn", {}), ("read_edn", {"key_path": [":user"]}),
                       ("set_edn", {"key_path": [":user"], "value": '"root"'}),
                       ("delete_edn", {"key_path": [":user"]})]:
        text = call(cap, name, {"path": path, **args})
        assert text.startswith(f"ERROR: refusing to touch a credential file: {path}"), text
        assert text.endswith(". Only an edn capability built with allow_secrets=True may touch credential files.")
        assert "ci-bot" not in text
    if path == "harmless.edn":
        assert "(it resolves to .ssh/config.edn)" in text
    assert {rel: (root / rel).read_text() for rel in CREDENTIALS} == dict.fromkeys(CREDENTIALS, '{:user "ci-bot"}')


def test_credential_files_are_refused_without_a_root_too(with_credentials):
    path = str(with_credentials / ".ssh" / "config.edn")
    assert call(caps.edn(), "read_edn", {"path": path}).startswith(
        f"ERROR: refusing to touch a credential file: {path}. Only an edn capability")


def test_allow_secrets_opens_credential_files(with_credentials):
    cap = caps.edn(with_credentials, writable=True, allow_secrets=True)
    assert call(cap, "read_edn", {"path": "harmless.edn", "key_path": [":user"]}) == '"ci-bot"\n'
    assert call(cap, "set_edn", {"path": ".env", "key_path": [":user"], "value": '"ops"'}) == (
        'Set :user to "ops" in .env')
    assert (with_credentials / ".env").read_text() == '{:user "ops"}'


# --- size -------------------------------------------------------------------------------------------

def _blob(root, length, name="big.edn"):
    (root / name).write_text('{:blob "' + "x" * length + '" :small 1}')
    return name


def test_a_long_value_is_cut_and_says_how_much_was_shown(root):
    name = _blob(root, 150_000)
    whole = edn_module.pretty(edn_module.read_file(root / name)) + "\n"
    text = call(caps.edn(root), "read_edn", {"path": name})
    shown, note = text.split("\n\n[")
    assert shown == whole[:MAX_SHOWN_CHARS]
    assert note == f"Showed 100,000 of {len(whole):,} characters; read a longer key_path to see one part of this value.]"
    assert call(caps.edn(root), "read_edn", {"path": name, "key_path": [":small"]}) == "1\n"


@pytest.mark.parametrize("length, cut", [(MAX_SHOWN_CHARS - 3, False), (MAX_SHOWN_CHARS - 2, True)])
def test_the_cut_starts_just_past_the_limit(root, length, cut):
    name = _blob(root, length)
    text = call(caps.edn(root), "read_edn", {"path": name, "key_path": [":blob"]})
    if cut:
        assert text.endswith("[Showed 100,000 of 100,001 characters; read a longer key_path to see one part "
                             "of this value.]")
    else:
        assert len(text) == MAX_SHOWN_CHARS and text == '"' + "x" * length + '"\n'


def test_a_file_too_large_to_parse_is_refused_before_it_is_read_whole(root):
    (root / "huge.edn").write_text("{:a 1}\n;" + "x" * (MAX_FILE_BYTES - 7))
    assert (root / "huge.edn").stat().st_size == MAX_FILE_BYTES + 1
    cap = caps.edn(root, writable=True)
    refusal = (f"ERROR: huge.edn is too large for the EDN tools ({MAX_FILE_BYTES + 1:,} bytes; the limit is "
               f"{MAX_FILE_BYTES:,} bytes); the filesystem's read_file can read it in pages")
    assert call(cap, "read_edn", {"path": "huge.edn"}) == refusal
    assert call(cap, "set_edn", {"path": "huge.edn", "key_path": [":a"], "value": "2"}) == refusal
    assert (root / "huge.edn").stat().st_size == MAX_FILE_BYTES + 1
    (root / "huge.edn").write_text("{:a 1}\n;" + "x" * (MAX_FILE_BYTES - 8))
    assert call(cap, "set_edn", {"path": "huge.edn", "key_path": [":a"], "value": "2"}) == "Set :a to 2 in huge.edn"


def test_a_file_that_is_not_utf8_is_refused(root):
    (root / "latin.edn").write_bytes(b'{:name "caf\xe9"}')
    assert call(caps.edn(root), "read_edn", {"path": "latin.edn"}) == (
        "ERROR: latin.edn is not UTF-8 text, so it is not EDN (byte 11 is not valid)")


def test_a_fifo_is_refused_without_blocking(root):
    os.mkfifo(root / "pipe.edn")
    cap = caps.edn(root, writable=True)
    refusal = "ERROR: Cannot read pipe.edn: it is not a regular file (a device, FIFO or socket)"
    assert call(cap, "read_edn", {"path": "pipe.edn"}) == refusal
    assert call(cap, "set_edn", {"path": "pipe.edn", "key_path": [":a"], "value": "1"}) == refusal


# --- how an edit lands --------------------------------------------------------------------------------

def test_an_edit_replaces_the_target_of_a_symlink_and_keeps_its_mode(root):
    (root / "config.edn").chmod(0o640)
    (root / "alias.edn").symlink_to("config.edn")
    cap = caps.edn(root, writable=True)
    assert call(cap, "set_edn", {"path": "alias.edn", "key_path": [":debug"], "value": "true"}) == (
        "Set :debug to true in alias.edn")
    assert (root / "alias.edn").is_symlink()
    assert (root / "config.edn").read_text() == CONFIG.replace(":debug false", ":debug true")
    assert stat.S_IMODE((root / "config.edn").stat().st_mode) == 0o640
    assert sorted(os.listdir(root)) == ["alias.edn", "config.edn"]


def test_a_refused_edit_leaves_the_file_and_no_temp_file(root):
    cap = caps.edn(root, writable=True)
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":debug", ":x"], "value": "1"}) == (
        "ERROR: Cannot set :x inside false: only maps and vectors hold keys")
    assert call(cap, "delete_edn", {"path": "config.edn", "key_path": [":flags", "0"]}).startswith(
        "ERROR: :flags 0 is an item of a vector")
    assert (root / "config.edn").read_text() == CONFIG
    assert os.listdir(root) == ["config.edn"]


def test_a_directory_swapped_for_a_symlink_out_never_leaks(tmp_path):
    """While a thread flips root/flip between a real directory and a symlink to an outside one,
    read_edn and set_edn on flip/config.edn read and write only the inside file, or refuse."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "dir" / "config.edn").write_text('{:where "OUTSIDE-SECRET"}')
    (root / "flip_dir").mkdir(parents=True)
    (root / "flip_dir" / "config.edn").write_text('{:where "inside"}')
    os.symlink("../outside/dir", root / "flip_link")
    cap = caps.edn(root, writable=True)
    before = snapshot(outside)
    outcomes = Counter()
    writes = itertools.count(1)

    def body():
        tally(outcomes, "read", lambda: cap.read_edn("flip/config.edn", [":where"]))
        tally(outcomes, "wrote", lambda: cap.set_edn("flip/config.edn", [":n"], str(next(writes))))

    race(1.0, (root / "flip", root / "flip_dir", root / "flip_link"), body)
    assert snapshot(outside) == before
    assert outcomes["read"] and outcomes["wrote"] and outcomes["refused"], outcomes
    inside = edn_module.read_file(root / "flip_dir" / "config.edn")
    assert inside[edn_module.Keyword("where")] == "inside" and inside[edn_module.Keyword("n")] >= 1
    assert sorted(os.listdir(root)) == ["flip_dir", "flip_link"] and os.listdir(root / "flip_dir") == ["config.edn"]


def test_edn_composes_with_the_filesystem():
    reg = registry([caps.filesystem(writable=True), caps.edn(writable=True)])
    assert len(reg) == 7
    assert {name: t.capability for name, t in reg.items() if name.endswith("_edn")} == {
        "read_edn": "edn", "set_edn": "edn", "delete_edn": "edn"}
    assert reg["write_file"].capability == "filesystem"


def test_a_model_edits_a_config_through_the_loop(root):
    script = ChatScript([
        chat_message(tool_calls=[tool_call("read_edn", {"path": "config.edn", "key_path": [":server", ":port"]},
                                           id="c1")]),
        chat_message(tool_calls=[tool_call("set_edn", {"path": "config.edn", "key_path": [":server", ":port"],
                                                       "value": "8443"}, id="c2"),
                                 tool_call("read_edn", {"path": "../secret.edn"}, id="c3")]),
        chat_message("moved to 8443"),
    ])
    with LoopbackServer(script) as server:
        result = bettong_nb.openai(base_url=server.url, api_key="sk-test",
                                   capabilities=[caps.edn(root, writable=True)]).run("move the port")
    assert result.output == "moved to 8443"
    bodies = [r.json() for r in server.requests]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["read_edn", "set_edn", "delete_edn"]
    results = {m["tool_call_id"]: m["content"] for m in bodies[2]["messages"] if m["role"] == "tool"}
    assert results == {"c1": "8080\n", "c2": "Set :server :port to 8443 in config.edn",
                       "c3": f"ERROR: ../secret.edn escapes the allowed root {root}"}
    assert (root / "config.edn").read_text() == CONFIG.replace("8080", "8443")
    assert [c.tool for c in result.tool_calls] == ["read_edn", "set_edn", "read_edn"]
