"""Sessions: a conversation that continues, turn after turn, on a cached prompt prefix.

    chat = agent.session()
    chat.run("Describe Lithuania")
    chat.run("What is its capital?")      # knows what "its" means
    chat.transcript, chat.usage, chat.clear()
    chat.save("chat.json"); bettong_nb.load_session("chat.json", agent)   # resume later
    chat.export("chat.html")                                                # .md .html .ipynb .json

Each turn only appends to the transcript; the system prompt is built once, so every request
starts with the bytes the provider cached for the previous one.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from . import budget, events, hooks, usage
from ._sync import awaited, run_sync
from .images import Prompt
from ..errors import OptionError
from .options import Options, takes_options
from .results import Ledger, RunResult


__all__ = ["Session"]


class _TurnLock:
    """A FIFO lock usable from any event loop (sync runs use a worker loop, notebooks their own)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = collections.deque()

    async def __aenter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._guard:
                if (loop, waiter) in self._waiters:
                    self._waiters.remove((loop, waiter))
                else:
                    self._release_locked()  # it was handed to us as we were cancelled: pass it on
            raise

    async def __aexit__(self, *exc: Any) -> None:
        with self._guard:
            self._release_locked()

    def _release_locked(self) -> None:
        if self._waiters:
            loop, waiter = self._waiters.popleft()
            loop.call_soon_threadsafe(lambda: waiter.done() or waiter.set_result(None))
        else:
            self._held = False


class Session(Ledger):
    """A conversation on any Agent. One turn at a time; a failed or cancelled turn leaves the
    transcript exactly as it was."""

    def __init__(self, agent: Any, *, token_budget: int | None = None, cost_budget: float | None = None):
        self.agent = agent
        self.budget = (budget.Budget("session", token_budget, cost_budget, self.options.prices)
                       if token_budget is not None or cost_budget is not None else None)
        self.transcript: list[dict] = []
        self.usage: usage.Usage = usage.ZERO
        self.requests: list[usage.RequestRecord] = []
        self.tool_calls: list = []
        self.results: list[RunResult] = []
        self.turns = 0
        self._tools: list[dict] | None = None
        self._redacted_on_save = 0  # stretches of a loaded transcript the save redacted: not what was cached
        self._told_tools = False  # the person heard once that new tools cost a full-price prompt
        self._lock = _TurnLock()

    @property
    def provider(self):
        return getattr(self.agent, "provider", None)

    @property
    def options(self) -> Options:
        return getattr(self.agent, "options", None) or Options()

    @property
    def prices(self):
        return self.options.prices

    @property
    def last(self) -> RunResult | None:
        return self.results[-1] if self.results else None

    @property
    def tools(self) -> list[dict] | None:
        """The tools payload this conversation's cached prefix holds (None before its first turn)."""
        return self._tools

    def _guarded(self, listener: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
        """``listener``, and before it a check of each run's start: warn when this turn would
        change what the provider has cached."""
        tell = listener or (lambda event: None)

        def on_event(event: Any) -> None:
            if isinstance(event, events.RunStarted):
                self._check_prefix(event, tell)
            tell(event)

        return on_event

    def _check_prefix(self, start: events.RunStarted, tell: Callable[[Any], Any]) -> None:
        if self._redacted_on_save:
            count, self._redacted_on_save = self._redacted_on_save, 0
            tell(events.CacheWarning(
                "transcript", f"This session was loaded from a file whose save redacted {count} secret-shaped "
                f"stretch{'' if count == 1 else 'es'} of the transcript (secrets never go to disk), so its messages "
                "differ from what the provider cached: this request pays full price for the whole prompt once."))
        if self.transcript:
            if start.system != self.transcript[0]["content"]:
                tell(events.CacheWarning(
                    "system", "The system prompt this turn would build differs from the session's (capabilities' "
                    "instructions or `system` changed). The session keeps its first system prompt so the cached "
                    "prefix survives; call clear() to start over with the new one."))
            if self._tools is not None and start.tools != self._tools and self._costs_money() and not self._told_tools:
                # New tools (a --data cell's) are the common case: said once a conversation, in plain words,
                # and only where a request has a price.
                self._told_tools = True
                before = [t["name"] for t in self._tools]
                after = [t["name"] for t in start.tools]
                if after[:len(before)] == before:
                    what = f"New tools in this conversation ({', '.join(after[len(before):])})"
                else:
                    what = f"The tools changed from [{', '.join(before)}] to [{', '.join(after)}]"
                tell(events.CacheWarning("tools", f"{what}: this request pays full price for its whole prompt once, "
                                                  "instead of the provider's cheaper cached rate."))
        self._tools = start.tools

    def _costs_money(self) -> bool:
        """Whether a request of this conversation has a price: not on a model that costs nothing
        (the offline demo, a script, a replay, a local server) unless prices were given."""
        prices = self.options.prices or {}
        given = any(isinstance(value, (int, float)) and value > 0 for value in prices.values())
        return given or not getattr(getattr(self.agent, "provider", None), "free", False)

    @takes_options(per_call=True, leave_out=("messages",))
    async def arun(self, prompt: Prompt, *, budgets: Sequence[budget.Budget] = (), **overrides: Any) -> RunResult:
        """The next turn; any option given here holds for this turn only. ``budgets`` (a batch's)
        are shared with the other runs holding them, beside the session's own."""
        if "messages" in overrides:
            raise OptionError("a session's turns continue its own transcript: messages= is for a single run")
        shared = (*budgets, self.budget) if self.budget is not None else tuple(budgets)
        return await awaited(self._turn(prompt, shared, overrides))  # waiting for the lock is part of the run

    async def _turn(self, prompt: Prompt, budgets: tuple[budget.Budget, ...], overrides: dict[str, Any]) -> RunResult:
        async with self._lock:
            overrides["on_event"] = self._guarded(overrides.get("on_event") or self.options.on_event)
            result = await self.agent.arun(prompt, **overrides, messages=list(self.transcript), budgets=budgets,
                                           conversation=self)
            turn = self.turns + 1
            result.requests = [replace(r, turn=turn) for r in result.requests]
            for call in result.tool_calls:
                call.turn = turn
            self.transcript = list(result.messages)
            self.usage += result.usage
            self.requests.extend(result.requests)
            self.tool_calls.extend(result.tool_calls)
            self.results.append(result)
            self.turns = turn
            return result

    @takes_options(per_call=True, leave_out=("messages",))
    def run(self, prompt: Prompt, *, budgets: Sequence[budget.Budget] = (), **overrides: Any) -> RunResult:
        """:meth:`arun` from sync code (a notebook cell too)."""
        return run_sync(self.arun(prompt, budgets=budgets, **overrides))

    async def wait(self) -> RunResult | None:
        """Wait for a turn running in the background (older kernels), then return the last result."""
        async with self._lock:
            return self.last

    def clear(self) -> "Session":
        """Forget the conversation; keep the agent (and what its budget has spent).
        The next turn builds a fresh system prompt."""
        self.transcript, self.usage, self.requests, self.tool_calls, self.results = [], usage.ZERO, [], [], []
        self.turns, self._tools, self._redacted_on_save = 0, None, 0
        return self

    def save(self, path: str | Path) -> Path:
        """Write the whole conversation to ``path`` as JSON, secrets redacted; resume it with
        ``bettong_nb.load_session(path, agent)``. See :mod:`bettong_nb.records.saving`."""
        return hooks.call("save", self, path)

    def export(self, path: str | Path) -> Path:
        """Write the conversation to read or share, in the format the extension names: ``.md``,
        ``.html``, ``.ipynb`` or ``.json`` (as :meth:`save`). See :mod:`bettong_nb.export`."""
        return hooks.call("export", self, path)

    def restore(self, saved: Any) -> "Session":
        """Continue a saved conversation (a ``records.saving.Saved``; ``bettong_nb.load_session``
        calls this): its transcript exactly as saved, its turns and usage, and the tools its cached
        prefix holds. When the save redacted the transcript, the next turn warns (a CacheWarning)
        that it misses the cache."""
        self.transcript, self.results, self.turns = list(saved.transcript), saved.results, saved.turns
        self.usage, self.requests, self.tool_calls = saved.usage, list(saved.requests), list(saved.tool_calls)
        self._tools, self._redacted_on_save = saved.tools, saved.transcript_redactions
        return self

    def close(self) -> None:
        """Close the agent underneath (its capabilities' servers and connections)."""
        closer = getattr(self.agent, "close", None)
        if callable(closer):
            closer()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.turns} turns, {len(self.transcript)} messages, {usage.summary(self.usage)})"
