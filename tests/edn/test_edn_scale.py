"""bettong_nb.edn at scale and under attack: megabyte files, the 50 MiB limit of the tools,
hostile text, and the shape of the package.

The large documents come from the benchmark's seeded generator (bench/edn_workload.py): nested
maps, vectors, sets and lists, namespaced keywords, escaped strings, ratios, chars, ``#inst``,
``#_`` discards and comments.
"""

import ast
import asyncio
import os
import random
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from bench.edn_workload import generate, near_end_path
from bettong_nb import capabilities as caps
from bettong_nb import edn
from bettong_nb.capabilities.edn import MAX_FILE_BYTES, MAX_PRINTED_CHARS
from bettong_nb.core.capability import invoke, registry
from bettong_nb.edn import EdnError, EdnMap, EdnSyntaxError, Keyword, edn_equal
from bettong_nb.edn._syntax import MAX_DEPTH, TOKEN, WHITESPACE, skip_collection
from bettong_nb.edn._walk import get_in_text

K = Keyword
PACKAGE = Path(edn.__file__).parent


@pytest.fixture(scope="module")
def big():
    """A 2 MB document and its data."""
    text = generate(2_000_000)
    return text, edn.loads(text)


@pytest.fixture(scope="module")
def large():
    """A 1 MB document (about 2,100 events) and its data."""
    text = generate(1_000_000)
    return text, edn.loads(text)


def _common_prefix(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # halving: slices compare in C
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def replaced(before: str, after: str, added: str) -> list[str]:
    """What ``before`` held where ``after`` holds ``added``, every other character being the same:
    each way of lining the two texts up (``:a 1 :b`` less ``:a 1 `` is also ``:a 1 :b`` less ``a 1 :``)."""
    start, found = _common_prefix(before, after), []
    for i in range(start, max(-1, start - len(added) - 1), -1):
        end = i + len(added)  # where ``added`` would end in ``after``
        rest = len(after) - end
        if after[i:end] == added and 0 <= rest <= len(before) - i and before[len(before) - rest:] == after[end:]:
            found.append(before[i:len(before) - rest])
    for i in range(start - 1, -1, -1) if not added else ():
        if before[i] != before[i + len(before) - len(after)]:
            break
        found.append(before[i:i + len(before) - len(after)])
    assert found, f"{added!r} is not the only change"
    return found


def same_data(a, b) -> bool:
    """Equal data printed the same way (stricter than edn_equal, and much faster on megabytes)."""
    return edn.dumps(a) == edn.dumps(b)


# --- large files -----------------------------------------------------------------------------------

def test_a_large_file_round_trips_byte_for_byte(tmp_path, big):
    text, data = big
    assert edn.render(edn.parse(text)) == text
    file = tmp_path / "big.edn"
    file.write_text(text, encoding="utf-8")
    keys = near_end_path(text)
    old = edn.get_in_file(file, keys)
    edn.set_in_file(file, keys, "1/2")
    assert file.read_text(encoding="utf-8") != text
    edn.set_in_file(file, keys, edn.dumps(old))
    assert file.read_text(encoding="utf-8") == text
    assert same_data(edn.read_file(file), data)
    assert same_data(edn.loads(edn.dumps(data)), data)


@pytest.mark.parametrize("op, path, value, added", [
    ("set", "near end", "[1 2]", "[1 2]"),
    ("set", [":events", 1800, ":amounts", 0], '"first"', '"first"'),
    ("set", [":config", ":features", ":feature/beta"], "true", "true"),
    ("add", [":events", 2000, ":payload", ":extra", ":new-key"], ":added", " :new-key :added"),
    ("add", [":events", 2000, ":payload", ":new-key"], ":added", "\n" + " " * 13 + ":new-key :added"),
    ("add", [":zzz", ":a"], "1", "\n :zzz {:a 1}"),
    ("delete", [":events", 1500, ":payload", ":note"], None, ""),
    ("delete", [":audit"], None, ""),
])
def test_an_edit_deep_in_a_large_file_changes_only_its_bytes(tmp_path, large, op, path, value, added):
    text, data = large
    file = tmp_path / "big.edn"
    file.write_bytes(text.encode("utf-8"))
    keys = edn.parse_path(near_end_path(text) if path == "near end" else path)
    old_value = edn.get_in(data, keys)
    if op == "delete":
        returned = edn.delete_in_file(file, keys)
        expected = edn.dissoc_in(data, keys)
    else:
        returned = edn.set_in_file(file, keys, value)
        expected = edn.assoc_in(data, keys, edn.parse_value(value))
    alignments = replaced(text, file.read_bytes().decode("utf-8"), added)
    if op == "set":  # exactly the old value's text
        assert any(was == was.strip() and edn_equal(edn.loads(was), old_value) for was in alignments)
    elif op == "add":
        assert alignments == [""]  # after the last entry of the deepest map on the path
    else:  # the key, its value and the space on one side of them
        entries = [re.fullmatch(r"\s*(\S+)\s+(.*?)\s*", was, re.S) for was in alignments]
        assert any(m and edn_equal(edn.parse_key(m[1]), keys[-1]) and edn_equal(edn.loads(m[2]), old_value)
                   for m in entries)
    assert same_data(returned, expected)
    assert same_data(edn.read_file(file), expected)


def test_reading_and_editing_by_path_agree_with_the_data_everywhere():
    """Random paths into a 100 KB document: the scanner finds what the full reader reads, and
    random edits land where get_in and assoc_in say."""
    text = generate(100_000, seed=5)
    data = edn.loads(text)
    rng = random.Random(7)

    def random_path():
        path, node = [], data
        while rng.random() < 0.85:
            if isinstance(node, EdnMap) and len(node):
                key = rng.choice(list(node))
            elif isinstance(node, tuple) and not isinstance(node, edn.EdnList) and node:
                key = rng.randrange(len(node))
            else:
                break
            path.append(key)
            node = edn.get_in(node, [key])
        return path

    paths = [random_path() for _ in range(80)] + [[K("nope")], [K("events"), 10**6], [K("config"), K("db"), 0]]
    for path in paths:
        assert same_data(get_in_text(text, path), edn.get_in(data, path)), path
    for path in [p for p in paths[:25] if p]:
        value = rng.choice([7, "text", K("ns/kw"), (1, 2), EdnMap({K("a"): None})])
        try:
            updated = edn.set_in_str(text, path, value)
        except EdnError as exc:
            with pytest.raises(EdnError, match=re.escape(str(exc))):
                edn.assoc_in(data, path, value)
            continue
        assert same_data(edn.loads(updated), edn.assoc_in(data, path, value)), path


def test_whitespace_is_javas_and_a_comma():
    """Clojure's reader splits on Java's Character.isWhitespace (no-break spaces are not) and commas."""
    everything = "".join(map(chr, range(0x110000))).encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    java = {c for c in everything if c.isspace() and c not in "\u00a0\u2007\u202f\u0085"} | {",", "\ufeff"}
    assert set(re.findall(WHITESPACE, everything)) == java


def test_the_fast_skip_finds_the_brackets_the_exact_reader_finds():
    """Brackets inside strings, comments and characters, and characters right after a prefix
    (``#_\\(``, ``'\\(``), must not fool the scan that skips collections."""
    tokens = ["1", ":k", "a\\b", "\\(", "\\]", '"(["', '"\\"]"', ";( [\n", "#_\\(", "'\\[", "^:m \\{", "@\\)",
              "#inst \"x\"", "##Inf", "#_x", "#{1}", "#:ns{:a 1}", "[]", "()", "{}", "a#_", "\\\\", "\\;", " ", "\n"]
    rng = random.Random(3)
    for _ in range(3000):
        inner = " ".join(rng.choice(tokens) for _ in range(rng.randint(0, 12)))
        text = rng.choice(["[", "(", "{", "#{"]) + inner + rng.choice(["]", ")", "}"]) + " :after"
        try:
            tree = edn.parse(text)
        except EdnSyntaxError:
            continue
        first = next(node for node in tree.children if node.kind != "whitespace")
        if first.kind in ("list", "vector", "map", "set"):
            assert skip_collection(text, 0) == len(edn.render(first)), text


# --- the tools' size limit, and their memory -------------------------------------------------------

def test_the_tools_take_files_up_to_50_mib_and_say_so_clearly_above(tmp_path):
    assert MAX_FILE_BYTES == 50 * 1024 * 1024
    (tmp_path / "huge.edn").write_bytes(b"{:a 1}\n;" + b"x" * (MAX_FILE_BYTES - 7))
    registered = registry([caps.edn(tmp_path, writable=True)])
    text, _ = asyncio.run(invoke(registered, "read_edn", {"path": "huge.edn", "key_path": [":a"]}))
    assert text == ("ERROR: huge.edn is too large for the EDN tools (52,428,801 bytes; the limit is 52,428,800 "
                    "bytes); the filesystem's read_file can read it in pages")


def test_the_tools_read_and_edit_a_large_file_in_a_few_times_its_size(tmp_path, big):
    text, _ = big
    (tmp_path / "big.edn").write_text(text, encoding="utf-8")
    cap = caps.edn(tmp_path, writable=True)
    keys = [str(k) if isinstance(k, int) else k for k in near_end_path(text)]
    tracemalloc.start()
    try:
        assert cap.set_edn("big.edn", keys, "5/7") == f"Set {' '.join(keys)} to 5/7 in big.edn"
        assert cap.read_edn("big.edn", keys) == "5/7\n"
        whole = cap.read_edn("big.edn")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 * len(text), f"{peak:,} bytes at the peak for a {len(text):,} character file"
    # a value too long to show whole is shown as written, not read and printed
    edited = (tmp_path / "big.edn").read_text(encoding="utf-8")
    form = edited[edited.index("{:config"):].rstrip("\n")
    assert len(form) > MAX_PRINTED_CHARS
    assert whole == form[:100_000] + (f"\n\n[Showed 100,000 of {len(form) + 1:,} characters of this value as "
                                      "written in the file; read a longer key_path to see one part of this value.]")


# --- hostile text -------------------------------------------------------------------------------

DEEP = 100_000
HOSTILE = [
    pytest.param("[" * DEEP + "]" * DEEP, f"nested more than {MAX_DEPTH} levels deep", id="100k nested vectors"),
    pytest.param("{:a " * DEEP + "1" + "}" * DEEP, "nested more than", id="100k nested maps"),
    pytest.param("'" * DEEP + "x", "nested more than", id="100k quotes"),
    pytest.param("^:m " * DEEP + "{}", "nested more than", id="100k metadata"),
    pytest.param("#t " * DEEP + "1", "nested more than", id="100k tags"),
    pytest.param("[" * DEEP, "nested more than|Unterminated collection in EDN: the [ opened at line 1, column 1",
                 id="100k unclosed"),
    pytest.param('{:a "' + "x" * 3_000_000, "Unterminated string in EDN at line 1, column 5", id="unterminated string"),
    pytest.param("{:a [" + "1 " * 1_000_000, "Unterminated collection in EDN: the [ opened at line 1, column 5",
                 id="unterminated vector"),
    pytest.param("{:a " + "9" * 1_000_000 + "}", "has too many digits to read (1,000,000 characters",
                 id="a million-digit integer"),
    pytest.param("{:a 1/" + "7" * 100_000 + "}", "has too many digits", id="a huge ratio"),
    pytest.param("{:a " + "x" * 500_000 + "/}", "Invalid symbol or keyword in EDN: xxxx", id="a long bad symbol"),
]


@pytest.mark.parametrize("text, message", HOSTILE)
def test_hostile_text_is_refused_clearly_and_quickly(tmp_path, text, message):
    (tmp_path / "bad.edn").write_text(text, encoding="utf-8")
    cap = caps.edn(tmp_path, writable=True)
    nested = text.startswith("{:a ") and not text.startswith("{:a {")
    attempts = [lambda: edn.loads(text), lambda: edn.read_file(tmp_path / "bad.edn"),
                lambda: cap.read_edn("bad.edn", [":a"] if nested else None)]
    if nested:
        attempts.append(lambda: cap.set_edn("bad.edn", [":a", ":b"], "1"))
    for attempt in attempts:
        started = time.process_time()
        with pytest.raises(EdnError) as caught:
            attempt()
        assert any(part in str(caught.value) for part in message.split("|")), str(caught.value)
        assert len(str(caught.value)) < 400, "a message quotes at most a short piece of the text"
        assert time.process_time() - started < 10  # CPU: a catastrophic pattern would take minutes
    assert (tmp_path / "bad.edn").read_text(encoding="utf-8") == text


def test_the_deepest_value_read_still_prints_compares_and_hashes():
    text = "[" * MAX_DEPTH + ":x" + "]" * MAX_DEPTH
    value = edn.loads(text)
    assert edn.dumps(value) == text
    assert edn_equal(edn.loads(edn.pretty(value, width=20)), value)
    assert len({value, edn.loads(text)}) == 1
    nested_map = "{:a " * MAX_DEPTH + "1" + "}" * MAX_DEPTH
    assert edn.get_in(edn.loads(nested_map), [K("a")] * MAX_DEPTH) == 1
    assert get_in_text(nested_map, [K("a")] * MAX_DEPTH) == 1
    assert edn.set_in_str(nested_map, [K("a")] * MAX_DEPTH, 2) == nested_map.replace("1", "2")
    with pytest.raises(EdnSyntaxError, match="nested more than 256 levels deep"):
        edn.loads("[" + text + "]")


def test_a_regular_expression_token_is_not_a_catastrophe():
    """Possessive patterns: a long run that almost matches fails in one pass."""
    for text in ['"' + "\\\\" * 200_000 + "\\", "#" + '"' * 3, ";" * 1_000_000, "\\" + " " * 1_000_000]:
        started = time.process_time()
        TOKEN.match(text)
        with pytest.raises(EdnSyntaxError):
            edn.loads("[" + text)
        assert time.process_time() - started < 10  # CPU: a catastrophic pattern would take minutes


# --- the package -----------------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    """The modules of the edn package that ``path`` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 1:
            raise AssertionError(f"{path.name} reaches outside the edn package: {ast.unparse(node)}")
    return names


def test_the_edn_package_has_layers_and_no_cycles():
    modules = {path.stem: _imports(path) for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert set(modules) >= {"_values", "_writer", "_syntax", "_pieces", "_reader", "_walk", "_tree", "_splice",
                            "_data", "_files"}
    done: list[str] = []

    def visit(name: str, chain: tuple[str, ...]) -> None:
        assert name not in chain, "import cycle: " + " -> ".join((*chain, name))
        for imported in sorted(modules[name]):
            visit(imported, (*chain, name))
        done.append(name)

    for name in modules:
        visit(name, ())
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    assert not (PACKAGE.parent / "_edn_text.py").exists()


def test_edn_is_still_imported_only_when_first_used():
    code = ("import sys, bettong_nb\n"
            "assert 'bettong_nb.edn' not in sys.modules\n"
            "print(bettong_nb.edn.get_in(bettong_nb.edn.loads('{:a [1 2]}'), [bettong_nb.edn.Keyword('a'), 1]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(PACKAGE.parent.parent)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2\n"
