"""A model server that answers at once, or after 30 s when the prompt says "slow": for interrupts.

    model = SlowModel(); with LoopbackServer(model) as server: ...; model.arrived.wait()
"""

from __future__ import annotations

import threading

from support.servers import ChatScript, Reply, chat_message

__all__ = ["SlowModel"]


class SlowModel(ChatScript):
    """An OpenAI-compatible server: prompts containing "slow" wait 30 s, the others answer at once
    ("answer to <prompt>"), streamed when asked."""

    def __init__(self):
        super().__init__([])
        self.arrived = threading.Event()

    def __call__(self, request) -> Reply:
        body = request.json()
        prompt = str(body["messages"][-1]["content"])
        reply = self.streamed(chat_message(f"answer to {prompt}")) if body.get("stream") else \
            Reply.json(chat_message(f"answer to {prompt}"))
        if "slow" in prompt:
            self.arrived.set()
            reply.delay = 30
        return reply
