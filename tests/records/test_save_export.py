"""Saving a session, resuming it on an agent, and exporting it (.json .md .html .ipynb).

Resumed turns go to loopback model servers in the three wire formats; exported notebooks are
validated by nbformat and run in a real kernel; every written file is scanned for secrets.
"""

from __future__ import annotations

import base64
import struct
import zlib
import binascii
import json
from html.parser import HTMLParser

import nbformat
import pytest

import bettong_nb
from bettong_nb import ToolOutput, events, secrets
from bettong_nb.notebook import display
from bettong_nb.providers.scripted import Scripted
from bettong_nb.records.saving import VERSION, ResumeError
from support.notebooks import data, run_notebook
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call
from support.wire import KEY, weather
from support.images import RED, image_block, image_session, png


def png_claiming(width: int, height: int, idat: bytes = zlib.compress(b"\x00\x00\x00\x00")) -> bytes:
    """A PNG whose header says ``width`` x ``height`` and whose data is ``idat`` (too little)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _nested(depth: int):
    value: object = "bottom"
    for _ in range(depth):
        value = {"a": [value]} if isinstance(value, str) or len(str(type(value))) % 2 else [value]
    return value


# --- save → load → next turn: the cached prefix holds -----------------------------------------

def test_a_resumed_session_sends_exactly_what_the_original_would_have(w, board, tmp_path):
    final = w.body("final")
    server = board.serve(w.name, w.script([w.body(w.tool_case), final, final, final]))
    original = w.build(server.url, capabilities=[weather()]).session()
    original.run("Weather in Vilnius?")
    path = original.save(tmp_path / "chat.json")

    warnings = []
    fresh = w.build(server.url, capabilities=[weather()],
                    on_event=lambda e: isinstance(e, events.CacheWarning) and warnings.append(e))
    resumed = bettong_nb.load_session(path, fresh)
    assert resumed.agent is fresh and resumed.transcript == original.transcript and resumed.turns == 1
    resumed.run("And tomorrow?")
    original.run("And tomorrow?")

    first_turn_last, from_resumed, from_original = server.requests[1], server.requests[2], server.requests[3]
    # byte for byte what the session would have sent had it never been saved
    assert from_resumed.body == from_original.body
    # and it extends the last request of the saved turn: same tools and system, messages appended
    before, after = first_turn_last.json(), from_resumed.json()
    assert {k: v for k, v in before.items() if k != "messages"} == {k: v for k, v in after.items() if k != "messages"}
    old = json.dumps(before["messages"], ensure_ascii=False)
    assert json.dumps(after["messages"], ensure_ascii=False).startswith(old[:-1])
    assert warnings == []
    assert resumed.turns == 2 and [r.turn for r in resumed.requests] == [1, 1, 2]
    assert resumed.usage == original.usage
    saved_call, call = resumed.tool_calls[0], original.tool_calls[0]
    assert (saved_call.tool, saved_call.capability, saved_call.args, saved_call.result, saved_call.status,
            saved_call.duration_s, saved_call.turn) == (call.tool, call.capability, call.args, call.result,
                                                        call.status, call.duration_s, 1)


def test_a_resumed_session_warns_when_its_agent_offers_other_tools(tmp_path):
    chat = bettong_nb.agent(provider=Scripted(["one", "two"]), capabilities=[weather()]).session()
    chat.run("hi")
    chat.save(tmp_path / "chat.json")
    warnings = []
    other = {"id": "more", "tools": [bettong_nb.tool(lambda x: x, name="echo", description="Echo.")]}
    agent = bettong_nb.agent(provider=Scripted(["three"]), capabilities=[weather(), other],
                             prices={"input": 1, "output": 1},  # a priced model: the full-price prompt costs money
                             on_event=lambda e: isinstance(e, events.CacheWarning) and warnings.append(e))
    bettong_nb.load_session(tmp_path / "chat.json", agent).run("again")
    assert [w.moved for w in warnings] == ["tools"] and "New tools in this conversation (echo)" in warnings[0].message


def test_a_save_that_redacted_the_transcript_says_so_and_the_resumed_turn_warns(tmp_path):
    token = "ghp_1234567890abcdefghijABCDEFGHIJ123456"  # a GitHub token's shape, in the model's answer
    script = [chat_message(f"Use {token} there."), chat_message("ok"), chat_message("ok"), chat_message("ok")]
    with LoopbackServer(ChatScript(script)) as server:
        chat = bettong_nb.openai(base_url=server.url, api_key="k", model="m").session()
        chat.run("Which token?")
        path = chat.save(tmp_path / "chat.json")
        text = path.read_text()
        assert token not in text and json.loads(text)["transcript_redactions"] == 1

        warnings = []
        agent = bettong_nb.openai(base_url=server.url, api_key="k", model="m",
                                  on_event=lambda e: isinstance(e, events.CacheWarning) and warnings.append(e))
        resumed = bettong_nb.load_session(path, agent)
        resumed.run("next")
        resumed.run("and next")
        sent = server.requests[1].json()["messages"]
        assert "[redacted]" in json.dumps(sent) and token not in server.requests[1].text  # not what was cached
        assert [(w.moved, "redacted 1 secret-shaped stretch of the transcript" in w.message) for w in warnings] == [
            ("transcript", True)]  # once: the turn after it is on its own cached prefix again

        clean = bettong_nb.openai(base_url=server.url, api_key="k", model="m").session()
        clean.transcript = resumed.transcript  # nothing secret-shaped left in it
        assert json.loads(clean.save(tmp_path / "clean.json").read_text())["transcript_redactions"] == 0


def test_the_resumed_turn_keeps_the_saved_system_prompt(tmp_path):
    chat = bettong_nb.agent(provider=Scripted(["one"]), system="You are terse.").session()
    chat.run("hi")
    chat.save(tmp_path / "chat.json")
    model = Scripted(["two"])
    bettong_nb.load_session(tmp_path / "chat.json", bettong_nb.agent(provider=model, system="Be verbose.")).run("x")
    assert model.requests[0].system[0].text == "You are terse."


def test_load_into_a_session_replaces_its_conversation(tmp_path):
    saved = bettong_nb.agent(provider=Scripted(["one"])).session()
    saved.run("first")
    saved.save(tmp_path / "chat.json")
    target = bettong_nb.agent(provider=Scripted(["x", "three"])).session()
    target.run("something else")
    assert bettong_nb.load_session(tmp_path / "chat.json", target) is target
    assert target.turns == 1 and [m["content"] for m in target.transcript[1::2]] == ["first"]
    target.run("next")
    assert target.turns == 2 and target.last.output == "three"


# --- what the file holds ----------------------------------------------------------------------

def test_the_file_holds_the_session_and_says_what_it_left_out(tmp_path):
    import pandas as pd

    def table() -> ToolOutput:
        """A table."""
        return ToolOutput(text="a table of 2 rows", data=pd.DataFrame({"a": [1, 2]}))

    frames = {"id": "frames", "tools": [bettong_nb.tool(table)]}
    with LoopbackServer(ChatScript([chat_message(tool_calls=[tool_call("table", {}, "c1")]),
                                    chat_message("Two rows.")])) as server:
        agent = bettong_nb.openai(base_url=server.url.replace("http://", "http://user:pw-9f8e7d6c@") + "/v1?key=abc",
                                  api_key=KEY, model="test-model", capabilities=[frames, weather()],
                                  max_steps=4, temperature=0.25, system="Be brief.", timeout={"read": 5},
                                  prices={"input": 0.5, "output": 1.5}, approve_fn=lambda request: True)
        chat = agent.session()
        chat.run("Make a table")
    doc = json.loads(chat.save(tmp_path / "chat.json").read_text())
    assert (doc["format"], doc["version"], doc["kind"]) == ("bettong_nb.session", VERSION, "session")
    assert doc["provider"] == {"name": "openai", "type": "OpenAIProvider", "model": agent.provider.model,
                               "base_url": server.url + "/v1"}
    assert doc["options"]["base_url"] == server.url + "/v1"
    assert {k: doc["options"][k] for k in ("max_steps", "temperature", "system", "prices", "model")} == {
        "max_steps": 4, "temperature": 0.25, "system": "Be brief.", "prices": {"input": 0.5, "output": 1.5},
        "model": "test-model"}
    assert doc["options"]["timeout"] == {"read": 5}
    assert not {"api_key", "approve_fn", "on_event", "provider", "capabilities", "messages"} & set(doc["options"])
    assert "api_key and every other secret" in doc["not_saved"]
    assert doc["capabilities"] == ["frames", "weather"]
    assert [t["name"] for t in doc["tools"]] == ["table", "get_weather"]
    assert doc["transcript"] == chat.transcript
    (call,) = doc["tool_calls"]
    assert call["data"] == "not saved (DataFrame)" and call["status"] == "ok" and call["result"] == "a table of 2 rows"
    assert call["duration_s"] == chat.tool_calls[0].duration_s and call["turn"] == 1
    assert [(r["turn"], r["step"], r["usage"]["prompt_tokens"]) for r in doc["requests"]] == [(1, 1, 10), (1, 2, 10)]
    assert doc["turns"] == [{"turn": 1, "messages": 5, "output": "Two rows.", "done": True, "steps": 2,
                             "stop_reason": "end_turn", "reason": None, "redactions": 0, "error": None,
                             "usage": doc["usage"]}]
    assert doc["usage"]["total_tokens"] == 24
    # read back: DataFrames are gone, everything else is as it was
    resumed = bettong_nb.load_session(tmp_path / "chat.json", agent)
    assert resumed.tool_calls[0].data is None and chat.tool_calls[0].data is not None
    assert resumed.last.output == "Two rows." and resumed.cost() == chat.cost()
    assert resumed.usage_frame().equals(chat.usage_frame())


def test_an_option_that_is_not_plain_data_is_named_as_left_out(tmp_path):
    class Answer:  # e.g. a schema given as a class
        pass

    chat = bettong_nb.agent(provider=Scripted(["a"]), format=Answer, max_steps=3).session()
    chat.run("hi")
    doc = json.loads(chat.save(tmp_path / "chat.json").read_text())
    assert "format" not in doc["options"] and doc["options"]["max_steps"] == 3
    assert "option format (not plain data)" in doc["not_saved"]


def test_a_run_result_exports_as_a_loadable_session(tmp_path):
    agent = bettong_nb.agent(provider=Scripted([[("get_weather", {"city": "Riga"})], "Rain.", "Still rain."]),
                             capabilities=[weather()])
    result = agent.run("Weather?")
    doc = json.loads(result.export(tmp_path / "run.json").read_text())
    assert doc["kind"] == "result" and doc["transcript"] == result.messages and doc["provider"] is None
    resumed = bettong_nb.load_session(tmp_path / "run.json", agent)
    assert resumed.turns == 1 and resumed.last.output == "Rain."
    assert resumed.run("And now?").output == "Still rain."


# --- load errors ------------------------------------------------------------------------------

def test_loading_on_an_agent_without_the_tools_names_them_and_what_it_has(tmp_path):
    chat = bettong_nb.agent(provider=Scripted([[("get_weather", {"city": "Oslo"})], "Rain."]),
                            capabilities=[weather()]).session()
    chat.run("Weather?")
    chat.save(tmp_path / "chat.json")
    other = {"id": "notes", "tools": [bettong_nb.tool(lambda text: text, name="note", description="Note.")]}
    with pytest.raises(ResumeError) as caught:
        bettong_nb.load_session(tmp_path / "chat.json", bettong_nb.agent(provider=Scripted(), capabilities=[other]))
    message = str(caught.value)
    assert "used tools this agent does not have: get_weather" in message
    assert "The agent's capabilities: notes (note)" in message and "the conversation had: weather" in message
    with pytest.raises(ResumeError, match="capabilities: none"):
        bettong_nb.load_session(tmp_path / "chat.json", bettong_nb.agent(provider=Scripted()))


@pytest.mark.parametrize("content, message", [
    ('{"cells": [], "nbformat": 4}', "is not a saved bettong_nb session"),
    ("[1, 2]", "is not a saved bettong_nb session"),
    ("not json at all", "not JSON"),
    ('{"format": "bettong_nb.session", "version": 99, "transcript": []}', "upgrade bettong_nb"),
    ('{"format": "bettong_nb.session", "version": 1, "transcript": []}', "damaged session file"),
])
def test_a_file_that_is_not_a_session_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "other.json"
    path.write_text(content)
    with pytest.raises(ResumeError, match=message):
        bettong_nb.load_session(path, bettong_nb.agent(provider=Scripted()))


def _real_file(tmp_path) -> tuple[dict, dict]:
    """A saved session with a tool call, a prompt image, a tool image and two turns, as JSON, and
    the capability that resumes it."""
    capability = {"id": "charts", "tools": [bettong_nb.tool(
        lambda city: ToolOutput(f"chart of {city}", images=[bettong_nb.Image(png(2, 2, rgb=(0, 0, 255)))]),
        name="chart", description="A chart.")]}
    model = Scripted([[("chart", {"city": "Oslo"})], "Blue.", "Done."])
    chat = bettong_nb.agent(provider=model, capabilities=[capability]).session()
    chat.run(["Chart it", bettong_nb.Image(png(2, 2, rgb=RED))])
    chat.run("And now?")
    return json.loads(chat.save(tmp_path / "real.json").read_text()), capability


def _blocks_of(doc: dict, kind: str) -> list[dict]:
    return [b for m in doc["transcript"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == kind]


def _set(path: str, value):
    """A mutation: the value at ``path`` (keys and indexes, dotted) set to ``value``."""
    def mutate(doc: dict) -> None:
        *parents, last = [int(p) if p.lstrip("-").isdigit() else p for p in path.split(".")]
        for part in parents:
            doc = doc[part]
        doc[last] = value
    return mutate


def _drop(path: str):
    def mutate(doc: dict) -> None:
        *parents, last = [int(p) if p.lstrip("-").isdigit() else p for p in path.split(".")]
        for part in parents:
            doc = doc[part]
        del doc[last]
    return mutate


def _first_block(kind: str, change):
    return lambda doc: change(_blocks_of(doc, kind)[0])


CORRUPT = {  # name: (how the real file is changed, what the error must say)
    "version 0": (_set("version", 0), "format version int 0"),
    "version true": (_set("version", True), "format version bool true"),
    "version a string": (_set("version", "1"), "format version str"),
    "kind unknown": (_set("kind", "banana"), "kind should be"),
    "no transcript": (_drop("transcript"), "transcript should be list, not NoneType"),
    "transcript a string": (_set("transcript", "hello"), "transcript should be list"),
    "system message removed": (lambda d: d["transcript"].pop(0), "does not start with the system message"),
    "system content a list": (_set("transcript.0.content", []), "transcript[0].content (the system prompt)"),
    "content a number": (_set("transcript.1.content", 5), "transcript[1].content should be str or list, not int 5"),
    "message a string": (lambda d: d["transcript"].insert(1, "hello"), "transcript[1] should be dict"),
    "role wizard": (_set("transcript.1.role", "wizard"), "transcript[1].role is 'wizard'"),
    "second system message": (_set("transcript.1.role", "system"), "transcript[1].role is 'system'"),
    "no role": (_drop("transcript.1.role"), "transcript[1] has no 'role'"),
    "block without type": (lambda d: d["transcript"][1]["content"][0].pop("type"), "content[0].type should be str"),
    "block type unknown": (_set("transcript.1.content.0.type", "video"), "'video', not a block type"),
    "text not a string": (_set("transcript.1.content.0.text", ["a"]), "content[0].text should be str"),
    "tool_use without id": (_first_block("tool_use", lambda b: b.pop("id")), "has no 'id'"),
    "tool_use empty name": (_first_block("tool_use", lambda b: b.update(name="")), "empty id or name"),
    "tool_result of no call": (_first_block("tool_result", lambda b: b.update(tool_use_id="nope")),
                               "answers tool call 'nope', which no earlier message made"),
    "tool_result content a dict": (_first_block("tool_result", lambda b: b.update(content={})),
                                   ".content should be str, not dict"),
    "image data not base64": (_first_block("image", lambda b: b.update(data="!!!not base64")),
                              "is not an image's base64"),
    "image data not an image": (_first_block("image", lambda b: b.update(data="aGVsbG8gd29ybGQ=")),
                                "is not an image's base64"),
    "image media type bogus": (_first_block("image", lambda b: b.update(media_type="image/tiff")),
                               "is not an image's base64 (unsupported image media type"),
    "tool image broken": (_first_block("tool_result", lambda b: b["images"][0].update(data="AAAA")),
                          ".images[0] is not an image's base64"),
    # decoded at load: each of these passed the header check, and went out with the next request
    "image 10 gigapixels": (_first_block("image", lambda b: b.update(data=_b64(png_claiming(100_000, 100_000)))),
                            "is not an image that can be sent: this image declares 100000×100000 px"),
    "image data cut short": (_first_block("image", lambda b: b.update(data=_b64(png_claiming(64, 64)))),
                             "is not an image that can be sent: this image/png image (64×64 px by its header) is damaged"),
    "image data scrambled": (_first_block("image", lambda b: b.update(data=_b64(png_claiming(4, 4, b"\x78\x9c" + bytes(40))))),
                             "is not an image that can be sent"),
    "tool image a bomb": (_first_block("tool_result", lambda b: b["images"][0].update(
        data=_b64(png_claiming(200_000, 60_000)))), ".images[0] is not an image that can be sent"),
    # what could never be saved again (RecursionError) is refused at load
    "tool input 900 deep": (_first_block("tool_use", lambda b: b.update(input={"x": _nested(900)})),
                            "nests deeper than 110 levels"),
    "options 300 deep": (_set("options.prices", _nested(300)), "nests deeper than 110 levels"),
    "tools a string": (_set("tools", "abc"), "tools should be list or null, not str"),
    "tools of strings": (_set("tools", ["abc"]), "tools[0] should be dict"),
    "tool without parameters": (lambda d: d["tools"][0].pop("parameters"), "tools[0] has no 'parameters'"),
    "capabilities a number": (_set("capabilities", 5), "capabilities should be list or null"),
    "options a list": (_set("options", [1]), "options should be dict or null"),
    "prices a string": (_set("options.prices", "cheap"), "options.prices should be dict or null"),
    "turns null": (_set("turns", None), "turns should be list"),
    "turn 1e400": (_set("turns.0.turn", float("inf")), "turns[0].turn should be int, not float inf"),
    "turn a string": (_set("turns.0.turn", "1"), "turns[0].turn should be int"),
    "turn zero": (_set("turns.0.turn", 0), "counts turn 0"),
    "turn messages beyond the transcript": (_set("turns.0.messages", 10 ** 6), "does not hold"),
    "turn messages huge": (_set("turns.0.messages", 10 ** 30), "turns[0].messages should be int"),
    "turn done a string": (_set("turns.0.done", "yes"), "turns[0].done should be bool"),
    "turn without usage": (_drop("turns.0.usage"), "turns[0] has no 'usage'"),
    "usage a string": (_set("usage", "lots"), "usage should be token counts"),
    "usage negative": (_set("usage.prompt_tokens", -5), "usage should be token counts"),
    "request without step": (_drop("requests.0.step"), "requests[0] has no 'step'"),
    "request latency text": (_set("requests.0.latency_s", "fast"), "requests[0].latency_s should be float"),
    "tool call without tool": (_drop("tool_calls.0.tool"), "tool_calls[0] has no 'tool'"),
    "tool call duration NaN": (_set("tool_calls.0.duration_s", float("nan")), "duration_s should be float or null"),
    "transcript_redactions text": (_set("transcript_redactions", "two"), "transcript_redactions should be int"),
}


@pytest.mark.parametrize("name", list(CORRUPT))
def test_a_corrupt_or_hand_edited_file_is_a_resume_error_naming_what_is_wrong(tmp_path, name):
    doc, capability = _real_file(tmp_path)
    mutate, says = CORRUPT[name]
    mutate(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them (and reads them back)
    model = Scripted(["never"])
    with pytest.raises(ResumeError) as caught:
        bettong_nb.load_session(path, bettong_nb.agent(provider=model, capabilities=[capability]))
    assert str(caught.value).startswith(str(path)) and says in str(caught.value), str(caught.value)
    assert model.requests == []


def test_the_real_file_of_the_corpus_resumes(tmp_path):
    doc, capability = _real_file(tmp_path)
    assert len(_blocks_of(doc, "image")) == 1 and len(_blocks_of(doc, "tool_use")) == 1
    assert _blocks_of(doc, "tool_result")[0]["images"]
    model = Scripted(["Resumed."])
    resumed = bettong_nb.load_session(tmp_path / "real.json", bettong_nb.agent(provider=model, capabilities=[capability]))
    assert resumed.run("go on").output == "Resumed." and resumed.turns == 3


@pytest.mark.parametrize("raw, says", [
    (b'{"format": "bettong_nb.session", "version": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "nested deeper"),
    (b"\x00\xff\xfe garbage", "not JSON"),
    (b"", "not JSON"),
])
def test_a_file_that_is_no_json_session_at_all_is_a_resume_error(tmp_path, raw, says):
    path = tmp_path / "odd.json"
    path.write_bytes(raw)
    with pytest.raises(ResumeError, match=says):
        bettong_nb.load_session(path, bettong_nb.agent(provider=Scripted()))


def test_an_unknown_export_extension_is_a_clear_error(tmp_path):
    chat = bettong_nb.agent(provider=Scripted(["a"])).session()
    with pytest.raises(ValueError, match=r"chat.pdf'.*one of .md, .html, .ipynb, .json"):
        chat.export(tmp_path / "chat.pdf")
    assert list(tmp_path.iterdir()) == []


# --- no secret in any file ----------------------------------------------------------------------

ENV_SECRET = "envsecret-4c1d9b7e2a6f"
HELD_SECRET = "held-by-capability-8e3f2a91"


class Vault:
    """A capability holding a secret, whose tool hands it (and the environment's) back."""

    id = "vault"
    instructions = None

    def __init__(self):
        self.tools = [bettong_nb.tool(self.open_vault)]

    def open_vault(self) -> str:
        """Open the vault."""
        return f"held {HELD_SECRET}; env {ENV_SECRET}; key {KEY}"

    def secret_values(self) -> list[str]:
        return [HELD_SECRET]


def forms(secret: str) -> list[str]:
    raw = secret.encode()
    encoded = [base64.b64encode(raw[i:]).decode().rstrip("=") for i in range(3)]
    return [secret, *encoded, *(e.replace("+", "-").replace("/", "_") for e in encoded), binascii.hexlify(raw).decode()]


def test_no_secret_reaches_any_saved_or_exported_file(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPORT_TEST_SERVICE_TOKEN", ENV_SECRET)
    leaky = " ".join(f"{s} {base64.b64encode(s.encode()).decode()}" for s in (KEY, ENV_SECRET, HELD_SECRET))
    script = [chat_message(tool_calls=[tool_call("open_vault", {}, "c1")]),
              chat_message(f"The vault said: {leaky}"), chat_message(f"Again: {leaky}")]
    with LoopbackServer(ChatScript(script)) as server:
        chat = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY, capabilities=[Vault()]).session()
        chat.run(f"My key is {KEY}, open the vault")  # the person typed it: the file still must not hold it
        result = chat.run("again")
    assert ENV_SECRET in chat.last.output  # what the model said is kept in memory as it was
    files = [chat.save(tmp_path / "saved.json")]
    with secrets.revealed():  # revealing tool output for a moment does not reveal the disk
        files.append(chat.save(tmp_path / "revealed.json"))
    files += [chat.export(tmp_path / f"chat.{ext}") for ext in ("md", "html", "ipynb", "json")]
    files += [result.export(tmp_path / f"run.{ext}") for ext in ("md", "html", "ipynb", "json")]
    for path in files:
        text = path.read_text()
        assert "[redacted]" in text, path.name
        for secret in (KEY, ENV_SECRET, HELD_SECRET):
            found = [form for form in forms(secret) if form in text]
            assert found == [], (path.name, secret, found)
    assert "open_vault" in (tmp_path / "chat.md").read_text()  # the rest is there


# --- exports ------------------------------------------------------------------------------------


class Loads(HTMLParser):
    """Every URL the page would fetch by itself (src, srcset, poster, data, link href, CSS url())."""

    FETCHING = {"src", "srcset", "poster", "data", "background"}

    def __init__(self):
        super().__init__()
        self.urls, self.tags, self.styles, self.images = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in self.FETCHING or (tag == "link" and name == "href"):
                self.urls.append(value or "")
            if name == "style":
                self.styles.append(value or "")
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_data(self, text):
        if self.tags and self.tags[-1] == "style":
            self.styles.append(text)


def test_html_export_is_the_notebook_html_in_a_page_that_fetches_nothing(tmp_path):
    chat = image_session()
    page = chat.export(tmp_path / "chat.html").read_text()
    assert display.session_html(chat) in page  # the very HTML a notebook shows
    parsed = Loads()
    parsed.feed(page)
    assert parsed.urls and all(url.startswith("data:image/png;base64,") for url in parsed.urls), parsed.urls
    assert len(parsed.images) == 3  # the prompt's and the two tool calls'
    assert not {"script", "link", "iframe", "object", "embed", "base"} & set(parsed.tags)
    assert not any("url(" in style or "@import" in style for style in parsed.styles)
    assert "default-src 'none'; img-src data:" in page
    assert "attacker.example" in page and 'src="http://attacker.example' not in page
    assert "&lt;b&gt;now&lt;/b&gt;" in page
    result_page = chat.last.export(tmp_path / "run.html").read_text()
    assert display.result_html(chat.last) in result_page


def test_markdown_export_reads_as_the_conversation(tmp_path):
    chat = image_session()
    text = chat.export(tmp_path / "chat.md").read_text()
    assert text.startswith("# bettong_nb session · 2 turns\n")
    assert text.index("## Turn 1") < text.index("What is this?") < text.index("Let me draw it.") \
        < text.index("- `plot()` → ok") < text.index("It is a red square.") < text.index("## Turn 2")
    assert "[image: image/png, " in text and "base64" not in text and "iVBOR" not in text
    assert text.count("  - \\[image: image/png") == 2 and text.count("\n\\[image: image/png") == 1
    # the answer's image and HTML are text: no image the reader fetches
    assert "\\[image: leak `http://attacker.example/x?d=1`\\]" in text and "&lt;img" in text
    assert "    ```text\n    a red square\n    ```" in text
    assert "*2 requests" in text and "· cost" in text
    import mistune

    html = mistune.html(text)  # it parses as the nested lists it means
    assert "<li><code>plot()</code> → ok" in html and '<code class="language-json">' in html
    assert "<img" not in html and "[image: leak <code>http://attacker.example/x?d=1</code>]" in html


def test_notebook_export_validates_and_runs_with_its_tool_calls_kept(tmp_path):
    chat = image_session()
    path = chat.export(tmp_path / "chat.ipynb")
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    kinds = [c.cell_type for c in notebook.cells]
    assert kinds == ["markdown", "markdown", "code", "markdown", "code"]
    first = notebook.cells[1]
    assert first.source.startswith("## Turn 1\n\n**You**\n\nWhat is this?")
    assert "It is a red square." in first.source and "](attachment:image-1.png)" in first.source
    (attached,) = first.attachments.values()
    assert base64.b64decode(attached["image/png"]) == png(2, 2, rgb=(0, 0, 255))
    tools = notebook.cells[2]
    assert tools.source == "" and tools.metadata["jupyter"]["source_hidden"] is True
    (block,) = data(tools, "text/html")
    assert block.startswith("<details") and "plot()" in block
    assert data(tools, "image/png") == [image_block()["data"]]
    ran = run_notebook(nbformat.read(path, as_version=4), tmp_path)
    assert [c.get("outputs") for c in ran.cells if c.cell_type == "code"] == \
        [c.outputs for c in notebook.cells if c.cell_type == "code"]


def test_print_and_every_export_show_the_cost_the_ledger_prices(tmp_path):
    """One way of pricing: the usage line of print(result), the Markdown and the notebook export
    is the Ledger's (each request priced on its own), the one the notebook display shows."""
    prices = {"input": 0.27, "output": 1.1, "currency": "EUR"}
    with LoopbackServer(ChatScript([chat_message("one"), chat_message("two")])) as server:
        chat = bettong_nb.openai(base_url=server.url, api_key=KEY, model="m", prices=prices).session()
        first = chat.run("first")
        chat.run("second")
    assert "· cost €" in first.usage_line() and first.usage_line() in str(first)
    for suffix in (".md", ".ipynb"):
        text = chat.export(tmp_path / f"chat{suffix}").read_text()
        assert first.usage_line().replace("(", "").split("· ")[-1] in text.replace("\\", ""), suffix


@pytest.mark.parametrize("where", ["missing/folder/chat.json", "."])
def test_a_save_that_cannot_be_written_names_the_path_given(tmp_path, monkeypatch, where):
    """Not the temporary file a save writes first, and none left behind."""
    monkeypatch.chdir(tmp_path)
    chat = bettong_nb.agent(provider=Scripted(["a"])).session()
    chat.run("x")
    with pytest.raises(OSError) as caught:
        chat.save(where)
    assert caught.value.filename == where and ".tmp" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []
