"""The layers hold: every import of the package, at module level or inside a function, runs down
the layers, and the core runs without IPython.

The folders are the layers (see bettong_nb/__init__.py); each package states what it may import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "bettong_nb"

# What each part of the package may import, besides itself. `__init__`/`__main__` are the front
# door and may import anything.
BELOW = {
    "safety": set(),
    "edn": set(),
    "errors": {"safety"},
    "http": {"safety", "errors"},
    "core": {"safety", "errors", "http"},
    "providers": {"safety", "errors", "http", "core"},
    "capabilities": {"safety", "errors", "http", "core", "edn"},
    "records": {"safety", "errors", "http", "core"},
    "batches": {"safety", "errors", "http", "core"},
    "presets": {"safety", "errors", "http", "core", "providers", "capabilities"},
    "notebook": {"safety", "errors", "http", "core", "providers", "capabilities", "records", "batches", "presets",
                 "edn"},
    "cli": {"safety", "errors", "http", "core", "providers", "capabilities", "records", "batches", "presets"},
}
# The loop's own modules: a provider or a capability uses the core's public pieces (the seam,
# the capability protocol, approvals, events...), never these.
LOOP = {"bettong_nb.core.agent", "bettong_nb.core.session"}
UPPER_THIRD_PARTY = ("IPython", "ipywidgets", "traitlets", "ipykernel", "comm")


def part(module: str) -> str:
    """The layer a module belongs to: its first folder under the package (or its own name)."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 or parts[1] == "__main__" else parts[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """Every import in the file, at module level, inside functions or for annotations only
    (under ``if TYPE_CHECKING:``: a reader follows those too), as absolute names."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
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
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
            # importlib.import_module(".records.saving", __name__) is an import too
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                name = node.args[0].value
                found.append((node.lineno, "bettong_nb" + name if name.startswith(".") else name))
    return found


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir()


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        here = part(source)
        for line, target in imports(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {target}"
            if target.startswith(UPPER_THIRD_PARTY) and here not in ("notebook", "__init__"):
                found.append(f"{where} (IPython, widgets and comms belong to the notebook layer)")
            if not target.startswith("bettong_nb.") or here == "__init__":
                if target == "bettong_nb" and here != "__init__":
                    found.append(f"{where} (the package's front door sits on top)")
                continue
            there = part(target)
            if there != here and there not in BELOW[here]:
                found.append(f"{where} ({here} may import only {', '.join(sorted(BELOW[here])) or 'nothing'})")
            elif here in ("providers", "capabilities") and target in LOOP:
                found.append(f"{where} (the loop's internals)")
    return found


def cycles() -> list[list[str]]:
    """Circles in the module graph (imports inside functions included), as lists of modules."""
    graph: dict[str, set[str]] = {}
    known = {module_name(path) for path in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        targets = set()
        for _, target in imports(path):
            while target and target not in known and "." in target:
                target = target.rsplit(".", 1)[0]  # `pkg.mod.name` is pkg.mod
            if target in known and target != module_name(path):
                targets.add(target)
        graph[module_name(path)] = targets
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    assert cycles() == []


def test_imports_only_run_down_the_layers():
    assert violations() == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    # the check itself can fail: a core module importing the notebook is reported
    fake = PACKAGE / "core" / "_layer_probe_tmp.py"
    fake.write_text("def f():\n    from ..notebook import display\n    import IPython\n"
                    "    from ..records import saving\n")
    try:
        found = "\n".join(violations())
    finally:
        fake.unlink()
    assert "bettong_nb.core._layer_probe_tmp imports bettong_nb.notebook" in found
    assert "bettong_nb.core._layer_probe_tmp imports bettong_nb.records.saving" in found
    assert "imports IPython" in found


def test_the_checker_sees_a_circle_through_a_function_level_import():
    fake_a, fake_b = PACKAGE / "core" / "_probe_a.py", PACKAGE / "core" / "_probe_b.py"
    fake_a.write_text("from . import _probe_b\n")
    fake_b.write_text("def f():\n    from . import _probe_a\n")
    try:
        found = cycles()
    finally:
        fake_a.unlink()
        fake_b.unlink()
    assert ["bettong_nb.core._probe_a", "bettong_nb.core._probe_b"] in found


CORE_RUN = r'''
import sys
import bettong_nb
from bettong_nb import capabilities as caps
from bettong_nb.providers.scripted import Scripted
import bettong_nb.core.agent, bettong_nb.core.session, bettong_nb.batches.local, bettong_nb.core.capability
import bettong_nb.core.approvals, bettong_nb.core.events, bettong_nb.core.usage, bettong_nb.safety.secrets
import bettong_nb.core.options, bettong_nb.core.frames, bettong_nb.core.results, bettong_nb.core.provider
import bettong_nb.http.client, bettong_nb.records.terminal, bettong_nb.records.saving, bettong_nb.records.export

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
