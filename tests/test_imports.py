"""nbprof's modules import alone, in one direction, and ``import nbprof`` stays light.

Oracles: import-linter (``lint-imports``, the contracts in pyproject.toml's [tool.importlinter]:
the layers of docs/architecture.md and where training frameworks may be imported), grimp's import
graph (the one import-linter reads) for cycles, and a fresh interpreter (does each module import
with no other nbprof module loaded before it? does ``import nbprof`` leave torch, plotly and
pandas unimported?).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nbprof"

# Modules that import a training framework (the user imports them to use it): they import alone
# where the framework is installed, and raise MissingDependencyError where it is not.
ADAPTERS = ("nbprof.huggingface", "nbprof.integrations.huggingface")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def test_the_import_contracts_hold():
    """``lint-imports`` (import-linter, the test extra) keeps every contract of pyproject.toml: the
    layers (a module imports its own layer or lower ones; every module is in one) and training
    frameworks imported in integrations/ only. A broken one prints the import chain that breaks it."""
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "2 kept, 0 broken" in out.stdout, out.stdout[-3000:]


def _graph() -> dict[str, set[str]]:
    """nbprof's import graph as grimp reads it (every import, lazy ones too; not those under
    ``if TYPE_CHECKING:``, which never run): module -> the nbprof modules it imports."""
    import grimp

    graph = grimp.build_graph("nbprof", exclude_type_checking_imports=True, cache_dir=None)
    return {m: {t for t in graph.find_modules_directly_imported_by(m)} for m in graph.modules}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a list of modules, first = last), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    """No module imports one that imports it back, even through others and lazily (a cycle of
    top-level imports fails depending on which module is imported first; a lazy one is the same
    knot, tied later)."""
    graph = _graph()
    assert _cycle(graph) is None, _cycle(graph)


def test_the_graph_sees_the_imports():
    """The checks above are only as good as the graph: it has every module, a known top-level
    import and a known lazy one (inside a function); and the cycle finder finds a cycle."""
    graph = _graph()
    assert set(MODULES) <= set(graph)
    assert "nbprof.collect.collector" in graph["nbprof.run.runner"]  # at the top of the file
    assert "nbprof.model" in graph["nbprof.run.runner"]  # inside a function
    assert "nbprof.integrations.lightning_actions" in graph["nbprof.run.runner"]  # inside a method
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports_alone_and_nbprof_imports_no_heavy_package():
    """In a fresh interpreter: ``import nbprof`` loads neither torch, plotly nor pandas; then each
    module imports with no other nbprof module loaded (nbprof's entries in sys.modules are
    dropped before each, so no module leans on another having been imported first).

    One interpreter rather than one per module: third-party packages stay loaded between
    modules (~1 s each to import again), and they are not what this checks."""
    code = textwrap.dedent(
        f"""
        import importlib, json, sys, traceback
        import nbprof
        heavy = sorted(m for m in ("torch", "plotly", "pandas") if m in sys.modules)
        failed = {{}}
        for name in {MODULES!r}:
            for loaded in [m for m in sys.modules if m == "nbprof" or m.startswith("nbprof.")]:
                del sys.modules[loaded]
            try:
                importlib.import_module(name)
            except BaseException as e:
                # a framework adapter where its framework is not installed: its one-line error
                if not (type(e).__name__ == "MissingDependencyError" and name in {ADAPTERS!r}):
                    failed[name] = traceback.format_exc(limit=-3)
        print(json.dumps({{"heavy": heavy, "failed": failed, "from": nbprof.__file__}}))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(report["from"]).resolve() == PACKAGE / "__init__.py"
    assert report["heavy"] == []
    assert report["failed"] == {}, "\n".join(report["failed"].values())


FRAMEWORKS = ("transformers", "accelerate", "lightning", "pytorch_lightning")


def test_frameworks_are_imported_only_by_their_adapters():
    """nbprof imports no training framework unless the user does: not on ``import nbprof`` or
    ``%load_ext nbprof``, not for a ``%%torchprof`` / ``%%cprofile`` cell (which look for
    Lightning's profiler classes), ``from_profiler``, ``trace_handler``, ``load_trace`` or
    ``import nbprof.lightning``. Importing an adapter (``nbprof.huggingface``) is the user
    asking for its framework. A fresh interpreter, a real IPython shell."""
    code = textwrap.dedent(
        f"""
        import json, sys
        frameworks = {FRAMEWORKS!r}
        seen = {{}}
        import nbprof
        seen["import nbprof"] = [m for m in frameworks if m in sys.modules]
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        seen["load_ext"] = [m for m in frameworks if m in sys.modules]
        cells = ["%%cprofile -q\\nsorted(range(9))", "%%torchprof -q -o p\\nimport torch\\ntorch.ones(3).sum()",
                 "import torch.profiler\\nwith torch.profiler.profile() as prof:\\n    torch.ones(3).sum()\\n"
                 "q = nbprof.from_profiler(prof)\\nh = nbprof.trace_handler(show=False)\\n"
                 "p.save(sys.argv[1])\\nr = nbprof.load_trace(sys.argv[1])"]
        ip.run_cell("import nbprof, sys")
        for cell in cells:
            r = ip.run_cell(cell)
            assert r.error_in_exec is None, r.error_in_exec
        seen["profiles"] = [m for m in frameworks if m in sys.modules]
        import nbprof.lightning  # its Profiler class is made from the Lightning the user imported
        seen["nbprof.lightning"] = [m for m in frameworks if m in sys.modules]
        import nbprof.huggingface
        seen["nbprof.huggingface"] = "transformers" in sys.modules
        print(json.dumps(seen))
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run([sys.executable, "-c", code, f"{folder}/t.json"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    if "needs Hugging Face transformers" in out.stderr:
        import pytest

        pytest.skip("transformers is not installed here")
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"import nbprof": [], "load_ext": [], "profiles": [], "nbprof.lightning": [],
                    "nbprof.huggingface": True}
