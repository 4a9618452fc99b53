"""Tool calls of one step run side by side: approvals still one at a time in the model's order,
results in the model's order, a tool marked ``concurrent=False`` alone, and a cancel stops
every running call."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import bettong_nb
from bettong_nb import Allow, Deny, capabilities as caps
from bettong_nb.core import events
from bettong_nb.core.approvals import requires_person
from bettong_nb.core.capability import Tool, ToolError, registry
from bettong_nb.notebook import display
from bettong_nb.providers.scripted import Scripted
from support.wire import calls_body


class Clock:
    """When each call started and ended (perf_counter), by its name."""

    def __init__(self):
        self.start: dict[str, float] = {}
        self.end: dict[str, float] = {}

    def sync_tool(self, tool_name: str = "probe", *, concurrent: bool = True, barrier=None) -> dict:
        def probe(name: str, seconds: float = 0.3) -> str:
            self.start[name] = time.perf_counter()
            if barrier is not None:
                barrier(name)
            time.sleep(seconds)
            self.end[name] = time.perf_counter()
            return f"{name} done"

        return {"name": tool_name, "description": "Sleep, then say done.", "handler": probe, "concurrent": concurrent,
                "parameters": {"name": {"type": "string", "required": True}, "seconds": {"type": "number"}}}

    def async_tool(self) -> dict:
        async def probe(name: str, seconds: float = 0.3) -> str:
            self.start[name] = time.perf_counter()
            await asyncio.sleep(seconds)
            self.end[name] = time.perf_counter()
            return f"{name} done"

        return {"name": "probe", "description": "Sleep, then say done.", "handler": probe,
                "parameters": {"name": {"type": "string", "required": True}, "seconds": {"type": "number"}}}


def _agent(turns, *tools, **options):
    return bettong_nb.agent(provider=Scripted(turns), capabilities=[{"id": "probes", "tools": list(tools)}], **options)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_calls_of_one_step_run_side_by_side(kind):
    clock = Clock()
    tool = clock.sync_tool() if kind == "sync" else clock.async_tool()
    agent = _agent([[("probe", {"name": n}) for n in "abcd"], "done"], tool)
    started = time.perf_counter()
    result = agent.run("go")
    took = time.perf_counter() - started
    assert result.output == "done" and [c.status for c in result.tool_calls] == ["ok"] * 4
    assert max(clock.start.values()) < min(clock.end.values())  # all four were running at once
    assert took < 0.6  # one after another: 1.2 s


def test_results_go_back_in_the_models_order(w, board):
    clock = Clock()
    cities = ["Vilnius", "Zürich", "Kaunas"]
    server = board.serve(w.name, w.script([calls_body(w, cities), w.body("final")]))

    async def get_weather(city: str) -> str:
        clock.start[city] = time.perf_counter()
        await asyncio.sleep({"Vilnius": 0.4, "Zürich": 0.2, "Kaunas": 0.0}[city])  # the first ends last
        clock.end[city] = time.perf_counter()
        return f"raining in {city}"

    capability = {"id": "weather", "tools": [{"name": "get_weather", "handler": get_weather,
                                              "parameters": {"city": {"type": "string", "required": True}}}]}
    result = w.build(server.url, capabilities=[capability]).run("Weather?")
    assert clock.end["Kaunas"] < clock.end["Zürich"] < clock.end["Vilnius"]
    assert [c.args["city"] for c in result.tool_calls] == cities
    assert w.tool_results(server.requests[1].json()) == [f"raining in {c}" for c in cities]


def test_approvals_are_asked_one_at_a_time_in_order_while_allowed_calls_run():
    clock, asked, open_questions = Clock(), [], []

    async def approve(request):
        open_questions.append(request.call_id)
        assert len(open_questions) == 1, "two approvals asked at once"
        await asyncio.sleep(0.15)
        open_questions.pop()
        asked.append((request.args["name"], time.perf_counter()))
        return True

    result = _agent([[("probe", {"name": n}) for n in "abc"], "done"], clock.async_tool(),
                    approve_fn=approve).run("go")
    assert [name for name, _ in asked] == ["a", "b", "c"]
    assert asked[0][1] < clock.start["a"] < asked[1][1]  # a started once allowed, while b was asked about
    assert clock.start["b"] < clock.end["a"]
    assert [c.status for c in result.tool_calls] == ["ok"] * 3


def test_a_denial_affects_only_its_own_call():
    clock = Clock()
    approve = lambda request: Deny("not b") if request.args["name"] == "b" else True  # noqa: E731
    result = _agent([[("probe", {"name": n, "seconds": 0.1}) for n in "abc"], "done"], clock.sync_tool(),
                    approve_fn=approve).run("go")
    assert [c.status for c in result.tool_calls] == ["ok", "denied", "ok"]
    assert sorted(clock.start) == ["a", "c"]
    assert result.tool_calls[1].result == "ERROR: probe was not allowed: not b"


def test_stop_mid_round_lets_the_running_call_finish_and_denies_the_rest_unasked():
    clock, asked = Clock(), []

    async def approve(request):
        asked.append(request.args["name"])
        if request.args["name"] == "b":
            await asyncio.sleep(0.1)  # a is running meanwhile
            return Deny("enough", stop=True)
        return Allow()

    model = Scripted([[("probe", {"name": n, "seconds": 0.4}) for n in "abcd"], "never asked"])
    result = bettong_nb.agent(provider=model, capabilities=[{"id": "p", "tools": [clock.async_tool()]}],
                              approve_fn=approve).run("go")
    assert asked == ["a", "b"]
    assert [c.status for c in result.tool_calls] == ["ok", "denied", "denied", "denied"]
    assert result.tool_calls[0].result == "a done" and clock.start["a"] < clock.end["a"]
    assert sorted(clock.start) == ["a"]
    assert result.stop_reason == "stopped" and len(model.requests) == 1


def test_a_tool_that_must_run_alone_waits_for_the_others_and_holds_the_next_back():
    clock = Clock()
    agent = _agent([[("read", {"name": "r1", "seconds": 0.2}), ("write", {"name": "w", "seconds": 0.2}),
                     ("read", {"name": "r2", "seconds": 0.2}), ("read", {"name": "r3", "seconds": 0.2})], "done"],
                   clock.sync_tool("read"), clock.sync_tool("write", concurrent=False))
    result = agent.run("go")
    assert [c.status for c in result.tool_calls] == ["ok"] * 4
    assert clock.end["r1"] <= clock.start["w"]  # waited for the call before it
    assert clock.end["w"] <= min(clock.start["r2"], clock.start["r3"])  # the calls after it waited
    assert clock.start["r3"] < clock.end["r2"] and clock.start["r2"] < clock.end["r3"]  # those two side by side


def test_which_built_in_tools_run_alone(tmp_path):
    reg = registry([caps.filesystem(root=tmp_path, writable=True), caps.shell(), caps.python({}),
                    caps.edn(root=tmp_path, writable=True), caps.namespace({})])
    alone = sorted(name for name, tool in reg.items() if not tool.concurrent)
    assert alone == ["delete_edn", "delete_file", "run_python", "run_shell", "set_edn", "write_file"]
    assert registry([caps.shell(concurrent=True)])["run_shell"].concurrent
    wrapped = requires_person(Tool("t", lambda: "x"))
    assert registry([{"id": "c", "tools": [wrapped]}])["t"].concurrent is False
    with pytest.raises(ToolError, match="concurrent must be True or False"):
        registry([{"id": "c", "tools": [{"name": "t", "handler": print, "concurrent": "no"}]}])


def test_started_for_every_call_before_any_result_and_the_live_view_shows_them_running():
    seen: list[str] = []
    shown: list[str] = []
    everyone = threading.Barrier(3, timeout=5)  # each call waits until all three are running

    view = display.LiveView(show=lambda bundle: type("Handle", (), {"update": lambda *a, **k: None})(), interval=0)

    def listen(event):
        view(event)
        seen.append(event.kind)

    def all_running(name):
        if everyone.wait() == 0:
            shown.append(view.activity_html())

    clock = Clock()
    result = _agent([[("probe", {"name": n, "seconds": 0.05}) for n in "abc"], "done"],
                    clock.sync_tool(barrier=all_running), on_event=listen).run("go")
    assert result.done
    calls = [k for k in seen if k in ("tool-call-started", "tool-call")]
    assert calls == ["tool-call-started"] * 3 + ["tool-call"] * 3
    assert shown[0].count(">running</span>") == 3


def test_cancelling_a_round_cancels_its_running_calls_and_keeps_the_session(w, board):
    server = board.serve(w.name, w.script([w.body(w.tool_case), w.body("final"),
                                           calls_body(w, ["Kaunas", "Riga", "Tallinn"]), w.body("answer")]))
    running, cancelled = [], []
    all_started = asyncio.Event()

    async def get_weather(city: str) -> str:
        if city == "Vilnius":
            return "raining in Vilnius"
        running.append(city)
        if len(running) == 3:
            all_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(city)
            raise

    capability = {"id": "weather", "tools": [{"name": "get_weather", "handler": get_weather,
                                              "parameters": {"city": {"type": "string", "required": True}}}]}
    session = w.build(server.url, capabilities=[capability]).session()

    async def main():
        await session.arun("Weather in Vilnius?")
        before = list(session.transcript)
        turn = asyncio.create_task(session.arun("And the Baltic capitals?"))
        await asyncio.wait_for(all_started.wait(), 5)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        assert session.transcript == before and session.turns == 1
        return await session.arun("Thanks.")

    result = asyncio.run(main())
    assert sorted(cancelled) == ["Kaunas", "Riga", "Tallinn"]
    assert result.done and session.turns == 2


def test_a_lone_sync_tool_runs_in_a_thread_only_when_something_could_go_on_meanwhile():
    where: list[tuple[str, bool]] = []
    started = threading.Barrier(2, timeout=5)

    def probe(name: str) -> str:
        where.append((name, threading.current_thread() is threading.main_thread()))
        if name.startswith("batch"):
            started.wait()  # both runs' tools at once: neither blocks the loop the other needs
        return f"{name} done"

    tool = {"name": "probe", "description": "Say done.", "handler": probe,
            "parameters": {"name": {"type": "string", "required": True}}}

    def one(name: str, **options):
        return _agent([[("probe", {"name": name})], "done"], tool, **options)

    async def main():
        assert (await one("alone").arun("go")).output == "done"
        assert (await one("watched", on_event=lambda event: None).arun("go")).output == "done"
        first, second = await asyncio.gather(one("batch-1").arun("go"), one("batch-2").arun("go"))
        assert first.output == second.output == "done"

    asyncio.run(main())
    assert dict(where) == {"alone": True, "watched": False, "batch-1": False, "batch-2": False}


def test_an_observer_alone_keeps_a_lone_sync_tool_inline_and_hears_the_run():
    """Tracing watches every run yet needs nothing of the loop while a tool works: a run only an
    observer hears takes the inline path of an unwatched one, and the observer hears it all."""
    heard: list[str] = []
    on_main: list[bool] = []

    def probe(name: str) -> str:
        on_main.append(threading.current_thread() is threading.main_thread())
        return f"{name} done"

    class Observer:
        def run(self):
            return lambda event: heard.append(event.kind)

    tool = {"name": "probe", "description": "Say done.", "handler": probe,
            "parameters": {"name": {"type": "string", "required": True}}}
    previous = events.observe(Observer)
    try:
        agent = _agent([[("probe", {"name": "traced"})], "done"], tool)
        assert asyncio.run(agent.arun("go")).output == "done"
    finally:
        events.observe(previous)
    assert on_main == [True]
    assert heard == ["run-started", "model-request", "assistant", "tool-call-started", "tool-call", "model-request",
                     "assistant", "run-finished"]
