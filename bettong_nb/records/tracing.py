"""OpenTelemetry spans of runs, built from their events (:mod:`bettong_nb.events`), in this one place.

    pip install "bettong_nb[otel]"         # opentelemetry-api; configure the SDK and an exporter as usual
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    provider = TracerProvider(); provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    agent.run("...")        # invoke_agent → chat {model}, execute_tool {tool} ...

Each run is an ``invoke_agent`` span; each model request a child ``chat {model}`` (kind CLIENT),
each tool call a child ``execute_tool {tool}``, with the GenAI semantic conventions' attributes
(``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.response.model``, ``gen_ai.usage.*`` with cached and reasoning tokens,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``error.type``) and bettong_nb's own, under ``bettong_nb.*``: ``cell``, ``capability``,
``approval`` and ``approval.by``, ``redactions``, ``cost``, ``cost.source``, ``cost.currency``,
``retries``, ``step``, ``stop_reason``. A batch is a ``bettong_nb.batch`` span with one
``bettong_nb.batch.item`` span per item; on Dask, each partition's span continues the batch's
trace on its worker (W3C trace context travels in the task).

Message content (prompts, answers, the system prompt, tool arguments and results) is recorded
only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, and then redacted as every
text the library shows is (:func:`bettong_nb.secrets.redact`): no credential reaches an exporter.
Error messages are redacted the same way; no stack traces. Inside ``secrets.revealed()`` neither
content nor error messages are recorded: texts there were cut short unredacted, and a secret cut
in two is no longer recognisable (the spans say ``bettong_nb.content: withheld``).

Nothing here runs, or is imported, until OpenTelemetry is loaded and a tracer provider is set: the
front door asks :func:`observer` at each run only when ``opentelemetry.trace`` was imported.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
from typing import Any, Iterator, Mapping

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..core import events
from ..core.pricing import currency, request_cost
from ..safety import secrets

__all__ = ["observer", "CAPTURE_CONTENT", "Tracing"]

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# The GenAI conventions' finish reasons (those of their output messages), from the loop's stop reasons.
_FINISH = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length", "refusal": "content_filter"}


def _capturing() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def _redacted(value: Any) -> Any:
    """``value`` with every secret redacted, in a fresh context: ``secrets.revealed()`` around a
    run shows the person tool output, never an exporter."""
    return contextvars.Context().run(secrets.redact_data, value)[0]


def _json(value: Any) -> str:
    return json.dumps(_redacted(value), ensure_ascii=False, default=str)


def _parts(content: Any) -> list[dict]:
    """A neutral message's content as the conventions' parts (images by media type only)."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for block in content or ():
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("text", "")})
        elif kind == "tool_use":
            parts.append({"type": "tool_call", "id": block.get("id"), "name": block.get("name"),
                          "arguments": block.get("input")})
        elif kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": block.get("tool_use_id"), "result": block.get("content")})
        elif kind == "image":
            parts.append({"type": "image", "mime_type": block.get("media_type")})
    return parts


def _messages(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        parts = _parts(message.get("content"))
        tool_results = bool(parts) and all(p["type"] == "tool_call_response" for p in parts)
        out.append({"role": "tool" if tool_results else message.get("role"), "parts": parts})
    return out


def _error_type(error: BaseException) -> str:
    """``error.type``: the HTTP status a service answered with, else the exception's class."""
    status = getattr(error, "status", None)
    return str(status) if isinstance(status, int) else type(error).__qualname__


def _texts_safe() -> bool:
    """Whether texts of this context were redacted before anything cut them short: not inside
    ``secrets.revealed()``, where a secret cut in two could not be recognised any more."""
    return secrets.redacting()


def _failed(span: trace.Span, error: BaseException) -> None:
    """The span ends in ``error``: its type, and its message redacted (never a stack trace)."""
    span.set_attribute("error.type", _error_type(error))
    if not _texts_safe():
        span.add_event("exception", {"exception.type": type(error).__qualname__})
        span.set_status(Status(StatusCode.ERROR))
        return
    message = _redacted(f"{type(error).__name__}: {error}")
    span.add_event("exception", {"exception.type": type(error).__qualname__, "exception.message": message})
    span.set_status(Status(StatusCode.ERROR, message))


def _usage_attributes(usage: Any) -> dict[str, int]:
    # prompt_tokens counts the whole prompt, cached part included, as gen_ai.usage.input_tokens must
    return {"gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_hit_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens}


class _RunSpans:
    """One run's spans, opened and closed as its events arrive (the run's own listener). The SDK's
    span work is most of what tracing adds to a run (bench T1); each event's own work here is
    kept to building its attributes once, in one dict, given to the SDK in one call."""

    def __init__(self, tracer: trace.Tracer):
        self.tracer = tracer
        self.wanted = _capturing()
        self.run: trace.Span | None = None
        self.parent: Any = None  # the context whose current span is the run's
        self.token: Any = None
        self.chat: trace.Span | None = None
        self.retries = 0
        self.tools: dict[str, trace.Span] = {}
        self.decisions: dict[str, events.ApprovalDecided] = {}
        self.start: events.RunStarted | None = None
        self.common: dict[str, Any] = {}  # what every span of the run says of where it runs
        self.costs: list[float] = []  # each answered request's, NaN where its price is unknown

    def __call__(self, event: events.Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            try:
                handler(self, event)
            except Exception:  # a tracing bug costs a span, never the run its answer
                pass

    @property
    def capture(self) -> bool:
        return self.wanted and _texts_safe()

    def _RunStarted(self, event: events.RunStarted) -> None:
        self.start = event
        common = self.common = {"gen_ai.provider.name": event.provider or "bettong_nb"}
        if event.host is not None:
            common["server.address"] = event.host
        if event.cell is not None:
            common["bettong_nb.cell"] = event.cell
        attributes = {"gen_ai.operation.name": "invoke_agent", **common}
        if event.model is not None:
            attributes["gen_ai.request.model"] = event.model
        if self.capture:
            attributes["gen_ai.system_instructions"] = _json([{"type": "text", "content": event.system}])
        elif self.wanted:
            attributes["bettong_nb.content"] = "withheld"
        self.run = self.tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes)
        self.parent = trace.set_span_in_context(self.run)
        # Current for the run's own task: what its tools trace (an HTTP client's spans) nests here.
        self.token = otel_context.attach(self.parent)

    def _ModelRequest(self, event: events.ModelRequest) -> None:
        model = event.model or self.start.model
        attributes = {"gen_ai.operation.name": "chat", **self.common, "bettong_nb.step": event.step}
        if model is not None:
            attributes["gen_ai.request.model"] = model
        if self.capture and event.messages is not None:
            attributes["gen_ai.input.messages"] = _json(_messages(event.messages))
        self.chat = self.tracer.start_span(f"chat {model}" if model else "chat", context=self.parent,
                                           kind=SpanKind.CLIENT, attributes=attributes)
        self.retries = 0

    def _Retry(self, event: events.Retry) -> None:
        if self.chat is not None:
            self.retries += 1
            reason = {"bettong_nb.retry.reason": _redacted(event.reason)} if _texts_safe() else {}
            self.chat.add_event("retry", {"bettong_nb.retry.attempt": event.attempt,
                                          "bettong_nb.retry.delay_s": event.delay_s, **reason})

    def _AssistantMessage(self, event: events.AssistantMessage) -> None:
        span, self.chat = self.chat, None
        if span is None:
            return
        finish = _FINISH.get(event.stop_reason or "", event.stop_reason or "stop")
        attributes = _usage_attributes(event.usage)
        attributes["gen_ai.response.finish_reasons"] = (finish,)
        attributes["bettong_nb.retries"] = self.retries
        record = event.request
        if record is not None:
            if record.model:
                attributes["gen_ai.response.model"] = record.model
            self.costs.append(_cost(record, self.start.prices, attributes))
        if self.capture:
            answer = {"role": "assistant", "parts": _parts(event.message["content"]), "finish_reason": finish}
            attributes["gen_ai.output.messages"] = _json([answer])
        span.set_attributes(attributes)
        span.end()

    def _ToolCallStarted(self, event: events.ToolCallStarted) -> None:
        call = event.call
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
                      "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function", "bettong_nb.step": call.step}
        if call.capability is not None:
            attributes["bettong_nb.capability"] = call.capability
        if call.cell is not None:
            attributes["bettong_nb.cell"] = call.cell
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = _json(call.args)
        self.tools[call.id] = self.tracer.start_span(f"execute_tool {call.tool}", context=self.parent,
                                                     kind=SpanKind.INTERNAL, attributes=attributes)

    def _ApprovalDecided(self, event: events.ApprovalDecided) -> None:
        self.decisions[event.call_id] = event

    def _ToolCallFinished(self, event: events.ToolCallFinished) -> None:
        call = event.call
        span = self.tools.pop(call.id, None)
        if span is None:
            return
        decision = self.decisions.pop(call.id, None)
        attributes = {"bettong_nb.redactions": call.redactions, "bettong_nb.status": call.status,
                      "bettong_nb.approval": ("not asked" if decision is None
                                              else "allowed" if decision.allowed else "denied")}
        if decision is not None:
            attributes["bettong_nb.approval.by"] = decision.by
        if call.status == "denied" and decision is None:  # a tool wrapper refused it (it asked a person)
            attributes["bettong_nb.approval"] = "denied"
        if self.capture and call.result is not None:
            attributes["gen_ai.tool.call.result"] = _redacted(call.result)
        span.set_attributes(attributes)
        if call.status == "error":
            # what the model read, "ERROR: Type: message": the type names the error
            kind = (call.result or "").removeprefix("ERROR:").strip().split(":", 1)[0].strip()
            span.set_attribute("error.type", kind if kind.isidentifier() else "tool_error")
            span.set_status(Status(StatusCode.ERROR, _redacted(call.result or "") if _texts_safe() else None))
        span.end()

    def _RunFinished(self, event: events.RunFinished) -> None:
        if self.run is None:
            return
        if self.token is not None:
            try:
                otel_context.detach(self.token)
            except ValueError:  # detached from another context: nothing to restore here
                pass
        error = event.error
        for span in [self.chat, *self.tools.values()]:  # what the error cut short
            if span is not None:
                if error is not None:
                    _failed(span, error)
                span.end()
        self.chat, self.tools = None, {}
        result = event.result
        if result is not None:
            attributes = _usage_attributes(result.usage)
            attributes["bettong_nb.redactions"] = result.redactions
            attributes["bettong_nb.steps"] = result.steps
            if result.stop_reason:
                attributes["bettong_nb.stop_reason"] = result.stop_reason
                attributes["gen_ai.response.finish_reasons"] = (_FINISH.get(result.stop_reason, result.stop_reason),)
            spent = math.fsum(self.costs)
            if self.costs and math.isfinite(spent):
                attributes["bettong_nb.cost"] = spent
                attributes["bettong_nb.cost.currency"] = currency(self.start.prices)
            if self.capture and result.output is not None:
                attributes["gen_ai.output.messages"] = _json([{"role": "assistant", "parts": [
                    {"type": "text", "content": result.output}], "finish_reason": attributes.get(
                        "gen_ai.response.finish_reasons", ("stop",))[0]}])
            self.run.set_attributes(attributes)
        if error is not None:
            _failed(self.run, error)
        self.run.end()
        self.run = None


def _cost(record: Any, prices: Mapping[str, Any] | None, attributes: dict[str, Any]) -> float:
    """A request's cost (NaN when its price is unknown), put in ``attributes`` when known, with
    where the price came from in any case."""
    _, spent, source = request_cost(record, prices)
    attributes["bettong_nb.cost.source"] = source
    if math.isfinite(spent):
        attributes["bettong_nb.cost"] = spent
        attributes["bettong_nb.cost.currency"] = currency(prices)
    return spent


# Each event's handler, found by the event's exact type (events are final: nothing subclasses them).
_HANDLERS = {kind: getattr(_RunSpans, f"_{kind.__name__}") for kind in (
    events.RunStarted, events.ModelRequest, events.Retry, events.AssistantMessage, events.ToolCallStarted,
    events.ApprovalDecided, events.ToolCallFinished, events.RunFinished)}


class Tracing:
    """The :class:`bettong_nb.events.Observer` that turns events into spans on ``tracer``."""

    def __init__(self, tracer: trace.Tracer):
        self.tracer = tracer

    def run(self) -> _RunSpans:
        return _RunSpans(self.tracer)

    @contextlib.contextmanager
    def scope(self, name: str, attributes: Mapping[str, Any], parent: Mapping[str, str] | None) -> Iterator[Any]:
        context = propagate.extract(parent) if parent is not None else None
        named = {f"bettong_nb.{name}.{key}": value for key, value in attributes.items() if value is not None}
        with self.tracer.start_as_current_span(f"bettong_nb.{name}", context=context, kind=SpanKind.INTERNAL,
                                               attributes=named, record_exception=False,
                                               set_status_on_exception=False) as span:
            try:
                yield span
            except BaseException as error:
                _failed(span, error)
                raise

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier


_made: list = [None, None]  # the tracer provider last seen, and its Tracing


def observer() -> Tracing | None:
    """Spans for this run when a tracer provider is set (a proxy or no-op one means none is)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    if _made[0] is not provider:
        _made[:] = [provider, Tracing(provider.get_tracer("bettong_nb"))]
    return _made[1]
