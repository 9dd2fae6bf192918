"""The two ``--lines`` recorders side by side, on the same user code (docs/lines.md, "One hook,
two recorders"): ``collect.torch_line_recorder`` (``%%torchprof --lines``) and
``collect.python_line_recorder`` (``%%cprofile --lines``), each started alone around a function of a user
file written to a temporary folder: a tight loop (one line event per iteration, no calls) and a
loop of calls to a small function (a call, a line and a return per iteration). Printed: each
one's slowdown against the bare run (medians of ``--reps`` runs). No torch needed. ``--scale``
multiplies the iterations (0.1: the small size). ``--baseline DIR`` measures another checkout
too (main's worktree), imported beside this one under another name, each run interleaved with
this tree's (so the machine's load falls on both alike).

    python benchmarks/bench_line_tracers.py [--reps 5] [--scale 1] [--baseline ../main]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

USER_FILE = '''\
def work(n):
    total = 0
    for i in range(n):
        total += i * 2
    return total


def calls(n):
    total = 0
    for i in range(n):
        total += helper(i)
    return total


def helper(i):
    return i + 1
'''


def _package(tree: str, name: str) -> Any:
    """The nbprof package of ``tree``, imported as ``name`` (two trees side by side in one process)."""
    spec = importlib.util.spec_from_file_location(name, f"{tree}/nbprof/__init__.py",
                                                  submodule_search_locations=[f"{tree}/nbprof"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _recorders(tree: str, name: str) -> tuple[Any, Any, Any]:
    """(the torch path's recorder, the cProfile path's, UserCode) of the nbprof in ``tree`` (a tree
    from before issue 39 named both recorders ``LineTracer``)."""
    _package(tree, name)
    user = importlib.import_module(f"{name}.collect.user_code").UserCode
    try:
        torch_side = importlib.import_module(f"{name}.collect.torch_line_recorder").TorchLineRecorder
        cprofile_side = importlib.import_module(f"{name}.collect.python_line_recorder").PythonLineRecorder
    except ImportError:
        torch_side = importlib.import_module(f"{name}.collect.line_tracer").LineTracer
        cprofile_side = importlib.import_module(f"{name}.collect.python_lines").LineTracer
    return torch_side, cprofile_side, user


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--baseline", default=None, help="another checkout (main's worktree), measured beside")
    args = parser.parse_args()
    trees = {"this tree": str(Path(__file__).resolve().parents[1])}
    if args.baseline:
        trees["baseline"] = str(Path(args.baseline).resolve())
    sides = {label: _recorders(tree, f"nbprof_bench_{i}") for i, (label, tree) in enumerate(trees.items())}

    folder = tempfile.mkdtemp()
    (Path(folder) / "bench_user_loop.py").write_text(USER_FILE)
    sys.path.insert(0, folder)
    import bench_user_loop  # type: ignore[import-not-found]

    def once(fn: Any, n: int, make: Any, user: Any) -> float:
        tracer = make(user(None)) if make else None
        if tracer is not None:
            tracer.start()
        t0 = time.perf_counter()
        fn(n)
        took = time.perf_counter() - t0
        if tracer is not None:
            tracer.stop()
        return took

    print(f"Python {sys.version.split()[0]}, medians of {args.reps} runs, interleaved:")
    for name, fn, n in (("tight loop", bench_user_loop.work, 200_000), ("calls", bench_user_loop.calls, 100_000)):
        n = max(1, int(n * args.scale))
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.reps):  # each measurement beside the others, so the machine's load falls on all
            times.setdefault(("", "bare"), []).append(once(fn, n, None, None))
            for label, (torch_side, cprofile_side, user) in sides.items():
                times.setdefault((label, "torch"), []).append(once(fn, n, torch_side, user))
                times.setdefault((label, "cprofile"), []).append(once(fn, n, cprofile_side, user))
        bare = statistics.median(times[("", "bare")])
        cells = [f"{label}: torch's recorder x{statistics.median(times[(label, 'torch')]) / bare:.2f}, cProfile's "
                 f"x{statistics.median(times[(label, 'cprofile')]) / bare:.2f}" for label in sides]
        print(f"  {name} ({n:,}, bare {bare * 1e3:.1f} ms): " + "; ".join(cells))


if __name__ == "__main__":
    main()
