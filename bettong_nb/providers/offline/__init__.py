"""The offline demo model: no key, no network, no randomness. A demonstration of the tools, not a
model: it reads the current turn's prompt and tools, uses them in a sensible order, and answers from
what they returned in this turn, quoting the rows, lines and numbers it found.

    agent = bettong_nb.offline(capabilities=[caps.duckdb(root="data")])
    agent.run("Which planet has the most moons?")
    # describe_data('moons.csv'), then query_data("SELECT planet, count(*) AS moons FROM 'moons.csv'
    #   GROUP BY planet ORDER BY moons DESC, planet"), then the table and its first row

What it does with each capability (see :mod:`._plans`): SQL (describe, then one query built from
the prompt's words and the columns), files (list, then the file whose name or text matches),
notebook cells and variables (list, then read the one named), EDN (the file named), search (the
prompt as the query), the shell (``ls -la``, then ``head`` of a file named), Python (the code the
prompt holds), and any other tool
(your ``@tool`` functions, MCP tools): the one whose name or description matches, called with
arguments from its schema, or a sentence saying what it would need.

It says plainly what it cannot do: a denied call ends the turn with ``read_file was not allowed:
<reason>``; a request to explain or fix an error (``%agent explain``, ``%agent fix``, a traceback in
the prompt) gets one line saying a real model is needed and how to set one. With ``output_type=``
it answers JSON built from the tool results (see :mod:`._values`). Usage is estimated from
characters, 4 to a token, and everything before the newest message counts as cached.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ...core.budget import estimate_tokens
from ...core.provider import Request, Response, stream_by_completing
from ...core.usage import Usage
from ._plans import choose
from ._sql import parse_table
from ._turn import Turn
from ._values import value_for
from ._words import first_line

__all__ = ["OfflineModel", "OFFLINE_NOTICE", "REAL_MODEL"]

OFFLINE_NOTICE = ("(offline demo model: a demonstration of the tools, not a real model. For real answers use one, "
                  "such as bettong_nb.deepseek() with DEEPSEEK_API_KEY.)")
REAL_MODEL = ("set one with `bettong_nb.deepseek()` and DEEPSEEK_API_KEY, `bettong_nb.openai(base_url=...)`, "
              "or in a notebook `%config AgentMagics.provider = 'deepseek'` (and `%config AgentMagics.model`)")

# The last line of a traceback: what went wrong (``NameError: name 'x' is not defined``).
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt)\b(?::.*)?)$", re.M)
_EXPLAIN = re.compile(r"\b(explain|fix|fixed|wrong|why|fails?|failing|failed|broken|raised|debug)\b", re.I)


def _tokens(request: Request) -> int:
    system = "".join(b.text for b in request.system)
    return max(1, estimate_tokens(system, request.messages, request.tools, None))


def _explaining(prompt: str) -> str | None:
    """The error a prompt asks to explain or fix (its traceback's last line), or None."""
    errors = _ERROR_LINE.findall(prompt)
    if not errors or not (_EXPLAIN.search(prompt) or "Traceback" in prompt):
        return None
    return errors[-1].strip()


class OfflineModel:
    """The offline demo model (see the module docstring). Deterministic: the same request gets the
    same response."""

    name = "offline"
    free = True  # no request has a price
    model = "offline-demo"

    async def complete(self, request: Request) -> Response:
        turn = Turn.of(request)
        content = self._next(turn)
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        prompt_tokens = _tokens(request)
        completion = max(1, len(json.dumps(content)) // 4)
        # Everything before the newest message was already sent once: count it as cached, the way a
        # provider with prompt caching would, so the demo's usage frames show the cache effect.
        cached = min(prompt_tokens, _tokens(Request(messages=request.messages[:-1], system=request.system,
                                             tools=request.tools))) if len(request.messages) > 1 else 0
        usage = Usage(requests=1, prompt_tokens=prompt_tokens, completion_tokens=completion,
                      total_tokens=prompt_tokens + completion, cache_hit_tokens=cached,
                      cache_miss_tokens=prompt_tokens - cached)
        return Response(content=content, stop_reason=stop, model=self.model, usage=usage)

    async def stream(self, request: Request, on_event: Callable[[Any], Any]) -> Response:
        return await stream_by_completing(self, request, on_event)

    def _next(self, turn: Turn) -> list[dict]:
        error = _explaining(turn.prompt)
        if error is not None:
            return [{"type": "text", "text": self._structured(turn) if turn.format else
                     f"`{error}`: explaining or fixing an error needs a real model, and this is the offline demo "
                     f"model, which can only run tools; {REAL_MODEL}."}]
        plan = choose(turn)
        stopped = any(s.denied for s in turn.steps)
        call = None if plan is None or stopped else plan.next_call(turn)
        if call is not None:
            return call
        return [{"type": "text", "text": self._structured(turn) if turn.format else self._answer(turn, plan)}]

    @staticmethod
    def _answer(turn: Turn, plan: Any) -> str:
        lines = [s.denied + "." for s in turn.steps if s.denied]
        lines += [f"{s.name} failed: {s.text.removeprefix('ERROR: ')}" for s in turn.steps if s.error and not s.denied]
        if not turn.tools:
            lines.append(f"I have no tools in this run, so I cannot look anything up for "
                         f"“{first_line(turn.prompt, 80)}”: give the agent capabilities, or a real model ({REAL_MODEL}).")
        elif plan is None:
            names = ", ".join(f"`{t}`" for t in turn.tools)
            lines.append(f"None of my tools ({names}) fits the words of your request, so I did not call any; "
                         f"a real model would choose better ({REAL_MODEL}).")
        else:
            lines += plan.answer(turn)
        if not lines:
            lines.append("I called no tool for this request.")
        lines.append(OFFLINE_NOTICE)
        return "\n\n".join(lines)

    @staticmethod
    def _structured(turn: Turn) -> str:
        rows = []
        for step in turn.steps:
            if step.name == "query_data" and not step.error:
                names, cells, _ = parse_table(step.text)
                rows = [dict(zip(names, row)) for row in cells] or rows
        texts = [s.text for s in turn.steps if not s.error]
        value = value_for(turn.format, rows=rows, texts=texts, prompt=turn.prompt)
        return json.dumps(value, ensure_ascii=False)
