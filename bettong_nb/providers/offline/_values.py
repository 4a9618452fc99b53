"""A structured answer (``output_type=``) from this turn's tool results: a value for the JSON schema
the request carries, its fields taken from the rows a query returned (by column name) and the
numbers and words the results hold.

    value_for(schema, rows=[{"planet": "Jupiter", "moons": "4"}], texts=[...], prompt="...")
"""

from __future__ import annotations

import re
from typing import Any

from ._words import matches, name_words, numbers, words

__all__ = ["value_for"]


def _resolve(schema: dict, root: dict) -> dict:
    while isinstance(schema, dict) and "$ref" in schema:
        path = schema["$ref"].removeprefix("#/").split("/")
        target: Any = root
        for part in path:
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = target
    return schema if isinstance(schema, dict) else {}


def _kind(schema: dict) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        return next((k for k in kind if k != "null"), None)
    return kind


def _field(row: dict[str, str], name: str) -> str | None:
    """The row's value for a field: the column of that name, or whose words the field's words name."""
    if name in row:
        return row[name]
    parts = name_words(name)
    return next((v for column, v in row.items()
                 if all(any(matches(p, c) for c in name_words(column)) for p in parts)), None)


def _number(text: str | None, kind: str) -> int | float | None:
    found = numbers(text or "")
    if not found:
        return None
    value = float(found[0])
    return int(value) if kind == "integer" and value.is_integer() else (value if kind == "number" else None)


def value_for(schema: dict, *, rows: list[dict[str, str]], texts: list[str], prompt: str,
              root: dict | None = None, name: str = "") -> Any:
    """A value of ``schema``: an object's fields from the first row, a list of objects from the rows,
    a scalar from the matching cell, else the first fitting value the results or prompt hold."""
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            options = [s for s in (_resolve(s, root) for s in schema[key]) if _kind(s) != "null"] or schema[key]
            return value_for(options[0], rows=rows, texts=texts, prompt=prompt, root=root, name=name)
    if "const" in schema:
        return schema["const"]
    row = rows[0] if rows else {}
    cell = _field(row, name) if name else None
    said = words(" ".join([prompt, *texts]))
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        options = schema["enum"]
        return next((v for v in options if cell is not None and str(v).lower() == cell.lower()),
                    next((v for v in options if str(v).lower() in said), options[0]))
    kind = _kind(schema)
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {field: value_for(properties[field], rows=rows, texts=texts, prompt=prompt, root=root, name=field)
                for field in properties if field in required or _field(row, field) is not None}
    if kind == "array":
        items = _resolve(schema.get("items") or {}, root)
        if _kind(items) == "object" and rows:
            return [value_for(items, rows=[r], texts=texts, prompt=prompt, root=root) for r in rows[:50]]
        column = next((c for c in row if name and _field({c: ""}, name) is not None), next(iter(row), None))
        if column is not None:
            return [value_for(items, rows=[{column: r.get(column, "")}], texts=texts, prompt=prompt, root=root,
                              name=column) for r in rows[:50]]
        return []
    if kind in ("integer", "number"):
        found = _number(cell, kind)
        if found is None:
            found = next((n for v in row.values() if (n := _number(v, kind)) is not None), None)
        if found is None:
            found = next((n for t in texts if (n := _number(t, kind)) is not None), None)
        return found if found is not None else schema.get("minimum", 0)
    if kind == "boolean":
        return (cell or "").strip().lower() in ("true", "yes", "1")
    if kind == "null":
        return None
    if cell is not None:
        return cell
    text = next((v for v in row.values() if v and not re.fullmatch(r"[-\d.,]+|NULL", v)), None)
    return text if text is not None else next((t.strip().splitlines()[0] for t in texts if t.strip()), "")
