"""Prompt-cache stability: what goes over the wire must extend, never rewrite, what was sent before."""

import json

import bettong_nb
from bettong_nb import events
from bettong_nb.providers.scripted import Scripted
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call


def cap(id, *names, instructions=None):
    return {"id": id, "instructions": instructions,
            "tools": [{"name": n, "description": f"{n} tool", "parameters": {"x": {"type": "string"}},
                       "handler": lambda x="": f"did {x}"} for n in names]}


def canonical_prefix(body: dict) -> bytes:
    """Tools, then the messages, as the bytes a provider hashes for its cache."""
    return json.dumps({"tools": body.get("tools"), "messages": body["messages"]}, ensure_ascii=False).encode()


def test_five_turn_session_with_tools_only_ever_appends():
    turns = []
    for i in range(5):
        turns += [chat_message(tool_calls=[tool_call("alpha", {"x": str(i)}, f"c{i}")]), chat_message(f"answer {i}")]
    with LoopbackServer(ChatScript(turns)) as server:
        session = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[cap("a", "alpha", "beta")]).session()
        for i in range(5):
            session.run(f"question {i}")
    bodies = [r.json() for r in server.requests]
    assert len(bodies) == 10
    for before, after in zip(bodies, bodies[1:]):
        assert json.dumps(after["tools"]) == json.dumps(before["tools"])
        assert after["messages"][:len(before["messages"])] == before["messages"]
        # byte-identical: the serialized earlier messages are a prefix of the serialized later ones
        old = json.dumps(before["messages"], ensure_ascii=False)
        new = json.dumps(after["messages"], ensure_ascii=False)
        assert new.startswith(old[:-1])
    assert sum(1 for m in bodies[-1]["messages"] if m["role"] == "system") == 1
    # each one-step turn adds exactly the assistant reply and the new user message
    assert len(bodies[2]["messages"]) == len(bodies[1]["messages"]) + 2


def test_two_runs_send_the_same_system_and_tools_and_only_the_user_message_differs():
    with LoopbackServer(ChatScript([chat_message("a"), chat_message("b")])) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[cap("a", *[f"t{i}" for i in range(12)])])
        agent.run("one")
        agent.run("two")
    a, b = (r.json() for r in server.requests)
    assert json.dumps(a["messages"][0]) == json.dumps(b["messages"][0])
    assert json.dumps(a["tools"]) == json.dumps(b["tools"])
    assert [t["function"]["name"] for t in a["tools"]] == [f"t{i}" for i in range(12)]
    assert a["messages"][1] != b["messages"][1] and len(a["messages"]) == 2


def test_adding_a_capability_appends_its_tools():
    with LoopbackServer(ChatScript([chat_message("a"), chat_message("b")])) as server:
        base = [cap("one", "b_tool", "a_tool"), cap("two", "z_tool")]
        bettong_nb.openai(base_url=server.url, api_key="k", capabilities=base).run("x")
        bettong_nb.openai(base_url=server.url, api_key="k", capabilities=base + [cap("three", "m_tool")]).run("x")
    before, after = (r.json()["tools"] for r in server.requests)
    assert after[:-1] == before and after[-1]["function"]["name"] == "m_tool"
    assert json.dumps(after).startswith(json.dumps(before)[:-1])


def test_instructions_that_vary_per_run_change_the_system_message():
    with LoopbackServer(ChatScript([chat_message("a"), chat_message("b")])) as server:
        for root in ("/tmp/run-1", "/tmp/run-2"):
            bettong_nb.openai(base_url=server.url, api_key="k",
                              capabilities=[cap("fs", "read", instructions=f"Root is {root}")]).run("x")
    first, second = (r.json()["messages"][0] for r in server.requests)
    assert first != second and "/tmp/run-1" in first["content"]


def test_a_session_warns_when_a_turn_would_move_the_cached_prefix():
    warnings = []
    with LoopbackServer(ChatScript([chat_message("a"), chat_message("b"), chat_message("c")])) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[cap("a", "alpha")],
                                  on_event=lambda e: isinstance(e, events.CacheWarning) and warnings.append(e))
        session = agent.session()
        session.run("one")
        session.run("two")
        assert warnings == []
        session.run("three", capabilities=[cap("b", "beta", instructions="Beta rules.")])
    moved = {w.moved: w.message for w in warnings}
    assert set(moved) == {"system", "tools"}
    assert "[alpha] to [beta]" in moved["tools"] and "full price" in moved["tools"]
    # the system prompt is never rebuilt inside a session
    assert server.requests[2].json()["messages"][0] == server.requests[0].json()["messages"][0]


def test_new_tools_are_told_once_in_plain_words_and_only_where_a_request_has_a_price():
    def named(name):
        return {"id": name, "tools": [bettong_nb.tool(lambda x: x, name=name, description=f"{name}.")]}

    def warnings_of(agent):
        told = []
        chat = agent.session()
        for turn, extra in enumerate(([], [named("q1")], [named("q1"), named("q2")])):
            chat.run(f"turn {turn}", capabilities=[named("base"), *extra],
                     on_event=lambda e: isinstance(e, events.CacheWarning) and told.append(e))
        return told

    scripted = ["a", "b", "c"]
    # a model that costs nothing (the offline demo, a script, a replay) never warns about prices
    assert warnings_of(bettong_nb.agent(provider=Scripted(list(scripted)))) == []
    assert warnings_of(bettong_nb.offline()) == []
    # a priced one hears it once a conversation, in words a data scientist reads
    (told,) = warnings_of(bettong_nb.agent(provider=Scripted(list(scripted)), prices={"input": 1, "output": 1}))
    assert told.moved == "tools" and told.message == (
        "New tools in this conversation (q1): this request pays full price for its whole prompt once, "
        "instead of the provider's cheaper cached rate.")
