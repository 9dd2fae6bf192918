"""Performance guards: every target a benchmark in benchmarks/ states, at a small size, in the full tier.

A benchmark's full run takes minutes to an hour and is rerun by hand (benchmarks/RESULTS.md), so a
change that made a path twice as slow would wait for someone to rerun it. Each guard here measures
the same ratio as its benchmark, with the benchmark's own measuring function (imported from
benchmarks/), at a size that takes seconds: both sides in one run, the order alternating, the
median of a few repetitions, CPU seconds where the benchmark's own ratio allows it. The bounds hold
the room a shared machine needs (set from runs beside six other engineers' test runs on the 2
cores, load average 8-14) and fail when the measured path costs twice what it does: each guard was
checked against a planted 2x slowdown of its path. docs/testing.md ("Performance guards") has each
one's measurements, bound and planted result.

What a guard does not do: judge the benchmark's own target at its own size (100 k and 1 M events,
8 ranks of 1 M events: that is the benchmark's run), or bound a wall-clock time by itself.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from .guards import report, within

ROOT = Path(__file__).resolve().parent.parent

# one after the other on one worker (the full tier runs with --dist loadgroup): two guards measuring
# at once would be each other's load
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("perf_guards")]


def bench(name: str) -> ModuleType:
    """A module of benchmarks/ (not a package), imported once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# -- a folder of ranks (benchmarks/bench_cluster.py) ---------------------------------------------------


@pytest.fixture(scope="module")
def tiled(tmp_path_factory) -> dict[str, Path]:
    """bench_cluster's tiled H100 rank: one of ~200 k events (a rank's summary against its plain
    load) and a folder of 4 ranks of ~100 k (the folder path, workers included)."""
    root = tmp_path_factory.mktemp("tiled")
    one, _ = bench("bench_cluster").make_folder(root, 1, SUMMARY_EVENTS)
    four, _ = bench("bench_cluster").make_folder(root, FOLDER_RANKS, FOLDER_EVENTS)
    return {"rank": one / "rank0.pt.trace.json.gz", "folder": four}


SUMMARY_EVENTS = 200_000
FOLDER_RANKS, FOLDER_EVENTS = 4, 100_000

# A rank's summary (read, tree, every per-rank table: what a folder's worker computes) against a
# plain load_trace + key_averages of the same file: the tables on top of the read. Measured here
# 1.20-1.41; with analysis/ranges.range_labels' old astype(str) (e5b23fc) 1.95-2.31, with the
# tables computed twice 1.61.
SUMMARY_MAX = 1.5


def test_a_ranks_summary_costs_little_more_than_loading_it(tiled):
    from nbprof.cluster.summary import rank_summary

    rank_summary(str(tiled["rank"]))  # imports, first-use caches
    within("rank summary / load_trace + key_averages",
           lambda: bench("bench_cluster").summary_ratio(str(tiled["rank"]), reps=3),
           lambda m: [m["ratio"]] if m["ratio"] > SUMMARY_MAX else [])


# load_trace(folder of 4 ranks, 2 workers) + the report's tables against one rank's plain load, CPU
# of every process: 4 ranks' summaries and 2 workers' start (imports). Measured here 9.5-10.8; each
# rank summarized twice in its worker: 16.2-17.6.
FOLDER_MAX = 12.5


def test_a_folder_of_ranks_costs_about_its_ranks(tiled):
    import nbprof

    nbprof.load_trace(str(tiled["folder"] / "rank0.pt.trace.json.gz"))
    within("4 ranks (2 workers) / one rank's plain load, CPU",
           lambda: bench("bench_cluster").folder_ratio(str(tiled["folder"]),
                                                       str(tiled["folder"] / "rank0.pt.trace.json.gz"), reps=2),
           lambda m: [m["ratio"]] if m["ratio"] > FOLDER_MAX else [])


# -- post-processing, memory, loading, %load_ext, cProfile, the whole cell (bench_profiling.py) ---------


@pytest.fixture(scope="module")
def profiling():
    pytest.importorskip("torch")
    b = bench("bench_profiling")
    b.iterations_for(POST_EVENTS, COLLECT)  # calibrate the workload once
    return b


COLLECT = "shapes,memory"
POST_EVENTS = 10_000
# torch's events() + key_averages() (+ by shape) over ours (save + read + tree + tables), on the
# same stopped profiler, wall time: target >= 10x at 100 k and 1 M events (9.9x at 10 k in
# RESULTS.md on a quiet machine), here 5.5-6.8x; ours taking twice as long: 2.9x. Ours over torch's
# own __exit__: target <= 1 (0.81-0.92), here 1.18-1.45; twice as long: 2.36.
SPEEDUP_MIN = 4.0
VS_EXIT_MAX = 2.0


def test_post_processing_beats_torchs_events_and_key_averages(profiling):
    def measure():
        [m] = profiling.section_post([POST_EVENTS], [3], COLLECT, None)
        assert m["agree"], m["checks"]  # the same numbers as torch's key averages, or the speed means nothing
        return m

    within("post-processing", measure,
           lambda m: [k for k, over in (("speedup", m["speedup"] < SPEEDUP_MIN),
                                        ("vs_exit", m["vs_exit"] > VS_EXIT_MAX)) if over])


# Peak memory our post-processing adds over torch's events() + key_averages(): target <= 1/3,
# measured 0.23-0.26 at 10 k-1 M; here at 20 k 0.268-0.277 (14.4 of 53.6 MiB); with two copies of
# the events table kept, 0.475.
MEMORY_EVENTS = 20_000
MEMORY_MAX = 0.4


def test_peak_memory_is_a_fraction_of_torchs(profiling):
    [m] = profiling.section_memory([MEMORY_EVENTS], COLLECT, None)
    report("peak memory ours / torch's", {"ratio": m["ratio"], "ours_MiB": m["ours_total"] / 2**20,
                                          "torch_MiB": m["torch"]["added_rss"] / 2**20})
    assert m["ratio"] <= MEMORY_MAX, m


# Our cost per event at 40 k over that at 5 k: "cost linear in events" (8.9 / 8.5 / 9.8 µs at
# 10 k / 100 k / 1 M). Fixed costs make the small size dearer: measured here 0.57-0.81. A path that
# grows faster than the events (one taking twice as long at 40 k, 1.125 times at 5 k) gave 1.51.
SCALING_SIZES = [5_000, 40_000]
SCALING_MAX = 1.0


def test_cost_per_event_stays_flat(profiling):
    def measure():
        m = profiling.section_scaling(SCALING_SIZES, 5, COLLECT)
        return {"ratio": m["ratio"], **{f"us_{k}": v for k, v in m["us_per_event"].items()}}

    within("µs per event, largest / smallest", measure, lambda m: [m["ratio"]] if m["ratio"] > SCALING_MAX else [])


# load_trace on a trace torch wrote over json.load of it, wall time: target <= 2x, measured 0.17x at
# 100 k on a quiet machine, with the cyclic collector on, as a user's process runs. Here both run
# with the collector paused: json.load's time is mostly the collector walking its new containers, and
# how often it walks depends on the heap the process already holds (a full collection waits until
# the survivors grow by a quarter of it), not on the code measured. With it on, stop 56's CI read
# 0.33-0.34 in its pytest worker (over the bound then, 0.26) where a bare process here reads
# 0.18-0.23, and the same process holding 3 M lists 0.47-0.49; with it off 0.58-0.82 in both, and
# d0a18f5's CI (whose collector something else had paused) 0.64. The ratio of each side's fastest
# of 7 runs: 0.56-0.66 quiet, with the file loaded twice 1.19-1.35 (the medians' 1.01-1.27 came
# closer to the unchanged code's 0.60-0.69).
LOAD_EVENTS = 50_000
LOAD_MAX = 1.0


def test_load_trace_beats_parsing_the_json(profiling):
    within("load_trace / json.load, the collector paused, fastest of 7 each",
           lambda: {k: v for k, v in profiling.section_load(LOAD_EVENTS, 7, COLLECT, others=False,
                                                            collector=False).items()
                    if isinstance(v, (int, float))},
           lambda m: [m["ratio_best"]] if m["ratio_best"] > LOAD_MAX else [])


# %load_ext nbprof in a fresh process over the bare IPython shell's start in the same process (the
# target is absolute, < 0.3 s: measured 22 ms on a quiet machine), CPU seconds, medians of 9
# processes: here 0.072-0.073 (wall 0.057-0.105: its 40-90 ms moved with the disk cache and the
# load); its CPU (importing nbprof, registering) spent again: 0.128. And what it imports, exactly.
# The same code measured 0.123-0.135 on 2026-11-29 at load 1.2 (the guards branch's tip too:
# the machine's state, not a change), 0.107 beside the other guards: this ratio moves ~2x with the
# machine, so its bound only catches a gross regression; what it imports is checked exactly.
LOADEXT_MAX = 0.25


def test_load_ext_is_cheap_next_to_ipythons_own_start():
    def measure():
        m = bench("bench_profiling").section_loadext(9)
        assert not (m["torch"] or m["plotly"] or m["pandas"]), m  # exact: what %load_ext imports
        return m

    within("%load_ext / IPython's start", measure, lambda m: [m["cpu_ratio"]] if m["cpu_ratio"] > LOADEXT_MAX else [])


@pytest.fixture(scope="module")
def cprofile_vs_prun(ip):
    b = bench("bench_profiling")
    res = b.section_cprofile(11, cells=b.LIKE_FOR_LIKE, shown=False)
    res["cells"].update(b.section_cprofile(11, cells=("small",), shown=False, session=b.LONG_SESSION)["cells"])
    return res


# %%cprofile -q over %%prun -q on the same cell, wall time, 11 runs each: target within 5 % (1.017 /
# 0.99 on a quiet machine), here 1.01-1.10 (small) and 0.96-1.19 (medium); the %%cprofile cell
# taking twice as long, 1.81 and 1.89. And the small cell in a kernel that ran 10,000 cells before
# (bench_profiling._long_session: their names, their cell files): 1.03-1.06. It guards what read
# 1.44 in the whole suite's worker (5,765 names in its shell's namespace): each run walked the
# whole namespace to name DataLoaders (there were none) and keyed IPython's whole table of cell
# files; either put back reads 2.2-2.7 here.
CPROFILE_MAX = 1.4


@pytest.mark.parametrize("cell", ["small", "medium", "small, after 10000 cells"])
def test_cprofile_costs_what_prun_costs(cprofile_vs_prun, cell):
    b = bench("bench_profiling")
    name, _, after = cell.partition(", after ")
    within(f"%%cprofile -q / %%prun -q, {cell} cell",
           lambda: b.section_cprofile(11, cells=(name,), shown=False, session=int(after.split()[0]) if after else 0)["cells"][cell],
           lambda m: [m["ratio_quiet"]] if m["ratio_quiet"] > CPROFILE_MAX else [], first=cprofile_vs_prun["cells"][cell])


# Our cProfile tables (stats + call-graph edges) on a 2.5 k-function profile. The benchmark's
# target is over pstats' sort + print (<= 1, measured 0.26; 0.30-0.45 here when this guard was set);
# on 2026-11-29 that ratio swung 0.38-0.74 on unchanged code (the VM's slow spells fall on pandas'
# and numpy's fresh arrays more than on pstats' dicts) and the tables built twice read 0.71-0.84:
# no bound told them apart, and the first CI run of stop 45 failed. So the guard bounds ours over
# the least pandas does with the same stats (bench_profiling._pandas_floor), measured beside it:
# 1.43-1.69; built twice 2.41-2.72.
TABLES_MAX = 1.45


def test_cprofile_tables_beat_pstats(cprofile_vs_prun):
    def tables(res: dict) -> dict:
        return {k: v for k, v in res.items() if k != "cells"}

    # the benchmark's own target (<= 1), with the machine's room in it, and ours over pandas' floor
    within("cProfile tables / pstats sort + print, and over pandas' floor",
           lambda: tables(bench("bench_profiling").section_cprofile(11, cells=(), shown=False)),
           lambda m: [k for k, over in (("tables_over_floor", m["tables_over_floor"] > TABLES_MAX),
                                        ("tables_ratio", m["tables_ratio"] > 1.0)) if over],
           first=tables(cprofile_vs_prun))


# The whole %%torchprof cell (report shown) over the hand-written with profile(...) +
# print(key_averages().table()): target <= 1/3 at 100 k (0.27). In CPU seconds (the hand-written
# way's Python slows more under load than ours: wall ratios moved with the load). At 15 k, where the
# report's fixed costs weigh more, it swung 0.38-0.51 (wall 0.36-0.66); at 30 k 0.29-0.36 (load
# average 4-5), with the cyclic collector on. Since 2026-12-02 each cell runs with the collector
# paused (bench_profiling.section_cell(collector=False)): the hand-written way's Python objects cost
# it less collecting the larger the heap the process holds, so with it on the ratio read the
# worker's heap (0.32 bare, 0.45-0.59 holding 3 M lists: over the bound, 0.48, then). Paused:
# 0.52-0.62 bare, 0.61-0.64 with 3 M lists; the %%torchprof cell run twice: 1.22, 1.38.
CELL_EVENTS = 30_000
CELL_MAX = 0.9


def test_a_whole_torchprof_cell_beats_the_hand_written_way(profiling, ip):
    within("%%torchprof cell / hand-written, the collector paused",
           lambda: profiling.section_cell(CELL_EVENTS, 3, COLLECT, collector=False),
           lambda m: [m["cpu_ratio"]] if m["cpu_ratio"] > CELL_MAX else [])


# -- line by line (bench_lines.py, bench_line_tracers.py) ----------------------------------------------------

# %%torchprof --lines over --stack on the training loop: target <= 1.3 (1.07-1.28 at 100 steps).
# At 20 steps, in CPU seconds (wall time swung 1.04-1.63 here): 1.20-1.45; the --lines cell's CPU
# spent again, 2.85. What --lines adds over --stack doubled (20-45 % of the cell here) is within
# this machine's noise at this size: the benchmark's run judges that.
LINES_STEPS = 20
LINES_MAX = 1.9


def test_lines_costs_little_more_than_stack(ip):
    pytest.importorskip("torch")
    def measure():
        m = bench("bench_lines").measure(LINES_STEPS, 5, shell=ip, log=lambda line: None)
        return {"ratio": m["ratio"], "cpu_ratio": m["cpu_ratio"], "plain_s": m["plain_s"],
                "stack_s": [round(r[0], 3) for r in m["rows"]], "lines_s": [round(r[1], 3) for r in m["rows"]],
                "collect_s": [round(r[3], 3) for r in m["rows"]]}

    within("--lines / --stack", measure, lambda m: [m["cpu_ratio"]] if m["cpu_ratio"] > LINES_MAX else [])


# Each line recorder's cost against the floor (bench_line_tracers: the least a Python line tracer
# does, a sys.settrace function appending (line, time_ns) per event, run beside the recorders):
# each one's fastest of 5 runs over the floor's fastest, CPU time, 200,000 / 100,000 iterations.
# Not the slowdown against the bare loop, which this guard bounded until 2026-11-29: on the 2-vCPU
# VMs that swung x20-x58 for the same code within minutes (the bare loop touches no memory, a
# tracer's events do) and the first CI run of stop 45 failed its x40 / x28 bounds on unchanged
# code. Over the floor, in 6 runs that day: the tight loop 0.97-1.14 (torch's recorder) and
# 0.86-1.01 (cProfile's), the calls 1.03-1.28 and 1.87-2.16; each line event's work done twice in
# both (3 runs): 2.00-2.27 and 1.57-1.75, 1.38-1.73 and 2.16-2.46 (the calls' call and return
# events not doubled, so the calls' bounds only catch a gross regression).
# Over the floor moves too when the other worker is busy: stop 46's CI (d3e3288, unchanged code)
# read the tight loop 1.53 for torch's recorder (bound 1.5 then); here, beside a mutation run on
# both cores, 1.21-1.44 for torch's and 1.15-1.70 for cProfile's (bound 1.35 then). Each run
# takes ~10,000 page faults (~40 MB of events, 30-90 ms of its 150-250 ms in the kernel), and
# which run pays how much moves with the machine (a likely cause, not proven: cProfile's recorder
# does about the floor's work per event and still read 1.70). So a measurement over a bound is taken again, up to
# ATTEMPTS times (within()), and the guard fails only when every one is over: a recorder doing
# twice the work is over in each (planted, 2026-11-29: below), a busy moment passes.
TRACER_MAX = {"tight loop": {"torch / floor": 1.65, "cprofile / floor": 1.45},
              "calls": {"torch / floor": 1.7, "cprofile / floor": 2.7}}


def _over_tracer_bounds(m: dict) -> list:
    return [(workload, tracer, round(r[tracer], 3)) for workload, r in m.items()
            for tracer, bound in TRACER_MAX[workload].items() if r[tracer] > bound]


def test_line_tracers_slow_user_code_by_what_was_measured():
    def measure():
        run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_line_tracers.py"), "--reps", "5",
                              "--scale", "1", "--json"], capture_output=True, text=True, cwd=ROOT, check=True)
        return json.loads(run.stdout.strip().splitlines()[-1])

    within("line tracers", measure, _over_tracer_bounds)


# -- reading (bench_reader.py) --------------------------------------------------------------------------------

# read_trace_file on the tiled H100 trace (gzip'd, compact JSON, ~100 k events) over gzip +
# json.loads of it, CPU time: the checked, streamed reader (bench_reader: its checks must not cost a
# real trace its speed; ~7 ms of a 4 s read). Since 2026-12-02 both with the cyclic collector
# paused (bench_reader.parse_ratio; why: the load_trace guard above): 0.90-1.02 in a bare process
# and in one holding 3 M lists, where with it on they read 0.36-0.43 and 0.77-0.96 (the bound was
# 0.6). Reading twice: see docs/testing.md.
READ_MAX = 1.4


def test_reading_a_trace_costs_less_than_parsing_its_json(tiled):
    within("read_trace_file / gzip + json.loads",
           lambda: bench("bench_reader").parse_ratio(tiled["folder"] / "rank0.pt.trace.json.gz", reps=3),
           lambda m: [m["ratio"]] if m["ratio"] > READ_MAX else [])


# -- the timeline (timeline_bench.py) -------------------------------------------------------------------------

# At 1 M events the figure builds in < 2 s with < 5 MB of JSON and a < 300 KB SVG. Here at 300 k:
# building the figure over building the profile itself (the event tree), best of 3 each: 2.9-4.5 wall
# (load average 6; at 100 k the tree's 20-50 ms made it swing 6-11.6), the figure built twice 9.8;
# and the sizes (2.9 MB, 165 KB), which the merge to pixels bounds whatever the events.
TIMELINE_EVENTS = 300_000
TIMELINE_BUILD_MAX = 6.5
JSON_MAX_MB = 5.0
SVG_MAX_KB = 300.0


def test_the_timeline_builds_in_about_a_profiles_time_and_stays_small():
    # CPU seconds: at load 4-5 on two cores (CI beside a mutation run) the wall ratio reached 9.1
    # (the yardstick's best of 3 was 47 ms, the build's 430 ms)
    def measure():
        m = bench("timeline_bench").measure(TIMELINE_EVENTS, repeat=3, clock=time.process_time)
        # exact whatever the machine: the merge to pixels bounds the sizes
        assert m["json_mb"] <= JSON_MAX_MB and m["svg_kb"] <= SVG_MAX_KB, m
        return {**m, "build_over_profile": m["build_s"] / m["profile_s"]}

    within("timeline", measure,
           lambda m: [m["build_over_profile"]] if m["build_over_profile"] > TIMELINE_BUILD_MAX else [])
