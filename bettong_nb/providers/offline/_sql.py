"""SQL for the offline model: which data to describe, and one query built from the prompt's words
and the columns ``describe_data`` showed.

    table = described("moons.csv", describe_text)
    sql_for(table, "Which planet has the most moons?")
    # SELECT planet, count(*) AS moons FROM 'moons.csv' GROUP BY planet ORDER BY moons DESC, planet

The rules are few and fixed: a column is used when the prompt names it (``launch year`` names
``launch_year``, ``moons`` names ``moon``); "how many", "average", "total", "most"/"least" pick
the aggregate; "per"/"by"/"each" or a second named text column groups; capitalised words and
quoted text filter the text columns (the one a sample row shows the value in, when one does);
a year filters a date column or a ``*year*`` column.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from ._words import matches, name_words, numbers, proper_nouns, quoted, words

__all__ = ["Table", "LISTING", "described", "sql_for", "tables_offered", "data_files", "parse_table", "source_for"]

# The kinds of file describe_data reads (capabilities/duckdb.py's readers, Excel included).
_DATA_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".json", ".ndjson", ".jsonl", ".xlsx", ".xls",
                  ".csv.gz", ".json.gz")
_TEXT = ("VARCHAR", "TEXT", "STRING", "CHAR", "ENUM")
_NUMBER = ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC", "HUGEINT", "BIGINT")
_DATE = ("DATE", "TIMESTAMP")
_COUNT = {"how many", "count", "number of"}
_AVERAGE = {"average", "avg", "mean"}
_TOTAL = {"total", "sum"}
_MOST = {"most", "largest", "biggest", "highest", "top", "longest", "max", "maximum", "greatest", "heaviest"}
_LEAST = {"least", "smallest", "lowest", "fewest", "shortest", "min", "minimum", "lightest"}
_GROUP = {"per", "each", "by", "every"}
_UNIT_WORDS = frozenset({"km", "kg", "au", "id", "days", "day", "mean", "1e24", "usd", "pct"})


@dataclass(frozen=True)
class Table:
    """What describe_data said about one file, glob or table."""

    name: str  # as describe_data was given it
    source: str  # how SQL names it: a quoted path literal or a table identifier
    columns: list[tuple[str, str]]
    sample: list[dict[str, str]]
    rows: int | None


def tables_offered(description: str) -> list[str]:
    """The registered tables query_data's description lists (``Tables: sales, targets.``)."""
    match = re.search(r"Tables: (.+?)\.(?:\s|$)", description or "")
    return [t.strip() for t in match.group(1).split(",")] if match else []


LISTING = "SELECT parse_path(file)[-2] AS folder, parse_filename(file) AS name FROM glob('**/*') ORDER BY file"


def data_files(listing: str, instructions: str) -> list[str]:
    """The data files of the :data:`LISTING` query's result, relative to the data folder (a file in
    a subfolder as ``folder/name``), with a glob for each folder holding several files of one kind
    (``sales/*.parquet``) before its files."""
    _, rows, _ = parse_table(listing)
    rows = [row for row in rows if len(row) == 2 and row[1].lower().endswith(_DATA_SUFFIXES)]
    if not rows:
        return []
    match = re.search(r"Data files are in the folder (.+?); write", instructions)
    root = posixpath.basename(posixpath.normpath(match.group(1))) if match else ""
    if root in ("", ".", ".."):
        root = rows[0][0]  # the folder is not named: take the first file's as the data folder
    relative = [name if folder == root else f"{folder}/{name}" for folder, name in rows]
    groups: dict[tuple[str, str], list[str]] = {}
    for path in relative:
        folder, name = posixpath.split(path)
        groups.setdefault((folder, posixpath.splitext(name)[1]), []).append(path)
    found: list[str] = []
    for (folder, suffix), members in groups.items():
        if len(members) > 1:
            found.append(posixpath.join(folder, "*" + suffix))
        found += members
    return found


def source_for(name: str, tables: list[str]) -> str:
    """How SQL names a described thing: a registered table as an identifier, a file as a literal."""
    if name in tables:
        return _identifier(name)
    return "'" + name.replace("'", "''") + "'"


def described(name: str, text: str, tables: list[str]) -> Table | None:
    """describe_data's answer read back: ``path: N rows, K columns``, the columns, the first rows."""
    lines = text.splitlines()
    head = re.match(r".*: ([\d,]+) rows?, \d+ columns?$", lines[0]) if lines else None
    if head is None:
        return None
    columns = []
    for line in lines[1:]:
        if line == "First rows:":
            break
        parts = line.strip().rsplit("  ", 1)
        if len(parts) == 2:
            columns.append((parts[0].strip(), parts[1].strip()))
    sample_text = text.split("First rows:\n", 1)[1] if "First rows:\n" in text else ""
    names, rows, _ = parse_table(sample_text)
    sample = [dict(zip(names, row)) for row in rows]
    return Table(name, source_for(name, tables), columns, sample, int(head.group(1).replace(",", "")))


def parse_table(text: str) -> tuple[list[str], list[list[str]], list[str]]:
    """query_data's text table read back: (column names, rows of cells, the lines after the rows)."""
    lines = text.strip("\n").splitlines()
    if not lines or lines[0].startswith("(no rows"):
        return [], [], lines
    names = [re.sub(r" \([^()]*\)$", "", cell) for cell in lines[0].split(" | ")]
    rows, rest = [], []
    for line in lines[1:]:
        cells = line.split(" | ")
        if not rest and len(cells) == len(names) and not line.startswith(("(", "… ")):
            rows.append(cells)
        else:
            rest.append(line)
    return names, rows, rest


def _identifier(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _kind(kind: str, kinds: tuple[str, ...]) -> bool:
    return kind.upper().startswith(kinds) or any(k in kind.upper() for k in kinds if k != "INT")


def _mentions(table: Table, prompt_words: list[str]) -> dict[str, int]:
    """Column -> where the prompt first names it (word index): its whole name (``launch year``),
    the name itself as one word, or a distinctive part of it (``radius`` of ``mean_radius_km``)."""
    found: dict[str, int] = {}
    for column, _ in table.columns:
        parts = name_words(column)
        for i in range(len(prompt_words)):
            window = prompt_words[i:i + len(parts)]
            whole = len(window) == len(parts) and all(matches(w, p) for w, p in zip(window, parts))
            part = any(len(p) >= 4 and p not in _UNIT_WORDS and matches(prompt_words[i], p) for p in parts)
            if whole or part:
                found[column] = i
                break
    return dict(sorted(found.items(), key=lambda item: item[1]))


def _asks(prompt_words: list[str], phrases: set[str]) -> int | None:
    """Where the prompt first uses one of ``phrases`` (word index), or None."""
    for i in range(len(prompt_words)):
        if prompt_words[i] in phrases or " ".join(prompt_words[i:i + 2]) in phrases:
            return i
    return None


def sql_for(table: Table, prompt: str) -> str:
    """One read-only query that answers ``prompt`` over ``table`` as well as the rules above can."""
    said = words(prompt)
    kinds = dict(table.columns)
    mentioned = _mentions(table, said)
    text_columns = [c for c, k in table.columns if _kind(k, _TEXT)]
    filters, year_columns = _filters(table, prompt, mentioned)
    named_text = [c for c in mentioned if c in text_columns]
    named_numbers = [c for c in mentioned if _kind(kinds[c], _NUMBER) and c not in year_columns]
    count, average, total = _asks(said, _COUNT), _asks(said, _AVERAGE), _asks(said, _TOTAL)
    most, least = _asks(said, _MOST), _asks(said, _LEAST)
    pivot = next((i for i in (count, most, least) if i is not None), None)
    # the thing counted is the text column named right after "how many" / "most"; the others group
    counted = next((c for c in named_text if mentioned[c] > pivot), None) if pivot is not None else None
    after_group = _asks(said, _GROUP)
    # "per planet type": the last text column named in the few words after "per"
    grouped = [c for c in named_text if after_group is not None and 0 < mentioned[c] - after_group <= 3]
    group = grouped[-1] if grouped else next((c for c in named_text if c != counted), None)
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    source = f" FROM {table.source}"
    order = "ASC" if least is not None and (most is None or least < most) else "DESC"
    if (average is not None or total is not None) and named_numbers:
        function = "avg" if average is not None and (total is None or average < total) else "sum"
        value = _identifier(named_numbers[0])
        alias = f"{function}_{named_numbers[0]}" if re.fullmatch(r"\w+", named_numbers[0]) else function
        if group:
            g = _identifier(group)
            return (f"SELECT {g}, round({function}({value}), 2) AS {alias}{source}{where} "
                    f"GROUP BY {g} ORDER BY {alias} {order}, {g}")
        return f"SELECT round({function}({value}), 2) AS {alias}, count(*) AS n{source}{where}"
    if (most is not None or least is not None) and named_numbers and not grouped:
        # "Which moon has the largest radius?": the rows with the largest value, not a group
        value = _identifier(named_numbers[0])
        return f"SELECT *{source}{where} ORDER BY {value} {order} NULLS LAST LIMIT 5"
    if count is not None or most is not None or least is not None or after_group is not None:
        alias = _count_alias(said, pivot if pivot is not None else after_group, counted, kinds)
        if group:
            g = _identifier(group)
            return f"SELECT {g}, count(*) AS {alias}{source}{where} GROUP BY {g} ORDER BY {alias} {order}, {g}"
        if count is not None:
            return f"SELECT count(*) AS {alias}{source}{where}"
    return f"SELECT *{source}{where} LIMIT 20"


def _count_alias(said: list[str], pivot: int, counted: str | None, kinds: dict[str, str]) -> str:
    """The count's name: the prompt's own word for what is counted (``moons``) when it is a safe
    identifier that is not a column's name; else ``n``."""
    after = said[pivot + 2:] if said[pivot:pivot + 2] in (["how", "many"], ["number", "of"]) else said[pivot + 1:]
    word = next((w for w in after if counted is not None and matches(w, counted)), after[0] if after else None)
    if word and re.fullmatch(r"[a-z_]+", word) and word not in kinds and word not in ("the", "rows", "n"):
        return word
    return "n"


def _filters(table: Table, prompt: str, mentioned: dict[str, int]) -> tuple[list[str], list[str]]:
    """WHERE conditions for the values the prompt names, and the columns a year filtered."""
    conditions, year_columns = [], []
    text_columns = [c for c, k in table.columns if _kind(k, _TEXT)]
    stems = name_words(table.name)
    values = [v for v in [*quoted(prompt), *proper_nouns(prompt)]
              if not any(matches(w, c) for w in name_words(v) for c, _ in table.columns)
              and not any(matches(v, s) for s in stems) and not re.fullmatch(r"[\d.]+", v)]
    for value in values:
        shown_in = [c for c in text_columns if any(row.get(c, "").lower() == value.lower() for row in table.sample)]
        columns = shown_in or text_columns
        if columns:
            pattern = _literal("%" + value + "%")
            conditions.append("(" + " OR ".join(f"{_identifier(c)} ILIKE {pattern}" for c in columns) + ")"
                              if len(columns) > 1 else f"{_identifier(columns[0])} ILIKE {pattern}")
    for number in numbers(prompt):
        if not re.fullmatch(r"1[5-9]\d\d|20\d\d", number):
            continue
        dates = [c for c, k in table.columns if _kind(k, _DATE)]
        years = [c for c, k in table.columns if "year" in name_words(c) and _kind(k, _NUMBER)]
        if years:
            conditions.append(f"{_identifier(years[0])} = {number}")
            year_columns.append(years[0])
        elif dates:
            conditions.append(f"year({_identifier(dates[0])}) = {number}")
    return conditions, year_columns
