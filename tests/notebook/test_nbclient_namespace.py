"""The namespace and python capabilities from %%agent in a real kernel, run by nbclient."""

from __future__ import annotations

import json

from support.notebooks import run_notebook

SETUP = '''
%load_ext bettong_nb
import json
import pandas as pd
import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
df = pd.DataFrame({"city": ["Vilnius", "Riga"], "temp_c": [1.5, 2.0]})
snapshot = df.copy()
model = Scripted([[("list_variables", {}), ("describe_variable", {"name": "df"})], "A table of two cities."])
bot = bettong_nb.agent(provider=model, capabilities=[caps.namespace()])
before = {k: type(v).__name__ for k, v in globals().items() if not k.startswith("_")}
'''

CHECK_NAMESPACE = '''
after = {k: type(v).__name__ for k, v in globals().items() if not k.startswith("_")}
sent = [b["content"] for b in model.requests[1].messages[-1]["content"]]
print(json.dumps({"listing": sent[0], "described": sent[1], "unchanged": df.equals(snapshot),
                  "new_names": sorted(set(after) - set(before) - {"res", "before"}), "output": res.output}))
'''

PYTHON_AGENTS = '''
runner = bettong_nb.agent(provider=Scripted([[("run_python", {"code": "hacked = True"})], "done"]),
                          capabilities=[caps.python()])
trusted = bettong_nb.agent(provider=Scripted([[("run_python", {"code": "opted_in = 6 * 7\\nopted_in"})], "done"]),
                           capabilities=[caps.python(require_approval=False)])
'''

CHECK_PYTHON = '''
print(json.dumps({"status": denied.tool_calls[0].status, "told": denied.tool_calls[0].result,
                  "hacked": "hacked" in globals(), "opted_in": globals().get("opted_in"),
                  "trusted_result": ran.tool_calls[0].result}))
'''


def test_namespace_and_python_capabilities_in_a_kernel(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    nb = run_notebook([SETUP, "%%agent bot --no-stream -o res\nWhat is in df?", CHECK_NAMESPACE, PYTHON_AGENTS,
                       "%%agent runner --no-stream -o denied\nSet a flag.", "%%agent trusted --no-stream -o ran\nCompute.",
                       CHECK_PYTHON], tmp_path, timeout=90)

    seen = json.loads("".join(o.text for o in nb.cells[2].outputs if o.output_type == "stream"))
    assert "df: DataFrame, 2x2" in seen["listing"]
    assert seen["described"].startswith("df: DataFrame 2 rows x 2 columns") and "Vilnius" in seen["described"]
    assert seen["unchanged"] is True and seen["new_names"] == [] and seen["output"] == "A table of two cities."

    ran = json.loads("".join(o.text for o in nb.cells[6].outputs if o.output_type == "stream"))
    assert ran["status"] == "denied" and ran["hacked"] is False
    assert "the headless policy denies tool calls that need approval" in ran["told"]
    assert ran["opted_in"] == 42 and ran["trusted_result"] == "value:\n42"
