"""The command line: ``python -m bettong_nb "task" [--root DIR] [--shell] [--offline] ...``.

Prints the answer on stdout, each tool call and the usage summary on stderr. Exits 0 when the
agent finished, 1 when it stopped early, 2 with a one-line message when it failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .safety.sanitize import terminal_text
from .records.terminal import TextView

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bettong_nb", description="Run one task with an agent.")
    parser.add_argument("task", nargs="+", help="what to do (all words are joined)")
    parser.add_argument("--root", help="give the agent a filesystem rooted here")
    parser.add_argument("--writable", action="store_true", help="let it write and delete files under --root")
    parser.add_argument("--shell", action="store_true", help="give it a bash shell (starting in --root)")
    parser.add_argument("--model", help="model name (default deepseek-v4-flash)")
    parser.add_argument("--base-url", help="OpenAI-compatible API root, /v1 included where the server has one")
    parser.add_argument("--max-steps", type=int, default=10, help="model calls before giving up (default 10)")
    parser.add_argument("--offline", action="store_true", help="use the offline demo model: no key, no network")
    parser.add_argument("--stream", action="store_true", help="print the answer as it arrives")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    task = " ".join(args.task).strip()
    if not task:
        print('usage: python -m bettong_nb "<task>"', file=sys.stderr)
        return 2
    from . import capabilities as caps
    from .errors import ServiceError
    from .presets import deepseek, offline

    capabilities = []
    if args.root or args.writable:
        capabilities.append(caps.filesystem(root=args.root, writable=args.writable))
    if args.shell:
        capabilities.append(caps.shell(root=args.root))
    view = TextView(stream=args.stream, notes=sys.stderr)
    options = dict(capabilities=capabilities, max_steps=args.max_steps, on_event=view, stream=args.stream)
    try:
        if args.offline:
            runner = offline(**options)
        else:
            runner = deepseek(**options, model=args.model, base_url=args.base_url)
        result = runner.run(task)
    except (ServiceError, TypeError, ValueError, OSError) as exc:
        print(terminal_text(f"error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    view.finish(result)
    return 0 if result.done else 1
