"""The two ``--lines`` tracers side by side, on the same user code (docs/lines.md, "Why two line
tracers"): ``collect.line_tracer`` (``%%torchprof --lines``) and ``collect.python_lines``
(``%%cprofile --lines``), each started alone around a function of a user file written to a
temporary folder: a tight loop (one line event per iteration, no calls) and a loop of calls to a
small function (a call, a line and a return per iteration). Printed: each one's slowdown against
the bare run (CPU time, medians of ``--reps`` per-run ratios). No torch needed.

    python benchmarks/bench_line_tracers.py [--reps 5] [--scale 1.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


def measure(reps: int = 5, scale: float = 1.0) -> dict[str, dict[str, float]]:
    """Each workload (the tight loop: 200,000 iterations, the calls: 100,000, times ``scale``) bare
    and under each tracer, alternating, ``reps`` times: the bare run's median CPU seconds, and each
    tracer's slowdown (the median of its per-repetition ratios to the bare run beside it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nbprof.collect import line_tracer, python_lines
    from nbprof.collect.user_code import UserCode

    folder = tempfile.mkdtemp()
    (Path(folder) / "bench_user_loop.py").write_text(USER_FILE)
    sys.path.insert(0, folder)
    try:
        import bench_user_loop  # type: ignore[import-not-found]
    finally:
        sys.path.remove(folder)

    def once(fn, n, make) -> float:
        tracer = make() if make else None
        if tracer is not None:
            tracer.start(None) if isinstance(tracer, line_tracer.LineTracer) else tracer.start()
        try:
            t0 = time.process_time()  # CPU: a shared machine's other jobs do not move it (wall time did, 2x)
            fn(n)
            return time.process_time() - t0
        finally:
            if tracer is not None:
                tracer.stop()

    tracers = {"torch": lambda: line_tracer.LineTracer(UserCode(None)),
               "cprofile": lambda: python_lines.LineTracer(UserCode(None))}
    out = {}
    for name, fn, n in (("tight loop", bench_user_loop.work, 200_000), ("calls", bench_user_loop.calls, 100_000)):
        n = max(1, int(n * scale))
        bare: list[float] = []
        ratios: dict[str, list[float]] = {k: [] for k in tracers}
        for rep in range(reps):
            b = once(fn, n, None)
            bare.append(b)
            for k in (list(tracers) if rep % 2 == 0 else list(tracers)[::-1]):
                ratios[k].append(once(fn, n, tracers[k]) / b)
        out[name] = {"bare_s": statistics.median(bare), **{k: statistics.median(v) for k, v in ratios.items()}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="the workloads' iterations times this")
    parser.add_argument("--json", action="store_true", help="print the numbers as one JSON line")
    args = parser.parse_args()
    measured = measure(args.reps, args.scale)
    if args.json:
        print(json.dumps(measured))
        return
    for name, m in measured.items():
        print(f"Python {sys.version.split()[0]}, {name}: bare {m['bare_s'] * 1e3:.1f} ms; torch's tracer "
              f"x{m['torch']:.2f}, cProfile's x{m['cprofile']:.2f}")

if __name__ == "__main__":
    main()
