"""What ``%%torchprof --lines`` costs next to ``--stack``, on a real training loop (issue 34).

A small CNN (two conv blocks and a linear layer, defined in an earlier cell, so its ``forward`` is
the user's code too) trains on CPU for ``--steps`` steps (SGD, cross entropy, a ``loss.item()``
each step) in a real IPython shell (IPython's own test shell). Each repetition runs the same cell
under ``%%torchprof --stack -q`` and under ``%%torchprof --lines -q`` (the order alternating), and
measures the whole cell: ``shell.run_cell`` from start to end, profiling, reading the trace and
building the result included. ``lines()`` (computed on first use) is timed apart. Printed: the
median of the per-repetition ratios, and the parts of ``--lines``'s own work (reading torch's event
tree, the join), and the line tracer's record.

    python benchmarks/bench_lines.py [--steps 100] [--reps 3] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

MODEL_CELL = """\
import torch
import torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        return self.fc(x)

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
data = torch.randn(16, 3, 32, 32)
target = torch.randint(0, 10, (16,))
"""

LOOP = """\
for step in range({steps}):
    opt.zero_grad()
    out = net(data)
    loss = F.cross_entropy(out, target)
    loss.backward()
    opt.step()
    last = loss.item()
"""


def measure(steps: int = 100, reps: int = 3, shell=None, log=print) -> dict:
    """Run the comparison in ``shell`` (default: IPython's test shell, nbprof loaded): the model cell,
    a warm-up of both flags, then ``reps`` repetitions of the loop under ``--stack`` and ``--lines``
    (the order alternating). Returns ``rows`` (one tuple per repetition: --stack s, --lines s,
    ratio, tree walk + join s, lines() s, line events, events, lines), ``ratio`` (the median of the
    per-repetition ratios), ``cpu_ratio`` (the same in CPU seconds of this process: what a shared
    machine's other jobs move less) and ``plain_s`` (the loop without a profiler). The names it makes in the
    shell's namespace are removed at the end, and torch's thread count is put back."""
    if shell is None:
        from IPython import get_ipython
        from IPython.testing.globalipapp import start_ipython

        shell = start_ipython() or get_ipython()  # one test shell per process
        shell.run_line_magic("load_ext", "nbprof")
    before = set(shell.user_ns)
    import torch

    threads = torch.get_num_threads()
    try:
        shell.run_cell(MODEL_CELL, store_history=True)
        loop = LOOP.format(steps=steps)
        shell.run_cell("%%torchprof --lines -q\n" + LOOP.format(steps=3), store_history=True)  # warm up both paths
        shell.run_cell("%%torchprof --stack -q\n" + LOOP.format(steps=3), store_history=True)

        def timed(flags: str) -> tuple[float, object]:
            began, cpu = time.perf_counter(), time.process_time()
            result = shell.run_cell(f"%%torchprof {flags} -q -o bench_p\n" + loop, store_history=True)
            wall = time.perf_counter() - began
            cpus[flags].append(time.process_time() - cpu)
            if result.error_in_exec is not None or result.error_before_exec is not None:
                raise RuntimeError(f"the cell failed: {result.error_in_exec or result.error_before_exec}")
            return wall, shell.user_ns["bench_p"]

        cpus: dict[str, list[float]] = {"--stack": [], "--lines": []}

        began = time.perf_counter()
        shell.run_cell(loop, store_history=True)
        plain = time.perf_counter() - began
        rows = []
        for rep in range(reps):
            order = ["--stack", "--lines"] if rep % 2 == 0 else ["--lines", "--stack"]
            walls: dict[str, float] = {}
            for flags in order:
                walls[flags], profile = timed(flags)
                if flags == "--lines":
                    t = time.perf_counter()
                    table = profile.lines()  # type: ignore[attr-defined]
                    lines_s = time.perf_counter() - t
                    data = profile.meta.line_data  # type: ignore[attr-defined]
                    events = len(profile.events)  # type: ignore[attr-defined]
                    collect_s, line_events = data["collect_s"], data["line_events"]
                    n_lines = len(table)
                del profile
            rows.append((walls["--stack"], walls["--lines"], walls["--lines"] / walls["--stack"], collect_s, lines_s,
                         line_events, events, n_lines))
            log(f"rep {rep}: --stack {walls['--stack']:.2f} s, --lines {walls['--lines']:.2f} s "
                f"(x{walls['--lines'] / walls['--stack']:.2f}; tree walk + join {collect_s:.2f} s, lines() "
                f"{lines_s * 1000:.0f} ms; {line_events:,} line events, {events:,} events, {n_lines} lines)")
    finally:
        for name in set(shell.user_ns) - before:
            shell.user_ns.pop(name, None)
        torch.set_num_threads(threads)
    return {"rows": rows, "ratio": statistics.median(r[2] for r in rows), "plain_s": plain,
            "cpu_ratio": statistics.median(b / a for a, b in zip(cpus["--stack"], cpus["--lines"]))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    out = measure(args.steps, args.reps, log=lambda line: print(line, flush=True))
    rows, ratio, plain = out["rows"], out["ratio"], out["plain_s"]
    print(f"no profiler: {plain:.2f} s; median --lines / --stack: x{ratio:.2f} (target <= 1.3); "
          f"in CPU time x{out['cpu_ratio']:.2f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Python {sys.version.split()[0]}, {args.steps} steps, {args.reps} repetitions; "
                    f"no profiler {plain:.2f} s\n\n")
            f.write("| rep | --stack | --lines | ratio | tree walk + join | lines() | line events | events | lines |\n")
            f.write("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
            for i, r in enumerate(rows):
                f.write(f"| {i} | {r[0]:.2f} s | {r[1]:.2f} s | x{r[2]:.2f} | {r[3]:.2f} s | {r[4] * 1000:.0f} ms | "
                        f"{r[5]:,} | {r[6]:,} | {r[7]} |\n")
            f.write(f"\nmedian ratio: **x{ratio:.2f}**\n")

if __name__ == "__main__":
    main()
