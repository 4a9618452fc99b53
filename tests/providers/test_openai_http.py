"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1: wire, streaming, errors."""


import pytest

import bettong_nb
from bettong_nb import ProviderError, events
from support.servers import ChatScript, LoopbackServer, Reply, chat_message, tool_call


def notes_cap(store):
    return {"id": "notes", "tools": [
        {"name": "write_note", "description": "Save a note.",
         "parameters": {"text": {"type": "string", "required": True}},
         "handler": lambda text: store.append(text) or f"Saved {len(text)} characters"}]}


def test_the_whole_loop_runs_over_http():
    store = []
    script = ChatScript([chat_message(tool_calls=[tool_call("write_note", {"text": "hello"}, "c1")]),
                         chat_message("Saved it.")])
    with LoopbackServer(script) as server:
        agent = bettong_nb.deepseek(base_url=server.url, api_key="sk-test", capabilities=[notes_cap(store)],
                                    temperature=0.0)
        result = agent.run("save hello")
    assert result.output == "Saved it." and store == ["hello"]
    first, second = (r.json() for r in server.requests)
    assert all(r.path == "/chat/completions" for r in server.requests)
    assert all(r.headers["authorization"] == "Bearer sk-test" for r in server.requests)
    assert first["model"] == "deepseek-v4-flash" and first["temperature"] == 0.0
    assert first["tool_choice"] == "auto"
    assert first["tools"] == [{"type": "function", "function": {
        "name": "write_note", "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                                             "required": ["text"]},
        "description": "Save a note."}}]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][2]["tool_calls"][0]["function"] == {"name": "write_note", "arguments": '{"text": "hello"}'}
    assert second["messages"][2]["content"] == "", "servers reject null content beside tool_calls"
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "Saved 5 characters"}


def test_no_tools_means_no_tools_key_and_no_temperature_unless_set():
    with LoopbackServer(ChatScript([chat_message("hi")])) as server:
        bettong_nb.openai(base_url=server.url + "/v1", api_key="k" * 10).run("x")
    body = server.only_request().json()
    assert server.only_request().path == "/v1/chat/completions"
    assert "tools" not in body and "tool_choice" not in body and "temperature" not in body


def test_tool_choice_naming_a_function_and_max_tokens_go_on_the_wire():
    with LoopbackServer(ChatScript([chat_message("x")])) as server:
        bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[notes_cap([])],
                          tool_choice="write_note", max_tokens=99).run("x")
    body = server.only_request().json()
    assert body["tool_choice"] == {"type": "function", "function": {"name": "write_note"}}
    assert body["max_tokens"] == 99


def test_deepseek_usage_and_reasoning_are_read_and_reasoning_echoed():
    usage = {"prompt_tokens": 1120, "completion_tokens": 28, "total_tokens": 1148,
             "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 96,
             "completion_tokens_details": {"reasoning_tokens": 7}}
    script = ChatScript([chat_message(tool_calls=[tool_call("write_note", {"text": "a"})], usage=usage,
                                      reasoning_content="think"), chat_message("ok", usage=usage)])
    with LoopbackServer(script) as server:
        result = bettong_nb.deepseek(base_url=server.url, api_key="k", capabilities=[notes_cap([])]).run("x")
    u = result.usage
    assert (u.requests, u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cache_hit_tokens,
            u.cache_miss_tokens, u.reasoning_tokens) == (2, 2240, 56, 2296, 2048, 192, 14)
    assert bettong_nb.usage.summary(u) == "2 requests 2296 tokens (2240 in, 56 out) [2048 cached, 91% of input]"
    assert server.requests[1].json()["messages"][2]["reasoning_content"] == "think"
    assert [r.step for r in result.requests] == [1, 2] and result.requests[0].usage.prompt_tokens == 1120


def test_streaming_equals_completing():
    turns = [chat_message(tool_calls=[tool_call("write_note", {"text": "streamed text"}, "c9")]),
             chat_message("All saved, in a longer answer that streams in pieces.")]
    results = {}
    for stream in (False, True):
        seen = []
        with LoopbackServer(ChatScript(turns)) as server:
            results[stream] = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[notes_cap([])],
                                                stream=stream, on_event=seen.append).run("x")
        if stream:
            assert server.requests[0].json()["stream"] is True
            deltas = [e.text for e in seen if isinstance(e, events.TextDelta)]
            assert "".join(deltas) == results[True].output and len(deltas) > 5
            assert any(isinstance(e, events.ToolUseDelta) and e.name == "write_note" for e in seen)
    plain, streamed = results[False], results[True]
    assert streamed.output == plain.output
    assert streamed.messages == plain.messages
    assert streamed.usage == plain.usage
    assert [(c.tool, c.args, c.result) for c in streamed.tool_calls] == [(c.tool, c.args, c.result) for c in plain.tool_calls]


def test_http_errors_surface_with_status_and_message_never_the_key():
    key = "sk-secret-key-0123456789"
    body = {"error": {"message": f"Invalid key {key}", "type": "auth"}}
    with LoopbackServer(lambda r: Reply.json(body, status=401)) as server:
        with pytest.raises(ProviderError) as err:
            bettong_nb.deepseek(base_url=server.url, api_key=key).run("x")
    assert err.value.status == 401 and "HTTP 401" in str(err.value) and "Invalid key" in str(err.value)
    assert key not in str(err.value) and key not in repr(err.value.body_excerpt)
    assert len(server.requests) == 1, "401 is never retried"


def test_a_500_is_retried_then_surfaces():
    with LoopbackServer(lambda r: Reply.text("<html>upstream broke</html>", status=500)) as server:
        with pytest.raises(ProviderError) as err:
            bettong_nb.openai(base_url=server.url, api_key="k", max_retries=1).run("x")
    assert err.value.status == 500 and "upstream broke" in str(err.value)
    assert len(server.requests) == 2


def test_an_unreachable_server_is_a_provider_error():
    with LoopbackServer(lambda r: Reply()) as server:
        url = server.url
    with pytest.raises(ProviderError, match="could not be reached"):
        bettong_nb.openai(base_url=url, api_key="k", max_retries=0).run("x")


def test_no_message_in_response():
    with LoopbackServer(lambda r: Reply.json({"choices": []})) as server:
        with pytest.raises(ProviderError, match="No message"):
            bettong_nb.openai(base_url=server.url, api_key="k").run("x")


@pytest.mark.parametrize("factory,var", [(bettong_nb.deepseek, "DEEPSEEK_API_KEY"), (bettong_nb.openai, "OPENAI_API_KEY")])
def test_a_missing_key_names_the_variable_and_is_read_at_first_request(monkeypatch, factory, var):
    monkeypatch.delenv(var, raising=False)
    with LoopbackServer(ChatScript([chat_message("late key works")])) as server:
        agent = factory(base_url=server.url)  # building without a key is fine
        with pytest.raises(ProviderError, match=var):
            agent.run("x")
        assert server.requests == []
        monkeypatch.setenv(var, "sk-from-env-123456")
        assert agent.run("x").output == "late key works"
        assert server.only_request().headers["authorization"] == "Bearer sk-from-env-123456"


def test_the_key_never_shows_in_repr():
    agent = bettong_nb.deepseek(api_key="sk-hidden-0123456789")
    assert "sk-hidden" not in repr(agent) and "sk-hidden" not in repr(agent.provider)


def test_the_agent_key_is_redacted_from_tool_results():
    key = "sk-agent-key-abcdef123456"
    cap = {"id": "x", "tools": [{"name": "env", "handler": lambda: f"KEY={key}"}]}
    with LoopbackServer(ChatScript([chat_message(tool_calls=[tool_call("env", {})]), chat_message("ok")])) as server:
        result = bettong_nb.deepseek(base_url=server.url, api_key=key, capabilities=[cap]).run("x")
    assert key.encode() not in server.requests[1].body.replace(b"Bearer " + key.encode(), b"")
    assert result.redactions >= 1 and "[redacted]" in result.tool_calls[0].result


def test_a_stream_that_repeats_the_function_name_in_every_chunk():
    """llama.cpp's server sends the name (and id) again in each tool-call chunk."""
    from support.servers import sse

    def chunk(delta, finish=None):
        return {"id": "x", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    parts = ['{"te', 'xt": "', 'hi"}']
    events_ = [chunk({"role": "assistant", "content": None})]
    events_ += [chunk({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                       "function": {"name": "write_note", "arguments": p}}]}) for p in parts]
    events_.append(chunk({}, "tool_calls"))
    store = []
    script = ChatScript([Reply(headers={"Content-Type": "text/event-stream"}, chunks=sse(events_)),
                         chat_message("ok")])
    with LoopbackServer(script) as server:
        result = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[notes_cap(store)],
                                   stream=True).run("x")
    assert store == ["hi"] and result.tool_calls[0].tool == "write_note" and result.tool_calls[0].id == "call_9"
