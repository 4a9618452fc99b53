"""Images in prompts and tool results: conversion, bounds, the three wire formats, sessions,
record/replay, redaction, usage frames, the display, and a real kernel plotting and sending."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import struct
import subprocess
import sys
import zlib

import pytest

import bettong_nb
from bettong_nb import Image, ToolOutput, images
from bettong_nb.core.images import ImageError
from bettong_nb.notebook.display import result_html, tool_block
from bettong_nb.providers.openai import OpenAIProvider
from bettong_nb.providers.replay import Recording, Replay, ReplayMismatch
from bettong_nb.providers.scripted import Scripted
from support.notebooks import data, run_notebook, stdout
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call
from support.wire import assert_well_formed
from support.images import PLOT, data_urls, png

PIL = pytest.importorskip("PIL.Image")  # the test extra installs Pillow; here it is the real library
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def encoded(picture, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def opened(image: Image):
    return PIL.open(io.BytesIO(image.data))


B64 = base64.b64encode(PLOT).decode()


# --- Image and conversion ---------------------------------------------------------------------

def test_an_image_knows_its_type_and_size_from_its_bytes():
    image = Image(PLOT)
    assert (image.media_type, image.width, image.height) == ("image/png", 64, 48)
    for fmt, media_type in [("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")]:
        made = Image(encoded(PIL.new("RGB", (300, 41), "teal"), fmt))
        assert (made.media_type, made.width, made.height) == (media_type, 300, 41)
    lossless = Image(encoded(PIL.new("RGBA", (77, 5)), "WEBP", lossless=True))  # VP8L
    alpha = Image(encoded(PIL.new("RGBA", (90, 7)), "WEBP"))                    # VP8X
    progressive = Image(encoded(PIL.new("RGB", (640, 480)), "JPEG", progressive=True))
    assert [(i.width, i.height) for i in (lossless, alpha, progressive)] == [(77, 5), (90, 7), (640, 480)]
    assert Image.from_block(image.block()) == image and image.block()["data"] == B64


def test_unsupported_or_mislabelled_images_are_clear_errors(tmp_path):
    with pytest.raises(ImageError, match=r"unsupported image media type 'image/bmp'; supported: image/png, image/jpeg"):
        Image(PLOT, "image/bmp")
    with pytest.raises(ImageError, match="the data is image/png, not image/jpeg as given"):
        Image(PLOT, "image/jpeg")
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP image"):
        Image(encoded(PIL.new("RGB", (4, 4)), "BMP"))
    with pytest.raises(ImageError, match="cut short or damaged"):
        Image(PLOT[:20])
    (tmp_path / "chart.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    with pytest.raises(ImageError, match=r"chart.svg is not a PNG, JPEG, GIF or WebP image \(its name says image/svg\+xml\)"):
        Image.from_path(tmp_path / "chart.svg")
    (tmp_path / "misnamed.jpg").write_bytes(PLOT)
    assert Image.from_path(tmp_path / "misnamed.jpg").media_type == "image/png"  # the bytes decide


def test_a_matplotlib_figure_renders_to_png_within_the_bound():
    small, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.plot([1, 2, 3], [1, 4, 9], color="red")
    image = images.as_image(small)
    assert image.media_type == "image/png" and 300 <= image.width <= 400 and 200 <= image.height <= 300
    pixels = opened(image).convert("RGB")
    assert (255, 0, 0) in {pixels.getpixel((x, y)) for x in range(pixels.width) for y in range(pixels.height)}

    large, ax = plt.subplots(figsize=(20, 10), dpi=300)
    ax.plot([0, 1], [0, 1])
    bounded = images.as_image(large)
    assert max(bounded.width, bounded.height) <= 1568 and bounded.width > 1200
    assert large.dpi == 300, "rendering leaves the figure as it was"
    assert max(images.as_image(large, max_side=500).width, 1) <= 500
    plt.close("all")


def _png_chunks(data: bytes) -> list[str]:
    kinds, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kinds.append(data[at + 4:at + 8].decode("ascii"))
        at += 12 + length
    return kinds


def test_a_figure_renders_to_the_same_bytes_whatever_matplotlib_drew_it():
    # A cassette matches a figure on its bytes' hash: no version text may be in them.
    figure, ax = plt.subplots(figsize=(3, 2), dpi=80)
    ax.plot([1, 2, 3], [1, 4, 9])
    data = images.as_image(figure).data
    plt.close("all")
    assert matplotlib.__version__.encode() not in data and b"Matplotlib" not in data
    assert not {"tEXt", "iTXt", "zTXt", "tIME"} & set(_png_chunks(data)), _png_chunks(data)


def test_pil_and_ipython_images_convert_and_anything_else_is_not_an_image():
    rgb = PIL.new("RGB", (30, 20), (10, 200, 30))
    image = images.as_image(rgb)
    assert image.media_type == "image/png" and opened(image).convert("RGB").getpixel((5, 5)) == (10, 200, 30)
    photo = PIL.open(io.BytesIO(encoded(rgb, "JPEG")))
    assert images.as_image(photo).media_type == "image/jpeg"  # a photo stays JPEG
    cmyk = images.as_image(PIL.new("CMYK", (8, 8)))
    assert cmyk.media_type == "image/png" and opened(cmyk).mode == "RGB"

    from IPython.display import Image as IPythonImage

    assert images.as_image(IPythonImage(data=PLOT)) == Image(PLOT)
    with pytest.raises(ImageError, match="never fetches a URL"):
        images.as_image(IPythonImage(url="http://127.0.0.1:9/plot.png"))
    assert [images.as_image(v) for v in ("text", 42, b"\x89PNG", None)] == [None] * 4


def test_recognising_images_imports_none_of_matplotlib_pil_or_ipython():
    code = (f"import sys, bettong_nb\nfrom bettong_nb import images\nfrom bettong_nb.providers.scripted import Scripted\n"
            f"png = {PLOT!r}\n"
            "assert [images.as_image(v) for v in ('x', 1, {}, b'')] == [None] * 4\n"
            "print(sorted(m for m in ('PIL', 'matplotlib', 'IPython') if m in sys.modules))\n"
            "model = Scripted(['seen'])\n"
            "result = bettong_nb.agent(provider=model).run(['look', bettong_nb.Image(png), 'and'])\n"
            "assert result.output == 'seen' and result.requests[0].images == 1\n"
            "print(sorted(m for m in ('PIL', 'matplotlib', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["[]", "['PIL']"], out.stderr  # Pillow only once an image is made


# --- bounds -----------------------------------------------------------------------------------

def test_large_images_are_downscaled_keeping_their_shape_and_format():
    wide = Image(encoded(PIL.linear_gradient("L").resize((3000, 1200)).convert("RGB"), "PNG"))
    scaled = images.bounded(wide)
    assert (scaled.media_type, scaled.width, scaled.height) == ("image/png", 1568, 627)
    photo = images.bounded(Image(encoded(PIL.new("RGB", (4000, 3000), "navy"), "JPEG")))
    assert (photo.media_type, photo.width, photo.height) == ("image/jpeg", 1568, 1176)
    gif = images.bounded(Image(encoded(PIL.new("P", (2000, 100)), "GIF")))
    assert (gif.media_type, gif.width, gif.height) == ("image/png", 1568, 78)  # models read one frame anyway
    small = Image(PLOT)
    assert images.bounded(small) is small


def test_an_image_over_the_byte_bound_shrinks_until_it_fits():
    import numpy

    noise = (numpy.random.default_rng(7).random((900, 1200, 3)) * 255).astype("uint8")
    heavy = Image(encoded(PIL.fromarray(noise), "PNG"))
    assert len(heavy.data) > 2_000_000
    light = images.bounded(heavy, max_bytes=500_000)
    assert len(light.data) <= 500_000 and light.width < 1200
    assert abs(light.width / light.height - 4 / 3) < 0.01


def test_the_bounds_are_options_of_the_agent_and_of_a_call():
    big = Image(encoded(PIL.new("RGB", (2000, 1000), "white"), "PNG"))
    model = Scripted(["a", "b"])
    agent = bettong_nb.agent(provider=model, image_max_side=800)
    agent.run(["x", big])
    agent.run(["x", big], image_max_side=300)
    sizes = [Image.from_block(r.messages[-1]["content"][1]) for r in model.requests]
    assert [(i.width, i.height) for i in sizes] == [(800, 400), (300, 150)]


def test_parts_that_cannot_be_sent_fail_before_any_request():
    from IPython.display import Image as IPythonImage

    with LoopbackServer(ChatScript([])) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k")
        with pytest.raises(TypeError, match="each a str or an image .* got bytes"):
            agent.run(["What is this?", PLOT])
        with pytest.raises(ImageError, match="never fetches a URL"):
            agent.run(["What is this?", IPythonImage(url="http://127.0.0.1:9/x.png")])
        with pytest.raises(ValueError, match="no text and no image"):
            agent.run(["", ""])
    assert server.requests == []


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_header(width: int, height: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))


BAD_IMAGES = {
    "png header only": _png_header(10, 10),
    "png header and end": _png_header(10, 10) + _chunk(b"IEND", b""),
    "png junk data": _png_header(5, 5) + _chunk(b"IDAT", b"garbage") + _chunk(b"IEND", b""),
    "png cut short": PLOT[:len(PLOT) // 2],
    "png bad checksum": PLOT[:-20] + bytes(4) + PLOT[-16:],
    "png declaring 100000 x 100000": _png_header(100_000, 100_000) + _chunk(b"IEND", b""),
    "png declaring 10000 x 10000": _png_header(10_000, 10_000) + _chunk(b"IDAT", zlib.compress(b"")),
    "jpeg without its scan": encoded(PIL.new("RGB", (64, 64), "red"), "JPEG")[:200],
    "gif header only": b"GIF89a\x0a\x00\x0a\x00\x00\x00\x00",
    "webp header only": b"RIFF\x20\x00\x00\x00WEBPVP8 \x14\x00\x00\x00" + bytes(6) + struct.pack("<HH", 9, 9),
}


@pytest.mark.parametrize("name", list(BAD_IMAGES))
def test_an_image_that_does_not_decode_is_an_image_error_before_any_request(name):
    with LoopbackServer(ChatScript([chat_message("never")])) as server:
        agent = bettong_nb.openai(base_url=server.url, api_key="k")
        with pytest.raises(ImageError) as raised:
            agent.run(["What is this?", Image(BAD_IMAGES[name])])
        assert server.requests == []
    message = str(raised.value)
    assert re.search(r"damaged|cut short|more than Pillow decodes safely", message), message
    if "declaring" in name:
        assert "more than Pillow decodes safely" in message and re.search(r"\d+×\d+ px", message)


def _odd_pictures() -> dict:
    import numpy

    ramp = numpy.arange(48 * 32).reshape(32, 48)
    palette = PIL.new("P", (48, 32))
    palette.info["transparency"] = 0
    return {
        "I": PIL.fromarray(ramp.astype("int32") * 1000, "I"), "I;16": PIL.fromarray(ramp.astype("uint16") * 40),
        "F": PIL.fromarray(ramp.astype("float32") / 7), "La": PIL.new("La", (48, 32), (9, 200)),
        "LA": PIL.new("LA", (48, 32)), "PA": PIL.new("PA", (48, 32)), "P transparent": palette,
        "CMYK": PIL.new("CMYK", (48, 32), (0, 255, 0, 0)), "RGBa": PIL.new("RGBa", (48, 32)),
        "1": PIL.new("1", (48, 32), 1), "LAB": PIL.new("LAB", (48, 32)), "YCbCr": PIL.new("YCbCr", (48, 32)),
        "HSV": PIL.new("HSV", (48, 32)), "RGBX": PIL.new("RGBX", (48, 32)),
    }


@pytest.mark.parametrize("mode", list(_odd_pictures()))
def test_a_pil_image_of_any_mode_is_sent_in_a_mode_png_carries(mode):
    picture = _odd_pictures()[mode]
    image = images.as_image(picture)
    assert image.media_type == "image/png" and (image.width, image.height) == (48, 32)
    assert opened(image).mode in ("L", "LA", "RGB", "RGBA")
    small = images.bounded(image, max_side=12)  # decoded and downscaled again
    assert max(small.width, small.height) == 12 and opened(small).mode in ("L", "LA", "RGB", "RGBA")
    if mode in ("I", "I;16", "F"):  # deep gray stretched over its range, not clipped to white
        assert opened(image).getextrema() == (0, 255)
    if mode == "CMYK":
        assert opened(image).getpixel((0, 0)) == (255, 0, 255)


def test_image_files_in_deep_or_unusual_modes_downscale():
    import numpy

    ramp = (numpy.arange(300 * 200).reshape(200, 300) % 65536).astype("uint16")
    for file in (encoded(PIL.fromarray(ramp), "PNG"),                              # 16-bit gray PNG
                 encoded(PIL.new("CMYK", (300, 200), (0, 0, 255, 0)), "JPEG"),     # CMYK JPEG
                 encoded(PIL.new("LA", (300, 200), (5, 100)), "PNG"),
                 encoded(PIL.new("P", (300, 200)), "GIF", transparency=0)):
        small = images.bounded(Image(file), max_side=60)
        assert max(small.width, small.height) == 60 and opened(small).mode in ("L", "LA", "RGB", "RGBA")


# --- the three wire formats -------------------------------------------------------------------

def prompt_shape(wire: str, b64: str) -> dict:
    text = "What does this plot show?"
    if wire == "openai":
        return {"role": "user", "content": [{"type": "text", "text": text},
                                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}]}
    if wire == "anthropic":
        return {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": b64}}]}
    return {"role": "user", "content": text, "images": [b64]}


def sent_images(wire: str, message: dict) -> list[bytes]:
    if wire == "ollama":
        found = message.get("images", [])
    elif wire == "openai":
        found = [p["image_url"]["url"].split(",", 1)[1] for p in message["content"] if p["type"] == "image_url"]
    else:
        blocks = [c for b in message["content"] for c in (b["content"] if b["type"] == "tool_result" else [b])]
        found = [b["source"]["data"] for b in blocks if b["type"] == "image"]
    return [base64.b64decode(b, validate=True) for b in found]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_prompt_image_reaches_each_wire_in_its_shape_intact(w, board, stream):
    server = board.serve(w.name, w.script([w.body("answer")]))
    result = w.build(server.url, stream=stream).run(["What does this plot show?", Image(PLOT)])
    assert result.done and result.output
    body = server.only_request().json()
    assert body["messages"][-1] == prompt_shape(w.name, B64)
    assert sent_images(w.name, body["messages"][-1]) == [PLOT]
    assert result.messages[1]["content"][1] == {"type": "image", "media_type": "image/png", "data": B64}


def tool_reply_shape(wire: str, call_id: str, b64: str) -> list[dict]:
    """The messages a tool result with text and one image becomes, at the end of the request."""
    if wire == "openai":
        return [{"role": "tool", "tool_call_id": call_id, "content": "rain over Vilnius, charted"},
                {"role": "user", "content": [
                    {"type": "text", "text": f"The images tool call {call_id} returned:"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}]}]
    if wire == "anthropic":
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": [
            {"type": "text", "text": "rain over Vilnius, charted"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}]}]}]
    return [{"role": "tool", "tool_name": "get_weather", "content": "rain over Vilnius, charted", "images": [b64]}]


def charting(returns):
    return {"id": "charts", "tools": [{"name": "get_weather", "parameters": {"city": {"type": "string"}},
                                       "handler": lambda city: returns(city)}]}


def test_a_tool_image_reaches_each_wire_in_its_shape(w, board):
    server = board.serve(w.name, w.script(w.conversation()))
    tool = charting(lambda city: ToolOutput(f"rain over {city}, charted", images=(Image(PLOT),)))
    result = w.build(server.url, capabilities=[tool]).run("Chart the rain in Vilnius.")
    assert result.done and result.tool_calls[0].images == [Image(PLOT)]
    second = server.requests[1].json()
    assert_well_formed(w.name, second)
    call_id = result.tool_calls[0].id
    shape = tool_reply_shape(w.name, call_id, B64)
    assert second["messages"][-len(shape):] == shape
    assert sent_images(w.name, second["messages"][-1]) == [PLOT]
    [block] = [b for b in result.messages[-2]["content"] if b["type"] == "tool_result"]
    assert block["images"] == [Image(PLOT).block()] and block["content"] == "rain over Vilnius, charted"


def test_a_tool_returning_a_figure_sends_it_as_an_image(w, board):
    def plot(city):
        figure, ax = plt.subplots(figsize=(3, 2), dpi=100)
        ax.bar([city], [11])
        return figure

    server = board.serve(w.name, w.script(w.conversation()))
    result = w.build(server.url, capabilities=[charting(plot)]).run("Chart the rain in Vilnius.")
    plt.close("all")
    [call] = result.tool_calls
    [image] = call.images
    assert call.status == "ok" and call.result == f"[image: image/png, {image.width}×{image.height} px]"
    assert sent_images(w.name, server.requests[1].json()["messages"][-1]) == [image.data]


def test_a_session_with_an_image_keeps_a_byte_stable_prefix(w, board):
    server = board.serve(w.name, w.script([w.body("answer")] * 3))
    session = w.build(server.url).session()
    session.run(["What does this plot show?", Image(PLOT)])
    session.run("And the trend?")
    session.run("Thanks.")
    bodies = [r.json() for r in server.requests]
    for before, after in zip(bodies, bodies[1:]):
        old = json.dumps(before["messages"], ensure_ascii=False)
        assert json.dumps(after["messages"], ensure_ascii=False).startswith(old[:-1])
    first = next(m for m in bodies[-1]["messages"] if m["role"] == "user")
    assert first == prompt_shape(w.name, B64) and sent_images(w.name, first) == [PLOT]
    assert [r.images for r in session.requests] == [1, 1, 1]


# --- accounting, record/replay, redaction -----------------------------------------------------

def test_the_usage_frame_counts_the_images_each_request_carried():
    model = Scripted([[("chart", {})], "A chart.", "Still a chart."])
    cap = {"id": "c", "tools": [{"name": "chart", "handler": lambda: Image(png(10, 10))}]}
    session = bettong_nb.agent(provider=model, capabilities=[cap]).session()
    session.run(["Look:", Image(PLOT)])
    session.run("Again?")
    frame = session.usage_frame(full=True)
    assert frame["images"].tolist() == [1, 2, 2]  # the prompt's; plus the tool's; both still in the transcript
    assert str(frame["images"].dtype) == "int64" and list(frame.columns).index("images") < list(frame.columns).index("latency_s")


def test_a_token_budget_counts_an_image_by_its_pixels_not_its_base64():
    big = Image(encoded(PIL.effect_noise((1000, 1000), 90).convert("RGB"), "PNG"))
    assert len(big.base64()) // 4 > 500_000  # as text, the base64 alone would blow the budget
    result = bettong_nb.agent(provider=Scripted(["fine"]), token_budget=3_000).run(["What is this?", big])
    assert result.output == "fine"
    refused = bettong_nb.agent(provider=Scripted(["no"]), token_budget=1_000).run(["What is this?", big])
    assert refused.stop_reason == "budget"
    needed = int(re.search(r"needs about (\d+)", refused.reason).group(1))
    assert 1334 < needed < 1500  # 1000×1000 / 750 for the image, and the text around it


def test_record_then_replay_with_images_stores_hashes_not_bytes(tmp_path):
    path = tmp_path / "images.jsonl"
    chart = png(20, 12)
    tool = {"id": "c", "tools": [{"name": "chart", "handler": lambda: ToolOutput("a chart", images=(Image(chart),))}]}
    script = ChatScript([chat_message(tool_calls=[tool_call("chart", {}, "c1")]), chat_message("Rising.")])
    with LoopbackServer(script) as server:
        live = bettong_nb.agent(provider=Recording(OpenAIProvider(base_url=server.url, api_key="k"), path),
                                capabilities=[tool])
        first = live.run(["What does this show?", Image(PLOT)])
    text = path.read_text()
    assert B64 not in text and base64.b64encode(chart).decode() not in text
    assert hashlib.sha256(PLOT).hexdigest() in text and hashlib.sha256(chart).hexdigest() in text
    assert len(text) < 6000

    replayed = bettong_nb.agent(provider=Replay(path), capabilities=[tool]).run(["What does this show?", Image(PLOT)])
    assert replayed.output == first.output == "Rising." and replayed.messages == first.messages
    with pytest.raises(ReplayMismatch, match=r"differs first at messages\[0\]\.content\[1\]\.sha256"):
        bettong_nb.agent(provider=Replay(path), capabilities=[tool]).run(["What does this show?", Image(png(21, 12))])


def test_image_bytes_are_never_scanned_as_text(monkeypatch):
    secret = "tok-Zq81fJ0aXwVilnius"
    monkeypatch.setenv("SERVICE_TOKEN", secret)
    photo = png(16, 16, comment=secret.encode())  # the value sits in the image's own bytes
    tool = {"id": "c", "tools": [{"name": "snap", "handler": lambda: ToolOutput(f"taken with {secret}",
                                                                                 images=(Image(photo),))}]}
    script = ChatScript([chat_message(tool_calls=[tool_call("snap", {}, "c1")]), chat_message("A photo.")])
    with LoopbackServer(script) as server:
        result = bettong_nb.openai(base_url=server.url, api_key="k", capabilities=[tool]).run("Take a photo.")
    [call] = result.tool_calls
    assert call.result == "taken with [redacted]" and call.redactions == 1
    second = server.requests[1].json()["messages"]
    assert second[-2]["content"] == "taken with [redacted]"
    assert sent_images("openai", second[-1]) == [photo], "redaction left the image bytes as they were"


def test_a_tool_image_that_cannot_be_sent_is_an_error_the_model_reads():
    model = Scripted([[("chart", {})], "Sorry."])
    cap = {"id": "c", "tools": [{"name": "chart", "handler": lambda: ToolOutput("chart", images=("not an image",))}]}
    result = bettong_nb.agent(provider=model, capabilities=[cap]).run("Chart it.")
    [call] = result.tool_calls
    assert call.status == "error" and call.images == []
    assert call.result.startswith("ERROR: the tool returned an image that cannot be sent: an image is a bettong_nb.Image")
    assert result.output == "Sorry." and "images" not in result.messages[-2]["content"][0]


# --- the display ------------------------------------------------------------------------------


def test_the_tool_block_and_the_transcript_show_inline_thumbnails():
    big = Image(encoded(PIL.new("RGB", (1200, 600), "orange"), "PNG"))
    model = Scripted([[("chart", {})], "Orange."])
    cap = {"id": "c", "tools": [{"name": "chart", "handler": lambda: big}]}
    result = bettong_nb.agent(provider=model, capabilities=[cap]).run(["Which colour?", Image(PLOT)])
    [block_url] = data_urls(tool_block(result.tool_calls[0]))
    assert block_url.startswith("data:image/png;base64,")
    thumb = Image(base64.b64decode(block_url.split(",", 1)[1]))
    assert (thumb.width, thumb.height) == (240, 120)
    page = result_html(result)
    assert ">You</div>" in page and "Which colour?" in page
    assert data_urls(page) == [f"data:image/png;base64,{B64}", block_url]  # the prompt's, then the tool's
    assert "http" not in "".join(data_urls(page))


# --- a real kernel ----------------------------------------------------------------------------

def test_a_notebook_plots_sends_the_figure_and_gets_an_answer(tmp_path):
    nb = run_notebook([
        "%load_ext bettong_nb\n"
        "import matplotlib.pyplot as plt, bettong_nb\n"
        "from bettong_nb.providers.scripted import Scripted\n"
        "model = Scripted(['Sales rise from 1 to 9.'])\n"
        "agent = bettong_nb.agent(provider=model)\n"
        "fig, ax = plt.subplots(figsize=(4, 3))\n"
        "ax.plot([1, 2, 3], [1, 4, 9]); ax.set_title('sales')",
        "result = await agent.arun(['What does this plot show?', fig])\nprint(result.output)",
        "sent = bettong_nb.Image.from_block(model.requests[0].messages[-1]['content'][1])\n"
        "print(sent.media_type, sent.width, sent.height, result.requests[0].images)",
        "result",
    ], tmp_path)
    assert data(nb.cells[0], "image/png"), "the figure showed in its cell"
    assert stdout(nb.cells[1]).strip() == "Sales rise from 1 to 9."
    media_type, width, height, count = stdout(nb.cells[2]).split()
    assert media_type == "image/png" and 250 <= int(width) <= 1568 and int(width) > int(height) and count == "1"
    (page,) = data(nb.cells[3], "text/html")
    [url] = data_urls(page)
    assert url.startswith("data:image/png;base64,") and "Sales rise" in page
