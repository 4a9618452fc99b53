"""Agents: the loop that calls a model, runs the tools it asks for, and returns the answer.

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("Summarise report.txt")
    result.output, result.tool_calls, result.usage

``run`` works in a script and where an event loop is already running (a notebook cell);
``await agent.arun(...)`` is the async form.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from . import approvals, budget, events, secrets, usage
from . import capability as cap
from ._sync import run_sync
from .options import PROVIDER_OPTIONS, Options
from .provider import CallableProvider, Provider, Request, SystemBlock
from .results import RunResult, ToolCall

if TYPE_CHECKING:
    from .batch import Batch
    from .session import Session

__all__ = ["Agent", "ModelAgent", "Toolbox", "BASE_SYSTEM_PROMPT", "execute", "prepare", "system_prompt",
           "as_provider"]

BASE_SYSTEM_PROMPT = "\n".join([
    "You are an agent running on the user's machine.",
    "Use your tools to actually do the work rather than describing what you would do.",
    "Paths the user gives are real filesystem paths; use them exactly as given.",
    "If you lack a tool for something, say so plainly; never pretend to have done it.",
    "When you are done, give a short confirmation and stop calling tools.",
])


def system_prompt(capabilities: Iterable[Any] | None, system: str | None = None) -> str:
    base = BASE_SYSTEM_PROMPT if system is None else system
    extra = cap.system_text(capabilities)
    return base if extra is None else f"{base}\n\n{extra}"


@dataclass(frozen=True)
class Toolbox:
    """What a run hands the model from its capabilities, built once at its start: the registry,
    the tools payload in declaration order, and the system prompt."""

    registry: Mapping[str, cap.RegisteredTool]
    tools: list[dict]
    system: str


def prepare(options: Options) -> Toolbox:
    """The run's toolbox; two capabilities offering one tool name fail here, at the start."""
    registry = cap.registry(options.capabilities)
    return Toolbox(registry, cap.schemas(registry), system_prompt(options.capabilities, options.system))


# --- the loop ---------------------------------------------------------------------------------

@dataclass(eq=False)  # identity: a run is the approval scope of its own calls
class _Run:
    """The state of one run while it goes."""

    options: Options
    toolbox: Toolbox
    system: str
    history: list[dict]  # the transcript after the system prompt
    listener: Callable[[events.Event], Any]
    secrets: list[str]
    scope: Any
    steps: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    records: list[usage.RequestRecord] = field(default_factory=list)
    spent: usage.Usage = usage.ZERO
    redactions: int = 0
    stopped: str | None = None  # why a person stopped the run

    def result(self, output: str | None, done: bool, **kw: Any) -> RunResult:
        messages = [{"role": "system", "content": self.system}, *self.history]
        return RunResult(output, self.steps, self.calls, messages, self.spent, done, self.records,
                         self.redactions, prices=self.options.prices, **kw)

    async def approval(self, request: approvals.ApprovalRequest) -> approvals.Verdict:
        if self.stopped is not None:  # Stop denies the rest of the round without asking again
            return approvals.Deny(self.stopped)
        if self.options.approve_fn is None:
            return approvals.Allow()
        self.listener(events.ApprovalRequested(request.call_id, request.tool, request.capability, request.args))
        verdict = await approvals.decide(self.options.approve_fn, request)
        self.listener(events.ApprovalDecided(request.call_id, request.tool, bool(verdict),
                                             getattr(verdict, "reason", None)))
        return verdict

    async def tool_calls(self, uses: list[dict]) -> list[dict]:
        """One step's tool calls, asked about one at a time in the model's order. An allowed call
        starts at once, beside the calls still running, unless its tool must run alone: then it
        waits for them, and the calls after it wait for it. Results keep the model's order."""
        results: list[asyncio.Task | dict] = []
        async with asyncio.TaskGroup() as group:  # cancelling the run cancels the running calls
            for block in uses:
                pending = await self.ask(block)
                if pending.allowed and pending.concurrent and len(uses) > 1:
                    results.append(group.create_task(self.finish(pending, in_thread=True)))
                    continue
                if pending.allowed:
                    await asyncio.gather(*(r for r in results if isinstance(r, asyncio.Task)))
                results.append(await self.finish(pending))
        return [r.result() if isinstance(r, asyncio.Task) else r for r in results]

    async def ask(self, block: dict) -> _Pending:
        """Report the call as started and, when its arguments parse, ask whether it may run."""
        name = block["name"]
        args, error = cap.arguments(block.get("input"))
        entry = self.toolbox.registry.get(name)
        call = ToolCall(name, entry.capability if entry else None, block.get("input") if args is None else args,
                        id=block["id"], step=self.steps)
        self.calls.append(call)
        self.listener(events.ToolCallStarted(call))
        if error is not None:
            return _Pending(call, None, approvals.Allow(), error)
        request = approvals.ApprovalRequest(name, args, call.capability, call.id, scope=self.scope)
        return _Pending(call, request, await self.approval(request), concurrent=entry is None or entry.concurrent)

    async def finish(self, pending: _Pending, *, in_thread: bool = False) -> dict:
        """Run the call if it was allowed, and report how it went; its tool_result block for the
        next request."""
        call, text, verdict = pending.call, pending.error, pending.verdict
        started = time.perf_counter()  # the tool's own time, not the time a person took to decide
        if pending.allowed:
            try:
                with approvals.approved(pending.request, verdict):
                    output = await cap.run_tool(self.toolbox.registry, call.tool, pending.request.args,
                                                in_thread=in_thread)
                text, call.data = output.text, output.data
            except approvals.Denied as refused:
                verdict = refused.verdict
        if not verdict:
            text = approvals.denial_text(call.tool, verdict)
            call.status, call.reason = "denied", verdict.reason
            if verdict.stop:
                self.stopped = verdict.reason or "stopped by the user"
        call.result, call.redactions = secrets.redact(text, extra=self.secrets)
        if call.status != "denied":
            call.status = "error" if call.result.startswith("ERROR:") else "ok"
        call.duration_s = time.perf_counter() - started
        self.redactions += call.redactions
        self.listener(events.ToolCallFinished(call))
        return {"type": "tool_result", "tool_use_id": call.id, "content": call.result, "is_error": call.status != "ok"}


@dataclass
class _Pending:
    """A tool call asked about: ``error`` when its arguments did not parse, else the request and
    the verdict; ``concurrent`` when its tool may run beside other calls."""

    call: ToolCall
    request: approvals.ApprovalRequest | None
    verdict: approvals.Verdict
    error: str | None = None
    concurrent: bool = True

    @property
    def allowed(self) -> bool:
        return self.error is None and bool(self.verdict)


async def execute(provider: Provider, options: Options, prompt: str) -> RunResult:
    """Run one prompt to an answer. ``options.messages`` is a prior transcript to continue; its
    system prompt is kept as it is, so the provider's cached prefix survives."""
    toolbox = prepare(options)
    prior = list(options.messages)
    system = prior[0]["content"] if prior else toolbox.system
    listener = options.on_event or (lambda event: None)
    run = _Run(options, toolbox, system, prior[1:] + [{"role": "user", "content": prompt}], listener,
               list(getattr(provider, "secret_values", lambda: [])()), approvals.current_conversation())
    run.scope = run.scope if run.scope is not None else run
    budgets = budget.active(options.token_budget, options.cost_budget, options.prices)
    fields = options.request_fields()
    with events.listening(listener):
        listener(events.RunStarted(toolbox.system, toolbox.tools))
        while True:
            if run.steps >= options.max_steps:
                return run.result(None, False, stop_reason="max_steps", reason=f"hit max_steps ({options.max_steps})")
            request = Request(messages=list(run.history), system=[SystemBlock(system, cache=True)],
                              tools=toolbox.tools, **fields)
            if budgets:
                estimate = budget.estimate_tokens(system, request.messages, toolbox.tools, request.max_tokens)
                if (why := next(filter(None, (b.refusal(estimate) for b in budgets)), None)) is not None:
                    listener(events.BudgetExceeded(why))
                    return run.result(None, False, stop_reason="budget", reason=why)
            listener(events.ModelRequest(run.steps + 1, request.model))
            started = time.perf_counter()
            response = await (provider.stream(request, listener) if options.stream else provider.complete(request))
            latency = time.perf_counter() - started
            run.steps += 1
            run.spent += response.usage
            for b in budgets:
                b.charge(response.usage)
            run.records.append(usage.RequestRecord(1, run.steps, response.model or request.model, latency,
                                                   response.usage))
            # The tool calls of a truncated (half-written) or refused answer are never run, so they
            # are not kept either: a tool call without its result is never sent to a provider.
            content = response.content if not (response.truncated() or response.refused()) else [
                b for b in response.content if b["type"] != "tool_use"]
            run.history.append({"role": "assistant", "content": content})
            listener(events.AssistantMessage(run.steps, run.history[-1], response.usage, latency))
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                done = not response.truncated()
                return run.result(response.text(), done, stop_reason=response.stop_reason,
                                  reason=None if done else "the answer hit max_tokens")
            run.history.append({"role": "user", "content": await run.tool_calls(uses)})
            if fields["tool_choice"] not in (None, "auto", "none"):
                fields["tool_choice"] = "auto"  # a forced call ("required", a name) forces the first step only
            if run.stopped is not None:
                return run.result(None, False, stop_reason="stopped", reason=run.stopped)


# --- agents -----------------------------------------------------------------------------------

@runtime_checkable
class Agent(Protocol):
    """Anything that runs a prompt: agents and sessions both; write your own."""

    def run(self, prompt: str, **overrides: Any) -> RunResult: ...

    async def arun(self, prompt: str, **overrides: Any) -> RunResult: ...


def as_provider(value: Any) -> Provider:
    if hasattr(value, "complete") and hasattr(value, "stream"):
        return value
    if callable(value):
        return CallableProvider(value)
    raise TypeError(f"provider must be a Provider (complete + stream) or a callable request -> Response, got {value!r}")


class ModelAgent:
    """An agent backed by a model provider. Stateless: each run is a fresh conversation
    unless ``messages`` is given; see :meth:`session` for one that remembers.

    ``provider_factory(options)`` builds the provider from the options (deepseek(), openai()...
    pass theirs); without one, pass ``provider=``."""

    def __init__(self, provider_factory: Callable[[Options], Provider] | None = None, **options: Any):
        self.options = Options.of(**options)
        if self.options.provider is not None and PROVIDER_OPTIONS & set(options):
            given = ", ".join(sorted(PROVIDER_OPTIONS & set(options)))
            raise TypeError(f"{given} configure the built-in provider; set them on the provider you pass instead")
        self._factory = provider_factory
        self.provider = (as_provider(self.options.provider) if self.options.provider is not None
                         else self._build_provider(self.options))

    def _build_provider(self, options: Options) -> Provider:
        if self._factory is None:
            raise TypeError("this agent has no provider: pass provider=")
        return self._factory(options)

    def resolve(self, overrides: Mapping[str, Any]) -> tuple[Provider, Options]:
        """The provider and options one run uses, given its overrides."""
        options = self.options.merged(overrides)
        if overrides.get("provider") is not None:
            return as_provider(overrides["provider"]), options
        if PROVIDER_OPTIONS & set(overrides):
            return self._build_provider(options), options
        return self.provider, options

    async def arun(self, prompt: str, **overrides: Any) -> RunResult:
        provider, options = self.resolve(overrides)
        return await execute(provider, options, prompt)

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
        from .batch import map_prompts

        return map_prompts(self, prompts, concurrency=concurrency, progress=progress, **overrides)

    def map_frame(self, frame: Any, *, prompt: str, output: str = "output", **options: Any):
        """Fill column ``output`` of a copy of ``frame`` from the template ``prompt`` over each row
        (``"Classify: {text}"``); the batch's usage frame is ``result.attrs["usage_frame"]``."""
        from .batch import map_frame

        return map_frame(self, frame, prompt=prompt, output=output, **options)

    def close(self) -> None:
        """Stop what the capabilities keep running (servers, connections); idempotent."""
        for capability in self.options.capabilities:
            closer = getattr(capability, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> "ModelAgent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        capabilities = [cap.capability_id(c) for c in self.options.capabilities]
        return f"ModelAgent(provider={self.provider!r}, model={self.options.model!r}, capabilities={capabilities})"
