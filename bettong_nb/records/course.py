"""The teacher's view: a folder of student submissions (saved sessions and notebooks) as one
DataFrame, a row per file.

    bettong_nb.course_usage("submissions/")                  # every .json and .ipynb below it
    bettong_nb.course_usage(["alice.ipynb", "bob-chat.json"])

A saved session (``session.save``) holds every request and tool call, so its row is exact: its
tokens, its cost as the usage frame prices it (NaN when a price is unknown; a gateway's reported
cost counts), the tools it called, the calls that ran (``approved``) and those refused
(``denied``). A notebook holds what its ``%%agent`` cells showed: each cell's usage line (requests
and tokens; its cost when the line had one) and one line per tool call with how it ended, plus
the provenance the agent left on cells it wrote or changed (``agent_cells``). A notebook whose
outputs were cleared says nothing of its runs, only of its provenance. A file that is neither is
one row whose ``error`` says why; nothing stops at a bad file.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable

from ..core.pricing import total
from .saving import ResumeError, read

__all__ = ["course_usage", "COLUMNS", "PROVENANCE_KEY"]

COLUMNS = ("file", "requests", "prompt_tokens", "completion_tokens", "cost", "tools", "approved", "denied",
           "agent_cells", "error")
PROVENANCE_KEY = "bettong_nb"  # a cell's metadata key holding what an agent did to it
_RAN = ("ok", "error")
# What a %%agent cell's outputs say in plain text: the usage line and one line per tool call.
_USAGE_LINE = re.compile(r"^(\d+) requests? (\d+) tokens \((\d+) in, (\d+) out\)(?:.*· cost \D*([\d.]+(?:e-?\d+)?))?",
                         re.M)
_CALL_LINE = re.compile(r"^\s*· ([A-Za-z_][\w.-]*)\(.*?\) → (ok|error|denied|not finished|stopped)", re.M)


def course_usage(paths: str | os.PathLike | Iterable[str | os.PathLike]):
    """One row per saved session or notebook in ``paths`` (a folder, searched below it for
    ``.json`` and ``.ipynb`` files, or a list of files): :data:`COLUMNS`. pandas is imported here."""
    import pandas as pd

    rows = [_row(path) for path in _files(paths)]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for name in ("requests", "prompt_tokens", "completion_tokens", "approved", "denied", "agent_cells"):
        frame[name] = frame[name].astype("int64")
    frame["cost"] = frame["cost"].astype("float64")
    return frame


def _files(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        root = Path(paths)
        if root.is_dir():
            return sorted(p for p in root.rglob("*") if p.suffix in (".json", ".ipynb") and p.is_file()
                          and ".ipynb_checkpoints" not in p.parts)
        return [root]
    return [Path(path) for path in paths]


def _row(path: Path) -> dict[str, Any]:
    row = dict.fromkeys(COLUMNS, 0) | {"file": str(path), "cost": 0.0, "tools": "", "error": ""}
    try:
        if path.suffix == ".ipynb":
            row.update(_notebook(json.loads(path.read_text(encoding="utf-8"))))
        else:
            row.update(_session(path))
    except (OSError, ValueError, ResumeError, RecursionError) as error:
        row.update(cost=math.nan, error=f"{type(error).__name__}: {error}")
    return row


def _session(path: Path) -> dict[str, Any]:
    saved = read(path)
    calls = saved.tool_calls
    return {"requests": saved.usage.requests, "prompt_tokens": saved.usage.prompt_tokens,
            "completion_tokens": saved.usage.completion_tokens, "cost": total(saved.requests, saved.prices),
            "tools": _names(call.tool for call in calls), "approved": sum(call.status in _RAN for call in calls),
            "denied": sum(call.status == "denied" for call in calls)}


def _notebook(notebook: Any) -> dict[str, Any]:
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError("not a Jupyter notebook (no cells)")
    requests = prompt = completion = approved = denied = agent_cells = 0
    cost, tools = 0.0, []
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        entries = (cell.get("metadata") or {}).get(PROVENANCE_KEY)
        if isinstance(entries, list) and entries:
            agent_cells += 1
        for text in _plain_outputs(cell):
            for match in _USAGE_LINE.finditer(text):
                requests += int(match[1])
                prompt, completion = prompt + int(match[3]), completion + int(match[4])
                cost += float(match[5]) if match[5] else math.nan  # a line without a cost: unknown
            for name, status in _CALL_LINE.findall(text):
                tools.append(name)
                approved += status in _RAN
                denied += status == "denied"
    return {"requests": requests, "prompt_tokens": prompt, "completion_tokens": completion,
            "cost": cost if requests else 0.0, "tools": _names(tools), "approved": approved, "denied": denied,
            "agent_cells": agent_cells}


def _plain_outputs(cell: dict) -> list[str]:
    texts = []
    for output in cell.get("outputs") or ():
        data = output.get("data") if isinstance(output, dict) else None
        plain = data.get("text/plain") if isinstance(data, dict) else None
        if isinstance(plain, list):
            plain = "".join(plain)
        if isinstance(plain, str):
            texts.append(plain)
    return texts


def _names(tools: Iterable[str]) -> str:
    """The tools used, each once, in the order first used: ``read_file, query_data``."""
    return ", ".join(dict.fromkeys(tools))
