"""Credential stripping and redaction: nothing secret reaches the model provider.

    text, count = redact("token=sk-abc...", extra=[api_key])
    with revealed():        # only here is tool output passed through unredacted
        ...
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from typing import Iterable, Iterator, Mapping

__all__ = ["REDACTED", "MIN_SECRET_LENGTH", "is_credential_name", "credential_values",
           "stripped_env", "redact", "revealed", "redacting"]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would shred ordinary output
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|PRIVATE", re.I)
_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("bettong_redact", default=True)


def is_credential_name(name: str) -> bool:
    return bool(_CREDENTIAL_NAME.search(name))


def credential_values(env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    return [v for k, v in env.items() if is_credential_name(k) and len(v) >= MIN_SECRET_LENGTH]


def stripped_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if not is_credential_name(k)}


def redacting() -> bool:
    return _enabled.get()


@contextlib.contextmanager
def revealed() -> Iterator[None]:
    token = _enabled.set(False)
    try:
        yield
    finally:
        _enabled.reset(token)


def redact(text: str, *, extra: Iterable[str | None] = ()) -> tuple[str, int]:
    if not _enabled.get():
        return text, 0
    values = {v for v in [*credential_values(), *extra] if v and len(v) >= MIN_SECRET_LENGTH}
    if not values:
        return text, 0
    pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    return pattern.subn(REDACTED, text)
