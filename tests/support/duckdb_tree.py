"""The DuckDB refusal corpus and the folder it runs against: a root with data, credential files
and symlinks out of it, an outside folder of canaries, and a working directory. Fixtures:

    from support.duckdb_tree import CANARY, CASES, SECRET, guarded, tree  # noqa: F401
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bettong_nb import capabilities as caps

from . import TESTS

__all__ = ["CASES", "CANARY", "SECRET", "tree", "guarded"]

CASES = [json.loads(line) for line in (TESTS / "corpora" / "duckdb_refused.jsonl")
         .read_text().splitlines() if line.strip()]
CANARY = "CANARY-5e0c9d7a"
SECRET = "SECRETVALUE-91ab44f0"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/ (data, credential files, symlinks out), outside/ (canaries), cwd/ (the process's
    working directory during the corpus)."""
    top = tmp_path_factory.mktemp("duck")
    root, outside, cwd = top / "root", top / "outside", top / "cwd"
    for folder in (root / "sub", root / "conf", root / ".ssh", root / ".aws", outside, cwd):
        folder.mkdir(parents=True)
    (root / "data.csv").write_text("a,b\n1,x\n2,y\n")
    (root / "sub" / "x.csv").write_text("a,b\n3,z\n")
    for name in (".env", "sub/.env", "conf/.env", ".ssh/id_rsa", "keys.pem", ".aws/credentials"):
        (root / name).write_text(f"TOKEN={SECRET}\n")
    (root / "conf" / "app.csv").write_text("line\nok\n")
    (root / "more").mkdir()
    (root / "more" / "ok.csv").write_text("n\n1\n")
    (root / "more" / ".env.csv").write_text(f"n\n{SECRET}\n")
    (root / "settings.csv").symlink_to(".env")  # a harmless name for a credential file
    (root / "link_out.csv").symlink_to(outside / "canary.csv")
    (root / "link_dir").symlink_to(outside)
    (outside / "canary.csv").write_text(f"c\n{CANARY}\n")
    (outside / "canary.txt").write_text(CANARY)
    (outside / "canary.json").write_text(json.dumps([{"c": CANARY}]))
    pd.DataFrame({"c": [CANARY]}).to_parquet(outside / "canary.parquet")
    (cwd / "cwd_canary.txt").write_text(CANARY)
    return top


@pytest.fixture(scope="module")
def guarded(tree):
    """One capability for the whole corpus, as a model would keep using it after refusals."""
    return caps.duckdb(tree / "root", tables={"sales": pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})})
