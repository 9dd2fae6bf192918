"""The chrome-trace reader against another checkout of nbprof (issue 24: bounded, checked reading
must not cost a real trace its speed), on the same files, in alternating fresh processes.

    git worktree add --detach /tmp/nbprof-main main
    python benchmarks/bench_reader.py --baseline /tmp/nbprof-main                  # 1 M events, 5 reps
    python benchmarks/bench_reader.py --baseline /tmp/nbprof-main --events 200000 --reps 3   # quicker

**Files** (generated once into ``--dir``, default ``~/.cache/nbprof-bench-reader``): the recorded H100
trace ``tests/data/cnn_train_cuda.trace.json.gz`` tiled to ``--events`` events as
``benchmarks/bench_cluster.py`` tiles a rank (ids and timestamps moved per copy, so no two events
are alike), gzip'd as ``tensorboard_trace_handler(use_gzip=True)`` writes it, and the same JSON
decompressed (``.json``: the plain file's path, read in slices from the file).

**Measured**, each in a fresh process that imports the checkout under test first: ``read`` =
``read_trace_file(path)`` (file -> events table), ``load+tables`` = ``load_trace(path)`` +
``key_averages("op")`` + ``summary``, each in wall and CPU seconds (the process's: on a shared
machine the CPU time moves less), and the process's peak memory added by the read (VmHWM after,
minus RSS before, the peak counter reset through /proc/self/clear_refs). The two checkouts run in
turn, which one goes first alternating; each ratio is the median of the per-repetition ratios
(this machine is shared: absolute times drift, ratios much less).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import gc, json, os, sys, time
tree, path = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
import nbprof, nbprof.model, pandas, numpy
from nbprof.collect.chrome_trace import read_trace_file
assert nbprof.__file__.startswith(tree), nbprof.__file__
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
gc.collect()
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
t0, c0 = time.perf_counter(), time.process_time()
trace = read_trace_file(path)
read_s, read_cpu = time.perf_counter() - t0, time.process_time() - c0
peak = status("VmHWM") - before
events, notes = len(trace.events), trace.meta.reader_notes
del trace
gc.collect()
t0, c0 = time.perf_counter(), time.process_time()
p = nbprof.load_trace(path)
p.key_averages("op")
p.summary
tables_s, tables_cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps(dict(read_s=read_s, read_cpu=read_cpu, tables_s=tables_s, tables_cpu=tables_cpu,
                      peak_mb=peak / 2**20, events=events, notes=notes)))
"""


def make_files(folder: Path, events: int) -> list[Path]:
    sys.path.insert(0, str(HERE))
    from bench_cluster import make_folder

    gz = folder / f"h100_tiled_{events}.json.gz"
    plain = folder / f"h100_tiled_{events}.json"
    if not gz.exists():
        ranks, _ = make_folder(folder / "tmp", 1, events)
        (ranks / "rank0.pt.trace.json.gz").rename(gz)
        shutil.rmtree(folder / "tmp")
    if not plain.exists():
        import gzip

        with gzip.open(gz) as f, open(plain, "wb") as out:
            while chunk := f.read(1 << 24):
                out.write(chunk)
    return [gz, plain]


def run(tree: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, tree, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="another checkout of nbprof (e.g. a worktree of main)")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=str(Path.home() / ".cache" / "nbprof-bench-reader"))
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = make_files(folder, args.events)
    trees = {"baseline": os.path.abspath(args.baseline), "this": str(ROOT)}
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")
    for path in files:
        results: dict[str, list[dict]] = {k: [] for k in trees}
        for rep in range(args.reps):
            order = list(trees) if rep % 2 == 0 else list(reversed(trees))
            for name in order:
                results[name].append(run(trees[name], path))
            print(f"  {path.name} rep {rep + 1} (load {os.getloadavg()[0]:.1f}): " + ", ".join(
                f"{k} read {v[-1]['read_s']:.2f}s (cpu {v[-1]['read_cpu']:.2f}s) tables {v[-1]['tables_s']:.2f}s "
                f"(cpu {v[-1]['tables_cpu']:.2f}s) peak {v[-1]['peak_mb']:.0f} MB" for k, v in results.items()), flush=True)
        b, t = results["baseline"], results["this"]
        assert b[0]["events"] == t[0]["events"], (b[0]["events"], t[0]["events"])
        row = {
            "file": path.name, "mb": round(path.stat().st_size / 1e6, 1), "events": t[0]["events"],
            "notes": t[0]["notes"],
            **{f"{k}_{m}": statistics.median(r[m] for r in results[k]) for k in trees
               for m in ("read_s", "read_cpu", "tables_s", "tables_cpu", "peak_mb")},
            **{f"{m}_ratio": statistics.median(x[m] / y[m] for x, y in zip(t, b))
               for m in ("read_s", "read_cpu", "tables_s", "tables_cpu")},
            "load_average": os.getloadavg()[0],
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
