"""The offline model's view of a request: the current turn only.

A turn starts at the newest message the person wrote (not a tool result, not the loop's request to
correct a structured answer); what the model did before it, in earlier turns of a session, is
never read, so a follow-up question is answered from its own tool calls.

    turn = Turn.of(request)
    turn.prompt         # the person's text (without what the notebook layer appends to it)
    turn.steps          # [Step(name, args, text, error)] of this turn, in order
    turn.tools          # {name: schema} the request offers
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.provider import Request

__all__ = ["Turn", "Step", "CORRECTION"]

# How the loop opens its request to correct a structured answer (core/structured.Shape.correction):
# that message continues the turn, it does not start one.
CORRECTION = "Your answer does not match the required JSON schema"
_DENIED = re.compile(r"^ERROR: (\S+) was not allowed(?:: (.*))?", re.S)


@dataclass(frozen=True)
class Step:
    """One tool call of this turn and its result."""

    name: str
    args: dict
    text: str
    error: bool

    @property
    def denied(self) -> str | None:
        """``"read_file was not allowed: too big"`` when the person (or a policy) denied the call."""
        match = _DENIED.match(self.text) if self.error else None  # a file may hold these words
        return None if match is None else match.group(0)[len("ERROR: "):].strip()


@dataclass
class Turn:
    prompt: str
    steps: list[Step]
    tools: dict[str, dict]
    format: dict | None = None
    calls_so_far: int = 0  # tool calls in the whole transcript, so each new id is unique
    instructions: str = ""

    @classmethod
    def of(cls, request: Request) -> "Turn":
        messages = request.messages
        start = max((i for i, m in enumerate(messages) if _is_prompt(m)), default=0)
        tools = {t["name"]: t for t in request.tools}
        written = _text(messages[start]["content"]) if messages else ""
        prompt = _persons_words(written, tools)
        uses = {b["id"]: b for m in messages[start + 1:] if m["role"] == "assistant"
                and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"}
        steps = [Step(uses[b["tool_use_id"]]["name"], _args(uses[b["tool_use_id"]]), str(b.get("content") or ""),
                      bool(b.get("is_error")))
                 for m in messages[start + 1:] if m["role"] == "user" and isinstance(m["content"], list)
                 for b in m["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") in uses]
        count = sum(1 for m in messages if isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "tool_use")
        return cls(prompt=prompt, steps=steps, tools=tools, format=request.format,
                   calls_so_far=count,  # a --data cell's instructions come in its prompt, not the system's
                   instructions="\n".join([*(b.text for b in request.system), written[len(prompt):]]))

    def done(self, name: str) -> list[Step]:
        """This turn's calls of ``name``, in order."""
        return [s for s in self.steps if s.name == name]

    def call(self, name: str, args: dict) -> list[dict]:
        """A tool_use block for the next call, its id unique in the transcript."""
        return [{"type": "tool_use", "id": f"offline_{self.calls_so_far}", "name": name, "input": args}]


def _is_prompt(message: dict) -> bool:
    if message["role"] != "user":
        return False
    content = message["content"]
    if isinstance(content, str):
        return not content.startswith(CORRECTION)
    return any(b.get("type") != "tool_result" for b in content)


def _text(content: str | list) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def _persons_words(text: str, tools: dict) -> str:
    """The prompt without what the notebook layer appends to it: a request in parentheses (``(Answer
    as an HTML fragment...)``) and a capability's instructions (``Use query_data to...``, what
    ``%%agent --data`` adds; ``You work in the user's Jupyter notebook: ... (list_cells, read_cell)``,
    what ``--notebook`` adds), whose words would otherwise be read as the person's: they would
    pick the cell that talks most about cells and notebooks, not the one asked about."""
    paragraphs = text.split("\n\n")
    while len(paragraphs) > 1:
        last = paragraphs[-1].strip()
        named = sum(1 for t in tools if re.search(rf"\b{re.escape(t)}\b", last))
        instructions = named >= 2 or any(last.startswith(f"Use {t} ") for t in tools)
        if not (last.startswith("(") and last.endswith(")")) and not instructions:
            break
        paragraphs.pop()
    return "\n\n".join(paragraphs)


def _args(use: dict) -> dict:
    return use["input"] if isinstance(use.get("input"), dict) else {}
