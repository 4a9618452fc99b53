"""Costs a course gateway reports: LiteLLM's proxy says each response's cost in the
``x-litellm-response-cost`` header, and gateways put a ``cost`` number in the answer's ``usage``.
A loopback server plays the gateway; nothing here knows the model's prices."""

from __future__ import annotations

import json
import math

import bettong_nb
from bettong_nb.providers.openai import reported_cost
from support.servers import LoopbackServer, Reply, chat_message, sse, tool_call

KEY = "sk-course-student-7f3a9c1e5b2d4a6c"


def _gateway(replies):
    """A gateway answering with ``replies`` in turn, remembering what each request carried."""
    queue = list(replies)

    def handle(request):
        return queue.pop(0)

    return LoopbackServer(handle)


def test_the_header_and_the_usage_cost_become_each_requests_cost_named_gateway():
    first = Reply.json(chat_message(tool_calls=[tool_call("note", {"text": "a"}, "c1")]),
                       **{"x-litellm-response-cost": "0.00125"})
    second = Reply.json(chat_message("Done.", usage={"prompt_tokens": 30, "completion_tokens": 4,
                                                     "total_tokens": 34, "cost": 0.0005}))
    with _gateway([first, second]) as gateway:
        agent = bettong_nb.openai(base_url=gateway.url + "/v1", api_key=KEY, model="course-model",
                                  capabilities=[{"id": "notes", "tools": [bettong_nb.tool(lambda text: "ok", name="note",
                                                                                         description="Note.")]}])
        result = agent.run("go")
    assert result.output == "Done."
    frame = result.usage_frame()
    assert frame["price_source"].tolist() == ["gateway", "gateway"]
    assert frame["cost_total"].tolist() == [0.00125, 0.0005]
    assert math.isclose(result.cost(), 0.00175)
    assert result.usage_line().endswith("· cost $0.00175")
    assert gateway.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_streamed_answer_takes_its_cost_from_the_usage_chunk():
    body = chat_message("Streamed.", usage={"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10,
                                            "cost": 0.000042})
    chunks = [{"id": "c", "object": "chat.completion.chunk", "model": "course-model",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Streamed."}, "finish_reason": None}]},
              {"id": "c", "object": "chat.completion.chunk", "model": "course-model",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
              {"id": "c", "object": "chat.completion.chunk", "model": "course-model", "choices": [],
               "usage": body["usage"]}]
    stream = Reply(chunks=sse(chunks), headers={"Content-Type": "text/event-stream"})
    with _gateway([stream]) as gateway:
        result = bettong_nb.openai(base_url=gateway.url + "/v1", api_key=KEY, model="course-model").run(
            "go", stream=True)
    assert result.output == "Streamed."
    assert result.usage_frame()["price_source"].tolist() == ["gateway"]
    assert result.cost() == 0.000042


def test_without_a_reported_cost_the_gateways_model_is_unknown_and_given_prices_win():
    plain = Reply.json(chat_message("Plain."))
    priced = Reply.json(chat_message("Priced."), **{"x-litellm-response-cost": "0.9"})
    with _gateway([plain, priced]) as gateway:
        agent = bettong_nb.openai(base_url=gateway.url + "/v1", api_key=KEY, model="course-model")
        unknown = agent.run("one")
        given = agent.run("two", prices={"input": 1.0, "output": 1.0})
    assert unknown.usage_frame()["price_source"].tolist() == ["unknown"] and math.isnan(unknown.cost())
    # prices the person gave are what they asked to be billed at
    assert given.usage_frame()["price_source"].tolist() == ["given"] and given.cost() == 12 / 1e6


def test_what_counts_as_a_reported_cost():
    assert [reported_cost(v) for v in ("0.00125", 0.5, 0, "1e-6")] == [0.00125, 0.5, 0.0, 1e-6]
    for bad in (None, True, "", "free", "nan", "inf", -0.1, "-1", [1], {"usd": 1}):
        assert reported_cost(bad) is None, bad


def test_a_saved_session_keeps_the_gateways_costs(tmp_path):
    with _gateway([Reply.json(chat_message("Saved."), **{"x-litellm-response-cost": "0.003"})]) as gateway:
        agent = bettong_nb.openai(base_url=gateway.url + "/v1", api_key=KEY, model="course-model")
        chat = agent.session()
        chat.run("go")
        path = chat.save(tmp_path / "chat.json")
    assert KEY not in path.read_text()
    loaded = bettong_nb.load_session(path, agent)
    assert loaded.usage_frame()["price_source"].tolist() == ["gateway"]
    assert loaded.usage_frame()["cost_total"].tolist() == [0.003]
    assert json.loads(path.read_text())  # plain JSON
