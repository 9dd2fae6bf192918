"""How much profiling a cell costs the user after the cell: nbprof against torch's own way.

    python benchmarks/bench_profiling.py                          # 10k and 100k events, ~8 minutes
    python benchmarks/bench_profiling.py --sizes 10000,100000,1000000   # + 1M: torch's path ~2 min, 3 GB
    python benchmarks/bench_profiling.py --only post,memory --sizes 100000
    python benchmarks/bench_profiling.py --markdown benchmarks/RESULTS.md   # also write the results

Sections (``--only`` picks some):

post      From profiler stop to every table of the report (events table, tree, device and memory
          attribution, key averages by op and by input shape, summary): nbprof's path
          (``kineto_results.save`` into /dev/shm, read, tree, tables) against torch's
          ``prof.events()`` + ``key_averages()`` + ``key_averages(group_by_input_shape=True)``,
          both on the same profile, in the same process, alternating which goes first. Also
          torch's own ``__exit__`` for that profile, and a check that our numbers equal torch's.
memory    Peak memory each path adds (one fresh process per path and size): VmHWM after the path
          minus RSS before it (the peak counter is reset first through /proc/self/clear_refs);
          for nbprof the size of the scratch trace file in /dev/shm (RAM) is added on top.
load      ``nbprof.load_trace`` on a trace file torch wrote, against parsing the file's JSON alone
          (``json.load``; msgspec's and orjson's untyped parsers are shown too).
loadext   ``%load_ext nbprof`` in a fresh IPython shell (fresh process each time): seconds, and
          whether torch or plotly got imported.
cprofile  ``%%cprofile`` against IPython's ``%%prun`` on the same cell in one shell (many runs,
          alternating), and building our tables against pstats sorting and printing.
cell      The whole ``%%torchprof`` cell (profiled run, report displayed) against the hand-written
          way (``with profile(...)``, then ``print(prof.key_averages().table())``), in one shell.

Every time is a median over repetitions; ratios are medians of ratios measured in the same run
(this machine is shared and noisy: absolute times move, ratios much less). The workload is small
CPU tensor ops under ``record_function``, profiled with ``record_shapes`` and ``profile_memory``
(``--collect`` changes that), sized by calibrating events per iteration.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

WORKLOAD = """
import torch
from torch.profiler import record_function
torch.manual_seed(0)
x = torch.randn(8, 8, device="{device}")
w = torch.randn(8, 8, device="{device}")
for i in range({n_iter}):
    with record_function("step"):
        y = torch.mm(x, w)
        y = torch.relu(y)
        y = y + 1
        s = y.sum()
    x = torch.tanh(y)
{sync}"""

DEVICE = "cpu"  # --device cuda: the same ops on the GPU, CUDA activity recorded too


def workload_code(n_iter: int) -> str:
    sync = "torch.cuda.synchronize()\n" if DEVICE == "cuda" else ""
    return WORKLOAD.format(n_iter=n_iter, device=DEVICE, sync=sync)


def activities() -> list:
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])

TARGETS = {
    "speedup": 10.0,  # torch events()+key_averages() / ours, at 100k and 1M events
    "vs_exit": 1.0,  # ours / torch __exit__
    "memory": 1 / 3,  # our added peak / torch's added peak
    "load": 2.0,  # load_trace / json parse
    "loadext_s": 0.3,
    "cprofile": 1.05,  # %%cprofile / %%prun
    "cell": 1 / 3,  # whole %%torchprof cell / hand-written way
}


# ------------------------------------------------------------------------------------- helpers


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak() -> bool:
    """Reset VmHWM (the peak RSS) of this process; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def machine() -> dict[str, Any]:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import msgspec
    import numpy
    import pandas
    import torch

    try:
        import psutil

        ram = psutil.virtual_memory().total
    except ImportError:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "ram_gb": round(ram / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "pandas": pandas.__version__,
        "msgspec": msgspec.__version__,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load_avg_at_start": os.getloadavg()[0],
    }


def collect_kwargs(collect: str) -> dict[str, bool]:
    parts = set(filter(None, collect.split(","))) - {"none"}
    return {"record_shapes": "shapes" in parts, "profile_memory": "memory" in parts}


def run_workload(n_iter: int) -> None:
    exec(workload_code(n_iter), {})


def profile_workload(n_iter: int, collect: str) -> tuple[Any, float, float]:
    """Profile the workload; returns (profiler, seconds of the run, seconds of torch's __exit__)."""
    from torch.profiler import profile

    prof = profile(activities=activities(), **collect_kwargs(collect))
    prof.__enter__()
    t0 = time.perf_counter()
    run_workload(n_iter)
    t1 = time.perf_counter()
    prof.__exit__(None, None, None)
    t2 = time.perf_counter()
    return prof, t1 - t0, t2 - t1


_CALIBRATION: dict[str, float] = {}


def iterations_for(events: int, collect: str) -> int:
    """Workload iterations that record about ``events`` events (events table rows)."""
    if collect not in _CALIBRATION:
        from nbprof.collect.torch_live import _save_and_read

        n = 300
        prof, _, _ = profile_workload(n, collect)
        trace, saved = _save_and_read(prof.profiler.kineto_results)  # (the table, torch's file: kept open)
        saved.close()
        rows = len(trace.events)
        _CALIBRATION[collect] = rows / n
        del prof
    return max(1, round(events / _CALIBRATION[collect]))


class _TimedResults:
    """kineto results whose ``save`` is timed (what nbprof's reader calls first)."""

    def __init__(self, results: Any) -> None:
        self._results = results
        self.save_s = 0.0

    def save(self, path: str) -> None:
        t0 = time.perf_counter()
        self._results.save(path)
        self.save_s = time.perf_counter() - t0


def ours(prof: Any, collect: str) -> tuple[dict[str, float], Any]:
    """nbprof's path from a stopped profiler to every table of the report, timed by stage."""
    from nbprof.collect import torch_live
    from nbprof.model import TorchProfile

    kw = collect_kwargs(collect)
    t0 = time.perf_counter()
    results = _TimedResults(prof.profiler.kineto_results)
    trace, saved = torch_live._save_and_read(results)  # save into /dev/shm, read, unlink the file
    saved.close()
    trace.meta.record_shapes, trace.meta.profile_memory = kw["record_shapes"], kw["profile_memory"]
    t1 = time.perf_counter()
    profile = TorchProfile.from_trace(trace, profiler=prof)  # events table + tree
    t2 = time.perf_counter()
    profile.key_averages("op")
    if kw["record_shapes"]:
        profile.key_averages("shape")
    profile.summary  # totals, top row, memory peaks
    t3 = time.perf_counter()
    stages = {
        "save": results.save_s,
        "read": t1 - t0 - results.save_s,
        "tree": t2 - t1,
        "tables": t3 - t2,
        "total": t3 - t0,
    }
    return stages, profile


def theirs(prof: Any, collect: str) -> tuple[float, int, dict[str, list[dict[str, Any]]]]:
    """torch's own path: ``events()``, ``key_averages()`` and (with shapes) by input shape.

    Returns the seconds, the number of events, and the averages as plain rows (taken after the
    clock stops), so that torch's objects can be freed before anything else runs."""
    t0 = time.perf_counter()
    events = prof.events()
    averages = prof.key_averages()
    shapes = prof.key_averages(group_by_input_shape=True) if collect_kwargs(collect)["record_shapes"] else None
    elapsed = time.perf_counter() - t0
    rows = {"op": _plain_rows(averages, False)}
    if shapes is not None:
        rows["shape"] = _plain_rows(shapes, True)
    return elapsed, len(events), rows


def _plain_rows(averages: Any, with_shapes: bool) -> list[dict[str, Any]]:
    out = []
    for a in averages:
        row = {f: getattr(a, f) for f in FIELDS}
        row["key"] = a.key
        row["device"] = str(a.device_type)
        row["input_shapes"] = str(a.input_shapes) if with_shapes else None
        out.append(row)
    return out


FIELDS = {
    "count": "count",
    "cpu_time_total": "cpu_total_us",
    "self_cpu_time_total": "self_cpu_us",
    "device_time_total": "device_total_us",
    "self_device_time_total": "self_device_us",
    "cpu_memory_usage": "cpu_mem_bytes",
    "self_cpu_memory_usage": "self_cpu_mem_bytes",
    "device_memory_usage": "device_mem_bytes",
    "self_device_memory_usage": "self_device_mem_bytes",
}


def agreement(profile: Any, torch_rows: list[dict[str, Any]], group_by: str) -> dict[str, Any]:
    """Do our key averages equal torch's? (keys, counts, times within 0.01 µs, bytes exact)"""
    theirs_rows = {}
    for a in torch_rows:
        key = (a["key"], a["device"].endswith("CUDA"))
        if group_by == "shape":
            key += (a["input_shapes"],)
        theirs_rows[key] = a
    ours_rows = {}
    for r in profile.key_averages(group_by).to_dict("records"):
        key = (r["name"], r["kind"] in ("kernel", "memcpy", "memset"))
        if group_by == "shape":
            key += (str(r["input_shapes"]),)
        ours_rows[key] = r
    worst_us, bad = 0.0, []
    for key in set(theirs_rows) & set(ours_rows):
        t, o = theirs_rows[key], ours_rows[key]
        for tf, of in FIELDS.items():
            diff = abs(o[of] - t[tf])
            exact = tf == "count" or "memory" in tf
            if exact and diff != 0 or not exact and diff > 0.01:
                bad.append((key, tf, o[of], t[tf]))
            if not exact:
                worst_us = max(worst_us, diff)
    missing = set(theirs_rows) ^ set(ours_rows)
    return {
        "keys": len(theirs_rows),
        "equal": not bad and not missing,
        "max_time_diff_us": worst_us,
        "mismatches": [str(b) for b in bad[:5]] + [f"key only on one side: {k}" for k in list(missing)[:5]],
    }


# --------------------------------------------------------------------------------- sections


def section_post(sizes: list[int], reps: list[int], collect: str, torch_max: int | None) -> list[dict[str, Any]]:
    rows = []
    for size, nrep in zip(sizes, reps):
        n_iter = iterations_for(size, collect)
        with_torch = torch_max is None or size <= torch_max
        per: dict[str, list[float]] = {k: [] for k in ("run", "exit", "save", "read", "tree", "tables", "ours", "torch",
                                                       "speedup", "vs_exit")}
        checks = []
        events = torch_events = 0
        for rep in range(nrep):
            gc.collect()
            prof, run_s, exit_s = profile_workload(n_iter, collect)
            order = ("ours", "torch") if rep % 2 == 0 else ("torch", "ours")
            stages = profile = torch_rows = None
            torch_s = float("nan")
            for which in order:
                gc.collect()
                if which == "ours":
                    stages, profile = ours(prof, collect)
                elif with_torch:
                    # torch's objects are freed inside (only plain rows come back)
                    torch_s, torch_events, torch_rows = theirs(prof, collect)
                    prof.profiler._function_events = None  # torch keeps them: free them now
            assert stages is not None and profile is not None
            events = len(profile.events)
            per["run"].append(run_s)
            per["exit"].append(exit_s)
            for k in ("save", "read", "tree", "tables"):
                per[k].append(stages[k])
            per["ours"].append(stages["total"])
            per["vs_exit"].append(stages["total"] / exit_s)
            if with_torch and torch_rows is not None:
                per["torch"].append(torch_s)
                per["speedup"].append(torch_s / stages["total"])
                check = {g: agreement(profile, rows, g) for g, rows in torch_rows.items()}
                checks.append(check)
            del prof, profile, torch_rows
            gc.collect()
            print(f"  post {size:>9,}: rep {rep + 1}/{nrep}: ours {stages['total']:.3f}s "
                  f"(save {stages['save']:.3f} read {stages['read']:.3f} tree {stages['tree']:.3f} "
                  f"tables {stages['tables']:.3f}), torch {torch_s:.3f}s, __exit__ {exit_s:.3f}s", flush=True)
        row = {
            "target_events": size,
            "events": events,
            "torch_events": torch_events,
            "reps": nrep,
            **{f"{k}_s": median(v) for k, v in per.items() if k not in ("speedup", "vs_exit")},
            "speedup": median(per["speedup"]),
            "vs_exit": median(per["vs_exit"]),
            "ours_us_per_event": 1e6 * median(per["ours"]) / events,
            "torch_us_per_event": 1e6 * median(per["torch"]) / events if per["torch"] else float("nan"),
            "exit_us_per_event": 1e6 * median(per["exit"]) / events,
            "agree": all(c[g]["equal"] for c in checks for g in c) if checks else None,
            "checks": checks[-1] if checks else None,
        }
        rows.append(row)
    return rows


def section_scaling(sizes: list[int], reps: int, collect: str) -> dict[str, Any]:
    """Our post-processing alone (``ours``: save + read + tree + tables) at each of ``sizes``, the
    sizes' order alternating per repetition: µs per event at each size (medians), and
    ``ratio``: the largest size's µs/event over the smallest's (the "cost linear in events"
    target; torch's path is not run: post measures it)."""
    per: dict[int, list[float]] = {size: [] for size in sizes}
    events: dict[int, int] = {}
    iters = {size: iterations_for(size, collect) for size in sizes}
    for rep in range(reps):
        for size in (sizes if rep % 2 == 0 else sizes[::-1]):
            prof, _, _ = profile_workload(iters[size], collect)
            gc.collect()
            stages, profile = ours(prof, collect)
            events[size] = len(profile.events)
            per[size].append(1e6 * stages["total"] / events[size])
            del prof, profile
    us = {size: median(v) for size, v in per.items()}
    return {"us_per_event": us, "events": events, "ratio": us[max(sizes)] / us[min(sizes)], "reps": reps}


def _child_memory(n_iter: int, path: str, collect: str) -> None:
    """(in a fresh process) the peak memory one path adds over the stopped profiler.

    Both paths first run once on a tiny profile, so that what is measured is the post-processing
    of the big one, not one-time imports (reported apart, for nbprof: pandas and nbprof itself)."""
    import shutil

    before_imports = rss_bytes()
    if path == "ours":
        import nbprof.model  # noqa: F401  (pandas, numpy, msgspec, nbprof)
    imports = rss_bytes() - before_imports
    small, _, _ = profile_workload(3, collect)
    ours(small, collect) if path == "ours" else theirs(small, collect)
    del small
    prof, _, _ = profile_workload(n_iter, collect)
    gc.collect()
    before = rss_bytes()
    if not reset_peak():
        print(json.dumps({"error": "cannot reset VmHWM (/proc/self/clear_refs)"}))
        return
    extra = 0
    if path == "ours":
        from nbprof.collect import chrome_trace, torch_live

        sizes = []
        original = torch_live.read_trace_file

        def read(p: str, **kwargs: Any) -> Any:  # the scratch file is in RAM (/dev/shm) while we read it
            sizes.append(os.path.getsize(p) if os.path.dirname(p) == "/dev/shm" else 0)
            return original(p, **kwargs)

        torch_live.read_trace_file = read
        stages, profile = ours(prof, collect)
        extra = sizes[0] if sizes else 0
        events = len(profile.events)
        del chrome_trace
    else:
        _, events, _ = theirs(prof, collect)
    peak = peak_bytes()
    print(json.dumps({"added_rss": peak - before, "scratch_file": extra, "events": events, "imports": imports,
                      "shm_free": shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else None}))


def section_memory(sizes: list[int], collect: str, torch_max: int | None) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        n_iter = iterations_for(size, collect)
        row: dict[str, Any] = {"target_events": size}
        for path in ("ours", "torch"):
            if path == "torch" and torch_max is not None and size > torch_max:
                continue
            out = subprocess.run(
                [sys.executable, __file__, "--_child", "memory", "--_n-iter", str(n_iter), "--_path", path,
                 "--collect", collect, "--device", DEVICE],
                capture_output=True, text=True, check=False,
            )
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if not lines:  # e.g. killed for memory: say so, keep going
                print(f"  memory {size:>9,} {path}: the child process failed (exit {out.returncode}): "
                      f"{out.stderr.strip()[-300:]}", flush=True)
                row[f"{path}_failed"] = f"exit {out.returncode}"
                continue
            res = json.loads(lines[-1])
            if "error" in res:
                raise RuntimeError(res["error"])
            row[path] = res
            print(f"  memory {size:>9,} {path}: +{res['added_rss'] / 2**20:.0f} MiB RSS"
                  + (f" + {res['scratch_file'] / 2**20:.0f} MiB scratch file" if res.get("scratch_file") else ""),
                  flush=True)
        if "ours" not in row:
            continue
        ours_total = row["ours"]["added_rss"] + row["ours"]["scratch_file"]
        row["ours_total"] = ours_total
        row["events"] = row["ours"]["events"]
        if "torch" in row:
            row["ratio"] = ours_total / max(row["torch"]["added_rss"], 1)
        rows.append(row)
    return rows


def section_load(size: int, reps: int, collect: str, others: bool = True, collector: bool = True) -> dict[str, Any]:
    """``load_trace`` against ``json.load`` on a trace torch wrote for ``size`` events; with
    ``others``, also load_trace with the tables, msgspec's and orjson's untyped parsers. With
    ``collector`` False, each timed call runs with the cyclic garbage collector paused: the parsing
    alone, what tests/test_perf_guards.py compares (the collector's share depends on the heap the
    process already holds, not on the code measured)."""
    import msgspec

    import nbprof

    try:
        import orjson
    except ImportError:
        orjson = None
    n_iter = iterations_for(size, collect)
    prof, _, _ = profile_workload(n_iter, collect)
    folder = tempfile.mkdtemp(prefix="nbprof-bench-")
    path = os.path.join(folder, "trace.json")
    prof.export_chrome_trace(path)  # torch's own writer
    del prof
    gc.collect()

    def json_load() -> None:
        with open(path, "rb") as f:
            json.load(f)

    def msgspec_load() -> None:
        with open(path, "rb") as f:
            msgspec.json.decode(f.read())

    def orjson_load() -> None:
        with open(path, "rb") as f:
            orjson.loads(f.read())

    def ours_load() -> None:
        nbprof.load_trace(path)

    def ours_tables() -> None:
        p = nbprof.load_trace(path)
        p.key_averages("op")
        p.key_averages("shape")
        p.summary

    fns: dict[str, Callable[[], None]] = {"load_trace": ours_load, "json.load": json_load}
    if others:
        fns.update({"load_trace+tables": ours_tables, "msgspec (untyped)": msgspec_load})
        if orjson is not None:
            fns["orjson"] = orjson_load
    times: dict[str, list[float]] = {k: [] for k in fns}
    ratios = []
    # json.load's time is mostly the cyclic collector walking its new containers: with the collector
    # off (something else in the process paused it) it ran 3.5x faster in one CI run and the ratio
    # read 0.64. Measured as a user's process runs, the collector on (unless ``collector`` is False);
    # its state is restored after. How often it walks depends on the heap already there: a pytest
    # worker's read 0.33-0.34 in stop 56's CI where a fresh process reads 0.15-0.27
    gc_was_enabled = gc.isenabled()
    gc.enable()
    try:
        for rep in range(reps):
            for name, fn in (list(fns.items()) if rep % 2 == 0 else list(fns.items())[::-1]):  # the order alternating
                gc.collect()
                if not collector:
                    gc.disable()
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
                gc.enable()
            ratios.append(times["load_trace"][-1] / times["json.load"][-1])
            print(f"  load rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.3f}s" for k, v in times.items()), flush=True)
    finally:
        if not gc_was_enabled:
            gc.disable()
    events = len(nbprof.load_trace(path).events)
    size_mb = os.path.getsize(path) / 1e6
    os.remove(path)
    os.rmdir(folder)
    return {"events": events, "file_mb": size_mb, **{k: median(v) for k, v in times.items()},
            "ratio": median(ratios), "ratio_best": min(times["load_trace"]) / min(times["json.load"]),
            "gc_was_enabled": gc_was_enabled, "collector": collector}


LOADEXT_CHILD = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
t1, c1 = time.perf_counter(), time.process_time()
before = set(sys.modules)
shell.run_line_magic("load_ext", "nbprof")
t2, c2 = time.perf_counter(), time.process_time()
new = set(sys.modules) - before
print(json.dumps({"s": t2 - t1, "ipython_s": t1 - t0, "cpu_s": c2 - c1, "ipython_cpu_s": c1 - c0,
                  "torch": "torch" in sys.modules, "plotly": "plotly" in sys.modules,
                  "pandas": "pandas" in sys.modules, "new_modules": len(new)}))
"""


def section_loadext(reps: int) -> dict[str, Any]:
    """``%load_ext nbprof`` in ``reps`` fresh processes; beside it, in each, the bare IPython shell's
    own start (importing IPython, ``start_ipython()``): ``ratio`` is the median of load_ext / start,
    what a shared machine's speed moves less than the seconds; ``cpu_ratio`` the same in CPU
    seconds, which moved less again (tests/test_perf_guards.py)."""
    runs = []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-c", LOADEXT_CHILD], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": ROOT}, check=False)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError(out.stderr[-2000:])
        runs.append(json.loads(lines[-1]))
    res = {"s": median([r["s"] for r in runs]), "max_s": max(r["s"] for r in runs),
           "ipython_s": median([r["ipython_s"] for r in runs]), "ratio": median([r["s"] / r["ipython_s"] for r in runs]),
           "cpu_ratio": median([r["cpu_s"] / r["ipython_cpu_s"] for r in runs]),
           "torch": any(r["torch"] for r in runs), "plotly": any(r["plotly"] for r in runs),
           "pandas": any(r["pandas"] for r in runs), "new_modules": max(r["new_modules"] for r in runs), "reps": reps}
    print(f"  %load_ext nbprof: {res['s']:.3f}s (max {res['max_s']:.3f}s; {res['ratio']:.3f} of a bare IPython "
          f"start, {res['ipython_s']:.3f}s), torch imported: {res['torch']}, plotly imported: {res['plotly']}",
          flush=True)
    return res


_SMALL_CELL = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def work():
    total = 0
    for i in range(200):
        total += len(str(i) * 10) + sum(range(i))
        sorted([j % 7 for j in range(i)])
    return total + fib(20)

result = work()
"""
_MEDIUM_CELL = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def work():
    total = 0
    for i in range(2000):
        total += len(str(i) * 10) + sum(range(i % 300))
        sorted([j % 7 for j in range(i % 300)])
    return total + fib(25)

result = work()
"""
CPROFILE_CELLS = {
    # ~10 ms unprofiled: fixed costs (flag parsing, tables, report) dominate
    "small": _SMALL_CELL,
    # ~50 ms unprofiled: the profiler's own per-call cost dominates
    "medium": _MEDIUM_CELL,
    # not a like-for-like comparison, shown for what it costs: the cell ends in an expression.
    # %%cprofile displays its value as the cell would without the magic (IPython's displayhook
    # tokenizes the cell to look for a trailing ";", ~1 ms here); %%prun discards the value.
    "small, value displayed": _SMALL_CELL.replace("result = work()", "work()"),
}
LIKE_FOR_LIKE = ("small", "medium")
LONG_SESSION = 10_000  # earlier cells of a kernel that has run for days (_long_session)


def _shell() -> Any:
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()  # one test shell per process
    shell.run_line_magic("load_ext", "nbprof")
    return shell


def _run_cell(shell: Any, code: str) -> float:
    from IPython.utils.capture import capture_output

    t0 = time.perf_counter()
    with capture_output():
        result = shell.run_cell(code, store_history=True)
    elapsed = time.perf_counter() - t0
    if result.error_in_exec is not None or result.error_before_exec is not None:
        raise RuntimeError(f"cell failed: {result.error_in_exec or result.error_before_exec}")
    return elapsed


@contextlib.contextmanager
def _long_session(shell: Any, cells: int) -> Iterator[None]:
    """The shell as a notebook open for a day leaves it: ``cells`` earlier cells' names in the
    namespace (a variable of each, IPython's ``_i<n>``) and their files in IPython's table of cell
    files (ipykernel's ``<tmp>/ipykernel_<pid>/<hash>.py``); all taken out again after. A profiled
    cell's cost must not grow with them (it did: naming DataLoaders walked the whole namespace,
    naming cell files keyed the whole table, each run)."""
    table = shell.compile._filename_map
    names = [f"session_value_{i}" for i in range(cells)] + [f"_i{100_000 + i}" for i in range(cells)]
    files = [f"/tmp/ipykernel_4242/{1_000_000_007 * i % 2**32}.py" for i in range(cells)]
    for i, name in enumerate(names):
        shell.user_ns[name] = [i]
    for i, f in enumerate(files):
        table.setdefault(f, 100_000 + i)
    try:
        yield
    finally:
        for name in names:
            shell.user_ns.pop(name, None)
        for f in files:
            table.pop(f, None)


def section_cprofile(reps: int, cells: tuple[str, ...] | None = None, shown: bool = True,
                     session: int = 0) -> dict[str, Any]:
    """``%%cprofile`` against ``%%prun`` on ``cells`` (names in CPROFILE_CELLS; default all), quiet
    (``-q``) and, with ``shown``, with their output; then our cProfile tables against pstats. With
    ``session``: in a long session of that many earlier cells (``_long_session``), each cell's
    result under "<name>, after <session> cells"."""
    with _long_session(_shell(), session):
        return _section_cprofile(reps, cells, shown, f", after {session} cells" if session else "")


def _section_cprofile(reps: int, cells: tuple[str, ...] | None, shown: bool, suffix: str) -> dict[str, Any]:
    import cProfile
    import pstats

    from nbprof.model import PythonProfile, _RawStats

    shell = _shell()
    res: dict[str, Any] = {"reps": reps, "cells": {}}
    for cell_name, cell in CPROFILE_CELLS.items():
        if cells is not None and cell_name not in cells:
            continue
        cell_name += suffix
        variants = {
            "plain": cell,
            "%%cprofile -q": "%%cprofile -q\n" + cell,
            "%%prun -q": "%%prun -q\n" + cell,
        }
        if shown:
            variants.update({"%%cprofile": "%%cprofile\n" + cell, "%%prun": "%%prun\n" + cell})
        for code in variants.values():  # warm up: imports, caches
            _run_cell(shell, code)
        times: dict[str, list[float]] = {k: [] for k in variants}
        quiet: list[float] = []
        shown_ratios: list[float] = []
        for rep in range(reps):
            names = list(variants)
            if rep % 2:
                names.reverse()
            for name in names:
                times[name].append(_run_cell(shell, variants[name]))
            quiet.append(times["%%cprofile -q"][-1] / times["%%prun -q"][-1])
            if shown:
                shown_ratios.append(times["%%cprofile"][-1] / times["%%prun"][-1])
        plain = median(times["plain"])
        r = {
            "plain_s": plain,
            **{f"{k}_s": median(v) for k, v in times.items() if k != "plain"},
            "ratio_quiet": median(quiet),
            "ratio_shown": median(shown_ratios),
            "overhead_ratio_quiet": (median(times["%%cprofile -q"]) - plain) / (median(times["%%prun -q"]) - plain),
        }
        res["cells"][cell_name] = r
        print(f"  {cell_name} cell (unprofiled {plain * 1e3:.0f} ms): %%cprofile/%%prun quiet {r['ratio_quiet']:.3f} "
              f"({r['%%cprofile -q_s'] * 1e3:.0f} vs {r['%%prun -q_s'] * 1e3:.0f} ms)"
              + (f", with report {r['ratio_shown']:.3f} ({r['%%cprofile_s'] * 1e3:.0f} vs {r['%%prun_s'] * 1e3:.0f} ms)"
                 if shown else ""), flush=True)

    # building the tables: ours (the stats and call-graph tables) against pstats sort + print,
    # on the raw stats of a profile with many functions
    prof = cProfile.Profile()
    prof.enable()
    _many_functions()
    prof.disable()
    prof.create_stats()
    raw = prof.stats
    t_ours, t_render, t_pstats, t_floor = [], [], [], []
    for _ in range(max(21, reps)):  # ~30 ms a repetition
        t0 = time.perf_counter()
        p = PythonProfile(dict(raw))
        p.stats, p.edges  # the tables are built on first use: build both
        t1 = time.perf_counter()
        p.report().text()
        t2 = time.perf_counter()
        stream = io.StringIO()
        st = pstats.Stats(_RawStats(dict(raw)), stream=stream)
        st.sort_stats("tottime").print_stats()
        t3 = time.perf_counter()
        _pandas_floor(dict(raw))
        t4 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_render.append(t2 - t0)
        t_pstats.append(t3 - t2)
        t_floor.append(t4 - t3)
    res.update(
        functions=len(raw),
        tables_s=median(t_ours),
        tables_and_text_s=median(t_render),
        pstats_s=median(t_pstats),
        tables_ratio=median([a / b for a, b in zip(t_ours, t_pstats)]),
        # ours over the least pandas does with the same stats (what the guard bounds): the VM's
        # slow spells, seconds to minutes, fall on pandas' and numpy's fresh arrays more than on
        # pstats' small dicts (ours over pstats swung 0.38-0.74 on unchanged code), on both alike here
        floor_s=median(t_floor),
        tables_over_floor=median([a / b for a, b in zip(t_ours, t_floor)]),
        tables_and_text_ratio=median([a / b for a, b in zip(t_render, t_pstats)]),
    )
    print(f"  tables {res['tables_s'] * 1e3:.1f} ms vs pstats sort+print {res['pstats_s'] * 1e3:.1f} ms "
          f"({res['functions']} functions)", flush=True)
    return res


def _pandas_floor(raw: dict) -> tuple[Any, Any]:
    """The least pandas does with cProfile's raw stats: one row per function and one per
    caller -> callee edge, the numbers as cProfile gives them (no names, units, shares or sorting:
    what our tables add)."""
    import pandas as pd

    functions = pd.DataFrame.from_records(
        [(*key, *value[:4]) for key, value in raw.items()],
        columns=["file", "line", "function", "primitive_calls", "calls", "tottime", "cumtime"])
    edges = pd.DataFrame.from_records(
        [(caller, callee, *numbers) for callee, value in raw.items() for caller, numbers in value[4].items()])
    return functions, edges


def _many_functions() -> None:
    """A profile with a few thousand distinct functions (generated code plus stdlib)."""
    import ast
    import textwrap

    src = "\n".join(textwrap.dedent(f"""
        def f{i}(x):
            return x + {i} if x % 3 else g{i}(x)
        def g{i}(x):
            return [x] * 2
        """) for i in range(1500))
    ns: dict[str, Any] = {}
    exec(compile(src, "<generated>", "exec"), ns)
    for i in range(1500):
        ns[f"f{i}"](i)
        ns[f"f{i}"](i + 1)
    for _ in range(3):
        ast.parse(src[:20000])
        json.dumps({str(i): list(range(i % 10)) for i in range(500)})


def section_cell(size: int, reps: int, collect: str, collector: bool = True) -> dict[str, Any]:
    """The whole ``%%torchprof`` cell against the hand-written way in one shell, alternating:
    ``ratio`` in wall time (the target's), ``cpu_ratio`` in CPU seconds of this process (what the
    machine's other jobs move less: the hand-written way's Python slowed more under load than ours,
    so the wall ratio fell as the load rose). With ``collector`` False each cell runs with the cyclic
    garbage collector paused (tests/test_perf_guards.py): the hand-written way's ~10 Python objects
    an event cost it less collecting the larger the heap the process already holds, so with it on
    the ratio read the heap (0.29-0.36 bare, 0.55-0.59 holding 3 M lists; 2026-12-02)."""
    n_iter = iterations_for(size, collect)
    kw = collect_kwargs(collect)
    flags = " ".join(f for f, on in (("--shapes", kw["record_shapes"]), ("--memory", kw["profile_memory"])) if on)
    body = workload_code(n_iter)
    indented = "\n".join("    " + ln for ln in body.strip().splitlines())
    cuda_flag = "--cuda" if DEVICE == "cuda" else "--no-cuda"
    ours_cell = f"%%torchprof {cuda_flag} {flags}\n{body}"
    hand_cell = (
        "from torch.profiler import profile, ProfilerActivity\n"
        f"with profile(activities=[ProfilerActivity.CPU{', ProfilerActivity.CUDA' if DEVICE == 'cuda' else ''}], "
        f"record_shapes={kw['record_shapes']}, "
        f"profile_memory={kw['profile_memory']}) as prof:\n{indented}\n"
        "print(prof.key_averages().table())\n"
    )
    plain_cell = body
    shell = _shell()
    _run_cell(shell, workload_code(50))  # imports
    times: dict[str, list[float]] = {"%%torchprof": [], "hand-written": [], "unprofiled": []}
    cpu: dict[str, list[float]] = {k: [] for k in times}
    ratios = []
    for rep in range(reps):
        order = [("%%torchprof", ours_cell), ("hand-written", hand_cell), ("unprofiled", plain_cell)]
        if rep % 2:
            order = order[1::-1] + order[2:]
        for name, code in order:
            gc.collect()
            if not collector:
                gc.disable()
            c0 = time.process_time()
            try:
                times[name].append(_run_cell(shell, code))
                cpu[name].append(time.process_time() - c0)
            finally:
                gc.enable()
            shell.user_ns.pop("prof", None)
            gc.collect()
        ratios.append(times["%%torchprof"][-1] / times["hand-written"][-1])
        print(f"  cell rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    return {"target_events": size, **{f"{k}_s": median(v) for k, v in times.items()}, "ratio": median(ratios),
            "cpu_ratio": median([a / b for a, b in zip(cpu["%%torchprof"], cpu["hand-written"])]), "reps": reps}


# ------------------------------------------------------------------------------------ report


def fmt_s(s: float) -> str:
    if s != s:
        return "–"
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


def verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "NOT met")


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"Measured {m['date']} on {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM ({m['os']}); "
        f"Python {m['python']}, torch {m['torch']} (CPU), numpy {m['numpy']}, pandas {m['pandas']}, "
        f"msgspec {m['msgspec']}. Load average at start: {m['load_avg_at_start']:.1f} (a shared machine: "
        f"absolute times vary run to run; ratios are measured side by side in one run).",
        f"Command: `{results['command']}`. Workload: small {results.get('device', 'cpu').upper()} tensor ops "
        f"under `record_function`, collected with `{results['collect']}`.",
        "",
    ]
    targets = []
    if "post" in results:
        lines += [
            "**Post-processing** (profiler stopped → every table of the report ready), medians:",
            "",
            "| events | torch events | reps | torch `__exit__` | ours: save + read + tree + tables = total | "
            "torch `events()` + `key_averages()` (+ by shape) | speedup | ours / `__exit__` | ours µs/event | "
            "torch µs/event | numbers equal torch's |",
            "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in results["post"]:
            agree = "–" if r["agree"] is None else ("yes" if r["agree"] else "NO")
            if r["checks"]:
                keys = ", ".join(f"{g}: {c['keys']} keys, max Δt {c['max_time_diff_us']:.3f} µs"
                                 for g, c in r["checks"].items())
                agree += f" ({keys})"
            lines.append(
                f"| {r['events']:,} | {r['torch_events']:,} | {r['reps']} | {fmt_s(r['exit_s'])} | "
                f"{fmt_s(r['save_s'])} + {fmt_s(r['read_s'])} + {fmt_s(r['tree_s'])} + {fmt_s(r['tables_s'])} "
                f"= **{fmt_s(r['ours_s'])}** | {fmt_s(r['torch_s'])} | **{r['speedup']:.1f}x** | "
                f"**{r['vs_exit']:.2f}** | {r['ours_us_per_event']:.2f} | {r['torch_us_per_event']:.1f} | {agree} |"
            )
            # the issue sets both targets at 100k and 1M events; smaller profiles are shown, not judged
            # (there fixed costs of ~20-40 ms weigh against an __exit__ of ~80-90 ms)
            if r["target_events"] >= 100_000 and r["speedup"] == r["speedup"]:
                targets.append((f"≥10x faster than torch at {r['events']:,} events",
                                f"{r['speedup']:.1f}x", r["speedup"] >= TARGETS["speedup"]))
            if r["target_events"] >= 100_000:
                targets.append((f"no slower than torch's `__exit__` at {r['events']:,} events",
                                f"{r['vs_exit']:.2f}x of `__exit__`", r["vs_exit"] <= TARGETS["vs_exit"]))
        per = [f"{r['ours_us_per_event']:.2f} µs at {r['events']:,}" for r in results["post"]]
        lines += ["", "Our cost per event: " + ", ".join(per) + ".", ""]
    if "memory" in results:
        imports = max((r["ours"].get("imports", 0) for r in results["memory"] if "ours" in r), default=0)
        lines += [
            "**Peak memory added** by post-processing (fresh process per path, each path run once on a tiny "
            "profile first; VmHWM − RSS before; ours adds the scratch trace file in /dev/shm, which is RAM and "
            f"not mapped into the process). Not included: importing pandas and nbprof, once per session "
            f"(+{imports / 2**20:.0f} MiB RSS here).",
            "",
            "| events | ours (RSS + scratch file) | torch | ours / torch |",
            "|---:|---:|---:|---:|",
        ]
        for r in results["memory"]:
            if "ours" not in r:
                lines.append(f"| ~{r['target_events']:,} | failed ({r.get('ours_failed')}) | – | – |")
                continue
            o = r["ours"]
            t = r.get("torch")
            if t is None and r.get("torch_failed"):
                lines.append(f"| {r['events']:,} | {r['ours_total'] / 2**20:.0f} MiB | torch's run failed "
                             f"({r['torch_failed']}, e.g. out of memory) | – |")
                continue
            lines.append(
                f"| {r['events']:,} | {(o['added_rss']) / 2**20:.0f} + {o['scratch_file'] / 2**20:.0f} = "
                f"**{r['ours_total'] / 2**20:.0f} MiB** | "
                + (f"{t['added_rss'] / 2**20:,.0f} MiB | **{r['ratio']:.3f}** |" if t else "– | – |")
            )
            if "ratio" in r:
                targets.append((f"peak memory ≤ 1/3 of torch's at {r['events']:,} events", f"{r['ratio']:.3f}",
                                r["ratio"] <= TARGETS["memory"]))
        lines.append("")
    if "load" in results:
        r = results["load"]
        lines += [
            f"**load_trace** on a {r['file_mb']:.0f} MB trace torch wrote ({r['events']:,} events), medians: "
            f"`nbprof.load_trace` {fmt_s(r['load_trace'])} (with every table: {fmt_s(r['load_trace+tables'])}); "
            f"`json.load` {fmt_s(r['json.load'])}; msgspec untyped {fmt_s(r['msgspec (untyped)'])}"
            + (f"; orjson {fmt_s(r['orjson'])}" if "orjson" in r else "")
            + f". load_trace / json.load = **{r['ratio']:.2f}**.",
            "",
        ]
        targets.append(("`load_trace` ≤ 2x parsing the JSON (json.load)", f"{r['ratio']:.2f}x",
                        r["ratio"] <= TARGETS["load"]))
    if "loadext" in results:
        r = results["loadext"]
        lines += [
            f"**`%load_ext nbprof`** in a fresh shell: median {fmt_s(r['s'])} (max {fmt_s(r['max_s'])}, "
            f"{r['reps']} processes; {r['ratio']:.3f} of the bare shell's own start, {fmt_s(r['ipython_s'])}); "
            f"imports torch: {r['torch']}, plotly: {r['plotly']}, pandas: {r['pandas']}.",
            "",
        ]
        targets.append(("`%load_ext` < 0.3 s, no torch/plotly", f"{r['s']:.3f} s, torch {r['torch']}, "
                        f"plotly {r['plotly']}", r["s"] < TARGETS["loadext_s"] and not r["torch"] and not r["plotly"]))
    if "cprofile" in results:
        r = results["cprofile"]
        lines += [
            f"**%%cprofile vs %%prun** (same cell in one shell, {r['reps']} runs of each variant, alternating; "
            "\"quiet\" = `-q`: no output (our tables are built when first looked at; `%%prun -q` still sorts "
            "and prints its stats into a string); \"shown\" = our report displayed / pstats' text paged):",
            "",
            "| cell | unprofiled | `%%cprofile -q` | `%%prun -q` | ratio | `%%cprofile` | `%%prun` | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, c in r["cells"].items():
            lines.append(
                f"| {name} | {fmt_s(c['plain_s'])} | {fmt_s(c['%%cprofile -q_s'])} | {fmt_s(c['%%prun -q_s'])} | "
                f"**{c['ratio_quiet']:.3f}** | {fmt_s(c['%%cprofile_s'])} | {fmt_s(c['%%prun_s'])} | "
                f"**{c['ratio_shown']:.3f}** |"
            )
            if name.removesuffix(f", after {LONG_SESSION} cells") in LIKE_FOR_LIKE:
                targets.append((f"`%%cprofile` / `%%prun` within 5 % ({name} cell, quiet)",
                                f"{c['ratio_quiet']:.3f}", c["ratio_quiet"] <= TARGETS["cprofile"]))
        lines += [
            "",
            "The report shown is not part of the 5 % target: `%%prun` pages a text table, ours builds the "
            "report (tables, call graph, flame view); its cost is the \"shown\" minus the \"quiet\" time.",
        ]
        lines += [
            "",
            f"Tables of a {r['functions']:,}-function profile: {r['tables_s'] * 1e3:.1f} ms "
            f"(+ text report: {r['tables_and_text_s'] * 1e3:.1f} ms) vs pstats sort + print "
            f"{r['pstats_s'] * 1e3:.1f} ms → **{r['tables_ratio']:.2f}** ({r['tables_and_text_ratio']:.2f} with our text).",
            "",
        ]
        targets.append(("cProfile tables no slower than pstats sort + print", f"{r['tables_ratio']:.2f}x",
                        r["tables_ratio"] <= 1.0))
    if "cell" in results:
        r = results["cell"]
        lines += [
            f"**Whole cell** (~{r['target_events']:,} events, run in a real IPython shell, {r['reps']} reps): "
            f"`%%torchprof` {fmt_s(r['%%torchprof_s'])} vs hand-written `with profile(...)` + "
            f"`print(prof.key_averages().table())` {fmt_s(r['hand-written_s'])} (unprofiled "
            f"{fmt_s(r['unprofiled_s'])}) → **{r['ratio']:.2f}**.",
            "",
        ]
        targets.append(("whole `%%torchprof` cell ≤ 1/3 of the hand-written way", f"{r['ratio']:.2f}",
                        r["ratio"] <= TARGETS["cell"]))
    lines += ["| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {verdict(ok)} |" for t, v, ok in targets]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="event counts (comma-separated)")
    ap.add_argument("--reps", default="auto",
                    help="repetitions per size: one number, one per size, or auto (7 up to 10k events, "
                         "5 up to 100k, 1 above)")
    ap.add_argument("--collect", default="shapes,memory", help="shapes,memory | shapes | memory | none")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the workload runs (cuda: CUDA activity recorded too; not run here: no GPU)")
    ap.add_argument("--only", default="post,memory,load,loadext,cprofile,cell", help="sections to run")
    ap.add_argument("--torch-max", type=int, default=None,
                    help="skip torch's own path above this many events (ours is still timed)")
    ap.add_argument("--load-size", type=int, default=100_000)
    ap.add_argument("--cell-size", type=int, default=100_000)
    ap.add_argument("--cprofile-reps", type=int, default=31)
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--markdown", default=None, help="write the results section here")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_n-iter", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--_path", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if args._child == "memory":
        _child_memory(args._n_iter, args._path, args.collect)
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    if args.reps == "auto":
        reps = [7 if s <= 10_000 else 5 if s <= 100_000 else 1 for s in sizes]
    else:
        reps = [int(r) for r in args.reps.split(",")]
        reps = (reps * len(sizes))[: len(sizes)] if len(reps) == 1 else reps
    if len(reps) != len(sizes):
        ap.error("--reps: one number, or one per size")
    only = set(args.only.split(","))
    results: dict[str, Any] = {"machine": machine(), "collect": args.collect, "device": DEVICE,
                               "command": "python benchmarks/bench_profiling.py " + " ".join(sys.argv[1:])}
    print(f"machine: {results['machine']}", flush=True)
    started = time.perf_counter()
    def save_json() -> None:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, default=str)

    if "post" in only:
        print("post-processing:", flush=True)
        results["post"] = section_post(sizes, reps, args.collect, args.torch_max)
        save_json()
    if "memory" in only:
        print("peak memory:", flush=True)
        results["memory"] = section_memory(sizes, args.collect, args.torch_max)
        save_json()
    if "load" in only:
        print("load_trace:", flush=True)
        results["load"] = section_load(args.load_size, max(3, max(reps)), args.collect)
        save_json()
    if "loadext" in only:
        print("%load_ext:", flush=True)
        results["loadext"] = section_loadext(5)
        save_json()
    if "cprofile" in only:
        print("%%cprofile:", flush=True)
        results["cprofile"] = section_cprofile(args.cprofile_reps)
        # the small cell again in a long session: what a cell costs must not grow with the session
        long = section_cprofile(args.cprofile_reps, cells=("small",), shown=True, session=LONG_SESSION)
        results["cprofile"]["cells"].update(long["cells"])
        save_json()
    if "cell" in only:
        print("whole cell:", flush=True)
        results["cell"] = section_cell(args.cell_size, max(3, max(reps)), args.collect)
        save_json()
    results["wall_s"] = time.perf_counter() - started
    text = markdown(results)
    print()
    print(text)
    save_json()
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
