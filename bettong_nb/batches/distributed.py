"""Batches on a Dask cluster: ``agent.map_frame`` over a ``dask.dataframe.DataFrame``.

    from dask.distributed import Client, LocalCluster
    client = Client(LocalCluster(env={"DEEPSEEK_API_KEY": key}))   # the workers' key, never the graph's
    labelled = agent.map_frame(ddf, prompt="Classify: {text}", output="label",
                               max_concurrency=40, token_budget=2_000_000, resume="labels-done/")
    labelled.to_parquet("labelled/")            # lazy until computed: .compute(), .persist(), to_parquet
    bettong_nb.batch_usage(labelled)            # one row per model request, with worker and partition

Each partition is an ordinary batch on its worker (:func:`bettong_nb.batch.amap`, ``concurrency``
rows at a time), and the batch's shared state lives on the scheduler, in dask.distributed's own
primitives:

- a ``Semaphore`` of ``max_concurrency`` leases: every model request holds one while it goes, so
  the bound is cluster-wide (a lease of a worker that died is freed after the scheduler's
  ``distributed.scheduler.locks.lease-timeout``);
- a ``Variable`` holding what the batch spent, what requests under way hold of its budget and
  until when a 429 asked everyone to wait, updated under a ``Lock``. Each worker process syncs
  with it every ``SYNC_S`` seconds and at once after a 429, so a 429 on any worker pauses all of
  them (Retry-After honoured). With ``token_budget``/``cost_budget``, every request first holds
  its estimate there (one round trip under the lock, before it waits for a slot), so the budget
  covers the whole batch and is passed only by what requests under way spend beyond their
  estimates (their answers, unless max_tokens is set).

The result has the answer column and ``error``: NA and the reason for each row that has no
answer (its budget was spent, it failed). With ``resume=`` a directory every worker can reach,
each answered row is written to ``part-<n>.jsonl`` as it finishes; a partition run again (Dask
retries one whose worker died; you compute again) skips those rows, so none is billed twice.

With tracing on (:mod:`bettong_nb.records.tracing`), each partition is a span on its worker that
continues the batch's trace: the W3C trace context travels in the task, and the worker exports
its spans with the tracer provider configured there (``client.register_plugin`` or ``client.run``).

The agent travels to the workers pickled as its settings, never its key (see
:mod:`bettong_nb.portable`): the workers read the key from their own environment. dask is
imported only here, and only when a Dask frame is given.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import threading
import time
import uuid
from typing import Any, AsyncIterator, Mapping

from ..core import budget, events, policy, portable
from ..http import client as http
from ..core._sync import run_sync
from .local import PromptTemplate, amap, check_columns, fill_answers
from ..core.usage import ZERO, RequestRecord, Usage

__all__ = ["map_frame", "batch_usage", "SYNC_S", "BATCH_ATTR"]

SYNC_S = 0.025  # how often a worker process syncs spend and pauses with the scheduler
RETURN_EVERY = 8  # a worker hands a finished request's slot on locally, but every 8th goes back
LINGER_S = 0.01  # a slot nobody here waits for is kept this long for the next request, then returned
BATCH_ATTR = "bettong_batch"  # the frame's attrs key naming its batch (kept through compute)
_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))
_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord) if f.name != "usage")


# --- on the client --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Plan:
    """What every partition task carries: the batch's names and limits, the agent pickled."""

    batch: str
    partitions: int
    agent: bytes
    prompt: str
    output: str
    concurrency: int
    overrides: Mapping[str, Any]
    service: str | None  # the transport whose requests the cluster bound and pauses cover
    slots: int | None
    token_budget: int | None
    cost_budget: float | None
    prices: Mapping[str, float] | None
    resume: str | None
    output_type: Any = None  # the answer's type: one typed column per field (bettong_nb.structured)
    trace: Mapping[str, str] | None = None  # the batch's trace context (W3C), continued on the workers

    def __dask_tokenize__(self) -> str:
        return self.batch


def _client() -> Any:
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        raise RuntimeError("map_frame on a Dask frame runs on dask.distributed: start a Client first "
                           "(Client(LocalCluster(...)) or your cluster's)") from None


def map_frame(agent: Any, frame: Any, *, prompt: str, output: str = "output", progress: bool = True,
              concurrency: int | None = None, max_concurrency: int | None = None, token_budget: int | None = None,
              cost_budget: float | None = None, resume: str | os.PathLike | None = None, **overrides: Any):
    """The lazy Dask frame of ``frame`` with column ``output`` (the answers) and ``error``.

    ``concurrency`` rows run at a time in each partition (default ``max_concurrency``, else 8);
    ``max_concurrency`` bounds model requests across the cluster; the budgets cover the batch.
    ``progress`` is dask's: ``distributed.progress(result.persist())`` shows it in a notebook.
    """
    import cloudpickle
    from distributed import Semaphore, Variable

    client = _client()
    PromptTemplate().vformat(prompt, (), {column: "" for column in frame.columns})  # a missing column fails here
    for name, value in (("concurrency", concurrency), ("max_concurrency", max_concurrency)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    provider, options = agent.resolve(overrides)  # unknown options fail here, before any task runs
    # The course policy, here on the driver (each worker's runs check it again with the policy
    # of the worker's own environment; the kernel budget there is each worker's).
    policy.admit(provider, options)
    if overrides.get("api_key") is not None:
        where = getattr(provider, "_key_env", None) or f"{getattr(provider, 'name', 'provider').upper()}_API_KEY"
        raise ValueError(f"api_key= never travels to Dask workers (it would sit in the task graph in clear): "
                         f"give the workers the key in their environment, e.g. "
                         f"Client(LocalCluster(env={{{where!r}: key}}))")
    overrides = portable.withheld(overrides)  # a base_url's credentials are read on the workers too
    output_type = getattr(options, "output_type", None)
    check_columns(frame.columns, _columns(output_type), output)  # an unsupported type fails here too
    if token_budget is not None or cost_budget is not None:
        budget.Budget("batch", token_budget, cost_budget, options.prices)  # cost without prices fails here
    try:
        pickled = cloudpickle.dumps(agent)
    except Exception as exc:
        raise TypeError(f"this agent cannot travel to Dask workers: {exc}") from exc

    batch = f"bettong-batch-{uuid.uuid4().hex}"
    Variable(f"{batch}-state", client).set({"spent": [0] * len(_USAGE_FIELDS), "reserved": 0, "paused_until": 0.0})
    if max_concurrency is not None:
        Semaphore(max_leases=max_concurrency, name=f"{batch}-slots").register()
    plan = _Plan(batch=batch, partitions=frame.npartitions, agent=pickled, prompt=prompt, output=output,
                 concurrency=concurrency or max_concurrency or 8, overrides=dict(overrides),
                 service=getattr(getattr(provider, "transport", None), "service", None), slots=max_concurrency,
                 token_budget=token_budget, cost_budget=cost_budget, prices=options.prices,
                 resume=None if resume is None else os.path.abspath(os.fspath(resume)), output_type=output_type)
    # The batch's span marks where it was built; each partition's span continues its trace on the
    # worker that runs it (the frame is lazy: the work happens at compute, in other processes).
    with events.scope("batch", partitions=frame.npartitions, dask=True):
        plan = dataclasses.replace(plan, trace=events.carrier())
    if plan.resume is not None:
        os.makedirs(plan.resume, exist_ok=True)
    meta = _filled(frame._meta, [], plan)
    return frame.map_partitions(_run_partition, plan, meta=meta)


def _shape(output_type: Any) -> Any:
    from ..core.structured import Shape

    return Shape.of(output_type)


def _columns(output_type: Any) -> list[tuple[str | None, dict]]:
    """The answer's columns as (field name, its JSON schema); None names column ``output``."""
    return [(None, {"type": "string"})] if output_type is None else _shape(output_type).columns()


def _filled(part: Any, rows: list[dict], plan: _Plan):
    """``part`` with the answer's column(s) and ``error`` from the rows' records, in order: a
    text answer as a string column, a typed one a column per field (batch's own dtypes)."""
    out = part.copy()
    # a record keys the single answer column "" (JSON has no None key)
    cells = [None if row["cells"] is None else {name or None: value for name, value in row["cells"].items()}
             for row in rows]
    fill_answers(out, _columns(plan.output_type), cells, [row["error"] for row in rows], plan.output)
    out.attrs[BATCH_ATTR] = {"id": plan.batch, "partitions": plan.partitions}
    return out


def batch_usage(frame: Any, prices: Mapping[str, float] | None = None):
    """The usage frame of a batch: one row per model request, with ``partition``, ``item`` (the
    row's position in its partition), ``worker`` and ``resumed`` (answered by an earlier run and
    read from ``resume=``) for a Dask batch, after it was computed. A frame plain ``map_frame``
    returned gives its ``attrs["usage_frame"]``."""
    attrs = getattr(frame, "attrs", None) or getattr(getattr(frame, "_meta", None), "attrs", None) or {}
    if "usage_frame" in attrs:
        return attrs["usage_frame"]
    if BATCH_ATTR not in attrs:
        raise TypeError("batch_usage takes the frame map_frame returned (or one computed from it)")
    from distributed import Variable

    from ..core.frames import usage_frame

    client, info = _client(), attrs[BATCH_ATTR]
    records: list[dict] = []
    computed = 0
    for number in range(info["partitions"]):
        try:
            records += Variable(f"{info['id']}-usage-{number}", client).get(timeout=0)
            computed += 1
        except TimeoutError:
            continue  # this partition was not computed (yet)
    if not computed:
        raise ValueError("this batch has not been computed yet: compute (or persist) the frame first")
    requests = [RequestRecord(**{name: r[name] for name in _RECORD_FIELDS},
                              usage=Usage(*(r[name] for name in _USAGE_FIELDS))) for r in records]
    table = usage_frame(requests, prices)
    for position, name in enumerate(("partition", "item", "worker", "resumed")):
        table.insert(position, name, [r[name] for r in records])
    return table


# --- on the workers -------------------------------------------------------------------------

class _Shared:
    """This process's side of one batch's state on the scheduler: the request slots, the shared
    pause and the spend. The gate (:class:`bettong_nb.http.Gate`) and the budget run on the
    bettong loop; every scheduler call runs on the worker's own loop."""

    _here: dict[str, "_Shared"] = {}
    _registry_lock = threading.Lock()

    def __init__(self, plan: _Plan):
        from distributed import Lock, Semaphore, Variable, get_client, get_worker

        worker = get_worker()
        self.batch = plan.batch
        self.worker = worker.address
        self.loop = worker.loop.asyncio_loop
        self.service = plan.service
        self.slots = None if plan.slots is None else \
            _Slots(Semaphore(max_leases=plan.slots, name=f"{plan.batch}-slots"), self.loop)
        self.lock = Lock(f"{plan.batch}-lock")
        self.state = Variable(f"{plan.batch}-state", get_client())
        self.budget = None if plan.token_budget is None and plan.cost_budget is None else \
            _SharedBudget("batch", plan.token_budget, plan.cost_budget, plan.prices, shared=self)
        self.users = 0
        self.paused_until = 0.0  # wall clock: comparable across processes
        self._pending = ZERO  # spent here, not yet added there
        self._freed = 0  # reservations of requests over here, not yet taken off there
        self._pause_wanted = 0.0
        self._guard = threading.Lock()
        self._one_sync = asyncio.Lock()  # the periodic sync and a partition's last one do not overlap
        self._wake: asyncio.Event | None = None

    @classmethod
    def joining(cls, plan: _Plan) -> "_Shared":
        with cls._registry_lock:
            shared = cls._here.get(plan.batch)
            if shared is None:
                shared = cls._here[plan.batch] = cls(plan)
                shared.users = 1
                # the batch's spend and pause as they are now, before this partition sends anything
                asyncio.run_coroutine_threadsafe(shared._sync(), shared.loop).result()
                asyncio.run_coroutine_threadsafe(shared._keep_in_sync(), shared.loop)
            else:
                shared.users += 1
            return shared

    def leaving(self) -> None:
        """A partition is done here: its spend goes to the scheduler before its task returns."""
        asyncio.run_coroutine_threadsafe(self._sync(), self.loop).result()
        with self._registry_lock:
            self.users -= 1
            if not self.users:
                del self._here[self.batch]
                self._poke()  # its sync loop ends

    # the gate, called on the bettong loop

    def slot(self, service: str) -> contextlib.AbstractAsyncContextManager:
        return self._slot() if service == self.service else contextlib.nullcontext()

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        if self.slots is not None:
            await self.slots.take()
        try:
            while (wait := self.paused_until - time.time()) > 0:  # after the slot: none sends in a pause
                await asyncio.sleep(wait)
            yield
        finally:
            if self.slots is not None:
                self.slots.give()

    def pause(self, service: str, seconds: float) -> None:
        if service != self.service:
            return
        until = time.time() + seconds
        with self._guard:
            self.paused_until = max(self.paused_until, until)
            self._pause_wanted = max(self._pause_wanted, until)
        self._poke()

    # the budget's view

    async def take(self, budget: "_SharedBudget", estimate: int) -> str | None:
        """Hold ``estimate`` of the batch's budget on the scheduler, under the batch's lock, or
        say why not: every process sees every other's spend and holdings at once."""
        leased = asyncio.run_coroutine_threadsafe(self._sync(budget, estimate), self.loop)
        return await asyncio.wrap_future(leased)

    def settle(self, usage: Usage | None, estimate: int) -> None:
        with self._guard:
            self._pending += usage or ZERO
            self._freed += estimate
        self._poke()  # the holding goes back soon: the others may be waiting for it

    # on the worker's loop

    def _poke(self) -> None:
        self.loop.call_soon_threadsafe(lambda: self._wake is not None and self._wake.set())

    async def _keep_in_sync(self) -> None:
        self._wake = asyncio.Event()
        while self.users:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SYNC_S)
            self._wake.clear()
            with contextlib.suppress(Exception):  # the scheduler busy or gone: the next sync tries again
                await self._sync()

    async def _sync(self, budget: "_SharedBudget | None" = None, estimate: int = 0) -> str | None:
        async with self._one_sync:
            return await self._sync_now(budget, estimate)

    async def _sync_now(self, budget: "_SharedBudget | None", estimate: int) -> str | None:
        """Add this process's spend, freed holdings and pause to the batch's state; with ``budget``,
        also hold ``estimate`` of it unless that would break it (then say why)."""
        with self._guard:
            pending, self._pending = self._pending, ZERO
            freed, self._freed = self._freed, 0
            pause = self._pause_wanted
        why = None
        try:
            if pending != ZERO or freed or pause > 0 or budget is not None:
                async with self.lock:
                    state = await self.state.get()
                    spent = [a + b for a, b in zip(state["spent"], _fields(pending))]
                    reserved = state["reserved"] - freed
                    if budget is not None:
                        why = budget.refusal(estimate, spent=Usage(*spent), reserved=reserved)
                        reserved += estimate if why is None else 0
                    state = {"spent": spent, "reserved": reserved,
                             "paused_until": max(state["paused_until"], pause)}
                    await self.state.set(state)
            else:
                state = await self.state.get()
        except Exception:
            with self._guard:
                self._pending += pending  # tried again at the next sync
                self._freed += freed
            raise
        with self._guard:
            if self._pause_wanted == pause:
                self._pause_wanted = 0.0
            self.paused_until = max(self.paused_until, state["paused_until"])
        return why


class _Slots:
    """This process's share of the cluster's request slots, the leases of one dask Semaphore,
    on the bettong loop. A finished request hands its lease straight to one waiting here (no
    call to the scheduler), except every ``RETURN_EVERY``-th, which goes back so that the other
    workers get their share; one nobody waits for is kept ``LINGER_S`` for the next request
    (a run asks again right after its answer), then returned. The scheduler is asked for one
    lease at a time."""

    def __init__(self, semaphore: Any, dask_loop: asyncio.AbstractEventLoop):
        self.semaphore, self.dask_loop = semaphore, dask_loop
        self._waiting: collections.deque[asyncio.Future] = collections.deque()
        self._idle: list[asyncio.TimerHandle] = []  # leases kept for LINGER_S, each with its return
        self._fetching = False
        self._handed = 0

    async def take(self) -> None:
        if self._idle:
            self._idle.pop().cancel()
            return
        lease = asyncio.get_running_loop().create_future()
        self._waiting.append(lease)
        self._fetch()
        try:
            await lease
        except asyncio.CancelledError:
            if lease.done() and not lease.cancelled():
                self.give()  # handed over as the request was cancelled: on to the next
            else:
                self._waiting.remove(lease)
            raise

    def give(self) -> None:
        self._handed += 1
        waiter = self._next()
        if waiter is not None and self._handed % RETURN_EVERY:
            waiter.set_result(None)
            return
        if waiter is None:
            self._park()
            return
        self._waiting.appendleft(waiter)
        self._return()
        self._fetch()

    def _park(self) -> None:
        def expire() -> None:
            self._idle.remove(handle)
            self._return()

        handle = asyncio.get_running_loop().call_later(LINGER_S, expire)
        self._idle.append(handle)

    def _return(self) -> None:
        asyncio.run_coroutine_threadsafe(_awaited(self.semaphore.release), self.dask_loop)

    def _next(self) -> asyncio.Future | None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                return waiter
        return None

    def _fetch(self) -> None:
        if not self._fetching and self._waiting:
            self._fetching = True
            asyncio.ensure_future(self._fetch_one())

    async def _fetch_one(self) -> None:
        try:
            acquired = asyncio.run_coroutine_threadsafe(_awaited(self.semaphore.acquire), self.dask_loop)
            await asyncio.wrap_future(acquired)
        except Exception as exc:  # the scheduler cannot be reached: the request fails with why
            if (waiter := self._next()) is not None:
                waiter.set_exception(exc)
            return
        finally:
            self._fetching = False
        waiter = self._next()
        if waiter is None:
            self._park()
        else:
            waiter.set_result(None)
        self._fetch()


async def _awaited(call: Any) -> Any:
    """``call()`` awaited on the worker's loop, where dask's primitives answer with coroutines."""
    return await call()


def _fields(usage: Usage) -> list[int]:
    return [getattr(usage, name) for name in _USAGE_FIELDS]


@dataclasses.dataclass
class _SharedBudget(budget.Budget):
    """A batch budget whose spend and holdings are the whole cluster's, kept on the scheduler."""

    shared: Any = None

    async def take(self, estimate: int) -> str | None:
        return await self.shared.take(self, estimate)

    def settle(self, usage: Usage | None, estimate: int, billed: float | None = None) -> None:
        self.shared.settle(usage, estimate)


class _Done:
    """``part-<n>.jsonl`` in the resume directory: one line per answered row, written as it is
    answered; a row is taken back only where its prompt is still the same."""

    def __init__(self, directory: str, number: int):
        self.path = os.path.join(directory, f"part-{number:06d}.jsonl")

    def load(self, prompts: list[str]) -> dict[int, dict]:
        found: dict[int, dict] = {}
        with contextlib.suppress(FileNotFoundError), open(self.path, encoding="utf-8") as lines:
            for line in lines:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut short when its worker died
                item = row.get("item")
                if isinstance(item, int) and 0 <= item < len(prompts) and row.get("key") == _key(prompts[item]):
                    found[item] = {**row, "resumed": True}
        return found

    def write(self, row: dict) -> None:
        line = (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, line)  # one append per row: a kill cuts at most the last line
        finally:
            os.close(descriptor)


def _key(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:32]


class _Row(str):
    """A prompt that knows its position in the partition (amap hands it to the agent as is)."""

    def __new__(cls, text: str, item: int) -> "_Row":
        row = super().__new__(cls, text)
        row.item = item
        return row


class _Rows:
    """The agent as amap sees it: each answer is recorded (and written for resuming) as it comes,
    its cells keyed by field name ("" for the text answer or a non-object value)."""

    def __init__(self, agent: Any, worker: str, done: _Done | None, output_type: Any):
        self.agent, self.worker, self.done = agent, worker, done
        self.shape = None if output_type is None else _shape(output_type)
        self.rows: dict[int, dict] = {}

    def cells(self, result: Any) -> dict[str, Any] | None:
        if self.shape is None:
            return {"": result.output}
        return {name or "": value for name, value in self.shape.row(result.data).items()} if result.done else None

    async def arun(self, prompt: _Row, **overrides: Any) -> Any:
        result = await self.agent.arun(str(prompt), **overrides)
        row = {"item": prompt.item, "key": _key(prompt), "cells": self.cells(result),
               "error": None if result.done else (result.reason or result.stop_reason or "not done"),
               "worker": self.worker, "resumed": False, "requests": [_request(r) for r in result.requests]}
        self.rows[prompt.item] = row
        if self.done is not None and result.done:
            self.done.write(row)
        return result


def _request(record: RequestRecord) -> dict:
    return {**{name: getattr(record, name) for name in _RECORD_FIELDS},
            **dict(zip(_USAGE_FIELDS, _fields(record.usage)))}


def _run_partition(part: Any, plan: _Plan, partition_info: Mapping[str, Any] | None = None):
    """One partition, on a worker: its rows as a batch under the cluster's gate and budget."""
    import pickle

    from distributed import Variable, get_client

    number = partition_info["number"] if partition_info else 0
    template = PromptTemplate()
    prompts = [template.vformat(plan.prompt, (), row) for row in part.to_dict("records")]
    done = None if plan.resume is None else _Done(plan.resume, number)
    rows = done.load(prompts) if done is not None else {}
    shared = _Shared.joining(plan)
    agent = pickle.loads(plan.agent)  # a fresh copy per partition: closed below, with its servers
    runner = _Rows(agent, shared.worker, done, plan.output_type)
    todo = [_Row(text, item) for item, text in enumerate(prompts) if item not in rows]
    try:
        with http.gated(shared), events.scope("batch.partition", parent=plan.trace, index=number,
                                              worker=shared.worker):
            results = run_sync(amap(runner, todo, concurrency=plan.concurrency, progress=False,
                                    budgets=[shared.budget] if shared.budget is not None else [],
                                    **portable.filled(plan.overrides)))
    finally:
        shared.leaving()
        agent.close()
    for prompt, result in zip(todo, results):
        rows[prompt.item] = runner.rows.get(prompt.item) or {  # it failed before an answer came
            "item": prompt.item, "cells": None, "error": result.reason or "failed", "worker": shared.worker,
            "resumed": False, "requests": [_request(r) for r in result.requests]}
    ordered = [rows[item] for item in range(len(prompts))]
    usage = [{"partition": number, "item": row["item"], "worker": row["worker"], "resumed": row["resumed"], **request}
             for row in ordered for request in row["requests"]]
    Variable(f"{plan.batch}-usage-{number}", get_client()).set(usage)
    return _filled(part, ordered, plan)
