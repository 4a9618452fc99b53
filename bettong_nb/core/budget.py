"""Spending limits: stop before the request that would exceed a token or cost budget.

    agent.run(prompt, token_budget=20_000)                       # one run
    chat = agent.session(cost_budget=0.50)                       # a whole conversation
    agent.map(prompts, token_budget=1_000_000)                   # a whole batch

A budget is checked before every model request against what was spent so far, what the
requests under way hold, and an estimate of the next prompt (4 characters a token, plus
max_tokens when set); the request holds its estimate until its answer is counted. A refused
run stops with ``done=False``, the reason on the result, and a BudgetExceeded event. So the
budget is passed only by what requests under way spend beyond their estimates (their answers'
tokens, unless max_tokens is set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import OptionError
from .usage import ZERO, Usage, cost, money

__all__ = ["Budget", "take", "settle", "estimate_tokens", "active"]


@dataclass
class Budget:
    """A limit and what has been spent under it; shared by every run in its scope."""

    scope: str  # "run", "session" or "batch": said in the reason
    tokens: int | None = None
    cost: float | None = None
    prices: Mapping[str, float] | None = None
    spent: Usage = ZERO
    reserved: int = 0  # the estimates of requests that were let through and are not counted yet

    def __post_init__(self) -> None:
        if self.cost is not None and not self.prices:
            raise OptionError("cost_budget needs prices={'input': ..., 'output': ..., 'cache_hit': ...} "
                            "(per million tokens)")

    def refusal(self, estimate: int, *, spent: Usage | None = None, reserved: int | None = None) -> str | None:
        """Why a request of about ``estimate`` prompt tokens would break this budget, or None;
        what was spent and what requests under way hold count (this budget's own, unless given)."""
        spent = self.spent if spent is None else spent
        reserved = self.reserved if reserved is None else reserved
        used = spent.prompt_tokens + spent.completion_tokens
        if self.tokens is not None and used + reserved + estimate > self.tokens:
            held = f", {reserved} held by requests under way" if reserved else ""
            return (f"the {self.scope} token budget of {self.tokens} would be exceeded "
                    f"({used} used{held}, the next request needs about {estimate})")
        if self.cost is not None:
            spent_cost = cost(spent, **self.prices) or 0.0
            upcoming = cost(Usage(prompt_tokens=estimate), **self.prices) or 0.0
            held = cost(Usage(prompt_tokens=reserved), **self.prices) or 0.0
            if spent_cost + held + upcoming > self.cost:
                currency = self.prices.get("currency")
                under_way = f", {money(held, currency)} held by requests under way" if reserved else ""
                return (f"the {self.scope} cost budget of {money(self.cost, currency)} would be exceeded "
                        f"({money(spent_cost, currency)} spent{under_way}, the next request costs about "
                        f"{money(upcoming, currency)})")
        return None

    async def take(self, estimate: int) -> str | None:
        """Hold ``estimate`` tokens for a request about to be sent (before it waits for a request
        slot, so rows waiting count), or say why not; :meth:`settle` gives them back."""
        why = self.refusal(estimate)
        if why is None:
            self.reserved += estimate
        return why

    def settle(self, usage: Usage | None, estimate: int, billed: float | None = None) -> None:
        """The request that took ``estimate`` is over: count what it spent (None: nothing came).
        ``billed`` (a gateway's reported cost) is not used: this budget counts at its ``prices``,
        which its estimates need anyway."""
        self.reserved -= estimate
        if usage is not None:
            self.spent += usage


async def take(budgets: list[Budget], estimate: int) -> str | None:
    """Hold ``estimate`` tokens in every budget, or the first refusal (then none is held)."""
    taken = []
    for one in budgets:
        if (why := await one.take(estimate)) is not None:
            settle(taken, None, estimate)
            return why
        taken.append(one)
    return None


def settle(budgets: list[Budget], usage: Usage | None, estimate: int, billed: float | None = None) -> None:
    """Count a request's ``usage`` (and what a gateway ``billed`` for it) in every budget it held."""
    for one in budgets:
        one.settle(usage, estimate, billed)


def estimate_tokens(system: str, messages: list, tools: list, max_tokens: int | None) -> int:
    """About how many tokens a request takes: 4 characters a token of its text, an image by its
    pixels (not by the length of its base64), plus ``max_tokens`` for the answer."""
    from . import images

    text = len(system) + len(json.dumps(images.without_bytes(messages), ensure_ascii=False)) + len(json.dumps(tools))
    return text // 4 + images.tokens(messages) + (max_tokens or 0)


def active(token_budget: int | None, cost_budget: float | None, prices: Mapping[str, float] | None, *,
           shared: Sequence[Budget] = ()) -> list[Budget]:
    """The run's own budget (when it has one) and the ``shared`` ones its session and batch hand
    it: concurrent runs of one batch draw on one limit."""
    own = [Budget("run", token_budget, cost_budget, prices)] if token_budget is not None or cost_budget is not None else []
    return own + list(shared)
