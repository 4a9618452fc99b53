"""W9: how long making a long answer safe for the browser takes (``python -m bench.bench_sanitize``).

Workload: a 46 KB Markdown answer (headings, emphasis, code spans, links, lists, fenced code,
tables), rendered by ``markdown_html`` (mistune, then the nh3 allow-list pass), and the same
answer as HTML through ``html_answer`` (the allow-list pass alone). Floor: ``html.escape`` of the
answer, the least work that makes text safe to show, measured in the same run. And ``clean_text``
on 1 MB of clean text (ASCII, accented), which it hands back after one check.
"""

from __future__ import annotations

import html
import json

from bettong_nb.safety.sanitize import clean_text, html_answer, markdown_html

from .common import row, sample

__all__ = ["measure", "ANSWER"]

_SECTION = ("## Heading\n\nSome *text* with `code`, a [link](https://ok.example/) and a list:\n\n"
          "- one\n- two\n\n```python\nprint('x')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n")
ANSWER = _SECTION * (46_000 // len(_SECTION) + 1)


def measure(repeat: int = 30) -> list[dict]:
    as_html = markdown_html(ANSWER)
    floor, _ = sample(lambda: html.escape(ANSWER), repeat)
    md_wall, md_cpu = sample(lambda: markdown_html(ANSWER), repeat)
    html_wall, html_cpu = sample(lambda: html_answer(as_html), repeat)
    return [
        row(f"W9 markdown_html of a {len(ANSWER) // 1000} KB answer", md_wall, md_cpu, floor=floor, target=200,
            target_kind="ms"),
        row(f"W9 html_answer of the same answer as HTML ({len(as_html) // 1000} KB)", html_wall, html_cpu,
            floor=floor, target=50, target_kind="ms"),
        *(row(f"W9 clean_text of 1 MB of clean {kind} text", *sample(lambda: clean_text(text), repeat),
              target=target, target_kind="ms")
          for kind, text, target in (("ASCII", "x" * 1_000_000, 0.5), ("accented", "é" * 500_000, 5))),
    ]


if __name__ == "__main__":
    for result in measure():
        print(json.dumps(result))
