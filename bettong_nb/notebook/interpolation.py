"""How a ``%%agent`` cell's ``{name}`` fields become the prompt.

    interpolate("Compare {df} with {report_path}", user_ns)       # one str
    interpolate("What does {fig} show?", user_ns)                 # ['What does ', Image(...), ' show?']
    notes = []; interpolate("Look at {sales_df}", user_ns, notes=notes)
    notes  # ['{sales_df} is not defined; sent as written']

``{name}``, ``{name.attr}`` and ``{name[key]}`` that resolve in the namespace are replaced by
the value (a lookup, never code: no eval, no format specs; private attributes and callables
are not looked up). ``{{text}}`` gives ``{text}``. Anything else is sent exactly as written, so
pasted code keeps its braces; a field that looks like a variable but does not resolve is
named in ``notes`` so the cell can say so.

Values: a string as it is; a DataFrame as its shape and first :data:`PREVIEW_ROWS` rows, and,
when it has more than :data:`FEW_COLUMNS` columns, each column's dtype and null count (at most
:data:`COLUMN_LINES` columns listed, in at most half the room), all within :data:`PREVIEW_CHARS`
whatever the frame holds (repeated or tuple column names, long dtypes, huge cells); anything else as its
``str()``, within :data:`VALUE_CHARS`. Every value is redacted like a tool result (a variable,
``{In[n]}`` or ``{Out[n]}`` can hold a key) before it is cut to its bound (see :mod:`.excerpts`);
the text the person wrote around the fields is sent as written.

Images: a field whose value is an image (:func:`bettong_nb.images.as_image`: a matplotlib
Figure, a PIL image, an ``IPython.display.Image`` holding data, a :class:`bettong_nb.Image`)
becomes an image part, and the prompt a list of parts (``[str, Image, str, ...]``, the form
``agent.run`` takes). ``{Out[n]}`` qualifies only when cell n's value is such an image: a cell
ending in ``plt.plot(...)`` returns a list of Line2D, which is sent as text; end it with ``fig``
(or ``plt.gcf()``) instead. An image that cannot be sent (an IPython Image of a URL) is left as
written, with a note.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable, Mapping

from ..safety import secrets
from ..safety.hidden import HIDDEN, held_strings, hides, shown_text, without_hidden
from ..core.images import Image, as_image
from .excerpts import NOTE_CHARS, head

__all__ = ["interpolate", "render_value", "PREVIEW_ROWS", "PREVIEW_CHARS", "VALUE_CHARS", "FEW_COLUMNS",
           "COLUMN_LINES"]

PREVIEW_ROWS = 10
PREVIEW_CHARS = 4_000
VALUE_CHARS = 20_000
FEW_COLUMNS = 5  # a wider DataFrame also shows its dtypes and null counts
COLUMN_LINES = 60
NAME_CHARS = 40  # a column's name and dtype in the column list

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


@functools.cache
def _patterns() -> tuple[re.Pattern, re.Pattern]:
    # Compiled on first use: %load_ext stays cheap.
    field = re.compile(r"\{\{(?P<escaped>[^{}]*)\}\}|\{(?P<field>" + _IDENT + r"(?:\." + _IDENT
                       + r"|\[[^\[\]{}]*\])*)\}")
    part = re.compile(r"\.(" + _IDENT + r")|\[([^\[\]{}]*)\]")
    return field, part


class _Skipped(Exception):
    """A field that is deliberately not looked up (a callable, a private attribute)."""


class _Undefined(Exception):
    """A field whose name is not in the namespace."""


def _key(text: str) -> Any:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _lookup(path: str, namespace: Mapping[str, Any]) -> Any:
    name = re.match(_IDENT, path).group(0)
    _, part = _patterns()
    if name not in namespace:
        raise _Undefined(name)
    value = namespace[name]
    for attr, key in part.findall(path[len(name):]):
        if attr:
            if attr.startswith("_"):
                raise _Skipped(attr)
            value = getattr(value, attr)
        else:
            value = value[_key(key)]
    if callable(value):
        raise _Skipped(path)  # a function, class or method: most likely code, not data
    return value


def _is_frame(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and type(value).__name__ in ("DataFrame", "Series")


def _columns(frame: Any, room: int) -> str:
    """One line per column: name, dtype, nulls; the first COLUMN_LINES columns, fewer when they
    would not fit in ``room`` characters. By position: names may repeat, or be tuples."""
    # Names and dtypes are redacted before they are cut to NAME_CHARS (see .excerpts).
    names = [secrets.redact(str(name))[0][:NAME_CHARS] for name in frame.columns[:COLUMN_LINES]]
    kinds = [str(kind)[:NAME_CHARS] for kind in frame.dtypes.iloc[:COLUMN_LINES]]
    nulls = frame.iloc[:, :COLUMN_LINES].isna().sum().tolist()
    width, kind_width = max(map(len, names)), max(map(len, kinds))
    lines = ["Columns (dtype, nulls):"]
    for shown, (name, kind, null) in enumerate(zip(names, kinds, nulls)):
        line = f"{name:<{width}}  {kind:<{kind_width}}  {null} null"
        more = f"… ({len(frame.columns) - shown} more columns)"
        if sum(map(len, lines)) + len(lines) + len(line) + 1 + len(more) > room:
            return "\n".join([*lines, more])
        lines.append(line)
    if len(frame.columns) > COLUMN_LINES:
        lines.append(f"… ({len(frame.columns) - COLUMN_LINES} more columns)")
    return "\n".join(lines)


def _redacted_cells(rows: Any, held: list[str]) -> Any:
    """The preview's rows with their text cells redacted before pandas cuts them to its column
    width (see .excerpts); a cell with nothing to redact keeps its value and its formatting."""
    def cell(value: Any) -> Any:
        text, count = secrets.redact(value if isinstance(value, str) else str(value), extra=held)
        return text if count else value

    if rows.ndim == 1:
        return rows.map(cell) if rows.dtype.kind == "O" else rows
    rows = rows.copy()
    for at, kind in enumerate(rows.dtypes):
        if kind.kind == "O":
            rows.isetitem(at, rows.iloc[:, at].map(cell))
    return rows


def render_value(value: Any, *, name: Any = None, held: Iterable[str] = ()) -> str:
    """How a value reads in a prompt (see the module doc): hidden as the namespace tool hides it
    (:mod:`bettong_nb.safety.hidden`) when ``name`` or what it holds looks like a credential,
    and redacted of ``held`` too."""
    held = list(held)
    if hides(name, value) or (_is_frame(value) and value.ndim == 1 and hides(value.name, value)):
        return HIDDEN
    if isinstance(value, str):
        return secrets.redact(value, extra=held)[0]  # never cut: the person chose to send it
    if _is_frame(value):
        value = without_hidden(value) if value.ndim == 2 else value
        title = f"{type(value).__name__} ({' × '.join(str(n) for n in value.shape)}):\n"
        # The column list takes at most half the room, the rows what is left (less a cut's note).
        wide = value.ndim == 2 and value.shape[1] > FEW_COLUMNS
        columns = "\n" + _columns(value, PREVIEW_CHARS // 2) if wide else ""
        first = _redacted_cells(value.head(PREVIEW_ROWS), held)
        first = first.to_string(max_cols=20, max_colwidth=60) if value.ndim == 2 else first.to_string()
        more = value.shape[0] - PREVIEW_ROWS
        rest = f"\n… ({more} more rows)" if more > 0 else ""
        rows = head(f"{first}{rest}", PREVIEW_CHARS - len(title) - len(columns) - NOTE_CHARS, extra=held)
        return title + rows + columns
    return head(shown_text(name, value), VALUE_CHARS, extra=held)


def _credential_path(path: str) -> bool:
    """Whether a name along ``path`` (``cfg.db[password]``) looks like a credential."""
    return any(secrets.is_credential_name(str(_key(key) if key else attr))
               for attr, key in [(re.match(_IDENT, path).group(0), ""), *_patterns()[1].findall(path)])


def _resolved(match: re.Match, namespace: Mapping[str, Any], notes: list[str] | None,
              held: list[str]) -> str | Image:
    """What one field becomes: text, or an Image; as written when it does not resolve."""
    if match.group("escaped") is not None:
        return "{" + match.group("escaped") + "}"
    try:
        path = match.group("field")
        value = _lookup(path, namespace)
        figure = _artists_figure(value)
        if figure is not None:
            _note(notes, f"{match.group(0)} holds matplotlib artists (what plt.plot returns): sent their figure")
            value = figure
        image = as_image(value)
        if image is not None:
            return image
        return render_value(value, name=path if _credential_path(path) else None, held=held)
    except _Skipped:
        return match.group(0)
    except _Undefined:
        _note(notes, f"{match.group(0)} is not defined; sent as written")
    except Exception as exc:  # anything that does not resolve stays as the user wrote it
        _note(notes, f"{match.group(0)} did not resolve ({type(exc).__name__}: {exc}); sent as written")
    return match.group(0)


def _artists_figure(value: Any) -> Any:
    """The one figure a list of matplotlib artists is drawn on (a cell ending in ``plt.plot(...)``
    has a list of Line2D as its value), else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(type(item).__module__.startswith("matplotlib.") for item in value):
        return None
    figures = {id(figure): figure for figure in (getattr(item, "figure", None) for item in value) if figure is not None}
    return next(iter(figures.values())) if len(figures) == 1 else None


def interpolate(text: str, namespace: Mapping[str, Any], *,
                notes: list[str] | None = None) -> str | list[str | Image]:
    """Replace ``{name}``, ``{name.attr}``, ``{name[key]}`` found in ``namespace``; ``{{x}}`` → ``{x}``;
    leave everything else exactly as written. A str, or a list of parts (str and Image, no
    empty str) when a field is an image. ``notes`` gets a line for each field that looks like a
    variable but did not resolve.

    >>> interpolate("{n} items, {missing}, {{n}}, f(){ return 1; }", {"n": 3})
    '3 items, {missing}, {n}, f(){ return 1; }'
    """
    parts: list[str | Image] = []
    pieces: list[str] = []  # the text since the last image
    end = 0
    held: list[str] | None = None
    for match in _patterns()[0].finditer(text):
        pieces.append(text[end:match.start()])
        end = match.end()
        if held is None and match.group("field") is not None:
            held = held_strings(namespace)  # a key copied into an innocent variable is caught too
        value = _resolved(match, namespace, notes, held or [])
        if isinstance(value, Image):
            parts += ["".join(pieces), value]
            pieces = []
        else:
            pieces.append(value)
    pieces.append(text[end:])
    if not parts:
        return "".join(pieces)
    return [part for part in [*parts, "".join(pieces)] if not isinstance(part, str) or part]


def _note(notes: list[str] | None, line: str) -> None:
    if notes is not None and line not in notes:
        notes.append(line)
