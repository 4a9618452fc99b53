"""Images a prompt or a tool result carries to the model.

    Image.from_path("plot.png")                       # a file you name
    Image(data=png_bytes, media_type="image/png")

Providers encode an Image in their own wire format; the bytes are never scanned as text.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import os
from dataclasses import dataclass, field

__all__ = ["Image", "MEDIA_TYPES"]

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True)
class Image:
    """Image bytes and their media type (one of :data:`MEDIA_TYPES`)."""

    data: bytes = field(repr=False)
    media_type: str = "image/png"

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)):
            raise TypeError(f"Image data must be bytes, got {type(self.data).__name__}")
        if self.media_type not in MEDIA_TYPES:
            raise ValueError(f"unsupported image media type {self.media_type!r}; supported: {', '.join(MEDIA_TYPES)}")

    @classmethod
    def from_path(cls, path: str | os.PathLike) -> "Image":
        media_type = mimetypes.guess_type(os.fspath(path))[0] or ""
        with open(path, "rb") as file:
            return cls(file.read(), media_type)

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def __repr__(self) -> str:
        return f"Image({self.media_type}, {len(self.data)} bytes, sha256={self.sha256()[:12]})"
