"""Batches: one agent over many prompts or DataFrame rows, concurrently, in input order.

    results = agent.map(["Classify: cat", "Classify: dog"], concurrency=8)
    results.usage, results.failed, results.cancelled, results.usage_frame()
    labelled = agent.map_frame(df, prompt="Classify: {text}", output="label")
    labelled.attrs["usage_frame"]          # the batch's usage, one row per model request
    typed = agent.map_frame(df, prompt="Review: {text}", output_type=Review)   # a column per field

Each item is an independent run (fresh transcript). A failed item is a RunResult with
``done=False`` and ``.error`` set, in its place; the others go on. A 429 anywhere pauses the
whole batch (the provider's transport shares its backoff). Cancelling (Ctrl-C, task cancel)
stops launching items, cancels the running ones and returns what finished; the others are in
``results.cancelled`` (``reason="cancelled"``).
"""

from __future__ import annotations

import asyncio
import math
import string
import sys
import time
from typing import Any, Iterable, Mapping, Sequence

from ..core import budget, events, images, usage
from ..core._sync import awaited, run_sync
from ..core.results import Batch, RunResult, was_cancelled
from ..core.usage import duration_text
from ..core.structured import Shape

__all__ = ["Batch", "amap", "amap_frame", "map_frame", "map_prompts", "Progress", "install_progress", "tally",
           "check_columns", "PromptTemplate", "answer_column", "fill_answers"]


def tally(done: int, failed: int, cancelled: int) -> str:
    """A batch's counts as the bar and the Batch's own line both say them:
    ``7 done · 0 failed · 3 cancelled`` (no cancelled part while there are none)."""
    return " · ".join([f"{done} done", f"{failed} failed", *([f"{cancelled} cancelled"] if cancelled else [])])


class Progress:
    """One progress line as a text bar on stderr, while it runs
    ``16/50 · 16 done · 0 failed · 1446 tokens · cost $0.0005 · 12.3 s · 1.3/s · about 26 s left``
    and at the end (stopped here: what ran, out of all, and what was cancelled)
    ``16/50 · 16 done · 0 failed · 34 cancelled · 1446 tokens · cost $0.0005 · 12.3 s · 1.3/s``.
    ``%load_ext bettong_nb`` installs a widget bar for notebooks (:func:`install_progress`)."""

    def __init__(self, total: int, *, prices: Mapping[str, float] | None, enabled: bool = True):
        self.total, self.prices, self.enabled = total, prices, enabled
        self.done = self.failed = self.cancelled = 0
        self.spent = usage.ZERO
        self.cost = 0.0  # each finished run's requests priced as its usage line prices them; NaN: unknown
        self.started = time.monotonic()
        self._last = 0.0

    @property
    def finished(self) -> int:
        return self.done + self.failed + self.cancelled

    def text(self, *, final: bool = False) -> str:
        ran = self.done + self.failed  # a cancelled item never ran: it is not progress
        parts = [f"{ran}/{self.total}", tally(self.done, self.failed, self.cancelled)]
        parts.append(f"{self.spent.prompt_tokens + self.spent.completion_tokens} tokens")
        if self.finished and not math.isnan(self.cost):
            parts.append(f"cost {usage.money(self.cost, (self.prices or {}).get('currency'))}")
        elapsed = time.monotonic() - self.started
        parts.append(duration_text(elapsed))
        if ran:
            rate = ran / elapsed
            parts.append(f"{rate:.3g}/s")
            if not final and self.finished < self.total:
                parts.append(f"about {duration_text((self.total - self.finished) / rate)} left")
        return " · ".join(parts)

    def update(self, result: RunResult | None, *, final: bool = False) -> None:
        if result is not None:
            self.spent += result.usage
            self.cost += result.cost(self.prices)
            if result.error is None:
                self.done += 1
            elif was_cancelled(result):
                self.cancelled += 1
            else:
                self.failed += 1
        if self.enabled:
            self.show(final)

    def show(self, final: bool) -> None:
        now = time.monotonic()
        if final or now - self._last > 0.1:
            self._last = now
            width = 30
            filled = width * self.finished // max(self.total, 1)
            print(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.text(final=final)}", end="\n" if final else "",
                  file=sys.stderr, flush=True)


_progress: list[type[Progress]] = [Progress]


def install_progress(kind: type[Progress] | None) -> type[Progress]:
    """Use ``kind`` (a Progress subclass; None: the text bar) for batch progress; returns the
    previous one. It is made in the caller's thread: a notebook shows a widget only when it is
    displayed from the thread running the cell."""
    previous = _progress[0]
    _progress[0] = kind or Progress
    return previous


def _failed(error: BaseException, prompt: Any) -> RunResult:
    reason = "cancelled" if isinstance(error, asyncio.CancelledError) else f"{type(error).__name__}: {error}"
    try:  # the transcript stays JSON: a prompt of parts as its blocks, or as text when it cannot be
        content = images.prompt_content(prompt)
    except (TypeError, ValueError):
        content = str(prompt)
    return RunResult(None, 0, [], [{"role": "user", "content": content}], usage.ZERO, False,
                     stop_reason="error", reason=reason, error=error)


def _prices(agent: Any, overrides: Mapping[str, Any]) -> Mapping[str, float] | None:
    return overrides.get("prices") or getattr(getattr(agent, "options", None), "prices", None)


def _bar(agent: Any, total: int, progress: bool | Progress, overrides: Mapping[str, Any]) -> Progress:
    if isinstance(progress, Progress):
        return progress
    return _progress[0](total, prices=_prices(agent, overrides), enabled=progress)


def map_prompts(agent: Any, prompts: Iterable[str], *, progress: bool = True, **options: Any) -> Batch:
    """:func:`amap` from sync code; the progress display is made here, in the caller's thread."""
    prompts = list(prompts)
    bar = _bar(agent, len(prompts), progress, options)
    return run_sync(amap(agent, prompts, progress=bar, **options))


async def amap(agent: Any, prompts: Iterable[str], *, concurrency: int = 8, progress: bool | Progress = True,
               token_budget: int | None = None, cost_budget: float | None = None,
               budgets: Sequence[budget.Budget] = (), **overrides: Any) -> Batch:
    """Run every prompt as its own run, at most ``concurrency`` at a time; results in input order.
    ``token_budget``/``cost_budget`` cover the whole batch, beside ``budgets`` shared from outside
    it (a Dask batch's, across its partitions)."""
    prompts = list(prompts)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    return await awaited(_amap(agent, prompts, concurrency, progress, token_budget, cost_budget, tuple(budgets),
                               overrides))


async def _amap(agent: Any, prompts: list, concurrency: int, progress: bool | Progress, token_budget: int | None,
                cost_budget: float | None, budgets: tuple[budget.Budget, ...], overrides: dict[str, Any]) -> Batch:
    prices = _prices(agent, overrides)
    if token_budget is not None or cost_budget is not None:
        budgets += (budget.Budget("batch", token_budget, cost_budget, prices),)
    results: Batch = Batch([None] * len(prompts))
    results.prices = prices
    bar = _bar(agent, len(prompts), progress, overrides)
    queue = iter(enumerate(prompts))

    async def worker() -> None:
        for index, prompt in queue:  # one shared iterator: a cancelled batch launches nothing more
            try:
                with events.scope("batch.item", index=index):  # the item's run is its child
                    results[index] = await agent.arun(prompt, budgets=budgets, **overrides)
            except asyncio.CancelledError as exc:
                results[index] = _failed(exc, prompt)
                bar.update(results[index])
                raise
            except Exception as exc:  # one bad item must not sink the batch
                results[index] = _failed(exc, prompt)
            bar.update(results[index])

    with events.scope("batch", items=len(prompts)):  # the workers start inside it: their items are its children
        workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(prompts)))]
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if (task := asyncio.current_task()) is not None:
                task.uncancel()  # the batch returns what finished rather than losing it
    for index, prompt in enumerate(prompts):
        if results[index] is None:
            results[index] = _failed(asyncio.CancelledError("not started: the batch was cancelled"), prompt)
            bar.update(results[index])
    bar.update(None, final=True)
    return results


class PromptTemplate(string.Formatter):
    """``{column}`` lookups only: no attribute access, indexing or format specs run on user data."""

    def get_field(self, field_name: str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        if field_name not in kwargs:
            raise KeyError(f"the prompt template names {{{field_name}}}, which is not a column "
                           f"(columns: {', '.join(map(str, kwargs))})")
        return kwargs[field_name], field_name


async def amap_frame(agent: Any, frame: Any, *, prompt: str, output: str = "output", **options: Any):
    output_type = options.get("output_type") or getattr(getattr(agent, "options", None), "output_type", None)
    shape = Shape.of(output_type) if output_type is not None else None  # an unsupported type fails before any request
    check_columns(frame.columns, shape.columns() if shape is not None else [(None, {})], output)
    template = PromptTemplate()
    rows = frame.to_dict("records")
    prompts = [template.vformat(prompt, (), row) for row in rows]
    results = await amap(agent, prompts, **options)
    out = frame.copy()
    if shape is None:
        out[output] = [r.output for r in results]
    else:
        _fill_typed(out, shape, results, output)
    out.attrs["usage_frame"] = results.usage_frame()
    return out


def check_columns(existing: Any, columns: list[tuple[str | None, Any]], output: str) -> None:
    """Refuse, before any request, answer columns (``None``: ``output``) or ``error`` that would
    replace a column of the frame: its data would be lost. Both map_frame paths check here."""
    if "error" in (name for name, _ in columns):
        raise ValueError("map_frame puts each row's error in an `error` column: rename the output type's `error` field")
    filled = [output if name is None else name for name, _ in columns] + ["error"]
    taken = [name for name in filled if name in set(existing)]
    if taken:
        raise ValueError(f"the frame already has column{'s' if len(taken) > 1 else ''} "
                         f"{', '.join(map(repr, taken))}, which map_frame would fill: rename "
                         f"{'them' if len(taken) > 1 else 'it'} first (or pass output= for the answer's column)")


def _fill_typed(out: Any, shape: Shape, results: Batch, output: str) -> None:
    """One typed column per field of each row's ``data`` (a non-object answer in column
    ``output``); a failed row has NA in every field and its reason in ``error``."""
    cells = [shape.row(r.data) if r.done else None for r in results]
    reasons = [None if r.done else (r.reason or r.stop_reason or "not done") for r in results]
    fill_answers(out, shape.columns(), cells, reasons, output)


def fill_answers(out: Any, columns: list[tuple[str | None, Mapping[str, Any]]], cells: list[Mapping | None],
                 reasons: list[str | None], output: str) -> None:
    """The answer's columns (a field named None is column ``output``) and ``error`` on ``out``:
    ``cells`` holds each row's values by field, None for a row that failed (its reason in
    ``reasons``). A value its column cannot hold (an integer beyond Int64) fails its row only,
    saying so. Both map_frame paths fill their frames here."""
    import pandas as pd

    cells, reasons = list(cells), list(reasons)

    def values(name: str | None) -> list:
        return [row.get(name) if row is not None else None for row in cells]

    built, failed = {}, False
    for name, schema in columns:
        try:
            built[name] = answer_column(values(name), schema, out.index)
            continue
        except (TypeError, ValueError, OverflowError):  # find the rows whose value it is
            pass
        for i, row in enumerate(cells):
            try:
                answer_column([row.get(name) if row is not None else None], schema, None)
            except (TypeError, ValueError, OverflowError) as exc:
                cells[i], failed = None, True
                reasons[i] = f"{name or output}: {row.get(name)!r} does not fit the column ({exc})"
    for name, schema in columns:
        # a row failed by a later column empties the earlier ones too: built again then
        column = built[name] if name in built and not failed else answer_column(values(name), schema, out.index)
        out[output if name is None else name] = column
    out["error"] = pd.Series(reasons, index=out.index, dtype="string")


def answer_column(values: list, schema: Mapping[str, Any], index: Any):
    """A column for one field: Int64, Float64, boolean or string (nullable), categorical for a
    set of choices, object for lists, nested records and anything else."""
    import pandas as pd

    if "enum" in schema:
        choices = list(dict.fromkeys(v for v in schema["enum"] if v is not None))
        return pd.Series(pd.Categorical(values, categories=choices), index=index)
    kinds = schema.get("type")
    kinds = [k for k in ([kinds] if isinstance(kinds, str) else kinds or []) if k != "null"]
    dtype = {"integer": "Int64", "number": "Float64", "boolean": "boolean", "string": "string"}.get(
        kinds[0] if len(kinds) == 1 else "", object)
    return pd.Series(values, index=index, dtype=dtype)


def map_frame(agent: Any, frame: Any, *, prompt: str, output: str = "output", progress: bool = True,
              **options: Any):
    """Fill column ``output`` with the agent's answer for each row of ``frame`` (a new DataFrame).

    ``prompt`` is a template over the columns, ``"Classify: {text}"``. With ``output_type`` (see
    :mod:`bettong_nb.structured`) each field of the answer gets its own typed column (Int64,
    Float64, boolean, string, categorical for an Enum or Literal, object for lists), a category
    or other non-object answer (and an object without named fields, ``dict[str, int]``) goes in
    ``output``, and a row that failed, or whose value its column cannot hold, has NA in every
    field and its reason in ``error``. A column of ``frame`` that the answer or ``error`` would
    replace is refused before any request. The batch's usage frame is ``result.attrs["usage_frame"]``.
    (A Dask frame goes to :func:`bettong_nb.distributed.map_frame` instead: ``agent.map_frame``
    picks.)
    """
    bar = _bar(agent, len(frame), progress, options)
    return run_sync(amap_frame(agent, frame, prompt=prompt, output=output, progress=bar, **options))
