"""What ``alive_at_end()`` and ``memory_growth()`` cost on a profile with many memory records (issue 40).

The profile is built in memory (no trace file, no torch): ``--steps`` ``ProfilerStep#k`` ranges on
one thread; in each, operators that allocate a block and free the previous one (an address used
again every other op, as the caching allocator does), and one block in a hundred kept to the end
(a leak). Two memory records per operator: ``--records`` in all. Each repetition builds a fresh
``TorchProfile`` from the same events table (its event tree built before the clock starts) and
times, one after the other: ``allocations()`` (pairing every block with its free: what the
Memory tab already needed), ``alive_at_end()`` and ``memory_growth()`` (with the pairing already
done, what they add), and the whole from a fresh profile. Printed: the median of each over the
repetitions, and µs per memory record.

    python benchmarks/bench_alive.py [--records 1000000] [--steps 1000] [--reps 5] [--markdown PATH]

``tests/test_memory_alive.py``'s slow guard runs ``measure`` at two sizes and checks the cost grows
about linearly with the records (a loop per record would not).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build_events(records: int, steps: int):
    """The events table (with its tree): ``steps`` steps of ``records // 2`` operators in all."""
    from nbprof.analysis.tree import build_tree
    from nbprof.events import make_events_frame

    n_ops = records // 2
    per_step = max(n_ops // steps, 1)
    step_us = per_step * 10.0
    op_start = np.arange(n_ops) * 10.0 + 1.0
    # each op allocates a block at +1 µs; the op after it frees it at +2 µs (same address); one in
    # a hundred is kept (its address retired) and never freed
    kept = (np.arange(n_ops) % 100) == 99
    addr = 4096 + np.arange(n_ops) * 64
    size = 1024 + (np.arange(n_ops) % 7) * 256
    frees = np.flatnonzero(~kept[:-1])  # the block of op i is freed in op i + 1
    alloc_t = op_start + 1.0
    free_t = op_start[frees + 1] + 2.0
    # the allocator's total after each record, in time order
    t = np.concatenate([alloc_t, free_t])
    b = np.concatenate([size, -size[frees]])
    order = np.argsort(t, kind="stable")
    total = np.empty(len(t), dtype=np.int64)
    total[order] = np.cumsum(b[order])
    n_steps = (n_ops + per_step - 1) // per_step
    names = (["ProfilerStep#%d" % k for k in range(n_steps)] + ["aten::empty"] * n_ops
             + ["[memory]"] * (n_ops + len(frees)))
    kinds = ["annotation"] * n_steps + ["op"] * n_ops + ["memory"] * (n_ops + len(frees))
    start = np.concatenate([np.arange(n_steps) * step_us, op_start, alloc_t, free_t])
    dur = np.concatenate([np.full(n_steps, step_us - 0.5), np.full(n_ops, 5.0), np.zeros(n_ops + len(frees))])
    frame = make_events_frame(
        name=np.asarray(names, dtype=object), kind=np.asarray(kinds, dtype=object), start_us=start, dur_us=dur,
        thread=np.ones(len(start), dtype=np.int64),
        bytes=np.concatenate([np.zeros(n_steps + n_ops, dtype=np.int64), b]),
        addr=np.concatenate([np.zeros(n_steps + n_ops, dtype=np.int64), addr, addr[frees]]),
        total_allocated_bytes=np.concatenate([np.full(n_steps + n_ops, -1, dtype=np.int64), total]),
    )
    return build_tree(frame), int(kept.sum())


def measure(events, reps: int) -> dict[str, float]:
    """Median seconds of each part over ``reps`` fresh profiles of ``events``."""
    from nbprof.model import TorchProfile

    parts: dict[str, list[float]] = {"allocations": [], "alive_at_end": [], "memory_growth": [], "all": []}
    for _ in range(reps):
        p = TorchProfile(events)
        t0 = time.perf_counter()
        p.allocations()
        t1 = time.perf_counter()
        p.alive_at_end()
        t2 = time.perf_counter()
        p.memory_growth()
        t3 = time.perf_counter()
        parts["allocations"].append(t1 - t0)
        parts["alive_at_end"].append(t2 - t1)
        parts["memory_growth"].append(t3 - t2)
        q = TorchProfile(events)
        t4 = time.perf_counter()
        q.alive_at_end()
        q.memory_growth()
        parts["all"].append(time.perf_counter() - t4)
    return {k: statistics.median(v) for k, v in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()
    t0 = time.perf_counter()
    events, kept = build_events(args.records, args.steps)
    built = time.perf_counter() - t0
    records = int((events["kind"] == "memory").sum())
    m = measure(events, args.reps)
    from nbprof.model import TorchProfile

    p = TorchProfile(events)
    alive, growth = p.alive_at_end(), p.memory_growth()
    assert len(alive) == kept, (len(alive), kept)
    lines = [f"{records:,} memory records, {len(growth):,} steps, {kept:,} blocks left (events table and tree "
             f"built in {built:.1f} s, not timed); medians of {args.reps}:",
             f"  allocations() (pairing, already there): {m['allocations'] * 1e3:.0f} ms",
             f"  alive_at_end() after it: {m['alive_at_end'] * 1e3:.0f} ms",
             f"  memory_growth() after it: {m['memory_growth'] * 1e3:.0f} ms",
             f"  both from a fresh profile (pairing included): {m['all'] * 1e3:.0f} ms = "
             f"{m['all'] / records * 1e6:.2f} µs per memory record"]
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
