"""How the offline model works with each kind of tool: the next call of this turn, then the answer.

One plan is chosen per turn, the one whose tools and cue words the prompt names most (ties go in
the order of :func:`plans_for`):

- SQL (``query_data``, ``describe_data``): list the data files (a ``glob``) unless tables are
  registered, describe the one the prompt names, run one query built from the prompt's words;
- files (``list_dir``, ``read_file``): read a file the prompt names, else list and read the file
  whose name matches, else the ones whose text does (three at most);
- notebook cells (``list_cells``, ``read_cell``) and variables (``list_variables``,
  ``describe_variable``): list, then read the entry the prompt names;
- EDN (``read_edn``): the .edn file the prompt names;
- search (a tool named ``*search*`` with a ``query``): the prompt as the query;
- shell (``run_shell``): ``ls -la``, then ``head`` of a file the prompt names;
- Python (``run_python``): the code the prompt holds, else a look at the names defined;
- any other tool (yours, an MCP server's): the one whose name and description match, with
  arguments from its schema (see :mod:`._arguments`).
"""

from __future__ import annotations

import re

from ._arguments import arguments, the_prompt_itself
from ._sql import LISTING, data_files, described, parse_table, sql_for, tables_offered
from ._turn import Step, Turn
from ._words import file_names, first_line, keywords, matches, name_words, overlap, words

__all__ = ["Plan", "plans_for", "choose", "quote", "markdown_table"]

_QUOTE_LINES = 12


def quote(text: str, lines: int = _QUOTE_LINES) -> str:
    """A fenced excerpt: the first ``lines`` lines, and how many there were."""
    body = text.strip("\n").splitlines()
    shown = "\n".join(body[:lines]).replace("```", "'''")
    more = f"\n… ({len(body)} lines in all)" if len(body) > lines else ""
    return f"```\n{shown}{more}\n```"


def markdown_table(names: list[str], rows: list[list[str]], limit: int = 10) -> str:
    def cell(value: str) -> str:
        return value.replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, names)) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows[:limit]]
    return "\n".join(lines)


class Plan:
    """A way of working with some tools. ``cues``: words that ask for this kind of work."""

    tools: tuple[str, ...] = ()
    cues: frozenset[str] = frozenset()

    def offered(self, turn: Turn) -> bool:
        return any(t in turn.tools for t in self.tools)

    def relevance(self, turn: Turn) -> int:
        said = words(turn.prompt)
        own = " ".join(f"{t} {turn.tools[t].get('description', '')}" for t in self.tools if t in turn.tools)
        named = sum(3 for t in self.tools if t in turn.tools and t in turn.prompt)
        return overlap(keywords(turn.prompt), own) + sum(1 for w in said if w in self.cues) + named

    def next_call(self, turn: Turn) -> list[dict] | None:
        raise NotImplementedError

    def answer(self, turn: Turn) -> list[str]:
        raise NotImplementedError


def _ok(turn: Turn, name: str) -> list[Step]:
    return [s for s in turn.done(name) if not s.error]


class Sql(Plan):
    tools = ("query_data", "describe_data")
    cues = frozenset("sql query table tables rows row column columns count average mean sum total many most least "
                     "largest smallest highest lowest per group top data dataset".split())

    def _tables(self, turn: Turn) -> list[str]:
        return tables_offered(turn.tools.get("query_data", {}).get("description", ""))

    def _candidates(self, turn: Turn) -> list[str]:
        listing = next((s for s in _ok(turn, "query_data") if s.args.get("sql") == LISTING), None)
        return self._tables(turn) or ([] if listing is None else data_files(listing.text, turn.instructions))

    def _table(self, turn: Turn):
        step = next(iter(_ok(turn, "describe_data")), None)
        return None if step is None else described(step.args.get("path", ""), step.text, self._tables(turn))

    def next_call(self, turn: Turn) -> list[dict] | None:
        if "query_data" not in turn.tools:
            return None
        if not turn.done("describe_data") and "describe_data" in turn.tools:
            named = [f for f in file_names(turn.prompt) if not f.startswith("/")]
            if named and not self._tables(turn):
                return turn.call("describe_data", {"path": named[0]})
            candidates = self._candidates(turn)
            if candidates:
                return turn.call("describe_data", {"path": _best(candidates, turn.prompt)})
            if not self._tables(turn) and not turn.done("query_data"):
                return turn.call("query_data", {"sql": LISTING})
            return None
        table = self._table(turn)
        queries = [s for s in turn.done("query_data") if s.args.get("sql") != LISTING]
        if table is not None and not queries:
            return turn.call("query_data", {"sql": sql_for(table, turn.prompt)})
        if table is not None and len(queries) == 1 and queries[0].error and not queries[0].denied:
            return turn.call("query_data", {"sql": f"SELECT * FROM {table.source} LIMIT 20"})  # a simpler query
        return None

    def answer(self, turn: Turn) -> list[str]:
        lines, table = [], self._table(turn)
        if table is not None:
            columns = ", ".join(f"{name} ({kind.lower()})" for name, kind in table.columns)
            lines.append(f"`{table.name}` has {table.rows:,} rows; its columns: {columns}.")
        elif not turn.done("describe_data"):
            candidates = self._candidates(turn)
            listed = ", ".join(f"`{c}`" for c in candidates[:12])
            lines.append(f"The data I can query: {listed}." if candidates else "I found no data files to query.")
        for step in _ok(turn, "query_data"):
            if step.args.get("sql") == LISTING:
                continue
            names, rows, rest = parse_table(step.text)
            lines += [f"I ran:\n```sql\n{step.args.get('sql')}\n```"]
            if not rows:
                lines.append("It returned no rows.")
                continue
            lines.append(markdown_table(names, rows))
            lines += [r for r in rest if r.strip()][:1]
            if len(rows) == 1 and len(names) <= 3:
                lines.append("So: " + ", ".join(f"{n} = **{v}**" for n, v in zip(names, rows[0])) + ".")
            else:
                lines.append("First row: " + ", ".join(f"{n} = **{v}**" for n, v in zip(names, rows[0])) + ".")
        return lines



def _best(candidates: list[str], prompt: str) -> str:
    """The candidate whose name the prompt's words name most; ties keep the given order, and a
    README comes last."""
    said = [*keywords(prompt), *re.findall(r"\b\d{4}\b", prompt)]
    return min(candidates, key=lambda c: (-overlap(said, c), name_words(c)[-2:-1] == ["readme"]
                                          or c.lower().startswith("readme"), candidates.index(c)))


class Files(Plan):
    tools = ("list_dir", "read_file")
    cues = frozenset("file files folder directory read readme contents document text open inside".split())

    def next_call(self, turn: Turn) -> list[dict] | None:
        reads = turn.done("read_file")
        read = [s.args.get("path") for s in reads]
        named = [f for f in file_names(turn.prompt) if f not in read and "*" not in f]
        if "read_file" in turn.tools and named and not reads:
            return turn.call("read_file", {"path": named[0]})
        if any(not s.error and s.args.get("path") in file_names(turn.prompt) for s in reads):
            return None  # the file the prompt names is read
        if "list_dir" in turn.tools and not turn.done("list_dir"):
            return turn.call("list_dir", {"path": "."})
        if "read_file" not in turn.tools:
            return None
        files, folders = self._entries(turn)
        said = keywords(turn.prompt)
        named_folder = next((d for d in folders if overlap(said, d) and all(overlap(said, f) == 0 for f in files)), None)
        listed = [s.args.get("path", ".") for s in turn.done("list_dir")]
        if named_folder and named_folder.rstrip("/") not in listed and len(listed) < 3:
            return turn.call("list_dir", {"path": named_folder.rstrip("/")})
        if not files and folders and len(listed) < 3 and not reads:
            return turn.call("list_dir", {"path": folders[0].rstrip("/")})
        done_reading = reads and (len(reads) >= 3 or any(not s.error and (overlap(said, s.args.get("path", ""))
                                                                        or _matching_lines(s.text, said))
                                                         for s in reads) or not said)
        unread = [f for f in _ranked(files, turn.prompt) if f not in read]
        if done_reading or not unread:
            return None
        return turn.call("read_file", {"path": unread[0]})

    @staticmethod
    def _entries(turn: Turn) -> tuple[list[str], list[str]]:
        files, folders = [], []
        for step in _ok(turn, "list_dir"):
            base = step.args.get("path", ".").strip("/")
            for line in step.text.splitlines():
                name = line.strip()
                if not name or name.startswith("(") or name.startswith("…"):
                    continue
                path = name if base in ("", ".") else f"{base}/{name}"
                (folders if name.endswith("/") else files).append(path)
        return files, folders

    def answer(self, turn: Turn) -> list[str]:
        lines, said = [], keywords(turn.prompt)
        for step in _ok(turn, "list_dir"):
            entries = [line.strip() for line in step.text.splitlines() if line.strip()]
            where = step.args.get("path", ".")
            lines.append(f"`{where}` holds {len(entries)} entries: " + ", ".join(f"`{e}`" for e in entries[:20])
                         + (" …" if len(entries) > 20 else "") + ".")
        reads = _ok(turn, "read_file")
        any_found = any(_matching_lines(s.text, said) for s in reads)
        for step in reads:
            body = step.text.splitlines()
            found = _matching_lines(step.text, said)
            if any_found and not found:
                lines.append(f"`{step.args.get('path')}` does not mention {', '.join(said)}.")
            elif found and (len(found) > 1 or len(reads) > 1):
                lines.append(f"`{step.args.get('path')}` ({len(body)} lines); the lines that mention "
                             f"{', '.join(w for w in said if _mentions(step.text, w))}:\n" + quote("\n".join(found)))
            else:
                lines.append(f"`{step.args.get('path')}` ({len(body)} lines) begins:\n" + quote(step.text, 8))
        if _ok(turn, "read_file") and re.search(r"\b(how many|most|least|average|total|count)\b", turn.prompt, re.I):
            lines.append("I can quote files but not compute over them: give the agent `caps.duckdb(root=...)` to "
                         "answer with SQL.")
        return lines


def _mentions(text: str, word: str) -> bool:
    return any(matches(word, w) for w in words(text))


def _matching_lines(text: str, said: list[str]) -> list[str]:
    return [line for line in text.splitlines() if said and any(matches(w, x) for x in words(line) for w in said)]


def _ranked(files: list[str], prompt: str) -> list[str]:
    """Files whose names the prompt names first; then data before a README; else as listed."""
    said = keywords(prompt)
    return sorted(files, key=lambda f: (-overlap(said, f), f.rsplit("/", 1)[-1].lower().startswith("readme"),
                                        files.index(f)))


class ListThenRead(Plan):
    """A listing tool, then a reading tool given one entry of the listing (cells, variables)."""

    def __init__(self, lister: str, reader: str, cues: str):
        self.tools, self.cues = (lister, reader), frozenset(cues.split())

    def next_call(self, turn: Turn) -> list[dict] | None:
        lister, reader = self.tools
        if lister in turn.tools and not turn.done(lister):
            return turn.call(lister, {})
        if reader not in turn.tools or turn.done(reader):
            return None
        schema = (turn.tools[reader].get("parameters") or {})
        required = schema.get("required") or list(schema.get("properties") or {})[:1]
        if not required:
            return None
        kind = ((schema.get("properties") or {}).get(required[0]) or {}).get("type", "string")
        lines = [line for s in _ok(turn, lister) for line in s.text.splitlines() if line.strip()]
        entries = _entries(lines, required[0], kind, first_line(turn.prompt, 1000)[:40])
        said = words(turn.prompt)
        named = [key for _, key in entries if str(key).lower() in said]
        ranked = [key for _, key in sorted(entries, key=lambda entry: -overlap(keywords(turn.prompt), entry[0]))]
        chosen = (named or ranked or [None])[0]
        return None if chosen is None else turn.call(reader, {required[0]: chosen})

    def answer(self, turn: Turn) -> list[str]:
        lister, reader = self.tools
        lines = [f"{lister} shows:\n" + quote(s.text) for s in _ok(turn, lister)]
        lines += [f"{reader}({', '.join(f'{k}={v!r}' for k, v in s.args.items())}) shows:\n" + quote(s.text, 20)
                  for s in _ok(turn, reader)]
        return lines


def _key(line: str, kind: str) -> str | int | None:
    """The entry a listing line names: its first number for an integer parameter, else its first word."""
    if kind == "integer":
        number = re.search(r"\d+", line)
        return None if number is None else int(number.group())
    word = re.match(r"\W*([\w.-]+)", line)
    return None if word is None else word.group(1)


def _entries(lines: list[str], parameter: str, kind: str, asking: str) -> list[tuple[str, str | int]]:
    """(line, what the reader is given) for each entry of a listing. A listing that labels its
    entries with the parameter's last word (``id=e9a2f6c1`` for a ``cell_id``) is read by those
    labels, so its header line is no entry; the entry holding the request itself (the cell it is
    asked from) is never the one it asks about."""
    label = parameter.rsplit("_", 1)[-1]
    labelled = [] if kind == "integer" else [
        (line, found.group(1)) for line in lines if (found := re.search(rf"(?<![\w-]){re.escape(label)}=([\w.-]+)", line))]
    keyed = labelled or [(line, _key(line, kind)) for line in lines]
    return [(line, key) for line, key in keyed if key is not None and not (asking and asking in line)]


class Edn(Plan):
    tools = ("read_edn",)
    cues = frozenset("edn config configuration setting settings key keys".split())

    def next_call(self, turn: Turn) -> list[dict] | None:
        named = [f for f in file_names(turn.prompt) if f.lower().endswith(".edn")]
        if named and not turn.done("read_edn"):
            return turn.call("read_edn", {"path": named[0]})
        return None

    def answer(self, turn: Turn) -> list[str]:
        if not turn.done("read_edn"):
            return ["read_edn needs the path of an .edn file: name it in your request (for example `config.edn`)."]
        return [f"`{s.args.get('path')}` holds:\n" + quote(s.text, 20) for s in _ok(turn, "read_edn")]


class Search(Plan):
    cues = frozenset("search web internet online news latest look find google".split())

    def __init__(self, name: str):
        self.tools = (name,)

    def next_call(self, turn: Turn) -> list[dict] | None:
        name = self.tools[0]
        return None if turn.done(name) else turn.call(name, {"query": the_prompt_itself(turn.prompt)})

    def answer(self, turn: Turn) -> list[str]:
        return [f"{s.name} for {s.args.get('query')!r} found:\n" + quote(s.text, 9) for s in _ok(turn, self.tools[0])]


class Shell(Plan):
    tools = ("run_shell",)
    cues = frozenset("shell command bash terminal run ls disk process processes".split())

    def next_call(self, turn: Turn) -> list[dict] | None:
        runs = turn.done("run_shell")
        if not runs:
            return turn.call("run_shell", {"command": "ls -la"})
        said = keywords(turn.prompt)
        if len(runs) == 1 and not runs[0].error:
            names = [line.split()[-1] for line in runs[0].text.splitlines()[1:]
                     if line.startswith("-") and len(line.split()) >= 9]
            named = [n for n in names if overlap(said, n) or n in turn.prompt]
            if named and re.fullmatch(r"[\w.-]+", named[0]):
                return turn.call("run_shell", {"command": f"head -n 20 -- {named[0]}"})
        return None

    def answer(self, turn: Turn) -> list[str]:
        return [f"`{s.args.get('command')}` printed:\n" + quote(s.text, 20) for s in _ok(turn, "run_shell")]


class Python(Plan):
    """run_python: the code the prompt holds (a fenced block or `backticks`), else a harmless look at
    the names defined."""

    tools = ("run_python",)
    cues = frozenset("python code run compute calculate evaluate execute".split())
    LOOK = "sorted(name for name in globals() if not name.startswith('_'))"

    def next_call(self, turn: Turn) -> list[dict] | None:
        if turn.done("run_python"):
            return None
        fenced = re.search(r"```(?:python|py)?\n(.*?)```", turn.prompt, re.S)
        inline = re.search(r"`([^`\n]+)`", turn.prompt)
        code = fenced.group(1).strip() if fenced else inline.group(1) if inline else self.LOOK
        return turn.call("run_python", {"code": code})

    def answer(self, turn: Turn) -> list[str]:
        return [f"I ran:\n```python\n{s.args.get('code')}\n```\nIt gave:\n" + quote(s.text, 20)
                for s in _ok(turn, "run_python")]


class Custom(Plan):
    """One tool the model has no plan for: called once with arguments from its schema."""

    def __init__(self, name: str):
        self.tools = (name,)

    def relevance(self, turn: Turn) -> int:
        schema = turn.tools[self.tools[0]]
        own = f"{self.tools[0]} {schema.get('description', '')}"
        return overlap(keywords(turn.prompt), own) * 2 + (3 if self.tools[0] in turn.prompt else 0)

    def next_call(self, turn: Turn) -> list[dict] | None:
        name = self.tools[0]
        values, missing = arguments(turn.tools[name], turn.prompt)
        return None if turn.done(name) or missing else turn.call(name, values)

    def answer(self, turn: Turn) -> list[str]:
        name = self.tools[0]
        if not turn.done(name):
            _, missing = arguments(turn.tools[name], turn.prompt)
            properties = (turn.tools[name].get("parameters") or {}).get("properties") or {}
            wanted = "; ".join(f"`{m}`" + (f" ({properties[m]['description']})"
                                           if isinstance(properties.get(m), dict) and properties[m].get("description")
                                           else "") for m in missing)
            return [f"I would call `{name}`, but it needs {wanted}, which I could not find in your request: "
                    "write it in (in quotes, or as a capitalised name or a number)."]
        return [f"`{name}({', '.join(f'{k}={v!r}' for k, v in s.args.items())})` returned:\n" + quote(s.text, 20)
                for s in _ok(turn, name)]


_BUILT_IN = ("query_data", "describe_data", "list_dir", "read_file", "write_file", "delete_file", "list_cells",
             "read_cell", "list_variables", "describe_variable", "read_edn", "set_edn", "delete_edn", "run_shell",
             "run_python")


def _is_search(schema: dict) -> bool:
    properties = (schema.get("parameters") or {}).get("properties") or {}
    return "search" in schema["name"].lower() and "query" in properties


def plans_for(turn: Turn) -> list[Plan]:
    """The plans this request's tools allow, in the order ties are broken."""
    plans: list[Plan] = [Sql(), ListThenRead("list_cells", "read_cell", "cell cells notebook code"),
                         ListThenRead("list_variables", "describe_variable",
                                      "variable variables namespace dataframe frame df object"),
                         Files(), Edn()]
    plans += [Search(name) for name, schema in turn.tools.items() if _is_search(schema)]
    plans += [Shell(), Python()]
    plans += [Custom(name) for name, schema in turn.tools.items() if name not in _BUILT_IN and not _is_search(schema)]
    return [p for p in plans if p.offered(turn)]


def choose(turn: Turn) -> Plan | None:
    """The plan for this turn: the most relevant, ties in :func:`plans_for` order. A tool of your own
    is chosen only when the prompt names it or its description, or when it is the only tool."""
    plans = plans_for(turn)
    scored = [(p.relevance(turn), -i, p) for i, p in enumerate(plans)]
    scored = [s for s in scored if not (isinstance(s[2], Custom) and s[0] == 0 and len(plans) > 1)]
    return max(scored, key=lambda s: s[:2])[2] if scored else None
