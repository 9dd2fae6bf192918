"""The two ``--lines`` recorders side by side, on the same user code (docs/lines.md, "One hook,
two recorders"): ``collect.torch_line_recorder`` (``%%torchprof --lines``) and
``collect.python_line_recorder`` (``%%cprofile --lines``), each started alone around a function of a user
file written to a temporary folder: a tight loop (one line event per iteration, no calls) and a
loop of calls to a small function (a call, a line and a return per iteration). Printed: each
one's slowdown against the bare run (medians of ``--reps`` runs). No torch needed. ``--scale``
multiplies the iterations (0.1: the small size). ``--baseline DIR`` measures another checkout
too (main's worktree), each tree in its own processes, alternating, ``--rounds`` of each.

    python benchmarks/bench_line_tracers.py [--reps 5] [--scale 1] [--baseline ../main --rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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


def _recorders(tree: str) -> tuple[Any, Any]:
    """The two recorders of the nbprof in ``tree`` (a tree from before issue 39 named both
    ``LineTracer``)."""
    sys.path.insert(0, tree)
    try:
        from nbprof.collect.python_line_recorder import PythonLineRecorder
        from nbprof.collect.torch_line_recorder import TorchLineRecorder

        return TorchLineRecorder, PythonLineRecorder
    except ImportError:
        from nbprof.collect import line_tracer, python_lines  # type: ignore[attr-defined]

        return line_tracer.LineTracer, python_lines.LineTracer  # type: ignore[attr-defined]


def measure(tree: str, reps: int, scale: float) -> dict[str, dict[str, float]]:
    """{workload: {"bare_ms", "torch", "cprofile"}}: the bare run's median and each recorder's
    slowdown (median of ``reps`` runs each), for the nbprof in ``tree``."""
    torch_side, cprofile_side = _recorders(tree)
    from nbprof.collect.user_code import UserCode

    folder = tempfile.mkdtemp()
    (Path(folder) / "bench_user_loop.py").write_text(USER_FILE)
    sys.path.insert(0, folder)
    import bench_user_loop  # type: ignore[import-not-found]

    def timed(fn: Any, n: int, make: Any) -> float:
        out = []
        for _ in range(reps):
            tracer = make(UserCode(None)) if make else None
            if tracer is not None:
                tracer.start()
            t0 = time.perf_counter()
            fn(n)
            out.append(time.perf_counter() - t0)
            if tracer is not None:
                tracer.stop()
        return statistics.median(out)

    found = {}
    for name, fn, n in (("tight loop", bench_user_loop.work, 200_000), ("calls", bench_user_loop.calls, 100_000)):
        n = max(1, int(n * scale))
        bare = timed(fn, n, None)
        found[f"{name} ({n:,})"] = {"bare_ms": bare * 1e3, "torch": timed(fn, n, torch_side) / bare,
                                    "cprofile": timed(fn, n, cprofile_side) / bare}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--baseline", default=None,
                        help="another checkout (main's worktree): both measured, in alternating processes")
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline: processes per tree")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline is None:
        found = measure(args.tree, args.reps, args.scale)
        if args.json:
            print(json.dumps(found))
            return
        for name, r in found.items():
            print(f"Python {sys.version.split()[0]}, {name}: bare {r['bare_ms']:.1f} ms; torch's recorder "
                  f"x{r['torch']:.2f}, cProfile's x{r['cprofile']:.2f}")
        return
    trees = {"baseline": str(Path(args.baseline).resolve()), "this tree": args.tree}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {k: [] for k in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():  # alternating, so that the machine's load falls on both
            out = subprocess.run([sys.executable, __file__, "--tree", tree, "--reps", str(args.reps), "--scale",
                                  str(args.scale), "--json"], capture_output=True, text=True, check=True,
                                 env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=tempfile.gettempdir())
            runs[label].append(json.loads(out.stdout))
    print(f"Python {sys.version.split()[0]}, {args.rounds} processes per tree, medians of their medians:")
    for name in runs["this tree"][0]:
        cells = []
        for label in trees:
            torch_x = statistics.median(r[name]["torch"] for r in runs[label])
            cprofile_x = statistics.median(r[name]["cprofile"] for r in runs[label])
            cells.append(f"{label}: torch x{torch_x:.2f}, cProfile x{cprofile_x:.2f}")
        print(f"  {name}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
