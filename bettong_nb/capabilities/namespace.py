"""Let the agent look at your variables, read-only: ``capabilities.namespace()``.

    caps.namespace()                         # the notebook's variables
    caps.namespace({"df": df}, names=["df"])  # any dict; ``names`` limits what it may see

Tools: list_variables, describe_variable(name, rows=5). Nothing is executed but read-only
inspection (shape, dtypes, head, describe, null counts, a bounded repr); nothing is changed.
Output is bounded by ``max_chars`` and redacted like every tool result.

Credentials, by the rule every view of the person's data follows (:mod:`bettong_nb.safety.hidden`).
A name that looks like a credential (:func:`bettong_nb.secrets.is_credential_name`:
``password``, ``db_passwd``, ``apiKey``, ``GITHUB_TOKEN``, ``client_secret``, ``auth`` ...)
hides what it holds, wherever the name is: a variable, a dict key, an object's attribute
(dataclass fields, namedtuple fields, ``__slots__``, ``__dict__``), a DataFrame column or
index, a Series. The value shows as ``[hidden]``; numbers, booleans, dates and numeric
arrays or columns stay visible (``max_tokens = 4096`` is no secret). An object holding such
an attribute is shown field by field instead of through its own ``__repr__``, which could
print it. Every text returned is then redacted of the credential environment values, of the
URL passwords and token shapes :func:`~bettong_nb.secrets.redact` finds, and of every string
held under a credential name anywhere in the namespace (private ``_names`` too), so a key
copied into an innocent variable is caught — when it is at least
:data:`~bettong_nb.secrets.MIN_SECRET_LENGTH` characters long. Names count by substring, so
``author`` and ``keyboard`` columns are hidden too: hiding too much costs a look, too little a
leak.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..safety import secrets
from ..safety.hidden import (HIDDEN, NOT_SECRET, held_strings, hidden_columns, hides, is_array,
                             is_frame, is_series, safe_repr)
from ..core.kernel import ipython_shell
from ..core.capability import Tool

__all__ = ["namespace", "Namespace", "user_namespace"]

# names IPython puts in every user namespace; never the user's data
_IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})


def user_namespace() -> dict:
    """The running IPython shell's user namespace (where ``%%agent`` cells run)."""
    shell = ipython_shell()
    if shell is not None:
        return shell.user_ns
    raise RuntimeError("no IPython shell is running: pass the namespace dict to look into, "
                       "e.g. capabilities.namespace(globals())")


def _safe(fn, default: str) -> str:
    """A read that may fail on an odd object (a repr that raises) gives a note, not a crash."""
    try:
        return fn()
    except Exception as exc:
        return f"{default} ({type(exc).__name__}: {exc})"


def _size(value: Any) -> str:
    def nbytes() -> int:
        if is_frame(value) or is_series(value):
            deep = len(value) <= 100_000  # deep counting walks every object cell
            total = value.memory_usage(deep=deep)
            return int(total.sum() if hasattr(total, "sum") else total)
        if is_array(value):
            return int(value.nbytes)
        return sys.getsizeof(value)

    try:
        n = float(nbytes())
    except Exception:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "?"


def _shape(value: Any) -> str:
    if is_frame(value) or is_series(value) or is_array(value):  # not hasattr: it could run __getattr__
        return "x".join(map(str, value.shape))
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"len {len(value)}"
    return ""


def _head(value: Any, rows: int) -> Any:
    """``value.head(rows)`` (a DataFrame or Series) with credential columns and a credential
    index hidden, and objects in cells shown through the safe repr."""
    head = value.head(rows).copy()
    if is_frame(value):
        hidden = hidden_columns(value)
        for i, dtype in enumerate(head.dtypes):
            if i in hidden:
                head.isetitem(i, [HIDDEN] * len(head))
            elif getattr(dtype, "kind", "O") == "O":
                head.isetitem(i, [_cell(c) for c in head.iloc[:, i]])
    elif getattr(head.dtype, "kind", "O") == "O":
        head[:] = [_cell(c) for c in head]
    if any(hides(name, head.index) for name in head.index.names if name is not None):
        head.index = [HIDDEN] * len(head)
    return head


def _cell(value: Any) -> Any:
    return value if isinstance(value, (str, *NOT_SECRET)) else safe_repr(value)


def _describe(value: Any) -> Any:
    """``describe()`` (``include="all"`` for a frame) whose "top" row — the most frequent value
    itself — is hidden in credential columns and shown through the safe repr elsewhere."""
    if is_series(value):
        summary = value.describe()
        if "top" in summary.index and not isinstance(summary["top"], (str, *NOT_SECRET)):
            summary = summary.astype(object)
            summary["top"] = _cell(summary["top"])
        return summary
    summary = value.describe(include="all")
    if "top" not in summary.index:
        return summary
    row, hidden = list(summary.index).index("top"), hidden_columns(value)
    for i, top in enumerate(list(summary.iloc[row])):
        if i in hidden or not isinstance(top, (str, *NOT_SECRET)):
            column = summary.iloc[:, i].astype(object)  # only this column: numbers elsewhere keep their format
            column.iloc[row] = HIDDEN if i in hidden else _cell(top)
            summary.isetitem(i, column)
    return summary


@dataclass
class Namespace:
    """The namespace capability; ``source`` is the dict, or None for the notebook's."""

    source: Mapping[str, Any] | None = field(default=None, repr=False)
    names: frozenset[str] | None = None
    max_chars: int = 4000
    id: str = "namespace"
    tools: list = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.tools = [
            Tool("list_variables", self.list_variables,
                 "List the user's variables: name, type, shape or length, memory size."),
            Tool("describe_variable", self.describe_variable,
                 "Describe one variable without changing it: for a DataFrame its shape, dtypes, head, "
                 "describe() and null counts; for an array its shape, dtype and stats; else a bounded repr.",
                 {"name": {"type": "string", "description": "The variable's name, as list_variables shows it.",
                           "required": True},
                  "rows": {"type": "integer", "description": "How many rows of head to show (default 5)."}}),
        ]

    @property
    def instructions(self) -> str:
        scope = f" Only these names are visible: {', '.join(sorted(self.names))}." if self.names else ""
        return ("You can look at the user's Python variables with list_variables and describe_variable. "
                "They are read-only: you cannot run code or change anything through them." + scope)

    def _visible(self) -> dict[str, Any]:
        ns = self.source if self.source is not None else user_namespace()
        return {k: v for k, v in ns.items()
                if not k.startswith("_") and k not in _IPYTHON_NAMES and (self.names is None or k in self.names)
                and type(v).__name__ not in ("module", "function", "builtin_function_or_method", "type")}

    def _known_secrets(self) -> list[str]:
        return held_strings(self.source if self.source is not None else user_namespace())

    def _bounded(self, text: str) -> str:
        """Redacted first, so a cut cannot leave a secret's prefix; then cut to ``max_chars``."""
        text, _ = secrets.redact(text, extra=self._known_secrets())
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n… [cut: showing {self.max_chars} of {len(text)} characters]"

    def list_variables(self) -> str:
        rows = []
        for name, value in sorted(self._visible().items()):
            if hides(name, value):
                rows.append(f"{name}: {type(value).__name__}, value hidden (the name looks like a credential)")
                continue
            shape = _shape(value)
            rows.append(f"{name}: {type(value).__name__}" + (f", {shape}" if shape else "") + f", {_size(value)}")
        return self._bounded("\n".join(rows) if rows else "(no variables)")

    def describe_variable(self, name: str, rows: int = 5) -> str:
        visible = self._visible()
        if name not in visible:
            raise KeyError(f"No variable called {name!r} is visible; list_variables shows what is")
        value, rows = visible[name], max(0, min(int(rows), 50))
        if hides(name, value):
            parts = [f"{type(value).__name__}, value hidden: the name looks like a credential"]
        elif is_frame(value):
            hidden = [str(value.columns[i]) for i in hidden_columns(value)]
            parts = [f"DataFrame {value.shape[0]} rows x {value.shape[1]} columns"
                     + (f" (values hidden in {', '.join(hidden)}: the names look like credentials)" if hidden else ""),
                     "dtypes:\n" + _safe(lambda: value.dtypes.to_string(), "(dtypes unavailable)"),
                     f"head({rows}):\n" + _safe(lambda: _head(value, rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: _describe(value).to_string(), "(no describe)"),
                     "null counts:\n" + _safe(lambda: value.isna().sum().to_string(), "(no null counts)")]
        elif is_series(value) and hides(value.name, value):
            parts = [f"Series {value.name!r}, {len(value)} values, dtype {value.dtype}: values hidden, "
                     "the name looks like a credential"]
        elif is_series(value):
            parts = [f"Series {value.name!r}, {len(value)} values, dtype {value.dtype}",
                     f"head({rows}):\n" + _safe(lambda: _head(value, rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: _describe(value).to_string(), "(no describe)"),
                     f"nulls: {_safe(lambda: str(int(value.isna().sum())), '?')}"]
        elif is_array(value):
            parts = [f"ndarray shape {value.shape}, dtype {value.dtype}, {_size(value)}"]
            if value.size and value.dtype.kind in "biuf":
                parts.append(_safe(lambda: f"min {value.min()}, max {value.max()}, mean {value.mean():.6g}, "
                                           f"std {value.std():.6g}", "(no stats)"))
            parts.append("preview:\n" + _safe(lambda: safe_repr(value.ravel()[:20].tolist()), "(no preview)"))
        elif isinstance(value, str):
            parts = [f"str of {len(value)} characters:", value[: self.max_chars + 1]]
        elif isinstance(value, Mapping):
            items = list(itertools.islice(value.items(), 20))
            parts = [f"{type(value).__name__} with {len(value)} keys",
                     "\n".join(f"  {_safe(lambda: safe_repr(k), '?')}: "
                               f"{HIDDEN if hides(k, v) else _safe(lambda: safe_repr(v), '?')}" for k, v in items)]
        elif isinstance(value, (list, tuple, set, frozenset)):
            parts = [f"{type(value).__name__} of {len(value)} items",
                     _safe(lambda: safe_repr(value), "(repr failed)")]
        else:
            parts = [f"{type(value).__module__}.{type(value).__qualname__}",
                     _safe(lambda: safe_repr(value), "(repr failed)")]
        return self._bounded(f"{name}: " + "\n".join(parts))


def namespace(namespace: Mapping[str, Any] | None = None, *, names: Iterable[str] | None = None,
              max_chars: int = 4000) -> Namespace:
    """A read-only view of a namespace (None: the notebook's user namespace)."""
    return Namespace(namespace, frozenset(names) if names is not None else None, max_chars)
