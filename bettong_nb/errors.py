"""Errors that are the user's to fix: a remote service's answer, a missing key, an unknown option.

    try:
        agent.run("...")
    except bettong_nb.ProviderError as err:
        err.status, err.retryable, err.retry_after

Messages name the service and say what it answered; they never carry a key: the HTTP layer
redacts every error that passes through it, and only then cuts it short, so a key straddling
the cut cannot leave a piece behind. In IPython they show as one line (``ProviderError: No
DeepSeek API key: ...``), not a traceback through the library: the traceback is for bugs.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["UserError", "ServiceError", "OptionError", "MESSAGE_CHARS"]

# A service error's message at most, cut after redaction: what a server said is quoted whole
# until then (see ServiceError.redact).
MESSAGE_CHARS = 300


class UserError(Exception):
    """Base of the errors the user fixes (a key, an option, a URL, a cassette); IPython shows
    them as one line, ``Type: message``."""

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception's own display
        return [f"{type(self).__name__}: {self}"]


class OptionError(UserError, TypeError):
    """An option that does not exist or does not fit the others (``TypeError``, as Python says of
    an unknown keyword)."""


class ServiceError(UserError, RuntimeError):
    """A request to a remote service failed. ``service`` names it; ``status`` is the HTTP status
    when there was one; ``retryable`` says whether the same request may succeed later, and
    ``retry_after`` how many seconds the server asked us to wait."""

    def __init__(self, message: str, *, service: str, status: int | None = None, body_excerpt: str | None = None,
                 retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.service = service
        self.status = status
        self.body_excerpt = body_excerpt
        self.retryable = retryable
        self.retry_after = retry_after

    def redact(self, extra: Iterable[str | None] = ()) -> "ServiceError":
        """Scrub the message and the body excerpt of credentials (and of ``extra`` values), then
        cut the message to MESSAGE_CHARS: never the other way round."""
        from .safety.secrets import redact

        def scrubbed(text: str, limit: int | None) -> str:
            text = redact(text, extra=extra)[0]
            return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"

        self.args = tuple(scrubbed(arg, MESSAGE_CHARS) if isinstance(arg, str) else arg for arg in self.args)
        if self.body_excerpt is not None:
            self.body_excerpt = scrubbed(self.body_excerpt, None)
        return self
