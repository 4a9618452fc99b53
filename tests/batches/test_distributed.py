"""map_frame on a Dask frame: a LocalCluster of 2 worker processes against a loopback model
server (in this process; the workers reach it over 127.0.0.1) that counts requests, measures
how many are in flight and sends 429s."""

import collections
import glob
import hashlib
import json
import os
import signal
import threading
import time

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster

import bettong_nb
from support.servers import LoopbackServer, Reply, chat_message

LIMIT = 16  # max_concurrency across the cluster
TOKENS_PER_REQUEST = 12  # chat_message's usage: 10 in, 2 out


class Model:
    """Answers "echo <prompt>" after ``delay``; counts answers per prompt and the most requests
    in flight at once. From request number ``pause_at`` on it sends 429 with Retry-After
    ``pause_s`` to everything until that pause is over; at ``then`` requests it calls ``then_do``."""

    def __init__(self, delay: float = 0.01, pause_at: int | None = None, pause_s: float = 1.0,
                 then: int | None = None, then_do=None):
        self.delay, self.pause_at, self.pause_s, self.then, self.then_do = delay, pause_at, pause_s, then, then_do
        self.lock = threading.Lock()
        self.arrivals: list[float] = []
        self.answered: collections.Counter = collections.Counter()
        self.in_flight = self.peak = 0
        self.paused_at: float | None = None
        self.refused = 0

    def __call__(self, request):
        now = time.monotonic()
        prompt = request.json()["messages"][-1]["content"]
        with self.lock:
            self.arrivals.append(now)
            if self.then is not None and len(self.arrivals) == self.then:
                threading.Thread(target=self.then_do, daemon=True).start()
            if self.pause_at is not None and len(self.arrivals) == self.pause_at:
                self.paused_at = now
            if self.paused_at is not None and now < self.paused_at + self.pause_s:
                self.refused += 1
                wait = self.paused_at + self.pause_s - now
                return Reply.json({"error": {"message": "rate limited"}}, status=429, **{"Retry-After": f"{wait:.3f}"})
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
            self.answered[prompt] += 1
        return Reply.json(chat_message(f"echo {prompt}"))


@pytest.fixture(scope="module")
def cluster():
    # A lease of a killed worker is freed after 3 s rather than 30 (the kill test).
    with dask.config.set({"distributed.scheduler.locks.lease-timeout": "3s",
                          "distributed.scheduler.locks.lease-validation-interval": "0.5s"}), \
            LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                         host="127.0.0.1", env={"OPENAI_API_KEY": "key-of-the-workers"}) as cluster, \
            Client(cluster) as client:
        yield client


def frame(rows: int, partitions: int = 8):
    return dd.from_pandas(pd.DataFrame({"text": [f"row {i}" for i in range(rows)], "n": range(rows)}),
                          npartitions=partitions)


def agent_on(server):
    # The key given here never reaches the workers; they answer with their own (OPENAI_API_KEY).
    return bettong_nb.openai(base_url=server.url, api_key="key-of-the-notebook", model="m", max_retries=4)


def test_rows_are_answered_once_in_order_within_the_bound_and_a_429_pauses_every_worker(cluster):
    model = Model(pause_at=600, pause_s=1.0)
    with LoopbackServer(model) as server:
        lazy = agent_on(server).map_frame(frame(2000), prompt="Say {text}", output="label", max_concurrency=LIMIT)
        assert lazy.npartitions == 8 and model.arrivals == []  # lazy: nothing ran yet
        out = lazy.compute()
        keys = {r.headers["authorization"] for r in server.requests}
    assert keys == {"Bearer key-of-the-workers"}
    assert list(out["label"]) == [f"echo Say row {i}" for i in range(2000)]
    assert list(out["n"]) == list(range(2000)) and out["error"].isna().all()
    assert out.dtypes.equals(lazy.dtypes) and str(out["label"].dtype) == "string"
    assert len(model.answered) == 2000 and set(model.answered.values()) == {1}, "every row answered once"
    assert LIMIT - 2 <= model.peak <= LIMIT, f"{model.peak} requests in flight at once"
    # The 429 paused every worker: after the pause was shared (within 0.2 s), nothing arrived
    # until Retry-After had passed; the few that came within those 0.2 s were refused too.
    during = [t - model.paused_at for t in model.arrivals if 0.2 < t - model.paused_at < model.pause_s]
    assert during == [] and model.refused >= 1
    usage = bettong_nb.batch_usage(lazy)
    assert len(usage) == 2000 and usage["worker"].nunique() == 2
    assert sorted(usage["partition"].unique()) == list(range(8)) and not usage["resumed"].any()
    assert usage["prompt_tokens"].sum() == 2000 * 10


def test_the_budget_covers_the_whole_batch_and_rows_not_run_say_why(cluster):
    model = Model(delay=0.02)
    budget = 200 * TOKENS_PER_REQUEST
    with LoopbackServer(model) as server:
        lazy = agent_on(server).map_frame(frame(800), prompt="Say {text}", output="label",
                                          max_concurrency=LIMIT, token_budget=budget)
        out = lazy.compute()
    answered = out["label"].notna()
    assert 100 <= answered.sum() <= 200 + 3 * LIMIT, answered.sum()
    assert sum(model.answered.values()) == answered.sum(), "no request for a row the budget stopped"
    assert out.loc[answered, "error"].isna().all()
    assert out.loc[~answered, "error"].str.contains("token budget of 2400").all()
    assert (out.loc[answered, "label"] == "echo Say " + out.loc[answered, "text"]).all()
    spent = bettong_nb.batch_usage(lazy)[["prompt_tokens", "completion_tokens"]].sum().sum()
    assert spent == answered.sum() * TOKENS_PER_REQUEST


def test_the_template_is_checked_before_anything_runs(cluster):
    agent = bettong_nb.openai(base_url="http://127.0.0.1:9", api_key="k")
    with pytest.raises(KeyError, match="names {txt}, which is not a column"):
        agent.map_frame(frame(10), prompt="Say {txt}")
    with pytest.raises(ValueError, match="already has column 'error', which map_frame would fill"):
        agent.map_frame(frame(10).assign(error="x"), prompt="Say {text}")


def test_a_worker_killed_mid_run_loses_no_row_and_bills_none_twice_with_resume(cluster, tmp_path):
    pids = cluster.run(os.getpid)
    victim = sorted(pids.values())[0]
    written_before_kill: list[dict] = []

    def kill():
        for path in glob.glob(str(tmp_path / "part-*.jsonl")):
            with open(path) as lines:
                written_before_kill.extend(json.loads(line) for line in lines if line.endswith("\n"))
        os.kill(victim, signal.SIGKILL)

    model = Model(delay=0.01, then=500, then_do=kill)
    with LoopbackServer(model) as server:
        lazy = agent_on(server).map_frame(frame(1600), prompt="Say {text}", output="label",
                                          max_concurrency=8, resume=tmp_path)
        out = lazy.compute()
    assert written_before_kill, "rows were written before the kill"
    assert list(out["label"]) == [f"echo Say row {i}" for i in range(1600)] and out["error"].isna().all()
    assert list(out.index) == list(range(1600))
    by_key = {hashlib.sha256(f"Say row {i}".encode()).hexdigest()[:32]: f"Say row {i}" for i in range(1600)}
    assert all(model.answered[by_key[row["key"]]] == 1 for row in written_before_kill), "billed twice"
    assert set(model.answered) == set(by_key.values())
    twice = [prompt for prompt, count in model.answered.items() if count > 1]
    assert len(twice) <= 8, f"only rows in flight at the kill may be asked again, not {len(twice)}"
    usage = bettong_nb.batch_usage(lazy)
    assert usage["resumed"].any(), "the retried partition took its finished rows from the resume files"
    assert len(usage) == 1600


def test_a_typed_answer_gets_a_column_per_field_and_na_where_a_row_failed(cluster):
    from dataclasses import dataclass
    from typing import Literal

    @dataclass
    class Review:
        sentiment: Literal["positive", "negative"]
        stars: int

    def handle(request):
        prompt = request.json()["messages"][-1]["content"]
        if prompt.endswith("row 7"):
            return Reply.json({"error": {"message": "no"}}, status=400)
        number = int(prompt.rsplit(" ", 1)[1])
        stars = 10**20 if number == 9 else number % 5  # valid JSON, an int no Int64 column holds
        answer = {"sentiment": "positive" if number % 2 else "negative", "stars": stars}
        return Reply.json(chat_message(json.dumps(answer)))

    with LoopbackServer(handle) as server:
        lazy = agent_on(server).map_frame(frame(40, 4), prompt="Review {text}", output_type=Review)
        out = lazy.compute()
    assert out.dtypes.equals(lazy.dtypes)
    assert str(out["stars"].dtype) == "Int64" and list(out["sentiment"].cat.categories) == ["positive", "negative"]
    ok = out.drop(index=[7, 9])
    assert list(ok["stars"]) == [i % 5 for i in range(40) if i not in (7, 9)] and ok["error"].isna().all()
    assert out.loc[7, ["sentiment", "stars"]].isna().all() and "HTTP 400" in out.loc[7, "error"]
    # the row whose value does not fit fails alone, saying so; the rest of its partition is kept
    assert out.loc[9, ["sentiment", "stars"]].isna().all() and "does not fit the column" in out.loc[9, "error"]


def test_the_cluster_bound_holds_however_many_rows_wait_for_it(cluster):
    # 2 workers x 40 rows at a time want a slot; only 3 exist. A lease used twice or never given
    # back shows as far more than 3 in flight (or a hang), not as one or two too many.
    model = Model(delay=0.03)
    with LoopbackServer(model) as server:
        out = agent_on(server).map_frame(frame(240, 4), prompt="Say {text}", output="label",
                                         concurrency=40, max_concurrency=3).compute()
    assert out["error"].isna().all() and len(model.answered) == 240
    assert model.peak <= 3, f"{model.peak} requests in flight at once, over max_concurrency=3"


def test_rows_waiting_for_a_slot_hold_the_budget_so_it_is_never_passed(cluster):
    # max_tokens makes each request's estimate cover its answer: then the budget is never passed,
    # however many rows wait for the 4 slots on 2 workers at once.
    answers = {"prompt_tokens": 10, "completion_tokens": 50, "total_tokens": 60}

    def handle(request):
        time.sleep(0.02)
        return Reply.json(chat_message("ok", usage=answers))

    budget = 1000
    with LoopbackServer(handle) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k", model="m", max_tokens=60)
        lazy = agent.map_frame(frame(400, 8), prompt="Say {text}", output="label", concurrency=32,
                               max_concurrency=4, token_budget=budget)
        out = lazy.compute()
        sent = len(server.requests)
    answered = int(out["label"].notna().sum())
    assert sent == answered and 1 <= answered, answered
    assert sent * 60 <= budget, f"{sent} requests spent {sent * 60} tokens of a budget of {budget}"
    assert out.loc[out["label"].isna(), "error"].str.contains("token budget of 1000").all()


def test_no_key_or_url_credential_enters_the_task_graph(cluster):
    import cloudpickle

    password, query_key = "pw-Graph7Kc4Lr2", "qk-Graph3Hj6Ff1"
    agent = bettong_nb.openai(base_url=f"http://user:{password}@127.0.0.1:9/v1?api_key={query_key}",
                              api_key="key-of-the-notebook-000", model="m")
    with pytest.raises(ValueError, match=r"api_key= never travels.*LocalCluster\(env=\{'OPENAI_API_KEY'"):
        agent.map_frame(frame(4, 1), prompt="Say {text}", api_key="key-given-to-the-call-000")
    lazy = agent.map_frame(frame(4, 1), prompt="Say {text}", base_url=f"http://u:{password}@127.0.0.1:9/v1")
    graph = cloudpickle.dumps(dict(lazy.__dask_graph__()))
    for secret in (password, query_key, "key-of-the-notebook-000"):
        assert secret.encode() not in graph
    # the workers hold no URL with credentials to that host: the partition fails saying how
    with pytest.raises(RuntimeError, match=r"held credentials.*LocalCluster\(env="):
        lazy.compute()


def test_the_course_policy_refuses_on_the_driver_before_any_task(cluster, tmp_path, monkeypatch):
    rules = tmp_path / "policy.json"
    rules.write_text('{"allowed_models": ["course-model"]}')
    monkeypatch.setenv("BETTONG_NB_POLICY", str(rules))
    model = Model()
    with LoopbackServer(model) as server:
        with pytest.raises(bettong_nb.PolicyError, match="allowed_models"):
            agent_on(server).map_frame(frame(10), prompt="Say {text}")
    assert model.arrivals == []
