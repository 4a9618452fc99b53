"""Anthropic's Messages API (``POST /v1/messages``), over the shared transport.

    provider = AnthropicProvider(model="claude-opus-5")     # key from ANTHROPIC_API_KEY
    agent = bettong_nb.anthropic(capabilities=[...])        # the same, through the agent

What goes on the wire, and the choices made:

* The system prompt is a list of text blocks; a block marked ``cache=True`` gets
  ``cache_control: {"type": "ephemeral"}``, the prompt-cache breakpoint (the loop marks its
  stable system prompt; tools come before the system in Anthropic's cache order, so they
  are cached with it).
* Every block parsed from a response keeps the vendor JSON as ``raw`` and is sent back
  byte-for-byte: the API rejects an edited thinking block (its signature covers it), and
  block types this module does not model survive the round trip as ``{"type": "other"}``.
* A thinking block without ``raw`` came from another provider (DeepSeek's
  ``reasoning_content``): it carries no signature, so it is dropped, never an error — a
  session can switch provider between turns. Likewise an assistant ``tool_use`` with no
  ``tool_result`` in the next message (a run stopped before running it) and a result whose
  call is gone are dropped, an assistant turn left empty is skipped, and neighbouring turns
  of one role are merged: the API wants alternating roles and paired tool blocks.
* Images go as ``{"type": "image", "source": {"type": "base64", ...}}`` blocks where the
  prompt put them; a tool result with images has a content list, its text then its images.
* ``temperature`` (and top_p/top_k) are never sent: the current model family rejects them,
  and a session that switches here from a provider where ``temperature`` was set must keep
  working. Depth is ``effort`` (``output_config.effort``).
* A JSON schema for the answer (``format``) goes as the native ``output_config.format``
  rather than a forced tool: a forced tool_choice cannot be combined with thinking, would stop
  the model from calling the run's real tools first, and would move the answer out of the text
  where every other provider puts it. The API wants ``additionalProperties: false`` on every
  object and has no numeric, length or size bounds: objects are closed, and the bounds move into
  the field's description (the loop still checks them, and asks again when one is broken).
* ``max_tokens`` defaults to 16000, 64000 when streaming (a long answer needs a stream).
* A refusal is an ordinary answer whose ``stop_reason`` is ``"refusal"`` (``refused()``
  is true); whatever partial text came stays as it came, nothing is made up.
* Usage: ``prompt_tokens`` counts the whole prompt, input + cache read + cache write, so
  ``usage.summary`` and ``cost`` stay truthful; cache reads are ``cache_hit_tokens`` and cache
  writes ``cache_write_tokens``.
* HTTP 529 (overloaded) is retried like a 503.
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

from ..core import events
from ..http.client import RETRY_STATUSES, Transport
from ..http.json_body import Encoded, Reuse, array, encode, loads
from ..http.json_body import body as json_body
from ..core.portable import rebuild, withheld
from ..core.provider import ProviderError, Request, Response, decode_arguments, malformed, reading
from ..safety.secrets import url_without_credentials
from ..core.usage import Usage

__all__ = ["AnthropicProvider", "DEFAULT_MODEL", "API_VERSION", "encode_request", "decode_response", "usage_from",
           "output_schema"]

DEFAULT_MODEL = "claude-opus-5"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_RETRY_STATUSES = RETRY_STATUSES | {529}
# Stream error types that mean "the server was busy or broke", worth a retry while nothing was shown.
_TRANSIENT_STREAM_ERRORS = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429}
_CHOICES = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}


def usage_from(block: Mapping[str, Any] | None) -> Usage:
    """Usage of one request from Anthropic's ``usage`` object (cache reads/writes counted in);
    anything but an object counts nothing rather than failing the answer."""
    block = block if isinstance(block, Mapping) else {}

    def count(name: str) -> int:
        return int(block.get(name) or 0)

    fresh, read, write = count("input_tokens"), count("cache_read_input_tokens"), count("cache_creation_input_tokens")
    prompt, output = fresh + read + write, count("output_tokens")
    return Usage(requests=1, prompt_tokens=prompt, completion_tokens=output, total_tokens=prompt + output,
                 cache_hit_tokens=read, cache_miss_tokens=fresh + write, cache_write_tokens=write)


# --- encoding ---------------------------------------------------------------------------------

def _image(block: Mapping[str, Any]) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": block["media_type"], "data": block["data"]}}


def _encode_block(block: Mapping[str, Any], provider: str) -> dict | None:
    raw = block.get("raw")
    if isinstance(raw, Mapping) and raw.get("type"):
        return dict(raw)
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]} if block.get("text") else None  # the API rejects ""
    if kind == "tool_use":
        # Arguments that were not a JSON object (the loop told the model so) cannot go as input.
        value = block.get("input")
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": value if isinstance(value, Mapping) else {}}
    if kind == "image":
        return _image(block)
    if kind == "tool_result":
        content: Any = block.get("content", "")
        if block.get("images"):  # the API rejects an empty text block
            content = ([{"type": "text", "text": content}] if content else []) + [_image(b) for b in block["images"]]
        out = {"type": "tool_result", "tool_use_id": block["tool_use_id"], "content": content}
        if block.get("is_error"):
            out["is_error"] = True
        return out
    if kind in ("thinking", "other"):
        return None  # unsigned reasoning from another provider, or a vendor block without its JSON
    raise ProviderError(f"Cannot send a {kind!r} content block to {provider}", provider=provider)


def _paired(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """Drop tool_use blocks whose result is not in the next user turn, and results without a call."""
    out = []
    for i, (role, blocks) in enumerate(turns):
        if role == "assistant":
            following = turns[i + 1][1] if i + 1 < len(turns) and turns[i + 1][0] == "user" else []
            answered = {b.get("tool_use_id") for b in following if b.get("type") == "tool_result"}
            blocks = [b for b in blocks if b.get("type") != "tool_use" or b.get("id") in answered]
        else:
            previous = out[-1][1] if out and out[-1][0] == "assistant" else []
            asked = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            blocks = [b for b in blocks if b.get("type") != "tool_result" or b.get("tool_use_id") in asked]
        out.append((role, blocks))
    return out


def _tools(tools: list[dict]) -> list[dict]:
    return [{"name": t["name"], **({"description": t["description"]} if t.get("description") else {}),
             "input_schema": t.get("parameters") or {"type": "object", "properties": {}}} for t in tools]


def _blocks(message: Mapping[str, Any], provider: str) -> list[dict]:
    role, content = message["role"], message["content"]
    if role not in ("user", "assistant"):
        raise ProviderError(f"{provider} messages are user or assistant turns, not {role!r}", provider=provider)
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in (_encode_block(block, provider) for block in content) if b is not None]


def _encode_messages(messages: Iterable[Mapping[str, Any]], provider: str, reuse: Reuse | None = None) -> Any:
    """The wire messages; with ``reuse``, their JSON (each block's reused from the previous request)."""
    texts: dict[int, str] = {}  # id of an encoded block -> its JSON, with reuse

    def blocks(message: Mapping[str, Any]) -> list[dict]:
        if reuse is None:
            return _blocks(message, provider)
        pairs = reuse.json(message, lambda: [(b, encode(b)) for b in _blocks(message, provider)])
        texts.update((id(b), text) for b, text in pairs)
        return [b for b, _ in pairs]

    turns: list[tuple[str, list[dict]]] = []
    for message in messages:
        role, found = message["role"], blocks(message)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(found)
        else:
            turns.append((role, list(found)))
    out: list[dict] = []
    for role, found in _paired(turns):
        if not found:
            continue
        if out and out[-1]["role"] == role:  # an empty turn between two of one role was skipped
            out[-1]["content"].extend(found)
        else:
            out.append({"role": role, "content": found})
    for message in out:
        # A plain user prompt goes as the string it was, as the API documents it.
        found = message["content"]
        if message["role"] == "user" and len(found) == 1 and found[0].keys() == {"type", "text"}:
            message["content"] = found[0]["text"]
    if reuse is None:
        return out
    return array(f'{{"role": {encode(m["role"])}, "content": '
                 + (encode(m["content"]) if isinstance(m["content"], str)
                    else "[" + ", ".join(texts[id(b)] for b in m["content"]) + "]") + "}" for m in out)


_UNSUPPORTED_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
                       "maxLength", "minItems", "maxItems")


def output_schema(schema: Any) -> Any:
    """``schema`` as Anthropic's structured output takes it: every object with properties closed,
    and the bounds it does not support (``minItems`` above 1 among them) said in the description."""
    if isinstance(schema, list):
        return [output_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    moved = []
    for key, value in schema.items():
        if key in _UNSUPPORTED_BOUNDS and not (key == "minItems" and value in (0, 1)):
            moved.append(f"{key} {value}")
        elif key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):  # name -> schema
            out[key] = {name: output_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "allOf", "oneOf", "not"):
            out[key] = output_schema(value)
        else:
            out[key] = value
    if moved:
        out["description"] = "; ".join(filter(None, [schema.get("description"), ", ".join(moved)]))
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def encode_request(request: Request, *, default_model: str, stream: bool = False, effort: str | None = None,
                   thinking_display: str | None = None, provider: str = "anthropic", reuse: Reuse | None = None) -> dict:
    """The request body. With ``reuse`` (the provider's, see :mod:`bettong_nb.json_body`) its
    messages and tools are JSON already, reused from the previous request where unchanged."""
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens or (64000 if stream else 16000),
        "messages": _encode_messages(request.messages, provider, reuse),
    }
    system = [{"type": "text", "text": b.text, **({"cache_control": {"type": "ephemeral"}} if b.cache else {})}
              for b in request.system if b.text]
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = _tools(request.tools) if reuse is None else reuse.json(
            request.tools, lambda: Encoded(encode(_tools(request.tools))))
        if request.tool_choice:
            body["tool_choice"] = _CHOICES.get(request.tool_choice, {"type": "tool", "name": request.tool_choice})
    output_config: dict[str, Any] = {}
    if request.effort or effort:
        output_config["effort"] = request.effort or effort
    if request.format is not None:
        output_config["format"] = {"type": "json_schema", "schema": output_schema(request.format)}
    if output_config:
        body["output_config"] = output_config
    if request.thinking_display or thinking_display:
        body["thinking"] = {"type": "adaptive", "display": request.thinking_display or thinking_display}
    if stream:
        body["stream"] = True
    return body


# --- decoding ---------------------------------------------------------------------------------

def _block(raw: dict) -> dict:
    kind = raw.get("type")
    if kind == "text":
        return {"type": "text", "text": raw.get("text") or "", "raw": raw}
    if kind == "thinking":
        return {"type": "thinking", "text": raw.get("thinking") or "", "raw": raw}
    if kind == "tool_use":  # input that is not an object reaches the loop, which tells the model
        return {"type": "tool_use", "id": raw.get("id") or "", "name": raw.get("name") or "",
                "input": decode_arguments(raw.get("input")), "raw": raw}
    return {"type": "other", "block_type": kind, "raw": raw}


def decode_response(body: Any, provider: str = "anthropic") -> Response:
    if isinstance(body, Mapping) and body.get("type") == "error":  # an error inside a 200
        err = body.get("error") if isinstance(body.get("error"), Mapping) else {}
        raise ProviderError(f"{provider} error ({err.get('type', 'error')}): {err.get('message', body)}",
                            provider=provider)
    if not isinstance(body, Mapping) or not isinstance(body.get("content"), list):
        raise ProviderError(f"No message in {provider} API response", provider=provider)
    if not all(isinstance(block, Mapping) for block in body["content"]):
        raise malformed(provider, "content blocks that are not all objects", body["content"])
    return Response(content=[_block(dict(b)) for b in body["content"]],
                    stop_reason=body.get("stop_reason") or "end_turn", model=body.get("model"),
                    usage=usage_from(body.get("usage")), stop_details=body.get("stop_details"))


class _StreamFold:
    """Folds the SSE events of one message into the Response a non-streamed call returns."""

    def __init__(self, provider: str):
        self.provider = provider
        self.blocks: dict[int, dict] = {}  # content index -> {"raw", "parts", "tool"}
        self.tools = 0
        self.model: str | None = None
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stop_details: Any = None
        self.finished = False

    def feed(self, event: Any, emit: Callable[[Any], Any]) -> None:
        if not isinstance(event, Mapping):
            raise malformed(self.provider, "a stream event that is not an object", event)
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            raw = dict(event.get("content_block") or {})
            state = self.blocks[event.get("index", len(self.blocks))] = {"raw": raw, "parts": [], "tool": None}
            if raw.get("type") == "tool_use":
                state["tool"] = self.tools
                self.tools += 1
                emit(events.ToolUseDelta(state["tool"], raw.get("name"), ""))
        elif kind == "content_block_delta":
            self._delta(event, emit)
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self.stop_details = delta.get("stop_details", self.stop_details)
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            err = event.get("error") if isinstance(event.get("error"), Mapping) else {"message": event.get("error")}
            err_type = err.get("type", "error")
            raise ProviderError(f"{self.provider} stream error ({err_type}): {err.get('message', err)}",
                                provider=self.provider, status=_TRANSIENT_STREAM_ERRORS.get(err_type),
                                retryable=err_type in _TRANSIENT_STREAM_ERRORS)
        # ping and event types added later carry nothing the answer needs

    def _delta(self, event: Mapping[str, Any], emit: Callable[[Any], Any]) -> None:
        state = self.blocks.get(event.get("index"))
        if state is None:
            raise ProviderError(f"{self.provider} stream sent a delta for block {event.get('index')} before it started",
                                provider=self.provider)
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            state["parts"].append(delta.get("text", ""))
            emit(events.TextDelta(delta.get("text", "")))
        elif kind == "thinking_delta":
            state["parts"].append(delta.get("thinking", ""))
            emit(events.ThinkingDelta(delta.get("thinking", "")))
        elif kind == "input_json_delta":
            piece = delta.get("partial_json", "")
            state["parts"].append(piece)
            if piece and state["tool"] is not None:
                emit(events.ToolUseDelta(state["tool"], state["raw"].get("name"), piece))
        elif kind == "signature_delta":
            state["raw"]["signature"] = delta.get("signature", "")  # an echoed thinking block needs it
        elif kind == "citations_delta":
            state["raw"].setdefault("citations", []).append(delta.get("citation"))

    def response(self) -> Response:
        content = []
        for index in sorted(self.blocks):
            raw, text = self.blocks[index]["raw"], "".join(self.blocks[index]["parts"])
            kind = raw.get("type")
            if kind == "text":
                raw["text"] = text
            elif kind == "thinking":
                raw["thinking"] = text
            elif "input" in raw:  # tool_use and the server-side tool blocks stream their input as JSON
                try:
                    raw["input"] = loads(text) if text.strip() else {}
                except ValueError:
                    if kind != "tool_use":
                        raise ProviderError(f"{self.provider} streamed a {kind} block whose input is not JSON",
                                            provider=self.provider) from None
                    # The loop reports bad arguments to the model; without raw, {} goes back as input.
                    content.append({"type": "tool_use", "id": raw.get("id") or "", "name": raw.get("name") or "",
                                    "input": text})
                    continue
            content.append(_block(raw))
        return Response(content=content, stop_reason=self.stop_reason or "end_turn", model=self.model,
                        usage=usage_from(self.usage), stop_details=self.stop_details)


async def _sse_events(lines: AsyncIterator[str], provider: str) -> AsyncIterator[dict]:
    """Server-sent events: ``data:`` lines up to a blank line make one JSON event."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
            continue
        if line.strip() or not data:
            continue  # event:/id:/comment lines; the type is in the JSON too
        text, data = "\n".join(data), []
        try:
            yield loads(text)
        except ValueError:
            raise ProviderError(f"{provider} sent a stream event that is not JSON: {text}",
                                provider=provider) from None
    if data:
        try:
            yield loads("\n".join(data))
        except ValueError:
            pass  # an event cut in half: the missing message_stop reports it


class AnthropicProvider:
    """A provider speaking Anthropic's Messages API.

    The key (``api_key``, else ``ANTHROPIC_API_KEY``, else the bearer token
    ``ANTHROPIC_AUTH_TOKEN``) is read when the first request is made, trimmed, and never
    appears in repr, errors, logs or a pickle (see :mod:`bettong_nb.portable`).
    """

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None, timeout: Any = None,
                 max_retries: int = 2, model: str | None = None, effort: str | None = None,
                 thinking_display: str | None = None, name: str = "anthropic"):
        self.name = name
        self.model = model or DEFAULT_MODEL
        self.effort = effort
        self.thinking_display = thinking_display
        root = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).strip().rstrip("/")
        self.base_url = root[:-3] if root.endswith("/v1") else root  # requests add /v1/messages
        self._settings = {"base_url": self.base_url, "timeout": timeout, "max_retries": max_retries, "model": model,
                          "effort": effort, "thinking_display": thinking_display, "name": name}
        self._api_key = api_key
        self.transport = Transport(name, self.base_url, headers=self._headers, timeout=timeout,
                                   max_retries=max_retries, secret=self._known_key, retry_statuses=_RETRY_STATUSES,
                                   error=ProviderError, on_retry=events.report_retry)
        self._reuse = Reuse()  # the JSON of the previous request's messages and tools

    @classmethod
    def from_options(cls, options: Any) -> "AnthropicProvider":
        """The provider an agent's options describe (``bettong_nb.anthropic()``'s factory)."""
        return cls(api_key=options.api_key, base_url=options.base_url, timeout=options.timeout,
                   max_retries=options.max_retries)

    def __reduce__(self) -> tuple:
        return rebuild, (type(self), withheld(self._settings))

    def _credential(self) -> tuple[str, str] | None:
        for kind, value in (("key", self._api_key), ("key", os.environ.get("ANTHROPIC_API_KEY")),
                            ("bearer", os.environ.get("ANTHROPIC_AUTH_TOKEN"))):
            if value is not None and value.strip():
                return kind, value.strip()  # a trailing newline from a pasted key is not part of it
        return None

    def _known_key(self) -> str | None:
        credential = self._credential()
        return credential[1] if credential else None

    def secret_values(self) -> list[str]:
        key = self._known_key()
        return [key] if key else []

    def _headers(self) -> dict[str, str]:
        credential = self._credential()
        if credential is None:
            raise ProviderError("No Anthropic API key: pass api_key= or set ANTHROPIC_API_KEY", provider=self.name)
        kind, value = credential
        auth = {"x-api-key": value} if kind == "key" else {"authorization": f"Bearer {value}"}
        return {**auth, "anthropic-version": API_VERSION}

    def _payload(self, request: Request, stream: bool) -> bytes:
        self._reuse.next_request()
        return json_body(encode_request(request, default_model=self.model, stream=stream, effort=self.effort,
                                        thinking_display=self.thinking_display, provider=self.name,
                                        reuse=self._reuse))

    async def complete(self, request: Request) -> Response:
        body = await self.transport.post_json("/v1/messages", self._payload(request, False))
        with self.transport.redacting(), reading(self.name):
            return decode_response(body, self.name)

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        async def fold(lines: AsyncIterator[str], emit: Callable[[Any], Any]) -> Response:
            state = _StreamFold(self.name)
            async for event in _sse_events(lines, self.name):
                state.feed(event, emit)
                if state.finished:
                    break
            if not (state.finished or state.stop_reason):
                raise ProviderError(f"{self.name} stream ended before the answer was complete",
                                    provider=self.name, retryable=True)
            with reading(self.name):
                return state.response()

        return await self.transport.stream("/v1/messages", self._payload(request, True), fold, on_event)

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={url_without_credentials(self.base_url)!r}, model={self.model!r})"
