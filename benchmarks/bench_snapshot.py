"""CUDA memory snapshots (issue 40): reading a snapshot of >= 1 M history entries, replaying it and
preparing the chart, against torch's own ``_memory_viz`` on the same file, in one process.

    python benchmarks/bench_snapshot.py                          # 1 M entries, 3 reps
    python benchmarks/bench_snapshot.py --entries 200000 --reps 5
    python benchmarks/bench_snapshot.py --markdown out.md        # the table for RESULTS.md

**File** (generated once into ``--dir``, default ``~/.cache/nbprof-bench-snapshot``): the caching
allocator simulated in plain Python and dumped as ``torch.cuda.memory._dump_snapshot`` dumps it
(``tests/snapshots.simulated``: 16 segments of 24 MiB cut into 64 blocks, ``--entries`` history
entries of allocations and frees with their Python stacks over 40 lines of a cell, 5 % dropped off
the front as torch's ring buffer drops them, a few OOMs).

**Measured**, each repetition in this one process, which side goes first alternating:

- memory_viz: ``pickle.load`` (what ``_memory_viz`` does with a file), ``segsum`` (its segment
  summary: ``stats``) and ``trace`` (its replay of every entry in Python: ``trace``). Its charts
  (``trace_plot``) replay the history in the browser (``MemoryViz.js``), which this cannot time.
- nbprof: ``load_snapshot`` (the data-only read and the tables), ``active_memory()`` (the replay),
  ``segments()``, and the chart's points (``views.snapshot_chart.drawn_devices``: each line's
  layer at ~2 points per pixel, and the user lines of every allocation).

Ratios are the median of the per-repetition ratios (a shared machine: absolute times drift).
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def make_file(folder: Path, entries: int) -> Path:
    path = folder / f"simulated_{entries}.pickle"
    if not path.exists():
        from tests.snapshots import simulated

        folder.mkdir(parents=True, exist_ok=True)
        snap = simulated(entries + entries // 20, seed=1, dropped=entries // 20, segments=16, slots=64, lines=40)
        with open(path, "wb") as f:
            pickle.dump(snap, f)
    return path


def memory_viz(path: Path) -> dict[str, float]:
    from torch.cuda import _memory_viz as mv

    t0 = time.perf_counter()
    with open(path, "rb") as f:
        data = pickle.load(f)
    t1 = time.perf_counter()
    mv.segsum(data)
    t2 = time.perf_counter()
    mv.trace(data)
    t3 = time.perf_counter()
    del data
    gc.collect()
    return {"load": t1 - t0, "segsum": t2 - t1, "trace": t3 - t2, "total": t3 - t0}


def ours(path: Path) -> dict[str, float]:
    import nbprof
    from nbprof.views.snapshot_chart import drawn_devices

    t0 = time.perf_counter()
    p = nbprof.load_snapshot(path, max_bytes="64G")
    t1 = time.perf_counter()
    memory = p.active_memory()
    t2 = time.perf_counter()
    p.segments()
    t3 = time.perf_counter()
    devices = drawn_devices(p)
    t4 = time.perf_counter()
    out = {"load": t1 - t0, "replay": t2 - t1, "segments": t3 - t2, "chart": t4 - t3, "total": t4 - t0,
           "entries": len(memory), "points": sum(len(d.x) for d in devices),
           "layers": sum(len(d.layers) for d in devices)}
    del p, memory, devices
    gc.collect()
    return out


def run(path: Path, reps: int) -> tuple[list[dict], list[dict]]:
    theirs, mine = [], []
    for rep in range(reps):
        if rep % 2:
            mine.append(ours(path))
            theirs.append(memory_viz(path))
        else:
            theirs.append(memory_viz(path))
            mine.append(ours(path))
    return theirs, mine


def table(path: Path, theirs: list[dict], mine: list[dict]) -> str:
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    ratio = statistics.median(m["total"] / t["total"] for m, t in zip(mine, theirs))
    load_ratio = statistics.median(m["load"] / t["load"] for m, t in zip(mine, theirs))
    size = os.path.getsize(path) / 1e6
    return "\n".join([
        f"| entries | file | reps | memory_viz: load + segsum + trace = **total** | nbprof: load + replay + segments + "
        "chart = **total** | **nbprof / memory_viz** | load / pickle.load | chart points (layers) |",
        "|---:|---:|---:|---|---|---:|---:|---:|",
        f"| {mine[0]['entries']:,} | {size:.0f} MB | {len(mine)} | {med(theirs, 'load'):.2f} s + "
        f"{med(theirs, 'segsum') * 1000:.0f} ms + {med(theirs, 'trace'):.2f} s = **{med(theirs, 'total'):.2f} s** | "
        f"{med(mine, 'load'):.2f} s + {med(mine, 'replay'):.2f} s + {med(mine, 'segments') * 1000:.0f} ms + "
        f"{med(mine, 'chart'):.2f} s = **{med(mine, 'total'):.2f} s** | **{ratio:.2f}** | {load_ratio:.2f} | "
        f"{mine[0]['points']:,} ({mine[0]['layers']}) |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/nbprof-bench-snapshot"))
    ap.add_argument("--markdown", help="also write the table here")
    args = ap.parse_args()
    path = make_file(Path(args.dir), args.entries)
    import torch

    theirs, mine = run(path, args.reps)
    text = table(path, theirs, mine)
    head = (f"{time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, torch {torch.__version__}, "
            f"load average {os.getloadavg()[0]:.1f}")
    print(head)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(head + "\n\n" + text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
