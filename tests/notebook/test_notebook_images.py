"""Images in %%agent cells: ``{fig}`` and ``{Out[n]}`` of an image value are sent as image parts,
in a real IPython InteractiveShell and in a real kernel (nbclient)."""

from __future__ import annotations

import base64
import io

import pytest
from IPython.display import Image as IPythonImage
from IPython.utils.capture import capture_output

import bettong_nb
from bettong_nb import Image, images
from bettong_nb.notebook import cell_magic, interpolation
from bettong_nb.notebook.display import result_html
from bettong_nb.providers.scripted import Scripted
from support.notebooks import answers, data, run_notebook, stdout
from support.images import PLOT, data_urls, png
from support.ipython_shell import final, ip, ok  # noqa: F401  (ip is a fixture)

PIL = pytest.importorskip("PIL.Image")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


@pytest.fixture
def fig():
    figure, ax = plt.subplots(figsize=(4, 3))
    ax.plot([2022, 2023, 2024], [1, 4, 9])
    ax.set_title("sales")
    yield figure
    plt.close(figure)


def _sent(model, index=-1):
    return model.requests[index].messages[-1]["content"]


def _image_of(block: dict) -> Image:
    assert set(block) == {"type", "media_type", "data"} and block["type"] == "image"
    return Image.from_block(block)


# --- interpolate ------------------------------------------------------------------------------

def test_an_image_field_makes_a_prompt_of_parts(fig):
    rendered = images.as_image(fig)
    parts = interpolation.interpolate("What does {fig} show for {n} years?", {"fig": fig, "n": 3})
    assert parts == ["What does ", rendered, " show for 3 years?"]
    assert isinstance(parts[1], Image) and parts[1].media_type == "image/png"

    own = Image(PLOT)
    assert interpolation.interpolate("{fig}{own}", {"fig": fig, "own": own}) == [rendered, own]  # no empty text
    assert interpolation.interpolate("{{fig}} and {n}", {"fig": fig, "n": 3}) == "{fig} and 3"  # escaped: text
    assert interpolation.interpolate("{plots[0]}!", {"plots": [fig]}) == [rendered, "!"]


def test_pil_and_ipython_images_are_parts_and_other_values_stay_text():
    picture = PIL.new("RGB", (30, 20), (200, 40, 40))
    namespace = {"pic": picture, "ipy": IPythonImage(data=png(12, 9)), "lines": plt.plot([1, 2], [3, 4])}
    [pil] = interpolation.interpolate("{pic}", namespace)
    assert (pil.media_type, pil.width, pil.height) == ("image/png", 30, 20)
    assert PIL.open(io.BytesIO(pil.data)).getpixel((5, 5)) == (200, 40, 40)
    [ipy] = interpolation.interpolate("{ipy}", namespace)
    assert ipy.data == png(12, 9)  # the bytes as given
    # What plt.plot() returns is a list of Line2D, not a Figure: it reads as text.
    notes = []
    text, image = interpolation.interpolate("lines: {lines}", namespace, notes=notes)  # plt.plot's figure, as an image
    assert text == "lines: " and image.data == images.as_image(namespace["lines"][0].figure).data
    assert notes == ["{lines} holds matplotlib artists (what plt.plot returns): sent their figure"]
    plt.close("all")


def test_an_image_that_cannot_be_sent_stays_as_written_with_a_note():
    notes: list[str] = []
    remote = IPythonImage(url="http://127.0.0.1:9/never-fetched.png")
    assert interpolation.interpolate("see {remote}", {"remote": remote}, notes=notes) == "see {remote}"
    assert len(notes) == 1 and notes[0].startswith("{remote} did not resolve (ImageError: this IPython Image holds "
                                                   "no image data (it points at 'http://127.0.0.1:9/")


# --- the magic in an InteractiveShell ---------------------------------------------------------

@pytest.mark.parametrize("mode", ["block", "await"])
def test_fig_in_a_cell_reaches_the_model_as_an_image_block(ip, fig, mode):
    model = Scripted(["Sales rise from 1 to 9.", "Yes, it is the same plot."])
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), fig=fig)
    ok(ip, f"%config AgentMagics.run_mode = {mode!r}")
    captured = ok(ip, "%%agent bot\nHere is the plot: {fig}\nWhat trend does it show?")
    first, image, last = _sent(model)
    assert first == {"type": "text", "text": "Here is the plot: "}
    assert last == {"type": "text", "text": "\nWhat trend does it show?"}
    assert _image_of(image).data == images.as_image(fig).data  # the figure as rendered, intact

    result = ip.user_ns["_agent_result"]
    assert result.output == "Sales rise from 1 to 9." and result.requests[0].images == 1
    [url] = data_urls(result_html(result))  # the transcript shows it inline, as a thumbnail
    thumb = Image(base64.b64decode(url.removeprefix("data:image/png;base64,")))
    assert max(thumb.width, thumb.height) == 240 and thumb.width > thumb.height
    if mode == "await":
        assert "Sales rise from 1 to 9." in [d["text/plain"] for d in final(captured)]

    ok(ip, "%%agent bot\nIs it?")  # the image stays in the session: the next turn carries it again
    assert model.requests[1].messages[0]["content"][1] == image and _sent(model) == "Is it?"
    assert ip.user_ns["_agent_result"].requests[0].images == 1


def test_out_n_of_a_figure_or_of_plt_plot_is_an_image_and_the_cell_says_it_sent_one(ip, fig):
    model = Scripted(["a figure", "a list of lines", "mixed"])
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), fig=fig, plt=plt)
    with capture_output():
        shown = ip.run_cell("fig", store_history=True).execution_count
        plt.close("all")
        plotted = ip.run_cell("plt.plot([1, 2], [3, 4])", store_history=True).execution_count
    captured = ok(ip, f"%%agent bot\n{{Out[{shown}]}}")
    [image] = _sent(model)
    assert _image_of(image).data == images.as_image(fig).data
    assert "1 image sent with the prompt" in captured.stdout
    # a cell ending in plt.plot(...) has a list of Line2D as its value: their figure is sent
    captured = ok(ip, f"%%agent bot\nCompare {{Out[{plotted}]}} with {{fig}}")
    assert [part["type"] for part in _sent(model)] == ["text", "image", "text", "image"]
    lines = ip.user_ns["Out"][plotted]
    assert _image_of(_sent(model)[1]).data == images.as_image(lines[0].figure).data
    assert f"{{Out[{plotted}]}} holds matplotlib artists (what plt.plot returns): sent their figure" in captured.stdout
    assert "2 images sent with the prompt" in captured.stdout
    # artists of two figures are not one picture: sent as text, as any other value
    other = plt.figure().add_subplot().plot([5, 6], [7, 8])
    ip.user_ns["mixed"] = [lines[0], *other]
    ok(ip, "%%agent bot\n{mixed}")
    assert _sent(model).startswith("[<matplotlib.lines.Line2D object")
    plt.close("all")


def test_html_format_and_notes_with_image_parts(ip, fig):
    model = Scripted(["<p>Up.</p>", "<p>Up.</p>", "ok"])
    remote = IPythonImage(url="http://127.0.0.1:9/never-fetched.png")
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), fig=fig, remote=remote)
    ok(ip, "%%agent bot -f html\nTrend of {fig} please")
    assert _sent(model)[-1] == {"type": "text", "text": " please" + cell_magic.HTML_REQUEST}
    ok(ip, "%%agent bot -f html\n{fig}")  # the request follows the image as its own text part
    assert [b["type"] for b in _sent(model)] == ["image", "text"]
    assert _sent(model)[-1]["text"] == cell_magic.HTML_REQUEST.lstrip()

    captured = ok(ip, "%%agent bot\n{remote}")
    assert _sent(model) == "{remote}"
    assert captured.stdout.splitlines()[0].startswith("{remote} did not resolve (ImageError:")


def test_a_cell_of_only_an_image_is_not_empty(ip):
    model = Scripted(["A gradient."])
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), shot=Image(PLOT))
    ok(ip, "%%agent bot\n{shot}")
    [image] = _sent(model)
    assert base64.b64decode(image["data"]) == PLOT


# --- a real kernel ----------------------------------------------------------------------------

def test_a_notebook_plots_and_sends_the_figure_from_an_agent_cell(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    nb = run_notebook([
        ("%load_ext bettong_nb\n"
         "import matplotlib.pyplot as plt, bettong_nb\n"
         "from bettong_nb.providers.scripted import Scripted\n"
         "model = Scripted(['Sales **triple** each year.', 'The same plot again.'])\n"
         "bot = bettong_nb.agent(provider=model)"),
        ("fig, ax = plt.subplots(figsize=(4, 3))\n"
         "ax.plot([2022, 2023, 2024], [1, 3, 9]); ax.set_title('sales')"),
        "%%agent bot\nWhat does this plot show? {fig}",
        "fig",
        "%%agent bot\n{Out[4]}",
        ("for request in model.requests:\n"
         "    blocks = request.messages[-1]['content']\n"
         "    print([b['type'] for b in blocks])\n"
         "print(bettong_nb.images.as_image(fig).sha256())\n"
         "for request in model.requests:\n"
         "    print(bettong_nb.Image.from_block(request.messages[-1]['content'][-1]).sha256())\n"
         "print(_agent_result.requests[0].images)"),
    ], tmp_path)
    assert data(nb.cells[1], "image/png"), "the figure showed in its cell"
    assert answers(nb.cells[2]) == ["Sales **triple** each year."]
    assert "1 image sent with the prompt" in data(nb.cells[2], "text/plain")  # the cell says what it sent
    assert answers(nb.cells[4]) == ["The same plot again."]
    lines = stdout(nb.cells[5]).splitlines()
    assert lines[:2] == ["['text', 'image']", "['image']"]
    assert lines[2] == lines[3] == lines[4]  # both cells sent the figure, byte for byte as rendered
    assert lines[5] == "2"  # the second turn carries the first turn's image too
