"""Let the agent look at your variables, read-only: ``capabilities.namespace()``.

    caps.namespace()                         # the notebook's variables
    caps.namespace({"df": df}, names=["df"])  # any dict; ``names`` limits what it may see

Tools: list_variables, describe_variable(name, rows=5). Nothing is executed but read-only
inspection (shape, dtypes, head, describe, null counts, a bounded repr); nothing is changed.
Output is bounded by ``max_chars`` and redacted like every tool result.
"""

from __future__ import annotations

import itertools
import reprlib
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .._kernel import ipython_shell
from ..capability import Tool

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


def _module_of(value: Any) -> str:
    return type(value).__module__.split(".")[0]


def _is_frame(value: Any) -> bool:
    return _module_of(value) == "pandas" and hasattr(value, "dtypes") and hasattr(value, "columns")


def _is_series(value: Any) -> bool:
    return _module_of(value) == "pandas" and hasattr(value, "dtype") and hasattr(value, "index") \
        and not hasattr(value, "columns")


def _is_array(value: Any) -> bool:
    return _module_of(value) == "numpy" and hasattr(value, "shape") and hasattr(value, "dtype")


def _safe(fn, default: str) -> str:
    """A read that may fail on an odd object (a repr that raises) gives a note, not a crash."""
    try:
        return fn()
    except Exception as exc:
        return f"{default} ({type(exc).__name__}: {exc})"


def _size(value: Any) -> str:
    def nbytes() -> int:
        if _is_frame(value) or _is_series(value):
            deep = len(value) <= 100_000  # deep counting walks every object cell
            total = value.memory_usage(deep=deep)
            return int(total.sum() if hasattr(total, "sum") else total)
        if _is_array(value):
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
    if hasattr(value, "shape") and isinstance(getattr(value, "shape"), tuple):
        return "x".join(map(str, value.shape))
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"len {len(value)}"
    return ""


_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxdict = 200, 200, 20, 20


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

    def _bounded(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n… [cut: showing {self.max_chars} of {len(text)} characters]"

    def list_variables(self) -> str:
        rows = []
        for name, value in sorted(self._visible().items()):
            shape = _shape(value)
            rows.append(f"{name}: {type(value).__name__}" + (f", {shape}" if shape else "") + f", {_size(value)}")
        return self._bounded("\n".join(rows) if rows else "(no variables)")

    def describe_variable(self, name: str, rows: int = 5) -> str:
        visible = self._visible()
        if name not in visible:
            raise KeyError(f"No variable called {name!r} is visible; list_variables shows what is")
        value, rows = visible[name], max(0, min(int(rows), 50))
        if _is_frame(value):
            parts = [f"DataFrame {value.shape[0]} rows x {value.shape[1]} columns",
                     "dtypes:\n" + _safe(lambda: value.dtypes.to_string(), "(dtypes unavailable)"),
                     f"head({rows}):\n" + _safe(lambda: value.head(rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: value.describe(include="all").to_string(), "(no describe)"),
                     "null counts:\n" + _safe(lambda: value.isna().sum().to_string(), "(no null counts)")]
        elif _is_series(value):
            parts = [f"Series {value.name!r}, {len(value)} values, dtype {value.dtype}",
                     f"head({rows}):\n" + _safe(lambda: value.head(rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: value.describe().to_string(), "(no describe)"),
                     f"nulls: {_safe(lambda: str(int(value.isna().sum())), '?')}"]
        elif _is_array(value):
            parts = [f"ndarray shape {value.shape}, dtype {value.dtype}, {_size(value)}"]
            if value.size and value.dtype.kind in "biuf":
                parts.append(_safe(lambda: f"min {value.min()}, max {value.max()}, mean {value.mean():.6g}, "
                                           f"std {value.std():.6g}", "(no stats)"))
            parts.append("preview:\n" + _safe(lambda: _short.repr(value.ravel()[:20].tolist()), "(no preview)"))
        elif isinstance(value, str):
            parts = [f"str of {len(value)} characters:", value[: self.max_chars + 1]]
        elif isinstance(value, Mapping):
            items = list(itertools.islice(value.items(), 20))
            parts = [f"{type(value).__name__} with {len(value)} keys",
                     "\n".join(f"  {_safe(lambda: _short.repr(k), '?')}: {_safe(lambda: _short.repr(v), '?')}"
                               for k, v in items)]
        elif isinstance(value, (list, tuple, set, frozenset)):
            parts = [f"{type(value).__name__} of {len(value)} items",
                     _safe(lambda: _short.repr(value), "(repr failed)")]
        else:
            parts = [f"{type(value).__module__}.{type(value).__qualname__}",
                     _safe(lambda: _short.repr(value), "(repr failed)")]
        return self._bounded(f"{name}: " + "\n".join(parts))


def namespace(namespace: Mapping[str, Any] | None = None, *, names: Iterable[str] | None = None,
              max_chars: int = 4000) -> Namespace:
    """A read-only view of a namespace (None: the notebook's user namespace)."""
    return Namespace(namespace, frozenset(names) if names is not None else None, max_chars)
