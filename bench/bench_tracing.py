"""What tracing costs a run: W1 (2 model calls + 1 tool) client CPU with ``await agent.arun``.

- tracing off (the front door's observer hook in place, OpenTelemetry never imported) against
  no observer at all: what the hook adds when nobody traces;
- tracing on (the OpenTelemetry SDK, spans to its in-memory exporter) against tracing off;
- for reference, the SDK alone against tracing off: the same four spans a run (the run's, current
  while it goes; two requests'; the tool call's) with no attributes and nothing of ours, on the
  same processor and exporter. What tracing costs above this row is the attributes and our work.

Measured in a child process: importing OpenTelemetry and setting a tracer provider cannot be
undone, and the other benchmarks must run untraced.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from .common import ROOT, mock_server, row

TARGET = 1.15


class _BareSpans:
    """An observer making a W1 run's four spans bare: the SDK's own cost, the floor of tracing."""

    def __init__(self, tracer):
        self.tracer = tracer

    def run(self):
        from opentelemetry import context, trace

        from bettong_nb.core import events

        tracer, spans = self.tracer, {}
        ends = {events.AssistantMessage: events.ModelRequest, events.ToolCallFinished: events.ToolCallStarted}

        def listen(event) -> None:
            kind = type(event)
            if kind is events.RunStarted:
                spans["run"] = tracer.start_span("invoke_agent")
                spans["parent"] = trace.set_span_in_context(spans["run"])
                spans["token"] = context.attach(spans["parent"])
            elif kind is events.ModelRequest or kind is events.ToolCallStarted:
                spans[kind] = tracer.start_span(kind.kind, context=spans["parent"])
            elif kind in ends:
                spans.pop(ends[kind]).end()
            elif kind is events.RunFinished:
                context.detach(spans["token"])
                spans["run"].end()

        return listen


def _child(repeat: int) -> dict[str, list[float]]:
    import bettong_nb
    from bettong_nb.core import events

    from .bench_loop import _agent, _sample_async, _tools

    hook = events.observe(None)
    assert hook is not None, "the front door installs the tracing observer"
    cpus: dict[str, list[float]] = {"none": [], "off": [], "on": [], "sdk alone": [], "off again": []}
    with mock_server() as url:
        agent = _agent(url, _tools(1), [])

        async def rounds(*sides: tuple[str, object]) -> None:
            for _ in range(5):  # interleaved, so drift on the machine hits every side alike
                for name, finder in sides:
                    events.observe(finder)
                    cpus[name].extend((await _sample_async(lambda: agent.arun("go"), repeat // 5))[1])

        async def warm() -> None:
            assert (await agent.arun("go")).output == "Done: 9."

        asyncio.run(warm())
        asyncio.run(rounds(("none", None), ("off", hook)))
        assert "opentelemetry" not in sys.modules
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        bare = _BareSpans(provider.get_tracer("bench"))
        asyncio.run(rounds(("on", hook), ("sdk alone", lambda: bare), ("off again", None)))
        assert len(exporter.get_finished_spans()) >= 8 * len(cpus["on"]), "every traced run exported its spans"
    del bettong_nb
    return cpus


def measure(repeat: int = 200) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "bench.bench_tracing", "--child", str(repeat)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    cpus = json.loads(out.strip().splitlines()[-1])
    return [row("T1 W1, tracing off: arun client CPU vs no observer", cpus["off"], cpus["off"],
                floor_cpus=cpus["none"], target=TARGET, target_kind="ratio"),
            row("T1 W1, tracing on (SDK, in-memory export) vs off", cpus["on"], cpus["on"],
                floor_cpus=cpus["off again"], target=TARGET, target_kind="ratio"),
            row("T1 W1, the SDK alone: 4 bare spans vs off (reference)", cpus["sdk alone"], cpus["sdk alone"],
                floor_cpus=cpus["off again"], target=TARGET, target_kind="ratio")]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(int(sys.argv[2]))))
    else:
        from .common import table

        print(table(measure()))
