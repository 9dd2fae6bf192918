"""More contracts of the views' analysis pieces (the timeline's rectangles, lanes and merging, the
op tree, device stats, memory, key averages, the overview, flame graph, modules), pinned where the
second views round of issue 26's mutation samples found them loose. As in test_mutants_views.py,
every expected value is worked out by hand in the test (small integer nanoseconds, hand-made
traces), never with the code under test or its helpers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace, ops_to_merge

I64 = np.int64
F64 = np.float64


def a64(*values):
    return np.array(values, dtype=I64)


# ---------------------------------------------------------------------------------- device stats


def _two_stream_trace() -> Trace:
    """One device: a kernel [200, 300) on stream 7, one [250, 350) on stream 8, a copy [400, 450)
    and a fill [950, 960) on stream 7; the profile spans [0, 1000)."""
    t = Trace()
    mm = t.op("aten::mm", 0, 1000)
    t.launch("k1", mm, 110, 5, 200, 100)
    t.launch("k2", mm, 120, 5, 250, 100, stream=8)
    t.launch("Memcpy HtoD", mm, 130, 5, 400, 50, runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=1 << 20)
    t.launch("Memset", mm, 140, 5, 950, 10, runtime="cudaMemsetAsync", cat="gpu_memset", nbytes=64)
    return t


def test_device_stats_given_windows_measures_span_and_busy_time_within_them(tmp_path):
    """``windows`` (the profile's recorded stretches, when already computed) replace the profile's
    own: the span is theirs, busy time is the device work inside them; counts and kernel time are
    the whole profile's."""
    from nbprof.analysis.device_stats import device_stats

    p = _two_stream_trace().load(tmp_path)
    # [0, 260) µs and [400, 420) µs: 280 µs recorded
    windows = pd.DataFrame({"rank_code": a64(0, 0), "start_ns": a64(0, 400_000), "end_ns": a64(260_000, 420_000)})
    d = device_stats(p.events, p.meta, windows=windows)
    [row] = d.devices.to_dict("records")
    # inside: [200, 260) of the kernels' union [200, 350), [400, 420) of the copy; the fill outside
    assert (row["span_us"], row["busy_us"], row["idle_us"]) == (280.0, 80.0, 200.0)
    assert row["busy_fraction"] == 80 / 280
    assert (row["kernel_us"], row["memcpy_us"], row["memset_us"], row["kernels"]) == (200.0, 50.0, 10.0, 2)
    # stream 7: [200, 260) + [400, 420); stream 8: [250, 260)
    assert d.streams[["stream", "busy_us", "busy_fraction", "kernel_us", "kernels"]].values.tolist() == [
        [7, 80.0, 80 / 280, 100.0, 1], [8, 10.0, 10 / 280, 100.0, 1]]
    # without windows: the profile's own span [0, 1000) and all of its device work
    [row] = device_stats(p.events, p.meta).devices.to_dict("records")
    assert (row["span_us"], row["busy_us"], row["busy_fraction"]) == (1000.0, 210.0, 0.21)
    # the profile's device_stats() passes its own windows: the same as computing them
    assert p.device_stats.devices.equals(device_stats(p.events, p.meta).devices)


def test_launch_estimates_never_count_the_sms_in_use_below_zero():
    """The sweep's running sum of kernel shares comes back to 0 only up to rounding (0.1 + 0.7 -
    0.7 - 0.1 is -2.8e-17 in floating point): over a long gap between kernels that must count as
    no SMs in use, not as a negative area."""
    from nbprof.analysis.device_stats import _launch_estimates

    assert 0.1 + 0.7 - 0.7 - 0.1 < 0  # the rounding the clip guards against
    # one device: a [0, 100_000) share 0.1, b [10_000, 50_000) share 0.7 inside it, then after a gap
    # of about 10^12 ns c [10^12, 10^12 + 100_000) share 1 (blocks per SM 3: capped at 1)
    events = pd.DataFrame({"blocks_per_sm": [0.1, 0.7, 3.0], "occupancy_pct": [10.0, 20.0, np.nan]})
    start = a64(0, 10_000, 10**12)
    dur = a64(100_000, 40_000, 100_000)
    sm, occupancy = _launch_estimates(events, a64(0, 1, 2), a64(0, 0, 0), start, dur, 1)
    # [0, 10k): 0.1; [10k, 50k): 0.8; [50k, 100k): 0.1; the gap: 0; c: 1
    want = 0.1 * 10_000 + 0.8 * 40_000 + 0.1 * 50_000 + 100_000
    assert sm[0] == pytest.approx(want, rel=1e-14, abs=0)
    assert occupancy[0] == pytest.approx((10.0 * 100_000 + 20.0 * 40_000) / 140_000, rel=1e-14)
    assert sm.dtype == occupancy.dtype == F64


# -------------------------------------------------------------------------------------- timeline


def test_a_rectangle_hidden_under_the_one_before_it_joins_it_even_unmerged(tmp_path):
    """Two kernels overlapping on one stream (a malformed trace): the later one, ending inside the
    earlier, is drawn from where the earlier ends, i.e. not at all: it joins the earlier one's
    rectangle (count 2), also when nothing is merged (``merge=False``)."""
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    mm = t.op("aten::mm", 0, 500)
    t.launch("big", mm, 10, 5, 100, 100)   # [100, 200)
    t.launch("small", mm, 20, 5, 110, 40)  # [110, 150): under big
    t.launch("after", mm, 30, 5, 300, 10)  # [300, 310)
    p = t.load(tmp_path)
    d = timeline_rects(p.events, p.meta, merge=False)
    assert d.px_us == 0.0
    dev = d.rects[d.rects["family"] == "kernel"]
    assert dev[["x0_us", "x1_us", "busy_us", "count", "name", "distinct"]].values.tolist() == [
        [100.0, 200.0, 100.0, 2, "big", 2], [300.0, 310.0, 10.0, 1, "after", 1]]
    assert dev["names"].tolist() == [[("big", 1), ("small", 1)], None]
    names = p.events["name"].astype(str).tolist()
    assert dev["event"].iloc[0] == -1 and names[dev["event"].iloc[1]] == "after"
    assert (d.merged_events, d.merged_rects) == (2, 1)


RECT_COLUMNS = ("row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name", "family", "hue", "event",
                "names", "distinct")
RECT_DTYPES = {"row": "int64", "lane": "int64", "level": "int64", "x0_us": "float64", "x1_us": "float64",
               "busy_us": "float64", "count": "int64", "hue": "int64", "event": "int64", "names": "object",
               "distinct": "int64"}


def _rect_dtypes(rects: pd.DataFrame) -> dict:
    """The rectangles' dtypes; ``name`` and ``family`` string columns (pandas 3 reads a column of
    Python strings as ``str``, an empty one stays ``object``: either takes ``.str``)."""
    out = {c: str(rects[c].dtype) for c in rects.columns if c not in ("name", "family")}
    for c in ("name", "family"):
        assert pd.api.types.is_string_dtype(rects[c]), c
        assert rects[c].str.len().tolist() == [len(x) for x in rects[c]], c
    return out


def test_timeline_rects_of_no_events_have_every_columns_dtype(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    mm = t.op("aten::mm", 0, 500)
    t.launch("k", mm, 10, 5, 100, 100)
    p = t.load(tmp_path)
    for d in (timeline_rects(p.events.iloc[:0], p.meta), timeline_rects(p.events, p.meta, window=(1000.0, 2000.0)),
              timeline_rects(p.events.iloc[:0], p.meta, merge=True)):
        assert len(d.rects) == 0
        assert list(d.rects.columns) == list(RECT_COLUMNS) and _rect_dtypes(d.rects) == RECT_DTYPES
    d = timeline_rects(p.events, p.meta, merge=False)
    assert _rect_dtypes(d.rects) == RECT_DTYPES


# ----------------------------------------------------------------------------------------- flame


def _edges(rows):
    return pd.DataFrame(rows, columns=["caller_filename", "caller_lineno", "caller_function", "callee_filename",
                                       "callee_lineno", "callee_function", "ncalls", "primitive_calls",
                                       "tottime_s", "cumtime_s"])


def test_call_tree_of_a_function_without_primitive_calls_shares_out_no_calls():
    """cProfile counts no primitive call for a function whose every call it saw was recursive (or
    that was running when it started): its callees' time is still shared out by time, their calls
    by ``calls on this path / P_F``, which has no share to give: 0 calls, not a division by 0."""
    from nbprof.analysis.flame import call_tree

    stats = pd.DataFrame({
        "filename": ["/u/a.py", "/u/a.py"], "lineno": [1, 5], "function": ["outer", "work"],
        "ncalls": [2, 4], "primitive_calls": [0, 4], "tottime_s": [1.0, 3.0], "cumtime_s": [4.0, 3.0],
    })
    edges = _edges([("/u/a.py", 1, "outer", "/u/a.py", 5, "work", 4, 4, 3.0, 3.0)])
    tree = call_tree(stats, edges, min_fraction=0.0)
    assert tree[["name", "value_s", "self_s", "ncalls", "depth"]].values.tolist()[1:] == [
        ["outer", 4.0, 1.0, 2.0, 1], ["work", 3.0, 3.0, 0.0, 2]]
    # with its primitive call counted: 4 calls of work on outer's one path
    stats["primitive_calls"] = [2, 4]
    tree = call_tree(stats, edges, min_fraction=0.0)
    assert tree["ncalls"].tolist()[1:] == [2.0, 4.0]


# ------------------------------------------------------------------------------- timeline window


def test_window_summary_tables_dtypes_with_and_without_events_in_the_span(tmp_path):
    """``calls`` int64, times float64, whether the span holds events or none; an event of a
    thread < 0 (device work's own lanes) is never an op."""
    from nbprof.analysis.timeline_window import window_summary

    t = Trace()
    a = t.op("aten::b", 0, 100)
    t.launch("k", a, 10, 5, 60, 20)
    t.gpu_annotation("range", 55, 30, a)  # on the stream: drawn there, neither an op nor work
    ev = t.load(tmp_path).events
    for s in (window_summary(ev, 0.0, 100.0), window_summary(ev, 1000.0, 2000.0)):
        for table in (s.ops, s.kernels):
            assert list(table.columns) == ["name", "calls", "in_window_us", "total_us"]
            assert [str(table[c].dtype) for c in ("calls", "in_window_us", "total_us")] == ["int64", "float64",
                                                                                            "float64"]
            assert pd.api.types.is_string_dtype(table["name"])
        assert type(s.device_busy_us) is float
    s = window_summary(ev, 0.0, 100.0)
    assert s.ops.values.tolist() == [["aten::b", 1, 100.0, 100.0], ["cudaLaunchKernel", 1, 5.0, 5.0]]
    assert s.kernels.values.tolist() == [["k", 1, 20.0, 20.0]] and s.device_busy_us == 20.0


def test_remerge_keeps_a_lone_rectangles_extra_columns_and_an_earlier_merge(tmp_path):
    """Other columns (a rank's hover texts): a group of one keeps its value, a merged rectangle has
    none (NaN in a float column, None otherwise:
    missing); ``color`` is the view's and is dropped. A lone
    rectangle that was an earlier merge keeps its names, distinct count and event -1, and counts
    as merged (its events were). Everything but the rectangles passes through."""
    import dataclasses

    from nbprof.analysis.timeline import remerge, timeline_rects

    p = ops_to_merge().load(tmp_path)
    data = timeline_rects(p.events, p.meta, merge=False)
    links = pd.DataFrame({"group": [0], "row": [0], "x_us": [1.0], "last": [True], "text": ["x"]})
    r = data.rects.assign(hover=["a0", "b", "a1", "z"], weight=[1.0, 2.0, 3.0, 2.5], color=["#1", "#2", "#3", "#4"])
    data = dataclasses.replace(data, rects=r, links=links)
    out = remerge(data, 1)  # one pixel of 100 µs: row 0's three join, z stays
    assert list(out.rects.columns) == list(RECT_COLUMNS) + ["hover", "weight"]
    h = out.rects["hover"].tolist()  # None, which pandas 3 stores as a str column's NaN
    assert pd.isna(h[0]) and h[1] == "z"
    w = out.rects["weight"].tolist()
    assert np.isnan(w[0]) and w[1] == 2.5 and out.rects["weight"].dtype == F64
    assert _rect_dtypes(out.rects.drop(columns=["hover", "weight"])) == RECT_DTYPES
    assert out.links is links and out.hidden is data.hidden and out.events is data.events
    assert out.event_row is data.event_row and out.rows is data.rows and out.lanes is data.lanes
    # merged at 50 µs a pixel, then again at 100: row 0 is a group of one, an earlier merge
    half = remerge(timeline_rects(p.events, p.meta, merge=False), 2)
    assert half.px_us == 50.0 and half.rects["count"].tolist() == [3, 1]
    again = remerge(half, 1)
    assert again.px_us == 100.0
    assert again.rects[["x0_us", "x1_us", "busy_us", "count", "name", "event", "distinct"]].values.tolist() == [
        [0.0, 6.0, 4.0, 3, "aten::a", -1, 2], [0.0, 100.0, 100.0, 1, "aten::z", 3, 1]]
    assert again.rects["names"].tolist() == [[("aten::a", 2), ("aten::b", 1)], None]
    assert (again.merged_events, again.merged_rects) == (3, 1)


# -------------------------------------------------------------------------------------- overview


def test_overview_advice_ties_go_to_loading_then_to_the_cpu():
    """Why the GPU waits, where two reasons tie: data loading as big as the CPU (or the rest) is
    the loading; the CPU as big as the rest is the CPU."""
    from nbprof.analysis.overview import overview_advice

    def row(**kw):
        base = dict(duration_us=100.0, kernel_us=40.0, memcpy_us=0.0, memset_us=0.0, runtime_us=0.0,
                    dataloader_us=0.0, cpu_exec_us=0.0, other_us=0.0)
        return pd.Series({**base, **kw})

    waits = "The GPU is busy 40.0% of the step time: it waits for the next batch from the DataLoader most of the time."
    assert overview_advice(row(dataloader_us=20.0, cpu_exec_us=15.0, runtime_us=5.0, other_us=20.0), True)[1] == waits
    assert overview_advice(row(dataloader_us=4.0, cpu_exec_us=3.0, runtime_us=1.0, other_us=4.0), True) == [waits]
    [why] = overview_advice(row(cpu_exec_us=20.0, runtime_us=10.0, other_us=30.0), True)
    assert why.startswith("The GPU is busy 40.0% of the step time: the CPU is the bound: operators and launches "
                          "take 30.0 µs of the step")
    [why] = overview_advice(row(cpu_exec_us=20.0, runtime_us=10.0, other_us=30.5), True)
    assert why.endswith("try a bigger batch (it can change how the model converges).")
    # data loading of exactly 5 % of a step is no advice; busy time counts copies and fills
    assert overview_advice(row(kernel_us=30.0, memcpy_us=10.0, memset_us=10.0, dataloader_us=5.0), True) == []


# --------------------------------------------------------------------------------------- modules


MODULE_COLUMNS = ["module", "name", "type", "parent", "depth", "calls", "cpu_total_us", "self_cpu_us",
                  "device_total_us", "self_device_us"]


def test_module_tree_nests_equal_starts_longest_first_and_counts_only_its_threads_launches(tmp_path):
    """Two calls starting together: the longer is the parent, whatever the file's order. Device
    work launched on another thread during a call is not the call's. A type is the name less a
    trailing ``_<number>``, and only that."""
    from nbprof.analysis.modules import module_tree

    t = Trace()
    t.op("nn.Module: Inner_0", 0, 50, cat="python_function")  # first in the file
    t.op("nn.Module: Seq_0", 0, 100, cat="python_function")
    mm = t.op("aten::mm", 5, 10)
    t.launch("gemm", mm, 6, 2, 40, 5)  # launched at 6 in Inner_0, runs [40, 45)
    t.op("nn.Module: Conv_Block_3", 60, 10, cat="python_function")
    other = t.op("aten::add", 20, 10, tid=2000)
    t.launch("add_kernel", other, 22, 2, 80, 10, tid=2000)  # launched during Seq_0, on another thread
    t.op("nn.Module: Odd_x", 200, 10, tid=2000, cat="python_function")
    m = module_tree(t.load(tmp_path).events)
    assert list(m.columns) == MODULE_COLUMNS
    assert m.values.tolist() == [
        ["Seq_0", "Seq_0", "Seq", "", 0, 1, 100.0, 40.0, 5.0, 0.0],
        ["Seq_0.Inner_0", "Inner_0", "Inner", "Seq_0", 1, 1, 50.0, 50.0, 5.0, 5.0],
        ["Seq_0.Conv_Block_3", "Conv_Block_3", "Conv_Block", "Seq_0", 1, 1, 10.0, 10.0, 0.0, 0.0],
        ["Odd_x", "Odd_x", "Odd_x", "", 0, 1, 10.0, 10.0, 0.0, 0.0],
    ]
    assert [str(m[c].dtype) for c in MODULE_COLUMNS[4:]] == ["int64"] * 2 + ["float64"] * 4


DEVICE_INT_COLUMNS = ("kernels", "memcpys", "memsets", "streams", "peak_allocated_bytes", "peak_reserved_bytes",
                      "total_memory_bytes")


def _device_dtypes(devices: pd.DataFrame) -> dict:
    assert pd.api.types.is_string_dtype(devices["device"])
    return {c: str(devices[c].dtype) for c in devices.columns if c != "device"}


def test_device_stats_tables_dtypes_with_and_without_devices(tmp_path):
    """Counts and bytes int64, times and shares float64, with device work or without any (the
    empty table's columns typed as a full one's)."""
    from nbprof.analysis.device_stats import DEVICE_COLUMNS, device_stats

    want = {c: "int64" if c in DEVICE_INT_COLUMNS else "float64" for c in DEVICE_COLUMNS if c != "device"}
    cpu = Trace()
    cpu.op("aten::mm", 0, 10)
    cpu.memory(5, 64, 64, 512, device=-1)
    p = cpu.load(tmp_path, "cpu.json")
    d = device_stats(p.events, p.meta)
    assert len(d.devices) == 0 and _device_dtypes(d.devices) == want
    p = _two_stream_trace().load(tmp_path)
    d = device_stats(p.events, p.meta)
    assert len(d.devices) == 1 and _device_dtypes(d.devices) == want
    assert pd.api.types.is_string_dtype(d.streams["device"])
    assert {c: str(d.streams[c].dtype) for c in ("stream", "busy_us", "busy_fraction", "kernel_us", "kernels")} == {
        "stream": "int64", "busy_us": "float64", "busy_fraction": "float64", "kernel_us": "float64", "kernels": "int64"}


def test_code_family_of_a_stdlib_file_reads_backslashes_as_separators():
    """As for cells and packages, a backslash separates a stdlib path's parts (Windows' paths, which
    os.path.normcase writes with backslashes there): the module is the first part under the stdlib."""
    import os
    import sysconfig

    from nbprof.analysis.flame import code_family

    stdlib = os.path.abspath(sysconfig.get_paths()["stdlib"])
    assert code_family(os.path.join(stdlib, "json", "decoder.py")) == ("stdlib", "json")
    assert code_family(stdlib + os.sep + "json\\decoder.py") == ("stdlib", "json")
    assert code_family(os.path.join(stdlib, "random.py")) == ("stdlib", "random")
