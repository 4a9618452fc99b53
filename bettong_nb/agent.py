"""Agents: the loop that calls a model, runs the tools it asks for, and returns the answer.

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("Summarise report.txt")
    result.output, result.tool_calls, result.usage

``run`` works in a script and where an event loop is already running (a notebook cell);
``await agent.arun(...)`` is the async form.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from . import capability as cap
from . import budget, events, usage
from ._sync import run_sync
from .providers.base import CallableProvider, Provider, Request, SystemBlock

if TYPE_CHECKING:
    from .batch import Batch
    from .session import Session

__all__ = [
    "Agent", "ModelAgent", "RunResult", "ToolCall", "ApprovalRequest", "Deny",
    "BASE_SYSTEM_PROMPT", "OPTIONS", "agent", "deepseek", "openai", "anthropic", "ollama",
    "system_prompt", "approve_all", "ask_in_terminal", "ask_a_person", "check_options",
]

BASE_SYSTEM_PROMPT = "\n".join([
    "You are an agent running on the user's machine.",
    "Use your tools to actually do the work rather than describing what you would do.",
    "Paths the user gives are real filesystem paths; use them exactly as given.",
    "If you lack a tool for something, say so plainly; never pretend to have done it.",
    "When you are done, give a short confirmation and stop calling tools.",
])

OPTIONS = frozenset({
    "capabilities", "api_key", "model", "base_url", "max_steps", "system", "approve_fn", "on_event",
    "temperature", "provider", "messages", "max_tokens", "prices", "timeout", "max_retries", "tool_choice",
    "stream", "cost_budget", "token_budget", "effort", "format", "thinking_display", "num_ctx", "keep_alive",
})
# Options that go into every Request as they are (a provider ignores what it cannot express).
REQUEST_OPTIONS = ("model", "max_tokens", "temperature", "tool_choice", "effort", "format", "thinking_display",
                   "num_ctx", "keep_alive")
# Options that configure the provider deepseek()/openai()/... build; a given provider has its own.
PROVIDER_OPTIONS = frozenset({"api_key", "base_url", "timeout", "max_retries"})
DEFAULTS: dict[str, Any] = {"capabilities": (), "max_steps": 10, "messages": (), "stream": False}


def check_options(options: Mapping[str, Any], context: str) -> None:
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise TypeError(f"Unknown {context} option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                        f"Known options: {', '.join(sorted(OPTIONS))}")


# --- results ----------------------------------------------------------------------------------

@dataclass
class ToolCall:
    """One tool call the model made, what it returned, and how it went."""

    tool: str
    capability: str | None
    args: Any
    result: str
    id: str = ""
    status: str = "ok"  # ok, error, denied
    reason: str | None = None  # why it was denied
    duration_s: float = 0.0
    redactions: int = 0
    step: int = 0
    turn: int = 1


@dataclass
class RunResult:
    """What a run produced. ``done`` is False when it stopped early (max_steps, budget, error)."""

    output: str | None
    steps: int
    tool_calls: list[ToolCall]
    messages: list[dict]
    usage: usage.Usage
    done: bool
    requests: list[usage.RequestRecord] = field(default_factory=list)
    redactions: int = 0
    stop_reason: str | None = None
    reason: str | None = None  # why the run stopped early, in words
    error: BaseException | None = None
    prices: Mapping[str, float] | None = None

    def refused(self) -> bool:
        return self.stop_reason == "refusal"

    def cost(self, prices: Mapping[str, float] | None = None) -> float | None:
        prices = prices or self.prices
        return usage.cost(self.usage, **prices) if prices else None

    def usage_frame(self, prices: Mapping[str, float] | None = None):
        from .notebook.frames import usage_frame

        return usage_frame(self.requests, prices or self.prices)

    def tool_frame(self):
        from .notebook.frames import tool_frame

        return tool_frame(self.tool_calls)

    def _repr_html_(self) -> str:
        from .notebook.display import result_html

        return result_html(self)

    def __str__(self) -> str:
        head = self.output if self.output is not None else f"(no final answer: {self.reason or 'not done'})"
        return f"{head}\n  {usage.summary(self.usage)}"

    def __repr__(self) -> str:
        answer = self.output if self.output is None or len(self.output) <= 60 else self.output[:60] + "…"
        return (f"RunResult(output={answer!r}, done={self.done}, steps={self.steps}, "
                f"tool_calls={len(self.tool_calls)}, usage='{usage.summary(self.usage)}')")


# --- approvals --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApprovalRequest:
    """What an approve_fn is asked about."""

    tool: str
    args: Any
    capability: str | None
    call_id: str = ""


@dataclass(frozen=True)
class Deny:
    """An approve_fn verdict that denies with a reason the model will read. With ``stop=True``
    the run also ends after this round of tool calls (``stop_reason="stopped"``) instead of
    asking the model what to do next."""

    reason: str | None = None
    stop: bool = False


def approve_all(request: ApprovalRequest) -> bool:
    return True


def ask_in_terminal(request: ApprovalRequest) -> bool | Deny:
    """Ask y/N on stdin; anything but y/yes denies."""
    print(f"Allow {request.tool} {json.dumps(request.args, ensure_ascii=False)} ? [y/N] ", end="", flush=True)
    try:
        answer = input()
    except EOFError:
        answer = ""
    return True if answer.strip().lower() in ("y", "yes") else Deny("denied by the user")


ask_in_terminal.asks_a_person = True


def in_kernel() -> bool:
    """True inside a Jupyter kernel (not a terminal IPython); imports nothing to find out."""
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    return getattr(shell, "kernel", None) is not None


async def ask_a_person(request: ApprovalRequest) -> bool | Deny:
    """Approval from whoever is there: buttons in a notebook kernel (which apply their headless
    policy when no browser is attached), y/N in an interactive terminal, else a denial."""
    if in_kernel():
        from .notebook.approvals import ask_with_buttons

        return await ask_with_buttons(request)
    if sys.stdin is not None and sys.stdin.isatty():
        return await asyncio.to_thread(ask_in_terminal, request)
    return Deny(f"{request.tool} needs a person's approval and nobody can be asked here "
                "(no notebook, no terminal); the user can opt out with require_approval=False")


ask_a_person.asks_a_person = True


async def _verdict(approve_fn: Any, request: ApprovalRequest) -> Deny | None:
    """None when allowed, else the Deny; whatever the hook returned, and a hook that raises denies."""
    if isinstance(approve_fn, (set, frozenset)):
        return None if request.tool in approve_fn else Deny()
    try:
        verdict = approve_fn(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as exc:
        return Deny(f"approval hook threw: {exc}")
    if isinstance(verdict, Deny):
        return verdict
    if isinstance(verdict, Mapping) and "allowed" in verdict:
        return None if verdict["allowed"] is not False else Deny(verdict.get("reason"))
    return None if verdict else Deny()


# --- the loop ---------------------------------------------------------------------------------

def system_prompt(capabilities: Iterable[Any] | None, system: str | None = None) -> str:
    base = BASE_SYSTEM_PROMPT if system is None else system
    extra = cap.system_text(capabilities)
    return base if extra is None else f"{base}\n\n{extra}"


def _arguments(raw: Any) -> tuple[Any, str | None]:
    """Decoded tool arguments, or an error text for the model when they are not valid JSON."""
    if not isinstance(raw, str):
        return ({} if raw is None else raw), None
    if not raw.strip():
        return {}, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, (f"ERROR: Tool call arguments were not valid JSON ({exc}). Send one JSON object, "
                      'with strings in double quotes and array elements separated by commas, '
                      'e.g. {"path": "a.txt", "keys": [":a", ":b"]}.')


@dataclass
class _Turn:
    """The state of one run while it goes."""

    messages: list[dict]
    on_event: Callable[[events.Event], Any]
    prices: Mapping[str, float] | None
    steps: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    records: list[usage.RequestRecord] = field(default_factory=list)
    spent: usage.Usage = usage.ZERO
    redactions: int = 0
    stopped: str | None = None  # why an approver stopped the run

    def result(self, output: str | None, done: bool, **kw: Any) -> RunResult:
        return RunResult(output, self.steps, self.calls, self.messages, self.spent, done, self.records,
                         self.redactions, prices=self.prices, **kw)


async def _run_tool(o: Mapping[str, Any], reg: Mapping[str, cap.RegisteredTool], block: dict, t: _Turn,
                    secrets: list[str]) -> dict:
    name, call_id = block["name"], block["id"]
    args, error = _arguments(block.get("input"))
    capability = reg[name].capability if name in reg else None
    t.on_event(events.ToolCallStarted(call_id, t.steps, name, capability, args))
    status, reason, redactions, denial = "ok", None, 0, None
    if error is None:
        approvers = [o.get("approve_fn")]
        own = reg[name].approval if name in reg else None
        if own is not None and not getattr(approvers[0], "asks_a_person", False):
            approvers.append(own)  # e.g. run_python: a person must say yes
        for approve in filter(None, approvers):
            t.on_event(events.ApprovalRequested(call_id, name, capability, args))
            denial = await _verdict(approve, ApprovalRequest(name, args, capability, call_id))
            t.on_event(events.ApprovalDecided(call_id, name, denial is None, denial and denial.reason))
            if denial is not None:
                break
    started = time.perf_counter()  # the tool's own time, not the time a person took to decide
    if error is not None:
        text, status = error, "error"
    elif denial is not None:
        reason = denial.reason
        text, status = f"ERROR: {name} was not allowed" + ("" if reason is None else f": {reason}"), "denied"
        if denial.stop:
            t.stopped = reason or "stopped by the user"
    else:
        text, redactions = await cap.invoke(reg, name, args, extra_secrets=secrets)
        status = "error" if text.startswith("ERROR:") else "ok"
    duration = time.perf_counter() - started
    t.redactions += redactions
    t.calls.append(ToolCall(name, capability, args, text, call_id, status, reason, duration, redactions, t.steps))
    t.on_event(events.ToolCallFinished(call_id, t.steps, name, capability, args, text, status, duration, redactions))
    return {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": status != "ok"}


async def execute(provider: Provider, o: Mapping[str, Any], prompt: str) -> RunResult:
    """Run one prompt to an answer with options ``o`` (already merged and checked)."""
    reg = cap.registry(o["capabilities"])  # duplicate tool names fail here, at the start of a run
    tools = cap.schemas(reg)
    prior = list(o["messages"] or ())
    messages = prior + [{"role": "user", "content": prompt}] if prior else [
        {"role": "system", "content": system_prompt(o["capabilities"], o.get("system"))},
        {"role": "user", "content": prompt}]
    listener = o.get("on_event") or (lambda event: None)
    t = _Turn(messages, listener, o.get("prices"))
    secrets = list(getattr(provider, "secret_values", lambda: [])())
    budgets = budget.active(o.get("token_budget"), o.get("cost_budget"), o.get("prices"))
    fields = {k: o.get(k) for k in REQUEST_OPTIONS}
    with events.listening(listener):
        while True:
            if t.steps >= o["max_steps"]:
                return t.result(None, False, stop_reason="max_steps", reason=f"hit max_steps ({o['max_steps']})")
            request = Request(messages=t.messages[1:], system=[SystemBlock(t.messages[0]["content"], cache=True)],
                              tools=tools, **fields)
            if budgets:
                estimate = budget.estimate_tokens(t.messages[0]["content"], request.messages, tools, request.max_tokens)
                if (why := next(filter(None, (b.refusal(estimate) for b in budgets)), None)) is not None:
                    listener(events.BudgetExceeded(why))
                    return t.result(None, False, stop_reason="budget", reason=why)
            listener(events.ModelRequest(t.steps + 1, request.model))
            started = time.perf_counter()
            if o.get("stream"):
                response = await provider.stream(request, listener)
            else:
                response = await provider.complete(request)
            latency = time.perf_counter() - started
            t.steps += 1
            t.spent += response.usage
            for b in budgets:
                b.charge(response.usage)
            t.records.append(usage.RequestRecord(1, t.steps, response.model or request.model, latency, response.usage))
            # The tool calls of a truncated (half-written) or refused answer are never run, so they
            # are not kept either: a tool call without its result is never sent to a provider.
            content = response.content if not (response.truncated() or response.refused()) else [
                b for b in response.content if b["type"] != "tool_use"]
            t.messages.append({"role": "assistant", "content": content})
            listener(events.AssistantMessage(t.steps, t.messages[-1], response.usage, latency))
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                done = not response.truncated()
                return t.result(response.text(), done, stop_reason=response.stop_reason,
                                reason=None if done else "the answer hit max_tokens")
            results = [await _run_tool(o, reg, block, t, secrets) for block in uses]
            t.messages.append({"role": "user", "content": results})
            if fields["tool_choice"] not in (None, "auto", "none"):
                fields["tool_choice"] = "auto"  # a forced call ("required", a name) forces the first step only
            if t.stopped is not None:
                return t.result(None, False, stop_reason="stopped", reason=t.stopped)


# --- agents -----------------------------------------------------------------------------------

@runtime_checkable
class Agent(Protocol):
    """Anything that runs a prompt: agents and sessions both; write your own."""

    def run(self, prompt: str, **overrides: Any) -> RunResult: ...

    async def arun(self, prompt: str, **overrides: Any) -> RunResult: ...


def _as_provider(value: Any) -> Provider:
    if hasattr(value, "complete") and hasattr(value, "stream"):
        return value
    if callable(value):
        return CallableProvider(value)
    raise TypeError(f"provider must be a Provider (complete + stream) or a callable request -> Response, got {value!r}")


class ModelAgent:
    """An agent backed by a model provider. Stateless: each run is a fresh conversation
    unless ``messages`` is given; see :meth:`session` for one that remembers."""

    def __init__(self, provider_factory: Callable[[Mapping[str, Any]], Provider] | None = None, **options: Any):
        check_options(options, "agent")
        if options.get("provider") is not None and PROVIDER_OPTIONS & set(options):
            given = ", ".join(sorted(PROVIDER_OPTIONS & set(options)))
            raise TypeError(f"{given} configure the built-in provider; set them on the provider you pass instead")
        self._factory = provider_factory
        self.options = {**DEFAULTS, **options}
        self.provider = (_as_provider(options["provider"]) if options.get("provider") is not None
                         else self._build_provider(self.options))

    def _build_provider(self, options: Mapping[str, Any]) -> Provider:
        if self._factory is None:
            raise TypeError("this agent has no provider: pass provider=")
        return self._factory(options)

    def _merged(self, overrides: Mapping[str, Any]) -> tuple[Provider, dict[str, Any]]:
        check_options(overrides, "override")
        o = {**self.options, **overrides}
        if overrides.get("provider") is not None:
            return _as_provider(overrides["provider"]), o
        if PROVIDER_OPTIONS & set(overrides):
            return self._build_provider(o), o
        return self.provider, o

    async def arun(self, prompt: str, **overrides: Any) -> RunResult:
        provider, o = self._merged(overrides)
        return await execute(provider, o, prompt)

    def run(self, prompt: str, **overrides: Any) -> RunResult:
        return run_sync(self.arun(prompt, **overrides))

    def session(self, *, token_budget: int | None = None, cost_budget: float | None = None) -> "Session":
        """A conversation on this agent; the budgets, when given, cover all its turns."""
        from .session import Session

        return Session(self, token_budget=token_budget, cost_budget=cost_budget)

    async def amap(self, prompts: Iterable[str], *, concurrency: int = 8, progress: bool = True,
                   **overrides: Any) -> "Batch":
        """Run each prompt independently, ``concurrency`` at a time; RunResults in input order.
        ``token_budget``/``cost_budget`` here cover the whole batch. See :mod:`bettong_nb.batch`."""
        from .batch import amap

        return await amap(self, prompts, concurrency=concurrency, progress=progress, **overrides)

    def map(self, prompts: Iterable[str], *, concurrency: int = 8, progress: bool = True, **overrides: Any) -> "Batch":
        from .batch import progress_for

        prompts = list(prompts)
        bar = progress_for(self, len(prompts), progress, overrides)
        return run_sync(self.amap(prompts, concurrency=concurrency, progress=bar, **overrides))

    def map_frame(self, frame: Any, *, prompt: str, output: str = "output", **options: Any):
        """Fill column ``output`` of a copy of ``frame`` from the template ``prompt`` over each row
        (``"Classify: {text}"``); the batch's usage frame is ``result.attrs["usage_frame"]``."""
        from .batch import map_frame

        return map_frame(self, frame, prompt=prompt, output=output, **options)

    def __repr__(self) -> str:
        caps = [cap.capability_id(c) for c in self.options["capabilities"]]
        return f"ModelAgent(provider={self.provider!r}, model={self.options.get('model')!r}, capabilities={caps})"


def _openai_factory(name: str, label: str, key_env: str, base_url: str, model: str | None):
    def build(o: Mapping[str, Any]) -> Provider:
        from .providers.openai import OpenAIProvider

        return OpenAIProvider(name=name, label=label, key_env=key_env, api_key=o.get("api_key"),
                              base_url=o.get("base_url") or base_url, model=model,
                              timeout=o.get("timeout"), max_retries=o.get("max_retries", 2))
    return build


def agent(provider: Any = None, **options: Any) -> ModelAgent:
    """An agent over any provider (a Provider object or a callable request -> Response).
    Without one, the DeepSeek provider is used."""
    if provider is None:
        return deepseek(**options)
    return ModelAgent(None, provider=provider, **options)


def deepseek(**options: Any) -> ModelAgent:
    """An agent on DeepSeek (key from DEEPSEEK_API_KEY, read at the first request)."""
    return ModelAgent(_openai_factory("deepseek", "DeepSeek", "DEEPSEEK_API_KEY", "https://api.deepseek.com",
                                      "deepseek-v4-flash"), **options)


def openai(**options: Any) -> ModelAgent:
    """An agent on any OpenAI-compatible server: ``base_url`` (or OPENAI_BASE_URL) is its API root,
    ``/v1`` included where it has one; the key comes from OPENAI_API_KEY."""
    base_url = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    model = os.environ.get("OPENAI_MODEL") or "gpt-4.1-mini"
    return ModelAgent(_openai_factory("openai", "OpenAI", "OPENAI_API_KEY", base_url, model), **options)


def anthropic(**options: Any) -> ModelAgent:
    """An agent on Anthropic's Messages API (key from ANTHROPIC_API_KEY)."""

    def build(o: Mapping[str, Any]) -> Provider:
        from .providers.anthropic import AnthropicProvider

        return AnthropicProvider(api_key=o.get("api_key"), base_url=o.get("base_url"), timeout=o.get("timeout"),
                                 max_retries=o.get("max_retries", 2))

    return ModelAgent(build, **options)


def ollama(**options: Any) -> ModelAgent:
    """An agent on a local Ollama server (no key; base_url default http://localhost:11434)."""

    def build(o: Mapping[str, Any]) -> Provider:
        from .providers.ollama import OllamaProvider

        return OllamaProvider(base_url=o.get("base_url"), timeout=o.get("timeout"),
                              max_retries=o.get("max_retries", 2))

    return ModelAgent(build, **options)
