"""bettong_nb.edn: the reader and printer, the lossless tree, splicing edits and the file API.

Corpora under tests/corpora/edn/:
* ``*.edn`` — real-world-looking files; each must render back byte for byte.
* ``edits.json`` — per file, edits made through the file API. ``replace: [old, new]`` says the
  new file is exactly the old with ``old`` (found once) replaced by ``new``; ``error`` says the
  edit is refused with that message and the file is left byte-identical.
* ``reader.json`` — ``values``: EDN text and how the value it reads prints; ``errors``: text
  that must not read, and a part of the message.
"""

import json
import os
import re
import stat
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from bettong_nb import edn
from bettong_nb.edn import _splice
from bettong_nb.edn import (Char, EdnError, EdnList, EdnMap, EdnSet, EdnSyntaxError, Keyword, Node, Symbol, Tagged,
                            edn_equal)
from support import TESTS

CORPUS = TESTS / "corpora" / "edn"
FILES = sorted(p.name for p in CORPUS.glob("*.edn"))
EDITS = json.loads((CORPUS / "edits.json").read_text(encoding="utf-8"))
READER = json.loads((CORPUS / "reader.json").read_text(encoding="utf-8"))
K = Keyword


def read_bytes_as_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


# --- corpus: files round-trip --------------------------------------------------------------------

def test_the_corpus_is_big_and_every_file_has_edits():
    assert len(FILES) >= 15
    assert sorted(EDITS) == FILES


@pytest.mark.parametrize("name", FILES)
def test_a_corpus_file_renders_back_byte_for_byte(name):
    text = read_bytes_as_text(CORPUS / name)
    assert edn.render(edn.parse(text)) == text


@pytest.mark.parametrize("name", FILES)
def test_a_corpus_file_prints_and_reads_back_as_the_same_data(name):
    data = edn.read_file(CORPUS / name)
    assert edn_equal(edn.loads(edn.dumps(data)), data)
    assert edn_equal(edn.loads(edn.pretty(data, width=40)), data)


# --- corpus: edits touch only what they change ---------------------------------------------------

EDIT_CASES = [pytest.param(name, case, id=f"{name}-{i}-{case['op']}")
              for name, cases in EDITS.items() for i, case in enumerate(cases)]


@pytest.mark.parametrize("name, case", EDIT_CASES)
def test_an_edit_changes_only_its_own_text(tmp_path, name, case):
    original = read_bytes_as_text(CORPUS / name)
    file = tmp_path / name
    file.write_bytes(original.encode("utf-8"))
    before = edn.read_file(file)
    keys = edn.parse_path(case["path"])

    def edit():
        if case["op"] == "set":
            return edn.set_in_file(file, case["path"], case["value"])
        return edn.delete_in_file(file, case["path"])

    if "error" in case:
        with pytest.raises(EdnError, match=re.escape(case["error"])):
            edit()
        assert read_bytes_as_text(file) == original
        return
    returned = edit()
    old, new = case["replace"]
    assert original.count(old) == 1, "the expected change must name a unique piece of text"
    assert read_bytes_as_text(file) == original.replace(old, new)
    after = edn.read_file(file)
    if case["op"] == "set":
        value = edn.parse_value(case["value"])
        assert edn_equal(edn.get_in(after, keys), value)
        assert edn_equal(after, edn.assoc_in(before, keys, value))
    else:
        assert edn.get_in(after, keys) is None
        assert edn_equal(after, edn.dissoc_in(before, keys))
    assert edn_equal(returned, after)
    assert os.listdir(tmp_path) == [name], "no temp file is left behind"


# --- corpus: the reader --------------------------------------------------------------------------

@pytest.mark.parametrize("text, printed", [pytest.param(*v, id=repr(v[0])[:40]) for v in READER["values"]])
def test_edn_reads_and_prints(text, printed):
    value = edn.loads(text)
    assert edn.dumps(value) == printed
    assert edn_equal(edn.loads(printed), value)


@pytest.mark.parametrize("text, message", [pytest.param(*e, id=repr(e[0])[:40]) for e in READER["errors"]])
def test_invalid_edn_is_refused_with_a_clear_message(text, message):
    with pytest.raises(EdnSyntaxError) as caught:
        # a lossless parse followed by reading: some errors only show when the data is built
        edn.loads(text)
    assert message in str(caught.value)


def test_the_python_types_of_edn_values():
    data = edn.loads('{:i 1 :f 1.5 :d 1.5M :r 1/3 :s "s" :c \\c :k :ns/k :y sym :v [1] :l (1) :m {} :t #{1}'
                     ' :g #inst "2024" :n nil :b true}')
    types = {k.name: type(v) for k, v in data.items()}
    assert types == {"i": int, "f": float, "d": Decimal, "r": Fraction, "s": str, "c": Char, "k": Keyword,
                     "y": Symbol, "v": tuple, "l": EdnList, "m": EdnMap, "t": EdnSet, "g": Tagged,
                     "n": type(None), "b": bool}
    assert data[K("k")] == K("ns/k") and data[K("g")] == Tagged("inst", "2024") and data[K("c")] == Char("c")


# --- equality (pitfall 10) -----------------------------------------------------------------------

@pytest.mark.parametrize("a, b, equal", [
    (1, 1.0, False),
    (1, True, False),
    (0, False, False),
    (None, False, False),
    ((1, 2), EdnList((1, 2)), True),          # a vector equals a list, as in Clojure
    ([1, 2], (1, 2), True),
    ((1,), (True,), False),
    (K("a"), Symbol("a"), False),
    (K("a"), "a", False),
    (Char("a"), "a", False),
    (Fraction(1, 2), 0.5, False),
    (Decimal("0.5"), 0.5, False),
    (Fraction(4, 2), 2, True),
    (EdnMap({1: "x"}), EdnMap({True: "x"}), False),
    (EdnMap({K("a"): (1,)}), {K("a"): [1]}, True),
    (EdnMap({K("a"): 1, K("b"): 2}), EdnMap({K("b"): 2, K("a"): 1}), True),
    (EdnSet([1, 2]), {2, 1}, True),
    (EdnSet([1]), EdnSet([1.0]), False),
    (Tagged("inst", "x"), Tagged("inst", "x"), True),
    (Tagged("a", 1), Tagged("a", True), False),
    (Tagged("a", 1), Tagged("b", 1), False),
    (float("nan"), float("nan"), True),       # or a file holding ##NaN could never be verified
])
def test_edn_equality_follows_clojure(a, b, equal):
    assert edn_equal(a, b) is equal
    assert edn_equal(b, a) is equal


def test_maps_and_sets_keep_keys_apart_that_python_would_merge():
    data = edn.loads("{1 :int 1.0 :float true :bool}")
    assert len(data) == 3
    assert (data[1], data[1.0], data[True]) == (K("int"), K("float"), K("bool"))
    assert len(edn.loads("#{1 1.0 true}")) == 3
    assert data != EdnMap({1: K("int"), 1.0: K("float"), 2: K("bool")})


def test_every_value_is_hashable_so_collections_can_be_keys():
    data = edn.loads('{[1 2] :vec {:a 1} :map #{3} :set #inst "x" :tag (1) :list}')
    assert data[(1, 2)] == K("vec")
    assert data[edn.loads("(1 2)")] == K("vec")             # a list finds the equal vector
    assert data[{K("a"): 1}] == K("map")                   # a plain dict finds the map
    assert data[frozenset({3})] == K("set")
    assert data[Tagged("inst", "x")] == K("tag")
    assert len({edn.loads("{:a [1 {:b #{2}}]}"), edn.loads("{:a [1 {:b #{2}}]}")}) == 1


def test_maps_are_immutable_and_ordered():
    m = EdnMap({K("a"): 1})
    bigger = m.assoc(K("b"), 2).assoc(K("a"), 3)
    assert list(bigger.items()) == [(K("a"), 3), (K("b"), 2)]
    assert dict(m) == {K("a"): 1}
    assert list(bigger.dissoc(K("a"))) == [K("b")]
    with pytest.raises(TypeError):
        m[K("a")] = 2  # type: ignore[index]


# --- printing ------------------------------------------------------------------------------------

def test_values_print_like_clojure():
    assert edn.dumps({K("a"): 1, K("b"): 2}) == "{:a 1, :b 2}"
    assert edn.dumps({K("url"): "jdbc:pg"}) == '{:url "jdbc:pg"}'
    assert edn.dumps(EdnSet([1, 2])) == "#{1 2}"
    assert edn.dumps([None, True, False, "s", Char("\n"), Symbol("x")]) == '[nil true false "s" \\newline x]'
    assert edn.dumps(EdnList([1, EdnList([])])) == "(1 ())"
    assert edn.dumps(Tagged("uuid", "f81d")) == '#uuid "f81d"'
    assert edn.dumps('tab\t"q"\\') == '"tab\\t\\"q\\"\\\\"'


def test_python_values_that_are_not_edn_are_refused():
    with pytest.raises(TypeError, match="object cannot be written as EDN"):
        edn.dumps(object())
    with pytest.raises(EdnError, match="no EDN form"):
        edn.dumps(Decimal("NaN"))


def test_pretty_breaks_wide_collections_one_entry_per_line():
    data = edn.loads('{:name "a fairly long service name" :hosts ["alpha.internal" "beta.internal"] :port 8080}')
    assert edn.pretty(data, width=40) == ('{:name "a fairly long service name",\n'
                                          ' :hosts ["alpha.internal"\n'
                                          '         "beta.internal"],\n'
                                          ' :port 8080}')
    assert edn.pretty(K("short")) == ":short"


# --- path and value decoding (edn_test 1-3) ------------------------------------------------------

@pytest.mark.parametrize("key, parsed", [
    (":server", K("server")),
    ("0", 0),
    ('"name"', "name"),
    ("sym", Symbol("sym")),
    ("a b", Symbol("a")),              # only the first form is read
    (":a ]", K("a")),                  # what follows the first form is never read
    ("]nonsense[", "]nonsense["),      # unreadable: stays a string
    ("", ""),
    ("nil", "nil"),                    # nil is no key: stays a string
    ("false", False),
    ("[1 2]", (1, 2)),
    (7, 7),                            # not a string: already a key
    (K("server"), K("server")),
])
def test_path_elements_are_read_as_edn(key, parsed):
    result = edn.parse_key(key)
    assert edn_equal(result, parsed) and type(result) is type(parsed)


def test_a_single_key_is_a_path():
    assert edn.parse_path(":server") == [K("server")]
    assert edn.parse_path([":server", "0"]) == [K("server"), 0]
    assert edn.parse_path((K("a"), 1)) == [K("a"), 1]
    assert edn.parse_path(None) == [None]


@pytest.mark.parametrize("value, parsed", [
    ("8080", 8080), ('"localhost"', "localhost"), (":prod", K("prod")), ("[1 2 3]", (1, 2, 3)),
    ("{:a 1}", EdnMap({K("a"): 1})), ("false", False), ("nil", None), ("", None), ("localhost", Symbol("localhost")),
    (42, 42), ([1, "x"], [1, "x"]),
])
def test_values_are_read_as_edn(value, parsed):
    assert edn_equal(edn.parse_value(value), parsed)


def test_an_unreadable_value_is_an_error():
    with pytest.raises(EdnSyntaxError, match="Unterminated collection"):
        edn.parse_value("{:a")


# --- the file API (edn_test 4-28) ----------------------------------------------------------------

CONFIG = """;; app config
{:server {:host "localhost"
          :port 8080}
 ;; feature flags
 :flags [:a :b]
 :debug false}
"""

POOL = """;; database settings

{:db {:pool-size 20   ; connections
      :url "jdbc:pg"}

 ;; logging
 :log {:level :info}}
"""


@pytest.fixture
def config(tmp_path):
    file = tmp_path / "config.edn"
    file.write_text(CONFIG)
    return file


def test_reads_a_nested_value(config):
    assert edn.get_in_file(config, [":server", ":port"]) == 8080
    assert edn.get_in_file(config, [":server", ":host"]) == "localhost"
    assert edn.get_in_file(config, [":flags"]) == (K("a"), K("b"))
    assert edn.get_in_file(config, [":flags", "1"]) == K("b")
    assert edn.get_in_file(config, [K("server"), K("port")]) == 8080


def test_reads_the_whole_file_for_an_empty_path(config):
    whole = edn.get_in_file(config, [])
    assert edn_equal(whole, edn.loads('{:server {:host "localhost" :port 8080} :flags [:a :b] :debug false}'))
    assert edn_equal(edn.read_file(config), whole)


def test_a_missing_key_reads_as_nil(config):
    assert edn.get_in_file(config, [":nope"]) is None
    assert edn.get_in_file(config, [":server", ":nope"]) is None
    assert edn.get_in_file(config, [":flags", "9"]) is None
    assert edn.get_in_file(config, [":debug"]) is False


def test_sets_a_nested_value(config):
    data = edn.set_in_file(config, [":server", ":port"], "9090")
    assert edn.get_in_file(config, [":server", ":port"]) == 9090
    assert edn.get_in_file(config, [":server", ":host"]) == "localhost"
    assert edn.get_in_file(config, [":flags"]) == (K("a"), K("b"))
    assert edn_equal(data, edn.read_file(config))


def test_sets_a_top_level_value(config):
    edn.set_in_file(config, ":debug", "true")
    assert edn.get_in_file(config, ":debug") is True


def test_creates_missing_intermediate_maps(config):
    edn.set_in_file(config, [":db", ":pool", ":size"], "10")
    assert edn_equal(edn.get_in_file(config, [":db"]), {K("pool"): {K("size"): 10}})
    assert config.read_text().endswith(':debug false\n :db {:pool {:size 10}}}\n')


def test_sets_a_vector_element_by_index(config):
    edn.set_in_file(config, [":flags", "1"], ":z")
    assert edn.get_in_file(config, [":flags"]) == (K("a"), K("z"))
    edn.set_in_file(config, [":flags", 0], K("y"))
    assert edn.get_in_file(config, [":flags"]) == (K("y"), K("z"))


def test_sets_values_of_every_shape_in_a_file(config):
    nested = '{:a [1 {:b #{:c}}] :d "e" :f \\g :h 1/2 :i 2.5M :j #inst "2024-01-01"}'
    edn.set_in_file(config, [":nested"], nested)
    assert edn_equal(edn.get_in_file(config, [":nested"]), edn.loads(nested))
    edn.set_in_file(config, [":b"], "nil")
    assert K("b") in edn.read_file(config) and edn.get_in_file(config, [":b"]) is None


def test_python_values_are_set_as_they_are(config):
    edn.set_in_file(config, [":server", ":host"], "example.org")   # EDN text: a symbol
    assert edn.get_in_file(config, [":server", ":host"]) == Symbol("example.org")
    edn.set_in_file(config, [":opts"], {K("retries"): [1, 2], "mode": None})
    assert edn_equal(edn.get_in_file(config, [":opts"]), edn.loads('{:retries [1 2] "mode" nil}'))


def test_an_empty_path_is_refused(config):
    for edit in (lambda: edn.set_in_file(config, [], "1"), lambda: edn.delete_in_file(config, []),
                 lambda: edn.update_in_file(config, [], lambda v: v)):
        with pytest.raises(EdnError, match="path must name at least one key"):
            edit()
    assert config.read_text() == CONFIG


def test_the_file_stays_readable(config):
    edn.set_in_file(config, [":server", ":port"], "9090")
    text = config.read_text()
    assert text.count("\n") == CONFIG.count("\n")
    assert isinstance(edn.read_file(config), EdnMap)


def test_updates_a_value_from_its_old_one(config):
    edn.update_in_file(config, [":server", ":port"], lambda port: port + 1)
    assert edn.get_in_file(config, [":server", ":port"]) == 8081


def test_update_takes_extra_arguments(config):
    edn.update_in_file(config, [":flags"], lambda flags, item: (*flags, item), K("c"))
    assert edn.get_in_file(config, [":flags"]) == (K("a"), K("b"), K("c"))


def test_an_updated_string_stays_a_string(config):
    edn.update_in_file(config, [":server", ":host"], lambda host: host.upper() + " :x")
    assert edn.get_in_file(config, [":server", ":host"]) == "LOCALHOST :x"


def test_deletes_a_top_level_key(config):
    data = edn.delete_in_file(config, [":debug"])
    assert K("debug") not in edn.read_file(config)
    assert edn.get_in_file(config, [":server", ":port"]) == 8080
    assert edn_equal(data, edn.read_file(config))


def test_deletes_a_nested_key_from_a_file(config):
    edn.delete_in_file(config, [":server", ":host"])
    assert edn_equal(edn.get_in_file(config, [":server"]), {K("port"): 8080})


def test_deleting_a_missing_key_says_so(config):
    with pytest.raises(EdnError, match="No such key: :nope"):
        edn.delete_in_file(config, [":nope"])
    with pytest.raises(EdnError, match="No such key: :server :nope"):
        edn.delete_in_file(config, [":server", ":nope"])
    assert config.read_text() == CONFIG


def test_editing_a_file_keeps_its_comments_and_blank_lines(tmp_path):
    file = tmp_path / "pool.edn"
    file.write_text(POOL)
    edn.set_in_file(file, [":db", ":pool-size"], "30")
    assert file.read_text() == POOL.replace(":pool-size 20", ":pool-size 30")


def test_updating_a_file_from_its_old_value_keeps_formatting_too(tmp_path):
    file = tmp_path / "pool.edn"
    file.write_text(POOL)
    edn.update_in_file(file, [":db", ":pool-size"], lambda n: n + 1)
    assert file.read_text() == POOL.replace(":pool-size 20", ":pool-size 21")


def test_deleting_from_a_file_keeps_the_comments_around_it(tmp_path):
    file = tmp_path / "pool.edn"
    file.write_text(POOL)
    data = edn.delete_in_file(file, [":db", ":url"])
    assert edn_equal(data, edn.loads("{:db {:pool-size 20} :log {:level :info}}"))
    text = file.read_text()
    assert ";; database settings" in text and "; connections" in text and ";; logging" in text


def test_a_full_rewrite_is_available_when_asked_for(tmp_path):
    file = tmp_path / "pool.edn"
    file.write_text(POOL)
    edn.set_in_file(file, [":db", ":pool-size"], "30", preserve_formatting=False)
    assert edn.get_in_file(file, [":db", ":pool-size"]) == 30
    assert ";" not in file.read_text()
    edn.delete_in_file(file, [":log"], preserve_formatting=False)
    assert file.read_text() == '{:db {:pool-size 30, :url "jdbc:pg"}}\n'


def test_write_file_pretty_prints_and_read_file_reads_the_first_form(tmp_path):
    file = tmp_path / "new.edn"
    data = edn.loads('{:a [1 2] :b {:c "d"}}')
    assert edn.write_file(file, data) is data
    assert file.read_text() == '{:a [1 2], :b {:c "d"}}\n'
    file.write_text("{:first 1} {:second 2}")
    assert edn_equal(edn.read_file(file), {K("first"): 1})


def test_an_edit_that_cannot_be_made_safely_leaves_the_file_alone(config, monkeypatch):
    monkeypatch.setattr(_splice, "node_of", lambda value: Node("token", "{{{"))
    with pytest.raises(EdnError, match="unreadable EDN; file left alone"):
        edn.set_in_file(config, [":server", ":port"], "9090")
    assert config.read_bytes() == CONFIG.encode()
    monkeypatch.setattr(_splice, "node_of", lambda value: Node("token", "1 :sneaky 2"))
    with pytest.raises(EdnError, match="would have changed more than the value asked for"):
        edn.set_in_file(config, [":server", ":port"], "9090")
    assert config.read_bytes() == CONFIG.encode()
    assert os.listdir(config.parent) == ["config.edn"]


def test_a_value_that_does_not_print_back_is_never_written(config):
    with pytest.raises(EdnError, match="would have changed more than the value asked for"):
        edn.set_in_file(config, [":k"], Keyword("has space"))
    with pytest.raises(EdnError, match="unreadable EDN; file left alone"):
        edn.write_file(config, {K("k"): Symbol("two words")})
    assert config.read_text() == CONFIG


def test_writes_replace_the_target_of_a_symlink_and_keep_its_mode(tmp_path, config):
    config.chmod(0o640)
    link = tmp_path / "link.edn"
    link.symlink_to(config)
    edn.set_in_file(link, [":debug"], "true")
    assert link.is_symlink()
    assert edn.get_in_file(config, [":debug"]) is True
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["config.edn", "link.edn"]


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        edn.get_in_file(tmp_path / "nope.edn", [":a"])


# --- the lossless tree and splicing (edn_text_test) ----------------------------------------------

TEXT = """;; Service configuration
;; (comments and blank lines must survive every edit)

{:server {:host "localhost"
          :port 8080}   ; the public port

 ;; feature flags, in rollout order
 :flags [:beta
         :dark-mode   ; new search
         ]
 :timeout 30
 :debug false}
"""

BLANKS = "\n\n\n{:a 1\n\n\n\n :b 2\n\n\n ;; c\n\n :c 3}\n\n"

ROUND_TRIPS = [
    TEXT, "{}", "[]", "#{1 2}", "()", "\n\n{:a 1}\n\n\n", '{:s "} { ;"}', "[#_ignored 1]", "#_{:whole :form} 1",
    "[\\a \\; \\newline \\space \\( \\]]", '#inst "2024-01-02T03:04:05Z"', "^:private {:a 1}", '^{:doc "x"} [1]',
    "'(1 2) @x ~a ~@b `c", ";; only a comment\n;; and another", "{:a 1} ; trailing\n; more", "#(inc %) #\"re\\\"x\"",
    "#:ns{:a 1}", "1,,2\r\n", "#_ #_ a b c", "^:a ^:b #t ;; c\n [x]",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_parse_and_render_are_inverses(text):
    assert edn.render(edn.parse(text)) == text


def test_the_tree_keeps_trivia_as_nodes():
    root = edn.parse("{:a 1 ; one\n :b [2]}")
    assert root.kind == "root" and [c.kind for c in root.children] == ["map"]
    kinds = [c.kind for c in root.children[0].children]
    assert kinds == ["token", "whitespace", "token", "whitespace", "comment", "whitespace", "token", "whitespace",
                     "vector"]
    assert root.children[0].children[4].text == "; one"
    ws = edn.parse("a ,\t b").children[1]
    assert (ws.kind, ws.text) == ("whitespace", " ,\t ")


def test_no_break_spaces_are_not_whitespace():
    assert [c.kind for c in edn.parse("a\u00a0b\u2007c\u202fd").children] == ["token"]
    assert [c.kind for c in edn.parse("a\u2003b").children] == ["token", "whitespace", "token"]


def test_locate_finds_a_nodes_address():
    tree = edn.parse(TEXT)
    assert edn.node_at(tree, edn.locate(tree, [K("server"), K("port")])).text == "8080"
    assert edn.node_at(tree, edn.locate(tree, [K("flags"), 1])).text == ":dark-mode"
    for path in ([K("nope")], [K("server"), K("nope")], [K("flags"), 99], [K("flags"), True], [K("timeout"), 0]):
        assert edn.locate(tree, path) is None


def test_an_edit_keeps_every_comment():
    updated = edn.set_in_str(TEXT, [K("server"), K("port")], 443)
    comments = lambda text: [line.split(";", 1)[1] for line in text.splitlines() if ";" in line]
    assert comments(updated) == comments(TEXT)
    assert ":port 443}   ; the public port" in updated


def test_an_edit_changes_only_the_value():
    assert edn.set_in_str(TEXT, [K("server"), K("port")], 443) == TEXT.replace("8080", "443")


def test_an_edit_keeps_key_order():
    updated = edn.set_in_str(TEXT, [K("debug")], True)
    assert list(edn.loads(updated)) == [K("server"), K("flags"), K("timeout"), K("debug")]


def test_discards_and_tagged_literals_are_untouched():
    text = '{:a 1\n #_{:disabled "old"}\n :at #inst "2024-01-02"\n :b 2}'
    updated = edn.set_in_str(text, [K("b")], 3)
    assert updated == text.replace(":b 2", ":b 3")
    assert '#_{:disabled "old"}' in updated and '#inst "2024-01-02"' in updated


def test_a_tagged_literal_is_replaced_whole():
    text = '{:at #inst "2024-01-02" ; when\n}'
    assert edn.set_in_str(text, [K("at")], Tagged("inst", "2025-05-05")) == text.replace("2024-01-02", "2025-05-05")
    assert edn.set_in_str(text, [K("at")], 5) == '{:at 5 ; when\n}'


def _blank_lines(text):
    return [i for i, line in enumerate(text.split("\n")) if not line.strip()]


def test_runs_of_blank_lines_survive_an_edit():
    updated = edn.set_in_str(BLANKS, [K("b")], 20)
    assert updated == BLANKS.replace(":b 2", ":b 20")
    assert _blank_lines(updated) == _blank_lines(BLANKS)
    assert updated.endswith("}\n\n")


def test_blank_lines_survive_an_insertion():
    updated = edn.set_in_str(BLANKS, [K("d")], 4)
    assert " :c 3\n :d 4}" in updated
    assert updated == BLANKS.replace(":c 3}", ":c 3\n :d 4}")
    assert len(_blank_lines(updated)) == len(_blank_lines(BLANKS))


def test_blank_lines_survive_a_deletion():
    updated = edn.delete_in_str(BLANKS, [K("b")])
    assert updated == BLANKS.replace("\n\n\n\n :b 2", "")
    assert updated.startswith("\n\n\n{:a 1\n\n\n ;; c")


def test_blank_lines_inside_a_nested_collection_survive():
    text = '{:outer {:a "x"\n\n\n         :b [1\n\n             2]}}\n'
    assert edn.set_in_str(text, [K("outer"), K("a")], "y") == text.replace('"x"', '"y"')
    assert edn.set_in_str(text, [K("outer"), K("b"), 1], 3) == text.replace("2]", "3]")


def test_a_file_that_is_nothing_but_blank_lines_around_a_map():
    assert edn.set_in_str("\n\n\n{:a 1}\n\n\n", [K("a")], 2) == "\n\n\n{:a 2}\n\n\n"


def test_sets_a_vector_element_keeping_its_comment():
    updated = edn.set_in_str(TEXT, [K("flags"), 1], K("light-mode"))
    assert edn.loads(updated)[K("flags")] == (K("beta"), K("light-mode"))
    assert ":light-mode   ; new search" in updated


@pytest.mark.parametrize("value", [7, "str", K("kw"), True, False, None, (1, 2), {K("a"): 1}, EdnSet([1, 2]),
                                   EdnList([1]), Fraction(1, 3), Decimal("2.50"), Char("x"), -0.5])
def test_sets_values_of_every_shape(value):
    updated = edn.set_in_str(TEXT, [K("server"), K("port")], value)
    assert edn_equal(edn.loads(updated)[K("server")][K("port")], value)
    assert updated == TEXT.replace("8080", edn.dumps(value))


def test_adds_a_key_that_was_not_there():
    updated = edn.set_in_str(TEXT, [K("db")], {K("url"): "jdbc:pg"})
    assert updated == TEXT.replace(":debug false}", ':debug false\n :db {:url "jdbc:pg"}}')


def test_an_inline_map_stays_inline_when_a_key_is_added():
    assert edn.set_in_str("{:a 1}", [K("b")], 2) == "{:a 1 :b 2}"
    assert edn.set_in_str("{:a 1, :b 2}", [K("c")], 3) == "{:a 1, :b 2, :c 3}"
    assert edn.set_in_str("{}", [K("a")], 1) == "{:a 1}"


def test_a_new_key_after_a_trailing_comment_goes_on_its_own_line():
    assert edn.set_in_str("{:a 1 ; one\n}", [K("b")], 2) == "{:a 1 ; one\n :b 2\n}"
    assert edn.set_in_str("{:a 1\n :b 2 ; two\n}", [K("c")], 3) == "{:a 1\n :b 2 ; two\n :c 3\n}"


def test_a_closing_bracket_on_its_own_line_stays_there():
    text = "{:a 1\n :b 2\n }"
    assert edn.set_in_str(text, [K("c")], 3) == "{:a 1\n :b 2\n :c 3\n }"


def test_creates_a_whole_missing_branch():
    updated = edn.set_in_str(TEXT, [K("db"), K("pool"), K("size")], 10)
    assert edn.loads(updated)[K("db")] == {K("pool"): {K("size"): 10}}
    assert updated == TEXT.replace(":debug false}", ":debug false\n :db {:pool {:size 10}}}")
    assert edn.set_in_str(TEXT, [K("server"), K("tls"), K("on")], True) == TEXT.replace(
        ":port 8080}", ":port 8080\n          :tls {:on true}}")


def test_a_nil_value_becomes_the_map_a_key_is_set_in():
    assert edn.set_in_str("{:db nil ; later\n}", [K("db"), K("url")], "x") == '{:db {:url "x"} ; later\n}'


def test_deletes_a_key():
    updated = edn.delete_in_str(TEXT, [K("debug")])
    assert updated == TEXT.replace("\n :debug false", "")
    assert K("debug") not in edn.loads(updated)


def test_deletes_a_nested_key():
    updated = edn.delete_in_str(TEXT, [K("server"), K("host")])
    assert edn.loads(updated)[K("server")] == {K("port"): 8080}
    assert updated == TEXT.replace('{:host "localhost"\n          :port', "{:port")
    assert "; the public port" in updated


def test_deleting_after_a_comment_keeps_the_next_entry_off_the_comment_line():
    assert edn.delete_in_str("{:a 1 ; one\n :b 2}", [K("b")]) == "{:a 1 ; one\n}"
    assert edn.delete_in_str("{:a 1 ; one\n :b 2\n :c 3}", [K("b")]) == "{:a 1 ; one\n :c 3}"


def test_an_edit_that_would_change_anything_else_is_refused(monkeypatch):
    monkeypatch.setattr(_splice, "node_of", lambda value: Node("token", "1 :sneaky 2"))
    with pytest.raises(EdnError, match="would have changed more than the value asked for"):
        edn.set_in_str(TEXT, [K("server"), K("port")], 443)


def test_an_edit_that_would_break_the_file_is_refused(monkeypatch):
    monkeypatch.setattr(_splice, "node_of", lambda value: Node("token", "{{{"))
    with pytest.raises(EdnError, match="unreadable EDN; file left alone"):
        edn.set_in_str(TEXT, [K("server"), K("port")], 443)


def test_empty_paths_are_refused_in_text_too():
    with pytest.raises(EdnError, match="path must name at least one key"):
        edn.set_in_str(TEXT, [], 1)
    with pytest.raises(EdnError, match="path must name at least one key"):
        edn.delete_in_str(TEXT, [])


def test_deleting_a_missing_key_in_text_says_so():
    with pytest.raises(EdnError, match="No such key: :nope"):
        edn.delete_in_str(TEXT, [K("nope")])


@pytest.mark.parametrize("path, message", [
    ([K("flags"), K("x")], "A vector is indexed by a whole number from 0 to 2, not :x"),
    ([K("flags"), True], "A vector is indexed by a whole number from 0 to 2, not true"),
    ([K("flags"), 3], "not 3"),
    ([K("flags"), 2], "Cannot add the key 2 to a vector; only maps take new keys"),
    ([K("timeout"), K("x")], "Cannot set :x inside 30: only maps and vectors hold keys"),
])
def test_keys_that_do_not_fit_the_data_are_refused(path, message):
    with pytest.raises(EdnError, match=re.escape(message)):
        edn.set_in_str(TEXT, path, 1)


def test_structure_inside_strings_and_char_literals_is_not_structure():
    text = '{:a "} ; {" :b \\; :c \\} :d 1}'
    assert edn.set_in_str(text, [K("d")], 2) == text.replace(":d 1", ":d 2")
    assert edn.set_in_str(text, [K("c")], Char("{")) == text.replace("\\}", "\\{")
    assert edn.delete_in_str(text, [K("b")]) == '{:a "} ; {" :c \\} :d 1}'


def test_discarded_forms_are_skipped_not_counted():
    text = "{:a 1 #_:b #_2 :c 3 #_[:d 4]}"
    assert edn.loads(text) == {K("a"): 1, K("c"): 3}
    assert edn.set_in_str(text, [K("c")], 4) == "{:a 1 #_:b #_2 :c 4 #_[:d 4]}"
    assert edn.delete_in_str(text, [K("c")]) == "{:a 1 #_:b #_2 #_[:d 4]}"
    assert edn.set_in_str("[#_0 1 2]", [0], 9) == "[#_0 9 2]"


def test_sets_and_metadata_are_navigable():
    text = '{:tags #{:a :b} :m ^:private {:x 1} :v ^{:doc "d"} [1 2]}'
    assert edn.set_in_str(text, [K("tags")], EdnSet([K("c")])) == text.replace("#{:a :b}", "#{:c}")
    assert edn.set_in_str(text, [K("m"), K("x")], 2) == text.replace(":x 1", ":x 2")
    assert edn.set_in_str(text, [K("v"), 0], 5) == text.replace("[1 2]", "[5 2]")
    assert edn.set_in_str(text, [K("m"), K("y")], 3) == text.replace(":x 1}", ":x 1 :y 3}")


def test_namespaced_maps_are_navigable():
    text = "{:user #:person{:name \"Ada\" :_/id 1}}"
    assert edn.set_in_str(text, [K("user"), K("person/name")], "Bo") == text.replace('"Ada"', '"Bo"')
    assert edn.set_in_str(text, [K("user"), K("id")], 2) == text.replace(":_/id 1", ":_/id 2")
    assert edn.delete_in_str(text, [K("user"), K("id")]) == '{:user #:person{:name "Ada"}}'


def test_an_empty_document_has_nothing_to_add_to():
    with pytest.raises(EdnError, match="holds no EDN value"):
        edn.set_in_str(";; nothing\n", [K("a")], 1)


def test_a_later_form_is_left_alone():
    text = "{:a 1}\n{:a 1}\n"
    assert edn.set_in_str(text, [K("a")], 2) == "{:a 2}\n{:a 1}\n"


def test_crlf_files_keep_their_line_endings():
    text = "{:a 1 ; one\r\n :b 2}\r\n"
    assert edn.set_in_str(text, [K("c")], 3) == "{:a 1 ; one\r\n :b 2\r\n :c 3}\r\n"
    assert edn.set_in_str("{:a 1 ; one\r\n}", [K("b")], 2) == "{:a 1 ; one\r\n :b 2\r\n}"
