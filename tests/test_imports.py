"""nbprof's modules import alone, in one direction, and ``import nbprof`` stays light.

Oracles: a fresh interpreter (does each module import with no other nbprof module loaded
before it?) and the modules' own source (the import graph read from their AST).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nbprof"

# The layers, lowest first. A module imports only from its own layer or lower ones, at the top
# of the file or inside a function (a lazy import is still a dependency: it only moves the
# moment of the import). This is the one-way flow collect -> events table -> analysis -> views
# -> results -> runner -> front ends of docs/architecture.md, read as imports: the collectors
# fill the events table, so they import its schema (events) and sit above it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("nbprof.errors", "nbprof.format", "nbprof.meta", "nbprof.settings", "nbprof.system")),
    ("events table", ("nbprof.events",)),
    ("collect", ("nbprof.collect",)),
    ("analysis", ("nbprof.analysis",)),
    ("views", ("nbprof.views",)),
    ("results", ("nbprof.export", "nbprof.model", "nbprof.cluster", "nbprof.cluster_timeline", "nbprof.loading",
                 "nbprof.comparison", "nbprof.snapshot")),
    ("runner", ("nbprof.flags", "nbprof.runner", "nbprof.profilers")),
    ("front ends", ("nbprof._cell", "nbprof.magics", "nbprof.extension", "nbprof.cli", "nbprof.widgets",
                    "nbprof.__main__", "nbprof", "nbprof.huggingface", "nbprof.lightning")),
]

# Modules that import a training framework (the user imports them to use it): they import alone
# where the framework is installed, and raise MissingDependencyError where it is not.
ADAPTERS = ("nbprof.huggingface",)

# Known exceptions, each with the reason, to be emptied rather than grown.
EXPECTED_TO_BE_FIXED: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported nbprof module, at module level?) for each import in ``module``'s source.

    ``from . import x`` and ``from .pkg import name`` count as importing the module ``x`` /
    ``pkg.name`` where that is a module, else the package. Imports under ``if TYPE_CHECKING:``
    are left out: they never run."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base == "nbprof" or base.startswith("nbprof."):
                for alias in node.names:
                    name = f"{base}.{alias.name}"
                    out.append((name if name in MODULES else base, top))
        elif isinstance(node, ast.Import):
            out.extend((a.name, top) for a in node.names if a.name == "nbprof" or a.name.startswith("nbprof."))
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    return [(m, top) for m, top in out if m != module]


def _layer(module: str) -> int:
    """A module's layer: listed by name, or inside a listed package (nbprof itself: by name only)."""
    for i, (_, members) in enumerate(LAYERS):
        if any(module == m or (m != "nbprof" and module.startswith(m + ".")) for m in members):
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS here and in docs/architecture.md")


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


def test_every_module_is_in_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_go_down_the_layers():
    upward = set()
    for module in MODULES:
        for target, _ in _imports(module):
            if _layer(target) > _layer(module):
                upward.add((module, target))
    unexpected = sorted(upward - EXPECTED_TO_BE_FIXED)
    assert not unexpected, f"imports from a lower layer into a higher one (see LAYERS): {unexpected}"
    fixed = sorted(EXPECTED_TO_BE_FIXED - upward)
    assert not fixed, f"fixed, remove from EXPECTED_TO_BE_FIXED: {fixed}"


def test_no_import_cycles():
    """None among top-level imports (they would fail on import, depending on order), and none at
    all once lazy imports count, apart from the known exception."""
    top_level: dict[str, set[str]] = {m: set() for m in MODULES}
    every: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, top in _imports(module):
            if (module, target) in EXPECTED_TO_BE_FIXED:
                continue
            every[module].add(target)
            if top:
                top_level[module].add(target)
    assert _cycle(top_level) is None, _cycle(top_level)
    assert _cycle(every) is None, _cycle(every)


def test_the_graph_reader_sees_the_imports():
    """The static checks above are only as good as the reader: it finds a known top-level
    import, a lazy one and one that only looks like a module name."""
    assert ("nbprof.collect.collector", True) in _imports("nbprof.runner")
    assert ("nbprof.model", False) in _imports("nbprof.runner")
    assert ("nbprof.settings", True) in _imports("nbprof.flags")
    assert ("nbprof.errors", True) in _imports("nbprof")  # from .errors import NbprofError, ...
    assert ("nbprof.collect.torch_live", False) in _imports("nbprof.flags")
    assert all(target in MODULES for m in MODULES for target, _ in _imports(m))
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
