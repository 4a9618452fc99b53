"""Record and replay: cassettes written from real HTTP turns, served back with no network."""

import json

import pytest

import bettong_nb
from bettong_nb import events
from bettong_nb.providers.openai import OpenAIProvider
from bettong_nb.providers.replay import LIVE_ENV, Recording, Replay, ReplayMismatch, cassette
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

KEY = "sk-live-key-0123456789abcdef"


def notes():
    return {"id": "notes", "tools": [{"name": "count", "parameters": {"text": {"type": "string", "required": True}},
                                      "handler": lambda text: str(len(text))}]}


def script():
    return ChatScript([chat_message(tool_calls=[tool_call("count", {"text": "hello"}, "c1")]),
                       chat_message("Five letters."),
                       chat_message("Still five.")])


@pytest.mark.parametrize("stream", [False, True])
def test_a_recorded_session_replays_identically(tmp_path, stream):
    path = tmp_path / "demo.jsonl"
    with LoopbackServer(script()) as server:
        live = Recording(OpenAIProvider(base_url=server.url, api_key=KEY), path)
        session = bettong_nb.agent(provider=live, capabilities=[notes()], stream=stream).session()
        first, second = session.run("count hello"), session.run("and again?")
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["request"]["messages"] for line in lines)
    assert ("stream" in json.loads(lines[0])) == stream

    seen = []
    replay = Replay(path)
    again = bettong_nb.agent(provider=replay, capabilities=[notes()], stream=stream, on_event=seen.append).session()
    one, two = again.run("count hello"), again.run("and again?")
    assert (one.output, two.output) == (first.output, second.output) == ("Five letters.", "Still five.")
    assert again.transcript == session.transcript and again.usage == session.usage
    if stream:
        assert "".join(e.text for e in seen if isinstance(e, events.TextDelta)) == "Five letters.Still five."


def test_credentials_never_reach_the_cassette(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVICE_TOKEN", "tok-abcdef-0123456789")
    path = tmp_path / "c.jsonl"
    cap = {"id": "env", "tools": [{"name": "env", "handler": lambda: "nothing here"}]}
    with LoopbackServer(ChatScript([chat_message(f"your key is {KEY} and tok-abcdef-0123456789")])) as server:
        bettong_nb.agent(provider=Recording(OpenAIProvider(base_url=server.url, api_key=KEY), path),
                         capabilities=[cap]).run(f"my key is {KEY}")
    text = path.read_text()
    assert KEY not in text and "tok-abcdef-0123456789" not in text and "[redacted]" in text


def test_replay_matches_by_content_not_order(tmp_path):
    path = tmp_path / "two.jsonl"
    with LoopbackServer(ChatScript([chat_message("answer A"), chat_message("answer B")])) as server:
        agent = bettong_nb.agent(provider=Recording(OpenAIProvider(base_url=server.url, api_key="k"), path))
        agent.run("question A")
        agent.run("question B")
    replay = bettong_nb.agent(provider=Replay(path))
    assert replay.run("question B").output == "answer B"
    assert replay.run("question A").output == "answer A"
    assert replay.run("question B").output == "answer B", "a repeated request is served again"


def test_an_unmatched_request_names_the_first_field_that_differs(tmp_path):
    path = tmp_path / "one.jsonl"
    with LoopbackServer(ChatScript([chat_message("recorded")])) as server:
        bettong_nb.agent(provider=Recording(OpenAIProvider(base_url=server.url, api_key="k"), path)).run("the question")
    with pytest.raises(ReplayMismatch) as err:
        bettong_nb.agent(provider=Replay(path)).run("another question")
    message = str(err.value)
    assert "differs first at messages[0].content" in message
    assert "'the question'" in message and "'another question'" in message
    with pytest.raises(ReplayMismatch, match="differs first at model"):
        bettong_nb.agent(provider=Replay(path), model="other").run("the question")


def test_the_switch_replays_without_a_key_and_records_when_asked(tmp_path, monkeypatch):
    path = tmp_path / "nb.jsonl"
    path.write_text("")
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.setenv(LIVE_ENV, "1")
    assert isinstance(cassette(path), Replay), "asked for live but no key: replay"
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    monkeypatch.delenv(LIVE_ENV)
    assert isinstance(cassette(path), Replay), "a key alone does not go live"
    with LoopbackServer(ChatScript([chat_message("live!")])) as server:
        model = cassette(path, live=True, make_live=lambda: OpenAIProvider(base_url=server.url, key_env="DEEPSEEK_API_KEY"))
        assert isinstance(model, Recording)
        assert bettong_nb.agent(provider=model).run("hi").output == "live!"
    assert path.read_text() == "", "the shipped cassette is left as it was"
    live = tmp_path / "nb.live.jsonl"
    assert bettong_nb.agent(provider=cassette(live)).run("hi").output == "live!"
