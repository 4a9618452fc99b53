"""The kernel side of the notebook bridge without a page: nbclient's real kernel (no extension
there, so connect() says None within its timeout), and the request/answer bookkeeping against a
stand-in comm that answers from another thread, late, never, or closes."""

from __future__ import annotations

import asyncio
import threading

import nbformat
import pytest

from bettong_nb import UserError
from bettong_nb.notebook import frontend
from bettong_nb.notebook.frontend import Frontend, FrontendError
from support.notebooks import run_notebook, stdout


def test_connect_is_none_under_nbclient_within_its_timeout(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("""\
import time
from bettong_nb.notebook import frontend
t = time.perf_counter()
fe = await frontend.connect(timeout=1.0)
first = time.perf_counter() - t
t = time.perf_counter()
again = await frontend.connect(timeout=1.0)
print(fe, again, round(first, 2), round(time.perf_counter() - t, 3), frontend.current_cell_id())
""")])
    run_notebook(nb, tmp_path)
    fe, again, first, second, current = stdout(nb.cells[0]).split()
    assert fe == again == "None"
    assert 0.9 <= float(first) < 2.0  # waited for the hello, then gave up
    assert float(second) < 0.05  # the "no frontend" answer is kept
    assert current == "None"  # nbclient sends no cell id (JupyterLab and Notebook 7 do: see the browser tests)


class FakeComm:
    """Answers each request on another thread, as ipykernel may (comms over subshells)."""

    def __init__(self, frontend: Frontend, answer=None):
        self.frontend = frontend
        self.answer = answer  # request -> answer dict, or None for no answer
        self.sent: list[dict] = []
        self.closed = False

    def send(self, data):
        self.sent.append(data)
        answer = self.answer(data) if self.answer else None
        if answer is not None:
            threading.Thread(target=self.frontend._on_msg, args=({"content": {"data": answer}},)).start()

    def close(self):
        self.closed = True


def _frontend(answer=None, timeout: float = 1.0) -> tuple[Frontend, FakeComm]:
    fe = Frontend(kernel=None, timeout=timeout)
    fe._comm = FakeComm(fe, answer)
    return fe, fe._comm


def test_answers_reach_the_request_that_asked():
    def answer(request):
        if request["op"] == "cells":
            return {"id": request["id"], "ok": True, "cells": [{"id": "a", "source": "x"}]}
        return {"id": request["id"], "ok": True, "cell_id": f"new-{request['source']}"}

    async def main():
        fe, comm = _frontend(answer)
        got = await asyncio.gather(fe.cells(), *(fe.insert_cell(after="a", cell_type="code", source=str(i))
                                                 for i in range(5)))
        return fe, comm, got

    fe, comm, got = asyncio.run(main())
    assert got[0] == [{"id": "a", "source": "x"}] and got[1:] == [f"new-{i}" for i in range(5)]
    assert comm.sent[1] == {"id": 2, "op": "insert_cell", "target": "bettong_nb.notebook", "after_id": "a",
                            "cell_type": "code", "source": "0", "metadata": {}}
    assert fe._pending == {}


def test_a_refusal_is_a_one_line_user_error_naming_the_op():
    async def main():
        fe, _ = _frontend(lambda r: {"id": r["id"], "ok": False, "error": 'no cell with id "zz" in a.ipynb'})
        await fe.set_source("zz", "x")

    with pytest.raises(FrontendError, match=r'^set_source: no cell with id "zz" in a.ipynb$') as caught:
        asyncio.run(main())
    assert isinstance(caught.value, UserError)


def test_no_answer_times_out_naming_the_op_and_leaves_nothing_pending():
    async def main():
        fe, _ = _frontend(None, timeout=0.2)
        with pytest.raises(FrontendError, match="^highlight: the notebook's page did not answer within 0.2 s$"):
            await fe.highlight(None)
        return fe

    fe = asyncio.run(main())
    assert fe._pending == {} and fe._stale  # the next request opens a new comm first


def test_cancelling_a_request_leaves_no_pending_future_and_a_late_answer_is_dropped():
    async def main():
        fe, comm = _frontend(None, timeout=30)
        task = asyncio.ensure_future(fe.cells())
        await asyncio.sleep(0.05)
        task.cancel()  # the stop button
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fe._pending == {}
        fe._on_msg({"content": {"data": {"id": comm.sent[0]["id"], "ok": True, "cells": []}}})  # late
        await asyncio.sleep(0.05)
        return fe

    assert asyncio.run(main())._pending == {}


def test_a_closed_comm_fails_the_waiting_requests_at_once():
    async def main():
        fe, _ = _frontend(None, timeout=30)
        task = asyncio.ensure_future(fe.notebook_metadata())
        await asyncio.sleep(0.05)
        threading.Thread(target=fe._on_close, args=({},)).start()
        return await asyncio.wait_for(task, 2)

    with pytest.raises(FrontendError, match="^notebook_metadata: the notebook's page closed the connection$"):
        asyncio.run(main())


def test_closing_our_own_comm_fails_its_waiting_requests_at_once():
    # The page drops answers to a comm closed meanwhile: waiting for them would cost the timeout.
    async def main():
        fe, comm = _frontend(None, timeout=30)
        task = asyncio.ensure_future(fe.cells())
        await asyncio.sleep(0.05)
        fe.close()
        with pytest.raises(FrontendError, match="^cells: the connection to the notebook's page was closed$"):
            await asyncio.wait_for(task, 2)
        return fe, comm

    fe, comm = asyncio.run(main())
    assert comm.closed and fe._pending == {} and fe._stale


class _Kernel:
    session = object()  # what connect() asks of a kernel before it opens a comm


def _connect_with(monkeypatch, answers: list, timeout: float) -> tuple[Frontend | None, list[FakeComm]]:
    """connect() in a stand-in kernel whose page answers the n-th comm opened with ``answers[n]``
    (a function of the request, or None for silence); the comms it opened."""
    opened: list[FakeComm] = []

    def open_comm(fe: Frontend) -> None:
        fe._comm = FakeComm(fe, answers[min(len(opened), len(answers) - 1)])
        fe._stale = False
        opened.append(fe._comm)

    monkeypatch.setattr(frontend, "jupyter_kernel", lambda: _Kernel())
    monkeypatch.setattr(Frontend, "_open", open_comm)
    monkeypatch.setattr(frontend, "HELLO_ATTEMPT_S", 0.2)
    monkeypatch.setattr(frontend, "_cached", None)
    monkeypatch.setattr(frontend, "_none_at", None)
    return asyncio.run(frontend.connect(timeout=timeout, refresh=True)), opened


def test_a_hello_lost_in_a_restart_is_asked_again_on_a_new_comm(monkeypatch):
    # A page busy with its kernel's restart can drop the first comm; the second is answered.
    hello = lambda r: {"id": r["id"], "ok": True, "app": "JupyterLab", "path": "a.ipynb"}  # noqa: E731
    fe, opened = _connect_with(monkeypatch, [None, None, hello], timeout=5)
    assert fe is not None and (fe.app, fe.path) == ("JupyterLab", "a.ipynb")
    assert len(opened) == 3 and opened[0].closed and opened[1].closed and not opened[2].closed


def test_a_silent_page_costs_the_timeout_and_a_refusing_one_is_not_asked_again(monkeypatch):
    import time

    started = time.monotonic()
    fe, opened = _connect_with(monkeypatch, [None], timeout=0.7)
    took = time.monotonic() - started
    assert fe is None and 0.65 <= took < 1.5 and len(opened) >= 3 and all(comm.closed for comm in opened)
    refused = lambda r: {"id": r["id"], "ok": False, "error": "protocol 9 is not spoken here"}  # noqa: E731
    fe, opened = _connect_with(monkeypatch, [refused], timeout=5)
    assert fe is None and len(opened) == 1 and opened[0].closed


def test_outside_a_kernel_there_is_no_frontend_and_no_cell():
    assert asyncio.run(frontend.connect()) is None
    assert frontend.current_cell_id() is None


def test_importing_the_bridge_loads_no_comm_machinery():
    import subprocess
    import sys

    code = ("import sys, bettong_nb.notebook.frontend; "
            "print(sorted(m for m in ('comm', 'ipykernel', 'IPython', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
