"""Spending limits: stop before the request that would exceed a token or cost budget.

    agent.run(prompt, token_budget=20_000)                       # one run
    chat = agent.session(cost_budget=0.50)                       # a whole conversation
    agent.map(prompts, token_budget=1_000_000)                   # a whole batch

A budget is checked before every model request against what was spent so far plus an
estimate of the next prompt (4 characters a token, plus max_tokens when set); the run stops
with ``done=False``, the reason on the result, and a BudgetExceeded event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import OptionError
from .usage import ZERO, Usage, cost, money

__all__ = ["Budget", "estimate_tokens", "active"]


@dataclass
class Budget:
    """A limit and what has been spent under it; shared by every run in its scope."""

    scope: str  # "run", "session" or "batch": said in the reason
    tokens: int | None = None
    cost: float | None = None
    prices: Mapping[str, float] | None = None
    spent: Usage = ZERO

    def __post_init__(self) -> None:
        if self.cost is not None and not self.prices:
            raise OptionError("cost_budget needs prices={'input': ..., 'output': ..., 'cache_hit': ...} "
                            "(per million tokens)")

    def refusal(self, estimate: int) -> str | None:
        """Why a request of about ``estimate`` prompt tokens would break this budget, or None."""
        used = self.spent.prompt_tokens + self.spent.completion_tokens
        if self.tokens is not None and used + estimate > self.tokens:
            return (f"the {self.scope} token budget of {self.tokens} would be exceeded "
                    f"({used} used, the next request needs about {estimate})")
        if self.cost is not None:
            spent = cost(self.spent, **self.prices) or 0.0
            upcoming = cost(Usage(prompt_tokens=estimate), **self.prices) or 0.0
            if spent + upcoming > self.cost:
                currency = self.prices.get("currency")
                return (f"the {self.scope} cost budget of {money(self.cost, currency)} would be exceeded "
                        f"({money(spent, currency)} spent, the next request costs about "
                        f"{money(upcoming, currency)})")
        return None

    def charge(self, usage: Usage) -> None:
        self.spent += usage


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
