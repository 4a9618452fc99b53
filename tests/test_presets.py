"""The presets' signatures: every option at the call, with its type and default, the same as
:class:`~bettong_nb.core.options.Options` says, in ``help()``, ``inspect`` and IPython's inspector
(a notebook's shift-tab); an option only another provider reads is refused, not ignored."""

from __future__ import annotations

import dataclasses
import inspect
import pydoc
import re
import typing

import pytest
from IPython.core.interactiveshell import InteractiveShell

import bettong_nb
from bettong_nb import OptionError
from bettong_nb.core.options import AS_SET, Options

FIELDS = {f.name: f for f in dataclasses.fields(Options)}
HINTS = typing.get_type_hints(Options)
ANTHROPIC_ONLY = {"effort", "thinking_display"}
OLLAMA_ONLY = {"num_ctx", "keep_alive"}
BUILT_PROVIDER = {"provider", "api_key", "base_url", "timeout", "max_retries"}  # offline() has its own model

EXPECTED = {  # preset: (its own leading parameters, the options it takes)
    "agent": (["provider"], set(FIELDS) - {"provider"}),
    "deepseek": ([], set(FIELDS) - ANTHROPIC_ONLY - OLLAMA_ONLY),
    "openai": ([], set(FIELDS) - ANTHROPIC_ONLY - OLLAMA_ONLY),
    "anthropic": ([], set(FIELDS) - OLLAMA_ONLY),
    "ollama": ([], set(FIELDS) - ANTHROPIC_ONLY),
    "offline": (["root"], set(FIELDS) - ANTHROPIC_ONLY - OLLAMA_ONLY - BUILT_PROVIDER),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_preset_lists_its_options_as_options_define_them(name):
    own, options = EXPECTED[name]
    parameters = inspect.signature(getattr(bettong_nb, name)).parameters
    assert list(parameters)[:len(own)] == own
    listed = {n: p for n, p in parameters.items() if n not in own}
    assert set(listed) == options
    assert [n for n in listed] == [n for n in FIELDS if n in options]  # the record's order
    for option, parameter in listed.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, option
        assert parameter.default == FIELDS[option].default, option
        assert parameter.annotation == HINTS[option], option
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_help_shows_every_option_with_its_default():
    text = pydoc.render_doc(bettong_nb.deepseek, renderer=pydoc.plaintext)
    for shown in ("capabilities: tuple = ()", "max_steps: int = 10", "approve_fn: Any = None",
                  "model: str | None = None", "stream: bool = False", "image_max_side: int = 1568",
                  "output_retries: int = 2", "An agent on DeepSeek"):
        assert shown in text
    assert "**options" not in text and "effort" not in text
    assert "effort: str | None = None" in pydoc.render_doc(bettong_nb.anthropic, renderer=pydoc.plaintext)


def test_ipython_inspector_shows_them_too():
    shell = InteractiveShell.instance()
    shell.user_ns["bettong_nb"] = bettong_nb
    try:
        info = shell.object_inspect("bettong_nb.ollama")
        assert "num_ctx: int | None = None" in info["definition"]
        assert "max_steps: int = 10" in info["definition"]
        # what Jupyter's shift-tab asks the kernel for
        shown = re.sub(r"\x1b\[[0-9;]*m", "", shell.object_inspect_mime("bettong_nb.deepseek")["text/plain"])
        assert "max_steps: int = 10" in shown and "approve_fn: Any = None" in shown
    finally:
        shell.user_ns.pop("bettong_nb", None)


def test_per_call_options_default_to_what_the_agent_has():
    agent = bettong_nb.offline(max_steps=3)
    for method in (agent.run, agent.arun, agent.map, agent.session().run, agent.session().arun):
        parameters = inspect.signature(method).parameters
        assert parameters["max_steps"].default is AS_SET and parameters["max_steps"].annotation is int
        assert set(FIELDS) - {"messages"} <= set(parameters)
    assert "messages" not in inspect.signature(agent.session().run).parameters  # a session keeps its own
    assert "max_steps: int = <as set>" in pydoc.render_doc(agent.run, renderer=pydoc.plaintext)
    assert set(FIELDS) <= set(inspect.signature(bettong_nb.ModelAgent).parameters)
    # passing the shown default keeps the agent's value
    assert agent.options.merged({"max_steps": AS_SET, "model": "m"}).max_steps == 3


@pytest.mark.parametrize("preset, option, value", [
    ("deepseek", "effort", "high"), ("openai", "num_ctx", 4096), ("offline", "keep_alive", "5m"),
    ("ollama", "thinking_display", "summarized"), ("anthropic", "keep_alive", -1),
])
def test_an_option_only_another_provider_reads_is_refused(preset, option, value):
    with pytest.raises(OptionError, match=f"{preset}\\(\\) does not take {option}: {option} is an option of"):
        getattr(bettong_nb, preset)(**{option: value})


def test_each_preset_takes_its_own_and_refuses_the_unknown():
    assert bettong_nb.anthropic(effort="high", thinking_display="summarized").options.effort == "high"
    assert bettong_nb.ollama(num_ctx=8192, keep_alive="5m").options.num_ctx == 8192
    for preset in ("agent", "deepseek", "openai", "anthropic", "ollama", "offline"):
        with pytest.raises(OptionError, match="Unknown agent option: max_step\\b"):
            getattr(bettong_nb, preset)(max_step=3)
        with pytest.raises(OptionError, match="^max_steps must be a whole number"):
            getattr(bettong_nb, preset)(max_steps="ten")
    with pytest.raises(OptionError, match="Unknown override option: temprature"):
        bettong_nb.offline().run("hi", temprature=0)
    with pytest.raises(OptionError, match="messages= is for a single run"):
        bettong_nb.offline().session().run("hi", messages=[])
