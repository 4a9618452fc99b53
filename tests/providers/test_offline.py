"""The offline demo model through real agent runs: real DuckDB over Parquet and CSV, real files,
a loopback search server, real bash, a real MCP server, your own tools; sessions whose second
turn asks something new; denied calls; explain/fix prompts; structured answers; determinism."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb as _duckdb
import pandas as pd
import pytest

import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.core.approvals import Deny
from bettong_nb.providers.offline import OFFLINE_NOTICE
from support import REPO, TESTS
from support.servers import LoopbackServer, Reply

MISSIONS = """mission,target,launch_year,agency,kind
Mariner 10,Mercury,1973,NASA,flyby
Voyager 1,Jupiter,1977,NASA,flyby
Voyager 2,Neptune,1977,NASA,flyby
Galileo,Jupiter,1989,NASA,orbiter
Cassini-Huygens,Saturn,1997,NASA/ESA/ASI,orbiter
Rosetta,Comet 67P,2004,ESA,orbiter
Juno,Jupiter,2011,NASA,orbiter
"""
MOONS = pd.DataFrame({"moon": ["Moon", "Phobos", "Deimos", "Io", "Europa", "Ganymede", "Titan", "Enceladus"],
                      "planet": ["Earth", "Mars", "Mars", "Jupiter", "Jupiter", "Jupiter", "Saturn", "Saturn"],
                      "mean_radius_km": [1737.4, 11.3, 6.2, 1821.6, 1560.8, 2634.1, 2574.7, 252.1]})


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data folder: a CSV, a Parquet file written by DuckDB, a README."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "missions.csv").write_text(MISSIONS)
    (folder / "README.md").write_text("Space data for the demo.\n")
    con = _duckdb.connect()
    con.register("moons_frame", MOONS)
    con.execute(f"COPY moons_frame TO '{folder / 'moons.parquet'}' (FORMAT parquet)")
    con.close()
    return folder


def calls(result) -> list[tuple[str, dict]]:
    return [(c.tool, c.args) for c in result.tool_calls]


# --- SQL ------------------------------------------------------------------------------------

def test_sql_over_a_folder_lists_describes_then_queries_what_the_prompt_asks(data):
    agent = bettong_nb.offline(capabilities=[caps.duckdb(root=data)])
    result = agent.run("Which planet has the most moons?")
    assert [name for name, _ in calls(result)] == ["query_data", "describe_data", "query_data"]
    assert calls(result)[1] == ("describe_data", {"path": "moons.parquet"})
    sql = calls(result)[2][1]["sql"]
    assert sql == ("SELECT planet, count(*) AS moons FROM 'moons.parquet' GROUP BY planet "
                   "ORDER BY moons DESC, planet")
    frame = result.frames()[-1]  # the query's full result, as the person's DataFrame
    assert frame.iloc[0].tolist() == ["Jupiter", 3]
    assert "| Jupiter | 3 |" in result.output and "planet = **Jupiter**, moons = **3**" in result.output
    assert "```sql\n" + sql in result.output and result.output.endswith(OFFLINE_NOTICE)
    assert "I have no tools" not in result.output


@pytest.mark.parametrize("prompt, sql, expected", [
    ("Which missions went to Saturn?",
     "SELECT * FROM 'missions.csv' WHERE target ILIKE '%Saturn%' LIMIT 20", "| Cassini-Huygens | Saturn |"),
    ("How many missions did NASA launch?",
     "SELECT count(*) AS missions FROM 'missions.csv' WHERE agency ILIKE '%NASA%'", "missions = **6**"),
    ("Which missions launched in 1977?",
     "SELECT * FROM 'missions.csv' WHERE launch_year = 1977 LIMIT 20", "| Voyager 2 | Neptune | 1977 |"),
    ("Which moon has the largest radius?",
     "SELECT * FROM 'moons.parquet' ORDER BY mean_radius_km DESC NULLS LAST LIMIT 5", "moon = **Ganymede**"),
    ("What is the average radius of the moons per planet?",
     "SELECT planet, round(avg(mean_radius_km), 2) AS avg_mean_radius_km FROM 'moons.parquet' GROUP BY planet "
     "ORDER BY avg_mean_radius_km DESC, planet", "| Jupiter | 2005.5 |"),
])
def test_the_query_is_built_from_the_prompts_words_and_the_described_columns(data, prompt, sql, expected):
    result = bettong_nb.offline(capabilities=[caps.duckdb(root=data)]).run(prompt)
    assert calls(result)[-1] == ("query_data", {"sql": sql})
    assert expected in result.output


def test_registered_frames_are_described_by_name_and_queried_with_no_listing():
    agent = bettong_nb.offline(capabilities=[caps.duckdb(tables={"moons": MOONS, "other": MOONS.head(1)})])
    result = agent.run("How many moons does each planet have?")
    assert calls(result) == [("describe_data", {"path": "moons"}),
                             ("query_data", {"sql": "SELECT planet, count(*) AS moons FROM moons GROUP BY planet "
                                                    "ORDER BY moons DESC, planet"})]
    assert result.frames()[-1]["moons"].tolist() == [3, 2, 2, 1]


def test_a_follow_up_in_a_session_is_answered_from_its_own_tool_calls(data):
    chat = bettong_nb.offline(capabilities=[caps.duckdb(root=data)]).session()
    first = chat.run("Which planet has the most moons?")
    second = chat.run("And which missions went to Saturn?")
    assert calls(second)[-1][1]["sql"].startswith("SELECT * FROM 'missions.csv' WHERE target ILIKE '%Saturn%'")
    assert "Cassini-Huygens" in second.output
    assert "Jupiter | 3" in first.output and "Jupiter | 3" not in second.output and "moons" not in second.output


def test_a_denied_call_ends_the_turn_and_says_why_and_the_next_turn_starts_afresh(data):
    deny_reads = lambda request: Deny("too big") if request.tool == "read_file" else True
    chat = bettong_nb.offline(root=data, approve_fn=deny_reads).session()
    first = chat.run("What is in missions.csv?")
    assert calls(first) == [("read_file", {"path": "missions.csv"})]
    assert first.tool_calls[0].status == "denied"
    assert first.output.startswith("read_file was not allowed: too big.")
    second = chat.run("Which files are here?", approve_fn=True)
    assert [name for name, _ in calls(second)] == ["list_dir", "read_file"]
    assert "not allowed" not in second.output and "`missions.csv`" in second.output


# --- files, cells, variables, EDN -------------------------------------------------------------

def test_files_the_one_whose_text_matches_is_read_when_no_name_does(tmp_path):
    (tmp_path / "apples.txt").write_text("Apples are red.\n")
    (tmp_path / "notes.txt").write_text("Shopping list.\nThe launch window opens on 3 May.\n")
    result = bettong_nb.offline(root=tmp_path).run("When does the launch window open?")
    assert calls(result) == [("list_dir", {"path": "."}), ("read_file", {"path": "apples.txt"}),
                             ("read_file", {"path": "notes.txt"})]
    assert "The launch window opens on 3 May." in result.output
    assert "`apples.txt` does not mention launch, window, open." in result.output and "Apples" not in result.output


def test_files_the_file_whose_name_matches_is_read(data):
    result = bettong_nb.offline(root=data).run("Tell me about the missions")
    assert calls(result) == [("list_dir", {"path": "."}), ("read_file", {"path": "missions.csv"})]
    assert "Cassini-Huygens" not in result.output or "missions.csv" in result.output


def test_notebook_cells_are_listed_then_the_one_named_is_read():
    cells = ["import pandas as pd", "sales = pd.read_csv('sales.csv')", "sales.plot()"]

    @bettong_nb.tool
    def list_cells() -> str:
        """List the notebook's cells: index, then the first line."""
        return "\n".join(f"[{i}] {c.splitlines()[0]}" for i, c in enumerate(cells))

    @bettong_nb.tool
    def read_cell(index: int) -> str:
        """Read one cell's source.

        Args:
            index: The cell's index, as list_cells shows it.
        """
        return cells[index]

    agent = bettong_nb.offline(capabilities=[{"id": "notebook", "tools": [list_cells, read_cell]}])
    result = agent.run("What does the cell that reads the sales csv do?")
    assert calls(result) == [("list_cells", {}), ("read_cell", {"index": 1})]
    assert "sales = pd.read_csv('sales.csv')" in result.output


def test_variables_are_listed_then_the_one_named_is_described():
    agent = bettong_nb.offline(capabilities=[caps.namespace({"moons": MOONS, "x": 3})])
    result = agent.run("Describe the moons variable")
    assert calls(result) == [("list_variables", {}), ("describe_variable", {"name": "moons"})]
    assert "DataFrame" in result.output and "Phobos" in result.output


def test_edn_reads_the_file_named_or_says_it_needs_one(tmp_path):
    (tmp_path / "config.edn").write_text('{:port 8080 :host "localhost"}\n')
    agent = bettong_nb.offline(capabilities=[caps.edn(root=tmp_path)])
    result = agent.run("What port does config.edn set?")
    assert calls(result) == [("read_edn", {"path": "config.edn"})] and ":port 8080" in result.output
    unnamed = agent.run("What port is configured?")
    assert calls(unnamed) == [] and "read_edn needs the path of an .edn file" in unnamed.output


# --- search, shell, Python ----------------------------------------------------------------------

def test_search_sends_the_prompt_as_the_query_to_a_real_server():
    body = {"query": {"search": [{"title": "Rich Hickey", "pageid": 1, "snippet": "Creator of <b>Clojure</b>."}]}}
    with LoopbackServer(lambda request: Reply.json(body)) as server:
        agent = bettong_nb.offline(capabilities=[caps.wikipedia(base_url=server.url)])
        result = agent.run("Search for rich hickey")
        (request,) = server.requests
    assert calls(result) == [("wikipedia_search", {"query": "rich hickey"})]
    assert "rich hickey" in json.dumps(request.query) and "Rich Hickey" in result.output


def test_the_shell_lists_then_shows_the_file_named(tmp_path):
    (tmp_path / "todo.txt").write_text("water the plants\n")
    result = bettong_nb.offline(capabilities=[caps.shell(root=tmp_path)]).run("What is on my todo list?")
    assert calls(result) == [("run_shell", {"command": "ls -la"}), ("run_shell", {"command": "head -n 20 -- todo.txt"})]
    assert "water the plants" in result.output


def test_python_runs_the_code_the_prompt_holds():
    agent = bettong_nb.offline(capabilities=[caps.python({"x": 40}, require_approval=False)])
    result = agent.run("What is `x + 2`?")
    assert calls(result) == [("run_python", {"code": "x + 2"})] and "42" in result.output


# --- your tools, MCP --------------------------------------------------------------------------

@bettong_nb.tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        unit: "celsius" or "fahrenheit".
    """
    return f"It is 12 degrees {unit} and raining in {city}"


@bettong_nb.tool
def convert(amount: float, currency: str) -> str:
    """Convert an amount of money to euros.

    Args:
        amount: How much.
        currency: The currency code, like USD.
    """
    return f"{amount} {currency} is {amount * 0.9:.2f} EUR"


def test_your_tool_is_called_with_arguments_from_the_prompt():
    agent = bettong_nb.offline(capabilities=[{"id": "mine", "tools": [get_weather, convert]}])
    result = agent.run("What is the weather in Paris?")
    assert calls(result) == [("get_weather", {"city": "Paris"})]
    assert "raining in Paris" in result.output
    money = agent.run("Convert 20 USD to euros")
    assert calls(money) == [("convert", {"amount": 20.0, "currency": "USD"})] and "18.00 EUR" in money.output


def test_a_tool_whose_arguments_are_not_in_the_prompt_is_not_called_and_the_answer_says_what_it_needs():
    agent = bettong_nb.offline(capabilities=[{"id": "mine", "tools": [convert]}])
    result = agent.run("Convert my money please")
    assert calls(result) == []
    assert "I would call `convert`, but it needs `amount` (How much.); `currency`" in result.output


def test_nothing_matching_among_several_tools_calls_none():
    result = bettong_nb.offline(capabilities=[{"id": "mine", "tools": [get_weather, convert]}]).run("Hello there")
    assert calls(result) == [] and "None of my tools (`get_weather`, `convert`) fits" in result.output


def test_an_mcp_tool_is_called_on_a_real_server(tmp_path):
    log = tmp_path / "log"
    server = caps.mcp(command=[sys.executable, str(TESTS / "support" / "mcp_server.py"), str(log)], tools=["echo", "slow"])
    try:
        agent = bettong_nb.offline(capabilities=[server])
        result = agent.run("Please echo 'hello there'")
        assert calls(result) == [("echo", {"text": "hello there"})] and "echo: hello there" in result.output
        waits = agent.run("Use the slow tool")
        assert calls(waits) == [] and "it needs `seconds`" in waits.output
    finally:
        server.close()
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e for e in logged if "tool" in e] == [{"tool": "echo", "args": {"text": "hello there"}}]


# --- what it cannot do ---------------------------------------------------------------------------

def test_no_tools_says_so_and_how_to_get_a_real_model():
    result = bettong_nb.offline().run("What is the capital of France?")
    assert result.output.startswith("I have no tools in this run")
    assert "bettong_nb.deepseek()" in result.output and "bettong_nb.openai(base_url=...)" in result.output


def test_an_error_to_explain_gets_one_line_naming_the_error_and_a_real_model(data):
    from bettong_nb.notebook.line_commands import EXPLAIN, FIX

    error = ("In [3]:\nprint(y)\n\n---------------------------------------------------------------------------\n"
             "NameError                                 Traceback (most recent call last)\nCell In[3], line 1\n"
             "----> 1 print(y)\n\nNameError: name 'y' is not defined")
    agent = bettong_nb.offline(root=data)
    for ask in (EXPLAIN, FIX.format(language="python")):
        result = agent.run(f"{ask}\n\n{error}")
        assert calls(result) == [] and len(result.output.splitlines()) == 1
        assert result.output.startswith("`NameError: name 'y' is not defined`: explaining or fixing an error needs "
                                        "a real model")
        assert "%config AgentMagics.model" in result.output and "DEEPSEEK_API_KEY" in result.output


# --- structured output, determinism, usage -------------------------------------------------------

@dataclasses.dataclass
class Busiest:
    planet: str
    moons: int


def test_structured_output_is_built_from_the_query_result(data):
    result = bettong_nb.offline(capabilities=[caps.duckdb(root=data)], output_type=Busiest).run(
        "Which planet has the most moons?")
    assert result.done and result.data == Busiest("Jupiter", 3)
    counts = bettong_nb.offline(capabilities=[caps.duckdb(root=data)], output_type=list[Busiest]).run(
        "How many moons does each planet have?")
    assert counts.data == [Busiest("Jupiter", 3), Busiest("Mars", 2), Busiest("Saturn", 2), Busiest("Earth", 1)]


RUN = """
import json, sys
import bettong_nb
from bettong_nb import capabilities as caps
result = bettong_nb.offline(capabilities=[caps.duckdb(root=sys.argv[1])]).session()
first = result.run("Which planet has the most moons?")
second = result.run("How many missions did NASA launch?")
print(json.dumps([first.messages, second.messages, [first.usage.total_tokens, second.usage.cache_hit_tokens]]))
"""


def test_the_same_input_gives_the_same_output_whatever_the_hash_seed(data):
    def run(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        return subprocess.run([sys.executable, "-c", RUN, str(data)], capture_output=True, text=True, check=True,
                              env=env).stdout

    first, again = run("1"), run("2")
    assert first == again
    messages, _, (total, cached) = json.loads(first)
    assert total > 0 and cached > 0  # the second turn's prefix counts as cached


def test_usage_is_estimated_from_the_characters_sent_and_answered(data):
    result = bettong_nb.offline(capabilities=[caps.duckdb(root=data)]).run("Which planet has the most moons?")
    (first, *_rest, last) = result.requests
    assert result.usage.requests == 4 and first.usage.cache_hit_tokens == 0
    assert last.usage.prompt_tokens > first.usage.prompt_tokens > 100
    assert last.usage.completion_tokens == len(json.dumps([{"type": "text", "text": result.output}])) // 4


# --- hostile inputs ----------------------------------------------------------------------------

def test_quotes_and_odd_column_names_make_valid_sql(tmp_path):
    (tmp_path / "crew.csv").write_text('name,"home port",ship\nO\'Brien,Dublin,Defiant\nSisko,New Orleans,Defiant\n')
    agent = bettong_nb.offline(capabilities=[caps.duckdb(root=tmp_path)])
    result = agent.run("Which crew are from 'O'Brien'? And how many crew per home port?")
    (_, args), = calls(result)[-1:]
    assert '"home port"' in args["sql"] and result.tool_calls[-1].status == "ok"
    quoted = agent.run('Which crew is named "O\'Brien"?')
    assert "ILIKE '%O''Brien%'" in calls(quoted)[-1][1]["sql"] and "| O'Brien | Dublin | Defiant |" in quoted.output


def test_a_file_that_does_not_exist_is_reported_not_invented(data):
    result = bettong_nb.offline(capabilities=[caps.duckdb(root=data)]).run("How many rows are in comets.csv?")
    assert calls(result) == [("describe_data", {"path": "comets.csv"})]
    assert result.output.startswith("describe_data failed:") and "comets.csv" in result.output
    assert "| " not in result.output  # no table it did not get


def test_a_file_holding_the_words_of_a_denial_is_quoted_not_taken_for_one(tmp_path):
    # (a result that starts with "ERROR:" is marked an error by the loop itself, so this one does not)
    (tmp_path / "log.txt").write_text("09:00 start\nERROR: read_file was not allowed: a line in a log\n")
    result = bettong_nb.offline(root=tmp_path).run("What does log.txt say?")
    assert "not allowed: a line in a log" in result.output and not result.output.startswith("read_file was not")


def test_an_earlier_turns_results_never_answer_a_later_one(data, tmp_path):
    chat = bettong_nb.offline(capabilities=[caps.duckdb(root=data), {"id": "mine", "tools": [get_weather]}]).session()
    chat.run("Which planet has the most moons?")
    weather = chat.run("What is the weather in Hobart?")
    assert calls(weather) == [("get_weather", {"city": "Hobart"})]
    assert "Jupiter" not in weather.output and "raining in Hobart" in weather.output


def test_an_image_prompt_is_read_for_its_text(data):
    from bettong_nb.core.images import Image

    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415478"
                        "9c63f8cfc000000301010018dd8db00000000049454e44ae426082")
    result = bettong_nb.offline(capabilities=[caps.duckdb(root=data)]).run(
        ["Which missions went to Saturn?", Image(png, "image/png")])
    assert "Cassini-Huygens" in result.output
