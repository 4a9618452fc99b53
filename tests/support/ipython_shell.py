"""An IPython shell with bettong_nb loaded, and running cells in it.

    from support.ipython_shell import ip, ok, run_cell  # noqa: F401  (ip is a fixture)
    captured = ok(ip, "%%agent bot\\nHello")   # asserts the cell raised nothing
    result, captured = run_cell(ip, "%agent fix bot")
    final(captured)                            # what each display shows at the end
"""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import bettong_nb
from bettong_nb.notebook import magics

__all__ = ["EXTRA_NAMES", "ip", "magics_of", "run_cell", "ok", "tool_agent", "final"]


EXTRA_NAMES = ("bot", "chat", "x", "res", "df", "model", "seen", "_agent_result", "_agent_session", "first")


@pytest.fixture
def ip(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("bettong_nb")
    yield shell
    shell.extension_manager.unload_extension("bettong_nb")
    shell.config.pop("AgentMagics", None)
    for name in EXTRA_NAMES:
        shell.user_ns.pop(name, None)


def magics_of(shell) -> magics.AgentMagics:
    return next(c for c in shell.configurables if isinstance(c, magics.AgentMagics))


def run_cell(shell, cell):
    """Run a cell; return (result, captured stdout)."""
    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, captured


def ok(shell, cell):
    result, captured = run_cell(shell, cell)
    assert result.error_in_exec is None and result.error_before_exec is None, \
        (result.error_in_exec or result.error_before_exec, captured.stdout, captured.stderr)
    return captured


def tool_agent(model, seen=None, **options):
    def note(text: str) -> str:
        """Write a note."""
        if seen is not None:
            seen.append(text)
        return f"noted {text}"

    return bettong_nb.agent(provider=model, capabilities=[{"id": "notes", "instructions": None,
                                                            "tools": [bettong_nb.tool(note)]}], **options)


def final(captured) -> list[dict]:
    """What each display of a cell shows at its end (updates applied), in order."""
    shown: dict = {}
    for output in captured.outputs:
        key = (output.transient or {}).get("display_id") or id(output)
        shown[key] = output.data
    return list(shown.values())
