"""Agents: the loop that calls a model, runs the tools it asks for, and returns the answer.

    agent = bettong_nb.deepseek(capabilities=[caps.filesystem(root="data")])
    result = agent.run("Summarise report.txt")
    result.output, result.tool_calls, result.usage
    agent.run(["What does this plot show?", fig])      # a prompt may carry images (bettong_nb.images)
    agent.run("Rate report.txt", output_type=Rating).data    # a Rating (see bettong_nb.structured)

``run`` works in a script and where an event loop is already running (a notebook cell);
``await agent.arun(...)`` is the async form.
"""

from __future__ import annotations

import asyncio
import copy
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable
from urllib.parse import urlsplit

from ..safety import secrets
from . import approvals, budget, events, hooks, images, kernel, policy, portable, structured, usage
from . import capability as cap
from ._sync import awaited, run_sync
from ..errors import ServiceError
from .images import Prompt
from .options import PROVIDER_OPTIONS, Options, takes_options
from .provider import CallableProvider, Provider, Request, Response, SystemBlock, checked
from .results import Batch, RunResult, ToolCall
from ..safety.sanitize import clean, clean_text

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Agent", "ModelAgent", "Prompt", "Toolbox", "BASE_SYSTEM_PROMPT", "execute", "prepare", "system_prompt",
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


def _toolbox_inputs(options: Options) -> tuple:
    """Everything a toolbox is built from, read afresh: each capability's instructions, and each
    tool's spec with the fields its schema and registration read. Equal inputs (compared by
    value: a tool edited in place is seen) build an equal toolbox."""
    return (options.system, tuple(
        (capability, cap.capability_instructions(capability), tuple(
            (spec, *(cap.spec_field(spec, name) for name in ("name", "description", "parameters", "handler")),
             cap.spec_field(spec, "concurrent", True))
            for spec in cap.capability_tools(capability)))
        for capability in options.capabilities))


# --- the loop ---------------------------------------------------------------------------------

MAX_REASON = 2_000  # characters of a denial's reason the model reads (a hook's may be anything)

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
    cell: str | None = None  # the notebook cell the run started from
    corrections: int = 0  # answers sent back for not matching the output type
    images: int = -1  # the images the history carries, counted as it grows (see carried())

    def carried(self) -> int:
        """How many images the next request carries: the history is only ever appended to, so
        it is counted once and then by what each turn adds."""
        if self.images < 0:
            self.images = images.count(self.history)
        return self.images

    def append(self, message: dict) -> None:
        self.history.append(message)
        if self.images >= 0:
            self.images += images.count((message,))

    def result(self, output: str | None, done: bool, **kw: Any) -> RunResult:
        messages = [{"role": "system", "content": self.system}, *self.history]
        return RunResult(output, self.steps, self.calls, messages, self.spent, done, self.records,
                         self.redactions, prices=self.options.prices, **kw)

    def structured_answer(self, shape: structured.Shape, response: Response) -> RunResult | None:
        """The run's result for a final answer that must match ``shape``; None when the model was
        told what was wrong and asked again (``output_retries`` times at most)."""
        text = response.text()
        if response.refused():
            return self.result(text, False, stop_reason="refusal", reason="the model refused to answer")
        try:
            value = shape.parse(text)
        except structured.Invalid as invalid:
            if self.corrections >= self.options.output_retries:
                return self.result(text, False, stop_reason="invalid_output",
                                   reason=f"the answer did not match {shape.name}: {invalid}")
            self.corrections += 1
            self.append({"role": "user", "content": shape.correction(invalid)})
            return None
        return self.result(text, True, stop_reason=response.stop_reason, data=value)

    async def approval(self, request: approvals.ApprovalRequest) -> approvals.Verdict:
        if self.stopped is not None:  # Stop denies the rest of the round without asking again
            self.listener(events.ApprovalDecided(request.call_id, request.tool, False, self.stopped, "stop"))
            return approvals.Deny(self.stopped, stop=True)
        if self.options.approve_fn is None:
            return approvals.Allow()
        self.listener(events.ApprovalRequested(request.call_id, request.tool, request.capability, request.args))
        verdict = self.scrubbed(await approvals.decide(self.options.approve_fn, request))
        self.listener(events.ApprovalDecided(request.call_id, request.tool, bool(verdict),
                                             getattr(verdict, "reason", None),
                                             "person" if getattr(verdict, "person", False) else "approve_fn"))
        return verdict

    def scrubbed(self, verdict: approvals.Verdict) -> approvals.Verdict:
        """A denial whose reason (a hook's exception text, a person's words) holds no secret and
        is at most MAX_REASON characters: redacted first, so a cut never leaves a secret's prefix."""
        if isinstance(verdict, approvals.Deny) and verdict.reason:
            reason = secrets.redact(clean_text(verdict.reason), extra=self.secrets)[0]
            if len(reason) > MAX_REASON:
                reason = f"{reason[:MAX_REASON]} [reason cut: {len(reason):,} characters]"
            return replace(verdict, reason=reason)
        return verdict

    async def tool_calls(self, uses: list[dict]) -> list[dict]:
        """One step's tool calls, asked about one at a time in the model's order. An allowed call
        starts at once, beside the calls still running, unless its tool must run alone: then it
        waits for them, and the calls after it wait for it. Results keep the model's order. A sync
        tool runs in a worker thread even alone when anything could go on meanwhile (a listener:
        a live view's clock, the stop button; other tasks on the loop: a batch's runs)."""
        results: list[asyncio.Task | dict] = []
        # Alone and unwatched, the thread hop would buy nothing and cost a tenth of a short run. An
        # observer (tracing) is no watcher here: it needs nothing of the loop while the tool works.
        in_thread = self.options.on_event is not None or len(asyncio.all_tasks()) > 1
        async with asyncio.TaskGroup() as group:  # cancelling the run cancels the running calls
            for block in uses:
                pending = await self.ask(block)
                if pending.allowed and pending.concurrent and len(uses) > 1:
                    results.append(group.create_task(self.finish(pending, in_thread=True)))
                    continue
                if pending.allowed:
                    await asyncio.gather(*(r for r in results if isinstance(r, asyncio.Task)))
                results.append(await self.finish(pending, in_thread=in_thread))
        return [r.result() if isinstance(r, asyncio.Task) else r for r in results]

    async def ask(self, block: dict) -> _Pending:
        """Report the call as started and, when its arguments parse, ask whether it may run."""
        name = block["name"]
        args, error = cap.arguments(block.get("input"))
        entry = self.toolbox.registry.get(name)
        call = ToolCall(name, entry.capability if entry else None, block.get("input") if args is None else args,
                        id=block["id"], step=self.steps, cell=self.cell)
        self.calls.append(call)
        self.listener(events.ToolCallStarted(call))
        if error is not None:
            return _Pending(call, None, approvals.Allow(), error)
        request = approvals.ApprovalRequest(name, args, call.capability, call.id, scope=self.scope)
        return _Pending(call, request, await self.approval(request), concurrent=entry is None or entry.concurrent)

    async def finish(self, pending: _Pending, *, in_thread: bool = False) -> dict:
        """Run the call if it was allowed, and report how it went; its tool_result block for the
        next request (with the images the tool returned, bounded like a prompt's)."""
        call, text, verdict, pictures, redacted_already = pending.call, pending.error, pending.verdict, (), 0
        started = time.perf_counter()  # the tool's own time, not the time a person took to decide
        if pending.allowed:
            try:
                with approvals.approved(pending.request, verdict):
                    output = await cap.run_tool(self.toolbox.registry, call.tool, pending.request.args,
                                                in_thread=in_thread)
                text, call.data, pictures, redacted_already = output.text, output.data, output.images, output.redactions
                call.traceback = output.traceback and secrets.redact(clean_text(output.traceback),
                                                                     extra=self.secrets)[0]
            except approvals.Denied as refused:
                verdict = self.scrubbed(refused.verdict)
        if verdict and pictures:
            try:
                call.images = images.prepared(pictures, max_side=self.options.image_max_side,
                                              max_bytes=self.options.image_max_bytes)
            except (TypeError, ValueError) as exc:  # the tool's bug: the model reads it, the run goes on
                text = f"ERROR: the tool returned an image that cannot be sent: {exc}"
            text = text or "; ".join(f"[image: {image.describe()}]" for image in call.images)
        if not verdict:
            text = approvals.denial_text(call.tool, verdict)
            call.status, call.reason, call.stopped = "denied", verdict.reason, verdict.stop
            if verdict.stop:
                self.stopped = verdict.reason or "stopped by the user"
        call.result, call.redactions = secrets.redact(clean_text(text), extra=self.secrets)
        call.redactions += redacted_already
        if call.status != "denied":
            call.status = "error" if call.result.startswith("ERROR:") else "ok"
        call.duration_s = time.perf_counter() - started
        self.redactions += call.redactions
        self.listener(events.ToolCallFinished(call))
        result = {"type": "tool_result", "tool_use_id": call.id, "content": call.result, "is_error": call.status != "ok"}
        return {**result, "images": [image.block() for image in call.images]} if call.images else result


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


def _unheard(event: events.Event) -> None:
    """The listener of a run nobody listens to."""


async def execute(provider: Provider, options: Options, prompt: Prompt, *,
                  toolbox: Toolbox | Callable[[Options], Toolbox] | None = None,
                  budgets: Sequence[budget.Budget] = (), conversation: Any = None) -> RunResult:
    """Run one prompt to an answer. ``options.messages`` is a prior transcript to continue; its
    system prompt is kept as it is, so the provider's cached prefix survives. The prompt's
    images are converted and bounded here, before any request (an error for one that cannot go).
    ``toolbox``: the one ``options`` make, when the caller kept it from an earlier run (or how
    to get it: called only once the course policy admitted the run, so no server starts first);
    ``budgets``: the session's and batch's, which this run shares with others; ``conversation``:
    what "allow always" lasts for (a Session), else this run alone."""
    # The course policy and the exam lock, before anything is prepared or sent.
    options, ruled = policy.admit(provider, options, conversation=conversation)
    # Text that cannot be encoded (a lone surrogate) is mended as it enters the transcript, here
    # and below for answers and tool results, so no later request of a session fails on it.
    content = clean(images.prompt_content(prompt, max_side=options.image_max_side,
                                          max_bytes=options.image_max_bytes))
    if not isinstance(toolbox, Toolbox):
        toolbox = (toolbox or prepare)(options)
    prior = list(options.messages)
    system = prior[0]["content"] if prior else toolbox.system
    # An observer (tracing) listens beside the run's own listener, to the same events.
    listener = events.observed(options.on_event) or _unheard
    # Beside credential-shaped values, what the provider and the capabilities hold is never shown,
    # nor written to disk later (a saved session, an exported run).
    secret_values = secrets.values_held_by([provider, *options.capabilities])
    secrets.hold(secret_values)
    run = _Run(options, toolbox, system, prior[1:] + [{"role": "user", "content": content}], listener,
               secret_values, conversation)
    run.scope = run.scope if run.scope is not None else run
    run.cell = kernel.current_cell()
    budgets = budget.active(options.token_budget, options.cost_budget, options.prices, shared=[*budgets, *ruled])
    fields = options.request_fields()
    shape = structured.Shape.of(options.output_type) if options.output_type is not None else None
    if shape is not None:
        fields["format"] = shape.schema
    provider_name = getattr(provider, "name", None)
    # Where the requests go: a price table's prices hold only at the provider's own API (pricing).
    host = urlsplit(str(getattr(provider, "base_url", None) or "")).hostname
    with events.listening(listener):
        listener(events.RunStarted(toolbox.system, toolbox.tools, provider_name, options.model, host, options.prices,
                                   run.cell))
        try:
            result = await _steps(run, provider, provider_name, host, budgets, fields, shape)
        except BaseException as error:
            listener(events.RunFinished(error=error))
            raise
        listener(events.RunFinished(result))
        return result


async def _steps(run: _Run, provider: Provider, provider_name: str | None, host: str | None, budgets: list,
                 fields: dict[str, Any], shape: structured.Shape | None) -> RunResult:
    """Ask the model, run the tools it asks for, and again, until it answers or the run must stop."""
    options, toolbox, system, listener = run.options, run.toolbox, run.system, run.listener
    while True:
        if run.steps >= options.max_steps:
            return run.result(None, False, stop_reason="max_steps", reason=f"hit max_steps ({options.max_steps})")
        request = Request(messages=list(run.history), system=[SystemBlock(system, cache=True)],
                          tools=toolbox.tools, **fields)
        estimate = budget.estimate_tokens(system, request.messages, toolbox.tools, request.max_tokens) \
            if budgets else 0
        # held before the request waits for a slot (a batch's), so requests waiting count too
        if (why := await budget.take(budgets, estimate)) is not None:
            listener(events.BudgetExceeded(why))
            return run.result(None, False, stop_reason="budget", reason=why)
        listener(events.ModelRequest(run.steps + 1, request.model, request.messages))
        sent_at, started = time.time(), time.perf_counter()
        response = None
        try:
            response = checked(await (provider.stream(request, listener) if options.stream
                                      else provider.complete(request)), provider_name or "the provider")
        except ServiceError as err:  # whatever path made it, the message holds no secret
            raise err.redact(run.secrets) from None
        finally:
            budget.settle(budgets, None if response is None else response.usage, estimate,
                          None if response is None else response.cost)
        latency = time.perf_counter() - started
        run.steps += 1
        run.spent += response.usage
        record = usage.RequestRecord(1, run.steps, response.model or request.model, latency, response.usage,
                                     provider_name, sent_at, images=run.carried(), host=host, cell=run.cell,
                                     reported_cost=response.cost)
        run.records.append(record)
        # The tool calls of a truncated (half-written) or refused answer are never run, so they
        # are not kept either: a tool call without its result is never sent to a provider.
        response.content = clean(response.content)
        content = response.content if not (response.truncated() or response.refused()) else [
            b for b in response.content if b["type"] != "tool_use"]
        run.append({"role": "assistant", "content": content})
        listener(events.AssistantMessage(run.steps, run.history[-1], response.usage, latency, record,
                                         response.stop_reason))
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            if shape is not None and not response.truncated():
                if (answered := run.structured_answer(shape, response)) is None:
                    continue
                return answered
            done = not response.truncated()
            return run.result(response.text(), done, stop_reason=response.stop_reason,
                              reason=None if done else "the answer hit max_tokens",
                              stop_details=response.stop_details)
        run.append({"role": "user", "content": await run.tool_calls(uses)})
        if fields["tool_choice"] not in (None, "auto", "none"):
            fields["tool_choice"] = "auto"  # a forced call ("required", a name) forces the first step only
        if run.stopped is not None:
            return run.result(None, False, stop_reason="stopped", reason=run.stopped)


# --- agents -----------------------------------------------------------------------------------

@runtime_checkable
class Agent(Protocol):
    """Anything that runs a prompt: agents and sessions both; write your own. A session passes
    ``budgets=`` and ``conversation=`` and a batch ``budgets=`` (see :meth:`ModelAgent.arun`):
    hand them on to the agent you wrap, or ignore them."""

    def run(self, prompt: Prompt, **overrides: Any) -> RunResult: ...

    async def arun(self, prompt: Prompt, **overrides: Any) -> RunResult: ...


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

    @takes_options()
    def __init__(self, provider_factory: Callable[[Options], Provider] | None = None, **options: Any):
        self.options = Options.of(**options)
        if self.options.provider is not None and PROVIDER_OPTIONS & set(options):
            given = ", ".join(sorted(PROVIDER_OPTIONS & set(options)))
            raise TypeError(f"{given} configure the built-in provider; set them on the provider you pass instead")
        self._factory = provider_factory
        self.provider = self._own_provider()
        self._kept: tuple[tuple, Toolbox] | None = None  # the last run's toolbox and its inputs

    def __getstate__(self) -> dict:
        """Pickled (for a Dask worker) as its options and provider factory, never ``api_key`` nor
        the credentials of ``base_url`` (see :mod:`.portable`): the provider is made again where it
        lands and reads them from that environment."""
        return {"options": replace(self.options, api_key=None, base_url=portable.withheld(self.options.base_url)),
                "factory": self._factory}

    def __setstate__(self, state: dict) -> None:
        options = state["options"]
        self.options = replace(options, base_url=portable.filled(options.base_url))
        self._factory = state["factory"]
        self.provider = self._own_provider()
        self._kept = None

    def _own_provider(self) -> Provider:
        if self.options.provider is not None:
            return as_provider(self.options.provider)
        return self._build_provider(self.options)

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

    @takes_options(per_call=True)
    async def arun(self, prompt: Prompt, *, budgets: Sequence[budget.Budget] = (), conversation: Any = None,
                   **overrides: Any) -> RunResult:
        """Run ``prompt``; any option given here holds for this run only. ``budgets`` (a session's,
        a batch's) are shared with the other runs holding them; ``conversation`` is what "allow
        always" lasts for (a Session passes itself)."""
        provider, options = self.resolve(overrides)
        return await awaited(execute(provider, options, prompt, toolbox=self._toolbox, budgets=budgets,
                                     conversation=conversation))

    def _toolbox(self, options: Options) -> Toolbox:
        """The toolbox of the last run when its inputs are the same (compared by value), else a
        new one: rebuilding every schema per run was most of the loop's own cost, and the same
        tools list keeps its encoded JSON in the provider between runs."""
        inputs = _toolbox_inputs(options)
        kept = self._kept
        if kept is not None and kept[0] == inputs:
            return kept[1]
        toolbox = prepare(options)
        try:  # the parameters as they are now, so an edit made in place later is seen
            system, capabilities = inputs
            frozen = (system, tuple((capability, instructions, tuple(
                (spec, name, description, copy.deepcopy(parameters), handler, concurrent)
                for spec, name, description, parameters, handler, concurrent in tools))
                for capability, instructions, tools in capabilities))
        except Exception:  # parameters that cannot be copied: build afresh each run
            frozen = None
        self._kept = None if frozen is None else (frozen, toolbox)
        return toolbox

    @takes_options(per_call=True)
    def run(self, prompt: Prompt, *, budgets: Sequence[budget.Budget] = (), conversation: Any = None,
            **overrides: Any) -> RunResult:
        """:meth:`arun` from sync code (a notebook cell too)."""
        return run_sync(self.arun(prompt, budgets=budgets, conversation=conversation, **overrides))

    def session(self, *, token_budget: int | None = None, cost_budget: float | None = None) -> "Session":
        """A conversation on this agent; the budgets, when given, cover all its turns."""
        from .session import Session

        return Session(self, token_budget=token_budget, cost_budget=cost_budget)

    @takes_options(per_call=True)
    async def amap(self, prompts: Iterable[str], *, concurrency: int = 8, progress: bool = True,
                   **overrides: Any) -> "Batch":
        """Run each prompt independently, ``concurrency`` at a time; RunResults in input order.
        ``token_budget``/``cost_budget`` here cover the whole batch. See :mod:`bettong_nb.batch`."""
        return await hooks.call("amap", self, prompts, concurrency=concurrency, progress=progress, **overrides)

    @takes_options(per_call=True)
    def map(self, prompts: Iterable[str], *, concurrency: int = 8, progress: bool = True, **overrides: Any) -> "Batch":
        return hooks.call("map_prompts", self, prompts, concurrency=concurrency, progress=progress, **overrides)

    @takes_options(per_call=True)
    def map_frame(self, frame: Any, *, prompt: str, output: str = "output", **options: Any):
        """Fill column ``output`` of a copy of ``frame`` from the template ``prompt`` over each row
        (``"Classify: {text}"``), or with ``output_type=T`` one typed column per field of T plus
        ``error``; the batch's usage frame is ``result.attrs["usage_frame"]``. A Dask frame gives
        a lazy Dask frame, run on its cluster with one rate limit and one budget
        (:mod:`bettong_nb.distributed`)."""
        slot = "dask_map_frame" if type(frame).__module__.split(".")[0] == "dask" else "map_frame"
        return hooks.call(slot, self, frame, prompt=prompt, output=output, **options)

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
        return (f"ModelAgent(provider={self.provider!r}, model={self.options.model!r}, "
                f"capabilities={[cap.capability_label(c) for c in self.options.capabilities]})")
