"""Let the agent look at your variables, read-only: ``capabilities.namespace()``.

    caps.namespace()                         # the notebook's variables
    caps.namespace({"df": df}, names=["df"])  # any dict; ``names`` limits what it may see

Tools: list_variables, describe_variable(name, rows=5). Nothing is executed but read-only
inspection (shape, dtypes, head, describe, null counts, a bounded repr); nothing is changed.
Output is bounded by ``max_chars`` and redacted like every tool result.

Credentials. A name that looks like a credential (:func:`bettong_nb.secrets.is_credential_name`:
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

import dataclasses
import datetime
import itertools
import reprlib
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from ..safety import secrets
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
    if _is_frame(value) or _is_series(value) or _is_array(value):  # not hasattr: it could run __getattr__
        return "x".join(map(str, value.shape))
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"len {len(value)}"
    return ""


_HIDDEN = "[hidden]"
_NOT_SECRET = (bool, int, float, complex, datetime.date, datetime.time, datetime.timedelta, type(None))
_NUMERIC_KINDS = "biufcmM"  # numpy dtype kinds: bool, integers, floats, complex, datetimes


def _may_hold_secret(value: Any) -> bool:
    """False for values that cannot spell a credential: numbers, dates, numeric arrays and columns."""
    if isinstance(value, _NOT_SECRET):
        return False
    if _is_frame(value):
        return any(getattr(t, "kind", "O") not in _NUMERIC_KINDS for t in value.dtypes)
    if _is_series(value) or _is_array(value):
        return getattr(value.dtype, "kind", "O") not in _NUMERIC_KINDS
    return True


def _hides(name: Any, value: Any) -> bool:
    return secrets.is_credential_name(str(name)) and _may_hold_secret(value)


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """An object's own fields, read without running its code (no properties, no __getattr__)."""
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a namedtuple
        return list(zip(type(value)._fields, value))
    names: dict[str, None] = {}
    if dataclasses.is_dataclass(value):
        names.update((f.name, None) for f in dataclasses.fields(value))
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update((slot, None) for slot in ([slots] if isinstance(slots, str) else slots))
    try:
        own = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        own = {}
    if isinstance(own, dict):
        names.update((key, None) for key in own if isinstance(key, str))
    out = []
    for attr in itertools.islice(names, 50):
        if attr in ("__dict__", "__weakref__"):
            continue
        try:
            out.append((attr, object.__getattribute__(value, attr)))
        except (AttributeError, TypeError):
            continue
    return out


def _walk_strings(value: Any, budget: list[int], depth: int = 0, hidden: bool = False) -> Iterator[str]:
    """Strings held under a credential name in ``value`` (all of them when ``hidden``); the walk
    stops when ``budget[0]`` nodes have been visited, so a huge namespace stays cheap."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 6:
        return
    if isinstance(value, str):
        if hidden:
            yield value
        return
    if isinstance(value, (bytes, bytearray)):
        if hidden:
            yield bytes(value).decode("utf-8", "replace")
        return
    if isinstance(value, _NOT_SECRET) or _is_frame(value) or _is_series(value) or _is_array(value):
        return
    if isinstance(value, dict):
        pairs: Iterable = value.items()
    elif isinstance(value, (list, tuple, set, frozenset)) and not hasattr(type(value), "_fields"):
        pairs = ((None, item) for item in value)
    elif type(value).__name__ in ("module", "function", "builtin_function_or_method", "type", "method"):
        return
    else:
        own = [(k, v) for k, v in type(value).__dict__.items() if isinstance(v, str)]  # class constants
        pairs = itertools.chain(_attributes(value), own)
    for key, item in itertools.islice(pairs, 200):
        yield from _walk_strings(item, budget, depth + 1, hidden or (key is not None and secrets.is_credential_name(str(key))))


def _holds_hidden(fields: list[tuple[str, Any]], depth: int = 3) -> bool:
    """Whether a credential-named field lies among ``fields`` or the fields of the objects in
    them: then the object is shown field by field, since its own repr could print it."""
    for name, value in fields:
        if _hides(name, value):
            return True
        if depth and not isinstance(value, (str, bytes, bytearray, *_NOT_SECRET, dict, list, tuple, set, frozenset)) \
                and not (_is_frame(value) or _is_series(value) or _is_array(value)) \
                and _holds_hidden(_attributes(value), depth - 1):
            return True
    return False


class _SafeRepr(reprlib.Repr):
    """A bounded repr that shows values under credential names as [hidden]."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring, self.maxother, self.maxlist, self.maxdict = 200, 200, 20, 20

    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, dict):
            return self.repr_dict(x, level)
        return super().repr1(x, level)

    def repr_dict(self, x: dict, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {_HIDDEN if _hides(k, v) else self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(x.items(), self.maxdict)]
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(items) + more + "}"

    def repr_instance(self, x: Any, level: int) -> str:
        if _is_frame(x) and _hidden_columns(x):
            return f"<DataFrame {x.shape[0]} rows x {x.shape[1]} columns: {', '.join(map(str, x.columns[:20]))}>"
        if _is_series(x) and _hides(x.name, x):
            return f"<Series {x.name!r}, {len(x)} values: {_HIDDEN}>"
        fields = [] if _is_frame(x) or _is_series(x) or _is_array(x) else _attributes(x)
        if not _holds_hidden(fields):
            return super().repr_instance(x, level)
        if level <= 0:
            return f"{type(x).__qualname__}(...)"
        shown = ", ".join(f"{name}={_HIDDEN if _hides(name, value) else self.repr1(value, level - 1)}"
                          for name, value in fields[:self.maxdict])
        return f"{type(x).__qualname__}({shown})"


_short = _SafeRepr()


def _hidden_columns(frame: Any) -> list[int]:
    """Positions of a frame's columns named like credentials that hold more than numbers."""
    return [i for i, (name, dtype) in enumerate(frame.dtypes.items())
            if secrets.is_credential_name(str(name)) and getattr(dtype, "kind", "O") not in _NUMERIC_KINDS]


def _head(value: Any, rows: int) -> Any:
    """``value.head(rows)`` (a DataFrame or Series) with credential columns and a credential
    index hidden, and objects in cells shown through the safe repr."""
    head = value.head(rows).copy()
    if _is_frame(value):
        hidden = _hidden_columns(value)
        for i, dtype in enumerate(head.dtypes):
            if i in hidden:
                head.isetitem(i, [_HIDDEN] * len(head))
            elif getattr(dtype, "kind", "O") == "O":
                head.isetitem(i, [_cell(c) for c in head.iloc[:, i]])
    elif getattr(head.dtype, "kind", "O") == "O":
        head[:] = [_cell(c) for c in head]
    if any(_hides(name, head.index) for name in head.index.names if name is not None):
        head.index = [_HIDDEN] * len(head)
    return head


def _cell(value: Any) -> Any:
    return value if isinstance(value, (str, *_NOT_SECRET)) else _short.repr(value)


def _describe(value: Any) -> Any:
    """``describe()`` (``include="all"`` for a frame) whose "top" row — the most frequent value
    itself — is hidden in credential columns and shown through the safe repr elsewhere."""
    if _is_series(value):
        summary = value.describe()
        if "top" in summary.index and not isinstance(summary["top"], (str, *_NOT_SECRET)):
            summary = summary.astype(object)
            summary["top"] = _cell(summary["top"])
        return summary
    summary = value.describe(include="all")
    if "top" not in summary.index:
        return summary
    row, hidden = list(summary.index).index("top"), _hidden_columns(value)
    for i, top in enumerate(list(summary.iloc[row])):
        if i in hidden or not isinstance(top, (str, *_NOT_SECRET)):
            column = summary.iloc[:, i].astype(object)  # only this column: numbers elsewhere keep their format
            column.iloc[row] = _HIDDEN if i in hidden else _cell(top)
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
        """Strings held under credential names anywhere in the namespace: at most 2000 values
        visited per variable, 20 000 in all and 256 strings kept (each costs the redaction's
        matcher some work), so a huge namespace stays cheap to look at."""
        ns = self.source if self.source is not None else user_namespace()
        found: dict[str, None] = {}
        visited = 0
        # credential-named variables first: the budget must not run out before them
        for name, value in sorted(ns.items(), key=lambda item: not secrets.is_credential_name(str(item[0]))):
            budget = [2_000]
            for text in _walk_strings(value, budget, hidden=secrets.is_credential_name(str(name))):
                if len(text.strip()) >= secrets.MIN_SECRET_LENGTH:
                    found[text] = None
            visited += 2_000 - max(budget[0], 0)
            if visited >= 20_000 or len(found) >= 256:
                break
        return list(found)

    def _bounded(self, text: str) -> str:
        """Redacted first, so a cut cannot leave a secret's prefix; then cut to ``max_chars``."""
        text, _ = secrets.redact(text, extra=self._known_secrets())
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n… [cut: showing {self.max_chars} of {len(text)} characters]"

    def list_variables(self) -> str:
        rows = []
        for name, value in sorted(self._visible().items()):
            if _hides(name, value):
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
        if _hides(name, value):
            parts = [f"{type(value).__name__}, value hidden: the name looks like a credential"]
        elif _is_frame(value):
            hidden = [str(value.columns[i]) for i in _hidden_columns(value)]
            parts = [f"DataFrame {value.shape[0]} rows x {value.shape[1]} columns"
                     + (f" (values hidden in {', '.join(hidden)}: the names look like credentials)" if hidden else ""),
                     "dtypes:\n" + _safe(lambda: value.dtypes.to_string(), "(dtypes unavailable)"),
                     f"head({rows}):\n" + _safe(lambda: _head(value, rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: _describe(value).to_string(), "(no describe)"),
                     "null counts:\n" + _safe(lambda: value.isna().sum().to_string(), "(no null counts)")]
        elif _is_series(value) and _hides(value.name, value):
            parts = [f"Series {value.name!r}, {len(value)} values, dtype {value.dtype}: values hidden, "
                     "the name looks like a credential"]
        elif _is_series(value):
            parts = [f"Series {value.name!r}, {len(value)} values, dtype {value.dtype}",
                     f"head({rows}):\n" + _safe(lambda: _head(value, rows).to_string(), "(head unavailable)"),
                     "describe():\n" + _safe(lambda: _describe(value).to_string(), "(no describe)"),
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
                     "\n".join(f"  {_safe(lambda: _short.repr(k), '?')}: "
                               f"{_HIDDEN if _hides(k, v) else _safe(lambda: _short.repr(v), '?')}" for k, v in items)]
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
