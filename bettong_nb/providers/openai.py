"""OpenAI-compatible chat completions: DeepSeek, OpenAI, llama.cpp, vLLM and friends.

    provider = OpenAIProvider(base_url="http://127.0.0.1:8000/v1", api_key="sk-...")
    response = await provider.complete(Request(messages=[{"role": "user", "content": "hi"}]))

``base_url`` is the API root as the server documents it (``/v1`` included where it has one);
requests go to ``base_url + "/chat/completions"``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Mapping

from .. import events
from ..usage import Usage, from_openai
from ..http import Transport
from ..json_body import Encoded, Reuse, array, body as json_body, encode
from ..options import Options
from ..provider import ProviderError, Request, Response, decode_arguments

__all__ = ["OpenAIProvider", "Service", "encode_request", "decode_response", "DEEPSEEK", "OPENAI"]

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                 "length": "max_tokens", "content_filter": "refusal"}


def _arguments_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value if value is not None else {}, ensure_ascii=False)


def _tools(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "function": t} for t in tools]


def _encode_message(message: Mapping[str, Any]) -> list[dict]:
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if role == "assistant":
        wire: dict[str, Any] = {"role": "assistant",
                                "content": "".join(b["text"] for b in content if b["type"] == "text")}
        thinking = "".join(b.get("text", "") for b in content if b["type"] == "thinking")
        if thinking:
            wire["reasoning_content"] = thinking
        calls = [{"id": b["id"], "type": "function",
                  "function": {"name": b["name"], "arguments": _arguments_text(b.get("input"))}}
                 for b in content if b["type"] == "tool_use"]
        if calls:
            wire["tool_calls"] = calls
        return [wire]
    # A user turn: tool results become "tool" messages, any text follows as one user message.
    out = [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]}
           for b in content if b["type"] == "tool_result"]
    texts = [b["text"] for b in content if b["type"] == "text"]
    if texts:
        out.append({"role": role, "content": "\n".join(texts)})
    return out


def encode_request(request: Request, *, default_model: str | None, stream: bool = False,
                   reuse: Reuse | None = None) -> dict:
    """The request body. With ``reuse`` (the provider's, see :mod:`bettong_nb.json_body`) its
    messages and tools are JSON already, reused from the previous request where unchanged."""
    system = ({"role": "system", "content": "\n\n".join(b.text for b in request.system)},) if request.system else ()
    if reuse is None:
        messages: Any = [*system, *(w for m in request.messages for w in _encode_message(m))]
    else:
        messages = array([*map(encode, system),
                          reuse.joined(request.messages, lambda m: ", ".join(map(encode, _encode_message(m))))])
    body: dict[str, Any] = {"model": request.model or default_model, "messages": messages}
    if request.tools:
        body["tools"] = _tools(request.tools) if reuse is None else reuse.json(
            request.tools, lambda: Encoded(encode(_tools(request.tools))))
        choice = request.tool_choice or "auto"
        body["tool_choice"] = (choice if choice in ("auto", "none", "required")
                               else {"type": "function", "function": {"name": choice}})
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.format is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "answer", "schema": request.format}}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _response(message: Mapping[str, Any], finish: str | None, model: str | None, usage: Usage) -> Response:
    content: list[dict] = []
    if message.get("reasoning_content"):
        content.append({"type": "thinking", "text": message["reasoning_content"]})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id") or f"call_{len(content)}",
                        "name": fn.get("name", ""), "input": decode_arguments(fn.get("arguments"))})
    stop = "tool_use" if message.get("tool_calls") else _STOP_REASONS.get(finish or "stop", finish or "end_turn")
    return Response(content=content, stop_reason=stop, model=model, usage=usage)


def decode_response(body: Any, provider: str = "openai") -> Response:
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError(f"No message in {provider} API response", provider=provider) from None
    return _response(message, choice.get("finish_reason"), body.get("model"), from_openai(body.get("usage")))


class _StreamFold:
    """Folds chat.completion.chunk events into one message, emitting deltas on the way."""

    def __init__(self, provider: str):
        self.provider = provider
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, dict] = {}
        self.finish: str | None = None
        self.model: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.finished = False

    def feed(self, chunk: Mapping[str, Any], emit: Callable[[Any], Any]) -> None:
        if chunk.get("error"):
            err = chunk["error"]
            raise ProviderError(f"{self.provider} stream error: {err.get('message', err) if isinstance(err, dict) else err}",
                                provider=self.provider)
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                self.thinking.append(delta["reasoning_content"])
                emit(events.ThinkingDelta(delta["reasoning_content"]))
            if delta.get("content"):
                self.text.append(delta["content"])
                emit(events.TextDelta(delta["content"]))
            for part in delta.get("tool_calls") or []:
                index = part.get("index", len(self.calls))
                call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
                fn = part.get("function") or {}
                call["id"] = part.get("id") or call["id"]
                call["name"] = call["name"] or fn.get("name") or ""  # whole; llama-cpp-python repeats it per chunk
                if fn.get("arguments"):
                    call["arguments"].append(fn["arguments"])
                emit(events.ToolUseDelta(index, call["name"] or None, fn.get("arguments") or ""))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def response(self) -> Response:
        message: dict[str, Any] = {"content": "".join(self.text), "reasoning_content": "".join(self.thinking)}
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"] or f"call_{i}", "function": {"name": c["name"], "arguments": "".join(c["arguments"])}}
                for i, c in sorted(self.calls.items())]
        return _response(message, self.finish, self.model, from_openai(self.usage))


class OpenAIProvider:
    """A provider speaking the OpenAI chat-completions wire format.

    The key is read when the first request is made (``api_key``, else the environment
    variable ``key_env``) and never appears in repr, errors or logs.
    """

    def __init__(self, *, base_url: str, api_key: str | None = None, key_env: str | None = "OPENAI_API_KEY",
                 model: str | None = None, name: str = "openai", timeout: Any = None, max_retries: int = 2,
                 label: str = "OpenAI"):
        self.name = name
        self.label = label
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self._key_env = key_env
        self.transport = Transport(name, base_url, headers=self._headers, timeout=timeout,
                                   max_retries=max_retries, secret=self._known_key, error=ProviderError)
        self._reuse = Reuse()  # the JSON of the previous request's messages and tools

    def _known_key(self) -> str | None:
        if self._api_key is not None:
            return self._api_key
        return os.environ.get(self._key_env) if self._key_env else None

    def secret_values(self) -> list[str]:
        key = self._known_key()
        return [key] if key else []

    def _headers(self) -> dict[str, str]:
        key = self._known_key()
        if key is None:
            if self._key_env is None:
                return {}
            raise ProviderError(f"No {self.label} API key: pass api_key= or set {self._key_env}",
                                provider=self.name)
        return {"authorization": f"Bearer {key}"} if key else {}

    def _payload(self, request: Request, stream: bool) -> bytes:
        self._reuse.next_request()
        return json_body(encode_request(request, default_model=self.model, stream=stream, reuse=self._reuse))

    async def complete(self, request: Request) -> Response:
        body = await self.transport.post_json("/chat/completions", self._payload(request, False))
        return decode_response(body, self.name)

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        payload = self._payload(request, True)

        async def fold(lines: AsyncIterator[str], emit: Callable[[Any], Any]) -> Response:
            state = _StreamFold(self.name)
            async for line in lines:
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    state.finished = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise ProviderError(f"{self.name} sent a stream event that is not JSON: {data[:200]}",
                                        provider=self.name) from None
                state.feed(chunk, emit)
            if not (state.finished or state.finish):
                raise ProviderError(f"{self.name} stream ended before the answer was complete",
                                    provider=self.name, retryable=True)
            return state.response()

        return await self.transport.stream("/chat/completions", payload, fold, on_event)

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"


@dataclass(frozen=True)
class Service:
    """An OpenAI-compatible service: how it is named, where its key and API live, its model."""

    name: str
    label: str
    key_env: str
    base_url: str
    model: str

    def provider(self, options: Options) -> OpenAIProvider:
        return OpenAIProvider(name=self.name, label=self.label, key_env=self.key_env, api_key=options.api_key,
                              base_url=options.base_url or self.base_url, model=self.model,
                              timeout=options.timeout, max_retries=options.max_retries)


DEEPSEEK = Service("deepseek", "DeepSeek", "DEEPSEEK_API_KEY", "https://api.deepseek.com", "deepseek-v4-flash")
OPENAI = Service("openai", "OpenAI", "OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-4.1-mini")
