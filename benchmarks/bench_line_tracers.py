"""The two ``--lines`` recorders side by side, on the same user code (docs/lines.md, "One hook,
two recorders"): ``collect.torch_line_recorder`` (``%%torchprof --lines``) and
``collect.python_line_recorder`` (``%%cprofile --lines``), each started alone around a function of a user
file written to a temporary folder: a tight loop (one line event per iteration, no calls) and a
loop of calls to a small function (a call, a line and a return per iteration). Printed: each
one's slowdown against the bare run (medians of ``--reps`` runs). No torch needed. ``--scale``
multiplies the iterations (0.1: the small size).

    python benchmarks/bench_line_tracers.py [--reps 5] [--scale 1]
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nbprof.collect import python_line_recorder, torch_line_recorder
    from nbprof.collect.user_code import UserCode

    folder = tempfile.mkdtemp()
    (Path(folder) / "bench_user_loop.py").write_text(USER_FILE)
    sys.path.insert(0, folder)
    import bench_user_loop  # type: ignore[import-not-found]

    def timed(fn, n, make):
        out = []
        for _ in range(args.reps):
            tracer = make() if make else None
            if tracer is not None:
                tracer.start(None)
            t0 = time.perf_counter()
            fn(n)
            out.append(time.perf_counter() - t0)
            if tracer is not None:
                tracer.stop()
        return statistics.median(out)

    for name, fn, n in (("tight loop", bench_user_loop.work, 200_000), ("calls", bench_user_loop.calls, 100_000)):
        n = max(1, int(n * args.scale))
        bare = timed(fn, n, None)
        torch_side = timed(fn, n, lambda: torch_line_recorder.TorchLineRecorder(UserCode(None)))
        cprofile_side = timed(fn, n, lambda: python_line_recorder.PythonLineRecorder(UserCode(None)))
        print(f"Python {sys.version.split()[0]}, {name} ({n:,}): bare {bare * 1e3:.1f} ms; torch's tracer "
              f"x{torch_side / bare:.2f}, cProfile's x{cprofile_side / bare:.2f}")


if __name__ == "__main__":
    main()
