"""Notebook values as a prompt carries them: redacted, then cut to a bound.

    head(cell_code, 4_000)      # its start, and how many characters were left out
    tail(traceback_text, 8_000)  # its end (where a traceback says what went wrong)

The order matters: cut first, and a secret astride the cut loses what lets the scanner know
it (the whole environment value, a token's ``ghp_`` prefix) while the rest of it is sent.
Redacting the whole text is cheap (a linear scan), so nothing is kept in reserve past the cut.
"""

from __future__ import annotations

from typing import Iterable

from ..safety import secrets

__all__ = ["NOTE_CHARS", "head", "tail"]

NOTE_CHARS = 40  # the most a cut's note ("… (N more characters)") adds to the limit


def head(text: str, limit: int, *, extra: Iterable[str] = ()) -> str:
    """The first ``limit`` characters of ``text`` with its secrets (and ``extra``) redacted."""
    text = secrets.redact(text, extra=extra)[0]
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def tail(text: str, limit: int, *, extra: Iterable[str] = ()) -> str:
    """The last ``limit`` characters of ``text`` with its secrets (and ``extra``) redacted."""
    text = secrets.redact(text, extra=extra)[0]
    return text if len(text) <= limit else f"… ({len(text) - limit} characters before)\n" + text[-limit:]
