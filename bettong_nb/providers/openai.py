"""OpenAI-compatible chat completions: DeepSeek, OpenAI, llama.cpp, vLLM and friends.

    provider = OpenAIProvider(base_url="http://127.0.0.1:8000/v1", api_key="sk-...")
    response = await provider.complete(Request(messages=[{"role": "user", "content": "hi"}]))

``base_url`` is the API root as the server documents it (``/v1`` included where it has one);
requests go to ``base_url + "/chat/completions"``.

Images go as ``{"type": "image_url", "image_url": {"url": "data:<type>;base64,..."}}`` content
parts. Tool messages on this wire are text only, so a tool result's images follow the turn's
tool messages in one user message, each group introduced by the id of its call.

A request's ``format`` (a JSON schema) goes as ``response_format`` ``json_schema``; a service that
only has JSON mode (DeepSeek: ``structured_output="json_object"``) gets ``json_object`` and the
schema at the end of the system text, which JSON mode also wants to mention JSON. ``strict`` is
not sent: it narrows the schema language and not every compatible server knows it; the loop
validates every answer anyway.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Any, AsyncIterator, Callable, Mapping

from ..core import events
from ..http.client import Transport
from ..http.json_body import Encoded, Reuse, array, encode, loads
from ..http.json_body import body as json_body
from ..core.options import Options
from ..core.portable import rebuild, withheld
from ..core.provider import ProviderError, Request, Response, decode_arguments, malformed, reading
from ..safety.secrets import url_without_credentials
from ..core.usage import Usage, from_openai

__all__ = ["OpenAIProvider", "Service", "encode_request", "decode_response", "DEEPSEEK", "OPENAI",
           "STRUCTURED_OUTPUTS", "SCHEMA_INSTRUCTIONS", "COST_HEADER", "reported_cost"]

STRUCTURED_OUTPUTS = ("json_schema", "json_object")
SCHEMA_INSTRUCTIONS = "Answer with JSON only: one JSON value that follows this JSON Schema.\n"
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
    # A user turn: tool results become "tool" messages (text only on this wire); the images of
    # results, then the turn's own text and images, follow as one user message.
    results = [b for b in content if b["type"] == "tool_result"]
    out = [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]} for b in results]
    parts = []
    for result in results:
        if result.get("images"):
            parts.append({"type": "text", "text": f"The images tool call {result['tool_use_id']} returned:"})
            parts.extend(_image_part(image) for image in result["images"])
    parts.extend({"type": "text", "text": b["text"]} if b["type"] == "text" else _image_part(b)
                 for b in content if b["type"] in ("text", "image"))
    if any(part["type"] == "image_url" for part in parts):
        out.append({"role": role, "content": parts})
    elif parts:
        out.append({"role": role, "content": "\n".join(part["text"] for part in parts)})
    return out


def _image_part(block: Mapping[str, Any]) -> dict:
    return {"type": "image_url", "image_url": {"url": f"data:{block['media_type']};base64,{block['data']}"}}


def encode_request(request: Request, *, default_model: str | None, stream: bool = False,
                   structured_output: str = "json_schema", reuse: Reuse | None = None) -> dict:
    """The request body. With ``reuse`` (the provider's, see :mod:`bettong_nb.json_body`) its
    messages and tools are JSON already, reused from the previous request where unchanged."""
    system_text = [b.text for b in request.system]
    if request.format is not None and structured_output == "json_object":
        system_text.append(SCHEMA_INSTRUCTIONS + json.dumps(request.format, ensure_ascii=False))
    system = ({"role": "system", "content": "\n\n".join(system_text)},) if system_text else ()
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
        body["response_format"] = ({"type": "json_object"} if structured_output == "json_object" else
                                   {"type": "json_schema", "json_schema": {"name": "answer", "schema": request.format}})
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _readable(message: Any, provider: str) -> dict:
    """A message or stream delta in the shape the decoder reads. What servers vary in is read:
    content as a list of parts, arguments as an object, missing ids; anything else that is not
    the chat-completions shape is a clear error."""
    if not isinstance(message, Mapping):
        raise malformed(provider, "a message that is not an object", message)
    out = dict(message)
    for field in ("content", "reasoning_content"):
        value = out.get(field)
        if isinstance(value, list):  # content parts: the text ones, in order
            out[field] = "".join(part.get("text") or "" for part in value
                                 if isinstance(part, Mapping) and part.get("type") in ("text", "output_text"))
        elif value is not None and not isinstance(value, str):
            raise malformed(provider, f"a message whose {field} is neither text nor parts", value)
    calls = out.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not all(
            isinstance(call, Mapping) and isinstance(call.get("function") or {}, Mapping) for call in calls)):
        raise malformed(provider, "tool calls that are not a list of objects with a function object", calls)
    return out


# A gateway that bills each request says what it cost: LiteLLM's proxy in this header, others
# (OpenRouter, LiteLLM too) as a number `cost` in the answer's `usage`.
COST_HEADER = "x-litellm-response-cost"


def reported_cost(value: Any) -> float | None:
    """A cost a server reported (a header's text or a number), when it is a finite amount >= 0."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        cost = float(value)
    except (TypeError, ValueError):
        return None
    return cost if math.isfinite(cost) and cost >= 0 else None


def _response(message: Mapping[str, Any], finish: str | None, model: str | None, usage: Usage,
              cost: float | None = None) -> Response:
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
    return Response(content=content, stop_reason=stop, model=model, usage=usage, cost=cost)


def decode_response(body: Any, provider: str = "openai") -> Response:
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], Mapping) \
            or choices[0].get("message") is None:
        raise ProviderError(f"No message in {provider} API response", provider=provider)
    choice = choices[0]
    with reading(provider):
        used = body.get("usage")
        return _response(_readable(choice["message"], provider), choice.get("finish_reason"), body.get("model"),
                         from_openai(used), reported_cost(used.get("cost") if isinstance(used, Mapping) else None))


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

    def feed(self, chunk: Any, emit: Callable[[Any], Any]) -> None:
        if not isinstance(chunk, Mapping):
            raise malformed(self.provider, "a stream event that is not an object", chunk)
        if chunk.get("error"):
            err = chunk["error"]
            raise ProviderError(f"{self.provider} stream error: {err.get('message', err) if isinstance(err, dict) else err}",
                                provider=self.provider)
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping):
                raise malformed(self.provider, "a stream choice that is not an object", choice)
            delta = _readable(choice.get("delta") or {}, self.provider)
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
                piece = fn.get("arguments") or ""
                piece = piece if isinstance(piece, str) else json.dumps(piece, ensure_ascii=False)  # already an object
                call["arguments"].append(piece)
                emit(events.ToolUseDelta(index, call["name"] or None, piece))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def response(self) -> Response:
        message: dict[str, Any] = {"content": "".join(self.text), "reasoning_content": "".join(self.thinking)}
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"] or f"call_{i}", "function": {"name": c["name"], "arguments": "".join(c["arguments"])}}
                for i, c in sorted(self.calls.items())]
        cost = reported_cost(self.usage.get("cost")) if isinstance(self.usage, Mapping) else None
        return _response(message, self.finish, self.model, from_openai(self.usage), cost)


class OpenAIProvider:
    """A provider speaking the OpenAI chat-completions wire format.

    The key is read when the first request is made (``api_key``, else the environment
    variable ``key_env``) and never appears in repr, errors, logs or a pickle (a pickled provider
    reads ``key_env`` where it is unpickled, see :mod:`bettong_nb.portable`).
    """

    def __init__(self, *, base_url: str, api_key: str | None = None, key_env: str | None = "OPENAI_API_KEY",
                 model: str | None = None, name: str = "openai", timeout: Any = None, max_retries: int = 2,
                 label: str = "OpenAI", structured_output: str = "json_schema"):
        if structured_output not in STRUCTURED_OUTPUTS:
            raise ValueError(f"structured_output is one of {', '.join(STRUCTURED_OUTPUTS)}, not {structured_output!r}")
        self._settings = {"base_url": base_url, "key_env": key_env, "model": model, "name": name,
                          "timeout": timeout, "max_retries": max_retries, "label": label,
                          "structured_output": structured_output}
        self.name = name
        self.structured_output = structured_output
        self.label = label
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self._key_env = key_env
        self.transport = Transport(name, base_url, headers=self._headers, timeout=timeout,
                                   max_retries=max_retries, secret=self._known_key, error=ProviderError,
                                   on_retry=events.report_retry)
        self._reuse = Reuse()  # the JSON of the previous request's messages and tools

    def __reduce__(self) -> tuple:
        return rebuild, (type(self), withheld(self._settings))

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
        return json_body(encode_request(request, default_model=self.model, stream=stream,
                                        structured_output=self.structured_output, reuse=self._reuse))

    async def complete(self, request: Request) -> Response:
        reply = await self.transport.request("POST", "/chat/completions", payload=self._payload(request, False))
        body = self.transport.parsed(reply)
        with self.transport.redacting():
            answer = decode_response(body, self.name)
        header = reported_cost(reply.headers.get(COST_HEADER))
        answer.cost = header if header is not None else answer.cost
        return answer

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
                    chunk = loads(data)
                except ValueError:
                    raise ProviderError(f"{self.name} sent a stream event that is not JSON: {data}",
                                        provider=self.name) from None
                state.feed(chunk, emit)
            if not (state.finished or state.finish):
                raise ProviderError(f"{self.name} stream ended before the answer was complete",
                                    provider=self.name, retryable=True)
            with reading(self.name):
                return state.response()

        return await self.transport.stream("/chat/completions", payload, fold, on_event)

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={url_without_credentials(self.base_url)!r}, model={self.model!r})"


@dataclass(frozen=True)
class Service:
    """An OpenAI-compatible service: how it is named, where its key and API live, its model, and
    how it takes a JSON schema for the answer (``json_schema``, or ``json_object``: JSON mode only)."""

    name: str
    label: str
    key_env: str
    base_url: str
    model: str
    structured_output: str = "json_schema"

    def __reduce__(self) -> tuple:
        return rebuild, (type(self), withheld(asdict(self)))  # its base_url may hold credentials

    def provider(self, options: Options) -> OpenAIProvider:
        return OpenAIProvider(name=self.name, label=self.label, key_env=self.key_env, api_key=options.api_key,
                              base_url=options.base_url or self.base_url, model=self.model,
                              timeout=options.timeout, max_retries=options.max_retries,
                              structured_output=self.structured_output)


DEEPSEEK = Service("deepseek", "DeepSeek", "DEEPSEEK_API_KEY", "https://api.deepseek.com", "deepseek-v4-flash",
                   structured_output="json_object")
OPENAI = Service("openai", "OpenAI", "OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-4.1-mini")
