"""The agent loop through the Scripted provider: tools, approvals, arguments, steps, events."""

import asyncio
import threading

import pytest

import bettong_nb
from bettong_nb import OptionError
from bettong_nb import Deny, events
from bettong_nb.core.agent import BASE_SYSTEM_PROMPT
from bettong_nb.core.options import Options
from bettong_nb.providers.scripted import Scripted


def weather_cap(calls=None):
    def get_weather(city):
        if calls is not None:
            calls.append(city)
        return f"raining in {city}"

    return {"id": "weather", "instructions": "Temperatures are in celsius.",
            "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                       "parameters": {"city": {"type": "string", "description": "City name.", "required": True}},
                       "handler": get_weather}]}


def run(turns, prompt="go", **options):
    model = Scripted(turns)
    result = bettong_nb.agent(provider=model, **options).run(prompt)
    return result, model


def test_runs_a_tool_then_answers():
    calls = []
    result, model = run([[("get_weather", {"city": "Vilnius"})], "It rains."], capabilities=[weather_cap(calls)])
    assert result.output == "It rains." and result.done and result.steps == 2
    assert calls == ["Vilnius"]
    [call] = result.tool_calls
    assert (call.tool, call.capability, call.args, call.result, call.status) == (
        "get_weather", "weather", {"city": "Vilnius"}, "raining in Vilnius", "ok")
    # the tool result goes back to the model in the next request
    last = model.requests[1].messages[-1]
    assert last == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call.id, "content": "raining in Vilnius", "is_error": False}]}


def test_answer_without_tools_and_empty_tool_list():
    result, model = run(["2"])
    assert (result.output, result.tool_calls, result.steps, result.done) == ("2", [], 1, True)
    assert model.requests[0].tools == []
    assert model.requests[0].system[0].text == BASE_SYSTEM_PROMPT
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant"]


def test_several_tool_calls_in_one_turn_run_in_order():
    calls = []
    result, model = run([[("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})], "done"],
                        capabilities=[weather_cap(calls)])
    assert calls == ["A", "B"]
    results = model.requests[1].messages[-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_0_0", "call_0_1"]


def test_max_steps_gives_done_false_and_no_output():
    result, model = run([[("get_weather", {"city": "x"})]] * 5, capabilities=[weather_cap()], max_steps=3)
    assert (result.done, result.output, result.steps, len(result.tool_calls)) == (False, None, 3, 3)
    assert result.usage.requests == 3 and "max_steps" in result.reason


def test_max_steps_zero_calls_no_model():
    result, model = run(["never"], max_steps=0)
    assert result.done is False and model.requests == [] and result.usage.requests == 0


def test_a_handler_that_raises_is_reported_to_the_model():
    def boom():
        raise RuntimeError("kaboom")

    cap = {"id": "b", "tools": [{"name": "boom", "handler": boom}]}
    result, _ = run([[("boom", {})], "ok"], capabilities=[cap])
    assert result.tool_calls[0].result == "ERROR: RuntimeError: kaboom"  # your tool's error, as Python names it
    assert result.tool_calls[0].status == "error" and result.done


def test_unknown_tool_is_an_error_for_the_model():
    result, _ = run([[("write_file", {"path": "x"})], "ok"], capabilities=[weather_cap()])
    call = result.tool_calls[0]
    assert call.result == "ERROR: no capability provides a tool called write_file"
    assert call.capability is None


@pytest.mark.parametrize("raw", ["", "   ", None])
def test_empty_arguments_mean_no_arguments(raw):
    cap = {"id": "c", "tools": [{"name": "now", "handler": lambda: "12:00"}]}
    result, _ = run([[("now", raw)], "ok"], capabilities=[cap])
    assert result.tool_calls[0].result == "12:00" and result.tool_calls[0].args == {}


@pytest.mark.parametrize("raw", ['{not json', '{"path": "/tmp/c.edn", "key_path": [":a" ":b"]}'])
def test_malformed_arguments_become_an_error_and_the_loop_continues(raw):
    seen = []
    result, _ = run([[("get_weather", raw)], "ok"], capabilities=[weather_cap()],
                    approve_fn=lambda req: seen.append(req) or True)
    text = result.tool_calls[0].result
    assert text.startswith("ERROR: ") and "not valid JSON" in text and "separated by commas" in text
    assert seen == [], "the approval hook is not asked about arguments that could not be read"
    assert result.done and result.output == "ok"


def test_arguments_that_are_not_an_object_are_an_error():
    result, _ = run([[("get_weather", "[1, 2]")], "ok"], capabilities=[weather_cap()])
    assert "must be a JSON object" in result.tool_calls[0].result


def test_duplicate_tool_names_fail_at_the_start_of_a_run_naming_both():
    a = weather_cap()
    b = {**weather_cap(), "id": "other"}
    agent = bettong_nb.agent(provider=Scripted(["x"]), capabilities=[a, b])  # construction is fine
    with pytest.raises(ValueError, match="Two capabilities both provide the tool get_weather: 'weather' and 'other'"):
        agent.run("go")


# --- approvals --------------------------------------------------------------------------------

def approve_run(approve_fn, tool="get_weather"):
    calls = []
    result, model = run([[(tool, {"city": "Rome"})], "ok"], capabilities=[weather_cap(calls)], approve_fn=approve_fn)
    return result.tool_calls[0], calls


@pytest.mark.parametrize("verdict", [True, 1, "yes", {"allowed": True}, {"allowed": None}])
def test_truthy_verdicts_allow(verdict):
    call, calls = approve_run(lambda req: verdict)
    assert calls == ["Rome"] and call.status == "ok"


@pytest.mark.parametrize("verdict", [False, None, 0, ""])
def test_falsy_verdicts_deny_without_reason(verdict):
    call, calls = approve_run(lambda req: verdict)
    assert calls == [] and call.result == "ERROR: get_weather was not allowed" and call.status == "denied"


@pytest.mark.parametrize("verdict,text", [
    (Deny("too dangerous"), "ERROR: get_weather was not allowed: too dangerous"),
    ({"allowed": False, "reason": "shell is off today"}, "ERROR: get_weather was not allowed: shell is off today"),
    (Deny(""), "ERROR: get_weather was not allowed: "),
    (Deny(), "ERROR: get_weather was not allowed"),
])
def test_denials_with_reasons(verdict, text):
    call, calls = approve_run(lambda req: verdict)
    assert calls == [] and call.result == text


def test_a_set_allows_exactly_those_tools():
    assert approve_run({"get_weather"})[1] == ["Rome"]
    call, calls = approve_run(frozenset({"run_shell"}))
    assert calls == [] and call.status == "denied"


def test_a_raising_hook_denies_and_the_run_goes_on():
    def hook(req):
        raise RuntimeError("hook is broken")

    call, calls = approve_run(hook)
    assert calls == [] and call.result == "ERROR: get_weather was not allowed: approval hook threw: hook is broken"


def test_async_hooks_are_awaited_and_see_tool_args_capability():
    seen = []

    async def hook(req):
        await asyncio.sleep(0)
        seen.append((req.tool, req.args, req.capability))
        return Deny("no")

    call, calls = approve_run(hook)
    assert seen == [("get_weather", {"city": "Rome"}, "weather")] and calls == []
    assert call.reason == "no"


def test_the_hook_is_asked_about_unknown_tools_too_and_its_denial_wins():
    seen = []
    call, _ = approve_run(lambda req: seen.append(req.capability) or Deny("nope"), tool="missing")
    assert seen == [None] and call.result == "ERROR: missing was not allowed: nope"


@pytest.mark.parametrize("line,allowed", [("y\n", True), ("YES\n", True), ("n\n", False), ("", False)])
def test_ask_in_terminal(monkeypatch, capsys, line, allowed):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(line))
    verdict = bettong_nb.ask_in_terminal(bettong_nb.ApprovalRequest("run_shell", {"command": "ls"}, "shell"))
    # a piped answer is nobody's keypress: its yes is an automatic one (tests/test_approvals_hostile.py)
    assert verdict == (bettong_nb.Allow() if allowed else Deny("denied by the user"))
    assert not getattr(verdict, "person", False)
    assert 'Allow run_shell {"command": "ls"} ? [y/N]' in capsys.readouterr().out


# --- options ----------------------------------------------------------------------------------

def test_unknown_options_raise_at_construction_and_per_call():
    with pytest.raises(TypeError) as err:
        bettong_nb.deepseek(max_step=3)
    assert "Unknown agent option: max_step" in str(err.value)
    assert "max_steps" in str(err.value) and "approve_fn" in str(err.value)
    agent = bettong_nb.agent(provider=Scripted(["x"]))
    with pytest.raises(TypeError, match="Unknown override options: colour, flavour"):
        agent.run("go", flavour=1, colour=2)


WRONG_TYPES = [
    ("capabilities", "fs"), ("messages", "hi"), ("max_steps", "ten"), ("max_steps", True), ("max_steps", -1),
    ("max_tokens", 0), ("max_retries", 1.5), ("output_retries", "2"), ("output_retries", -1),
    ("token_budget", "lots"), ("cost_budget", -0.5), ("temperature", "warm"), ("stream", "no"),
    ("model", 4), ("system", ["a"]), ("prices", 0.1), ("on_event", "print"), ("timeout", -1),
    ("image_max_side", 2.5), ("keep_alive", True),
]


@pytest.mark.parametrize("name, value", WRONG_TYPES)
def test_an_option_of_the_wrong_kind_is_refused_before_any_request(name, value):
    """At construction and per call, as one OptionError naming the option: never a TypeError
    from inside a run after a request was paid for."""
    with pytest.raises(OptionError, match=f"^{name} must be "):
        bettong_nb.agent(provider=Scripted(["x"]), **{name: value})
    model = Scripted(["x"])
    with pytest.raises(OptionError, match=f"^{name} must be "):
        bettong_nb.agent(provider=model).run("go", **{name: value})
    assert model.requests == []


def test_a_key_of_the_wrong_kind_is_not_shown():
    with pytest.raises(OptionError) as caught:
        bettong_nb.agent(provider=Scripted(["x"]), api_key=b"sk-bytes-key-0123456789abcdef")
    assert "bytes" in str(caught.value) and "0123456789" not in str(caught.value)


def test_overrides_apply_per_call_only():
    model = Scripted(["a", "b"])
    agent = bettong_nb.agent(provider=model, system="base")
    agent.run("one", system="override")
    agent.run("two")
    assert [r.system[0].text for r in model.requests] == ["override", "base"]


def test_system_override_keeps_capability_instructions():
    result, model = run(["x"], system="be terse", capabilities=[{"id": "l", "instructions": "Laser is hot.", "tools": []}])
    assert result.messages[0]["content"] == "be terse\n\nLaser is hot."


def test_capability_instructions_are_appended_to_the_base_prompt():
    result, _ = run(["x"], capabilities=[weather_cap()])
    text = result.messages[0]["content"]
    assert text.startswith(BASE_SYSTEM_PROMPT) and text.endswith("Temperatures are in celsius.")


def test_a_callable_is_a_provider():
    from bettong_nb.providers import Response

    seen = []

    def fake(request):
        seen.append(request)
        return Response(content=[{"type": "text", "text": "from a function"}])

    assert bettong_nb.agent(provider=fake).run("hi").output == "from a function"
    assert seen[0].messages[-1] == {"role": "user", "content": "hi"}


def test_provider_options_conflict_with_a_given_provider():
    with pytest.raises(TypeError, match="api_key configure the built-in provider"):
        bettong_nb.agent(provider=Scripted([]), api_key="sk-x")


def test_options_list_matches_the_documented_set():
    for name in ["capabilities", "api_key", "model", "base_url", "max_steps", "system", "approve_fn", "on_event",
                 "temperature", "provider", "messages", "max_tokens", "prices"]:
        assert name in Options.names()


# --- events -----------------------------------------------------------------------------------

def test_events_come_in_order():
    seen = []
    run([[("get_weather", {"city": "x"})], "ok"], capabilities=[weather_cap()], on_event=seen.append)
    kinds = [e.kind for e in seen]
    assert kinds == ["run-started", "model-request", "assistant", "tool-call-started", "tool-call", "model-request",
                     "assistant", "run-finished"]
    assert seen[-1].result.output == "ok" and seen[-1].error is None
    assert seen[2].stop_reason == "tool_use" and seen[2].request.step == 1
    finished = seen[4]
    assert isinstance(finished, events.ToolCallFinished)
    assert (finished.tool, finished.capability, finished.status) == ("get_weather", "weather", "ok")


def test_streamed_runs_deliver_text_deltas():
    seen = []
    result, _ = run(["It is raining in Vilnius today."], stream=True, on_event=seen.append)
    deltas = [e.text for e in seen if isinstance(e, events.TextDelta)]
    assert len(deltas) > 3 and "".join(deltas) == result.output


# --- sync wrapper -----------------------------------------------------------------------------

def test_run_works_inside_a_running_event_loop():
    agent = bettong_nb.agent(provider=Scripted(["inside"]))

    async def cell():
        return agent.run("x").output  # what a notebook cell calling run() does

    assert asyncio.run(cell()) == "inside"


def test_run_keeps_context_variables_of_the_caller(monkeypatch):
    from bettong_nb import secrets

    monkeypatch.setenv("MY_SERVICE_TOKEN", "supersecretvalue123")
    cap = {"id": "s", "tools": [{"name": "leak", "handler": lambda: "token supersecretvalue123"}]}
    hidden = bettong_nb.agent(provider=Scripted([[("leak", {})], "ok"]), capabilities=[cap]).run("x")
    assert hidden.tool_calls[0].result == "token [redacted]" and hidden.redactions == 1
    with secrets.revealed():  # the sync wrapper runs on another thread; the switch must follow
        shown = bettong_nb.agent(provider=Scripted([[("leak", {})], "ok"]), capabilities=[cap]).run("x")
    assert shown.tool_calls[0].result == "token supersecretvalue123"


def test_run_from_many_threads_at_once():
    agent = bettong_nb.agent(provider=Scripted(default="same"))
    outputs = []
    threads = [threading.Thread(target=lambda: outputs.append(agent.run("x").output)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == ["same"] * 8


def test_a_stopping_denial_ends_the_run_after_this_round():
    calls = []
    model = Scripted([[("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})], "never asked"])
    verdicts = iter([True, Deny("enough", stop=True)])
    result = bettong_nb.agent(provider=model, capabilities=[weather_cap(calls)],
                              approve_fn=lambda req: next(verdicts)).run("go")
    assert calls == ["A"] and len(model.requests) == 1
    assert (result.done, result.output, result.stop_reason, result.reason) == (False, None, "stopped", "enough")
    assert [b["content"] for b in result.messages[-1]["content"]] == [
        "raining in A", "ERROR: get_weather was not allowed: enough"]


def test_tool_duration_leaves_out_the_time_spent_deciding():
    import time as clock

    def slow_person(req):
        clock.sleep(0.2)
        return True

    result, _ = run([[("get_weather", {"city": "x"})], "ok"], capabilities=[weather_cap()], approve_fn=slow_person)
    assert result.tool_calls[0].duration_s < 0.1


def test_run_result_repr_is_short():
    result, _ = run(["x" * 500])
    text = repr(result)
    assert len(text) < 200 and text.startswith("RunResult(output='xxx") and "1 request" in text


@pytest.mark.parametrize("choice", ["get_weather", "required"])
def test_a_forced_tool_choice_forces_the_first_step_only(choice):
    result, model = run([[("get_weather", {"city": "x"})], "done"], capabilities=[weather_cap()], tool_choice=choice)
    assert [r.tool_choice for r in model.requests] == [choice, "auto"] and result.done


def test_auto_and_none_stay_as_given():
    for choice in ("auto", "none"):
        _, model = run([[("get_weather", {"city": "x"})], "done"], capabilities=[weather_cap()], tool_choice=choice)
        assert [r.tool_choice for r in model.requests] == [choice, choice]


def test_repr_names_capabilities_without_running_their_properties():
    class Lazy:  # like an MCP capability: reading id would start a server
        instructions, tools = None, []

        @property
        def id(self):
            raise AssertionError("repr must not start anything")

        def __repr__(self):
            return "Lazy(stopped)"

    text = repr(bettong_nb.agent(provider=Scripted(["x"]), capabilities=[weather_cap(), Lazy()]))
    assert "capabilities=['weather', 'Lazy(stopped)']" in text


def test_capabilities_secret_values_are_redacted_and_counted():
    class Vault:
        id, instructions = "vault", None

        def __init__(self):
            self.tools = [{"name": "peek", "handler": lambda: "the pin is 48213-zebra-quartz"}]

        def secret_values(self):
            return ["48213-zebra-quartz"]

    result, model = run([[("peek", {})], "ok"], capabilities=[Vault()])
    assert result.tool_calls[0].result == "the pin is [redacted]" and result.redactions == 1
    assert "48213-zebra-quartz" not in str(model.requests[1].messages)


@pytest.mark.parametrize("approve_fn, ran", [
    ({}, True), ({"reason": "r"}, True), ({"allowed": False, "reason": "r"}, False), (lambda r: {}, True),
    (lambda r: {"allowed": False}, False), (True, True), (False, False),
])
def test_approval_answers_match_the_seed(approve_fn, ran):
    calls = []
    hook = approve_fn if callable(approve_fn) or isinstance(approve_fn, bool) else (lambda r, v=approve_fn: v)
    result, _ = run([[("get_weather", {"city": "Vilnius"})], "ok"], capabilities=[weather_cap(calls)],
                    approve_fn=hook)
    assert (calls == ["Vilnius"]) is ran and result.tool_calls[0].status == ("ok" if ran else "denied")


def test_max_steps_none_as_an_override_means_the_default():
    result, model = run([[("get_weather", {"city": "V"})]] * 12, capabilities=[weather_cap()])
    overridden = bettong_nb.agent(provider=Scripted([[("get_weather", {"city": "V"})]] * 12),
                                  capabilities=[weather_cap()]).run("go", max_steps=None)
    assert result.steps == overridden.steps == 10 and overridden.reason == "hit max_steps (10)"


def test_a_refused_answer_is_not_the_answer():
    from bettong_nb.providers import Response

    refusal = Response(content=[{"type": "text", "text": "partial text the model took back"}], stop_reason="refusal",
                       stop_details={"type": "refusal", "category": "cyber", "explanation": "not this"})
    result, _ = run([refusal])
    assert result.output == "" and result.refused() and result.done
    assert result.why() == "the model refused to answer — category: cyber; explanation: not this"
    assert result.answer_text() == "(the model refused to answer — category: cyber; explanation: not this)"
    assert result.stop_details["category"] == "cyber"


def test_a_tool_edited_in_place_between_runs_is_seen():
    """The agent keeps its toolbox from run to run (building every schema again was most of the
    loop's own cost), but only while what it was built from is the same, compared by value."""
    capability = weather_cap()
    spec = capability["tools"][0]
    model = Scripted(["ok"] * 5 + [[("get_weather", {"city": "Oslo"})], "ok"])
    agent = bettong_nb.agent(provider=model, capabilities=[capability])
    agent.run("one")
    agent.run("two")
    assert model.requests[0].tools is model.requests[1].tools  # kept: the provider reuses its JSON too
    spec["description"] = "Weather, now in kelvin."
    agent.run("three")
    assert model.requests[2].tools[0]["description"] == "Weather, now in kelvin."
    spec["parameters"]["city"]["description"] = "A city, in English."  # deep inside, in place
    agent.run("four")
    assert model.requests[3].tools[0]["parameters"]["properties"]["city"]["description"] == "A city, in English."
    capability["tools"].append({"name": "get_time", "handler": lambda: "noon"})
    capability["instructions"] = "Times are local."
    agent.run("five")
    assert [t["name"] for t in model.requests[4].tools] == ["get_weather", "get_time"]
    assert model.requests[4].system[0].text.endswith("Times are local.")
    spec["handler"] = lambda city: "sunny"  # a new handler is a new tool too
    assert agent.run("six").tool_calls[0].result == "sunny"
