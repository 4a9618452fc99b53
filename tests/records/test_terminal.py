"""The text a terminal shows: the CLI, a terminal IPython, a blocking cell."""

from __future__ import annotations

import io

from bettong_nb import Deny
from bettong_nb.records import terminal
from bettong_nb.providers.scripted import Scripted
from support.echo_runs import echo_agent, mixed_run


def test_result_text_reads_well_in_a_terminal():
    text = terminal.result_text(mixed_run())
    lines = text.splitlines()
    assert lines[0] == "All **done**"
    assert lines[1].startswith("  · echo(text=") and "→ ok" in lines[1]
    assert "→ error: ValueError: boom happened (" in lines[2]  # why it failed, on the same line
    assert lines[3].endswith("→ denied: not that one")  # no run time: a denied call never ran
    assert lines[-1].startswith("  2 requests")


def test_text_view_prints_the_stream_tool_lines_and_usage():
    out = io.StringIO()
    view = terminal.TextView(stream=True, file=out)
    result = echo_agent(Scripted([{"text": "Looking.", "tool_calls": [("echo", {"text": "a"})]}, "Done."]),
                    on_event=view, stream=True).run("go")
    view.finish(result)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Looking."
    assert lines[1].startswith("  · echo(text=\"a\") → ok (")
    assert lines[2] == "Done."
    assert lines[3].startswith("  2 requests")


def test_text_view_says_why_a_call_failed_or_was_denied():
    out = io.StringIO()
    view = terminal.TextView(stream=False, file=out)
    deny = lambda r: Deny("not that one") if r.args.get("text") == "no" else True  # noqa: E731
    result = echo_agent(Scripted([[("echo", {"text": "boom"}), ("echo", {"text": "no"})], "Done."]),
                    on_event=view, approve_fn=deny).run("go")
    view.finish(result)
    lines = out.getvalue().splitlines()
    # a line per call as it finishes: the denied call, never started, is done before the other
    assert lines[0] == '  · echo(text="no") → denied: not that one'
    assert lines[1].startswith('  · echo(text="boom") → error: ValueError: boom happened (')
    assert lines[2] == "Done." and lines[3].startswith("  2 requests")


def test_printing_a_result_sends_no_control_sequence_to_the_terminal():
    hostile = ("Done.\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07 \x1b]0;pwned\x07\x1b[2J"
               "\u202eevil\u202c\r\x1b[1Aover")
    result = echo_agent(Scripted([hostile])).run("go")
    for text in (str(result), terminal.result_text(result)):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\r" not in text
        assert "Done." in text and "evil" in text and "over" in text  # the words stay, the controls go
    out = io.StringIO()
    view = terminal.TextView(stream=True, file=out)
    streamed = echo_agent(Scripted([hostile]), on_event=view, stream=True).run("go")
    view.finish(streamed)
    assert "\x1b" not in out.getvalue() and "\u202e" not in out.getvalue()
