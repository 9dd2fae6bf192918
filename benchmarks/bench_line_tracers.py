"""The two ``--lines`` recorders side by side, on the same user code (docs/lines.md, "One hook,
two recorders"): ``collect.torch_line_recorder`` (``%%torchprof --lines``) and
``collect.python_line_recorder`` (``%%cprofile --lines``), each started alone around a function of a user
file written to a temporary folder: a tight loop (one line event per iteration, no calls) and a
loop of calls to a small function (a call, a line and a return per iteration). Printed: each
one's slowdown against the bare run (CPU time: a shared machine's other jobs move it less than
the wall time; the median of the per-repetition ratios, each run beside the bare one). No torch
needed. ``--scale`` multiplies the iterations (0.1: the small size). ``--baseline DIR`` measures
another checkout too (main's worktree), imported beside this one under another name, each run
interleaved with this tree's (so the machine's load falls on both alike). ``--json``: the numbers
as one JSON line (what tests/test_perf_guards.py reads).

The floor (``floor``: its slowdown; ``torch / floor``, ``cprofile / floor``: each recorder's
fastest run over the floor's fastest): the least a Python line tracer does, a ``sys.settrace``
function on the user file's frames that appends ``(line, time_ns)`` per event, run beside the
others. A recorder's work per event is of the same kind (a Python call, a clock read, a list
growing), so the machine's moods move both alike: on the 2-vCPU VMs the slowdown against the bare
loop (which touches no memory) swung x20-x58 for the same code within minutes, the recorders over
the floor +-15 % on a quiet machine (up to +50 % while other jobs share the cores: a run's page
faults move with the machine). The guard bounds those, measuring again when one is over.

    python benchmarks/bench_line_tracers.py [--reps 5] [--scale 1] [--baseline ../main] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
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


def measure(reps: int = 5, scale: float = 1.0, baseline: str | None = None) -> dict[str, dict[str, float]]:
    """Each workload (the tight loop: 200,000 iterations, the calls: 100,000, times ``scale``) bare
    and under each recorder of this tree (and of ``baseline``), interleaved, ``reps`` times: per
    workload the bare run's median CPU seconds (``bare_s``) and each recorder's slowdown, the
    median of its per-repetition ratios to the bare run beside it (``torch``, ``cprofile``; the
    baseline's as ``baseline torch``, ``baseline cprofile``); the floor's the same way (``floor``)
    and each recorder's fastest run over the floor's fastest (``torch / floor``, ...)."""
    trees = {"": str(Path(__file__).resolve().parents[1])}
    if baseline:
        trees["baseline "] = str(Path(baseline).resolve())
    sides = {label: _recorders(tree, f"nbprof_bench_{i}") for i, (label, tree) in enumerate(trees.items())}

    folder = tempfile.mkdtemp()
    (Path(folder) / "bench_user_loop.py").write_text(USER_FILE)
    sys.path.insert(0, folder)
    try:
        import bench_user_loop  # type: ignore[import-not-found]
    finally:
        sys.path.remove(folder)

    user_file = bench_user_loop.work.__code__.co_filename

    def floor() -> Any:
        """The least a line tracer does: start() / stop() around the run, one list append per event."""
        events: list[tuple[int, int]] = []
        append, now = events.append, time.perf_counter_ns

        def local(frame: Any, event: str, arg: Any) -> Any:
            append((frame.f_lineno, now()))
            return local

        def call(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_filename == user_file else None

        class Floor:
            def start(self) -> None:
                sys.settrace(call)

            def stop(self) -> None:
                sys.settrace(None)
        return Floor()

    def once(fn: Any, n: int, make: Any, user: Any) -> float:
        tracer = (make(user(None)) if user else make()) if make else None
        if tracer is not None:
            tracer.start()
        try:
            t0 = time.process_time()
            fn(n)
            return time.process_time() - t0
        finally:
            if tracer is not None:
                tracer.stop()

    out = {}
    for name, fn, n in (("tight loop", bench_user_loop.work, 200_000), ("calls", bench_user_loop.calls, 100_000)):
        n = max(1, int(n * scale))
        bare: list[float] = []
        ratios: dict[str, list[float]] = {}
        floors: list[float] = []
        recorded: dict[str, list[float]] = {}
        for _ in range(reps):  # each measurement beside the others, so the machine's load falls on all
            b = once(fn, n, None, None)
            f = once(fn, n, floor, None)
            bare.append(b)
            floors.append(f)
            ratios.setdefault("floor", []).append(f / b)
            for label, (torch_side, cprofile_side, user) in sides.items():
                t, c = once(fn, n, torch_side, user), once(fn, n, cprofile_side, user)
                ratios.setdefault(f"{label}torch", []).append(t / b)
                ratios.setdefault(f"{label}cprofile", []).append(c / b)
                recorded.setdefault(f"{label}torch", []).append(t)
                recorded.setdefault(f"{label}cprofile", []).append(c)
        out[name] = {"iterations": n, "bare_s": statistics.median(bare),
                     **{k: statistics.median(v) for k, v in ratios.items()},
                     # each recorder's fastest run over the floor's: what it costs when neither
                     # shares the core (another job's load falls on single runs, not on all)
                     **{f"{k} / floor": min(v) / min(floors) for k, v in recorded.items()}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--baseline", default=None, help="another checkout (main's worktree), measured beside")
    parser.add_argument("--json", action="store_true", help="print the numbers as one JSON line")
    args = parser.parse_args()
    measured = measure(args.reps, args.scale, args.baseline)
    if args.json:
        print(json.dumps(measured))
        return
    print(f"Python {sys.version.split()[0]}, {args.reps} runs, interleaved: slowdowns over the bare loop are medians, "
          "over the floor each one's fastest run over the floor's fastest:")
    for name, m in measured.items():
        cells = [f"{label or 'this tree'}: torch's recorder x{m[label + 'torch']:.2f}, cProfile's "
                 f"x{m[label + 'cprofile']:.2f} (fastest over the floor's x{m[label + 'torch / floor']:.2f}, "
                 f"x{m[label + 'cprofile / floor']:.2f})" for label in ([""] + (["baseline "] if args.baseline else []))]
        cells.insert(0, f"the floor x{m['floor']:.2f}")
        print(f"  {name} ({m['iterations']:,}, bare {m['bare_s'] * 1e3:.1f} ms CPU): " + "; ".join(cells))


if __name__ == "__main__":
    main()
