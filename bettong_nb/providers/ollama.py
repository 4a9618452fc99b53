"""A local Ollama server through its native ``POST /api/chat``, over the shared transport.

    provider = OllamaProvider(model="qwen3:8b", num_ctx=16384)
    agent = bettong_nb.ollama(model="qwen3:8b", capabilities=[...])

What goes on the wire, and the choices made:

* The host is ``base_url``, else ``OLLAMA_HOST`` read the way Ollama reads it (``host``,
  ``host:port`` or a URL; no scheme means http and port 11434), else
  ``http://localhost:11434``. A bind wildcard (``0.0.0.0``, ``::``, ``*``) names where a
  server listens, not where to connect, so it becomes 127.0.0.1 (the port is kept).
* The system blocks become one leading ``system`` message (no cache breakpoints locally).
* Images go as base64 in the ``images`` list of their message: a prompt's on the user
  message (after its text), a tool result's on its tool message.
* Tools go in the OpenAI function shape. A tool call has no id on the wire, so one is made
  up as ``ollama_tool_<i>``, ``i`` counting on from the calls already in the conversation so
  ids stay unique across turns (a server that does send ids has them used). Results go
  back as ``{"role": "tool", "tool_name": ..., "content": ...}`` messages, the form current
  Ollama documents; the assistant's calls are echoed as ``tool_calls`` with object
  arguments, and its reasoning as ``thinking``.
* ``options``: ``num_ctx`` (a request's, else the provider's), ``num_predict`` from
  ``max_tokens`` and ``temperature`` when set; nothing else, so the server's and model's
  defaults apply. Ollama silently drops the start of a prompt longer than its context, so
  set ``num_ctx`` for long sessions. ``keep_alive`` defaults to ``"30m"``: loading the model
  is most of a local turn, and notebook users pause between cells. ``format`` (a JSON
  schema) is passed as is. ``tool_choice="none"`` sends no tools (Ollama has no switch).
  ``think`` (True/False, or "low"/"medium"/"high" where the model has levels) is sent only
  when the provider is given one, so each model thinks as it does by default.
* Streaming reads NDJSON lines; whitespace-only deltas are kept (dropping them glues
  words). Usage is ``prompt_eval_count`` in and ``eval_count`` out.
"""

from __future__ import annotations

import json
import os
from typing import Any, AsyncIterator, Callable, Mapping

from ..core import events
from ..http.client import Transport
from ..http.json_body import Encoded, Reuse, array, encode, loads
from ..http.json_body import body as json_body
from ..core.portable import rebuild, withheld
from ..core.provider import ProviderError, Request, Response, decode_arguments, malformed, reading
from ..safety.secrets import url_without_credentials
from ..core.usage import Usage

__all__ = ["OllamaProvider", "DEFAULT_HOST", "host_url", "encode_request", "decode_response"]

DEFAULT_HOST = "http://localhost:11434"
_WILDCARDS = {"0.0.0.0", "::", "*", ""}


def host_url(value: str | None) -> str:
    """A base URL from an Ollama host spec: ``host``, ``host:port``, ``[v6]:port`` or a URL."""
    text = (value or "").strip().rstrip("/")
    if not text:
        return DEFAULT_HOST
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "http", text
    default_port = {"http": "80", "https": "443"}.get(scheme, "11434") if sep else "11434"
    hostport, _, path = rest.partition("/")
    userinfo, at, hostport = hostport.rpartition("@")  # user:password@ stays as given
    if hostport.startswith("["):
        host, _, port = hostport[1:].partition("]")
        port = port.lstrip(":")
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    else:
        host, port = hostport, ""  # a name, or a bare IPv6 address
    host = "127.0.0.1" if host in _WILDCARDS else host
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{userinfo}{at}{host}:{port or default_port}" + (f"/{path}" if path else "")


def _with_images(message: dict, images: list[dict] | None) -> dict:
    return {**message, "images": [image["data"] for image in images]} if images else message


def _tools(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "function": t} for t in tools]


def _note_calls(message: Mapping[str, Any], names: dict[str, str]) -> None:
    """Remember the tool names of an assistant message's calls, for the tool_name of their results."""
    if message["role"] == "assistant" and not isinstance(message["content"], str):
        names.update((b["id"], b["name"]) for b in message["content"] if b["type"] == "tool_use")


def _encode_message(message: Mapping[str, Any], names: dict[str, str]) -> list[dict]:
    """One message as wire messages; ``names`` (tool_use id -> tool name) holds the calls so far."""
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if role == "assistant":
        wire: dict[str, Any] = {"role": "assistant",
                                "content": "".join(b.get("text", "") for b in content if b["type"] == "text")}
        thinking = "".join(b.get("text", "") for b in content if b["type"] == "thinking")
        if thinking:
            wire["thinking"] = thinking
        calls = [b for b in content if b["type"] == "tool_use"]
        if calls:
            _note_calls(message, names)
            # Arguments that were not a JSON object (the model was told) cannot go back as one.
            wire["tool_calls"] = [{"function": {"name": b["name"], "arguments": b["input"]
                                                if isinstance(b.get("input"), dict) else {}}} for b in calls]
        return [wire]
    out = [_with_images({"role": "tool", "tool_name": names.get(b["tool_use_id"], ""), "content": b["content"]},
                        b.get("images")) for b in content if b["type"] == "tool_result"]
    texts = [b["text"] for b in content if b["type"] == "text"]
    pictures = [b for b in content if b["type"] == "image"]
    if texts or pictures:
        out.append(_with_images({"role": role, "content": "\n".join(texts)}, pictures))
    return out


def encode_request(request: Request, *, model: str, stream: bool, num_ctx: int | None = None,
                   keep_alive: str | int | None = None, think: bool | str | None = None,
                   reuse: Reuse | None = None) -> dict:
    """The request body. With ``reuse`` (the provider's, see :mod:`bettong_nb.json_body`) its
    messages and tools are JSON already, reused from the previous request where unchanged."""
    system = ({"role": "system", "content": "\n\n".join(b.text for b in request.system)},) if request.system else ()
    names: dict[str, str] = {}  # tool_use id -> tool name, for the tool_name of its result
    if reuse is None:
        messages: Any = [*system, *(w for m in request.messages for w in _encode_message(m, names))]
    else:
        messages = array([*map(encode, system), reuse.joined(
            request.messages, lambda m: ", ".join(map(encode, _encode_message(m, names))),
            reused=lambda m: _note_calls(m, names))])
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    if request.tools and request.tool_choice != "none":
        body["tools"] = _tools(request.tools) if reuse is None else reuse.json(
            request.tools, lambda: Encoded(encode(_tools(request.tools))))
    options: dict[str, Any] = {}
    if request.num_ctx or num_ctx:
        options["num_ctx"] = request.num_ctx or num_ctx
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if options:
        body["options"] = options
    if request.format is not None:
        body["format"] = request.format
    if request.keep_alive is not None or keep_alive is not None:
        body["keep_alive"] = request.keep_alive if request.keep_alive is not None else keep_alive
    if think is not None:
        body["think"] = think
    return body


def _usage(final: Mapping[str, Any]) -> Usage:
    prompt, output = int(final.get("prompt_eval_count") or 0), int(final.get("eval_count") or 0)
    return Usage(requests=1, prompt_tokens=prompt, completion_tokens=output, total_tokens=prompt + output,
                 cache_miss_tokens=prompt)


def _readable(message: Any, provider: str) -> Mapping[str, Any]:
    """A message (whole or a stream chunk's) in the shape the decoder reads, else a clear error."""
    if not isinstance(message, Mapping):
        raise malformed(provider, "a message that is not an object", message)
    for field in ("content", "thinking"):
        if message.get(field) is not None and not isinstance(message[field], str):
            raise malformed(provider, f"a message whose {field} is not text", message[field])
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) and isinstance(c.get("function") or {}, Mapping)
                                              for c in calls):
        raise malformed(provider, "tool calls that are not a list of objects with a function object", calls)
    return message


def _response(message: Mapping[str, Any], final: Mapping[str, Any], first_id: int) -> Response:
    calls = message.get("tool_calls") or []
    content: list[dict] = []
    if (message.get("thinking") or "").strip():
        content.append({"type": "thinking", "text": message["thinking"]})
    if (message.get("content") or "").strip():
        content.append({"type": "text", "text": message["content"]})
    for n, call in enumerate(calls):
        fn = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id") or f"ollama_tool_{first_id + n}",
                        "name": fn.get("name") or "", "input": decode_arguments(fn.get("arguments"))})
    stop = "tool_use" if calls else ("max_tokens" if final.get("done_reason") == "length" else "end_turn")
    return Response(content=content, stop_reason=stop, model=final.get("model"), usage=_usage(final))


def _check(body: Any, provider: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ProviderError(f"{provider} answered with JSON that is not an object", provider=provider)
    if body.get("error"):  # Ollama reports some failures inside a 200
        raise ProviderError(f"{provider} error: {body['error']}", provider=provider)
    return body


def decode_response(body: Any, provider: str = "ollama", first_id: int = 0) -> Response:
    body = _check(body, provider)
    if body.get("message") is None:
        raise ProviderError(f"No message in {provider} API response", provider=provider)
    message = _readable(body["message"], provider)
    with reading(provider):
        return _response(message, body, first_id)


def _calls_so_far(request: Request) -> int:
    return sum(1 for m in request.messages if not isinstance(m["content"], str)
               for b in m["content"] if b.get("type") == "tool_use")


class OllamaProvider:
    """A provider speaking Ollama's native chat API. No key: Ollama runs locally."""

    free = True  # a local server: no request has a price

    def __init__(self, *, base_url: str | None = None, timeout: Any = None, max_retries: int = 2,
                 model: str | None = None, num_ctx: int | None = None, keep_alive: str | int | None = "30m",
                 think: bool | str | None = None, name: str = "ollama"):
        self.name = name
        self.model = model
        self.num_ctx = num_ctx
        self.keep_alive = keep_alive
        self.think = think
        self.base_url = host_url(base_url or os.environ.get("OLLAMA_HOST"))
        self.transport = Transport(name, self.base_url, timeout=timeout, max_retries=max_retries, error=ProviderError,
                                   on_retry=events.report_retry)
        self._reuse = Reuse()  # the JSON of the previous request's messages and tools
        self._settings = {"base_url": self.base_url, "timeout": timeout, "max_retries": max_retries, "model": model,
                          "num_ctx": num_ctx, "keep_alive": keep_alive, "think": think, "name": name}

    @classmethod
    def from_options(cls, options: Any) -> "OllamaProvider":
        """The provider an agent's options describe (``bettong_nb.ollama()``'s factory)."""
        return cls(base_url=options.base_url, timeout=options.timeout, max_retries=options.max_retries)

    def __reduce__(self) -> tuple:
        return rebuild, (type(self), withheld(self._settings))

    def secret_values(self) -> list[str]:
        return []

    def _payload(self, request: Request, stream: bool) -> bytes:
        model = request.model or self.model
        if not model:
            raise ProviderError("Ollama needs a model name: bettong_nb.ollama(model='qwen3:8b') "
                                "(`ollama list` shows the ones you have)", provider=self.name)
        self._reuse.next_request()
        return json_body(encode_request(request, model=model, stream=stream, num_ctx=self.num_ctx,
                                        keep_alive=self.keep_alive, think=self.think, reuse=self._reuse))

    async def complete(self, request: Request) -> Response:
        body = await self.transport.post_json("/api/chat", self._payload(request, False))
        with self.transport.redacting():
            return decode_response(body, self.name, _calls_so_far(request))

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        payload = self._payload(request, True)

        async def fold(lines: AsyncIterator[str], emit: Callable[[Any], Any]) -> Response:
            text: list[str] = []
            thinking: list[str] = []
            calls: list[dict] = []
            final: Mapping[str, Any] | None = None
            async for line in lines:
                if not line.strip():
                    continue
                try:
                    chunk = _check(loads(line), self.name)
                except ValueError:
                    raise ProviderError(f"{self.name} sent a stream line that is not JSON: {line}",
                                        provider=self.name) from None
                message = _readable(chunk.get("message") or {}, self.name)
                if message.get("thinking"):
                    thinking.append(message["thinking"])
                    emit(events.ThinkingDelta(message["thinking"]))
                if message.get("content"):
                    text.append(message["content"])
                    emit(events.TextDelta(message["content"]))
                for call in message.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    emit(events.ToolUseDelta(len(calls), fn.get("name"),
                                             json.dumps(decode_arguments(fn.get("arguments")), ensure_ascii=False)))
                    calls.append(call)
                if chunk.get("done"):
                    final = chunk
                    break
            if final is None:
                raise ProviderError(f"{self.name} stream ended before the answer was complete",
                                    provider=self.name, retryable=True)
            message = {"content": "".join(text), "thinking": "".join(thinking), "tool_calls": calls}
            with reading(self.name):
                return _response(message, final, _calls_so_far(request))

        return await self.transport.stream("/api/chat", payload, fold, on_event)

    def __repr__(self) -> str:
        return f"OllamaProvider(base_url={url_without_credentials(self.base_url)!r}, model={self.model!r})"
