"""Runs to display: an agent with an ``echo`` tool, a run whose calls end ok, in an error and
denied, with hostile HTML in its text, and a stand-in for IPython display handles.

    echo_agent(Scripted([...]), stream=True).run("go")
    mixed_run().tool_calls   # ok, error, denied
    recorder = Recorder(); LiveView(show=recorder.show)
"""

from __future__ import annotations

import bettong_nb
from bettong_nb import Deny
from bettong_nb.providers.scripted import Scripted

__all__ = ["EVIL", "echo_agent", "mixed_run", "Recorder"]


EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def echo_agent(model, **options):
    def echo(text: str) -> str:
        """Echo text back."""
        if text == "boom":
            raise ValueError("boom happened")
        return f"echo: {text}"

    return bettong_nb.agent(provider=model, capabilities=[{"id": "echoes", "instructions": None,
                                                            "tools": [bettong_nb.tool(echo)]}], **options)


def mixed_run():
    model = Scripted([
        {"text": "Let me try.", "tool_calls": [("echo", {"text": EVIL}), ("echo", {"text": "boom"}),
                                                ("echo", {"text": "no"})]},
        "All **done**",
    ])
    deny = lambda r: Deny("not that one") if r.args.get("text") == "no" else True  # noqa: E731
    return echo_agent(model, approve_fn=deny, prices={"input": 1, "output": 1}).run(f"Echo {EVIL}")


class Recorder:
    """Stands in for IPython display handles: keeps every bundle each handle showed."""

    def __init__(self):
        self.handles = []

    def show(self, bundle):
        recorder = self

        class Handle:
            def __init__(self):
                self.bundles = [bundle]

            def update(self, new, raw=False):
                assert raw
                self.bundles.append(new)

        handle = Handle()
        recorder.handles.append(handle)
        return handle
