"""Long streamed answers in ``%%agent`` cells, measured in real JupyterLab and Chromium.

    python -m bench.bench_browser            # needs /usr/bin/chromium and playwright

The model is a loopback OpenAI-compatible server in its own process (``--serve``) streaming
``TOKENS`` tokens of Markdown (one per chunk) at ``RATE`` per second, noting when it sent the
first and the last. Chromium runs the notebook in JupyterLab, and three figures come out:

* **updates/s**: the display messages (``display_data``/``update_display_data``) the frontend
  received over the kernel's websocket while the cell ran, per second of the stream;
* **render ms**: from the last chunk leaving the server to the rendered answer in the page (the
  kernel renders the Markdown, sanitised, as HTML; a MutationObserver, then the next animation
  frame; one clock for both);
* **display CPU**: the kernel's CPU in the live view (its event listener, its throttled
  flushes and the final render, sending the display messages included) during the first
  turn, as a share of the stream's duration; the kernel's whole CPU for that turn and for the
  same streamed turn without a display (``await bot.arun(..., stream=True)``) are printed
  beside it.

Without Chromium or Playwright the rows are skipped, and the reason printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .common import ROOT, row

__all__ = ["measure", "TOKENS", "RATE"]

TOKENS, RATE = 10_000, 200
MARK = "END-OF-ANSWER-7f3a"
CHROMIUM = "/usr/bin/chromium"


# --- the model (child process) ---------------------------------------------------------------

def answer_tokens(count: int) -> list[str]:
    """``count`` tokens of Markdown an answer might hold: headings, lists, code, emphasis."""
    words = ("the", "bettong", "digs", "for", "truffles", "at", "night", "and", "rests", "in", "a", "nest",
             "of", "grass", "under", "shrubs", "while", "foxes", "hunt", "nearby")
    tokens: list[str] = []
    while len(tokens) < count - 1:
        n = len(tokens)
        if n % 400 == 0:
            tokens += [f"\n\n## Part {n // 400 + 1}\n\n"]
        elif n % 150 == 0:
            tokens += ["\n\n```python\n", "burrows = ", f"[{n}, {n + 1}]", "\n```\n\n"]
        elif n % 60 == 0:
            tokens += ["\n- ", "**note**", " "]
        elif n % 25 == 0:
            tokens += [".\n\n"]
        else:
            tokens.append(words[n % len(words)] + " ")
    return tokens[:count - 1] + [f" {MARK}"]


async def _serve(count: int, rate: float) -> None:
    tokens = answer_tokens(count)
    stats = {"first": None, "last": None, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line[15:]) for line in head.split(b"\r\n")
                               if line[:15].lower() == b"content-length:"), 0)
                if length:
                    await reader.readexactly(length)
                if head.startswith(b"GET /stats"):
                    body = json.dumps(stats).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                    await writer.drain()
                    continue
                stats["requests"] += 1
                await _stream(writer, tokens, rate, stats)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


async def _stream(writer: asyncio.StreamWriter, tokens: list[str], rate: float, stats: dict) -> None:
    def chunk(data: str) -> bytes:
        piece = f"data: {data}\n\n".encode()
        return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"

    def event(delta: dict, **extra) -> bytes:
        return chunk(json.dumps({"id": "b", "object": "chat.completion.chunk", "model": "bench",
                                 "choices": [{"index": 0, "delta": delta, **extra}]}))

    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    loop = asyncio.get_running_loop()
    start = loop.time()
    stats["first"] = time.time()
    for i, token in enumerate(tokens):
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))  # on schedule, never drifting
        writer.write(event({"content": token}))
        await writer.drain()
    stats["last"] = time.time()
    writer.write(event({}, finish_reason="stop"))
    writer.write(chunk(json.dumps({"id": "b", "object": "chat.completion.chunk", "model": "bench", "choices": [],
                                   "usage": {"prompt_tokens": 20, "completion_tokens": len(tokens),
                                             "total_tokens": 20 + len(tokens)}})))
    writer.write(chunk("[DONE]") + b"0\r\n\r\n")
    await writer.drain()


# --- the measurement ------------------------------------------------------------------------------

PROMPT = "%%agent bot\nTell me everything about bettongs."
# The kernel's CPU in the live view (its listener, throttled flushes and the final render, the
# display messages they send included), on the thread that runs them.
_TIMED = """
from bettong_nb.notebook import display as _display
_view_cpu = [0.0, False]

def _timed(method):
    def timed(self, *args, **kwargs):
        if _view_cpu[1]:  # finish() calls flush(): counted once
            return method(self, *args, **kwargs)
        _view_cpu[1], started = True, time.thread_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            _view_cpu[0] += time.thread_time() - started
            _view_cpu[1] = False
    return timed

for _name in ("__call__", "flush", "finish", "fail"):
    setattr(_display.LiveView, _name, _timed(getattr(_display.LiveView, _name)))
"""


def _notebook(url: str, results: Path, turns: int) -> dict:
    """Setup, the first turn between two CPU readings, the other turns, the same turn without a
    display between two CPU readings, and the readings written to ``results``."""
    cells = [
        "%load_ext bettong_nb\nimport json, time\nimport bettong_nb\n"
        f"bot = bettong_nb.openai(base_url={url!r}, api_key='sk-bench', model='bench')\n" + _TIMED,
        "_cpu = time.process_time()\n_view_cpu[0] = 0.0",
        PROMPT,
        "_cpu_display = time.process_time() - _cpu\n_view = _view_cpu[0]",
        *[PROMPT] * (turns - 1),
        "_cpu = time.process_time()\n_plain = await bot.arun('Tell me everything about bettongs.', stream=True)\n"
        "_cpu_plain = time.process_time() - _cpu",
        f"open({str(results)!r}, 'w').write(json.dumps({{'display': _cpu_display, 'plain': _cpu_plain, "
        "'view': _view, 'chars': len(_plain.output)}))",
    ]
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                       "source": source} for i, source in enumerate(cells)],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


# Installed before JupyterLab loads: counts the display messages the kernel's websocket brings
# while counting is on, notes when the final answer (its sanitised HTML) arrived and was rendered.
_PAGE = """(() => {
    const mark = MARK, Native = window.WebSocket, decoder = new TextDecoder();
    const display = /"msg_type":\\s*"(?:update_)?display_data"/g;
    window.__frames = {counting: false, cell: 0, display: 0, markdown: null, rendered: null, busy: 0};
    new PerformanceObserver(list => {
        if (window.__frames.counting) for (const task of list.getEntries()) window.__frames.busy += task.duration;
    }).observe({type: 'longtask', buffered: false});
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', event => {
                const f = window.__frames;
                if (!f.counting) return;
                const text = typeof event.data === 'string' ? event.data : decoder.decode(event.data);
                f.display += (text.match(display) || []).length;
                if (f.markdown === null && text.includes('bettong-markdown') && text.includes(mark))
                    f.markdown = Date.now();
            });
        }
    };
    new MutationObserver(() => {
        const f = window.__frames;
        if (!f.counting || f.rendered) return;
        const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[f.cell];
        const el = cell && cell.querySelector('.jp-OutputArea .bettong-markdown');
        if (el && el.textContent.includes(mark))
            requestAnimationFrame(() => { f.rendered = f.rendered || Date.now(); });
    }).observe(document, {childList: true, subtree: true, characterData: true});
})();"""


def _stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=5) as reply:
        return json.loads(reply.read())


def unavailable() -> str | None:
    """Why the browser rows cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install '.[test]')"
    return None


def run(tokens: int, rate: float, turns: int) -> dict:
    """``turns`` %%agent turns of ``tokens`` at ``rate``, measured in the browser (see the module doc)."""
    from tests.support.browser import (
        JupyterLab,
        chromium,
        open_notebook,
        run_cell,
        wait_idle,
    )

    server = subprocess.Popen([sys.executable, "-m", "bench.bench_browser", "--serve", str(tokens), str(rate)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
            root = Path(tmp) / "root"
            root.mkdir()
            results = root / "results.json"
            (root / "stream.ipynb").write_text(json.dumps(_notebook(url, results, turns)))
            wait_ms = (tokens / rate + 60) * 1000
            measured: list[dict] = []
            lab = JupyterLab(root, Path(tmp) / "state").start()
            try:
                with chromium() as browser:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.add_init_script(_PAGE.replace("MARK", json.dumps(MARK)))
                    open_notebook(page, lab, "stream.ipynb")
                    for index in range(turns + 5):
                        turn = index == 2 or 4 <= index < turns + 3
                        if turn:
                            page.evaluate("cell => Object.assign(window.__frames, {counting: true, cell, display: 0, "
                                          "markdown: null, rendered: null, busy: 0})", index)
                        run_cell(page, index)
                        wait_idle(page, index, timeout_ms=wait_ms)
                        if turn:
                            page.wait_for_function("window.__frames.rendered !== null", timeout=30_000)
                            measured.append({**page.evaluate("() => { window.__frames.counting = false; return window.__frames; }"),
                                             **_stats(url)})
            finally:
                lab.stop()
            cpu = json.loads(results.read_text())
        finally:
            server.terminate()
            server.wait(5)
    first = measured[0]
    return {"updates": sum(m["display"] for m in measured), "duration_s": sum(m["last"] - m["first"] for m in measured),
            "render_s": [m["rendered"] / 1000 - m["last"] for m in measured],
            "arrived_s": [m["markdown"] / 1000 - m["last"] for m in measured],
            "busy_s": [m["busy"] / 1000 for m in measured], "stream_s": first["last"] - first["first"],
            "display_cpu_s": cpu["view"], "turn_cpu_s": cpu["display"], "plain_cpu_s": cpu["plain"]}


def measure(tokens: int = TOKENS, rate: float = RATE, turns: int = 3) -> list[dict]:
    why = unavailable()
    if why is not None:
        print(f"  bench.bench_browser: skipped: {why}", file=sys.stderr)
        return []
    m = run(tokens, rate, turns)
    ms = lambda values: "/".join(f"{v * 1000:.0f}" for v in values)  # noqa: E731
    print(f"  bench.bench_browser: {m['updates']} display messages in {m['duration_s']:.1f} s of {turns} streams; "
          f"the final answer reached the page {ms(m['arrived_s'])} ms after the last chunk; the page's long "
          f"tasks took {ms(m['busy_s'])} ms; kernel CPU of the first turn {m['turn_cpu_s']:.2f} s with the live "
          f"view ({m['display_cpu_s']:.2f} s in it), {m['plain_cpu_s']:.2f} s without", file=sys.stderr)
    name = f"B1 %%agent, {tokens} tokens streamed at {rate:g}/s in Chromium"
    return [row(f"{name}: display updates per s", [m["updates"] / m["duration_s"]], None, target=20,
                target_kind="ms", scale=1, unit="/s"),
            row(f"{name}: last chunk -> rendered answer", m["render_s"], None, target=200, target_kind="ms"),
            row(f"{name}: kernel CPU on display, % of stream", [m["display_cpu_s"] / m["stream_s"]], None,
                target=10, target_kind="ms", scale=100, unit="%")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_browser")
    parser.add_argument("--serve", nargs=2, type=float, metavar=("TOKENS", "RATE"),
                        help="run the streaming model server (the child process)")
    parser.add_argument("--tokens", type=int, default=TOKENS)
    args = parser.parse_args()
    if args.serve:
        try:
            asyncio.run(_serve(int(args.serve[0]), args.serve[1]))
        except KeyboardInterrupt:
            pass
    else:
        from .common import table

        print(table(measure(args.tokens)))
