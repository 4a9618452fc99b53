"""The Ollama provider against a loopback /api/chat: host resolution, encoding, NDJSON streams."""

from __future__ import annotations

import asyncio

import pytest

import bettong_nb
from bettong_nb import ProviderError, events
from bettong_nb.core.provider import Request
from bettong_nb.providers.ollama import OllamaProvider, host_url
from support.servers import Reply
from support.wire import OllamaScript, assert_well_formed, recorded, weather, wire

ANSWER = "The capital of Lithuania is Vilnius."


@pytest.fixture
def serve(board):
    return lambda handler: board.serve("ollama", handler)


@pytest.mark.parametrize("spec,url", [
    (None, "http://localhost:11434"),
    ("", "http://localhost:11434"),
    ("localhost", "http://localhost:11434"),
    ("gpu-box:8080", "http://gpu-box:8080"),
    ("0.0.0.0", "http://127.0.0.1:11434"),  # where a server listens, not where to connect
    ("0.0.0.0:8080", "http://127.0.0.1:8080"),
    ("[::]:11434", "http://127.0.0.1:11434"),
    ("::", "http://127.0.0.1:11434"),
    ("::1", "http://[::1]:11434"),
    ("http://[::1]:9000/", "http://[::1]:9000"),
    ("http://ollama.internal", "http://ollama.internal:80"),
    ("https://ollama.example.com", "https://ollama.example.com:443"),
    ("  example.com:1234/ollama/  ", "http://example.com:1234/ollama"),
])
def test_host_resolution(spec, url):
    assert host_url(spec) == url


def test_ollama_host_is_used_without_base_url(serve, monkeypatch):
    server = serve(OllamaScript([wire("ollama", "answer")]))
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    result = bettong_nb.ollama(model="qwen3:8b").run("x")
    assert result.output == ANSWER and server.only_request().path == "/api/chat"


def test_the_request_body(serve):
    server = serve(OllamaScript([wire("ollama", "answer")]))
    result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b", system="Be brief.").run("Capital?")
    request = server.only_request()
    assert "authorization" not in request.headers
    assert request.json() == {"model": "qwen3:8b", "stream": False, "keep_alive": "30m",
                              "messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Capital?"}]}
    assert result.output == ANSWER
    assert result.messages[-1]["content"][0] == {"type": "thinking",
                                                 "text": "The user asks for the capital of Lithuania. That is Vilnius."}


def test_options_format_and_think(serve):
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    server = serve(OllamaScript([wire("ollama", "answer")]))
    provider = OllamaProvider(base_url=server.url, model="qwen3:8b", num_ctx=16384, keep_alive=-1, think=False)
    request = Request(messages=[{"role": "user", "content": "x"}], max_tokens=256, temperature=0.0, format=schema,
                      tools=[{"name": "f", "parameters": {"type": "object"}}], tool_choice="none")
    asyncio.run(provider.complete(request))
    body = server.only_request().json()
    assert body["options"] == {"num_ctx": 16384, "num_predict": 256, "temperature": 0.0}
    assert body["format"] == schema and body["keep_alive"] == -1 and body["think"] is False
    assert "tools" not in body, "Ollama has no tool_choice; none means no tools"


def test_a_model_is_required_before_anything_is_sent(serve):
    server = serve(OllamaScript([wire("ollama", "answer")]))
    with pytest.raises(ProviderError, match=r"Ollama needs a model name: bettong_nb.ollama\(model="):
        bettong_nb.ollama(base_url=server.url).run("x")
    assert server.requests == []


def test_tool_rounds_get_unique_ids_and_results_go_back_as_tool_messages(serve):
    call = wire("ollama", "tool_call")
    second_call = {**call, "message": {**call["message"], "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Kaunas"}}},
        {"function": {"name": "get_weather", "arguments": {"city": "Klaipėda"}}}]}}
    server = serve(OllamaScript([call, second_call, wire("ollama", "final")]))
    result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b", capabilities=[weather()]).run("x")
    assert [c.id for c in result.tool_calls] == ["ollama_tool_0", "ollama_tool_1", "ollama_tool_2"]
    assert [c.args for c in result.tool_calls] == [{"city": "Vilnius"}, {"city": "Kaunas"}, {"city": "Klaipėda"}]
    last = server.requests[-1].json()
    assert_well_formed("ollama", last)
    assert last["messages"][2] == {"role": "assistant", "content": "", "thinking": "The user wants the weather in Vilnius.",
                                   "tool_calls": [{"function": {"name": "get_weather",
                                                                "arguments": {"city": "Vilnius"}}}]}
    assert last["messages"][3] == {"role": "tool", "tool_name": "get_weather", "content": "raining in Vilnius, 11 °C"}
    assert [m["content"] for m in last["messages"][5:]] == ["raining in Kaunas, 11 °C", "raining in Klaipėda, 11 °C"]
    assert last["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                              "required": ["city"]}, "description": "Current weather for a city."}}]


def test_ids_the_server_sends_are_kept(serve):
    call = wire("ollama", "tool_call")
    call = {**call, "message": {**call["message"], "tool_calls": [
        {"id": "call_k3x9", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Vilnius"}}}]}}
    server = serve(OllamaScript([call, wire("ollama", "final")]))
    result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b", capabilities=[weather()]).run("x")
    assert result.tool_calls[0].id == "call_k3x9" and result.output == "It is raining in Vilnius, 11 °C."


@pytest.mark.parametrize("case", ["answer", "tool_call"])
def test_a_recorded_stream_decodes_to_what_the_json_answer_does(serve, case):
    server = serve(lambda r: recorded("ollama", f"{case}.ndjson") if r.json()["stream"] else Reply.json(wire("ollama", case)))
    provider = OllamaProvider(base_url=server.url, model="qwen3:8b")
    request = Request(messages=[{"role": "user", "content": "x"}])
    seen = []

    async def both():
        return await provider.complete(request), await provider.stream(request, seen.append)

    plain, streamed = asyncio.run(both())
    assert streamed == plain
    texts = [e.text for e in seen if isinstance(e, events.TextDelta)]
    assert "".join(texts) == plain.text()
    if case == "answer":
        assert " " in texts, "a whitespace-only delta is kept: dropping it would glue 'is' and 'Vilnius'"
        assert plain.usage.prompt_tokens == 1210 and plain.usage.completion_tokens == 48
    else:
        assert [e for e in seen if isinstance(e, events.ToolUseDelta)] == [
            events.ToolUseDelta(0, "get_weather", '{"city": "Vilnius"}')]


def test_an_error_inside_a_200_is_an_error_and_not_retried(serve):
    server = serve(lambda r: Reply.json({"error": "an error was encountered while running the model: unexpected EOF"}))
    with pytest.raises(ProviderError, match="unexpected EOF"):
        bettong_nb.ollama(base_url=server.url, model="qwen3:8b").run("x")
    assert len(server.requests) == 1


def test_done_reason_length_is_a_truncated_answer(serve):
    body = {**wire("ollama", "answer"), "done_reason": "length"}
    server = serve(OllamaScript([body]))
    result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b").run("x")
    assert result.stop_reason == "max_tokens" and not result.done and "max_tokens" in result.reason


def test_arguments_sent_as_text_are_decoded_or_reported(serve):
    call = wire("ollama", "tool_call")
    as_text = {**call, "message": {**call["message"], "tool_calls": [
        {"function": {"name": "get_weather", "arguments": '{"city": "Vilnius"}'}},
        {"function": {"name": "get_weather", "arguments": "{city: Kaunas"}}]}}
    server = serve(OllamaScript([as_text, wire("ollama", "final")]))
    result = bettong_nb.ollama(base_url=server.url, model="qwen3:8b", capabilities=[weather()]).run("x")
    good, bad = result.tool_calls
    assert (good.args, good.status) == ({"city": "Vilnius"}, "ok")
    assert bad.status == "error" and "not valid JSON" in bad.result
    echoed = server.requests[1].json()["messages"][2]["tool_calls"]
    assert [c["function"]["arguments"] for c in echoed] == [{"city": "Vilnius"}, {}]
