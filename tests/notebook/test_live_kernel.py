"""The magics in a live kernel. The stop button (a kernel interrupt): whatever a cell waits on —
a slow model behind a loopback server, a sync tool, an approval prompt, a blocking agent.run(),
a batch — the cell ends within a second with one line, and the session is usable and
unchanged. And code handed back to the frontend: one set_next_input payload, nothing run."""

from __future__ import annotations

import json
import queue
import re
import time

import pytest
from jupyter_client.manager import start_new_kernel

from support.notebooks import WIDGET
from support.servers import LoopbackServer
from support.slow_model import SlowModel

INTERRUPTED = "interrupted — the session is unchanged"


@pytest.fixture(scope="module")
def model():
    slow = SlowModel()
    with LoopbackServer(slow) as server:
        slow.url = server.url
        yield slow


@pytest.fixture(scope="module")
def kernel(model, tmp_path_factory):
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path_factory.mktemp("kernel")))
    setup = "\n".join([
        "%load_ext bettong_nb",
        "import json, time",
        "import bettong_nb",
        "from bettong_nb.notebook import approvals",
        "from bettong_nb.providers.scripted import Scripted",
        f"slow = bettong_nb.openai(base_url='{model.url}/v1', api_key='k', max_retries=0,",
        "                         prices={'input': 1, 'output': 1})",
        "chat = slow.session()",
        "def nap(seconds: int) -> str:",
        "    '''Sleep.'''",
        "    time.sleep(seconds)",
        "    return 'rested'",
        "def spin(seconds: int) -> str:",
        "    '''Busy.'''",
        "    end = time.monotonic() + seconds",
        "    while time.monotonic() < end:",
        "        pass",
        "    return 'spun'",
        "tools = [{'id': 'rest', 'instructions': None, 'tools': [bettong_nb.tool(nap), bettong_nb.tool(spin)]}]",
    ])
    assert kc.execute_interactive(setup, timeout=60)["content"]["status"] == "ok"
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _outputs(kc, msg_id: str, timeout: float = 5) -> list[dict]:
    """The iopub messages of ``msg_id`` until its kernel is idle."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError(f"no idle within {timeout} s: {[m['msg_type'] for m in seen]}")


def _interrupt_when(km, kc, code: str, ready) -> tuple[float, dict, list[dict]]:
    """Run ``code``, interrupt once ``ready()`` holds; (seconds to the reply, reply, iopub messages)."""
    msg_id = kc.execute(code)
    deadline = time.monotonic() + 30
    while not ready():
        assert time.monotonic() < deadline, "the cell never got to the wait"
        time.sleep(0.05)
    time.sleep(0.2)  # well inside the wait
    started = time.monotonic()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    took = time.monotonic() - started
    assert reply["parent_header"]["msg_id"] == msg_id
    return took, reply["content"], _outputs(kc, msg_id)


def _value(kc, expression: str):
    out = []
    kc.execute_interactive(f"print(json.dumps({expression}))", timeout=30,
                           output_hook=lambda m: m["msg_type"] == "stream" and out.append(m["content"]["text"]))
    return json.loads("".join(out))


def _one_line(reply: dict, messages: list[dict]) -> None:
    assert reply["status"] == "error" and reply["ename"] == "Interrupted"
    (error,) = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert error["traceback"] == [INTERRUPTED]  # one line, no traceback
    assert not [m for m in messages if m["msg_type"] == "stream"]  # nothing else said it


def _stop_the_model_wait(kernel, model, code: str) -> tuple[float, dict, list[dict]]:
    """Run ``code``, press stop once the slow model has the request."""
    model.arrived.clear()
    return _interrupt_when(*kernel, code, model.arrived.is_set)


def test_stop_on_a_cell_waiting_for_a_slow_model(kernel, model):
    km, kc = kernel
    took, reply, messages = _stop_the_model_wait(kernel, model, "%%agent chat -o res\nslow question")
    assert took < 1.0, took
    _one_line(reply, messages)
    assert _value(kc, "[chat.turns, 'res' in globals(), '_agent_result' in globals()]") == [0, False, False]
    # the same session answers the next cell, as if the stopped one never ran
    assert kc.execute_interactive("%%agent chat -o res\nquick question", timeout=30)["content"]["status"] == "ok"
    assert _value(kc, "[chat.turns, res.output, [m['role'] for m in chat.transcript]]") == [
        1, "answer to quick question", ["system", "user", "assistant"]]


def test_stop_on_a_sync_tool_that_holds_the_loop(kernel):
    km, kc = kernel
    for tool in ("nap", "spin"):  # a sleep (a blocking call) and a busy loop (Python code)
        code = (f"ran = []\nbot = bettong_nb.agent(provider=Scripted([[('{tool}', {{'seconds': 30}})], 'done']), "
                f"capabilities=tools, on_event=lambda e: type(e).__name__ == 'ToolCallStarted' and ran.append(1))\n")
        assert kc.execute_interactive(code, timeout=30)["content"]["status"] == "ok"
        started = time.monotonic()
        took, reply, messages = _interrupt_when(km, kc, "%%agent bot\ngo", lambda: time.monotonic() - started > 1.5)
        assert took < 1.5, (tool, took)
        _one_line(reply, messages)
        activity = [m["content"]["data"].get("text/plain", "") for m in messages
                    if m["msg_type"] == "update_display_data"]
        assert any(f"{tool}(seconds=30) → interrupted" in text for text in activity), activity
        # while it ran, a single sync tool showed as running with its clock (redrawn each second)
        drawn = [m["content"]["data"].get("text/html", "") for m in messages if m["msg_type"] == "update_display_data"]
        assert any(re.search(rf"{tool}\(seconds=30\)</code> →.*running.*bettong-elapsed[^>]*> · 1\.\d s<", html)
                   for html in drawn), (tool, drawn)


def test_stop_while_an_approval_prompt_waits(kernel):
    km, kc = kernel
    code = ("approvals._frontend = True  # pretend a browser is attached: the prompt waits for a click\n"
            "bot = bettong_nb.agent(provider=Scripted([[('nap', {'seconds': 1})], 'done']), capabilities=tools)")
    assert kc.execute_interactive(code, timeout=30)["content"]["status"] == "ok"
    msg_id = kc.execute("%%agent bot --approve\ngo")
    seen = []
    while not any(WIDGET in m["content"].get("data", {}) for m in seen):
        seen.append(kc.get_iopub_msg(timeout=30))
    started = time.monotonic()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id and time.monotonic() - started < 1.0
    messages = seen + _outputs(kc, msg_id)
    _one_line(reply["content"], [m for m in messages if m["parent_header"].get("msg_id") == msg_id])
    final = {}  # each display's last state: what the cell shows now
    for m in messages:
        if m["msg_type"] in ("display_data", "update_display_data"):
            final[m["content"]["transient"]["display_id"]] = m["content"]["data"]
    assert not [d for d in final.values() if WIDGET in d]  # the prompt is gone from the cell
    (activity,) = [d for d in final.values() if "bettong-live" in d.get("text/html", "")]
    assert activity["text/plain"] == "· nap(seconds=1) → interrupted"
    assert "· stopped by you</span>" in activity["text/html"] and "waiting for your decision" not in activity["text/html"]
    kc.execute_interactive("approvals._frontend = None", timeout=30)


def test_stop_on_a_blocking_run_and_on_a_batch(kernel, model):
    km, kc = kernel
    took, reply, messages = _stop_the_model_wait(kernel, model, "r = slow.run('slow, blocking')")
    assert took < 1.0, took
    _one_line(reply, messages)
    # a sync tool running Python code on the worker loop gets the cancellation inside it
    code = "busy = bettong_nb.agent(provider=Scripted([[('spin', {'seconds': 30})], 'done']), capabilities=tools)"
    assert kc.execute_interactive(code, timeout=30)["content"]["status"] == "ok"
    started = time.monotonic()
    took, reply, messages = _interrupt_when(km, kc, "r = busy.run('go')", lambda: time.monotonic() - started > 1.5)
    assert took < 1.5, took
    _one_line(reply, messages)
    assert kc.execute_interactive("r = slow.run('quick, blocking')", timeout=10)["content"]["status"] == "ok"

    code = "results = slow.map(['a', 'slow b', 'c', 'slow d'], concurrency=2)\nresults"
    took, reply, messages = _stop_the_model_wait(kernel, model, code)
    assert took < 1.0 and reply["status"] == "ok", (took, reply)
    shown = [m["content"]["data"] for m in messages if m["msg_type"] in ("display_data", "update_display_data",
                                                                        "execute_result")]
    progress = [d["text/plain"] for d in shown if "text/html" in d and "bettong-progress" in d["text/html"]]
    # while it ran, the bar's label told the time left
    labels = [m["content"]["data"].get("state", {}).get("value", "") for m in messages if m["msg_type"] == "comm_msg"]
    assert any(re.fullmatch(r"\d/4 · .* · [\d.]+ m?s · [\d.]+/s · about [\d.]+ m?s left", str(v)) for v in labels), labels
    # what ran, out of four: the line never says 4/4 when some were cancelled
    (line,) = progress
    ran = re.fullmatch(r"(\d)/4 · (\d) done · 0 failed · (\d) cancelled · (\d+) tokens · cost \$[\d.]+ · [\d.]+ m?s · "
                       r"[\d.]+/s", line)
    assert ran and ran[1] == ran[2] and int(ran[2]) + int(ran[3]) == 4 and int(ran[3]) >= 1, line
    assert shown[-1]["text/plain"].startswith(f"Batch of 4: {ran[2]} done · 0 failed · {ran[3]} cancelled · ")
    assert not [d for d in shown[-2:] if WIDGET in d]
    assert _value(kc, "[type(results).__name__, [r.output for r in results], [r.reason for r in results]]") == [
        "Batch", ["answer to a", None, "answer to c", None], [None, "cancelled", None, "cancelled"]]


def test_a_blocking_run_says_at_once_that_buttons_cannot_work(kernel):
    km, kc = kernel
    code = "\n".join([
        "ran = []",
        "def touch(path: str) -> str:",
        "    '''Touch a file.'''",
        "    ran.append(path)",
        "    return 'touched'",
        "caps = [{'id': 'fs', 'instructions': None, 'tools': [bettong_nb.tool(touch)]}]",
        "r = bettong_nb.agent(provider=Scripted([[('touch', {'path': 'c'}), ('touch', {'path': 'd'})], 'ok']),",
        "                     capabilities=caps, approve_fn=approvals.ask_with_buttons).run('go')",
    ])
    msg_id = kc.execute(code)
    assert kc.get_shell_msg(timeout=30)["content"]["status"] == "ok"
    notes = [m["content"]["data"]["text/plain"] for m in _outputs(kc, msg_id) if m["msg_type"] == "display_data"]
    assert notes == ["Approval buttons cannot work under a blocking agent.run() in a notebook (the cell holds the "
                     "kernel until it returns), so its tool calls are denied. Use a %%agent … --approve cell, "
                     "or await agent.arun(...)."]  # once, in the cell, though two calls were denied
    ran, reasons = _value(kc, "[ran, [c.reason for c in r.tool_calls]]")
    assert ran == [] and all(reason.startswith("no one approved it: the agent runs in a blocking call")
                             for reason in reasons)


def test_code_goes_to_one_new_cell_below_and_is_not_run(kernel):
    km, kc = kernel
    answer = "Try:\n```python\nMARK = 1\n```\nthen\n```\nMARK += 1\n```"
    code = f"bot = bettong_nb.agent(provider=Scripted([{answer!r}, {answer!r}]))"
    assert kc.execute_interactive(code, timeout=30)["content"]["status"] == "ok"
    for cell in ("%%agent bot -f code\nwrite it", "{}['cost']", "%agent fix bot"):
        msg_id = kc.execute(cell)
        reply = kc.get_shell_msg(timeout=30)["content"]
        _outputs(kc, msg_id)
        if cell.startswith("{}"):
            continue
        assert reply["status"] == "ok", reply
        assert reply["payload"] == [{"source": "set_next_input", "text": "MARK = 1\n\nMARK += 1", "replace": False}]
    assert _value(kc, "'MARK' in globals()") is False


def test_stop_on_a_cell_awaiting_a_run_or_a_batch(kernel, model):
    """``await agent.arun(...)`` (the README's way to approval buttons) and ``await agent.amap(...)``
    stop as a %%agent cell does: within a second, one line, the session usable."""
    km, kc = kernel
    assert kc.execute_interactive("talk = slow.session()", timeout=30)["content"]["status"] == "ok"
    for code in ("r = await slow.arun('slow, awaited')", "r = await talk.arun('slow, awaited')"):
        took, reply, messages = _stop_the_model_wait(kernel, model, code)
        assert took < 1.0, (code, took)
        _one_line(reply, messages)
    assert kc.execute_interactive("r = await talk.arun('quick, awaited')", timeout=10)["content"]["status"] == "ok"
    assert _value(kc, "[talk.turns, r.output]") == [1, "answer to quick, awaited"]  # the stopped turn left no trace

    code = "b = await slow.amap(['a', 'slow b'], concurrency=1)\nb"
    took, reply, messages = _stop_the_model_wait(kernel, model, code)
    assert took < 1.0 and reply["status"] == "ok", (took, reply)
    assert not [m for m in messages if m["msg_type"] in ("error", "stream")]
    shown = [m["content"]["data"]["text/plain"] for m in messages if m["msg_type"] == "execute_result"]
    assert shown and shown[0].startswith("Batch of 2: 1 done · 0 failed · 1 cancelled"), shown
    assert _value(kc, "[type(b).__name__, [r.reason for r in b]]") == ["Batch", [None, "cancelled"]]
