"""Edge inputs of small pieces of the analysis, each expected answer written by hand: names as
the docstrings promise them, a recompile's advice for each kind of failed guard, tables of
nothing with their columns and dtypes."""

from __future__ import annotations

import html as htmllib

import json

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace
from .test_boundaries import compile_log_trace, metrics

# what a column of Python strings gets in this pandas (2: "object", 3: "str"), with rows or without
TXT = str(pd.Series(["a"]).dtype)


@pytest.mark.parametrize("function,name", [
    ("<built-in method time.sleep>", "time.sleep"),
    ("<built-in method builtins.sum>", "sum"),
    ("<method 'append' of 'list' objects>", "list.append"),
    ("<function outer.<locals>.inner at 0x7f3a2b1c0d60>", "outer.<locals>.inner"),
    ("forward", "forward"),
])
def test_flame_box_names(function, name):
    from nbprof.analysis.flame import display_name

    assert display_name(function) == name


def test_a_cell_location_without_a_line_is_the_cell():
    from nbprof.analysis.compilation import cell_location

    cell = "/tmp/ipykernel_42/1234567.py"
    assert cell_location(cell, None, {cell: "In [3]"}) == "In [3]"
    assert cell_location(cell, 0, {cell: "In [3]"}) == "In [3]"
    assert cell_location(cell, 7, {cell: "In [3]"}) == "In [3] line 7"
    assert cell_location("/home/u/project/model.py", None, {}) == "…/project/model.py"


@pytest.mark.parametrize("reason,advice", [
    ("tensor 'x' Tensor device index mismatch. Expected device index to be 0, actual 1", "an input's device changed"),
    ("tensor 'x' dtype mismatch. expected Float, actual Half", "an input's dtype changed"),
    ("tensor 'x' requires_grad mismatch. expected requires_grad=0",
     "grad mode or requires_grad changed (e.g. train vs no_grad): compile each mode once"),
    ("___check_obj_id(L['self'].fn, 140512)",
     "an object the code reads is a different one (a new module or function each call)"),
    ("L['n'] == 3", "a Python value the code reads changed (each value compiles once: pass it as a tensor)"),
    ("cache_size_limit reached", "the recompile limit was hit: Dynamo falls back to eager for this frame"),
    ("tensor 'x' stride mismatch at index 0. expected 1, actual 2",
     "input shapes changed: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or compile with dynamic=True"),
    ("something new", ""),
])
def test_a_recompiles_advice_names_the_guard_that_failed(tmp_path, reason, advice):
    p = compile_log_trace([metrics(0), metrics(1, reason)]).load(tmp_path)
    rec = p.compilation().recompiles
    assert rec[["compile_id", "reason", "advice"]].values.tolist() == [["0/1", reason, advice]]


def test_kernel_provenance_keys_keep_their_names_colons(tmp_path):
    """Inductor's provenance names each kernel ``<name>:<n>``; a name may hold colons itself
    (``aten::mm``): only the last part is the number."""
    from nbprof.analysis.compilation import _provenance

    stack = '  File "/home/u/model.py", line 9, in forward\n    h = x @ w\n'
    got = _provenance(json.dumps({"aten::mm:4": [stack], "cpp_fused_add_0:2": stack, "extern_kernels.addmm:1": []}))
    assert got == {"aten::mm": [("/home/u/model.py", 9, "h = x @ w")],
                   "cpp_fused_add_0": [("/home/u/model.py", 9, "h = x @ w")], "extern_kernels.addmm": []}
    assert _provenance("not json") == {} and _provenance(None) == {} and _provenance("[1]") == {}


def test_matching_the_calls_of_ranks_without_collectives_gives_the_columns():
    from nbprof.analysis.collectives import match_calls

    calls = pd.DataFrame({"rank": pd.Series(dtype=object), "process_group": pd.Series(dtype=object),
                          "seq": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object),
                          "start_us": pd.Series(dtype=np.float64), "dur_us": pd.Series(dtype=np.float64),
                          "event": pd.Series(dtype=np.int64)})
    out = match_calls(calls)
    assert len(out) == 0
    assert list(out.columns) == ["rank", "process_group", "seq", "name", "start_us", "dur_us", "event",
                                 "ranks", "last", "wait_us", "names"]
    assert [str(out[c].dtype) for c in ("ranks", "last", "wait_us", "names")] == ["int64", "bool", "float64", "object"]


def test_allocations_bytes_are_integers(tmp_path):
    t = Trace()
    t.op("aten::empty", 0, 100)
    t.memory(10, 4096, total_allocated=4096, total_reserved=1 << 20)
    t.memory(20, -4096, total_allocated=0, total_reserved=1 << 20)
    from nbprof.analysis.memory import allocations

    p = t.load(tmp_path)
    a = allocations(p.events)
    assert a["bytes"].tolist() == [4096] and a["bytes"].dtype == np.int64


def test_an_op_outside_any_python_frame_has_an_empty_stack(tmp_path):
    from nbprof.analysis.stacks import op_stacks

    t = Trace()
    t.op("aten::add", 0, 10)
    t.op("aten::mul", 20, 10)
    assert op_stacks(t.load(tmp_path).events).tolist() == ["", ""]  # no Python frames recorded at all
    t.op("model.py(3): forward", 50, 100, cat="python_function")
    t.op("aten::relu", 60, 10)
    ev = t.load(tmp_path, name="with_python.json").events
    stacks = dict(zip(ev["name"].astype(str), op_stacks(ev)))
    assert (stacks["aten::add"], stacks["aten::mul"]) == ("", "")  # before the frame began
    assert stacks["aten::relu"] == "model.py(3): forward"


def test_merging_a_timeline_again_keeps_a_lone_rectangles_own_columns(tmp_path):
    """Columns the merge does not compute (a rank's hover texts, written in its worker): a
    rectangle left alone keeps its value, a merged one has none. aten::a and aten::b (1 µs each,
    side by side) merge at 10 px over 10 ms; aten::c (1 ms, far off) stays alone."""
    import dataclasses

    from nbprof.analysis.timeline import remerge, timeline_rects

    t = Trace()
    t.op("aten::a", 0, 1)
    t.op("aten::b", 1, 1)
    t.op("aten::c", 9000, 1000)
    p = t.load(tmp_path)
    data = timeline_rects(p.events, p.meta, merge=False)
    assert data.rects["name"].tolist() == ["aten::a", "aten::b", "aten::c"]
    rects = data.rects.assign(extra_us=[1.5, 2.5, 3.5], hover=["a", "b", "c"])
    out = remerge(dataclasses.replace(data, rects=rects), 10).rects
    assert out[["name", "x0_us", "x1_us", "busy_us", "count", "event"]].values.tolist() == [
        ["aten::a", 0.0, 2.0, 2.0, 2, -1], ["aten::c", 9000.0, 10000.0, 1000.0, 1, 2]]
    assert np.isnan(out["extra_us"].iloc[0]) and out["extra_us"].iloc[1] == 3.5
    assert pd.isna(out["hover"].iloc[0]) and out["hover"].iloc[1] == "c"


def test_merged_rectangles_counts_are_integers():
    from nbprof.analysis.timeline import aggregate

    _, out = aggregate(np.array([False, True, False]), np.array([0.0, 1.0, 5.0]), np.array([1.0, 2.0, 6.0]),
                       count=np.array([3, 2, 4]), busy=np.array([1.0, 1.0, 1.0]), key=np.array([7, 7, 9]))
    # top keys and counts for merged groups only (the lone one's stay -1 and 0)
    assert out["count"].tolist() == [5, 4] and out["top_counts"].tolist() == [[5, 0, 0], [0, 0, 0]]
    assert out["top_keys"].tolist() == [[7, -1, -1], [-1, -1, -1]] and out["size"].tolist() == [2, 1]
    assert out["count"].dtype == np.int64 and out["top_counts"].dtype == np.int64 and out["size"].dtype == np.int64


@pytest.mark.parametrize("layout", ["list", "name_first", "list_gzip"])
def test_invalid_utf8_is_counted_in_traces_read_whole(tmp_path, layout):
    """Traces the reader cannot cut into slices (a bare list of events, gzipped or not; events
    whose first key is not "ph", written without spaces) are decoded whole: their invalid UTF-8
    is counted too."""
    import gzip

    import nbprof

    events = [{"name": "aten::addBAD", "ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
              {"name": "aten::mulBAD", "ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]
    doc = events if layout.startswith("list") else {"traceEvents": events}
    raw = json.dumps(doc, separators=(",", ":")).encode().replace(b"BAD", b"\xff")
    path = tmp_path / ("t.json.gz" if layout.endswith("gzip") else "t.json")
    path.write_bytes(gzip.compress(raw) if layout.endswith("gzip") else raw)
    p = nbprof.load_trace(path)
    assert p.events["name"].astype(str).tolist() == ["aten::add\ufffd", "aten::mul\ufffd"]
    assert p.meta.notes == ["2 invalid UTF-8 sequences in names or args: read as \ufffd"]


def test_a_function_called_by_the_cell_and_by_another_splits_its_time(tmp_path):
    """pstats of a cell that calls f (0.5 s) and g, f calling g once (0.4 s of g's 0.6 s): g's
    top-level box is what is left of its time, 0.2 s, under a root of 0.7 s."""
    from nbprof.analysis.flame import call_tree

    stats = pd.DataFrame({"function": ["f", "g"], "filename": ["/m.py", "/m.py"], "lineno": [1, 5],
                          "ncalls": [1, 2], "primitive_calls": [1, 2], "tottime_s": [0.1, 0.6],
                          "cumtime_s": [0.5, 0.6]})
    edges = pd.DataFrame({"caller_filename": ["/m.py"], "caller_lineno": [1], "caller_function": ["f"],
                          "callee_filename": ["/m.py"], "callee_lineno": [5], "callee_function": ["g"],
                          "ncalls": [1], "cumtime_s": [0.4]})
    tree = call_tree(stats, edges, min_fraction=0)
    assert tree[["parent", "name", "value_s", "ncalls"]].values.tolist() == [
        [-1, "cell", pytest.approx(0.7), pytest.approx(np.nan, nan_ok=True)], [0, "f", 0.5, 1.0],
        [1, "g", pytest.approx(0.4), 1.0], [0, "g", pytest.approx(0.2), 1.0]]


def test_points_in_intervals_with_small_integer_group_codes():
    """Group codes as categorical columns hold them (int8) and times a second apart in ns: the
    keys are computed in int64, whatever the codes' dtype."""
    from nbprof.analysis._intervals import points_in_intervals

    point_group = np.array([0, 1, 1, 0], dtype=np.int8)
    point_t = np.array([5, 1_000_000_000, 10, 2_000_000_000], dtype=np.int64)
    iv_group = np.array([1, 0], dtype=np.int8)
    iv_start = np.array([0, 0], dtype=np.int64)
    iv_end = np.array([1_500_000_000, 3_000_000_000], dtype=np.int64)
    iv, pt = points_in_intervals(point_group, point_t, iv_group, iv_start, iv_end)
    # interval 0 (group 1, [0, 1.5 s)) holds points 2 (10 ns) and 1 (1 s); interval 1 (group 0) holds 0 and 3
    assert iv.tolist() == [0, 0, 1, 1] and pt.tolist() == [2, 1, 0, 3]



def test_a_cprofile_taking_over_is_timed_from_the_sessions_start():
    """Another cProfile enabled 50 ms into nbprof's %%cprofile session ends it there: the takeover
    says when, counted from the session's start."""
    import cProfile
    import time

    from nbprof.collect.cprofile import CProfileSession

    s = CProfileSession()
    before = time.perf_counter()
    s.begin()
    try:
        time.sleep(0.05)
        inner = cProfile.Profile()
        inner.enable()
        inner.disable()
        elapsed = time.perf_counter() - before
    finally:
        s.end()
    assert s.takeover is not None
    assert 0.05 <= s.takeover.at_s <= elapsed


def test_the_profilers_shadow_hasattr_answers_everything_else_truly():
    """While nbprof's profile runs, torch.profiler.profiler's ``hasattr`` says "no" to
    ``torch._inductor`` only while inductor is not imported; any other question gets the real
    answer; after the profile the builtin is back."""
    import sys

    torch = pytest.importorskip("torch")
    import torch.profiler.profiler as module

    from nbprof.collect.torch_live import _skip_inductor_import

    class Holder:
        present = 1

    _skip_inductor_import(True)
    try:
        answers = (module.hasattr(Holder, "present"), module.hasattr(Holder, "absent"), module.hasattr([], "append"),
                   module.hasattr(torch, "profiler"), module.hasattr(torch, "_inductor"))
    finally:
        _skip_inductor_import(False)
    assert answers[:4] == (True, False, True, True)
    assert answers[4] is ("torch._inductor" in sys.modules)
    assert "hasattr" not in module.__dict__


def test_a_compilations_repr_counts_its_tables(tmp_path):
    """Two frame compilations of 1.5 s and 0.75 s, the second a recompile; no graph break, no kernel."""
    from .test_boundaries import span_markers

    t = Trace()
    span_markers(t, 5_000_000)
    t.op("_compile.compile_inner (dynamo_timed)", 10, 1_500_000, cat="user_annotation")
    t.op("_compile.compile_inner (dynamo_timed)", 2_000_000, 750_000, cat="user_annotation")
    records = [metrics(0), metrics(1, "tensor 'x' size mismatch at index 0. expected 8, actual 16")]
    doc = t.doc
    t.doc = lambda: {**doc(), "nbprofCompileLog": {"records": records}}  # type: ignore[method-assign]
    c = t.load(tmp_path).compilation()
    assert repr(c) == "<Compilation 2 compilations (2.25 s), 0 graph breaks, 1 recompile, 0 kernels>"
    # the Compile tab's first line says the same
    from nbprof.views.tabs.compile import compilation_html

    assert "2 compilations took 2.250 s · 0 graph breaks · 1 recompile<" in htmllib.unescape(compilation_html(c))


def test_a_compilations_cache_results_are_hit_miss_or_bypass(tmp_path):
    """The FX graph cache hit and AOTAutograd's cache missed for 0/0; for 0/1 the FX graph cache
    missed once (a second graph, a hit, does not undo the miss) and AOTAutograd's was bypassed."""
    records = [metrics(0), metrics(1, "tensor 'x' size mismatch at index 0. expected 8, actual 16")]
    for cid, event in ((0, "fx_graph_cache_hit"), (0, "aotautograd_cache_miss"), (1, "fx_graph_cache_miss"),
                       (1, "fx_graph_cache_hit"), (1, "aotautograd_cache_bypass")):
        records.append({"event": event, "frame_id": 0, "frame_compile_id": cid})
    t = Trace()
    from .test_boundaries import span_markers

    span_markers(t, 100_000)
    t.op("_compile.compile_inner (dynamo_timed)", 10, 1_000, cat="user_annotation")
    t.op("_compile.compile_inner (dynamo_timed)", 5_000, 1_000, cat="user_annotation")
    doc = t.doc
    t.doc = lambda: {**doc(), "nbprofCompileLog": {"records": records}}  # type: ignore[method-assign]
    frames = t.load(tmp_path).compilation().frames
    assert frames[["compile_id", "fx_graph_cache", "aot_autograd_cache"]].values.tolist() == [
        ["0/0", "hit", "miss"], ["0/1", "miss", "bypass"]]


def test_the_top_ops_cpu_share_is_of_the_whole_profiles_self_cpu_time(tmp_path):
    """aten::a 500 µs, aten::b 250 µs and a synchronize outside any op 250 µs: aten::a is half of
    the profile's self CPU time (not two thirds of the operators')."""
    from .test_boundaries import found

    t = Trace()
    t.op("aten::a", 0, 500)
    t.op("aten::b", 510, 250)
    t.runtime("cudaDeviceSynchronize", 770, 250)
    [(sev, ev)] = found(t.load(tmp_path), "top_op")
    assert (sev, ev["op"], ev["metric"], ev["share"]) == ("medium", "aten::a", "self_cpu_us", 0.5)


def test_timeline_lanes_of_large_process_and_thread_ids_stay_apart(tmp_path):
    """pid and tid 2,000,000 (Linux gives such ids) and streams 7, 8 and 4095: the lanes' keys
    combine to ~2**56, past float64's exact integers; streams 7 and 8 still get a lane each."""
    from nbprof.analysis.timeline import timeline_rects

    big = 2_000_000
    t = Trace()
    for i, stream in enumerate((7, 8, 4095)):
        ext = t.op("aten::mm", 10 * i, 5, tid=big)
        t.launch(f"k{stream}", ext, 10 * i + 1, 1, 100 + 10 * i, 5, stream=stream, tid=big)
    for e in t.events:
        if e["pid"] != 0:  # the CPU process; the device's pid is its index
            e["pid"] = big
    p = t.load(tmp_path)
    lanes = timeline_rects(p.events, p.meta, merge=False).lanes
    assert lanes[["pid", "thread", "device", "stream"]].values.tolist() == [
        [big, big, "cpu", -1], [-1, -1, "cuda:0", 7], [-1, -1, "cuda:0", 8], [-1, -1, "cuda:0", 4095]]


def test_timeline_families_set_steps_and_synchronizations_apart(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    t.annotation("ProfilerStep#0", 0, 100)
    t.op("aten::mm", 10, 20)
    t.runtime("cudaDeviceSynchronize", 40, 10)
    t.runtime("cudaLaunchKernel", 60, 5)
    t.annotation("profilerstep#1", 200, 10)  # not torch's step range: its case differs
    p = t.load(tmp_path)
    rects = timeline_rects(p.events, p.meta, merge=False).rects
    assert dict(zip(rects["name"], rects["family"])) == {
        "ProfilerStep#0": "step", "aten::mm": "op", "cudaDeviceSynchronize": "sync", "cudaLaunchKernel": "runtime",
        "profilerstep#1": "annotation"}


def test_callers_and_callees_of_one_of_two_functions_of_the_same_name():
    """Two ``forward`` functions (a.py:1, b.py:1): the callers and callees of one are its own."""
    from nbprof.analysis.callgraph import callees, callers

    stats = pd.DataFrame({"function": ["forward", "forward", "main", "helper"], "filename": ["a.py", "b.py", "m.py", "h.py"],
                          "lineno": [1, 1, 1, 1], "ncalls": [1, 1, 1, 2], "primitive_calls": [1, 1, 1, 2],
                          "tottime_s": [0.1, 0.2, 0.0, 0.3], "cumtime_s": [0.3, 0.4, 0.7, 0.3]})
    rows = [("m.py", "main", "a.py", "forward", 0.3), ("m.py", "main", "b.py", "forward", 0.4),
            ("a.py", "forward", "h.py", "helper", 0.2), ("b.py", "forward", "h.py", "helper", 0.1)]
    edges = pd.DataFrame({"caller_filename": [r[0] for r in rows], "caller_lineno": [1] * 4,
                          "caller_function": [r[1] for r in rows], "callee_filename": [r[2] for r in rows],
                          "callee_lineno": [1] * 4, "callee_function": [r[3] for r in rows], "ncalls": [1] * 4,
                          "primitive_calls": [1] * 4, "tottime_s": [0.0] * 4, "cumtime_s": [r[4] for r in rows]})
    got = callers(stats, edges, ("a.py", 1, "forward"))
    assert got[["function", "filename", "cumtime_s"]].values.tolist() == [["main", "m.py", 0.3]]
    got = callees(stats, edges, ("b.py", 1, "forward"))
    assert got[["function", "filename", "cumtime_s"]].values.tolist() == [["helper", "h.py", 0.1]]


def test_a_kernels_mean_blocks_per_sm_weighs_only_launches_that_have_one(tmp_path):
    """One launch of 100 µs with 0.5 blocks per SM, one of 300 µs without the estimate: 0.5; a
    kernel without launch arguments has no grid, block or estimate."""
    t = Trace()
    ext = t.op("aten::a", 0, 5)
    t.launch("k", ext, 1, 1, 10, 100, blocks_per_sm=0.5)
    ext = t.op("aten::a", 200, 5)
    t.launch("k", ext, 201, 1, 210, 300)
    ext = t.op("aten::b", 600, 5)
    t.launch("bare", ext, 601, 1, 610, 50)
    k = t.load(tmp_path).kernels().set_index("name")
    assert k.loc["k", "blocks_per_sm"] == pytest.approx(0.5) and k.loc["k", "count"] == 2
    assert k.loc["bare", ["grid", "block", "launch_configs"]].tolist() == ["", "", 0]
    assert np.isnan(k.loc["bare", "blocks_per_sm"]) and np.isnan(k.loc["bare", "occupancy_pct"])


def test_the_rank_report_of_no_events_is_one_idle_rank(tmp_path):
    """An events table with no rows (a window with nothing in it) of one process: its one rank
    (None) did nothing, with no slowest rank and no differences."""
    from nbprof.analysis.ranks import rank_report

    t = Trace()
    t.op("aten::add", 0, 10)
    r = rank_report(t.load(tmp_path).events.iloc[:0])
    assert len(r.table) == 1 and r.table["rank"].tolist() == [None]
    zero = [c for c in r.table.columns if c.endswith("_us") or c in ("ops", "kernels")]
    assert len(zero) > 10 and (r.table[zero].to_numpy(dtype=np.float64) == 0).all()
    assert r.slowest is None and r.imbalance == 0.0 and len(r.differences) == 0


def test_a_device_property_at_int64s_largest_value_is_kept(tmp_path):
    import nbprof

    t = Trace()
    ext = t.op("aten::mm", 0, 5)
    t.launch("gemm", ext, 1, 1, 10, 5)
    t.device_properties = [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 2**63 - 1, "numSms": 132}]
    p = nbprof.load_trace(t.write(tmp_path / "t.json"))
    assert p.meta.device_properties == [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 2**63 - 1, "numSms": 132}]
    assert not any("deviceProperties" in n or "device propert" in n for n in p.meta.notes), p.meta.notes


def test_an_empty_events_table_has_no_compile_ranges(tmp_path):
    from nbprof.analysis.compilation import compile_range_mask

    t = Trace()
    t.op("_compile.compile_inner (dynamo_timed)", 0, 10, cat="user_annotation")
    events = t.load(tmp_path).events
    assert compile_range_mask(events).tolist() == [True]
    mask = compile_range_mask(events.iloc[:0])
    assert mask.dtype == bool and len(mask) == 0


def test_the_collectives_of_a_cpu_only_run_are_its_c10d_operators(tmp_path):
    """No device work and no backend ranges (gloo on the CPU): the collectives are the c10d::
    operators; other operators and a c10d-named range are not."""
    from nbprof.analysis.collectives import collective_calls

    t = Trace()
    t.op("aten::add", 0, 10)
    t.op("c10d::allreduce_", 20, 50)
    t.annotation("c10d::barrier_range", 100, 5)
    t.op("aten::mul", 200, 10)
    calls = collective_calls(t.load(tmp_path).events)
    assert calls[["seq", "name", "start_us", "dur_us", "event"]].values.tolist() == [[0, "all_reduce", 20.0, 50.0, 1]]


def test_tables_of_a_profile_without_modules_or_device_work_have_their_columns(tmp_path):
    """A CPU-only profile without nn.Module calls: the module tree and the GPU busy track are
    empty, with the columns and dtypes their docstrings name."""
    from nbprof.analysis.modules import module_tree
    from nbprof.analysis.timeline_tracks import gpu_busy_track

    t = Trace()
    t.op("aten::add", 0, 10)
    events = t.load(tmp_path).events
    tree = module_tree(events)
    assert len(tree) == 0
    assert {c: str(tree[c].dtype) for c in tree.columns} == {
        "module": TXT, "name": TXT, "type": TXT, "parent": TXT, "depth": "int64", "calls": "int64",
        "cpu_total_us": "float64", "self_cpu_us": "float64", "device_total_us": "float64", "self_device_us": "float64"}
    track = gpu_busy_track(events, 0.0, 10.0)
    assert len(track) == 0 and list(track.columns) == ["device", "t0_us", "t1_us", "busy_us", "busy_pct"]


def test_the_steps_side_by_side_are_columns_named_step(tmp_path):
    from nbprof.analysis.steps import step_breakdown

    t = Trace()
    for i in range(2):
        t.annotation(f"ProfilerStep#{i}", 100 * i, 90)
        t.op("aten::mm", 100 * i + 10, 20 + 10 * i)
    table = step_breakdown(t.load(tmp_path).events)
    assert table.columns.name == "step" and table.columns.tolist() == [0, 1]
    assert table.loc["aten::mm"].tolist() == [20.0, 30.0]


def test_steps_op_counts_and_names_keep_their_types(tmp_path):
    """The steps table's op counts are integers; key_averages' names stay Python strings (object)."""
    t = Trace()
    for i in range(2):
        t.annotation(f"ProfilerStep#{i}", 100 * i, 90)
        t.op("aten::mm", 100 * i + 10, 20)
    p = t.load(tmp_path)
    steps = p.steps()
    assert steps["ops"].tolist() == [1, 1] and steps["ops"].dtype == np.int64
    ka = p.key_averages()
    assert ka["name"].dtype == object and "aten::mm" in ka["name"].tolist()


def test_a_gzipped_bare_list_longer_than_one_slice_is_read_whole(tmp_path):
    """A bare list of events (read whole, not in slices) of ~400 kB, gzipped: every event is read."""
    import gzip

    import nbprof

    n = 3000
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
               "args": {"External id": i + 1}} for i in range(n)]
    raw = json.dumps(events).encode()
    assert len(raw) > 1 << 18  # more than the first read of the decompressed stream
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(raw))
    ev = nbprof.load_trace(path).events
    assert len(ev) == n and ev["name"].astype(str).tolist()[-3:] == ["aten::op1", "aten::op2", "aten::op3"]  # 2997 = 7 * 428 + 1


def test_ranks_of_merged_ranks_without_events_are_an_empty_report():
    """A merged-ranks events table (a ``rank`` column) with no rows: no rank rows (not a row of
    zeros for a rank that does not exist: breakdown_table's per-rank sums gave one, and rank_table
    raised), no slowest rank, no imbalance, no differences; every table keeps its columns."""
    import nbprof
    from nbprof.analysis.ranks import rank_report
    from nbprof.collect.chrome_trace import empty_trace
    from nbprof.model import TorchProfile

    from .conftest import trace_path

    events = TorchProfile.from_trace(empty_trace())._events.copy()
    events["rank"] = np.zeros(0, dtype=object)
    report = rank_report(events)
    columns = list(nbprof.load_trace(trace_path("cnn_train_cuda")).ranks().table.columns)  # a rank's row
    assert len(report.table) == 0 and list(report.table.columns) == columns
    assert report.slowest is None and report.imbalance == 0.0
    assert list(report.differences.columns) == ["name", "kind", "comm", "count_min", "count_max", "time_min_us",
                                                "time_max_us", "time_mean_us", "spread", "slowest_rank"]
    assert len(report.differences) == 0


# -- survivors of the fresh sample of seed 41 (docs/testing.md) ----------------------------------


def test_a_gzip_file_that_is_not_json_is_one_line_naming_it(tmp_path):
    """gzip'd bytes that are not JSON: the reader says so, naming the file (not a bare error)."""
    import gzip

    import nbprof
    from nbprof.errors import TraceError

    f = tmp_path / "rank0.pt.trace.json.gz"
    f.write_bytes(gzip.compress(b"  hello, not a trace"))
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(f)
    assert str(e.value) == f"{f}: not a chrome trace (decompressed, it does not start with '{{' or '[')"


def test_script_json_passes_its_options_to_json_and_escapes_for_a_script():
    """The compact separators the page asks for reach json.dumps; ``<`` and ``>`` are escaped so a
    string cannot close the script element (expected text written out by hand)."""
    from nbprof.format import script_json

    text = script_json({"a": [1, "</script>"]}, separators=(",", ":"))
    assert text == '{"a":[1,"\\u003c/script\\u003e"]}'
    assert json.loads(text) == {"a": [1, "</script>"]}


def test_a_cprofile_session_owns_its_own_profile_and_no_other():
    """``owns`` tells nbprof's own profile (enabling it is no takeover) from anyone else's."""
    import cProfile

    from nbprof.collect.cprofile import CProfileSession

    s = CProfileSession()
    s.begin()
    try:
        mine, other = s.profiler, cProfile.Profile()
        owned = (s.owns(mine), s.owns(other))
    finally:
        s.end()
    assert owned == (True, False)
