"""One rule for every view of the person's data — the namespace tool, ``{name}`` in a prompt,
``{Err}`` and ``%agent explain``, the frames ``--data`` hands to SQL: what one hides, all hide.

    hides("db_password", "hunter2!")          # True: a credential-like name holds text
    hides("max_tokens", 4096)                  # False: numbers, dates, numeric columns show
    safe_repr({"user": "me", "api_key": "x"})  # "{'user': 'me', 'api_key': [hidden]}"
    held_strings(user_ns)                      # what to redact wherever it turns up
    without_hidden(df)                         # credential columns as [hidden]

A name that looks like a credential (:func:`~bettong_nb.safety.secrets.is_credential_name`)
hides what it holds, wherever the name is: a variable, a dict key, an object's attribute
(read without running its code), a DataFrame's column or index, a Series. Numbers, booleans,
dates and numeric arrays or columns stay visible. The strings held under such names anywhere
(:func:`held_strings`) are redacted from every text shown, so a key copied into an innocent
variable is caught too, when it is at least MIN_SECRET_LENGTH characters long.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import reprlib
from typing import Any, Iterable, Iterator, Mapping

from . import secrets

__all__ = ["HIDDEN", "hides", "hidden_columns", "held_strings", "without_hidden", "shown_text", "safe_repr",
           "is_frame", "is_series", "is_array", "attributes", "NOT_SECRET", "NUMERIC_KINDS"]


def _module_of(value: Any) -> str:
    return type(value).__module__.split(".")[0]


def is_frame(value: Any) -> bool:
    return _module_of(value) == "pandas" and hasattr(value, "dtypes") and hasattr(value, "columns")


def is_series(value: Any) -> bool:
    return _module_of(value) == "pandas" and hasattr(value, "dtype") and hasattr(value, "index") \
        and not hasattr(value, "columns")


def is_array(value: Any) -> bool:
    return _module_of(value) == "numpy" and hasattr(value, "shape") and hasattr(value, "dtype")


HIDDEN = "[hidden]"
NOT_SECRET = (bool, int, float, complex, datetime.date, datetime.time, datetime.timedelta, type(None))
NUMERIC_KINDS = "biufcmM"  # numpy dtype kinds: bool, integers, floats, complex, datetimes


def _may_hold_secret(value: Any) -> bool:
    """False for values that cannot spell a credential: numbers, dates, numeric arrays and columns."""
    if isinstance(value, NOT_SECRET):
        return False
    if is_frame(value):
        return any(getattr(t, "kind", "O") not in NUMERIC_KINDS for t in value.dtypes)
    if is_series(value) or is_array(value):
        return getattr(value.dtype, "kind", "O") not in NUMERIC_KINDS
    return True


def hides(name: Any, value: Any) -> bool:
    return secrets.is_credential_name(str(name)) and _may_hold_secret(value)


def attributes(value: Any) -> list[tuple[str, Any]]:
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
    if isinstance(value, NOT_SECRET) or is_frame(value) or is_series(value) or is_array(value):
        return
    if isinstance(value, dict):
        pairs: Iterable = value.items()
    elif isinstance(value, (list, tuple, set, frozenset)) and not hasattr(type(value), "_fields"):
        pairs = ((None, item) for item in value)
    elif type(value).__name__ in ("module", "function", "builtin_function_or_method", "type", "method"):
        return
    else:
        own = [(k, v) for k, v in type(value).__dict__.items() if isinstance(v, str)]  # class constants
        pairs = itertools.chain(attributes(value), own)
    for key, item in itertools.islice(pairs, 200):
        yield from _walk_strings(item, budget, depth + 1, hidden or (key is not None and secrets.is_credential_name(str(key))))


def _holds_hidden(fields: list[tuple[str, Any]], depth: int = 3) -> bool:
    """Whether a credential-named field lies among ``fields`` or the fields of the objects in
    them: then the object is shown field by field, since its own repr could print it."""
    for name, value in fields:
        if hides(name, value):
            return True
        if depth and not isinstance(value, (str, bytes, bytearray, *NOT_SECRET, dict, list, tuple, set, frozenset)) \
                and not (is_frame(value) or is_series(value) or is_array(value)) \
                and _holds_hidden(attributes(value), depth - 1):
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
        items = [f"{self.repr1(k, level - 1)}: {HIDDEN if hides(k, v) else self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(x.items(), self.maxdict)]
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(items) + more + "}"

    def repr_instance(self, x: Any, level: int) -> str:
        if is_frame(x) and hidden_columns(x):
            return f"<DataFrame {x.shape[0]} rows x {x.shape[1]} columns: {', '.join(map(str, x.columns[:20]))}>"
        if is_series(x) and hides(x.name, x):
            return f"<Series {x.name!r}, {len(x)} values: {HIDDEN}>"
        fields = [] if is_frame(x) or is_series(x) or is_array(x) else attributes(x)
        if not _holds_hidden(fields):
            return super().repr_instance(x, level)
        if level <= 0:
            return f"{type(x).__qualname__}(...)"
        shown = ", ".join(f"{name}={HIDDEN if hides(name, value) else self.repr1(value, level - 1)}"
                          for name, value in fields[:self.maxdict])
        return f"{type(x).__qualname__}({shown})"


_short = _SafeRepr()


def hidden_columns(frame: Any) -> list[int]:
    """Positions of a frame's columns named like credentials that hold more than numbers."""
    return [i for i, (name, dtype) in enumerate(frame.dtypes.items())
            if secrets.is_credential_name(str(name)) and getattr(dtype, "kind", "O") not in NUMERIC_KINDS]




def held_strings(namespace: Mapping[str, Any]) -> list[str]:
    """Strings held under credential names anywhere in ``namespace`` (private ``_names`` too), for
    redacting wherever they turn up: at most 2000 values visited per variable, 20 000 in all and
    256 strings kept (each costs the redaction's matcher some work), so a huge namespace stays
    cheap to look at."""
    found: dict[str, None] = {}
    visited = 0
    # credential-named variables first: the budget must not run out before them
    for name, value in sorted(namespace.items(), key=lambda item: not secrets.is_credential_name(str(item[0]))):
        budget = [2_000]
        for text in _walk_strings(value, budget, hidden=secrets.is_credential_name(str(name))):
            if len(text.strip()) >= secrets.MIN_SECRET_LENGTH:
                found[text] = None
        visited += 2_000 - max(budget[0], 0)
        if visited >= 20_000 or len(found) >= 256:
            break
    return list(found)


def without_hidden(frame: Any) -> Any:
    """A copy of a DataFrame whose credential-named text columns hold ``[hidden]`` (the frame
    itself when it has none): what SQL over the person's frames (``--data``) may read."""
    hidden = hidden_columns(frame)
    if not hidden:
        return frame
    copy = frame.copy()
    for i in hidden:
        copy.isetitem(i, [HIDDEN] * len(copy))
    return copy


def shown_text(name: Any, value: Any) -> str:
    """How a value (not a DataFrame: see :func:`without_hidden`) reads where a person's data is
    shown: ``[hidden]`` under a credential name; its ``str()``, or its :func:`safe_repr` when it
    holds text under such a name (a dict's ``api_key``, an object's ``password``)."""
    if hides(name, value):
        return HIDDEN
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if next(_walk_strings(value, [2_000]), None) is not None:
            return safe_repr(value)
    elif _holds_hidden(attributes(value), 1):  # its own fields: an object that prints itself is trusted past them
        return safe_repr(value)
    return str(value)


def safe_repr(value: Any) -> str:
    """A bounded repr that shows what ``value`` holds under credential names as ``[hidden]``."""
    return _short.repr(value)
