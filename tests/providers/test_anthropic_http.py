"""The Anthropic provider against a loopback Messages API: headers, encoding, streams, refusals."""

from __future__ import annotations

import asyncio
import json

import pytest

import bettong_nb
from bettong_nb import ProviderError, events
from bettong_nb.providers.anthropic import AnthropicProvider, encode_request
from bettong_nb.core.provider import Request, SystemBlock
from bettong_nb.core.usage import Usage, summary
from support.servers import Reply
from support.wire import KEY, AnthropicScript, assert_well_formed, recorded, weather, wire

ANSWER = "The capital of Lithuania is Vilnius."


@pytest.fixture
def serve(board):
    return lambda handler: board.serve("anthropic", handler)


def complete(provider, request, stream=False):
    seen = []

    async def go():
        if stream:
            return await provider.stream(request, seen.append)
        return await provider.complete(request)

    return asyncio.run(go()), seen


# --- credentials and endpoint -------------------------------------------------------------------

def test_headers_path_and_default_model(serve):
    server = serve(AnthropicScript([wire("anthropic", "answer")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url).run("x")
    request = server.only_request()
    assert result.output == ANSWER and request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY and request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json" and "authorization" not in request.headers
    body = request.json()
    assert body["model"] == "claude-opus-5" and body["max_tokens"] == 16000 and "stream" not in body


def test_the_key_and_base_url_come_from_the_environment_at_the_first_request(serve, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    server = serve(AnthropicScript([wire("anthropic", "answer")]))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url + "/v1/")  # an SDK-style root with /v1 works too
    agent = bettong_nb.anthropic()  # no key yet: building is fine
    with pytest.raises(ProviderError, match="No Anthropic API key: pass api_key= or set ANTHROPIC_API_KEY"):
        agent.run("x")
    assert server.requests == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", f"  {KEY}\n")
    assert agent.run("x").output == ANSWER
    assert server.only_request().headers["x-api-key"] == KEY and server.only_request().path == "/v1/messages"
    assert KEY not in repr(agent) and KEY not in repr(agent.provider)
    assert agent.provider.secret_values() == [KEY]


def test_an_auth_token_goes_as_a_bearer(serve, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", KEY)
    server = serve(AnthropicScript([wire("anthropic", "answer")]))
    bettong_nb.anthropic(base_url=server.url).run("x")
    headers = server.only_request().headers
    assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers


# --- the request body ---------------------------------------------------------------------------

def test_system_blocks_tools_and_tool_results_on_the_wire(serve):
    calls = []
    server = serve(AnthropicScript([wire("anthropic", "tool_use"), wire("anthropic", "final")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url, capabilities=[weather(calls)],
                                  system="Be brief.", tool_choice="required", temperature=0.3).run("Weather?")
    assert result.output == "It is raining in Vilnius, 11 °C." and calls == ["Vilnius"]
    first, second = (r.json() for r in server.requests)
    assert first["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert first["tools"] == [{"name": "get_weather", "description": "Current weather for a city.",
                               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                "required": ["city"]}}]
    assert first["tool_choice"] == {"type": "any"}
    assert "temperature" not in first and "top_p" not in first and "top_k" not in first
    assert first["messages"] == [{"role": "user", "content": "Weather?"}]
    # the assistant turn goes back exactly as it came: signed thinking, text, tool_use
    assert second["messages"][1] == {"role": "assistant", "content": wire("anthropic", "tool_use")["content"]}
    assert second["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "raining in Vilnius, 11 °C"}]}
    assert_well_formed("anthropic", second)


@pytest.mark.parametrize("choice,wire_choice", [("auto", {"type": "auto"}), ("none", {"type": "none"}),
                                                ("required", {"type": "any"}),
                                                ("get_weather", {"type": "tool", "name": "get_weather"})])
def test_tool_choice(choice, wire_choice):
    tools = [{"name": "get_weather", "parameters": {"type": "object"}}]
    body = encode_request(Request(messages=[], tools=tools, tool_choice=choice), default_model="m")
    assert body["tool_choice"] == wire_choice and body["tools"] == [{"name": "get_weather",
                                                                     "input_schema": {"type": "object"}}]


def test_max_tokens_effort_format_and_thinking_display():
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 80}}}
    plain = encode_request(Request(messages=[]), default_model="m")
    streamed = encode_request(Request(messages=[]), default_model="m", stream=True)
    assert (plain["max_tokens"], streamed["max_tokens"], streamed["stream"]) == (16000, 64000, True)
    assert "output_config" not in plain and "thinking" not in plain and "system" not in plain and "tools" not in plain
    body = encode_request(Request(messages=[], max_tokens=99, effort="high", format=schema, thinking_display="summarized",
                                  model="claude-sonnet-5"), default_model="m", effort="low")
    assert body["max_tokens"] == 99 and body["model"] == "claude-sonnet-5"
    # Anthropic wants every object closed and has no length bounds: the bound is said instead
    closed = {"type": "object", "properties": {"city": {"type": "string", "description": "maxLength 80"}},
              "additionalProperties": False}
    assert body["output_config"] == {"effort": "high", "format": {"type": "json_schema", "schema": closed}}
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert encode_request(Request(messages=[]), default_model="m", effort="low")["output_config"] == {"effort": "low"}


def test_provider_options_reach_the_wire(serve):
    server = serve(AnthropicScript([wire("anthropic", "answer")]))
    provider = AnthropicProvider(api_key=KEY, base_url=server.url, model="claude-haiku-4-5", effort="medium")
    response, _ = complete(provider, Request(messages=[{"role": "user", "content": "x"}],
                                             system=[SystemBlock("a", cache=False), SystemBlock("b", cache=True)]))
    body = server.only_request().json()
    assert body["model"] == "claude-haiku-4-5" and body["output_config"] == {"effort": "medium"}
    assert body["system"] == [{"type": "text", "text": "a"},
                              {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]
    assert response.text() == ANSWER


def test_a_transcript_from_other_providers_encodes_to_a_valid_conversation():
    messages = [
        {"role": "user", "content": "one"},
        # DeepSeek reasoning (no signature to echo) and an empty text block
        {"role": "assistant", "content": [{"type": "thinking", "text": "hmm"}, {"type": "text", "text": ""},
                                          {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
                                          {"type": "tool_use", "id": "c2", "name": "f", "input": "{broken"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok", "is_error": False},
                                     {"type": "tool_result", "tool_use_id": "c2", "content": "ERROR: bad JSON",
                                      "is_error": True}]},
        {"role": "assistant", "content": []},  # a refusal with nothing in it
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c3", "name": "f", "input": {}}]},  # never run
        {"role": "user", "content": "three"},
    ]
    body = encode_request(Request(messages=messages), default_model="m")
    assert body["messages"] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
                                          {"type": "tool_use", "id": "c2", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                                     {"type": "tool_result", "tool_use_id": "c2", "content": "ERROR: bad JSON",
                                      "is_error": True},
                                     {"type": "text", "text": "two"}, {"type": "text", "text": "three"}]},
    ]
    assert_well_formed("anthropic", body)


def test_an_unknown_block_type_is_kept_and_echoed_verbatim(serve):
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3q"}
    first = {**wire("anthropic", "tool_use")}
    first["content"] = [redacted] + first["content"][1:]
    server = serve(AnthropicScript([first, wire("anthropic", "final")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url, capabilities=[weather()]).run("x")
    assert result.messages[2]["content"][0] == {"type": "other", "block_type": "redacted_thinking", "raw": redacted}
    assert server.requests[1].json()["messages"][1]["content"][0] == redacted


# --- responses ----------------------------------------------------------------------------------

def test_usage_counts_cache_writes_and_reads_into_the_prompt(serve):
    server = serve(AnthropicScript([wire("anthropic", "tool_use"), wire("anthropic", "final")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url, capabilities=[weather()]).run("x")
    first, second = (r.usage for r in result.requests)
    assert first == Usage(requests=1, prompt_tokens=1210, completion_tokens=87, total_tokens=1297,
                          cache_hit_tokens=0, cache_miss_tokens=1210, cache_write_tokens=1190)
    assert second == Usage(requests=1, prompt_tokens=1231, completion_tokens=15, total_tokens=1246,
                           cache_hit_tokens=1190, cache_miss_tokens=41, cache_write_tokens=0)
    assert summary(result.usage) == "2 requests 2543 tokens (2441 in, 102 out) [1190 cached, 49% of input]"


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_refusal_is_an_answer_that_says_so_with_nothing_made_up(serve, stream):
    server = serve(AnthropicScript([wire("anthropic", "refusal")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url, stream=stream).run("x")
    assert result.refused() and result.stop_reason == "refusal"
    assert result.output == "", "what the model wrote before it refused is not the answer"
    assert result.messages[-1]["content"] == [{"type": "text", "text": "Here is how the exploit chain",
                                               "raw": {"type": "text", "text": "Here is how the exploit chain"}}]


@pytest.mark.parametrize("case,stream_file", [("tool_use", "tool_use.sse"), ("refusal", "refusal.sse")])
def test_a_recorded_stream_decodes_to_what_the_json_answer_does(serve, case, stream_file):
    server = serve(lambda r: Reply.json(wire("anthropic", case)) if not r.json().get("stream")
                   else recorded("anthropic", stream_file))
    provider = AnthropicProvider(api_key=KEY, base_url=server.url)
    request = Request(messages=[{"role": "user", "content": "x"}])
    plain, _ = complete(provider, request)
    streamed, seen = complete(provider, request, stream=True)
    assert streamed == plain
    assert streamed.stop_details == wire("anthropic", case).get("stop_details")
    texts = "".join(e.text for e in seen if isinstance(e, events.TextDelta))
    assert texts == "".join(b["text"] for b in plain.content if b["type"] == "text")
    assert plain.text() == ("" if case == "refusal" else texts)  # a refusal has no text to trust
    if case == "tool_use":
        thinking = "".join(e.text for e in seen if isinstance(e, events.ThinkingDelta))
        assert thinking == plain.content[0]["text"] and plain.content[0]["raw"]["signature"].startswith("EqQB")
        tool = [e for e in seen if isinstance(e, events.ToolUseDelta)]
        assert tool[0] == events.ToolUseDelta(0, "get_weather", "")
        assert json.loads("".join(e.arguments for e in tool)) == {"city": "Vilnius"}


def test_an_overloaded_error_event_before_any_text_is_retried(serve):
    script = AnthropicScript([recorded("anthropic", "overloaded_midstream.sse"), wire("anthropic", "answer")])
    server = serve(script)
    seen = []
    agent = bettong_nb.anthropic(api_key=KEY, base_url=server.url, stream=True, on_event=seen.append)
    agent.provider.transport.backoff = 0.01
    assert agent.run("x").output == ANSWER and len(server.requests) == 2
    [retry] = [e for e in seen if isinstance(e, events.Retry)]
    assert "overloaded_error" in retry.reason and "Overloaded" in retry.reason


def test_invalid_tool_arguments_in_a_stream_reach_the_model_as_an_error(serve):
    broken = wire("anthropic", "tool_use")
    chunks = [c.replace(b'nius\\"}', b'nius\\"') for c in recorded("anthropic", "tool_use.sse").chunks]
    assert len(set(chunks) - set(recorded("anthropic", "tool_use.sse").chunks)) == 1  # the model never closed its JSON
    server = serve(AnthropicScript([Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=chunks),
                                    wire("anthropic", "final")]))
    result = bettong_nb.anthropic(api_key=KEY, base_url=server.url, capabilities=[weather()], stream=True).run("x")
    [call] = result.tool_calls
    assert call.status == "error" and "not valid JSON" in call.result
    second = server.requests[1].json()
    [use] = [b for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
    assert use == {"type": "tool_use", "id": broken["content"][2]["id"], "name": "get_weather", "input": {}}
    assert_well_formed("anthropic", second)


def test_an_error_shaped_200_is_an_error(serve):
    server = serve(lambda r: Reply.json({"type": "error", "error": {"type": "api_error", "message": "proxied failure"}}))
    with pytest.raises(ProviderError, match="proxied failure"):
        bettong_nb.anthropic(api_key=KEY, base_url=server.url).run("x")
