"""The chrome-trace reader against another checkout of nbprof (issue 24: bounded, checked reading
must not cost a real trace its speed), on the same files, in alternating fresh processes.

    git worktree add --detach /tmp/nbprof-main main
    python benchmarks/bench_reader.py --baseline /tmp/nbprof-main                  # 1 M events, 5 reps
    python benchmarks/bench_reader.py --baseline /tmp/nbprof-main --events 200000 --reps 3   # quicker
    python benchmarks/bench_reader.py --baseline /tmp/nbprof-main --torch      # + a trace torch's writer wrote

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
(this machine is shared: absolute times drift, ratios much less). Then ``same_process``: both
readers in one process (the baseline's package imported as ``nbprof_baseline``), alternating, CPU
seconds of ``read_trace_file``: the least noisy comparison a shared machine allows.

``--torch`` adds a trace torch's own writer wrote for ~``--events`` rows (``bench_profiling``'s
workload, shapes and memory recorded; its layout is the one the reader cuts into slices first).
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


def make_torch_trace(folder: Path, events: int) -> Path:
    """A trace torch's own writer wrote (its layout, one event per block) for ~``events`` rows:
    ``bench_profiling``'s workload, with shapes and memory."""
    path = folder / f"torch_cpu_{events}.json"
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from bench_profiling import iterations_for, profile_workload

        prof, _, _ = profile_workload(iterations_for(events, "shapes,memory"), "shapes,memory")
        prof.export_chrome_trace(str(path))
    return path


SAME_PROCESS = r"""
import gc, json, statistics, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import nbprof_baseline.collect.chrome_trace as old
import nbprof.collect.chrome_trace as new
assert new.__file__.startswith(sys.argv[2]), new.__file__
path, reps = sys.argv[3], int(sys.argv[4])
old.read_trace_file(path), new.read_trace_file(path)  # warm
res = {"baseline": [], "this": []}
for r in range(reps):
    for name in (("baseline", "this") if r % 2 == 0 else ("this", "baseline")):
        gc.collect()
        c0 = time.process_time()
        (old if name == "baseline" else new).read_trace_file(path)
        res[name].append(time.process_time() - c0)
print(json.dumps({"baseline_cpu": statistics.median(res["baseline"]), "this_cpu": statistics.median(res["this"]),
                  "ratio": statistics.median(a / b for a, b in zip(res["this"], res["baseline"]))}))
"""


def same_process(baseline: str, path: Path, reps: int) -> dict:
    """Both readers in one process (the baseline's package copied as ``nbprof_baseline``: the
    reader imports its own package relatively), alternating: the same caches and memory, CPU time."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(Path(baseline) / "nbprof", Path(tmp) / "nbprof_baseline")
        out = subprocess.run([sys.executable, "-c", SAME_PROCESS, tmp, str(ROOT), str(path), str(reps)],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_ratio(path: Path, reps: int = 5) -> dict:
    """In this process, alternating, CPU seconds: this checkout's ``read_trace_file(path)`` (the
    checked, streamed reader) against parsing the same file's JSON alone with the standard library
    (``gzip`` + ``json.loads`` for a ``.gz``, ``json.load`` otherwise). The median of the
    per-repetition ratios is ``ratio``: what the reading adds to a parse of the text, which the
    checks must not move (tests/test_perf_guards.py). Each timed call runs with the cyclic garbage
    collector paused: how often it walks depends on the heap the process already holds, not on the
    code measured (this ratio read 0.36-0.43 in a bare process and 0.77-0.96 in one holding 3 M
    lists, as a pytest worker late in the suite may; 2026-12-02)."""
    import gc
    import gzip

    sys.path.insert(0, str(ROOT))
    from nbprof.collect.chrome_trace import read_trace_file

    def parse() -> None:
        if str(path).endswith(".gz"):
            with gzip.open(path, "rb") as f:
                json.loads(f.read())
        else:
            with open(path, "rb") as f:
                json.load(f)

    def read() -> None:
        read_trace_file(str(path))

    times: dict[str, list[float]] = {"read": [], "parse": []}
    ratios = []
    for rep in range(reps):
        pair = {}
        for name, fn in ((("read", read), ("parse", parse)) if rep % 2 == 0 else (("parse", parse), ("read", read))):
            gc.collect()
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                c0 = time.process_time()
                fn()
                pair[name] = time.process_time() - c0
            finally:
                if was_enabled:
                    gc.enable()
            times[name].append(pair[name])
        ratios.append(pair["read"] / pair["parse"])
    return {"read_s": statistics.median(times["read"]), "parse_s": statistics.median(times["parse"]),
            "ratio": statistics.median(ratios)}


def run(tree: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, tree, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="another checkout of nbprof (e.g. a worktree of main)")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=str(Path.home() / ".cache" / "nbprof-bench-reader"))
    ap.add_argument("--torch", action="store_true", help="also a trace torch's writer writes (needs torch)")
    ap.add_argument("--same-process-reps", type=int, default=9, help="reps of the in-process comparison (0: none)")
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = make_files(folder, args.events) + ([make_torch_trace(folder, args.events)] if args.torch else [])
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
        if args.same_process_reps:
            row["same_process"] = same_process(trees["baseline"], path, args.same_process_reps)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
