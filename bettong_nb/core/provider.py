"""The neutral seam between the agent loop and a model: Request, Response, Provider.

The loop speaks only these shapes; each module of :mod:`bettong_nb.providers` translates them
to one wire format.

Messages are plain dicts so a transcript is JSON as it stands::

    {"role": "user", "content": "hi"}
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.txt"}}]}
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "hello", "is_error": False}]}

Images are blocks of their own, the bytes in standard base64 (see :mod:`bettong_nb.images`)::

    {"role": "user", "content": [
        {"type": "text", "text": "What does this plot show?"},
        {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo..."}]}
    {"type": "tool_result", "tool_use_id": "c2", "content": "[image: image/png, 640×480 px]",
     "is_error": False, "images": [{"type": "image", "media_type": "image/png", "data": "..."}]}

A prompt's text and images keep their order; a tool result keeps ``content`` as text and
carries its images beside it, for wire formats whose tool messages are text only. The media
type is one of ``images.MEDIA_TYPES``, checked and bounded before the block is made.

A ``tool_use`` input is the decoded arguments, or the model's raw text when that was not
valid JSON (the loop reports the error to the model). Blocks parsed by the Anthropic provider
carry ``raw`` (the vendor's own JSON), which it echoes back unchanged (its API rejects an edited
thinking block); other providers neither set nor read ``raw``.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Protocol, runtime_checkable

from ..errors import ServiceError
from ..http.json_body import loads
from .usage import Usage

__all__ = [
    "SystemBlock",
    "Request",
    "Response",
    "Provider",
    "ProviderError",
    "text",
    "tool_uses",
    "refused",
    "truncated",
    "unfence",
    "CallableProvider",
    "stream_by_completing",
    "decode_arguments",
    "reading",
    "malformed",
    "checked",
]


@dataclass(frozen=True)
class SystemBlock:
    """A piece of the system prompt; ``cache`` asks for a prompt-cache breakpoint after it."""

    text: str
    cache: bool = False


@dataclass
class Request:
    """One model turn, in neutral form. A provider ignores what it cannot express."""

    messages: list[dict]
    system: list[SystemBlock] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)  # [{"name", "parameters", "description"?}]
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    tool_choice: str | None = None  # "auto", "none", "required" or a tool name
    effort: str | None = None  # reasoning depth: low, medium, high, xhigh, max
    format: dict | None = None  # a JSON schema the answer must follow
    thinking_display: str | None = None
    num_ctx: int | None = None
    keep_alive: str | int | None = None


@dataclass
class Response:
    """One model answer. Read ``stop_reason`` before ``content``: a refusal has no text to trust."""

    content: list[dict]
    stop_reason: str = "end_turn"  # end_turn, tool_use, refusal, max_tokens, or the vendor's own
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    stop_details: Any = None
    cost: float | None = None  # what the server said this request cost (a gateway's bill), in its currency

    def text(self) -> str:
        return text(self)

    def tool_uses(self) -> list[dict]:
        return tool_uses(self)

    def refused(self) -> bool:
        return refused(self)

    def truncated(self) -> bool:
        return truncated(self)


@runtime_checkable
class Provider(Protocol):
    """Anything that can run one model turn.

    ``stream`` calls ``on_event`` with :mod:`bettong_nb.events` deltas as they arrive and
    returns the same Response ``complete`` would have. Optional attributes: ``name`` (the
    provider's name in usage records and prices) and ``free`` (True when no request has a
    price: a session then keeps cache-cost warnings to itself).
    """

    async def complete(self, request: Request) -> Response: ...

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response: ...


class ProviderError(ServiceError):
    """A model request failed. Carries what the server said, never the key."""

    def __init__(self, message: str, *, provider: str | None = None, service: str | None = None, **details: Any):
        super().__init__(message, service=provider or service or "provider", **details)

    @property
    def provider(self) -> str:
        return self.service


def text(response: Response) -> str:
    """The text blocks concatenated; thinking and tool use dropped. Empty on a refusal: what a
    model wrote before it refused is not an answer."""
    if refused(response):
        return ""
    return "".join(b.get("text", "") for b in response.content if b.get("type") == "text")


def tool_uses(response: Response) -> list[dict]:
    return [b for b in response.content if b.get("type") == "tool_use"]


def refused(response: Response) -> bool:
    return response.stop_reason == "refusal"


def truncated(response: Response) -> bool:
    return response.stop_reason == "max_tokens"


_FENCE = re.compile(r"```(?:json|edn|clojure|clj|text|python|py)?\s*(.*?)```", re.S)


def unfence(answer: str) -> str:
    """The contents of the first markdown fence in ``answer``, else ``answer`` itself."""
    match = _FENCE.search(answer)
    return match.group(1) if match else answer


async def stream_by_completing(provider: Any, request: Request, on_event: Callable[[Any], Any]) -> Response:
    """``stream`` for a provider without an incremental transport: one delta per text block."""
    from .events import TextDelta

    response = await provider.complete(request)
    for block in response.content:
        if block.get("type") == "text" and block.get("text"):
            on_event(TextDelta(block["text"]))
    return response


class CallableProvider:
    """Wraps a plain ``request -> Response`` function (sync or async) as a Provider."""

    def __init__(self, fn: Callable[[Request], Response | Awaitable[Response]]):
        self.fn = fn
        self.name = getattr(fn, "__name__", "callable")

    async def complete(self, request: Request) -> Response:
        result = self.fn(request)
        if isinstance(result, Awaitable):
            result = await result
        return result

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        return await stream_by_completing(self, request, on_event)

    def __repr__(self) -> str:
        return f"CallableProvider({self.name})"


def decode_arguments(value: Any) -> Any:
    """A wire format's tool-call arguments, decoded when they are JSON text; anything else as it
    came (the loop tells the model what was wrong, see ``capability.arguments``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if not isinstance(value, str):
        return value
    try:
        return loads(value)
    except ValueError:
        return value


def malformed(provider: str, what: str, value: Any) -> ProviderError:
    """The error for an answer whose shape we cannot read, quoting ``value`` whole: the transport
    redacts the error, then cuts it short."""
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return ProviderError(f"{provider} sent {what}: {shown}", provider=provider)


# The fields of a neutral block the loop reads as text (a tool call's also must be there).
_TEXT_FIELDS = {"text": ("text",), "thinking": ("text",), "tool_use": ("id", "name")}


def checked(response: Response, provider: str) -> Response:
    """``response`` when its content keeps the seam's shape — a list of objects, each with a
    text ``type``; the text of text and thinking blocks, a tool call's id and name, all text —
    else a ProviderError quoting what broke it. The loop checks every provider's answer (a
    custom one's too) here, so a wrong JSON type anywhere in a body never trips it later."""
    content = response.content
    if not isinstance(content, list):
        raise malformed(provider, "an answer whose content is not a list of blocks", content)
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str):
            raise malformed(provider, "a content block that is not an object with a type", block)
        for key in _TEXT_FIELDS.get(kind, ()):
            if not isinstance(block.get(key), str):
                shown = {k: v for k, v in block.items() if k != "raw"}
                raise malformed(provider, f"a {kind} block whose {key!r} is not a string", shown)
    return response


@contextlib.contextmanager
def reading(provider: str) -> Iterator[None]:
    """Around decoding a server's answer: a shape the decoder did not foresee is a ProviderError
    naming the provider, never a TypeError or AttributeError from inside the library."""
    try:
        yield
    except ProviderError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise ProviderError(f"{provider} sent an answer in a shape that cannot be read "
                            f"({type(exc).__name__}: {exc})", provider=provider) from None
