"""``%agent save PATH [TARGET]`` and ``%agent load PATH [TARGET]`` in a real IPython InteractiveShell."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError

import bettong_nb
from bettong_nb.providers.scripted import Scripted
from support.wire import weather
from support.ipython_shell import ip, ok, run_cell, tool_agent  # noqa: F401  (ip is the shell fixture)


def user_prompts(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user" and isinstance(m["content"], str)]


def test_an_agent_targets_conversation_saved_and_loaded_onto_another_agent(ip, tmp_path):
    path = tmp_path / "bot.json"
    ip.user_ns["bot"] = tool_agent(Scripted([[("note", {"text": "a"})], "noted."]))
    ok(ip, "%%agent bot\nfirst question")
    out = ok(ip, f"%agent save {path} bot").stdout
    assert f"Saved bot (1 turn) to {path}" in out
    assert json.loads(path.read_text())["transcript"][1]["content"] == "first question"

    model = Scripted(["second answer"])
    ip.user_ns["x"] = tool_agent(model)
    out = ok(ip, f"%agent load {path} x").stdout
    assert "into x (1 turn): the next %%agent x cell continues it." in out
    ok(ip, "%%agent x\nsecond question")
    assert user_prompts(model.requests[0]) == ["first question", "second question"]
    session = ip.user_ns["_agent_session"]
    assert session.agent is ip.user_ns["x"] and session.turns == 2 and [c.tool for c in session.tool_calls] == ["note"]


def test_the_default_session_saves_and_loads(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    ok(ip, "%%agent\nHello there")
    default = ip.user_ns["_agent_session"]
    assert "Saved the default session (1 turn)" in ok(ip, "%agent save ~/d.json").stdout
    assert (tmp_path / "d.json").exists()
    ok(ip, "%agent reset")
    assert default.turns == 0
    assert "into the default session (1 turn): the next %%agent cell" in ok(ip, "%agent load ~/d.json").stdout
    assert default.turns == 1 and default.transcript[1]["content"] == "Hello there"
    ok(ip, "%%agent\nAgain")
    assert ip.user_ns["_agent_session"] is default and default.turns == 2


def test_a_session_target_is_loaded_in_place(ip, tmp_path):
    saved = bettong_nb.agent(provider=Scripted(["one"])).session()
    saved.run("from the file")
    saved.save(tmp_path / "s.json")
    chat = bettong_nb.agent(provider=Scripted(["two"])).session()
    ip.user_ns["chat"] = chat
    ok(ip, f"%agent load {tmp_path / 's.json'} chat")
    ok(ip, "%%agent chat\nnext")
    assert chat.turns == 2 and user_prompts(chat.agent.provider.requests[0]) == ["from the file", "next"]


@pytest.mark.parametrize("line, message", [
    ("%agent save", "%agent save takes PATH and an optional TARGET"),
    ("%agent load a b c", "%agent load takes PATH and an optional TARGET"),
    ("%agent save out.json", "No default session yet"),
    ("%agent load {tmp}/missing.json bot", "No such file"),
    ("%agent load {tmp}/not-a-session.json bot", "is not a saved bettong_nb session"),
    ("%agent load {tmp}/weather.json bot", "used tools this agent does not have: get_weather"),
])
def test_errors_are_clear_usage_errors(ip, tmp_path, line, message):
    (tmp_path / "not-a-session.json").write_text("{}")
    chat = bettong_nb.agent(provider=Scripted([[("get_weather", {"city": "Oslo"})], "Rain."]),
                            capabilities=[weather()]).session()
    chat.run("Weather?")
    chat.save(tmp_path / "weather.json")
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted())
    result, captured = run_cell(ip, line.format(tmp=tmp_path))
    error = result.error_in_exec or result.error_before_exec
    assert isinstance(error, UsageError), (error, captured.stdout)
    assert message in str(error)


def test_paths_are_quoted_as_in_a_shell_and_os_errors_name_the_path(ip, tmp_path):
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted(["one"]))
    ip.user_ns["other"] = bettong_nb.agent(provider=Scripted(["two"]))
    ok(ip, "%%agent bot\nhello")
    for written, line in [("my chat.json", f'%agent save "{tmp_path}/my chat.json" bot'),
                          ("quoted.json", f"%agent save '{tmp_path}/quoted.json' bot"),
                          ("plain.json", f'%agent save "{tmp_path}/plain.json"   bot')]:
        assert f"to {tmp_path / written}" in ok(ip, line).stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my chat.json", "plain.json", "quoted.json"]
    assert "into other (1 turn)" in ok(ip, f"%agent load '{tmp_path}/my chat.json' other").stdout

    for line, message in [
        (f"%agent save {tmp_path}/nope/x.json bot",
         f"%agent save {tmp_path}/nope/x.json: its folder {tmp_path}/nope does not exist"),
        (f"%agent save {tmp_path} bot",
         f"%agent save {tmp_path}: it is a folder; name a file in it, e.g. {tmp_path}/chat.json"),
        (f"%agent load {tmp_path} bot", f"%agent load {tmp_path}: it is a folder"),
        (f"%agent load {tmp_path}/nope/x.json bot", "its folder"),
        (f"%agent load {tmp_path}/none.json bot", f"%agent load {tmp_path}/none.json: No such file or directory"),
        (f'%agent save "{tmp_path}/open.json bot', "No closing quotation; quote a path with spaces"),
    ]:
        result, _ = run_cell(ip, line)
        error = result.error_in_exec or result.error_before_exec
        assert isinstance(error, UsageError) and message in str(error), (line, error)
        assert ".tmp" not in str(error)  # never the temporary file a save writes first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my chat.json", "plain.json", "quoted.json"]
