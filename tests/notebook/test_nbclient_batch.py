"""Batches in a real kernel: agent.map and await agent.amap show one progress widget each (the
bar %load_ext installs); map_frame fills a column; a session budget stops a turn."""

from __future__ import annotations

import json
import re

from nbconvert import HTMLExporter

from support.notebooks import WIDGET, run_notebook

SETUP = '''
%load_ext bettong_nb
import json
import pandas as pd
import bettong_nb
from bettong_nb.providers import Response

def echo(request):
    return Response(content=[{"type": "text", "text": "label:" + request.messages[-1]["content"]}],
                    usage=bettong_nb.Usage(requests=1, prompt_tokens=480, completion_tokens=2))

bot = bettong_nb.agent(provider=echo)
'''


def test_batches_and_budgets_in_a_notebook(tmp_path):
    nb = run_notebook([
        SETUP,
        "results = bot.map(['a', 'b', 'c'], concurrency=2)",
        "again = await bot.amap(['d', 'e'])",
        "df = bot.map_frame(pd.DataFrame({'text': ['x', 'y']}), prompt='{text}!', output='label')",
        "chat = bot.session(token_budget=1000)\nturns = [chat.run(p) for p in ('one', 'two', 'three')]",
        "print(json.dumps({'map': [r.output for r in results], 'amap': [r.output for r in again], "
        "'frame': list(df['label']), 'rows': len(df.attrs['usage_frame']), "
        "'turns': [t.done for t in turns], 'why': turns[-1].reason}))",
    ], tmp_path)
    for index, line in ((1, "3/3 · 3 done · 0 failed · 1446 tokens"), (2, "2/2 · 2 done · 0 failed · 964 tokens"),
                        (3, "2/2 · 2 done · 0 failed · 964 tokens")):
        # one progress bar per batch, in the batch's own cell, replaced by its last line when it ends:
        # no widget is left for a saved notebook to lose
        (shown,) = [o for o in nb.cells[index].outputs if o.output_type == "display_data"]
        timing = r" · [\d.]+ m?s · [\d.]+/s"  # how long the batch took and its rate, no estimate left
        assert WIDGET not in shown.data and re.fullmatch(re.escape(line) + timing, shown.data["text/plain"]), \
            nb.cells[index].outputs
        assert re.search(">" + re.escape(line) + timing + "</div>$", shown.data["text/html"])
    exported = HTMLExporter().from_notebook_node(nb)[0]  # the saved notebook, as nbconvert --to html shows it
    assert re.search(r'<div class="bettong-progress" style="font-size:13px">3/3 · 3 done · 0 failed · 1446 tokens'
                     r' · [\d.]+ m?s · [\d.]+/s</div>', exported)
    seen = json.loads("".join(o.text for o in nb.cells[5].outputs if o.output_type == "stream"))
    assert seen["map"] == ["label:a", "label:b", "label:c"] and seen["amap"] == ["label:d", "label:e"]
    assert seen["frame"] == ["label:x!", "label:y!"] and seen["rows"] == 2
    assert seen["turns"] == [True, True, False] and "session token budget of 1000" in seen["why"]
