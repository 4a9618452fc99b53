"""A real MCP server for the tests, built with the SDK's own server API.

    python mcp_server.py LOG [--http PORT] [--grandchild] [--legacy]

Every tool call is appended to LOG as a JSON line before it runs ({"tool": ..., "args": ...}),
and the server writes {"pid": ..., "ppid": ...} there when it starts (plus {"grandchild": pid} with
--grandchild, a ``sleep`` it leaves running, to show a whole process tree is stopped). Over
stdio by default; ``--http PORT`` serves Streamable HTTP on 127.0.0.1:PORT/mcp instead.
``--legacy`` makes it a handshake-era (2025 protocol) server, as most servers in use still are.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import zlib

import anyio
from mcp import types
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

LOG = sys.argv[1]
server = MCPServer("test-tools", instructions="The test-tools server: echo repeats its text.", log_level="WARNING")


def log(**entry) -> None:
    with open(LOG, "a") as file:
        file.write(json.dumps(entry) + "\n")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG, made here so the test needs no image library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    log(tool="echo", args={"text": text})
    return f"echo: {text}"


@server.tool()
async def slow(seconds: float) -> str:
    """Wait, then say so."""
    log(tool="slow", args={"seconds": seconds})
    await asyncio.sleep(seconds)
    log(tool="slow", finished=True)
    return f"slept {seconds}"


@server.tool()
def raising() -> str:
    """Always fails."""
    log(tool="raising", args={})
    raise ToolError("the raising tool refuses, as designed")


@server.tool()
def picture() -> Image:
    """A 2x2 red PNG."""
    log(tool="picture", args={})
    return Image(data=png(2, 2, (255, 0, 0)), format="png")


@server.tool()
def show_env(name: str) -> str:
    """The value of one of this server's environment variables."""
    log(tool="show_env", args={"name": name})
    return f"{name}={os.environ.get(name, '(unset)')}"


@server.tool()
def show_header(name: str, ctx: Context) -> str:
    """The value of one header of this HTTP request."""
    log(tool="show_header", args={"name": name})
    return f"{name}={(ctx.headers or {}).get(name, '(unset)')}"


@server.tool()
def document() -> types.CallToolResult:
    """A text resource embedded in the result, after a line of text."""
    log(tool="document", args={})
    resource = types.TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes")
    return types.CallToolResult(content=[types.TextContent(type="text", text="Here it is:"),
                                         types.EmbeddedResource(type="resource", resource=resource)])


@server.tool()
def measure() -> types.CallToolResult:
    """Only structured content, no text block."""
    log(tool="measure", args={})
    return types.CallToolResult(content=[], structured_content={"width": 3, "unit": "cm"})


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    log(tool="crash", args={})
    os._exit(3)


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Adds the tool `extra` and tells the client the list changed."""
    log(tool="add_tool", args={})

    @server.tool()
    def extra() -> str:
        """Added at run time."""
        return "extra"

    session = ctx.request_context.session
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()  # reaches subscriptions/listen streams only
    else:
        await session.send_tool_list_changed()  # the handshake era's plain notification
    return "added"


async def serve_handshake_era_stdio() -> None:
    """Only the 2025 handshake protocol over stdio (the SDK's loop for it), as most servers in
    use still speak: the client's 2026 probe fails and it falls back to initialize."""
    lowlevel = server._lowlevel_server  # the SDK's own Server under MCPServer
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=lowlevel.create_initialization_options())


if __name__ == "__main__":
    log(pid=os.getpid(), ppid=os.getppid())
    if "--grandchild" in sys.argv:
        child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        log(grandchild=child.pid)
    print("test server starting", file=sys.stderr, flush=True)
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    elif "--legacy" in sys.argv:
        anyio.run(serve_handshake_era_stdio)
    else:
        server.run()
