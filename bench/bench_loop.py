"""The agent loop against a raw-httpx loop doing the same work, on the same mock server process.

W1: one run = 2 model calls + 1 tool, empty history, one tool.
W2: the same with 20 tools and a 60-message history.
W3: 300 runs at concurrency 30 against a server answering after 100 ms (floor: 2 s).

The floor is what a careful user would hand-write with httpx: build the JSON, POST it, read the
answer, call the tool, POST again. Both sides reuse one connection pool. The target compares
like with like — ``arun`` against the same loop on httpx's AsyncClient, which the library uses
inside — and a second row shows the sync ``run()`` against a loop on httpx's sync Client, which
is intrinsically faster per request on loopback than any asyncio client (see the README table).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

import bettong_nb

from .common import mock_server, row, sample

SYSTEM = "You are a benchmark agent. Call run_probe, then answer."


def probe(n: int = 1) -> str:
    return str(n * 3)


def _tools(count: int) -> list[dict]:
    extra = [{"name": f"tool_{i}", "description": f"Benchmark tool number {i}, never called.",
              "parameters": {"x": {"type": "string", "description": "anything", "required": True}},
              "handler": probe} for i in range(count - 1)]
    return [{"name": "run_probe", "description": "Multiply n by three.",
             "parameters": {"n": {"type": "integer", "description": "a number", "required": True}},
             "handler": probe}] + extra


def _history(count: int) -> list[dict]:
    """A prior transcript of ``count`` messages after the system message, neutral form."""
    messages = [{"role": "system", "content": SYSTEM}]
    for i in range(count // 2):
        messages.append({"role": "user", "content": f"Earlier question number {i}: " + "lorem ipsum " * 20})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Earlier answer {i}. " * 10}]})
    return messages


def _wire_history(history: list[dict]) -> list[dict]:
    out = []
    for m in history:
        content = m["content"] if isinstance(m["content"], str) else "".join(b["text"] for b in m["content"])
        out.append({"role": m["role"], "content": content})
    return out


def _raw_parts(tools: list[dict], history: list[dict]):
    wire_tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                    "parameters": bettong_nb.capability.parameters_schema(t["parameters"])}}
                  for t in tools]
    handlers = {t["name"]: t["handler"] for t in tools}

    def step(messages: list[dict], message: dict) -> bool:
        """Append the answer and its tool results; True when the run is over."""
        messages.append(message)
        for call in message.get("tool_calls") or ():
            result = handlers[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return not message.get("tool_calls")

    def body(messages: list[dict]) -> dict:
        return {"model": "bench", "messages": messages, "tools": wire_tools, "tool_choice": "auto"}

    return step, body


def raw_loop(client: httpx.Client, url: str, tools: list[dict], history: list[dict]):
    """The hand-written loop with httpx's sync client."""
    step, body = _raw_parts(tools, history)

    def run() -> str:
        messages = _wire_history(history) + [{"role": "user", "content": "go"}]
        while not step(messages, client.post(url, json=body(messages)).json()["choices"][0]["message"]):
            pass
        return messages[-1]["content"]

    return run


def raw_async_loop(client: httpx.AsyncClient, url: str, tools: list[dict], history: list[dict]):
    """The same loop with httpx's AsyncClient, the client the library uses inside."""
    step, body = _raw_parts(tools, history)

    async def run() -> str:
        messages = _wire_history(history) + [{"role": "user", "content": "go"}]
        while not step(messages, (await client.post(url, json=body(messages))).json()["choices"][0]["message"]):
            pass
        return messages[-1]["content"]

    return run


def _agent(url: str, tools: list[dict], history: list[dict]):
    cap = {"id": "bench", "tools": tools}
    return bettong_nb.openai(base_url=url, api_key="sk-bench", model="bench", capabilities=[cap],
                             messages=history if len(history) > 1 else ())


async def _sample_async(fn, repeat: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        await fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return walls, cpus


def overhead(label: str, tool_count: int, history_len: int, target: float, repeat: int,
             cpu_target: float | None = None) -> list[dict]:
    """``await agent.arun`` against the raw AsyncClient loop (the target: what the library adds),
    and the sync ``agent.run`` against the raw sync-httpx loop (what a script sees). With
    ``cpu_target``, a third row compares the client CPU of ``arun`` and the raw async loop."""
    tools, history = _tools(tool_count), _history(history_len)
    ours, ours_cpu, floor, floor_cpu, sync_ours, sync_cpu, sync_floor = [], [], [], [], [], [], []
    with mock_server() as url, httpx.Client(base_url=url) as client:
        agent = _agent(url, tools, history)
        raw = raw_loop(client, "/chat/completions", tools, history)

        async def interleaved() -> None:
            async with httpx.AsyncClient(base_url=url) as aclient:
                raw_async = raw_async_loop(aclient, "/chat/completions", tools, history)
                assert (await agent.arun("go")).output == await raw_async() == "Done: 9."
                for _ in range(5):  # interleave, so drift on the machine hits both sides alike
                    w, c = await _sample_async(lambda: agent.arun("go"), repeat // 5)
                    ours.extend(w)
                    ours_cpu.extend(c)
                    w, c = await _sample_async(raw_async, repeat // 5)
                    floor.extend(w)
                    floor_cpu.extend(c)

        asyncio.run(interleaved())
        assert agent.run("go").output == raw() == "Done: 9."
        for _ in range(5):
            w, c = sample(lambda: agent.run("go"), repeat // 5)
            sync_ours.extend(w)
            sync_cpu.extend(c)
            sync_floor.extend(sample(raw, repeat // 5)[0])
    rows = [row(f"{label}: arun vs raw httpx.AsyncClient loop", ours, ours_cpu, floor=floor, target=target,
                target_kind="ratio"),
            row(f"{label}: run() vs raw sync httpx.Client loop", sync_ours, sync_cpu, floor=sync_floor,
                target=target, target_kind="ratio")]
    if cpu_target is not None:
        rows.insert(1, row(f"{label}: arun client CPU vs raw AsyncClient loop's", ours, ours_cpu,
                           floor_cpus=floor_cpu, target=cpu_target, target_kind="ratio"))
    return rows


def concurrency(repeat: int = 3) -> list[dict]:
    """W3 against the physical floor, and the same batch hand-written on one httpx.AsyncClient."""
    runs, width, latency = 300, 30, 0.1
    floor = runs / width * 2 * latency
    with mock_server(latency) as url:
        agent = _agent(url, _tools(1), [])

        async def ours() -> None:
            assert all(r.done for r in await agent.amap(["go"] * runs, concurrency=width, progress=False))

        async def raw() -> None:
            async with httpx.AsyncClient(base_url=url, limits=httpx.Limits(max_connections=width)) as client:
                run = raw_async_loop(client, "/chat/completions", _tools(1), [])
                gate = asyncio.Semaphore(width)

                async def one() -> str:
                    async with gate:
                        return await run()

                assert set(await asyncio.gather(*(one() for _ in range(runs)))) == {"Done: 9."}

        timings: dict = {ours: ([], []), raw: ([], [])}
        for _ in range(repeat):
            for batch, (walls, cpus) in timings.items():
                w, c = time.perf_counter(), time.process_time()
                asyncio.run(batch())
                walls.append(time.perf_counter() - w)
                cpus.append(time.process_time() - c)
    name = f"W3 {runs} runs, concurrency {width}, 100 ms server"
    return [row(f"{name}: amap", *timings[ours], floor=[floor] * repeat, target=1.15, target_kind="ratio"),
            row(f"{name}: raw httpx.AsyncClient (reference)", *timings[raw], floor=[floor] * repeat,
                target=1.15, target_kind="ratio")]


def measure(repeat: int = 200) -> list[dict]:
    return [*overhead("W1 2 calls + 1 tool", 1, 0, 1.3, repeat),
            *overhead("W2 20 tools, 60 messages", 20, 60, 1.5, repeat, cpu_target=0.95),
            *concurrency()]


if __name__ == "__main__":
    from .common import table

    print(table(measure()))
