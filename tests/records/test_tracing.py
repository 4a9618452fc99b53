"""OpenTelemetry spans of runs, read back from the SDK's in-memory exporter: the span tree and its
attributes for a run with two model requests (the first answered 429, then 200), a parallel pair
of tool calls, a denied call, a tool that fails, and a run the model server refuses — run sync,
async, in a session, in a batch and on a Dask LocalCluster (its workers export to files); the
content switch, redaction of every secret shape of the exposure corpus, and no cost without a
tracer provider."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import math
import os
import subprocess
import sys
import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import bettong_nb
from support import REPO
from support.servers import LoopbackServer, Reply, chat_message, tool_call
from support.secrets_corpus import EXPOSURES, corpus_case, leaks

PRICES = {"input": 1.0, "output": 2.0, "cache_hit": 0.1}
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
         "prompt_tokens_details": {"cached_tokens": 60}, "completion_tokens_details": {"reasoning_tokens": 5}}
COST = (40 * 1.0 + 60 * 0.1 + 20 * 2.0) / 1e6  # one request at PRICES


def _reset_tracer_provider(provider):
    # The global provider can be set once per process; OpenTelemetry's own test utilities reset
    # these two globals the same way, so the rest of the test run goes untraced.
    trace._TRACER_PROVIDER_SET_ONCE = trace.Once()
    trace._TRACER_PROVIDER = provider


@pytest.fixture(scope="module")
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_tracer_provider(None)
    trace.set_tracer_provider(provider)
    yield exporter
    _reset_tracer_provider(None)


@pytest.fixture
def spans(exporter, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    exporter.clear()
    return exporter


class Model:
    """An OpenAI-compatible server: a prompt's first request gets 429 (Retry-After 0), its
    second asks for four tool calls, and once tool results came back it answers ``answer``.
    A prompt starting "fail" gets a 400 whose message is ``error_text``."""

    def __init__(self, answer: str = "done", error_text: str = "model not allowed", args=None):
        self.answer, self.error_text, self.args = answer, error_text, args or {"name": "a"}
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, request):
        messages = request.json()["messages"]
        prompt = [m["content"] for m in messages if m["role"] == "user"][-1]  # this turn's
        if prompt.startswith("fail"):
            # plain text: a JSON-escaped PEM tail is a gap of the redactor itself (see the report)
            return Reply.text(self.error_text, status=400, content_type="text/plain")
        if messages[-1]["role"] == "tool":
            return Reply.json(chat_message(self.answer, usage=USAGE, model="test-model-0613"))
        with self.lock:
            first = prompt not in self.seen
            self.seen.add(prompt)
        if first:
            return Reply.json({"error": {"message": "slow down"}}, status=429, **{"Retry-After": "0"})
        calls = [tool_call("read", self.args, id="c_a"), tool_call("read", {"name": "b"}, id="c_b"),
                 tool_call("forbidden", {}, id="c_f"), tool_call("broken", {}, id="c_x")]
        return Reply.json(chat_message(None, tool_calls=calls, usage=USAGE, model="test-model-0613"))


def capability(result: str = "contents", error: str = "disk on fire"):
    def read(name: str = "") -> str:
        return f"{result} of {name}"

    def broken() -> str:
        raise OSError(error)

    return {"id": "files", "instructions": None, "tools": [
        {"name": "read", "description": "Reads.", "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}}}, "handler": read},
        {"name": "forbidden", "description": "Never allowed.", "parameters": {}, "handler": lambda: "no"},
        {"name": "broken", "description": "Fails.", "parameters": {}, "handler": broken}]}


def approve(request):
    return bettong_nb.Deny("not today") if request.tool == "forbidden" else True


def agent_on(server, **options):
    return bettong_nb.openai(base_url=server.url, api_key="sk-test-agent-key-Zq81kPWm42sRTj77", model="test-model",
                             capabilities=[capability(**options.pop("cap", {}))], approve_fn=approve, prices=PRICES,
                             **options)


def tree(finished):
    """{span_id: span} and {parent span_id: [children]} of finished spans."""
    by_id = {s.context.span_id: s for s in finished}
    children: dict = {}
    for s in finished:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    return by_id, children


def check_run(run, children, *, cell=None):
    """One run's span and its children: two chats, four tools, as the scenario has them."""
    assert run.name == "invoke_agent" and run.kind == trace.SpanKind.INTERNAL
    a = run.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "test-model" and a["server.address"] == "127.0.0.1"
    assert a["gen_ai.usage.input_tokens"] == 200 and a["gen_ai.usage.output_tokens"] == 40
    assert a["gen_ai.usage.cache_read.input_tokens"] == 120 and a["gen_ai.usage.reasoning.output_tokens"] == 10
    assert a["bettong_nb.stop_reason"] == "end_turn" and a["gen_ai.response.finish_reasons"] == ("stop",)
    assert math.isclose(a["bettong_nb.cost"], 2 * COST) and a["bettong_nb.cost.currency"] == "USD"
    assert a.get("bettong_nb.cell") == cell
    assert run.status.status_code == trace.StatusCode.UNSET
    kids = sorted(children[run.context.span_id], key=lambda s: s.start_time)
    chats = [s for s in kids if s.name.startswith("chat")]
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in kids if s.name.startswith("execute_tool")}
    assert [s.name for s in chats] == ["chat test-model", "chat test-model"] and len(kids) == 6
    first, second = chats
    for chat in chats:
        c = chat.attributes
        assert chat.kind == trace.SpanKind.CLIENT and c["gen_ai.operation.name"] == "chat"
        assert c["gen_ai.response.model"] == "test-model-0613" and c["gen_ai.usage.input_tokens"] == 100
        assert c["gen_ai.usage.cache_read.input_tokens"] == 60 and c["gen_ai.usage.reasoning.output_tokens"] == 5
        assert math.isclose(c["bettong_nb.cost"], COST) and c["bettong_nb.cost.source"] == "given"
        assert "gen_ai.input.messages" not in c and "gen_ai.output.messages" not in c  # content is off by default
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["bettong_nb.retries"] == 1 and second.attributes["bettong_nb.retries"] == 0
    assert [e.name for e in first.events] == ["retry"] and first.events[0].attributes["bettong_nb.retry.attempt"] == 1
    assert set(tools) == {"c_a", "c_b", "c_f", "c_x"}
    for call_id, span in tools.items():
        t = span.attributes
        assert t["gen_ai.operation.name"] == "execute_tool" and t["bettong_nb.capability"] == "files"
        assert span.name == f"execute_tool {t['gen_ai.tool.name']}" and t.get("bettong_nb.cell") == cell
        assert "gen_ai.tool.call.arguments" not in t and "gen_ai.tool.call.result" not in t
        assert first.end_time <= span.start_time and span.end_time <= second.start_time
    assert tools["c_a"].attributes["bettong_nb.approval"] == "allowed"
    assert tools["c_a"].attributes["bettong_nb.approval.by"] == "approve_fn"
    # the pair ran side by side: each started before the other ended
    assert tools["c_a"].start_time < tools["c_b"].end_time and tools["c_b"].start_time < tools["c_a"].end_time
    denied = tools["c_f"].attributes
    assert denied["bettong_nb.approval"] == "denied" and denied["bettong_nb.status"] == "denied"
    assert tools["c_f"].status.status_code == trace.StatusCode.UNSET
    failed = tools["c_x"]
    assert failed.attributes["error.type"] == "OSError" and failed.status.status_code == trace.StatusCode.ERROR


def check_failed_run(run, children):
    assert run.status.status_code == trace.StatusCode.ERROR and run.attributes["error.type"] == "400"
    [chat] = children[run.context.span_id]
    assert chat.name == "chat test-model" and chat.attributes["error.type"] == "400"
    assert chat.status.status_code == trace.StatusCode.ERROR and "model not allowed" in chat.status.description


def run_pair(call):
    """The scenario's run and a failing one, each through ``call(agent, prompt)``."""
    with LoopbackServer(Model()) as server:
        agent = agent_on(server)
        result = call(agent, "go")
        assert result.output == "done" and len(result.requests) == 2
        with pytest.raises(bettong_nb.ServiceError):
            call(agent, "fail now")


def roots(finished):
    return sorted((s for s in finished if s.parent is None), key=lambda s: s.start_time)


def test_sync_run_span_tree(spans):
    run_pair(lambda agent, prompt: agent.run(prompt))
    finished = spans.get_finished_spans()
    _, children = tree(finished)
    ok, failed = roots(finished)
    check_run(ok, children)
    check_failed_run(failed, children)
    assert len(finished) == 1 + 6 + 1 + 1


def test_async_run_nests_under_the_callers_span(spans):
    tracer = trace.get_tracer("test")

    async def both():
        with tracer.start_as_current_span("notebook work") as outer:
            with LoopbackServer(Model()) as server:
                agent = agent_on(server)
                assert (await agent.arun("go")).output == "done"
                with pytest.raises(bettong_nb.ServiceError):
                    await agent.arun("fail")
        return outer

    outer = asyncio.run(both())
    finished = spans.get_finished_spans()
    _, children = tree(finished)
    ok, failed = sorted(children[outer.context.span_id], key=lambda s: s.start_time)
    check_run(ok, children)
    check_failed_run(failed, children)


def test_session_turns_are_runs(spans):
    with LoopbackServer(Model()) as server:
        chat = agent_on(server).session()
        chat.run("go")
        chat.run("again")
        assert chat.usage_frame()["cell"].isna().all()  # outside a notebook a run has no cell
    finished = spans.get_finished_spans()
    _, children = tree(finished)
    first, second = roots(finished)
    check_run(first, children)
    check_run(second, children)


def test_batch_items_are_children_of_the_batch(spans):
    with LoopbackServer(Model()) as server:
        batch = agent_on(server).map(["go", "fail", "again"], concurrency=3, progress=False)
    assert [r.output for r in batch][::2] == ["done", "done"] and len(batch.failed) == 1
    finished = spans.get_finished_spans()
    _, children = tree(finished)
    [root] = roots(finished)
    assert root.name == "bettong_nb.batch" and root.attributes["bettong_nb.batch.items"] == 3
    items = sorted(children[root.context.span_id], key=lambda s: s.attributes["bettong_nb.batch.item.index"])
    assert [s.name for s in items] == ["bettong_nb.batch.item"] * 3
    for index, item in enumerate(items):
        [run] = children[item.context.span_id]
        if index == 1:
            check_failed_run(run, children)
            assert item.status.status_code == trace.StatusCode.ERROR and item.attributes["error.type"] == "400"
        else:
            check_run(run, children)


# --- Dask: the trace context travels in the task; workers export their spans to files ---------

def _trace_to_file(directory):
    """On a worker: a tracer provider that writes each span as one JSON line to a file of its own."""
    import os as _os

    from opentelemetry import trace as _trace
    from opentelemetry.sdk.trace import TracerProvider as _Provider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor as _Simple

    out = open(_os.path.join(directory, f"spans-{_os.getpid()}.jsonl"), "a", encoding="utf-8")
    provider = _Provider()
    exporter = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
    provider.add_span_processor(_Simple(exporter))
    _trace.set_tracer_provider(provider)


def test_dask_partitions_continue_the_batch_trace_on_the_workers(spans, tmp_path, monkeypatch):
    import cloudpickle
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    # An IPython shell made by an earlier test replaces __main__ with a module without __spec__,
    # which starting worker processes reads; a plain script's __main__ has it.
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", getattr(sys.modules["__main__"], "__spec__", None),
                        raising=False)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    try:
        with LoopbackServer(Model()) as server, \
                LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                             host="127.0.0.1", env={"OPENAI_API_KEY": "key-of-the-workers"}) as cluster, \
                Client(cluster) as client:
            client.run(_trace_to_file, str(tmp_path))
            frame = dd.from_pandas(pd.DataFrame({"text": ["go", "again", "fail", "more"]}), npartitions=2)
            agent = bettong_nb.openai(base_url=server.url, model="test-model", capabilities=[capability()],
                                      approve_fn=approve, prices=PRICES)
            out = agent.map_frame(frame, prompt="{text}", output="answer").compute()
            assert out["answer"].tolist()[:2] == ["done", "done"] and out["error"].notna().tolist()[2]
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    [batch] = [s for s in spans.get_finished_spans() if s.name == "bettong_nb.batch"]
    assert batch.attributes["bettong_nb.batch.partitions"] == 2
    remote = [json.loads(line) for path in glob.glob(str(tmp_path / "spans-*.jsonl")) for line in open(path)]
    assert len({path for path in glob.glob(str(tmp_path / "spans-*.jsonl")) if os.path.getsize(path)}) >= 1
    by_id = {s["context"]["span_id"]: s for s in remote}
    kids: dict = {}
    for s in remote:
        kids.setdefault(s["parent_id"], []).append(s)
    trace_id = f"0x{batch.context.trace_id:032x}"
    assert {s["context"]["trace_id"] for s in remote} == {trace_id}  # one trace, client and workers
    partitions = [s for s in remote if s["name"] == "bettong_nb.batch.partition"]
    assert sorted(s["attributes"]["bettong_nb.batch.partition.index"] for s in partitions) == [0, 1]
    assert {s["parent_id"] for s in partitions} == {f"0x{batch.context.span_id:016x}"}
    runs = [s for s in remote if s["name"] == "invoke_agent"]
    assert len(runs) == 4 and sum(s["status"]["status_code"] == "ERROR" for s in runs) == 1
    for run in runs:
        # invoke_agent → item → the partition's own batch → the partition
        item = by_id[run["parent_id"]]
        local = by_id[item["parent_id"]]
        assert (item["name"], local["name"]) == ("bettong_nb.batch.item", "bettong_nb.batch")
        assert by_id[local["parent_id"]]["name"] == "bettong_nb.batch.partition"
        names = sorted(s["name"] for s in kids.get(run["context"]["span_id"], []))
        if run["status"]["status_code"] == "ERROR":
            assert names == ["chat test-model"] and run["attributes"]["error.type"] == "400"
        else:
            assert names == ["chat test-model"] * 2 + ["execute_tool broken", "execute_tool forbidden"] + \
                ["execute_tool read"] * 2
            assert math.isclose(run["attributes"]["bettong_nb.cost"], 2 * COST)


# --- content: off by default, redacted when on ------------------------------------------------

def exported_text(finished) -> str:
    """Everything an exporter would send of these spans, as text."""
    return "\n".join(s.to_json() for s in finished)


def test_content_is_captured_only_when_switched_on(spans, monkeypatch):
    run_pair(lambda agent, prompt: agent.run(prompt))
    assert "gen_ai.input.messages" not in exported_text(spans.get_finished_spans())
    spans.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    run_pair(lambda agent, prompt: agent.run(prompt))
    finished = spans.get_finished_spans()
    _, children = tree(finished)
    ok, _ = roots(finished)
    chats = sorted((s for s in children[ok.context.span_id] if s.name.startswith("chat")), key=lambda s: s.start_time)
    sent = json.loads(chats[1].attributes["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[0]["parts"] == [{"type": "text", "content": "go"}]
    assert sent[2]["parts"][0] == {"type": "tool_call_response", "id": "c_a", "result": "contents of a"}
    assert json.loads(chats[0].attributes["gen_ai.output.messages"])[0]["finish_reason"] == "tool_call"
    tools = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in children[ok.context.span_id]
             if s.name.startswith("execute_tool")}
    assert json.loads(tools["c_a"]["gen_ai.tool.call.arguments"]) == {"name": "a"}
    assert tools["c_a"]["gen_ai.tool.call.result"] == "contents of a"
    assert json.loads(ok.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "done"
    assert "You are an agent" in ok.attributes["gen_ai.system_instructions"]


@pytest.mark.parametrize("case", EXPOSURES, ids=lambda c: c["id"])
def test_no_secret_reaches_the_exporter(case, spans, monkeypatch):
    """A secret of every shape in the prompt, the tool arguments, the tool result, a tool's error,
    the model's error and its answer: none reaches a span. Inside secrets.revealed() (where texts
    are cut short unredacted: a PEM block's end cut off is no longer recognisable) the content
    and error messages are withheld."""
    output, agent_key, env, forbidden = corpus_case(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    model = Model(answer=f"the answer: {output}", error_text=f"rejected {output}", args={"name": output})
    with LoopbackServer(model) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key=agent_key, model="test-model", approve_fn=approve,
                                  capabilities=[capability(result=output, error=output)], prices=PRICES)
        for revealed in (False, True):
            spans.clear()
            with bettong_nb.secrets.revealed() if revealed else contextlib.nullcontext():
                agent.run(f"look at {output}")
                with pytest.raises(bettong_nb.ServiceError):
                    agent.run(f"fail {output}")
            text = exported_text(spans.get_finished_spans())
            exported = ("look at" in text, "the answer:" in text, "rejected" in text, '"withheld"' in text)
            assert exported == ((False, False, False, True) if revealed else (True, True, True, False))
            assert leaks(forbidden, text) == [] and leaks(forbidden, json.loads(json.dumps(text))) == []


# --- no tracer, no cost -----------------------------------------------------------------------

def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          cwd=REPO).stdout.strip()


def test_without_a_tracer_provider_nothing_is_imported():
    code = ("import sys, bettong_nb\n"
            "hi = lambda req: bettong_nb.Response([{'type': 'text', 'text': 'hi'}])\n"
            "r = bettong_nb.agent(provider=hi).run('x')\n"
            "print(r.output, sorted(m for m in sys.modules if m.startswith('opentelemetry') or m.endswith('tracing')))")
    assert _python(code) == "hi []"


def test_opentelemetry_loaded_without_a_provider_makes_no_spans():
    code = ("import sys, bettong_nb\n"
            "from opentelemetry import trace\n"
            "from bettong_nb.records import tracing\n"
            "seen = []\n"
            "r = bettong_nb.agent(provider=lambda req: bettong_nb.Response([{'type': 'text', 'text': 'hi'}]),\n"
            "                     on_event=seen.append).run('x')\n"
            "print(r.output, tracing.observer(), type(trace.get_current_span()).__name__)")
    assert _python(code) == "hi None NonRecordingSpan"
