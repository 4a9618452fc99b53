"""What the tests stand on: real servers on 127.0.0.1 (one module per wire format), what the
model reads back from a tool, notebooks run in real kernels, and JupyterLab in Chromium.

    from support.servers import LoopbackServer, ChatScript, RawServer, FaultyServer, free_port
    from support.wire import WIRES, Switchboard, AnthropicScript, OllamaScript
    from support.tools import model_reads
    from support.notebooks import run_notebook
    from support.browser import JupyterLab, chromium
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent  # tests/: corpora/, notebooks/, wire/, support/
REPO = TESTS.parent
