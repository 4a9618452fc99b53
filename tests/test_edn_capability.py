"""The EDN capability: its tools, what they say to the model, and where they may reach."""

import asyncio
import json
import os
import re

import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb import edn as edn_module
from bettong_nb.capability import invoke, registry, schemas
from servers import ChatScript, LoopbackServer, chat_message, tool_call

CONFIG = """;; service
{:server {:host "localhost"
          :port 8080}   ; the public port
 :flags [:a :b]
 "name" "svc"
 :debug false}
"""


def call(cap, name, args):
    text, redactions = asyncio.run(invoke(registry([cap]), name, args))
    assert redactions == 0
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
    file = os.path.realpath(root / "config.edn")
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":server", ":port"]}) == "8080\n"
    assert call(cap, "set_edn", {"path": "config.edn", "key_path": [":server", ":port"], "value": "9090"}) == (
        f"Set :server :port to 9090 in {file}")
    assert (root / "config.edn").read_text() == CONFIG.replace("8080", "9090")
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":server", ":host"]}) == '"localhost"\n'
    assert call(cap, "read_edn", {"path": "config.edn", "key_path": [":debug"]}) == "false\n"
    assert call(cap, "delete_edn", {"path": "config.edn", "key_path": [":debug"]}) == f"Removed :debug from {file}"
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
    file = os.path.realpath(root / "config.edn")
    assert call(caps.edn(root), "read_edn", {"path": "config.edn", "key_path": [":nope"]}) == (
        f"No value at :nope in {file}")
    assert call(caps.edn(root), "read_edn", {"path": "config.edn", "key_path": [":server", ":nope"]}).startswith(
        "No value at :server :nope in ")


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
    missing = os.path.realpath(root / "missing.edn")
    for name, args in [("read_edn", {}), ("set_edn", {"key_path": [":a"], "value": "1"}),
                       ("delete_edn", {"key_path": [":a"]})]:
        assert call(cap, name, {"path": "missing.edn", **args}) == f"ERROR: No such file: {missing}"
    (root / "folder.edn").mkdir()
    assert call(cap, "read_edn", {"path": "folder.edn"}).startswith("ERROR: No such file: ")
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
    assert call(cap, "read_edn", {"path": path}) == f"ERROR: {path} escapes the allowed root {root}"
    assert call(cap, "set_edn", {"path": path, "key_path": [":secret"], "value": "2"}).endswith(
        "escapes the allowed root " + str(root))
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
    file = os.path.realpath(root / "config.edn")
    assert results == {"c1": "8080\n", "c2": f"Set :server :port to 8443 in {file}",
                       "c3": f"ERROR: ../secret.edn escapes the allowed root {root}"}
    assert (root / "config.edn").read_text() == CONFIG.replace("8080", "8443")
    assert [c.tool for c in result.tool_calls] == ["read_edn", "set_edn", "read_edn"]
