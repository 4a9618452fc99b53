"""Images a prompt or a tool result carries to the model.

    agent.run(["What does this plot show?", fig])       # a prompt is a str or a list of parts
    Image.from_path("plot.png")                         # a file you name
    Image(data=png_bytes)                               # the media type is read from the bytes
    as_image(value)                                     # an Image for a Figure, a PIL or IPython image, else None

A part is a str, an :class:`Image`, a matplotlib Figure (rendered to PNG), a PIL image or an
``IPython.display.Image`` holding data (never a URL: nothing is fetched). matplotlib, PIL and
IPython are recognised by their module names and never imported here unless a value is theirs,
bar Pillow (a dependency), which reads every Image's header when it is made and decodes every
image about to be sent (see Bounds): ``import bettong_nb`` does not import it.

Bounds: before anything is sent, an image wider or taller than ``max_side`` pixels (default
1568, the size Anthropic scales down to anyway) or larger than ``max_bytes`` (default 3.75 MiB,
so its base64 fits Anthropic's 5 MiB limit) is downscaled with Pillow; a media type other than
PNG, JPEG, GIF or WebP is an :class:`ImageError`. Every image is decoded before it is sent: one
that does not decode (a header and no data, damaged data) or declares more pixels than Pillow
decodes safely is an ImageError, before any request.
PIL images of any mode (16-bit or float gray, CMYK, premultiplied alpha, a palette with
transparency) are converted to one PNG and JPEG carry.

In a transcript an image is the plain block ``{"type": "image", "media_type": ..., "data":
<base64>}`` (see :mod:`bettong_nb.provider`); providers encode it in their own wire format, and
its bytes are never scanned as text.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import mimetypes
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from ..safety.sanitize import MEDIA_TYPES

__all__ = ["Prompt", "Image", "ImageError", "check_decodes", "MEDIA_TYPES", "DEFAULT_MAX_SIDE", "DEFAULT_MAX_BYTES", "as_image", "is_image",
           "bounded", "thumbnail", "prompt_content", "prepared", "count", "tokens", "without_bytes"]

Prompt = str | Sequence[Any]  # what a run is asked: a str, or parts (str and images)

DEFAULT_MAX_SIDE = 1568
DEFAULT_MAX_BYTES = 5 * 1024 * 1024 * 3 // 4  # 3.75 MiB: base64 is 4/3 of it, within Anthropic's 5 MiB


class ImageError(ValueError):
    """An image that cannot be sent: not PNG, JPEG, GIF or WebP, unreadable or damaged, or too
    many pixels to decode safely."""


# --- reading the bytes ------------------------------------------------------------------------

def _header(data: bytes) -> tuple[str, tuple[int, int]]:
    """The media type and size of ``data``, read by Pillow's plugins for the four formats (they
    read the header only: a size of any number of pixels is checked when the image is decoded)."""
    from PIL import GifImagePlugin, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

    for media_type, plugin in (("image/png", PngImagePlugin.PngImageFile), ("image/jpeg", JpegImagePlugin.JpegImageFile),
                               ("image/gif", GifImagePlugin.GifImageFile), ("image/webp", WebPImagePlugin.WebPImageFile)):
        try:
            with plugin(io.BytesIO(data)) as picture:
                return media_type, picture.size
        except Exception:  # Pillow's plugins raise many kinds (SyntaxError, OSError, struct.error...)
            continue
    raise ImageError(f"the data is not a PNG, JPEG, GIF or WebP image, or it is cut short or damaged "
                     f"(it starts with {data[:8]!r})")


@dataclass(frozen=True)
class Image:
    """Image bytes and their media type (one of :data:`MEDIA_TYPES`; read from the bytes when
    not given). ``width`` and ``height`` come from the header, read by Pillow. In a notebook it
    shows itself."""

    data: bytes = field(repr=False)
    media_type: str | None = None
    width: int = field(init=False, compare=False)
    height: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)):
            raise TypeError(f"Image data must be bytes, got {type(self.data).__name__}")
        if self.media_type is not None and self.media_type not in MEDIA_TYPES:
            raise ImageError(f"unsupported image media type {self.media_type!r}; supported: {', '.join(MEDIA_TYPES)}")
        data = bytes(self.data)
        found, size = _header(data)
        if self.media_type is not None and self.media_type != found:
            raise ImageError(f"the data is {found}, not {self.media_type} as given")
        if min(size) < 1:
            raise ImageError(f"this {found} image is cut short or damaged: it declares {size[0]}×{size[1]} px")
        for name, value in (("data", data), ("media_type", found), ("width", size[0]), ("height", size[1])):
            object.__setattr__(self, name, value)

    @classmethod
    def from_path(cls, path: str | os.PathLike) -> "Image":
        """The image in the file at ``path``; its type is read from the bytes, else the name."""
        with open(path, "rb") as file:
            data = file.read()
        try:
            return cls(data)
        except ImageError:
            guessed = mimetypes.guess_type(os.fspath(path))[0] or "unknown"
            raise ImageError(f"{os.fspath(path)} is not a PNG, JPEG, GIF or WebP image (its name says {guessed}), "
                             f"or it is cut short or damaged") from None

    @classmethod
    def from_block(cls, block: dict) -> "Image":
        """The Image of a transcript's image block."""
        return cls(base64.b64decode(block["data"]), block["media_type"])

    def block(self) -> dict:
        """This image as a transcript block."""
        return {"type": "image", "media_type": self.media_type, "data": self.base64()}

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def describe(self) -> str:
        return f"{self.media_type}, {self.width}×{self.height} px"

    def _repr_png_(self) -> bytes | None:
        return self.data if self.media_type == "image/png" else None

    def _repr_jpeg_(self) -> bytes | None:
        return self.data if self.media_type == "image/jpeg" else None

    def __repr__(self) -> str:
        return f"Image({self.describe()}, {len(self.data)} bytes, sha256={self.sha256()[:12]})"


# --- values that are images -------------------------------------------------------------------

def _kind(value: Any) -> str | None:
    """Which library's image ``value`` is, by the modules of its classes: nothing is imported."""
    if isinstance(value, Image):
        return "image"
    for klass in type(value).__mro__:
        module, name = klass.__module__, klass.__qualname__
        if module == "matplotlib.figure" and name == "Figure":
            return "matplotlib"
        if module == "PIL.Image" and name == "Image":
            return "pil"
        if module.startswith("IPython.") and name == "Image":
            return "ipython"
    return None


def is_image(value: Any) -> bool:
    """True when :func:`as_image` can make an Image of ``value``."""
    return _kind(value) is not None


def _figure(figure: Any, max_side: int) -> Image:
    width, height = figure.get_size_inches()
    # Rendered no larger than the bound: the figure's own dpi, lowered when that would exceed it.
    dpi = min(float(figure.dpi), max_side / max(width, height, 1e-9))
    buffer = io.BytesIO()
    # No "Software: Matplotlib version ..." text chunk: the same plot gives the same bytes (and
    # the same hash in a cassette) whatever matplotlib drew it.
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    return Image(buffer.getvalue(), "image/png")


def _carriable(picture: Any) -> Any:
    """``picture`` in a mode every encoder here writes and every model reads: L, LA, RGB or RGBA.
    Gray deeper than 8 bits (I, I;16, F) is stretched over its own range (it has no fixed
    one); a palette with transparency, premultiplied alpha and PA become RGBA; CMYK and the
    other colour spaces RGB."""
    mode = picture.mode
    if mode in ("L", "LA", "RGB", "RGBA"):
        return picture
    if mode.startswith("I") or mode == "F":
        picture = picture.convert("F")
        low, high = picture.getextrema()
        scale = 255 / (high - low) if high > low else 0
        return picture.point(lambda value: (value - low) * scale).convert("L")
    if mode == "La":  # premultiplied: Pillow converts it to LA only
        return picture.convert("LA")
    alpha = "A" in mode or mode == "RGBa" or "transparency" in picture.info
    return picture.convert("RGBA" if alpha else "RGB")


def _pil(picture: Any) -> Image:
    buffer = io.BytesIO()
    photo = picture.format == "JPEG" and picture.mode in ("L", "RGB")  # as PNG, several times larger
    try:
        if photo:
            picture.save(buffer, format="JPEG", quality=90)
        else:
            _carriable(picture).save(buffer, format="PNG")
    except Exception as exc:  # Pillow's plugins raise many kinds (OSError, ValueError, SyntaxError...)
        raise ImageError(f"this PIL image ({picture.mode}, {picture.size[0]}×{picture.size[1]} px) cannot be "
                         f"encoded: {type(exc).__name__}: {exc}") from None
    return Image(buffer.getvalue(), "image/jpeg" if photo else "image/png")


def _ipython(value: Any) -> Image:
    data = getattr(value, "data", None)
    if not isinstance(data, (bytes, bytearray)):
        where = getattr(value, "url", None) or getattr(value, "filename", None)
        raise ImageError(f"this IPython Image holds no image data (it points at {where!r}); bettong_nb never "
                         "fetches a URL: pass Image.from_path(...) of a local file, or IPython's Image(data=...)")
    return Image(bytes(data))


def as_image(value: Any, *, max_side: int = DEFAULT_MAX_SIDE) -> Image | None:
    """``value`` as an :class:`Image` when it is one: an Image, a matplotlib Figure (rendered to
    PNG at most ``max_side`` pixels a side), a PIL image or an ``IPython.display.Image`` with data.
    None for anything else; :class:`ImageError` for an image that cannot be sent."""
    kind = _kind(value)
    if kind == "image":
        return value
    if kind == "matplotlib":
        return _figure(value, max_side)
    if kind == "pil":
        return _pil(value)
    if kind == "ipython":
        return _ipython(value)
    return None


# --- bounds -----------------------------------------------------------------------------------

def _encoded(picture: Any, media_type: str) -> bytes:
    buffer = io.BytesIO()
    if media_type == "image/jpeg":
        picture.convert("RGB").save(buffer, format="JPEG", quality=85)
    elif media_type == "image/webp":
        picture.save(buffer, format="WEBP", quality=85)
    else:
        picture.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _decoded(image: Image) -> Any:
    """The pixels of ``image``, decoded by Pillow into a mode
    :func:`_carriable` gives. ImageError when they cannot be decoded (a header and no data,
    damaged data), or when there are more than Pillow decodes safely (``MAX_IMAGE_PIXELS``,
    about 89 million: a header may declare any size)."""
    from PIL import Image as PIL

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PIL.DecompressionBombWarning)
            with PIL.open(io.BytesIO(image.data)) as source:
                source.load()
                picture = _carriable(source)
                return picture.copy() if picture is source else picture
    except (PIL.DecompressionBombError, PIL.DecompressionBombWarning):
        raise ImageError(f"this image declares {image.width}×{image.height} px, more than Pillow decodes safely "
                         f"({PIL.MAX_IMAGE_PIXELS} px)") from None
    except Exception as exc:  # Pillow's plugins raise many kinds (OSError, SyntaxError, EOFError, ValueError...)
        raise ImageError(f"this {image.media_type} image ({image.width}×{image.height} px by its header) is damaged "
                         f"or cut short: {type(exc).__name__}: {exc}") from None


def check_decodes(image: Image) -> None:
    """ImageError unless Pillow decodes ``image`` (damaged data, a header and no data, more pixels
    than it decodes safely); without Pillow only the header was checked (what sending checks too)."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        return
    _decoded(image)


def _downscaled(image: Image, picture: Any, max_side: int, max_bytes: int) -> Image:
    """``picture`` (``image`` decoded) scaled down until it fits both bounds."""
    from PIL import Image as PIL

    # A GIF goes as PNG: models read one frame, and PNG keeps its palette colours exactly.
    media_type = "image/png" if image.media_type == "image/gif" else image.media_type
    width, height = picture.size
    scale = min(1.0, max_side / max(width, height))
    while True:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        data = _encoded(picture.resize(size, PIL.Resampling.LANCZOS), media_type)
        if len(data) <= max_bytes:
            return Image(data, media_type)
        if max(size) <= 16:
            raise ImageError(f"this image does not fit in {max_bytes} bytes even at {size[0]}×{size[1]} px")
        scale *= min(0.9, math.sqrt(max_bytes / len(data)))


def _within(image: Image, max_side: int, max_bytes: int) -> bool:
    return max(image.width, image.height) <= max_side and len(image.data) <= max_bytes


def bounded(image: Image, *, max_side: int = DEFAULT_MAX_SIDE, max_bytes: int = DEFAULT_MAX_BYTES) -> Image:
    """``image`` itself when it decodes and is within ``max_side`` pixels a side and
    ``max_bytes``, else a downscaled copy; an :class:`ImageError` when it does not decode."""
    picture = _decoded(image)
    return image if _within(image, max_side, max_bytes) else _downscaled(image, picture, max_side, max_bytes)


def thumbnail(image: Image, side: int = 240) -> Image:
    """A copy at most ``side`` pixels a side for displays; the image itself when it does not decode."""
    if max(image.width, image.height) <= side:
        return image
    try:
        return _downscaled(image, _decoded(image), side, max(len(image.data), 1))
    except ImageError:
        return image


# --- prompts and transcripts ------------------------------------------------------------------

def _sendable(value: Any, max_side: int, max_bytes: int) -> Image:
    image = as_image(value, max_side=max_side)
    if image is None:
        raise TypeError("an image is a bettong_nb.Image, a matplotlib Figure, a PIL image or an IPython Image; "
                        f"got {type(value).__name__}")
    return bounded(image, max_side=max_side, max_bytes=max_bytes)


def prepared(values: Iterable[Any], *, max_side: int = DEFAULT_MAX_SIDE,
             max_bytes: int = DEFAULT_MAX_BYTES) -> list[Image]:
    """Images as they are sent (a tool's): each converted by :func:`as_image` and bounded;
    TypeError for a value that is no image."""
    return [_sendable(value, max_side, max_bytes) for value in values]


def prompt_content(prompt: str | Sequence[Any] | Any, *, max_side: int = DEFAULT_MAX_SIDE,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> str | list[dict]:
    """A user message's ``content`` from a prompt: a str as it is; a list of parts (str and
    images) as text and image blocks, in order. Raises before any request when a part is not
    a str or an image, or an image cannot be sent."""
    if isinstance(prompt, str):
        return prompt
    parts = list(prompt) if isinstance(prompt, (list, tuple)) else [prompt]
    blocks = []
    for part in parts:
        if isinstance(part, str):
            if part:
                blocks.append({"type": "text", "text": part})
        elif is_image(part):
            blocks.append(_sendable(part, max_side, max_bytes).block())
        else:
            raise TypeError("a prompt is a str or a list of parts, each a str or an image (bettong_nb.Image, a "
                            f"matplotlib Figure, a PIL image, an IPython Image); got {type(part).__name__}")
    if not blocks:
        raise ValueError("the prompt has no text and no image")
    return blocks


def _blocks(messages: Iterable[dict]) -> Iterator[dict]:
    """Every image block in ``messages``: in prompts and in tool results."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "image":
                    yield block
                elif block.get("type") == "tool_result":
                    yield from block.get("images") or ()


def count(messages: Iterable[dict]) -> int:
    """How many images ``messages`` carry."""
    return sum(1 for _ in _blocks(messages))


def tokens(messages: Iterable[dict]) -> int:
    """About how many prompt tokens the images in ``messages`` cost (width × height / 750, as
    Anthropic documents its vision pricing; other vendors count within a factor of two)."""
    total = 0
    for block in _blocks(messages):
        image = Image.from_block(block)
        total += math.ceil(image.width * image.height / 750)
    return total


def _fingerprint(block: dict) -> dict:
    return {"type": "image", "media_type": block["media_type"],
            "sha256": hashlib.sha256(base64.b64decode(block["data"])).hexdigest()}


def without_bytes(messages: Iterable[dict]) -> list[dict]:
    """``messages`` with each image's base64 replaced by the sha256 of its bytes: what a
    cassette stores and replay matches on, and what text scanners (redaction, size estimates)
    read instead of the bytes. Messages without images are shared, not copied."""
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(b.get("type") == "image" or b.get("images") for b in content):
            out.append(message)
            continue
        blocks = []
        for block in content:
            if block.get("type") == "image":
                block = _fingerprint(block)
            elif block.get("images"):
                block = {**block, "images": [_fingerprint(b) for b in block["images"]]}
            blocks.append(block)
        out.append({**message, "content": blocks})
    return out
