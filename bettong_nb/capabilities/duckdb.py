"""The DuckDB capability: read-only SQL over a data folder and your DataFrames.

    from bettong_nb import capabilities as caps

    sql = caps.duckdb(root="shop")                      # files below shop/
    sql = caps.duckdb(tables={"sales": df})             # only your DataFrames (pandas, polars, pyarrow)
    sql.query("SELECT region, sum(amount) FROM 'sales/*.parquet' GROUP BY ALL").data   # a DataFrame
    result = agent.run("Which region sold most in 2024?")
    df = result.frames()[-1]                            # the last query's full result

Tools: ``query_data(sql)`` runs one read-only query and answers with a bounded text table
(column names and types, at most ``max_rows`` rows and ``max_chars`` characters, the total
row count); the full result, up to :data:`MAX_DATA_ROWS` rows and :data:`MAX_DATA_BYTES` bytes
in memory, is the ToolOutput's ``data`` for the person, never sent to the model (a cut result is
marked ``data.attrs["truncated"]`` and the model is told). Integers wider than 64 bits (what
``sum()`` of integers gives) and decimals of more than 15 digits stay exact: int64, Python ints
or Decimals, never floats. ``describe_data(path)`` shows the columns, row count
and first rows of a CSV / TSV / Parquet / JSON / NDJSON / Excel file (or a glob of them, or a
registered table). In SQL, a path is relative to the root when written as a string literal
(``FROM 'sales/2024.parquet'``, ``read_csv('products.csv')``, globs like ``'sales/*.parquet'``).

Confinement, in layers:

* DuckDB's own: before any query the connection gets ``allowed_directories=[root]`` and
  ``enable_external_access=false``, no extension installing or loading, no Python variable
  lookup, no spilling to disk, then ``lock_configuration=true``. Reads outside the root
  (absolute paths, ``..``, symlinks leading out, remote URLs) fail in DuckDB itself.
* Statements: only one statement per call, and only a plain query (SELECT, WITH, FROM,
  VALUES, DESCRIBE, SUMMARIZE, SHOW), judged by DuckDB's parser; a comment cannot hide a second
  statement. Table functions are allowlisted (the file readers, ``range``, ``unnest``, catalog
  listings), so ``query()``, logging and checkpoint functions, pointer scans and
  ``json_execute_serialized_sql`` are refused, as are ``current_setting``/``getenv``/``write_log``
  and ``setseed``; so are their named parameters, per function (``read_csv``'s ``store_rejects``
  and ``rejects_table``, which would keep the lines it could not parse in a table, and
  ``read_parquet``'s ``encryption_config`` are not among them).
  The table-function allowlist is applied to the bound plan (``EXPLAIN``) too, where every view is
  expanded into the functions it reads: ``pg_catalog.pg_settings`` (``duckdb_settings()``),
  ``duckdb_logs`` and any other view over settings, secrets, logs or extensions is refused
  whatever its name, while ``information_schema.tables`` or ``SHOW TABLES`` work.
* Nothing outlives a query: each runs on a connection of its own that is closed after it, so no
  temporary table, view, macro, type, variable or secret it might make is there for the next one
  (a plain query cannot write to the catalog the connections share: the frames' views);
  persistent secrets are off.
* Credential files (``.env``, ``.ssh/``, ``*.pem``, ... as for the filesystem capability) are
  judged where a file is really opened: DuckDB logs every file its queries open, and a query
  that opened one has its result and error message thrown away. So a glob (``'*'`` matches
  ``.env``), a path computed in SQL (``'.e' || 'nv'``) or a harmless-named symlink to a key
  reads nothing back. A literal path naming one regular file (the common case) is judged before
  the query, by the real path DuckDB will open, and refused there; a query whose every path is
  such a literal does not need the log, and runs on a second in-memory database, alike but for
  keeping none. (``read_blob`` without its content column reads only a file's size.)
* Values are redacted before they are cut or escaped for the text table (a cell longer than 60
  characters, or holding a line break, ``|`` or ``\\``), so a secret astride the cut is hidden
  whole; a value DuckDB quotes cut short in an error message is withheld.
* A query runs in a worker thread and is interrupted after ``timeout`` seconds; DuckDB's
  memory is capped by ``memory_limit``; ``threads`` caps its worker threads.

Excel files need openpyxl; they are read in Python through the same confined root, because
DuckDB's Excel extension would have to be downloaded.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import stat
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, NamedTuple

from ..safety.rooted import Root, read_up_to
from ..core.capability import Tool, ToolOutput
from ..core.portable import rebuild, withheld
from ..safety.secrets import is_credential_path, redact

__all__ = ["duckdb", "DuckDB", "MAX_DATA_ROWS", "MAX_DATA_BYTES"]

MAX_DATA_ROWS = 1_000_000  # rows of a result kept as the person's DataFrame
MAX_DATA_BYTES = 100_000_000  # and its size in memory: wide rows stop being kept sooner
_SAMPLE_ROWS = 5  # rows describe_data shows
_CELL_CHARS = 60  # longest cell shown in the text table
# A result of at most this many rows and bytes the last time its query ran has its values taken once
# as Python objects (see _fetch), which a long text would double in memory.
_FEW_ROWS = 256
_FEW_BYTES = 1_000_000
_CHUNK_VECTORS = 16  # at most this many DuckDB vectors (2048 rows each) fetched at a time ...
_CHUNK_BYTES = 8_000_000  # ... fewer when the rows are wide, so one fetch stays about this size
_EXCEL_BYTES = 50_000_000

_READERS = {  # describe_data: file suffix -> DuckDB reader
    ".parquet": "read_parquet", ".pq": "read_parquet", ".parq": "read_parquet",
    ".csv": "read_csv", ".tsv": "read_csv", ".txt": "read_csv",
    ".json": "read_json", ".ndjson": "read_ndjson", ".jsonl": "read_ndjson",
}
_COMPRESSED = (".gz", ".zst")
_EXCEL = (".xlsx", ".xlsm", ".xls")

# Table functions whose first argument is a path or a list of paths.
_FILE_FUNCTIONS = frozenset({
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json", "read_json_auto",
    "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_text", "read_blob", "glob", "sniff_csv", "parquet_metadata",
    "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
})
# The table functions a query may use, by name in the SQL and in the bound plan: the file readers,
# generators, and the listings of the in-memory catalog (which holds only the registered frames).
_TABLE_FUNCTIONS = _FILE_FUNCTIONS | {
    "range", "generate_series", "unnest", "repeat", "json_each", "json_tree", "duckdb_tables",
    "duckdb_columns", "duckdb_views", "duckdb_types", "duckdb_functions", "duckdb_keywords", "duckdb_schemas",
    "duckdb_constraints", "duckdb_indexes", "duckdb_sequences", "duckdb_dependencies", "duckdb_databases",
    "pragma_table_info", "pg_timezone_names", "icu_calendar_names",
}
# The named parameters each table function may take: an allowlist, since some write (read_csv's
# store_rejects and rejects_table keep every line it could not parse, .env's included, in a table
# the next query reads) or reach key material (read_parquet's encryption_config). A function
# missing here takes none.
_FILE_OPTIONS = frozenset({"allow_empty", "compression", "filename", "file_row_number", "hive_partitioning",
                           "hive_types", "hive_types_autocast", "union_by_name"})
_CSV_OPTIONS = _FILE_OPTIONS | {
    "all_varchar", "allow_quoted_nulls", "auto_detect", "auto_type_candidates", "buffer_size", "column_names",
    "column_types", "columns", "comment", "date_format", "dateformat", "decimal_separator", "delim", "delimiter",
    "dtypes", "encoding", "escape", "files_to_sniff", "force_not_null", "header", "ignore_errors", "max_line_size",
    "maximum_line_size", "names", "new_line", "normalize_names", "null", "null_padding", "nullstr", "parallel",
    "quote", "sample_size", "sep", "separator", "skip", "strict_mode", "thousands", "timestamp_format",
    "timestampformat", "types"}
_JSON_OBJECT_OPTIONS = _FILE_OPTIONS | {"format", "ignore_errors", "maximum_object_size"}
_JSON_OPTIONS = _JSON_OBJECT_OPTIONS | {
    "array", "auto_detect", "case_insensitive_keys", "columns", "convert_strings_to_integers", "date_format",
    "dateformat", "field_appearance_threshold", "map_inference_threshold", "maximum_depth", "maximum_sample_files",
    "records", "sample_size", "timestamp_format", "timestampformat"}
_PARQUET_OPTIONS = _FILE_OPTIONS | {"binary_as_string", "can_have_nan"}
_NAMED_PARAMETERS = {
    **dict.fromkeys(("read_csv", "read_csv_auto", "sniff_csv"), _CSV_OPTIONS),
    **dict.fromkeys(("read_json", "read_json_auto", "read_ndjson", "read_ndjson_auto"), _JSON_OPTIONS),
    **dict.fromkeys(("read_json_objects", "read_json_objects_auto", "read_ndjson_objects"), _JSON_OBJECT_OPTIONS),
    **dict.fromkeys(("read_parquet", "parquet_scan"), _PARQUET_OPTIONS),
    **dict.fromkeys(("read_text", "read_blob"), frozenset({"allow_empty"})),
}
# How a registered pandas / pyarrow frame appears in a bound plan (never callable by name).
_FRAME_SCANS = frozenset({"pandas_scan", "python_arrow_scan"})
# Scalar functions that read the connection's state; the binder folds them into constants, so
# they are refused by name in the SQL (the plan no longer shows them).
_REFUSED_FUNCTIONS = frozenset({"current_setting", "getenv", "getvariable", "write_log",
                                "json_execute_serialized_sql", "setseed"})  # setseed: random() of the next query
_FRAME_MODULES = frozenset({"pandas", "polars", "pyarrow"})
_IDLE_SECONDS = 60  # the timeout thread ends after this long with no query running
_EXACT_FLOAT = 2 ** 53  # a double holds every integer of smaller magnitude exactly
# DuckDB types a pandas frame holds in a numpy array of at most eight bytes a value (a HUGEINT and a
# DECIMAL as doubles, times as datetime64 / timedelta64), besides DECIMAL(...) and TIMESTAMP...
_FIXED_WIDTH = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                          "UINTEGER", "UBIGINT", "HUGEINT", "FLOAT", "DOUBLE", "DATE", "INTERVAL"})


class _Watchdog:
    """Interrupts queries that run past their time: one thread for them all, since starting a
    timer thread for each query cost more than a small query. :meth:`arm` before a query and
    :meth:`disarm` after it; the thread sleeps until the earliest deadline (a disarmed one wakes it
    for nothing, once), and ends when nothing was armed for :data:`_IDLE_SECONDS`."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._armed: dict[object, tuple[float, Any]] = {}
        self._thread: threading.Thread | None = None
        self._wake_at = 0.0

    def arm(self, token: object, seconds: float, action) -> None:
        """Call ``action(token)`` after ``seconds``, unless disarmed by then."""
        deadline = time.monotonic() + seconds
        with self._changed:
            self._armed[token] = (deadline, action)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="bettong-duckdb-timeout", daemon=True)
                self._wake_at = deadline
                self._thread.start()
            elif deadline < self._wake_at:
                self._changed.notify()

    def disarm(self, token: object) -> None:
        with self._changed:
            self._armed.pop(token, None)

    def _watch(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                due = [(token, action) for token, (deadline, action) in self._armed.items() if deadline <= now]
                for token, _ in due:
                    del self._armed[token]
                if not due:
                    if not self._armed:
                        self._wake_at = now + _IDLE_SECONDS
                        if not self._changed.wait(_IDLE_SECONDS) and not self._armed:
                            self._thread = None
                            return
                        continue
                    self._wake_at = min(deadline for deadline, _ in self._armed.values())
                    self._changed.wait(self._wake_at - now)
                    continue
            for token, action in due:  # outside the lock, as an action takes its capability's own
                action(token)


_WATCHDOG = _Watchdog()


class _Scan(NamedTuple):
    """What a query's parse tree says of the files it names (see :meth:`DuckDB._scan`)."""

    literals: dict[int | None, list[tuple[str, str]]]
    opaque: bool  # a file function's path is not (only) string literals


class _Check(NamedTuple):
    """What :meth:`DuckDB._checked` found for a query's text, remembered while its paths resolve so."""

    rewritten: str  # the query to run
    checked: bool  # every file it can open was judged before it runs
    resolved: list[tuple[str, tuple[str, bool]]]  # (full path, what _resolved gave) for each path judged


class _Answer(NamedTuple):
    """A query's result as :meth:`DuckDB._run` gives it."""

    frame: Any  # its first rows, at most MAX_DATA_ROWS and MAX_DATA_BYTES (all of them, mostly)
    types: list[tuple[str, str]]  # its columns and their DuckDB types
    total: int  # all of its rows, counted
    cells: Any = None  # a short frame's values as an object array, taken once for its size and text table


@dataclass(eq=False)
class DuckDB:
    """SQL tools for an agent; build it with :func:`duckdb`."""

    root: str | os.PathLike | None = None
    tables: Mapping[str, Any] | None = None
    max_rows: int = 50
    max_chars: int = 8000
    timeout: float = 30
    memory_limit: str = "1GB"
    threads: int | None = None
    id: str = field(default="duckdb", init=False)
    instructions: str | None = field(init=False)  # None when --data moves it into the cell's prompt
    tools: list[Tool] = field(init=False)

    def __post_init__(self) -> None:
        self._root_path = self._root_id = None
        if self.root is not None:
            self._root_path = os.path.realpath(os.path.expanduser(os.fspath(self.root)))
            if not os.path.isdir(self._root_path):
                raise FileNotFoundError(f"The data root {os.fspath(self.root)} is not an existing directory")
            found = os.stat(self._root_path)
            self._root_id = (found.st_dev, found.st_ino)  # which directory the root is (see _resolved)
        self._files = None if self._root_path is None else Root(self._root_path, owner="a duckdb capability")
        self._table_names = tuple(self.tables or ())
        self._lock = threading.Lock()  # one query at a time: the databases, the log and the views are shared
        self._running: tuple[object, Any] | None = None  # the query a timer may interrupt, and its connection
        self._state = threading.Lock()  # so a late timer cannot interrupt the next query
        self._excel_views: dict[str, tuple[tuple[int, int], str]] = {}
        # By SQL text, what depends on nothing else: what its parse tree holds, and (for the rewritten
        # text, whose paths are absolute) that its bound plan passed the check; the catalog a plan binds
        # against never changes, since no query can change it. An agent often runs the same query again.
        self._scans: dict[str, _Scan] = {}
        self._plans_passed: dict[str, None] = {}
        self._checks: dict[str, _Check] = {}  # by SQL text (see _checked)
        self._shapes: dict[str, tuple[int, ...]] = {}  # by SQL text: its columns read exactly (see _answer)
        self._sizes: dict[str, tuple[int, float]] = {}  # by SQL text run: its last result's rows and width
        # Two in-memory databases alike but for the file log: a query whose every file was judged
        # before it runs (see _rewrite) runs where nothing logs, as writing the log costs a small
        # query 4% and it would never be read; any other runs on the logged one, which reads its log.
        self._con = self._connect(log_files=True)
        self._unlogged = self._connect(log_files=False)
        self.instructions = self._instructions()
        self.tools = [
            Tool(name="query_data", handler=self.query_data,
                 description=(f"Run one read-only DuckDB SQL query and get a table of at most {self.max_rows} rows "
                              "with the total row count. Aggregate, filter and join in SQL."
                              + (f" Tables: {', '.join(self._table_names)}." if self._table_names else "")),
                 parameters={"sql": {"type": "string", "description": "One SELECT query.", "required": True}}),
            Tool(name="describe_data", handler=self.describe_data,
                 description=("Columns with their types, the row count and the first rows of a data file "
                              "(CSV, TSV, Parquet, JSON, NDJSON, Excel), a glob of files, or a table."),
                 parameters={"path": {"type": "string", "required": True,
                                      "description": "A file path relative to the data folder, a glob, or a table name."}}),
        ]

    def __reduce__(self) -> tuple:
        """Pickled (for a Dask worker) as its settings, the root as the real path it was pinned to;
        the connection is made again there."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return rebuild, (type(self), withheld({**settings, "root": self._root_path}))

    # --- setup --------------------------------------------------------------------------------

    def _connect(self, *, log_files: bool):
        import duckdb as _duckdb

        config = {"temp_directory": "",  # never spill to disk (it would be the kernel's cwd)
                  "enable_external_file_cache": False,  # every read reaches the file system, and its log
                  "autoinstall_known_extensions": False, "autoload_known_extensions": False,
                  "allow_community_extensions": False,
                  "allow_persistent_secrets": False,  # no secrets read from ~/.duckdb, and duckdb_secrets() can list

                  "python_enable_replacements": False,  # FROM some_df must not find the kernel's variables
                  "memory_limit": self.memory_limit}
        if self.threads is not None:
            config["threads"] = self.threads
        con = _duckdb.connect(":memory:", config=config)
        # These three cannot be given to connect(); the order matters: allowed directories before
        # external access goes off, the file log before the lock.
        allowed = [] if self._root_path is None else [self._root_path + os.sep]
        con.execute("SET allowed_directories = ?", [allowed])
        con.execute("SET enable_external_access = false")
        con.execute("SET allow_extension_repositories = 'forbidden'")
        if log_files:
            con.execute("CALL enable_logging('FileSystem')")
        # a slow query would otherwise draw DuckDB's own progress widget into the notebook cell
        con.execute("SET enable_progress_bar = false")
        con.execute("SET lock_configuration = true")
        for name, frame in (self.tables or {}).items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"table names must be non-blank strings, not {name!r}")
            if type(frame).__module__.split(".")[0] not in _FRAME_MODULES:
                raise TypeError(f"table {name!r} must be a pandas, polars or pyarrow frame, "
                                f"not {type(frame).__name__}")
            _view(con, name, frame)
        return con

    def _instructions(self) -> str:
        parts = ["Use query_data to answer questions about data with one read-only DuckDB SQL query per call."]
        if self._root_path is not None:
            parts.append(f"Data files are in the folder {os.fspath(self.root)}; write a file's path relative to it "
                         "as a string literal, for example SELECT ... FROM 'sales/2024.parquet', read_csv('products.csv'), "
                         "read_json('regions.json'); globs such as 'sales/*.parquet' read many files as one.")
        if self._table_names:
            parts.append("Tables: " + ", ".join(self._table_names) + ".")
        parts.append(f"Call describe_data first to see columns and types. Results show at most {self.max_rows} "
                     "rows: aggregate, filter and join in SQL (GROUP BY, COUNT, SUM, AVG, window functions) "
                     "rather than paging through rows. Only SELECT queries run; nothing can be written or "
                     "changed, and files outside the folder and credential files are refused.")
        return " ".join(parts)

    # --- the tools ----------------------------------------------------------------------------

    async def query_data(self, sql: str | None = None) -> ToolOutput:
        """The ``query_data`` tool: :meth:`query` in a worker thread."""
        return await self._in_thread(self.query, sql)

    async def describe_data(self, path: str | None = None) -> str:
        """The ``describe_data`` tool: :meth:`describe` in a worker thread."""
        return await self._in_thread(self.describe, path)

    async def _in_thread(self, method, argument):
        try:
            return await asyncio.to_thread(method, argument)
        except asyncio.CancelledError:
            running = self._running
            if running is not None:
                self._interrupt(running[0])  # the run was cancelled: stop the query too
            raise

    def query(self, sql: str | None = None) -> ToolOutput:
        """Run one read-only query: ``ToolOutput(text=<bounded table>, data=<DataFrame>)``.

        ``data.attrs`` holds ``total_rows`` and ``truncated`` (the frame holds fewer rows than the
        result: more than :data:`MAX_DATA_ROWS` rows or :data:`MAX_DATA_BYTES` bytes); the text
        then says how many rows the frame kept.
        """
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError("sql must be one SQL query, as a non-blank string")
        answer = self._run(*self._checked(sql))
        frame, total = answer.frame, answer.total
        truncated = total > len(frame)
        text = self._table(answer)
        frame.attrs.update(sql=sql, total_rows=total, truncated=truncated)  # after: pandas copies attrs on each step
        if truncated:
            text += (f"\nThe result kept as a DataFrame holds only the first {len(frame):,} rows (the limit is "
                     f"{MAX_DATA_ROWS:,} rows and {MAX_DATA_BYTES // 1_000_000:,} MB).")
        return ToolOutput(text=text, data=frame)

    def describe(self, path: str | None = None) -> str:
        """Columns, row count and first rows of a file, glob or table."""
        if not isinstance(path, str) or not path.strip():
            raise ValueError("path must be a file path relative to the data folder, a glob, or a table name")
        source, checked = self._source(path)
        rows = int(self._run(f"SELECT count(*) FROM {source}", checked).frame.iloc[0, 0])
        # every query's column types come with its result
        sample = self._run(f"SELECT * FROM {source} LIMIT {_SAMPLE_ROWS}", checked)
        lines = [f"{path}: {rows:,} rows, {len(sample.types)} columns"]
        lines += [f"  {name}  {kind}" for name, kind in sample.types]
        head = self._table(sample, footer=False) if sample.total else "(no rows)"
        return "\n".join(lines) + f"\nFirst rows:\n{head}"

    # --- checking a query ---------------------------------------------------------------------

    def _checked(self, sql: str) -> tuple[str, bool]:
        """The query to run (one read-only statement, relative paths made absolute), and whether
        every file it can open was named by a literal path and judged here (see :meth:`_rewrite`).
        Remembered by its text with what each path resolved to, and used again while each resolves
        so still (checking it again cost a small query 2%); a path that now resolves otherwise (a
        file replaced by a symlink, say) has the query judged again."""
        known = self._checks.get(sql)
        if known is not None and all(self._resolved(full) == found for full, found in known.resolved):
            return known.rewritten, known.checked
        scan = self._literals(sql)
        rewritten, checked, resolved = self._rewrite(sql, scan.literals)
        if rewritten != sql:
            self._literals(rewritten)  # the rewrite only swapped literals; make sure of it
        checked = checked and not scan.opaque
        if resolved is not None:
            with self._lock:  # calls come from several threads
                _remember(self._checks, sql, _Check(rewritten, checked, resolved))
        return rewritten, checked

    def _literals(self, sql: str) -> _Scan:
        """:meth:`_scan` of a query that passed the statement checks, remembered by its text (which
        alone decides it; a refusal is not remembered)."""
        found = self._scans.get(sql)
        if found is None:
            found = self._scan(self._tree(sql))
            with self._lock:  # calls come from several threads
                _remember(self._scans, sql, found)
        return found

    def _tree(self, sql: str) -> dict:
        import duckdb as _duckdb

        try:
            statements = _duckdb.extract_statements(sql)
        except _duckdb.Error as exc:
            raise ValueError(_message(exc)) from None
        if len(statements) != 1:
            raise PermissionError(f"query_data runs exactly one SQL statement per call; this has {len(statements)}")
        if statements[0].type.name != "SELECT":
            raise PermissionError("only read-only queries (SELECT, WITH, DESCRIBE, SUMMARIZE) are allowed, "
                                  f"not {_first_word(sql)}")
        with self._lock:
            tree = json.loads(self._con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
        if tree.get("error"):
            raise PermissionError(f"this query cannot be checked, so it is refused: {tree.get('error_message')}")
        return tree

    def _scan(self, tree: dict) -> _Scan:
        """Refuse disallowed functions and tables; the places that may hold paths:
        ``{byte offset in the SQL, or None where the parser kept none: [(text, "file" | "table")]}``,
        and whether a file function's path is anything but string literals (computed, or named)."""
        literals: dict[int | None, list[tuple[str, str]]] = {}
        opaque = False

        def note(offset: Any, text: str, role: str) -> None:
            valid = isinstance(offset, int) and 0 <= offset < 1 << 63  # the parser's "no location" is 2**64-1
            literals.setdefault(offset if valid else None, []).append((text, role))

        def visit(node: Any) -> None:
            nonlocal opaque
            if isinstance(node, list):
                for item in node:
                    visit(item)
                return
            if not isinstance(node, dict):
                return
            kind = node.get("type")
            if kind == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
                function = node["function"]
                name = str(function.get("function_name", "")).lower()
                if name not in _TABLE_FUNCTIONS:
                    raise PermissionError(f"the table function {name}() is not allowed in query_data")
                allowed = _NAMED_PARAMETERS.get(name, frozenset())
                for parameter in _named_parameters(function.get("arguments") or []):
                    if parameter not in allowed:
                        raise PermissionError(f"{name}() does not take {parameter} in query_data"
                                              + (f" (it takes {', '.join(sorted(allowed))})" if allowed else ""))
                if name in _FILE_FUNCTIONS:
                    paths, whole = _path_literals(function.get("arguments") or [])
                    opaque = opaque or not whole
                    for literal in paths:
                        note(literal["query_location"], literal["literal"]["text"], "file")
                visit({k: v for k, v in function.items() if k != "function_name"})
                visit({k: v for k, v in node.items() if k != "function"})
                return
            if node.get("class") == "FUNCTION":
                name = str(node.get("function_name", "")).lower()
                if name in _REFUSED_FUNCTIONS:
                    raise PermissionError(f"the function {name}() is not allowed in query_data")
            if kind == "BASE_TABLE":
                name = str(node.get("table_name", ""))
                if not node.get("schema_name") and not node.get("catalog_name") and name not in self._table_names:
                    note(node.get("query_location"), name, "table")
            for value in node.values():
                visit(value)

        visit(tree.get("statements"))
        return _Scan(literals, opaque)

    def _rewrite(self, sql: str, literals: dict[int | None, list[tuple[str, str]]]) -> tuple[str, bool, list | None]:
        """``sql`` with each path literal relative to the root made absolute (or an Excel view);
        whether every one of them was judged by :meth:`_replacement` as one regular file and no
        credential file, which DuckDB then opens by that very path (so the file log has nothing to
        add); and what the judged paths resolved to (see :meth:`_replacement`), None with an Excel view."""
        import duckdb as _duckdb

        data = sql.encode("utf-8")
        places = {offset: found[0] for offset, found in literals.items() if offset is not None}
        if None in literals:  # DESCRIBE 'x.csv' keeps no location: find the quoted tokens that spell it
            unplaced = set(literals[None])
            for offset, _ in _duckdb.tokenize(sql):
                quoted = _quoted_at(data, offset)
                for text, role in unplaced:
                    if quoted is not None and quoted[1] == text:
                        places.setdefault(offset, (text, role))
        judged, resolved, excel = set(), [], False
        for offset in sorted(places, reverse=True):
            path, role = places[offset]
            quoted = _quoted_at(data, offset)
            if quoted is None or quoted[1] != path:
                continue  # not written as a quoted literal here (an identifier, a CTE): leave it
            if role == "table" and not any(c in path for c in "./*"):
                continue
            replacement, checked, resolution = self._replacement(path)
            if replacement is not None:
                data = data[:offset] + replacement.encode("utf-8") + data[quoted[0]:]
            if checked:
                judged.add(offset)
            if resolution is not None:
                excel = excel or resolution[1] is None
                resolved.append(resolution)
        judged_texts = {places[offset][0] for offset in judged}
        every = judged == set(places) and all(text in judged_texts for text, _ in literals.get(None, ()))
        return data.decode("utf-8"), every, None if excel else resolved

    def _replacement(self, path: str) -> tuple[str | None, bool, tuple | None]:
        """What a path literal becomes: the absolute path inside the root, an Excel view, or None (as
        is); whether it was judged here: no glob, and one regular file that is no credential file;
        and what that rests on: ``(full path, its resolution)`` (:meth:`_resolved`; None for an
        Excel file, whose view is made again whenever the file changed), or None for no path on disk."""
        if self._root_path is None or "://" in path or path.startswith("~"):
            return None, False, None
        full = os.path.normpath(os.path.join(self._root_path, path))
        if _has_glob(path):
            return _sql_string(full), False, None
        real, regular = found = self._resolved(full)
        if is_credential_path(real):
            raise PermissionError(f"{path} is a credential file; credential files are never read")
        if real.lower().endswith(_EXCEL):  # read here, by the confined root
            return '"' + self._excel_view(path).replace('"', '""') + '"', True, (full, None)
        return _sql_string(full), regular, (full, found)

    def _resolved(self, full: str) -> tuple[str, bool]:
        """The real path of ``full`` (absolute, normalised), and whether it is a regular file. When
        the root is still the directory it was when given (so none of its parents was swapped for a
        link elsewhere) and no part of the path below it is a symlink (an lstat each), that is
        ``full`` itself: ``os.path.realpath`` resolves every part from ``/`` and costs a small query
        as much as this whole check."""
        prefix = self._root_path + os.sep
        if full.startswith(prefix):
            try:
                info = os.lstat(self._root_path)  # a symlink put in its place is another inode too
                if (info.st_dev, info.st_ino) == self._root_id:
                    part = self._root_path
                    for name in full[len(prefix):].split(os.sep):
                        part += os.sep + name
                        info = os.lstat(part)
                        if stat.S_ISLNK(info.st_mode):
                            break
                    else:
                        return full, stat.S_ISREG(info.st_mode)
            except OSError:  # missing, or not a directory: as realpath has it
                pass
        real = os.path.realpath(full)
        return real, os.path.isfile(real)

    def _source(self, path: str) -> tuple[str, bool]:
        """describe_data's FROM clause for a table name, a file or a glob, and whether the file it
        reads was judged here (see :meth:`_replacement`)."""
        if path in self._table_names:
            return '"' + path.replace('"', '""') + '"', True
        if self._root_path is None:
            raise FileNotFoundError(f"No table called {path}; the tables are: {', '.join(self._table_names)}")
        name = path.lower()
        for suffix in _COMPRESSED:
            name = name.removesuffix(suffix)
        excel = name.endswith(_EXCEL)
        if excel and _has_glob(path):
            raise ValueError("describe_data reads one Excel file at a time; give its path without a glob")
        reader = next((r for s, r in _READERS.items() if name.endswith(s)), None)
        if reader is None and not excel:
            raise ValueError(f"describe_data reads CSV, TSV, Parquet, JSON, NDJSON and Excel files; "
                             f"{path} is none of these")
        replacement, checked, _ = self._replacement(path)
        source = replacement or _sql_string(path)
        return (source if excel else f"{reader}({source})"), checked

    def _excel_view(self, path: str) -> str:
        """A view over the first sheet of an Excel file, read through the confined root."""
        import pandas as pd

        def load(fd: int, info: os.stat_result):
            if info.st_size > _EXCEL_BYTES:
                raise ValueError(f"{path} is larger than {_EXCEL_BYTES:,} bytes; convert it to Parquet or CSV")
            return (info.st_mtime_ns, info.st_size), read_up_to(fd, info.st_size)

        stamp, data = self._files.read(path, load, directory_note="it is a directory")
        known = self._excel_views.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            frame = pd.read_excel(io.BytesIO(data), sheet_name=0)
        except ImportError:
            raise RuntimeError("reading Excel files needs openpyxl: pip install openpyxl") from None
        name = f"excel:{path}"
        with self._lock:
            for con in (self._con, self._unlogged):
                _view(con, name, frame)
        self._excel_views[path] = (stamp, name)
        return name

    # --- running ------------------------------------------------------------------------------

    def _run(self, sql: str, checked: bool = False) -> _Answer:
        """The query's :class:`_Answer`; refused when the query opened a credential file.
        ``checked``: every file the query can open was judged before it ran (see :meth:`_rewrite`), so
        it runs on the database that keeps no file log (reading the log costs a small query a
        quarter of its time, writing it 4%); any other query's log is read, and emptied, after it."""
        import duckdb as _duckdb

        token = object()
        failure: Exception | None = None
        with self._lock:
            # Each query runs on a connection of its own, closed after it, so nothing it made (a
            # rejects table, a temporary object or variable, whatever a future option creates) is there
            # for the next one; a plain query cannot write to the catalog they share. (An explicit
            # transaction rolled back costs a small query 7% more and would add nothing to that.)
            con = (self._unlogged if checked else self._con).cursor()
            with self._state:
                self._running = (token, con)
            _WATCHDOG.arm(token, self.timeout, self._interrupt)
            try:
                self._check_plan(con, sql)
                answer = self._answer(con, sql)
            except Exception as exc:  # judged below, once the file log has been read
                failure = exc
            finally:
                _WATCHDOG.disarm(token)
                with self._state:
                    self._running = None
                con.close()
                opened = set() if checked else self._opened()
        secret = sorted(p for p in opened if is_credential_path(os.path.realpath(p)))
        if secret:
            shown = ", ".join(self._shown(p) for p in secret)
            raise PermissionError(f"the query opened a credential file ({shown}); credential files are never "
                                  "read, so its result is withheld")
        if isinstance(failure, PermissionError):  # refused by the plan check
            raise failure
        if isinstance(failure, _duckdb.InterruptException):
            raise TimeoutError(f"the query ran longer than {self.timeout:g} s and was stopped; "
                               "filter or aggregate more, or sample (USING SAMPLE 10%)")
        if isinstance(failure, _duckdb.OutOfMemoryException):
            raise MemoryError(f"the query needed more than the memory limit ({self.memory_limit}); "
                              "aggregate or filter earlier, or select fewer columns") from None
        if isinstance(failure, MemoryError):  # the kernel could not hold a fetched part of the result
            raise MemoryError("the query's result did not fit in the kernel's memory; select fewer or narrower "
                              "columns (long text, blobs), aggregate, or add a LIMIT") from None
        if isinstance(failure, _duckdb.PermissionException):
            raise PermissionError(self._permission_message(failure)) from None
        if failure is not None:
            raise ValueError(_message(failure)) from None
        return answer

    def _check_plan(self, con, sql: str) -> None:
        """Refuse a query whose bound plan scans anything but the allowed table functions and the
        registered frames: a view (``pg_catalog.pg_settings``, ``information_schema.*``,
        ``duckdb_logs``) is expanded there into the functions it reads, whatever its name."""
        if sql in self._plans_passed:
            return
        pending = json.loads(con.execute("EXPLAIN (FORMAT json) " + sql).fetchall()[0][1])
        while pending:
            node = pending.pop()
            if isinstance(node, list):
                pending.extend(node)
                continue
            function = str((node.get("extra_info") or {}).get("Function", "")).lower()
            if function and function not in _TABLE_FUNCTIONS and function not in _FRAME_SCANS:
                raise PermissionError(f"the query reads {function}(), which is not allowed in query_data "
                                      "(settings, secrets, logs and extensions are not readable)")
            pending.extend(node.get("children") or [])
        _remember(self._plans_passed, sql, None)

    def _answer(self, con, sql: str) -> _Answer:
        """Run ``sql``: its :class:`_Answer`, integers wider than 64 bits and
        decimals of more than 15 digits exact. A HUGEINT column (what ``sum()`` of integers gives)
        comes as the doubles pandas gets, which hold it exactly while every value is below 2**53;
        otherwise, and for a wide DECIMAL, the columns are fetched as ``struct_pack(v := column)``
        too, which pandas gets as Python ints and Decimals. Which way a query takes is remembered per
        SQL text and checked against the types of its result, so only a query not seen before (or
        whose files changed their columns) is described before it runs."""
        import duckdb as _duckdb

        for _ in range(2):
            exact = self._shapes.get(sql)
            if exact is None:
                described = con.execute("DESCRIBE " + _subquery(sql)).fetchall()
                kinds = [(str(name), str(kind)) for name, kind, *_ in described]
                if any(kind == "UHUGEINT" for _, kind in kinds):
                    return self._replaced(con, sql, kinds)
                wide = tuple(i for i, (_, kind) in enumerate(kinds) if _wide(kind))
                exact = wide if any(kinds[i][1] != "HUGEINT" for i in wide) else ()
            try:
                answer = self._exactly(con, sql, exact) if exact else self._through_doubles(con, sql)
            except _duckdb.BinderException:
                if sql not in self._shapes:
                    raise
                answer = None  # the remembered columns moved: described again (a real error is raised there)
            if answer is not None:
                _remember(self._shapes, sql, exact)
                return answer
            self._shapes.pop(sql, None)
        raise ValueError("the files the query reads changed their columns while it ran; run it again")

    def _through_doubles(self, con, sql: str) -> _Answer | None:
        """``sql`` run as it is, its HUGEINT columns made int64 from pandas' doubles; read again by
        :meth:`_exactly` when a value reaches 2**53. None when it has other wide columns (its files
        changed since it was described)."""
        con.execute(sql)
        types = [(str(name), str(kind)) for name, kind, *_ in con.description]
        wide = tuple(i for i, (_, kind) in enumerate(types) if _wide(kind))
        if any(types[i][1] != "HUGEINT" for i in wide):
            con.abort()
            return None
        frame, total, cells = self._fetch(con, sql, [kind for _, kind in types])
        # from the cells when taken: a pandas column access costs a small query more than this
        columns = [_from_doubles(frame.iloc[:, i] if cells is None else cells[:, i]) for i in wide]
        if any(column is None for column in columns):
            return self._exactly(con, sql, wide)
        if wide and cells is not None:
            cells = cells.copy()  # pandas may hand out its own values, read-only
        for i, column in zip(wide, columns):
            frame.isetitem(i, column)
            if cells is not None:
                cells[:, i] = column.astype(object)  # NULL as pd.NA, as the frame now shows it
        return _Answer(frame, types, total, cells)

    def _exactly(self, con, sql: str, exact: tuple[int, ...]) -> _Answer | None:
        """``sql`` run as :func:`_with_exact`, or None when its wide columns are not those at ``exact``."""
        wrapped = _with_exact(sql, exact)
        con.execute(wrapped)
        shape = _shape(con.description, exact)
        if shape is None:
            con.abort()
            return None
        return self._fetched(con, wrapped, shape)

    def _replaced(self, con, sql: str, kinds: list[tuple[str, str]]) -> _Answer:
        """``sql`` with a UHUGEINT column, which pandas cannot hold even as a double: every wide column
        replaced by name (as just described) by its ``struct_pack``. Not remembered, as a later run
        could not tell a column renamed since."""
        exact = tuple(i for i, (_, kind) in enumerate(kinds) if _wide(kind))
        wrapped = _with_exact(sql, exact, names=[kinds[i][0] for i in exact])
        con.execute(wrapped)
        shape = _shape(con.description, exact, replaced=True)
        if shape is None:
            con.abort()
            raise ValueError("the files the query reads changed their columns while it ran; run it again")
        return self._fetched(con, wrapped, shape)

    def _fetched(self, con, sql: str, shape) -> _Answer:
        """The result of ``sql`` (a query run as :func:`_with_exact`), fetched, its wide columns made exact."""
        types, exact_kinds, replaced = shape
        frame, total, _ = self._fetch(con, sql, [str(kind) for _, kind, *_ in con.description])
        width = len(types)
        for j, (i, kind) in enumerate(exact_kinds.items()):
            frame.isetitem(i, _exact(frame.iloc[:, i if replaced else width + j], kind))
        if not replaced and exact_kinds:
            frame = frame.iloc[:, :width]
        return _Answer(frame, types, total)

    def _fetch(self, con, sql: str, kinds: list[str]) -> tuple[Any, int, Any]:
        """:func:`_fetch` of the result of ``sql``, sized by how large its last result was:
        ``(frame, total rows, cells or None)``."""
        frame, total, row_bytes, cells = _fetch(con, kinds, self._sizes.get(sql))
        _remember(self._sizes, sql, (total, row_bytes))
        return frame, total, cells

    def _opened(self) -> set[str]:
        """The files the logged database opened since this was last asked; empties its log."""
        entries = self._con.execute("SELECT type, message FROM duckdb_logs()").fetchall()
        if not entries:
            return set()
        self._con.execute("CALL truncate_duckdb_logs()")
        # the messages as they are (each READ is one), parsed here: DISTINCT and JSON in SQL cost more
        paths = set()
        for kind, message in entries:
            try:
                path = json.loads(message).get("path") if kind == "FileSystem" else None
            except (ValueError, AttributeError):
                continue
            if isinstance(path, str) and path:
                paths.add(path)
        return paths

    def _interrupt(self, token: object | None) -> None:
        with self._state:
            if token is not None and self._running is not None and self._running[0] is token:
                self._running[1].interrupt()

    def _permission_message(self, exc: Exception) -> str:
        text = _message(exc)
        start = text.find('"')
        end = text.find('"', start + 1)
        if start < 0 or end < 0:
            return text
        path = text[start + 1:end]
        where = f" ({os.fspath(self.root)})" if self.root is not None else ""
        hint = ""
        if not os.path.isabs(path) and "://" not in path:
            hint = ("; a path computed in SQL is not resolved from the data folder: write paths as string "
                    "literals, relative to the folder")
        return (f"cannot read {self._shown(path)}: only files inside the data folder{where} can be read, "
                f"and remote or system access is off{hint}")

    def _shown(self, path: str) -> str:
        """A path as the model wrote it: relative to the root when inside."""
        if self._root_path is not None and path.startswith(self._root_path + os.sep):
            return path[len(self._root_path) + 1:]
        return path

    # --- the text table -----------------------------------------------------------------------

    def _table(self, answer: _Answer, *, footer: bool = True) -> str:
        import pandas as pd

        types, total = answer.types, answer.total
        kinds = [kind for _, kind in types]
        # str, but a DATE (a midnight timestamp in pandas) as its date and bytes as their repr
        shows = [_show_date if kind == "DATE" else _show if kind == "BLOB" else str for kind in kinds]
        values = answer.cells  # as a whole: a pandas call per cell or column costs
        if values is None:
            frame = answer.frame
            values = (frame if len(frame) <= self.max_rows else frame.iloc[:self.max_rows]).to_numpy(dtype=object)
        values = values[:self.max_rows]
        columns = [list(map(show, column)) for column, show in zip(values.T.tolist(), shows)]
        for r, c in zip(*pd.isna(values).nonzero()):  # not a list, dict or array, whatever it holds
            columns[c][r] = "NULL"
        names, *rows = _cells([[str(name) for name, _ in types], *map(list, zip(*columns))])
        header = " | ".join(f"{name} ({kind})" for name, kind in zip(names, kinds))
        lines = [header]
        budget = self.max_chars - len(header) - 200  # room for the footer
        for row in rows:
            line = " | ".join(row)
            if budget - len(line) - 1 < 0:
                break
            budget -= len(line) + 1
            lines.append(line)
        if len(header) > self.max_chars - 200:
            lines = [header[:self.max_chars - 200] + "…"]
        shown = len(lines) - 1
        if footer:
            if total == shown:
                lines.append(f"({total:,} row{'s' if total != 1 else ''})")
            else:
                lines.append(f"… {total - shown:,} more rows ({total:,} rows in all, {shown} shown). "
                             "Aggregate or filter in SQL rather than paging through rows.")
        return "\n".join(lines)


def _fetch(result, kinds: list[str], hint: tuple[int, float] | None = None) -> tuple[Any, int, float, Any]:
    """``(frame, total rows, widest bytes per row, cells)``: the result's first rows, at most
    :data:`MAX_DATA_ROWS` rows and :data:`MAX_DATA_BYTES` bytes, with every row counted. A fetch is
    sized to about ``_CHUNK_BYTES`` (and at most ``_CHUNK_VECTORS`` full vectors' rows) from the
    width and the rows per vector of the fetches before it (one DuckDB vector at least), so long
    values cannot make one fetch, or the kept frame, large. ``hint`` is ``(total rows, bytes per
    row)`` of the same query's last result: the first fetch then asks for one vector more than it
    had rows (as many as full vectors that wide fit in :data:`MAX_DATA_BYTES`), so a result like
    the last one comes in one fetch that shows its end, rather than in two or more. ``kinds``: the
    result's column types. ``cells``: a frame fetched at once, as an object array, when it and the
    last result were short (:data:`_FEW_ROWS`, :data:`_FEW_BYTES`); else None."""
    import pandas as pd

    kept, kept_rows, kept_bytes, total, widest, cells = [], 0, 0, 0, 0.0, None
    few = hint is not None and hint[0] <= _FEW_ROWS and hint[0] * hint[1] <= _FEW_BYTES
    vectors = 1 if hint is None else _vectors_within(hint[0] + 1, hint[1])
    measured = _measured(kinds)
    while True:
        chunk = result.fetch_df_chunk(vectors)
        # a short chunk's values taken once (a pandas call costs a small query more than its fetch)
        cells = chunk.to_numpy(dtype=object) if few and not kept and 0 < len(chunk) <= _FEW_ROWS else None
        size = _bytes(chunk, measured, cells) if len(chunk) else 0
        fit = min(len(chunk), MAX_DATA_ROWS - kept_rows)
        if size and kept_bytes + size * fit // len(chunk) > MAX_DATA_BYTES:
            fit = min(fit, (MAX_DATA_BYTES - kept_bytes) * len(chunk) // size)
        if fit or not kept:  # the first, even empty, carries the columns
            # a copy when cut, so the rows left out are freed with the chunk
            kept.append(chunk if fit == len(chunk) else chunk.iloc[:fit].copy())
            kept_rows += fit
            kept_bytes += size * fit // max(len(chunk), 1)
        total += len(chunk)
        if len(chunk) < vectors:  # each vector fetched gives a row at least: fewer, and the result has ended
            break
        # Sized by rows, not vectors: a filter's vectors hold only the rows that passed it (a few of
        # 2048), and thousands of small fetches cost more than the query. Bounded so that a fetch stays
        # under MAX_DATA_BYTES even if every vector came back full.
        row_bytes = max(size, 1) / len(chunk)
        widest = max(widest, row_bytes)
        wanted = min(_CHUNK_VECTORS * 2048, _CHUNK_BYTES / row_bytes) / (len(chunk) / vectors)
        vectors = _vectors_within(wanted, row_bytes)
    if len(chunk):
        widest = max(widest, size / len(chunk))
    if len(kept) > 1:
        return pd.concat(kept, ignore_index=True), total, widest, None
    return kept[0], total, widest, cells if kept[0] is chunk else None


def _vectors_within(wanted: float, row_bytes: float) -> int:
    """``wanted`` vectors, at least one, and no more than full vectors of rows ``row_bytes`` wide
    that fit in :data:`MAX_DATA_BYTES`."""
    return max(1, int(min(wanted, MAX_DATA_BYTES / (max(row_bytes, 1) * 2048))))


def _view(con, name: str, frame) -> None:
    """``frame`` as the view ``name`` in the main catalog, where each query's own connection sees
    it (``register`` would make it a temporary view of ``con`` alone)."""
    if type(frame).__module__.split(".")[0] == "pandas":
        con.from_df(frame).create_view(name, replace=True)
    else:  # pyarrow, or polars through its Arrow table
        con.from_arrow(frame.to_arrow() if hasattr(frame, "to_arrow") else frame).create_view(name, replace=True)


def _bytes(frame, measured: list[int], cells=None) -> int:
    """The memory a frame's columns hold, their values' own included (text, lists, Decimals): the
    columns at ``measured`` measured, the others (numbers and times, see :func:`_measured`) eight
    bytes a value, since a pandas call per column costs a small query more than its fetch. Given
    ``cells`` (the frame's values as an object array) the measured columns are sized by them."""
    fixed = 8 * len(frame) * (frame.shape[1] - len(measured))
    if cells is not None:
        return sum((8 * len(frame) + sum(map(sys.getsizeof, cells[:, i])) for i in measured), fixed)
    sizes = (int(frame.iloc[:, i].memory_usage(index=False, deep=True)) for i in measured)
    return sum(sizes, fixed)


def _measured(kinds: list[str]) -> list[int]:
    """The columns of a result (of DuckDB types ``kinds``) whose size in pandas depends on their
    values: all but those pandas holds in numpy arrays of at most eight bytes a value."""
    return [i for i, kind in enumerate(kinds) if not (kind in _FIXED_WIDTH or kind.startswith(("DECIMAL(", "TIMESTAMP")))]


def _remember(cache: dict, key: str, value: Any, *, size: int = 256) -> None:
    """``cache[key] = value``, the oldest entry dropped past ``size`` (a query's text can be long)."""
    if len(cache) >= size:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _wide(kind: str) -> bool:
    """Whether pandas would hold a column of this DuckDB type as floats with digits lost (or, for
    UHUGEINT, not at all)."""
    if kind in ("HUGEINT", "UHUGEINT"):
        return True
    return kind.startswith("DECIMAL(") and int(kind[8:].split(",")[0]) > 15  # a double holds 15 digits


def _inner(sql: str) -> str:
    """``sql`` in parentheses, as a subquery: its own closing semicolon dropped, and the closing
    parenthesis on a line of its own, past a trailing -- comment."""
    import duckdb as _duckdb

    data = sql.encode("utf-8")
    tokens = [(offset, kind) for offset, kind in _duckdb.tokenize(sql) if kind.name != "comment"]
    if tokens and data[tokens[-1][0]:tokens[-1][0] + 1] == b";":  # the statement's own end
        data = data[:tokens[-1][0]]
    return f"(\n{data.decode('utf-8')}\n)"


def _subquery(sql: str) -> str:
    """``sql`` as ``SELECT * FROM`` it: the columns it gives a query around it (a second column of a
    name is renamed, as pandas renames it)."""
    return f"SELECT * FROM {_inner(sql)}"


def _with_exact(sql: str, exact: tuple[int, ...], names: list[str] | None = None) -> str:
    """``sql`` with each column at ``exact`` (positions) also as ``struct_pack(v := column)``, after
    all of its columns; or, given their ``names``, in their place."""
    if names is None:
        extra = ", ".join(f"struct_pack(v := #{i + 1})" for i in exact)
        return f"SELECT *, {extra} FROM {_inner(sql)}"
    quoted = ['"' + name.replace('"', '""') + '"' for name in names]
    replaced = ", ".join(f"struct_pack(v := {name}) AS {name}" for name in quoted)
    return f"SELECT * REPLACE ({replaced}) FROM {_inner(sql)}"


def _shape(description: list, exact: tuple[int, ...], *, replaced: bool = False):
    """What a result run as :func:`_with_exact` (or as is, with no ``exact``) holds: ``([(column,
    type)], {position: type of each wide column}, replaced)``; None when its wide columns are not
    those at ``exact`` (the query's files changed since it was last run)."""
    columns = [(str(name), kind) for name, kind, *_ in description]
    if replaced:
        for i in exact:
            name, kind = columns[i]
            if kind.id != "struct" or len(kind.children) != 1:
                return None
            columns[i] = (name, kind.children[0][1])
    else:
        columns = columns[:len(columns) - len(exact)]
    types = [(name, str(kind)) for name, kind in columns]
    if tuple(i for i, (_, kind) in enumerate(types) if _wide(kind)) != exact:
        return None
    return types, {i: types[i][1] for i in exact}, replaced


def _exact(column, kind: str):
    """A column of ``struct_pack(v := value)`` of HUGEINT, UHUGEINT or wide DECIMAL values as exact
    numbers: int64 (Int64 with NULLs) when every value fits, else Python ints; Decimals for DECIMAL."""
    import pandas as pd

    values = [item["v"] if isinstance(item, dict) else None for item in column]
    if kind.startswith("DECIMAL"):
        return pd.Series(values, index=column.index, dtype=object)
    if all(v is None or -(1 << 63) <= v < 1 << 63 for v in values):
        return pd.Series(values, index=column.index, dtype="Int64" if None in values else "int64")
    return pd.Series(values, index=column.index, dtype=object)


def _from_doubles(column):
    """A HUGEINT column as pandas holds it (doubles, NaN for NULL; a Series or its values) as an
    int64 array, Int64 with NULLs; None when a value is 2**53 or more in magnitude, where the double
    may have lost digits."""
    import numpy as np
    import pandas as pd

    values = np.asarray(column, dtype="float64")
    if (np.abs(values) < _EXACT_FLOAT).all():  # NaN is not: NULLs are looked for only when needed
        return values.astype("int64")
    missing = np.isnan(values)
    if not (np.abs(values[~missing]) < _EXACT_FLOAT).all():
        return None
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype("int64"), missing)


def _named_parameters(arguments: list) -> list[str]:
    """The names of a table function's named arguments, as DuckDB's binder finds them: ``name :=
    value`` (or ``=>``), and ``name = value`` with an unqualified column name on the left."""
    names = []
    for argument in arguments:
        expression = argument.get("expression") or {}
        name = argument.get("name") or expression.get("alias")
        left = expression.get("left") or {}
        if not name and expression.get("type") == "COMPARE_EQUAL" and left.get("class") == "COLUMN_REF" \
                and len(left.get("column_names") or ()) == 1:
            name = left["column_names"][0]
        if name:
            names.append(str(name).lower())
    return names


def _path_literals(arguments: list) -> tuple[list[dict], bool]:
    """The string constants of a file function's first positional argument (a path or a list of
    them), and whether they are all of it (not computed, named, a subquery, or missing)."""
    if not arguments or arguments[0].get("name"):
        return [], False
    expression = arguments[0].get("expression") or {}
    if expression.get("class") == "FUNCTION" and expression.get("function_name") == "list_value":
        candidates = [a.get("expression") or {} for a in expression.get("arguments") or []]
    else:
        candidates = [expression]
    literals = [c for c in candidates if c.get("class") == "CONSTANT"
                and (c.get("literal") or {}).get("kind") == "STRING" and isinstance(c.get("query_location"), int)]
    return literals, len(literals) == len(candidates)


def _quoted_at(data: bytes, offset: int) -> tuple[int, str] | None:
    """``(end, value)`` of the '...' or "..." token at byte ``offset`` of ``data``, else None."""
    if offset >= len(data) or data[offset:offset + 1] not in (b"'", b'"'):
        return None
    quote = data[offset:offset + 1]
    index, parts = offset + 1, []
    while True:
        close = data.find(quote, index)
        if close < 0:
            return None
        parts.append(data[index:close])
        if data[close + 1:close + 2] == quote:  # a doubled quote stands for one
            parts.append(quote)
            index = close + 2
            continue
        return close + 1, b"".join(parts).decode("utf-8", "replace")


def _first_word(sql: str) -> str:
    """The statement's first keyword (USE, INSTALL, COPY ...), past any comments."""
    import duckdb as _duckdb

    for offset, kind in _duckdb.tokenize(sql):
        if kind.name != "comment":
            return sql[offset:].split(None, 1)[0].upper().rstrip(";")
    return "an empty statement"


def _has_glob(path: str) -> bool:
    return any(c in path for c in "*?[{")


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _message(exc: Exception) -> str:
    """An error's text, redacted; a value DuckDB quoted but cut (``Input: "abc..."``) is withheld,
    since a secret's first characters are no longer recognisable as it."""
    text = redact(str(exc).strip())[0] or type(exc).__name__
    return _CUT_VALUE.sub(lambda m: m[1] + "…(a long value, not shown)" + m[1], text)


_ESCAPED = re.compile(r"[\\\n\r|]")
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "|": "\\|"})
_CUT_VALUE = re.compile(r"""(["'])(?:(?!\1).)*\.\.\.\1""", re.S)


def _show(value: Any) -> str:
    """One value of the text table as text."""
    return repr(value) if isinstance(value, bytes) else str(value)


def _show_date(value: Any) -> str:
    """A DATE, which pandas holds as a midnight timestamp."""
    return str(value.date() if hasattr(value, "date") else value)


def _cells(rows: list[list[str]]) -> list[list[str]]:
    """``rows`` as the text table's cells: every text that :func:`_cell` would cut or escape
    redacted first (once cut or escaped, a secret's rest is no longer recognisable as it), then
    cut or escaped; the others as they are. One redaction for them all (a NUL between them, which
    no secret spans)."""
    texts = [text for row in rows for text in row]
    if max(map(len, texts), default=0) <= _CELL_CHARS and not _ESCAPED.search("".join(texts)):
        return rows  # most tables: found in one pass rather than a search per cell
    places = [(r, c) for r, row in enumerate(rows) for c, text in enumerate(row)
              if len(text) > _CELL_CHARS or _ESCAPED.search(text)]
    texts = [rows[r][c] for r, c in places]
    joined = redact("\0".join(texts))[0].split("\0")
    if len(joined) != len(texts):  # a value held a NUL itself: one at a time
        joined = [redact(text)[0] for text in texts]
    rows = [list(row) for row in rows]
    for (r, c), text in zip(places, joined):
        rows[r][c] = _cell(text)
    return rows


def _cell(text: str) -> str:
    """One (redacted) value of the text table: newlines and ``|`` escaped, long text cut."""
    text = text.translate(_ESCAPES)
    return text if len(text) <= _CELL_CHARS else text[:_CELL_CHARS - 1] + "…"


def duckdb(root: str | os.PathLike | None = None, *, tables: Mapping[str, Any] | None = None, max_rows: int = 50,
           max_chars: int = 8000, timeout: float = 30, memory_limit: str = "1GB", threads: int | None = None,
           **unknown: Any) -> DuckDB:
    """Read-only SQL: ``query_data`` and ``describe_data`` over the files below ``root`` and the
    DataFrames in ``tables`` (registered as read-only views). At least one of the two is needed.

        caps.duckdb(root="shop", tables={"targets": targets_df}, timeout=10)
    """
    if unknown:
        raise TypeError(f"duckdb() got unknown option(s) {', '.join(sorted(unknown))}; it takes root, tables, "
                        "max_rows, max_chars, timeout, memory_limit and threads")
    if root is None and not tables:
        raise ValueError("duckdb() needs root= (a data folder) or tables= (DataFrames by name), or both")
    for name, value, minimum in (("max_rows", max_rows, 1), ("max_chars", max_chars, 500)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be a whole number of at least {minimum}, not {value!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return DuckDB(root=root, tables=tables, max_rows=max_rows, max_chars=max_chars, timeout=timeout,
                  memory_limit=memory_limit, threads=threads)
