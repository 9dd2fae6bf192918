"""A folder of ranks (issues 14, 23): ``nbprof.load_trace(folder)`` on 8 and 64 ranks of ~1 M
events each, against one rank's load, its timeline (drawn, zoomed), and HolisticTraceAnalysis (HTA)
side by side.

    python benchmarks/bench_cluster.py                       # 8 and 64 ranks x 1 M events, ~15 min
    python benchmarks/bench_cluster.py --ranks 8 --repeat 4  # one rank (plain, same path) and 8 ranks alternating
    python benchmarks/bench_cluster.py --timeline 8,64       # + the timeline of 8 and 64 ranks
    python benchmarks/bench_cluster.py --hta ~/.cache/hta-venv/bin/python   # + HTA on 2 and 8 ranks
    python benchmarks/bench_cluster.py --events 20000 --ranks 2,4            # a quick smoke run
    python benchmarks/bench_cluster.py --markdown benchmarks/RESULTS.md      # also write the results
    python benchmarks/bench_cluster.py --events 200000 --ratios 3            # the guards' two ratios only

**Folders** (generated once into ``--dir``, default ``~/.cache/nbprof-bench-cluster``; never the
repository): the recorded H100 trace ``tests/data/cnn_train_cuda.trace.json.gz`` (2,748 events,
3 training steps) tiled to ``--events`` per rank: each copy's timestamps move past the previous
copy, its ids (External id, correlation, Ev Idx, Record function id, Sequence number, flow ids)
to their own range; one profiler span over all of it. Rank 1's gemm kernels are 1.5x slower.
Each rank file is gzip'd JSON as ``tensorboard_trace_handler(use_gzip=True)`` writes it: a small
gzip member with the rank's header (``distributedInfo``) then the tiled events (one member shared
by the ranks' files, so 64 ranks take ~64 copies of bytes, not 64 serializations).

**Measured**, each in a fresh process (so its peak memory is its own): the seconds to the report's
tables (``load_trace`` + ``ranks().table``, ``key_averages()``, ``findings``), the notebook
process's peak memory (VmHWM from /proc/self/status, reset through /proc/self/clear_refs after the
imports, so it is the imports' resident memory plus what loading added), the largest worker's (its
ru_maxrss), and the CPU seconds of the process and its workers (user + system): on a shared machine
the wall-time ratios depend on the cores left to us, the CPU ratios do not. Baselines: one rank
through the same path (``load_trace(folder of one, workers=1)`` is a plain profile, so
``summarize_ranks([file], workers=1)``: one spawned worker, every table), and plain
``load_trace(file)`` (read + event tree, tables computed lazily later). HTA:
``TraceAnalysis(trace_dir=folder)`` (its parse; its own process pool) under an address-space limit
of ``--hta-limit-gb`` per process, so that a run that needs more fails in one line rather than
taking the machine down (it is shared).

**Ratios** (``--ratios REPS``, what tests/test_perf_guards.py measures at a small size), in this
process, alternating, CPU seconds: a rank's summary (``rank_summary``: read, tree, every per-rank
table) against a plain ``load_trace(file)`` + ``key_averages()`` of the same rank
(:func:`summary_ratio`), and the first ``--ranks`` folder with 2 workers and the report's tables
against one rank's plain load (:func:`folder_ratio`).

**Timeline** (``--timeline``), in one fresh process per folder: ``load_trace(folder)``, then the
stacked full view (each rank's view drawn by the workers from its cache) and its SVG; 1 ms zooms
at the densest spots (the rectangles merging most events), timed three ways: the workers kept
between zooms (the median of 5), the workers started again for the zoom (``p.close()`` first:
what starting them per zoom would cost), and every rank's trace file read again (the caches
removed first: what a zoom without caches would cost; up to 8 ranks); the notebook process's peak
over all of it.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "tests" / "data" / "cnn_train_cuda.trace.json.gz"
ID_ARGS = ("External id", "correlation", "Ev Idx", "Record function id", "Sequence number")
GAP_US = 100.0  # between two copies of the recorded trace
SLOW_RANK = 1
SLOW_GEMM = 1.5


def _body(events_per_rank: int, slow: bool) -> tuple[bytes, bytes, int]:
    """(header without distributedInfo, gzip member of the tiled events + the document's end,
    number of events)."""
    with gzip.open(BASE) as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    span = [e for e in events if e.get("cat") == "Trace"]
    body = [e for e in events if e.get("ph") != "M" and e.get("cat") != "Trace"]
    t0 = min(e["ts"] for e in body)
    t1 = max(e["ts"] + e.get("dur", 0) for e in body)
    width = t1 - t0 + GAP_US
    stride = 1 + max(max((int(e.get("args", {}).get(k, 0) or 0) for k in ID_ARGS), default=0) for e in body)
    stride = max(stride, 1 + max(int(e.get("id", 0) or 0) for e in body if e.get("ph") in ("s", "f")))
    copies = max(1, -(-(events_per_rank - len(meta) - 1) // len(body)))
    if slow:
        body = copy.deepcopy(body)
        for e in body:
            if e.get("cat") == "kernel" and "gemm" in e["name"]:
                e["dur"] = round(e["dur"] * SLOW_GEMM, 3)
    chunks = []
    for k in range(copies):
        out = []
        for e in body:
            e = dict(e, ts=round(e["ts"] + k * width, 3))
            if k:
                if "args" in e:
                    args = dict(e["args"])
                    for key in ID_ARGS:
                        if key in args and isinstance(args[key], int) and args[key] > 0:
                            args[key] += k * stride
                    e["args"] = args
                if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
                    e["id"] += k * stride
            out.append(json.dumps(e))
        chunks.append(",\n".join(out))
    trace = dict(span[0], ts=t0, dur=round(copies * width, 3)) if span else None
    tail = [json.dumps(e) for e in meta] + ([json.dumps(trace)] if trace else [])
    text = ",\n".join(chunks + tail) + "\n]}\n"
    header = json.dumps(doc)[:-1]  # without the closing brace
    return header.encode(), gzip.compress(text.encode(), compresslevel=1), copies * len(body) + len(tail)


def make_folder(root: Path, ranks: int, events_per_rank: int) -> tuple[Path, int]:
    """``root/r<ranks>_e<events>/rank<i>.pt.trace.json.gz`` (made once, reused)."""
    folder = root / f"r{ranks}_e{events_per_rank}"
    done = folder / ".complete"
    if done.exists():
        return folder, int(done.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    bodies: dict[bool, tuple[bytes, bytes, int]] = {}
    for r in range(ranks):
        slow = r == SLOW_RANK
        if slow not in bodies:
            bodies[slow] = _body(events_per_rank, slow)
        header, member, n = bodies[slow]
        head = header + f', "distributedInfo": {{"rank": {r}, "world_size": {ranks}, "backend": "nccl"}}, ' \
                        f'"traceEvents": [\n'.encode()
        with open(folder / f"rank{r}.pt.trace.json.gz", "wb") as f:
            f.write(gzip.compress(head, compresslevel=1))
            f.write(member)
    done.write_text(str(bodies[False][2]))
    return folder, bodies[False][2]


# -- measurements, each in a fresh process --------------------------------------------------------

_PROBE = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
{imports}
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current resident size
t0 = time.perf_counter()
cpu0 = sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
           for f in ("ru_utime", "ru_stime"))
{work}
seconds = time.perf_counter() - t0
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
me = resource.getrusage(resource.RUSAGE_SELF)
cpu = kids.ru_utime + kids.ru_stime + me.ru_utime + me.ru_stime - cpu0
print("RESULT " + json.dumps({{"seconds": seconds, "cpu_s": cpu, "peak_mb": hwm / 1024,
                              "worker_peak_mb": kids.ru_maxrss / 1024}}))
"""

NBPROF_IMPORTS = "import nbprof, nbprof.cluster.loading, pandas, numpy"
CLUSTER_WORK = """p = nbprof.load_trace({folder!r}, progress=False)
p.ranks().table; p.key_averages(); p.findings; p.kernels(); p.steps()
assert len(p.rank_labels) == {ranks}"""
SUMMARY_WORK = "nbprof.cluster.loading.summarize_ranks([{file!r}], workers=1, progress=False)"
PLAIN_WORK = "nbprof.load_trace({file!r})"
TIMELINE_WORK = """p = nbprof.load_trace({folder!r}, progress=False)
import json as _json, os as _os, shutil as _shutil, statistics as _st, time as _time
_t = _time.perf_counter(); _v = p.timeline_view(); _d = _v.data; _svg = _v.svg(); _full = _time.perf_counter() - _t
_tl = _v.timeline
_spots = _d.rects.sort_values("count", ascending=False)["x0_us"].to_numpy()[:5]
def _zoom(a):
    _t = _time.perf_counter(); _w = _tl.window(a, a + 1000.0, 1200); return _time.perf_counter() - _t, _w
_kept = [_zoom(a) for a in _spots]
p.close()
_fresh = _zoom(_spots[0])
p.close()
_reread = (float("nan"), None)
if len(p.rank_labels) <= 8:  # every file read again: minutes for 64 ranks, and the point is made with 8
    for _s in p.rank_summaries:
        _shutil.rmtree(_s.timeline.cache, ignore_errors=True)
    _reread = _zoom(_spots[1])
print("EXTRA " + _json.dumps({{"full_view_s": _full, "rects": len(_d.rects), "events_drawn": int(_d.events_drawn),
    "zoom_kept_s": _st.median([k for k, _ in _kept]), "zoom_events": int(_st.median([w.events_drawn for _, w in _kept])),
    "zoom_fresh_workers_s": _fresh[0], "zoom_reread_s": _reread[0], "svg_kb": len(_svg) / 1024}}))"""
HTA_IMPORTS = "from hta.trace_analysis import TraceAnalysis"
HTA_WORK = "TraceAnalysis(trace_dir={folder!r})"


def probe(python: str, imports: str, work: str, limit_gb: float | None = None, timeout: float = 3600) -> dict:
    code = _PROBE.format(root=str(ROOT), imports=imports, work=work)
    cmd = [python, "-c", code]
    if limit_gb:
        cmd = ["prlimit", f"--as={int(limit_gb * (1 << 30))}", "--"] + cmd
    t0 = time.perf_counter()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s", "wall": time.perf_counter() - t0}
    extra: dict = {}
    for line in run.stdout.splitlines():
        if line.startswith("EXTRA "):
            extra = json.loads(line[6:])
    for line in run.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**json.loads(line[7:]), **extra}
    tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit {run.returncode}: {tail[:200]}", "wall": time.perf_counter() - t0}


def summary_ratio(file: str, reps: int = 3) -> dict:
    """A rank's summary (``nbprof.cluster.summary.rank_summary``: what a folder's worker computes
    for one rank: read, tree, every per-rank table) against a plain ``load_trace(file)`` + ``key_averages()``
    of the same file, in this process: ``reps`` pairs, the order alternating, CPU seconds of this
    process (a shared machine moves them less than wall time). Returns the medians and the median of
    the per-pair ratios (``ratio``). The per-rank tables are what this ratio watches: the read and
    the tree are on both sides."""
    import gc

    import nbprof
    from nbprof.cluster.summary import rank_summary

    def plain() -> None:
        nbprof.load_trace(file).key_averages()

    def summary() -> None:
        rank_summary(file)

    out: dict[str, list[float]] = {"plain_s": [], "summary_s": []}
    ratios = []
    for rep in range(reps):
        pair = {}
        for name, fn in ((("plain_s", plain), ("summary_s", summary)) if rep % 2 == 0
                         else (("summary_s", summary), ("plain_s", plain))):
            gc.collect()
            c0 = time.process_time()
            fn()
            pair[name] = time.process_time() - c0
            out[name].append(pair[name])
        ratios.append(pair["summary_s"] / pair["plain_s"])
    return {"plain_s": statistics.median(out["plain_s"]), "summary_s": statistics.median(out["summary_s"]),
            "ratio": statistics.median(ratios), "ratios": ratios}


def folder_ratio(folder: str, file: str, reps: int = 3, workers: int = 2) -> dict:
    """``load_trace(folder)`` with ``workers`` worker processes and the report's tables (as
    ``CLUSTER_WORK``) against a plain ``load_trace(file)`` of one of its ranks, in this process,
    alternating: CPU seconds of this process and its workers (reaped when the load ends), which a
    shared machine moves less than the wall time. ``ratio``: the median of the per-pair ratios."""
    import gc
    import resource

    import nbprof

    def cpu() -> float:
        return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for f in ("ru_utime", "ru_stime"))

    def plain() -> None:
        nbprof.load_trace(file)

    def cluster() -> None:
        p = nbprof.load_trace(folder, workers=workers, progress=False)
        p.ranks().table, p.key_averages(), p.findings, p.kernels(), p.steps()
        p.close()

    out: dict[str, list[float]] = {"plain_s": [], "folder_s": []}
    ratios = []
    for rep in range(reps):
        pair = {}
        for name, fn in ((("plain_s", plain), ("folder_s", cluster)) if rep % 2 == 0
                         else (("folder_s", cluster), ("plain_s", plain))):
            gc.collect()
            c0 = cpu()
            fn()
            pair[name] = cpu() - c0
            out[name].append(pair[name])
        ratios.append(pair["folder_s"] / pair["plain_s"])
    return {"plain_s": statistics.median(out["plain_s"]), "folder_s": statistics.median(out["folder_s"]),
            "ratio": statistics.median(ratios), "ratios": ratios}


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/nbprof-bench-cluster"))
    ap.add_argument("--events", type=int, default=1_000_000, help="events per rank")
    ap.add_argument("--ranks", default="8,64")
    ap.add_argument("--repeat", type=int, default=1, help="measure one rank and the first --ranks this many times, "
                    "alternating (the machine is shared: the ratio of neighbours is the one to trust)")
    ap.add_argument("--timeline", default="", help="ranks whose folder's timeline to draw and zoom, e.g. 8,64")
    ap.add_argument("--hta", help="a Python with HolisticTraceAnalysis installed (its own venv)")
    ap.add_argument("--hta-ranks", default="2,8")
    ap.add_argument("--hta-limit-gb", type=float, default=10.0)
    ap.add_argument("--markdown", help="append the results as a section to this file")
    ap.add_argument("--ratios", type=int, default=0, metavar="REPS",
                    help="only the summary and folder ratios (in this process, CPU), REPS pairs each")
    args = ap.parse_args()
    if args.ratios:
        n = sorted(int(x) for x in args.ranks.split(",") if x)[0]
        folder, events = make_folder(Path(args.dir), n, args.events)
        rank0 = str(folder / "rank0.pt.trace.json.gz")
        print(f"{n} ranks x {events:,} events; load average {loadavg()}", flush=True)
        print("rank summary / load_trace + key_averages:", json.dumps(summary_ratio(rank0, args.ratios)), flush=True)
        print(f"{n} ranks (2 workers) / one rank's plain load:", json.dumps(folder_ratio(str(folder), rank0, args.ratios)))
        return
    root = Path(args.dir)
    timeline = sorted({int(x) for x in args.timeline.split(",") if x})
    counts = sorted({int(x) for x in args.ranks.split(",") if x} | ({int(x) for x in args.hta_ranks.split(",")}
                                                                 if args.hta else set()) | set(timeline))
    rows: list[tuple[str, dict]] = []
    notes = [f"start {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, load average {loadavg()}, "
             f"{os.cpu_count()} cores"]
    folders = {}
    for n in counts:
        t0 = time.perf_counter()
        folders[n], events = make_folder(root, n, args.events)
        print(f"folder {n} ranks x {events:,} events: {time.perf_counter() - t0:.0f} s", flush=True)
    one = str(folders[counts[0]] / "rank0.pt.trace.json.gz")
    py = sys.executable

    def record(label: str, result: dict) -> None:
        result["load"] = loadavg()
        rows.append((label, result))
        print(label, json.dumps(result), flush=True)

    record("one rank: plain load_trace(file)", probe(py, NBPROF_IMPORTS, PLAIN_WORK.format(file=one)))
    record("one rank: summarize_ranks([file], workers=1)", probe(py, NBPROF_IMPORTS, SUMMARY_WORK.format(file=one)))
    ranks = sorted(int(x) for x in args.ranks.split(",") if x)
    pairs = []  # (folder / one rank same path, folder / plain load), wall and CPU
    for k in range(1, args.repeat):  # more neighbours: one rank both ways, then the first folder
        plain_k = probe(py, NBPROF_IMPORTS, PLAIN_WORK.format(file=one))
        record(f"one rank: plain load_trace(file), again ({k})", plain_k)
        a = probe(py, NBPROF_IMPORTS, SUMMARY_WORK.format(file=one))
        record(f"one rank: summarize_ranks([file], workers=1), again ({k})", a)
        b = probe(py, NBPROF_IMPORTS, CLUSTER_WORK.format(folder=str(folders[ranks[0]]), ranks=ranks[0]))
        record(f"{ranks[0]} ranks: load_trace(folder), again ({k})", b)
        if all("seconds" in r for r in (plain_k, a, b)):
            pairs.append((b["seconds"] / a["seconds"], b["cpu_s"] / a["cpu_s"],
                          b["seconds"] / plain_k["seconds"], b["cpu_s"] / plain_k["cpu_s"]))
    for n in ranks:
        record(f"{n} ranks: load_trace(folder)",
               probe(py, NBPROF_IMPORTS, CLUSTER_WORK.format(folder=str(folders[n]), ranks=n)))
    for n in timeline:
        record(f"{n} ranks: load_trace(folder) + timeline", probe(py, NBPROF_IMPORTS, TIMELINE_WORK.format(folder=str(folders[n]))))
    if args.hta:
        for n in sorted(int(x) for x in args.hta_ranks.split(",")):
            record(f"{n} ranks: HTA TraceAnalysis(trace_dir)",
                   probe(os.path.expanduser(args.hta), HTA_IMPORTS, HTA_WORK.format(folder=str(folders[n])),
                         limit_gb=args.hta_limit_gb))
    notes.append(f"end {datetime.datetime.utcnow():%H:%M} UTC, load average {loadavg()}")
    base = dict(rows)["one rank: summarize_ranks([file], workers=1)"]["seconds"]
    plain = dict(rows)["one rank: plain load_trace(file)"]["seconds"]
    base_cpu = dict(rows)["one rank: summarize_ranks([file], workers=1)"]["cpu_s"]
    lines = [f"events per rank: {events:,}; " + "; ".join(notes), "",
             "| run | seconds | x one rank (same path) | x plain load_trace(file) | CPU seconds (all processes) "
             "| CPU x one rank | notebook process peak MB | largest worker peak MB | load average |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, r in rows:
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} (after {r['wall']:.0f} s) | | | | | | | {r['load']} |")
            continue
        lines.append(f"| {label} | {r['seconds']:.1f} | {r['seconds'] / base:.2f} | {r['seconds'] / plain:.2f} | "
                     f"{r['cpu_s']:.1f} | {r['cpu_s'] / base_cpu:.2f} | {r['peak_mb']:.0f} | "
                     f"{r['worker_peak_mb']:.0f} | {r['load']} |")
    tl_rows = [(label, r) for label, r in rows if "zoom_kept_s" in r]
    if tl_rows:
        lines += ["", "| run | full view (s) | rects | 1 ms zoom, workers kept (s, median of 5) | events in it | "
                      "workers started for it (s) | trace files read again (s) | notebook process peak MB |",
                  "|---|---|---|---|---|---|---|---|"]
        for label, r in tl_rows:
            lines.append(f"| {label} | {r['full_view_s']:.1f} | {r['rects']:,} | {r['zoom_kept_s']:.2f} | "
                         f"{r['zoom_events']:,} | {r['zoom_fresh_workers_s']:.1f} | {r['zoom_reread_s']:.1f} | "
                         f"{r['peak_mb']:.0f} |")
    if pairs:
        wall, cpu, wall_plain, cpu_plain = (statistics.median(p[i] for p in pairs) for i in range(4))
        lines += ["", f"{ranks[0]} ranks / one rank, measured as neighbours ({len(pairs)} triples): median wall "
                      f"{wall:.2f}x the same path's one rank, **{wall_plain:.2f}x its plain load_trace(file)** "
                      f"(each: {', '.join(f'{p[2]:.2f}' for p in pairs)}); median CPU {cpu:.2f}x and "
                      f"{cpu_plain:.2f}x"]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n## A folder of ranks: load_trace(folder) and HTA (issue 14)\n\n"
                    "`python benchmarks/bench_cluster.py` (see its docstring)\n\n" + text + "\n")


if __name__ == "__main__":
    main()
