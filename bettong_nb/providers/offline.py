"""A deterministic offline model: explores with whatever tools it was given, then says what it saw.

It needs no key and no network, so demos, Binder and the CLI's ``--offline`` run anywhere:

    agent = bettong_nb.agent(provider=OfflineModel(), capabilities=[caps.filesystem(root="data")])
    agent.run("What is in here?")   # lists the folder, reads the first file, summarises

Every answer says plainly that it comes from the offline demo model, never a real one.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..core.budget import estimate_tokens
from ..core.provider import Request, Response, stream_by_completing
from ..core.usage import Usage

__all__ = ["OfflineModel", "OFFLINE_NOTICE"]

OFFLINE_NOTICE = ("(offline demo model: no API key is set, so no real model answered. "
                  "Set DEEPSEEK_API_KEY, or pass provider=, for real answers.)")


def _tokens(request: Request) -> int:
    system = "".join(b.text for b in request.system)
    return max(1, estimate_tokens(system, request.messages, request.tools, None))


class OfflineModel:
    """Plays a short, real exploration: list_dir, then read_file on the first file it found
    (or run_shell ``ls`` when only a shell is there), then a summary of the tool results."""

    name = "offline"
    free = True  # no request has a price
    model = "offline-demo"

    async def complete(self, request: Request) -> Response:
        tools = {t["name"] for t in request.tools}
        results = [b for m in request.messages if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        prompt = next((m["content"] for m in request.messages if m["role"] == "user" and isinstance(m["content"], str)), "")
        content = self._next_call(tools, results, prompt) or [{"type": "text", "text": self._answer(request, results)}]
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

    @staticmethod
    def _call(n: int, name: str, args: dict) -> list[dict]:
        return [{"type": "tool_use", "id": f"offline_{n}", "name": name, "input": args}]

    @staticmethod
    def _pick(files: list[str], prompt: str) -> str:
        """A file the prompt names, else the first that is data rather than a README."""
        named = [f for f in files if f.lower() in prompt.lower()]
        data = [f for f in files if not f.lower().startswith("readme")]
        return (named or data or files)[0]

    def _next_call(self, tools: set[str], results: list[dict], request_text: str) -> list[dict] | None:
        if not results:
            if "list_dir" in tools:
                return self._call(0, "list_dir", {"path": "."})
            if "run_shell" in tools:
                return self._call(0, "run_shell", {"command": "ls -la"})
            return None
        if len(results) == 1 and "read_file" in tools and not results[0]["is_error"]:
            files = [line.strip() for line in results[0]["content"].splitlines()
                     if line.strip() and not line.strip().endswith("/") and not line.startswith("(")]
            if files:
                return self._call(1, "read_file", {"path": self._pick(files, request_text)})
        return None

    def _answer(self, request: Request, results: list[dict]) -> str:
        if not results:
            return f"I have no tools, so I can only echo your request. {OFFLINE_NOTICE}"
        lines = ["Here is what I found with my tools:"]
        for result in results:
            body = result["content"].strip().splitlines()
            preview = "; ".join(body[:3]) + (f" … ({len(body)} lines)" if len(body) > 3 else "")
            lines.append(f"- {preview}")
        lines.append(OFFLINE_NOTICE)
        return "\n".join(lines)
