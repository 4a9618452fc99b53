"""The layers hold: imports only run downwards, and the core runs without IPython.

Layers, bottom up (see bettong_nb/__init__.py): the core; providers/ and capabilities/ beside
each other; presets; notebook/ and cli; the package's own __init__ and __main__.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bettong_nb"

# The loop's own modules: a provider or a capability uses the core's public pieces (the seam,
# the capability protocol, approvals, events, secrets, http...), never these.
LOOP = {"bettong_nb.agent", "bettong_nb.session", "bettong_nb.batch"}
UPPER_THIRD_PARTY = ("IPython", "ipywidgets", "traitlets", "ipykernel")


def layer(module: str) -> int:
    parts = module.split(".")
    if module in ("bettong_nb", "bettong_nb.__main__"):
        return 4
    if parts[1] in ("notebook", "cli"):
        return 3
    if parts[1] == "presets":
        return 2
    if parts[1] in ("providers", "capabilities"):
        return 1
    return 0


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """Every import in the file, at module level or inside functions, as absolute names."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            # `from . import events` names a module; `from .agent import X` names one of agent's
            modules = [f"{target}.{alias.name}" for alias in node.names if _is_module(f"{target}.{alias.name}")]
            found += [(node.lineno, name) for name in modules] if modules else [(node.lineno, target)]
    return found


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir()


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for line, target in imports(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {target}"
            if target.startswith(UPPER_THIRD_PARTY) and layer(source) < 3:
                found.append(f"{where} (IPython and widgets belong to the notebook layer)")
            if not target.startswith("bettong_nb.") or target == "bettong_nb":
                if target == "bettong_nb" and layer(source) < 4:
                    found.append(f"{where} (the package's front door sits on top)")
                continue
            if layer(target) > layer(source):
                found.append(f"{where} (runs up the layers)")
            elif layer(source) == 1 and target in LOOP:
                found.append(f"{where} (the loop's internals)")
            elif layer(source) == 1 and layer(target) == 1 and source.split(".")[1] != target.split(".")[1]:
                found.append(f"{where} (providers and capabilities stand beside each other)")
    return found


def test_imports_only_run_down_the_layers():
    assert violations() == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    # the check itself can fail: a core module importing the notebook is reported
    fake = PACKAGE / "_layer_probe_tmp.py"
    fake.write_text("def f():\n    from .notebook import display\n    import IPython\n")
    try:
        found = "\n".join(violations())
    finally:
        fake.unlink()
    assert "bettong_nb._layer_probe_tmp imports bettong_nb.notebook" in found
    assert "imports IPython" in found


CORE_RUN = r'''
import sys
import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
import bettong_nb.agent, bettong_nb.session, bettong_nb.batch, bettong_nb.capability, bettong_nb.approvals
import bettong_nb.events, bettong_nb.usage, bettong_nb.secrets, bettong_nb.options, bettong_nb.frames
import bettong_nb.results, bettong_nb.provider, bettong_nb.http, bettong_nb.terminal

def weather(city: str) -> str:
    """Weather."""
    return "rain in " + city

tool = bettong_nb.tool(weather)
cap = {"id": "w", "tools": [tool]}
model = Scripted([[("weather", {"city": "Oslo"})], "It rains.", "Again.", "x", "y"])
agent = bettong_nb.agent(provider=model, capabilities=[cap], prices={"input": 1, "output": 1})
result = agent.run("go")
assert result.output == "It rains." and result.tool_calls[0].result == "rain in Oslo"
chat = agent.session()
chat.run("more")
batch = agent.map(["a", "b"], progress=False)
assert [r.output for r in batch] == ["x", "y"]
heavy = [m for m in ("IPython", "ipywidgets", "bettong_nb.notebook", "pandas") if m in sys.modules]
assert heavy == [], heavy
frames = [result.usage_frame(), result.tool_frame(), chat.usage_frame(), batch.usage_frame()]
assert "pandas" in sys.modules  # only once a frame was asked for
heavy = [m for m in ("IPython", "ipywidgets", "bettong_nb.notebook") if m in sys.modules]
assert heavy == [], heavy
print("ok")
'''


def test_the_core_runs_without_ipython_or_the_notebook():
    out = subprocess.run([sys.executable, "-c", CORE_RUN], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("module", ["bettong_nb", "bettong_nb.capabilities", "bettong_nb.providers"])
def test_importing_the_package_stays_light(module):
    code = (f"import sys, {module}; print(sorted(m for m in ('IPython', 'ipywidgets', 'pandas', 'duckdb', 'mcp', "
            "'dask', 'pydantic', 'genai_prices', 'PIL', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
