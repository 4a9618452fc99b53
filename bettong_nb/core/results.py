"""What runs produce: one record per tool call, the result of a run, and the accounting that
results, sessions and batches share.

    result.output, result.data, result.tool_calls, result.usage, result.cost()
    result.usage_frame(), result.tool_frame()      # pandas, imported when asked for
    result.frames()                                # DataFrames tools handed back (query_data)
    result.export("run.html")                      # .md .html .ipynb .json (see bettong_nb.export)
    result.code_blocks("python")                   # the answer's code, fenced blocks in order
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import hooks, usage

__all__ = ["ToolCall", "RunResult", "Batch", "Ledger", "STOPPED", "was_cancelled"]

# How a stop reads for a person, wherever it is shown: the reason the model read is an
# instruction to it ("do not call more tools..."), not news to the person who pressed Stop.
STOPPED = "stopped by you"


@dataclass
class ToolCall:
    """One tool call the model made, what it returned, and how it went. The same record is
    carried by the events while the call runs, shown by the displays and listed in frames.

    ``status`` is ``running``/``awaiting approval`` while it goes, then ``ok``, ``error`` or
    ``denied``; ``data`` is what the tool handed the person beside its text (a DataFrame);
    ``images`` are the :class:`bettong_nb.Image` it sent the model, as sent (bounded);
    ``traceback`` is the traceback of a tool that raised (redacted, for the person: the model
    reads only ``ERROR: Type: message``); ``cell`` is the notebook cell the run started from."""

    tool: str
    capability: str | None
    args: Any
    result: str | None = None
    id: str = ""
    status: str = "running"
    reason: str | None = None  # why it was denied, as the model read it
    duration_s: float | None = None
    redactions: int = 0
    step: int = 0
    turn: int = 1
    data: Any = field(default=None, repr=False)
    images: list = field(default_factory=list, repr=False)
    traceback: str | None = field(default=None, repr=False)
    stopped: bool = False  # denied because a person stopped the run
    cell: str | None = None

    def why(self) -> str | None:
        """Why the call was denied, in a person's words (None when it was not denied)."""
        if self.status != "denied":
            return None
        return STOPPED if self.stopped else self.reason


class Ledger:
    """Cost and frames for anything that keeps ``requests``, ``tool_calls`` and ``prices``."""

    requests: list
    tool_calls: list
    usage: usage.Usage
    prices: Mapping[str, Any] | None

    def cost(self, prices: Mapping[str, Any] | None = None) -> float:
        """What the requests cost, each priced on its own (``prices``, else the price table; see
        :mod:`bettong_nb.pricing`): NaN when a request's price is unknown, never 0."""
        from .pricing import (
            total,  # dates and the price table load when a cost is asked for
        )

        return total(self.requests, prices or self.prices)

    def usage_line(self, prices: Mapping[str, Any] | None = None) -> str:
        """The usage summary and, when it is known, the cost with its currency ("· cost $0.000093")."""
        prices = prices or self.prices
        return usage.line(self.usage, prices, spent=self.cost(prices))

    def usage_frame(self, prices: Mapping[str, Any] | None = None, *, full: bool = False):
        """One row per model request: tokens, cache hits, the cost and where its price came from;
        ``full=True`` adds cache misses, reasoning tokens, images, latency and the cost's parts."""
        from .frames import usage_frame

        return usage_frame(self.requests, prices or self.prices, full=full)

    def tool_frame(self):
        """One row per tool call: tool, capability, arguments, status, duration, sizes."""
        from .frames import tool_frame

        return tool_frame(self.tool_calls)

    def frames(self) -> list:
        """The DataFrames tools handed back (``query_data`` results), oldest first."""
        return [call.data for call in self.tool_calls if call.data is not None]


@dataclass
class RunResult(Ledger):
    """What a run produced. ``done`` is False when it stopped early (max_steps, budget, error, an
    answer that never matched ``output_type``). ``output`` is the answer's text; ``data`` the
    value it was validated into, an instance of the run's ``output_type`` (None without one)."""

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
    prices: Mapping[str, Any] | None = None
    data: Any = None
    stop_details: Any = None  # what the provider said about why it stopped (a refusal's category)

    def refused(self) -> bool:
        """The model declined to answer (``stop_reason == "refusal"``); ``output`` is then empty."""
        return self.stop_reason == "refusal"

    def why(self) -> str:
        """Why the run has no answer, in a person's words ("" when it has one)."""
        if self.refused():
            return "the model refused to answer" + (f" — {_details(self.stop_details)}" if self.stop_details else "")
        if self.stop_reason == "stopped":
            return STOPPED
        if self.done:
            return ""
        return self.reason or self.stop_reason or "not done"

    def answer_text(self) -> str:
        """The answer, or one line saying why there is none."""
        if self.refused():
            return f"({self.why()})"
        if self.output is not None:
            return self.output
        return f"(no final answer: {self.why()})"

    def code_blocks(self, language: str | None = None) -> list[str]:
        """The fenced code blocks of the answer, in order. With ``language`` ("python"), only the
        blocks labelled with it (or an alias: py, python3, ipython) and the unlabelled ones."""
        return code_blocks(self.output or "", language)

    def export(self, path: str | Path) -> Path:
        """Write this run to read or share, in the format the extension names: ``.md``, ``.html``,
        ``.ipynb`` or ``.json`` (a saved session of this run). See :mod:`bettong_nb.export`."""
        return hooks.call("export", self, path)

    def __str__(self) -> str:  # what print() puts on a terminal: no control sequence of the model's
        from ..safety.sanitize import terminal_text

        return terminal_text(f"{self.answer_text()}\n  {self.usage_line()}")

    def __repr__(self) -> str:
        answer = self.output if self.output is None or len(self.output) <= 60 else self.output[:60] + "…"
        return (f"RunResult(output={answer!r}, done={self.done}, steps={self.steps}, "
                f"tool_calls={len(self.tool_calls)}, usage='{usage.summary(self.usage)}')")


def _details(details: Any) -> str:
    if isinstance(details, Mapping):
        return "; ".join(f"{key}: {value}" for key, value in details.items() if key != "type" and value)
    return str(details)


_ALIASES = {"python": {"python", "py", "python3", "ipython", "ipython3", "pycon"}}


def code_blocks(text: str, language: str | None = None) -> list[str]:
    """The fenced (``` or ~~~) code blocks of Markdown ``text``, in order (see
    :meth:`RunResult.code_blocks`), as the Markdown parser reads them (the one the displays
    use): a fence in a list item or a block quote gives its code without the item's
    indentation or the ``>``, a longer fence holds shorter ones, a fence left open runs to
    the end of its container. Indented code blocks are not taken: prose indents too."""
    from ..safety.sanitize import markdown_tree

    wanted = None if language is None else _ALIASES.get(language.lower(), {language.lower()}) | {""}
    blocks: list[str] = []
    for token in _walk(markdown_tree(text)):
        if token["type"] == "block_code" and token.get("style") == "fenced":
            info = (token.get("attrs") or {}).get("info") or ""
            label = info.split(maxsplit=1)[0].lower() if info.strip() else ""
            if wanted is None or label in wanted:
                blocks.append(token["raw"].removesuffix("\n"))
    return blocks


def _walk(tokens: list[dict]):
    for token in tokens:
        yield token
        yield from _walk(token.get("children") or [])


class Batch(list, Ledger):
    """The results of a batch, in input order, plus its totals."""

    prices: Mapping[str, float] | None = None

    @property
    def usage(self) -> usage.Usage:
        return sum((r.usage for r in self), usage.ZERO)

    @property
    def requests(self) -> list:
        return [record for r in self for record in r.requests]

    @property
    def tool_calls(self) -> list:
        return [call for r in self for call in r.tool_calls]

    @property
    def failed(self) -> list[RunResult]:
        """The items that raised (cancelled ones are in :attr:`cancelled`)."""
        return [r for r in self if r.error is not None and not was_cancelled(r)]

    @property
    def cancelled(self) -> list[RunResult]:
        """The items a cancel (Ctrl-C, the stop button) stopped or never started."""
        return [r for r in self if was_cancelled(r)]

    def usage_frame(self, prices: Mapping[str, float] | None = None, *, full: bool = False):
        """One row per model request, with an ``item`` column (the input's position)."""
        frame = super().usage_frame(prices, full=full)
        frame.insert(0, "item", [i for i, r in enumerate(self) for _ in r.requests])
        return frame

    def tool_frame(self):
        frame = super().tool_frame()
        frame.insert(0, "item", [i for i, r in enumerate(self) for _ in r.tool_calls])
        return frame


def was_cancelled(result: RunResult) -> bool:
    """A batch item that a cancel (Ctrl-C, the stop button) stopped or never started."""
    return isinstance(result.error, asyncio.CancelledError)
