"""The %%agent magic in a real IPython InteractiveShell, interpolation, and the approval buttons."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import bettong_nb
from bettong_nb import events
from bettong_nb.notebook import approvals, extension, interpolation, sessions
from bettong_nb.providers.offline import OFFLINE_NOTICE, OfflineModel
from bettong_nb.providers.scripted import Scripted
from bettong_nb.records.terminal import result_text
from bettong_nb.records.transcript_html import result_html
from support import REPO
from support.ipython_shell import EXTRA_NAMES, final, ip, magics_of, ok, run_cell, tool_agent  # noqa: F401  (ip is a fixture)


# --- registration and help ---------------------------------------------------------------------

def test_agent_is_a_cell_magic_and_a_line_magic(ip):
    listed = ip.magics_manager.lsmagic()
    assert "agent" in listed["cell"] and "agent" in listed["line"]
    assert "%%agent" in ok(ip, "%lsmagic").stdout


def test_help_shows_the_options(ip):
    for cell in ("%%agent?", "%%agent --help\nnot sent"):
        out = ok(ip, cell).stdout
        for option in ("--new", "--max-steps N", "--model M", "--no-stream", "--quiet", "--approve",
                       "-o VAR, --out VAR", "TARGET", "_agent_result"):
            assert option in out, (cell, option)
    help_text = ok(ip, "%%agent --help\nnot sent").stdout
    # one usage line, TARGET first as in every example, and no reST "::" left by IPython's formatter
    assert help_text.startswith("usage: %%agent [TARGET] [--new]") and "::" not in help_text
    assert "_agent_session" not in ip.user_ns  # --help ran nothing
    out = ok(ip, "%agent").stdout
    for command in ("sessions", "usage [TARGET]", "tools [TARGET]", "transcript [TARGET]", "reset [TARGET]"):
        assert command in out


def test_config_lists_the_settings(ip):
    out = ok(ip, "%config AgentMagics").stdout
    for trait in ("provider", "model", "approval_timeout", "headless_policy", "run_mode", "stream"):
        assert f"AgentMagics.{trait}" in out


# --- the default session -------------------------------------------------------------------------

def test_default_session_is_the_offline_model_without_a_key(ip):
    out = ok(ip, "%%agent\nHello there").stdout
    assert "No DEEPSEEK_API_KEY: the default session uses the offline demo model." in out
    assert OFFLINE_NOTICE in out
    session = ip.user_ns["_agent_session"]
    assert isinstance(session.agent.provider, OfflineModel)
    assert ip.user_ns["_agent_result"].output.endswith(OFFLINE_NOTICE)
    out = ok(ip, "%%agent\nAgain").stdout
    assert "No DEEPSEEK_API_KEY" not in out and session.turns == 2
    assert ip.user_ns["_agent_session"] is session
    ok(ip, "%%agent --new\nFresh")
    assert ip.user_ns["_agent_session"] is not session and ip.user_ns["_agent_session"].turns == 1


def test_default_session_is_deepseek_when_the_key_is_set(ip, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-not-used")
    name, session, notes = magics_of(ip).sessions.target(None)
    assert name == sessions.DEFAULT and notes == []
    assert session.agent.provider.model == "deepseek-v4-flash" and session.agent.options.model is None
    assert type(session.agent.provider).__name__ == "OpenAIProvider"


def test_changing_the_configuration_swaps_the_model_and_keeps_the_conversation(ip):
    ok(ip, "%config AgentMagics.provider = 'offline'")
    ok(ip, "%%agent\nFirst")
    session = ip.user_ns["_agent_session"]
    ok(ip, "%config AgentMagics.model = 'offline-two'")
    out = ok(ip, "%%agent\nSecond").stdout
    assert "The default session now uses offline (offline-two); the conversation continues." in out
    assert ip.user_ns["_agent_session"] is session and session.turns == 2
    assert session.agent.options.model == "offline-two"


# --- targets and options -------------------------------------------------------------------------

def test_an_agent_target_gets_a_session_kept_by_name(ip):
    model = Scripted(["one", "two", "three"])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)
    ok(ip, "%%agent bot\nfirst question")
    ok(ip, "%%agent bot\nsecond question")
    second = model.requests[1].messages
    assert [m["content"] for m in second if m["role"] == "user"] == ["first question", "second question"]
    table = magics_of(ip).sessions.table()
    assert table.set_index("name").loc["bot", "turns"] == 2
    ip.user_ns["bot"] = bettong_nb.agent(provider=model)  # rebinding the name starts over
    ok(ip, "%%agent bot\nthird")
    assert [m["role"] for m in model.requests[2].messages] == ["user"]


def test_a_target_named_default_is_not_the_default_session(ip):
    ok(ip, "%%agent\nfirst")
    default = ip.user_ns["_agent_session"]
    ip.user_ns["default"] = bettong_nb.agent(provider=Scripted(["from the user's agent"]))
    try:
        ok(ip, "%%agent default\nhi")
        assert ip.user_ns["_agent_result"].output == "from the user's agent"
        ok(ip, "%%agent\nsecond")
        assert ip.user_ns["_agent_session"] is default and default.turns == 2
    finally:
        ip.user_ns.pop("default")


def test_a_session_target_continues_and_new_clears_it(ip):
    model = Scripted(["a", "b", "c"])
    chat = bettong_nb.agent(provider=model).session()
    ip.user_ns["chat"] = chat
    ok(ip, "%%agent chat\none")
    ok(ip, "%%agent chat\ntwo")
    assert chat.turns == 2 and ip.user_ns["_agent_session"] is chat
    ok(ip, "%%agent chat --new\nthree")
    assert chat.turns == 1 and len(model.requests[2].messages) == 1
    frame = ok(ip, "%agent sessions") and magics_of(ip).sessions.table()
    assert frame.set_index("name").loc["chat", "kind"] == "session"


def test_options_reach_the_run(ip):
    seen = []
    model = Scripted([[("note", {"text": "a"})], [("note", {"text": "b"})], "fine"])
    ip.user_ns["bot"] = tool_agent(model, seen)
    ok(ip, "%%agent bot --max-steps 1 --model tiny -o res\ngo")
    res = ip.user_ns["res"]
    assert res is ip.user_ns["_agent_result"]
    assert not res.done and res.reason == "hit max_steps (1)"
    assert model.requests[0].model == "tiny" and seen == ["a"]


def test_streaming_is_on_by_default_and_no_stream_turns_it_off(ip):
    deltas = []
    model = Scripted(["streamed words here", "whole answer"])
    ip.user_ns["bot"] = bettong_nb.agent(provider=model,
                                         on_event=lambda e: isinstance(e, events.TextDelta) and deltas.append(e.text))
    out = ok(ip, "%%agent bot\ngo").stdout
    assert deltas == ["streamed ", "words ", "here"]  # the agent's own listener still hears everything
    assert out.splitlines()[0] == "streamed words here"
    out = ok(ip, "%%agent bot --no-stream\ngo").stdout
    assert len(deltas) == 3 and out.splitlines()[0] == "whole answer"


def test_quiet_shows_nothing_but_keeps_the_result(ip):
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted(["hush"]))
    captured = ok(ip, "%%agent bot --quiet\ngo")
    assert captured.stdout == "" and captured.outputs == []
    assert ip.user_ns["_agent_result"].output == "hush"


def test_line_commands(ip):
    ip.user_ns["bot"] = tool_agent(Scripted([[("note", {"text": "a"})], "done"]), prices={"input": 1, "output": 1})
    ok(ip, "%%agent bot\ngo")
    usage = ip.run_line_magic("agent", "usage bot")
    assert isinstance(usage, pd.DataFrame) and len(usage) == 2 and "cost_total" in usage.columns
    tools = ip.run_line_magic("agent", "tools bot")
    assert tools["tool"].tolist() == ["note"] and tools["status"].tolist() == ["ok"]
    transcript = ip.run_line_magic("agent", "transcript bot")
    assert "bettong-call-call_0_0" in ip.display_formatter.format(transcript)[0]["text/html"]  # installed by %load_ext
    out = ok(ip, "%agent reset bot").stdout
    assert "Reset bot: 1 turn forgotten." in out and transcript.turns == 0
    assert "Nothing to reset" in ok(ip, "%agent reset").stdout


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cell, message", [
    ("%%agent nobody\nhi", "No agent or session named 'nobody' in the namespace"),
    ("%%agent x\nhi", "'x' is a int, not an Agent or Session"),
    ("%%agent --bogus\nhi", "unrecognized arguments: --bogus"),
    ("%%agent --max-steps many\nhi", "argument --max-steps: invalid int value: 'many'"),
    ("%%agent --max-steps 0\nhi", "--max-steps must be at least 1"),
    ("%%agent -o 1st\nhi", "-o/--out needs a variable name"),
    ("%%agent\n\n   \n", "The %%agent cell is empty"),
    ("%agent frobnicate", "Unknown %agent command 'frobnicate'"),
    ("%agent usage", "No default session yet: run a %%agent cell first."),
    ("%agent usage a b", "takes one TARGET"),
])
def test_errors_are_clear_usage_errors(ip, cell, message):
    ip.user_ns["x"] = 5
    result, captured = run_cell(ip, cell)
    error = result.error_in_exec or result.error_before_exec
    assert isinstance(error, UsageError), (error, captured.stdout)
    assert message in str(error)


def test_a_failing_model_is_one_short_error_and_leaves_the_session_as_it_was(ip):
    chat = bettong_nb.agent(provider=Scripted(["first"])).session()
    ip.user_ns["chat"] = chat
    ok(ip, "%%agent chat\nhi")
    assert ip.user_ns["_agent_result"].output == "first"
    result, captured = run_cell(ip, "%%agent chat\nagain")
    error = result.error_in_exec
    assert isinstance(error, bettong_nb.ProviderError)
    line = "ProviderError: The scripted model has no turn 2 (it was given 1)"
    assert error._render_traceback_() == [line]  # IPython shows this one line, no traceback
    shown = captured.stdout + captured.stderr + "".join(o.data.get("text/plain", "") for o in captured.outputs)
    assert shown.count("has no turn 2") == 1, shown  # once: no "✘ X" before the error
    assert chat.turns == 1 and len(chat.transcript) == 3
    assert "_agent_result" not in ip.user_ns  # never the previous cell's answer


def test_user_errors_are_one_line_in_a_notebook_and_bugs_keep_their_traceback(ip, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ip.user_ns["bettong_nb"] = bettong_nb
    from support.servers import free_port

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    ip.user_ns["Replay"] = bettong_nb.providers.Replay
    cells = {
        "bettong_nb.openai(base_url='http://127.0.0.1:9/v1').run('hi')": "ProviderError: No OpenAI API key",
        f"bettong_nb.openai(base_url='http://127.0.0.1:{free_port()}/v1', api_key='k', max_retries=0).run('hi')":
            "ProviderError: openai at http://127.0.0.1:",
        f"bettong_nb.agent(provider=Replay({str(empty)!r})).run('hi')": "ReplayMismatch: The cassette",
        "bettong_nb.agent(provider=lambda r: None, max_step=3)": "OptionError: Unknown agent option: max_step.",
        "bettong_nb.agent(provider=lambda r: None).run('hi', cost_budget=1)": "OptionError: cost_budget needs prices",
    }
    for cell, start in cells.items():
        result, captured = run_cell(ip, cell)
        rendered = result.error_in_exec._render_traceback_()
        assert len(rendered) == 1 and rendered[0].startswith(start), (cell, rendered)
    result, _ = run_cell(ip, "bettong_nb.agent(provider=lambda request: request.missing).run('hi')")
    assert isinstance(result.error_in_exec, AttributeError)  # a bug: the full traceback, as Python shows it
    assert not hasattr(result.error_in_exec, "_render_traceback_")
    ip.user_ns.pop("bettong_nb")
    ip.user_ns.pop("Replay")


def test_unknown_and_abbreviated_options_point_to_the_help(ip):
    for cell, message in (("%%agent --verbose\nhi", "unrecognized arguments: --verbose (see %%agent --help)"),
                          ("%%agent --max-step 3\nhi",
                           "unrecognized arguments: --max-step (did you mean --max-steps?) (see %%agent --help)"),
                          ("%%agent --aprove\nhi",
                           "unrecognized arguments: --aprove (did you mean --approve?) (see %%agent --help)"),
                          ("%agent usage --bogus", "%agent usage has no option --bogus; see %agent --help"),
                          ("%agent reset chat -f", "%agent reset has no option -f; see %agent --help")):
        result, _ = run_cell(ip, cell)
        assert isinstance(result.error_in_exec, UsageError) and str(result.error_in_exec) == message
    for typo, meant in (("sesions", "sessions"), ("transcirpt", "transcript"), ("usgae", "usage")):
        result, _ = run_cell(ip, f"%agent {typo}")
        assert str(result.error_in_exec).startswith(f"Unknown %agent command {typo!r} (did you mean {meant}?). ")
    result, _ = run_cell(ip, "%agent zzzzqq")
    assert "did you mean" not in str(result.error_in_exec)  # nothing close: no guess


# --- interpolation ----------------------------------------------------------------------------

class _Raises:
    @property
    def boom(self):
        raise RuntimeError("property ran and failed")


NAMESPACE = {
    "n": 3, "name": "Ada", "items": [10, 20], "nested": {"a": {"b": "deep"}},
    "cfg": {"key": "v", "k k": "spaced", 1: "int-key"},
    "obj": SimpleNamespace(attr="A", _secret="S", method=lambda: 1), "thing": _Raises(),
}

INTERPOLATION = [
    ("{name}", "Ada"),
    ("{n} and {name}", "3 and Ada"),
    ("{n}{n}", "33"),
    ("{obj.attr}", "A"),
    ("{cfg[key]}", "[hidden]"),  # hidden as the namespace capability hides it: "key" names a credential
    ("{cfg['key']}", "[hidden]"),
    ('{cfg["k k"]}', "spaced"),
    ("{cfg[1]}", "int-key"),
    ("{items[1]}", "20"),
    ("{nested[a][b]}", "deep"),
    ("{{name}}", "{name}"),
    ("function f(a) {{ return a }}", "function f(a) { return a }"),
    ("{missing}", "{missing}"),
    ("{ name }", "{ name }"),
    ("{name.upper}", "{name.upper}"),
    ("{obj.method}", "{obj.method}"),
    ("{obj._secret}", "{obj._secret}"),
    ("{obj.__class__}", "{obj.__class__}"),
    ("{name!r}", "{name!r}"),
    ("{n:>10}", "{n:>10}"),
    ("{0} {}", "{0} {}"),
    ("{items[5]}", "{items[5]}"),
    ("{cfg[nokey]}", "{cfg[nokey]}"),
    ("{thing.boom}", "{thing.boom}"),
    ("{name.nope.deeper}", "{name.nope.deeper}"),
    ("}} lone {{", "}} lone {{"),
    ("int main() { return 0; }", "int main() { return 0; }"),
    ('{"a": {"b": 1}}', '{"a": {"b": 1}}'),
    *[(code, code) for code in ['def f():\n    return {"x": [1, 2]}\nprint(f"{x!r} {y}")']],
    ("const o = {a: {b: 1}};", "const o = {a: {b: 1}};"),
    ("{__import__('os').system('touch pwned')}", "{__import__('os').system('touch pwned')}"),
    ("{name[0]}", "A"),
]


@pytest.mark.parametrize("template, expected", INTERPOLATION, ids=[t for t, _ in INTERPOLATION])
def test_interpolation(template, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert interpolation.interpolate(template, NAMESPACE) == expected
    assert not (tmp_path / "pwned").exists()


def test_a_dataframe_interpolates_as_a_bounded_preview():
    df = pd.DataFrame({"city": [f"c{i}" for i in range(500)], "value": range(500), "text": ["x" * 300] * 500})
    text = interpolation.interpolate("Look at {df}", {"df": df})
    assert text.startswith("Look at DataFrame (500 × 3):\n")
    assert "c9" in text and "c10 " not in text and "… (490 more rows)" in text
    assert len(text) <= len("Look at ") + interpolation.PREVIEW_CHARS + 50
    series = interpolation.interpolate("{s}", {"s": df["value"]})
    assert series.startswith("Series (500):") and len(series.splitlines()) < 15


def test_the_model_receives_the_interpolated_prompt(ip):
    model = Scripted(["ok", "ok"])
    ip.user_ns.update(bot=bettong_nb.agent(provider=model), x={"city": "Vilnius"})
    ok(ip, "%%agent bot\nCapital: {x[city]}; code: if (a) { b({x}); } and {{x}}")
    assert model.requests[0].messages[-1]["content"] == (
        "Capital: Vilnius; code: if (a) { b({'city': 'Vilnius'}); } and {x}")
    ok(ip, "%%agent bot --no-interpolate\n{x[city]} {{x}}")
    assert model.requests[1].messages[-1]["content"] == "{x[city]} {{x}}"


# --- await mode (ipykernel >= 7.4) and display ---------------------------------------------------------

def test_await_mode_turns_the_cell_into_an_awaiting_call(ip):
    ok(ip, "%config AgentMagics.run_mode = 'await'")
    assert ip.transform_cell("%%agent bot -o r\nhi {x}\n") == "await __bettong_agent_cell__('bot -o r', 'hi {x}\\n')\n"
    assert "pinfo" in ip.transform_cell("%%agent?")
    assert ip.transform_cell("%%agents\nx") != ip.transform_cell("%%agent\nx")
    model = Scripted([[("note", {"text": "a"})], "The **answer**"])
    ip.user_ns["bot"] = tool_agent(model)
    captured = ok(ip, "%%agent bot -o res\ngo")
    assert ip.user_ns["res"].output == "The **answer**"
    (answer,) = [o.data for o in captured.outputs if "bettong-markdown" in o.data.get("text/html", "")]
    assert answer["text/plain"] == "The **answer**" and "The <strong>answer</strong>" in answer["text/html"]
    assert "note(text=&quot;a&quot;)" in "".join(o.data.get("text/html", "") for o in captured.outputs)
    result, _ = run_cell(ip, "%%agent nobody\nhi")
    assert isinstance(result.error_in_exec, UsageError)
    ok(ip, "%reset -f")  # clears the namespace, the awaiting helper included; the next cell restores it
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted(["after reset"]))
    ok(ip, "%%agent bot\nstill there?")
    assert ip.user_ns["_agent_result"].output == "after reset"


def test_run_result_plain_text_repr(ip):
    result = bettong_nb.agent(provider=Scripted(["plain answer"])).run("q")
    text = ip.display_formatter.format(result)[0]["text/plain"]
    assert text.splitlines()[0] == "plain answer" and "1 request" in text


def test_unload_removes_the_magic_and_the_transformer(ip):
    ip.extension_manager.unload_extension("bettong_nb")
    try:
        assert "agent" not in ip.magics_manager.lsmagic()["cell"]
        assert not any(getattr(t, "bettong", False) for t in ip.input_transformers_cleanup)
        assert extension.CELL_FUNCTION not in ip.user_ns
    finally:
        ip.extension_manager.load_extension("bettong_nb")


def test_load_ext_imports_no_heavy_modules():
    # What %load_ext costs a fresh shell is timed by `python -m bench` (W4).
    code = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\nshell.run_line_magic('load_ext', 'bettong_nb')\n"
            "print([m for m in ('pandas', 'ipywidgets', 'httpx') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr


# --- approval buttons -------------------------------------------------------------------------

def _click(prompt, button, reason=None):
    if reason is not None:
        prompt.reason.value = reason
    getattr(prompt, button).click()


def _approve_run(monkeypatch, actions, *, frontend=True, approver=None, turns=None, prompt="go", scope=None):
    """Run a tool-calling agent whose approvals are answered by ``actions`` (one per prompt shown)."""
    monkeypatch.setattr(approvals, "_frontend", frontend)
    seen, shown = [], []
    model = Scripted(turns or [[("note", {"text": "a"}), ("note", {"text": "b"})], "done"])
    approver = approver or approvals.ButtonApprover(timeout=5)
    agent = tool_agent(model, seen, approve_fn=approver)

    async def main():
        loop = asyncio.get_running_loop()

        def show(widget):
            prompt_ = approver.prompts[-1]
            assert prompt_.widget is widget
            shown.append(prompt_)
            action = actions[len(shown) - 1] if len(shown) <= len(actions) else None
            if action is not None:
                loop.call_later(0.01, action, prompt_)

        approver.show = show
        return await agent.arun(prompt, conversation=scope)  # a scope: what a Session passes for its turns

    result = asyncio.run(main())
    return result, model, seen, shown


def _tool_results(model, index=1):
    return [b["content"] for b in model.requests[index].messages[-1]["content"]]


def test_allow_and_deny_with_a_reason(monkeypatch):
    result, model, seen, shown = _approve_run(
        monkeypatch, [lambda p: _click(p, "allow"), lambda p: _click(p, "deny", "  not b  ")])
    assert seen == ["a"]
    assert _tool_results(model) == ["noted a", "ERROR: note was not allowed: not b"]
    assert [c.status for c in result.tool_calls] == ["ok", "denied"]
    assert result.tool_calls[1].reason == "not b"
    first, second = shown
    assert "bettong-approval" in first.widget._dom_classes
    assert "bettong-call-call_0_0" in first.widget._dom_classes
    assert "bettong-call-call_0_1" in second.widget._dom_classes
    assert all(b.disabled for b in (first.allow, first.always, first.deny, first.stop, first.reason))
    assert "allowed" in first.status.value and "denied: not b" in second.status.value
    assert [b.description for b in (first.allow, first.always, first.deny)] == ["Allow", "Allow always", "Deny"]
    assert first.reason.placeholder == "reason (optional)"
    header = first.widget.children[0].value
    assert "<code>note</code>" in header and "(capability: notes)" in header
    assert "&quot;text&quot;: &quot;a&quot;" in header  # the arguments, HTML-escaped


def test_deny_without_a_reason_says_the_user_denied(monkeypatch):
    _, model, seen, _ = _approve_run(monkeypatch, [lambda p: _click(p, "deny"), lambda p: _click(p, "deny")])
    assert seen == [] and _tool_results(model) == ["ERROR: note was not allowed: denied by the user"] * 2


def test_allow_always_covers_this_tool_for_the_rest_of_the_session(monkeypatch):
    turns = [[("note", {"text": "a"}), ("note", {"text": "b"})], [("note", {"text": "c"})], "done"]
    approver = approvals.ButtonApprover(timeout=5)
    _, _, seen, shown = _approve_run(monkeypatch, [lambda p: _click(p, "always")], approver=approver, turns=turns)
    assert seen == ["a", "b", "c"] and len(shown) == 1
    # without a session the run is the conversation: the next run asks again
    _, _, seen, shown = _approve_run(monkeypatch, [lambda p: _click(p, "deny")], approver=approver,
                                     turns=[[("note", {"text": "d"})], "done"])
    assert seen == [] and len(shown) == 1


def test_allow_always_is_remembered_per_session_across_cells(monkeypatch):
    class Session:  # a Session passes itself as its turns' conversation
        pass

    chat, other = Session(), Session()
    one_call = [[("note", {"text": "a"})], "done"]
    _, _, _, shown = _approve_run(monkeypatch, [lambda p: _click(p, "always")], scope=chat, turns=one_call)
    assert len(shown) == 1
    _, _, seen, shown = _approve_run(monkeypatch, [], scope=chat, turns=one_call)  # a new cell, a new approver
    assert seen == ["a"] and shown == []
    _, _, seen, shown = _approve_run(monkeypatch, [lambda p: _click(p, "deny")], scope=other, turns=one_call)
    assert seen == [] and len(shown) == 1


def test_stop_denies_this_round_and_ends_the_run(monkeypatch):
    turns = [[("note", {"text": "a"}), ("note", {"text": "b"})], [("note", {"text": "c"})], "gave up"]
    result, model, seen, shown = _approve_run(monkeypatch, [lambda p: _click(p, "stop")], turns=turns)
    assert seen == [] and len(shown) == 1
    # the run ends after this round: no further model request, a well-formed transcript
    assert len(model.requests) == 1
    assert [b["content"] for b in result.messages[-1]["content"]] == [
        f"ERROR: note was not allowed: {approvals.STOP_REASON}"] * 2
    assert (result.done, result.stop_reason, result.reason) == (False, "stopped", approvals.STOP_REASON)


def test_no_decision_in_time_applies_the_headless_policy(monkeypatch):
    result, model, seen, shown = _approve_run(monkeypatch, [], approver=approvals.ButtonApprover(timeout=0.2),
                                              turns=[[("note", {"text": "a"})], "ok"])
    assert seen == [] and len(shown) == 1
    assert _tool_results(model) == ["ERROR: note was not allowed: no one approved it: no decision within 0.2 s; "
                                    "the headless policy denies tool calls that need approval"]
    assert "denied by the headless policy" in shown[0].status.value and shown[0].allow.disabled
    allowing = approvals.ButtonApprover(timeout=0.2, headless="allow")
    _, _, seen, _ = _approve_run(monkeypatch, [], approver=allowing, turns=[[("note", {"text": "a"})], "ok"])
    assert seen == ["a"]


def test_without_a_widget_frontend_nothing_waits(monkeypatch):
    monkeypatch.setattr(approvals, "_frontend", None)  # not probed yet: no kernel here, so no frontend
    result, model, seen, shown = _approve_run(monkeypatch, [], frontend=None, turns=[[("note", {"text": "a"})], "ok"])
    assert shown == [] and seen == []
    assert "no widget frontend is connected to this kernel" in _tool_results(model)[0]


def test_an_interrupt_while_waiting_is_a_denial(monkeypatch):
    before = signal.getsignal(signal.SIGINT)
    interrupt = lambda p: os.kill(os.getpid(), signal.SIGINT)  # noqa: E731
    result, model, seen, shown = _approve_run(monkeypatch, [interrupt], turns=[
        [("note", {"text": "a"})], [("note", {"text": "b"})], "stopped"])
    assert seen == [] and len(shown) == 1 and len(model.requests) == 1
    assert result.messages[-1]["content"][0]["content"] == f"ERROR: note was not allowed: {approvals.INTERRUPT_REASON}"
    assert (result.done, result.stop_reason) == (False, "stopped")
    assert signal.getsignal(signal.SIGINT) is before


def test_bad_approver_settings_are_errors():
    with pytest.raises(ValueError, match="headless must be one of deny, allow"):
        approvals.ButtonApprover(headless="maybe")
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        approvals.ButtonApprover(timeout=0)


def test_approve_in_a_cell_records_decisions_on_the_result(ip, monkeypatch):
    monkeypatch.setattr(approvals, "_frontend", False)  # nobody to click: the headless policy decides
    ok(ip, "%config AgentMagics.run_mode = 'await'")
    seen = []
    ip.user_ns["bot"] = tool_agent(Scripted([[("note", {"text": "a"})], "ok"]), seen)
    captured = ok(ip, "%%agent bot --approve\ngo")
    call = ip.user_ns["_agent_result"].tool_calls[0]
    assert seen == [] and call.status == "denied"
    assert call.reason.startswith("no one approved it: no widget frontend")
    html = "".join(o.data.get("text/html", "") for o in captured.outputs)
    assert re.search(r'→ <span style="color:var\(--jp-error-color1[^"]*">denied by the headless policy: no widget '
                     r'frontend is connected', html)


def test_a_quiet_cell_keeps_its_decisions_as_plain_html(ip, monkeypatch):
    """--quiet shows no tool calls, so the prompts' place itself ends as their records: plain
    HTML a saved notebook and nbconvert keep, no widget left behind."""
    import ipywidgets
    from ipywidgets.widgets import widget

    monkeypatch.setattr(approvals, "_frontend", True)  # a browser is attached: the prompts wait for clicks
    ok(ip, "%config AgentMagics.run_mode = 'await'")
    clicks = iter(["Allow", "Deny"])

    def press(wanted):
        buttons = [w for w in list(widget._instances.values())
                   if isinstance(w, ipywidgets.Button) and w.description == wanted and w.comm is not None]
        buttons[-1].click()

    def click(event):  # a person clicking once each prompt is on screen
        if isinstance(event, events.ApprovalRequested):
            asyncio.get_running_loop().call_later(0.05, press, next(clicks))

    ip.user_ns["bot"] = tool_agent(Scripted([[("note", {"text": "a"}), ("note", {"text": "b"})], "ok"]),
                                    on_event=click)
    captured = ok(ip, "%%agent bot --approve --quiet\ngo")
    assert [c.status for c in ip.user_ns["_agent_result"].tool_calls] == ["ok", "denied"]
    (record,) = [d for d in final(captured) if d.get("text/plain")]
    assert record["text/plain"] == 'note(text="a") — allowed by you\nnote(text="b") — denied by you'
    assert record["text/html"].count('class="bettong-decision"') == 2
    assert not [d for d in final(captured) if "application/vnd.jupyter.widget-view+json" in d]


def _recorded_run(monkeypatch, turns, clicks):
    """A run drawn by a LiveView whose prompts are answered by ``clicks``: (the final bundles of
    activity, prompt slot and answer; the result; the prompts shown)."""
    from bettong_nb.notebook.display import LiveView
    from support.echo_runs import Recorder

    monkeypatch.setattr(approvals, "_frontend", True)
    recorder = Recorder()

    async def main():
        loop = asyncio.get_running_loop()
        view = LiveView(show=recorder.show, interval=0, prompts=True)
        approver = approvals.ButtonApprover(timeout=5, show=view.prompts)
        shown = []

        def show(widget):
            view.prompts(widget)
            shown.append(approver.prompts[-1])
            loop.call_later(0.01, clicks[len(shown) - 1], shown[-1])

        approver.show = show
        show.settle = view.prompts.settle
        agent = tool_agent(Scripted(turns), approve_fn=approver, on_event=view)
        result = await agent.arun("go", conversation=approver)  # a conversation across the steps, as a Session makes
        view.finish(result)
        return result, shown

    result, shown = asyncio.run(main())
    activity, slot, answer = (recorder.handles[i].bundles[-1] for i in range(3))
    summaries = [re.sub(r"<[^>]+>", "", s) for s in re.findall(r"<summary[^>]*>(.*?)</summary>",
                                                                 activity["text/html"], re.S)]
    decided = [s.split("→ ")[1].split(" · ")[:2] for s in summaries]
    return decided, slot, answer, result, shown, activity["text/plain"]


def test_decided_prompts_collapse_to_one_line_beside_their_calls(monkeypatch):
    turns = [[("note", {"text": "a"}), ("note", {"text": "b"}), ("note", {"text": "c"})],
             [("note", {"text": "d"}), ("note", {"text": "e"})], "never asked"]
    clicks = [lambda p: _click(p, "allow"), lambda p: _click(p, "deny", "not b"), lambda p: _click(p, "deny"),
              lambda p: _click(p, "stop")]
    decided, slot, answer, result, shown, plain = _recorded_run(monkeypatch, turns, clicks)
    assert decided == [["ok", "allowed by you"], ["denied: not b"], ["denied by you"], ["denied", "stopped by you"],
                       ["denied", "stopped by you"]]  # e was denied by the stop, without a prompt
    assert slot == {"text/plain": "", "text/html": ""}  # no widget is left in the cell
    assert len(shown) == 4 and all(p.widget.comm is None for p in shown)  # the prompts' widgets are closed
    assert answer["text/plain"] == "(no final answer: stopped by you)"  # not the instruction the model read
    assert result.reason == approvals.STOP_REASON and result.tool_calls[3].reason == approvals.STOP_REASON
    # Everywhere a person reads the run, a stop reads "stopped by you": the live view's text, the
    # result's text (print, the text/plain %load_ext installs) and its HTML shown again later.
    redisplayed = result_html(result)
    summaries = [re.sub(r"<[^>]+>", "", s) for s in re.findall(r"<summary[^>]*>(.*?)</summary>", redisplayed, re.S)]
    assert [s.split("→ ")[1] for s in summaries if "note(" in s][3:] == ["denied · stopped by you"] * 2
    for text in (plain, "\n".join(summaries), result_text(result), str(result)):
        assert "do not call more tools" not in text, text
    assert "reason: the user stopped" not in redisplayed  # (its RESULT block keeps what the model read)
    assert plain.splitlines()[3:] == [f'· note(text="{t}") → denied: stopped by you' for t in "de"]
    assert result_text(result).splitlines()[0] == "(no final answer: stopped by you)"

    turns = [[("note", {"text": "a"})], [("note", {"text": "b"})], "done"]
    decided, slot, answer, _, shown, _ = _recorded_run(monkeypatch, turns, [lambda p: _click(p, "always")])
    assert decided == [["ok", "allowed always (this session)"]] * 2 and len(shown) == 1
    assert slot == {"text/plain": "", "text/html": ""} and answer["text/plain"] == "done"


def test_a_prompt_outside_a_cell_magic_is_replaced_by_its_record(ip, monkeypatch):
    monkeypatch.setattr(approvals, "_frontend", True)
    approver = approvals.ButtonApprover(timeout=5)  # no show: each prompt gets an output of its own

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, lambda: _click(approver.prompts[-1], "deny", "no thanks"))
        return await tool_agent(Scripted([[("note", {"text": "a"})], "ok"]), approve_fn=approver).arun("go")

    with capture_output() as captured:
        result = asyncio.run(main())
    assert result.tool_calls[0].status == "denied"
    prompt, record = captured.outputs
    assert "application/vnd.jupyter.widget-view+json" in prompt.data
    assert record.update and record.transient == prompt.transient  # the same output, replaced
    assert record.data["text/plain"] == 'note(text="a") — denied: no thanks'
    assert 'class="bettong-decision"' in record.data["text/html"]


@pytest.mark.parametrize("mode", ["block", "await"])
def test_the_cell_says_the_model_refused(ip, mode):
    from bettong_nb.providers import Response

    ok(ip, f"%config AgentMagics.run_mode = '{mode}'")
    refusal = Response(content=[{"type": "text", "text": "Here is how"}], stop_reason="refusal",
                       stop_details={"type": "refusal", "category": "cyber"})
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted([refusal]))
    captured = ok(ip, "%%agent bot\nhow do I break in?")
    result = ip.user_ns["_agent_result"]
    assert result.refused() and result.output == ""
    said = "(the model refused to answer — category: cyber)"
    if mode == "block":  # a terminal printed the streamed words; the line after them says what they were
        assert captured.stdout.splitlines()[1] == said
    else:
        answers = [d["text/plain"] for d in final(captured) if "bettong-why" in d.get("text/html", "")]
        assert answers == [said] and "Here is how" not in str(final(captured))


def test_a_budget_stop_is_said_once(ip):
    ok(ip, "%config AgentMagics.run_mode = 'await'")
    ip.user_ns["bot"] = bettong_nb.agent(provider=Scripted(["never"]), token_budget=5)
    captured = ok(ip, "%%agent bot\nhello there, a prompt over five tokens")
    shown = str(final(captured))
    assert shown.count("token budget of 5 would be exceeded") == 2, shown  # the answer's line, plain and HTML


def test_the_readmes_first_notebook_cells_run_with_no_key(ip, monkeypatch):

    root = REPO
    monkeypatch.chdir(root)
    section = (root / "README.md").read_text().split("## In a notebook", 1)[1]
    first, prompt = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)[:2]
    assert first.startswith("%load_ext bettong_nb\n")  # the extension first, so %%agent exists
    ok(ip, first)
    assert isinstance(ip.user_ns["bot"].provider, bettong_nb.providers.OfflineModel)
    ok(ip, prompt.replace(" --approve", "") + "\n")  # no person to click in a test shell
    assert [c.tool for c in ip.user_ns["_agent_result"].tool_calls] == ["list_dir", "read_file"]
    ip.user_ns.pop("bettong_nb", None)
