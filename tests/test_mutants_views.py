"""The contracts of the views' analysis pieces (the op tree, key averages, the timeline and its
tracks and windows, device stats, intervals, flame and call graph, stacks, overview, memory,
modules), pinned where the mutation samples of issue 26 found them loose: empty inputs (columns
and dtypes written out), both sides of each boundary, tie order, dtypes. Every expected value is
worked out by hand in the test (small integer nanoseconds, hand-made traces), never with the code
under test or its helpers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace, ops_to_merge

# what a column of Python strings gets in this pandas (2: "object", 3: "str"), with rows or without
TXT = str(pd.Series(["a"]).dtype)

I64 = np.int64


def a64(*values):
    return np.array(values, dtype=I64)


# ------------------------------------------------------------------------------------ _intervals


def test_union_segments_merges_touching_and_overlapping_intervals_per_group():
    from nbprof.analysis._intervals import union_segments

    # group 1: [0,10) and [10,15) touch -> one; [20,30) contains [22,25); group 0: [5,6), [8,9)
    g, s, e = union_segments(a64(20, 0, 8, 10, 22, 5), a64(30, 10, 9, 15, 25, 6), a64(1, 1, 0, 1, 1, 0))
    assert g.tolist() == [0, 0, 1, 1]
    assert s.tolist() == [5, 8, 0, 20]
    assert e.tolist() == [6, 9, 15, 30]
    assert g.dtype == s.dtype == e.dtype == I64
    # an interval that ends before it starts is a point; no group: one group 0
    g, s, e = union_segments(a64(100, 0), a64(90, 5))
    assert (g.tolist(), s.tolist(), e.tolist()) == ([0, 0], [0, 100], [5, 100])
    # a gap of one ns is a gap
    g, s, e = union_segments(a64(0, 11), a64(10, 20))
    assert (s.tolist(), e.tolist()) == ([0, 11], [10, 20])


def test_union_segments_of_nothing_are_three_empty_int64_arrays():
    from nbprof.analysis._intervals import union_segments

    out = union_segments(np.zeros(0), np.zeros(0), np.zeros(0))
    assert [len(x) for x in out] == [0, 0, 0] and all(x.dtype == I64 for x in out)
    out = union_segments(np.zeros(0), np.zeros(0))
    assert [len(x) for x in out] == [0, 0, 0] and all(x.dtype == I64 for x in out)


def test_union_segments_groups_far_apart_in_time_stay_apart():
    from nbprof.analysis._intervals import union_segments

    # group 0 ends late, group 1 starts early: the stride must keep them apart
    g, s, e = union_segments(a64(0, 1000, 0, 5), a64(2000, 3000, 10, 20), a64(0, 0, 1, 1))
    assert (g.tolist(), s.tolist(), e.tolist()) == ([0, 1], [0, 0], [3000, 20])


def test_measure_each_and_within_cover_windows_by_hand():
    from nbprof.analysis._intervals import measure_each, measure_within

    seg_g, seg_s, seg_e = a64(0, 0, 1), a64(10, 30, 0), a64(20, 40, 100)
    win_g, win_s, win_e = a64(0, 0, 0, 1, 0), a64(0, 15, 20, 50, 45), a64(100, 35, 30, 60, 50)
    each = measure_each(seg_g, seg_s, seg_e, win_g, win_s, win_e)
    # [0,100) covers 10+10; [15,35) covers 5+5; [20,30) a gap; group 1's [50,60) 10; [45,50) after all of group 0
    assert each.tolist() == [20.0, 10.0, 0.0, 10.0, 0.0] and each.dtype == np.float64
    within = measure_within(seg_g, seg_s, seg_e, win_g[:4], win_s[:4], win_e[:4], 3)
    assert within.tolist() == [30.0, 10.0, 0.0] and within.dtype == np.float64
    # a window that starts before every segment, one that ends inside the first segment
    assert measure_each(a64(0), a64(10), a64(20), a64(0, 0), a64(0, 0), a64(5, 12)).tolist() == [0.0, 2.0]


def test_measure_each_without_segments_or_windows_is_zeros():
    from nbprof.analysis._intervals import measure_each, measure_within

    z = np.zeros(0, dtype=I64)
    out = measure_each(z, z, z, a64(0, 1), a64(0, 0), a64(10, 10))
    assert out.tolist() == [0.0, 0.0] and out.dtype == np.float64
    out = measure_each(a64(0), a64(0), a64(10), z, z, z)
    assert len(out) == 0 and out.dtype == np.float64
    out = measure_within(z, z, z, z, z, z, 2)
    assert out.tolist() == [0.0, 0.0] and out.dtype == np.float64


def test_gaps_between_segments_of_each_group():
    from nbprof.analysis._intervals import gaps

    out = gaps(a64(0, 0, 0, 1, 1), a64(0, 10, 30, 5, 50), a64(5, 20, 40, 6, 60))
    assert list(out.columns) == ["group", "start", "end"]
    assert out.values.tolist() == [[0, 5, 10], [0, 20, 30], [1, 6, 50]]
    for n in (0, 1):
        empty = gaps(a64(*range(n)), a64(*range(n)), a64(*range(n)))
        assert list(empty.columns) == ["group", "start", "end"] and len(empty) == 0
        assert all(empty[c].dtype == I64 for c in empty.columns)


def test_assign_points_takes_start_but_not_end():
    from nbprof.analysis._intervals import assign_points

    # intervals (given out of order): group 0 [10,20) is index 1, [20,30) index 0; group 1 [10,20) index 2
    iv_g, iv_s, iv_e = a64(0, 0, 1), a64(20, 10, 10), a64(30, 20, 20)
    pts_g, pts_t = a64(0, 0, 0, 0, 0, 1, 1), a64(9, 10, 19, 20, 30, 15, 25)
    out = assign_points(pts_g, pts_t, iv_g, iv_s, iv_e)
    assert out.tolist() == [-1, 1, 1, 0, -1, 2, -1] and out.dtype == I64
    assert assign_points(a64(), a64(), iv_g, iv_s, iv_e).tolist() == []
    out = assign_points(a64(0), a64(5), a64(), a64(), a64())
    assert out.tolist() == [-1] and out.dtype == I64


def test_sum_in_intervals_counts_start_but_not_end_and_nested_intervals_each():
    from nbprof.analysis._intervals import sum_in_intervals

    pts_g, pts_t, w = a64(0, 0, 0, 0, 1), a64(10, 15, 20, 5, 12), np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    iv_g, iv_s, iv_e = a64(0, 0, 1, 0), a64(10, 12, 10, 21), a64(20, 16, 13, 30)
    total, count = sum_in_intervals(pts_g, pts_t, w, iv_g, iv_s, iv_e)
    assert total.tolist() == [3.0, 2.0, 16.0, 0.0] and count.tolist() == [2, 1, 1, 0]
    assert total.dtype == np.float64 and count.dtype == I64
    for args in ((a64(), a64(), np.zeros(0), iv_g, iv_s, iv_e), (pts_g, pts_t, w, a64(), a64(), a64())):
        total, count = sum_in_intervals(*args)
        n = len(args[3])
        assert total.tolist() == [0.0] * n and count.tolist() == [0] * n
        assert total.dtype == np.float64 and count.dtype == I64


def test_points_in_intervals_pairs_each_interval_with_its_points_in_time_order():
    from nbprof.analysis._intervals import points_in_intervals

    # points (not in time order): 0@30, 1@10, 2@20, 3@10 of group 1
    pts_g, pts_t = a64(0, 0, 0, 1), a64(30, 10, 20, 10)
    iv, pt = points_in_intervals(pts_g, pts_t, a64(0, 1, 0, 0), a64(10, 0, 0, 31), a64(31, 11, 20, 40))
    assert iv.tolist() == [0, 0, 0, 1, 2] and pt.tolist() == [1, 2, 0, 3, 1]
    assert iv.dtype == pt.dtype == I64
    for args in ((a64(), a64(), a64(0), a64(0), a64(5)), (pts_g, pts_t, a64(), a64(), a64())):
        iv, pt = points_in_intervals(*args)
        assert len(iv) == len(pt) == 0 and iv.dtype == pt.dtype == I64


def _kernel(t: Trace, name: str, ts: float, dur: float, ext: int = 0, corr: int = 0, stream: int = 7,
            cat: str = "kernel", device: int = 0) -> None:
    """Device work as torch writes it, without the runtime call ``Trace.launch`` adds."""
    t.events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
                     "args": {"External id": ext, "correlation": corr, "device": device, "stream": stream}})


def test_launch_points_from_the_runtime_call_else_the_op_and_without_either_left_out(tmp_path):
    from nbprof.analysis._intervals import launch_points

    t = Trace()
    a = t.op("aten::mm", 0, 100)
    t.launch("k_runtime", a, 10, 5, 50, 20)  # correlation 1: the runtime call at 10 µs launches it
    b = t.op("aten::add", 200, 100)
    _kernel(t, "k_op_only", 400, 30, ext=b, corr=99)  # no runtime call with correlation 99: its op at 200
    _kernel(t, "k_orphan", 500, 7)  # neither: left out
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    process = np.arange(len(ev), dtype=I64) * 10  # a process code per row, to see which row it came from
    lp = launch_points(ev, process)
    assert list(lp.columns) == ["row", "launch_ns", "process", "dur_ns", "runtime_row", "runtime_dur_ns"]
    runtime_row = names.index("cudaLaunchKernel")
    rows = [names.index("k_runtime"), names.index("k_op_only")]
    assert lp["row"].tolist() == rows
    assert lp["launch_ns"].tolist() == [10_000, 200_000]
    assert lp["process"].tolist() == [runtime_row * 10, names.index("aten::add") * 10]
    assert lp["dur_ns"].tolist() == [20_000, 30_000]
    assert lp["runtime_row"].tolist() == [runtime_row, -1]
    assert lp["runtime_dur_ns"].tolist() == [5_000, 0]
    assert all(lp[c].dtype == I64 for c in lp.columns)
    # an events table without the tree's parents: only the runtime calls launch
    raw = launch_points(ev.drop(columns="parent"), process)
    assert raw["row"].tolist() == rows[:1] and raw["launch_ns"].tolist() == [10_000]


def test_launch_points_of_a_profile_without_device_work_are_empty_int64_columns(tmp_path):
    from nbprof.analysis._intervals import launch_points

    t = Trace()
    t.op("aten::add", 0, 10)
    ev = t.load(tmp_path).events
    lp = launch_points(ev, np.zeros(len(ev), dtype=I64))
    assert list(lp.columns) == ["row", "launch_ns", "process", "dur_ns", "runtime_row", "runtime_dur_ns"]
    assert len(lp) == 0 and all(lp[c].dtype == I64 for c in lp.columns)


def test_launch_points_match_each_correlation_id_among_many_runtime_calls(tmp_path):
    """Runtime calls in file order 3, 1, 2 (sorted to be searched); a kernel whose id is past
    every call's, and one whose id is below them, have no runtime call."""
    from nbprof.analysis._intervals import launch_points

    t = Trace()
    ext = t.op("aten::mm", 0, 1000)
    for corr, ts in ((3, 30), (1, 10), (2, 20)):
        t.runtime("cudaLaunchKernel", ts, 1 + corr, ext=ext, corr=corr)
    for corr, ts in ((1, 100), (2, 200), (3, 300), (4, 400)):
        _kernel(t, f"k{corr}", ts, 10, ext=ext, corr=corr)
    ev = t.load(tmp_path).events
    lp = launch_points(ev, np.zeros(len(ev), dtype=I64))
    assert lp["launch_ns"].tolist() == [10_000, 20_000, 30_000, 0]  # k4: the op at 0
    assert lp["runtime_dur_ns"].tolist() == [2_000, 3_000, 4_000, 0]


# ---------------------------------------------------------------------------------------- memory


def test_downsample_max_keeps_each_buckets_first_and_highest_point_and_the_last():
    from nbprof.analysis.memory import downsample_max

    x = np.arange(10, dtype=np.float64)
    y = np.array([5, 1, 9, 2, 3, 3, 0, 8, 7, 6], dtype=np.float64)
    # 2 buckets over [0, 9]: bucket = floor(x / 9 * 2) -> x 0..4 in 0, 5..9 in 1 (9 clipped to 1)
    kx, ky = downsample_max(x, y, 2)
    # bucket 0: first x=0, max x=2 (9); bucket 1: first x=5, max x=7 (8); and the last x=9
    assert kx.tolist() == [0.0, 2.0, 5.0, 7.0, 9.0] and ky.tolist() == [5.0, 9.0, 3.0, 8.0, 6.0]
    # at most 2 points a bucket: nothing to do (n == 2 * buckets too)
    kx, ky = downsample_max(x, y, 5)
    assert kx.tolist() == x.tolist() and ky.tolist() == y.tolist()
    kx, ky = downsample_max(x[:0], y[:0], 0)
    assert len(kx) == 0 and len(ky) == 0
    # all at one instant: the first point and the highest
    kx, ky = downsample_max(np.full(6, 3.0), np.array([1.0, 4, 2, 4, 0, 1]), 2)
    assert kx.tolist() == [3.0, 3.0] and ky.tolist() == [1.0, 4.0]


def test_downsample_max_takes_the_first_of_equal_maxima_in_a_bucket():
    from nbprof.analysis.memory import downsample_max

    x = np.arange(7, dtype=np.float64)
    y = np.array([0, 4, 4, 1, 0, 0, 0], dtype=np.float64)
    # one bucket over [0, 6]... (n 7 > 2): first x=0, the max 4 first seen at x=1, the last x=6
    kx, ky = downsample_max(x, y, 1)
    assert kx.tolist() == [0.0, 1.0, 6.0] and ky.tolist() == [0.0, 4.0, 0.0]


def _memory_trace() -> Trace:
    t = Trace()
    t.op("aten::conv2d", 0, 100)
    t.op("aten::empty", 10, 10)
    t.memory(15, 4096, total_allocated=5096, total_reserved=1 << 21, addr=0xA)  # in aten::empty
    t.memory(50, 1024, total_allocated=6120, total_reserved=1 << 22, addr=0xB)  # in aten::conv2d
    t.memory(300, -4096, total_allocated=2024, total_reserved=1 << 21, addr=0xA)  # outside every op
    t.memory(200, 64, total_allocated=64, total_reserved=4096, device=-1, addr=0xC)  # CPU
    t.memory(250, -32, total_allocated=32, total_reserved=4096, device=-1, addr=0xD)  # CPU, freed only
    return t


def test_memory_curve_is_per_device_in_time_order_with_the_op_open_at_each_event(tmp_path):
    from nbprof.analysis.memory import memory_curve

    curve = memory_curve(_memory_trace().load(tmp_path).events)
    assert list(curve.columns) == ["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"]
    assert curve.values.tolist() == [
        ["cpu", 200.0, 64, 4096, 64, ""],
        ["cpu", 250.0, 32, 4096, -32, ""],
        ["cuda:0", 15.0, 5096, 1 << 21, 4096, "aten::empty"],
        ["cuda:0", 50.0, 6120, 1 << 22, 1024, "aten::conv2d"],
        ["cuda:0", 300.0, 2024, 1 << 21, -4096, ""],
    ]
    assert curve.index.tolist() == [0, 1, 2, 3, 4]


def test_memory_curve_of_a_profile_without_memory_events_has_the_columns(tmp_path):
    from nbprof.analysis.memory import memory_curve, memory_peaks

    t = Trace()
    t.op("aten::add", 0, 10)
    curve = memory_curve(t.load(tmp_path).events)
    assert list(curve.columns) == ["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"]
    assert len(curve) == 0
    assert memory_peaks(curve) == []


def test_memory_peaks_per_device(tmp_path):
    from nbprof.analysis.memory import MemoryPeak, memory_curve, memory_peaks

    peaks = memory_peaks(memory_curve(_memory_trace().load(tmp_path).events))
    assert peaks == [
        MemoryPeak(device="cpu", peak_allocated_bytes=64, peak_time_us=200.0, peak_op="", peak_reserved_bytes=4096,
                   start_allocated_bytes=0),
        MemoryPeak(device="cuda:0", peak_allocated_bytes=6120, peak_time_us=50.0, peak_op="aten::conv2d",
                   peak_reserved_bytes=1 << 22, start_allocated_bytes=1000),
    ]
    assert all(type(p.peak_allocated_bytes) is int and type(p.start_allocated_bytes) is int
               and type(p.peak_reserved_bytes) is int and type(p.peak_time_us) is float for p in peaks)


def test_memory_peak_of_equal_totals_is_the_first(tmp_path):
    from nbprof.analysis.memory import memory_curve, memory_peaks

    t = Trace()
    t.op("aten::a", 0, 10)
    t.op("aten::b", 20, 10)
    t.memory(5, 100, total_allocated=100, total_reserved=512, addr=1)
    t.memory(25, 0, total_allocated=100, total_reserved=512, addr=2)
    [peak] = memory_peaks(memory_curve(t.load(tmp_path).events))
    assert (peak.peak_time_us, peak.peak_op) == (5.0, "aten::a")


def test_allocations_pair_each_block_with_its_free(tmp_path):
    from nbprof.analysis.memory import allocations

    a = allocations(_memory_trace().load(tmp_path).events)
    assert list(a.columns) == ["device", "addr", "bytes", "alloc_us", "free_us", "lifetime_us", "op", "top_op"]
    rows = a.values.tolist()
    # blocks from before the profile first (the CPU free at 250), then by allocation time
    assert rows[0] == ["cpu", 0xD, 32, pytest.approx(np.nan, nan_ok=True), 250.0,
                       pytest.approx(np.nan, nan_ok=True), "", ""]
    assert rows[1:] == [
        ["cuda:0", 0xA, 4096, 15.0, 300.0, 285.0, "aten::empty", "aten::conv2d"],
        ["cuda:0", 0xB, 1024, 50.0, pytest.approx(np.nan, nan_ok=True), pytest.approx(np.nan, nan_ok=True),
         "aten::conv2d", "aten::conv2d"],
        ["cpu", 0xC, 64, 200.0, pytest.approx(np.nan, nan_ok=True), pytest.approx(np.nan, nan_ok=True), "", ""],
    ]
    assert a["bytes"].dtype == I64 and a["alloc_us"].dtype == a["free_us"].dtype == np.float64


def test_allocations_reuse_of_an_address_pairs_in_turn(tmp_path):
    """One address allocated, freed, allocated again and freed: two blocks; a second free in a
    row is a block from before... no: only a free right after an allocation pairs with it."""
    from nbprof.analysis.memory import allocations

    t = Trace()
    t.op("aten::empty", 0, 1000)
    t.memory(10, 256, 256, 4096, addr=7)
    t.memory(20, -256, 0, 4096, addr=7)
    t.memory(30, 512, 512, 4096, addr=7)
    t.memory(40, -512, 0, 4096, addr=7)
    t.memory(50, 128, 128, 4096, addr=8)
    t.memory(60, 64, 192, 4096, addr=8)  # allocated again without a free: the first is never freed
    a = allocations(t.load(tmp_path).events)
    assert a[["addr", "bytes", "alloc_us", "free_us"]].values.tolist()[:3] == [
        [7, 256, 10.0, 20.0], [7, 512, 30.0, 40.0], [8, 128, 50.0, pytest.approx(np.nan, nan_ok=True)]]
    assert a[["addr", "bytes", "alloc_us"]].values.tolist()[3] == [8, 64, 60.0]
    assert np.isnan(a["free_us"].iloc[3])


def test_allocations_without_memory_events_have_the_columns_and_dtypes(tmp_path):
    from nbprof.analysis.memory import allocations

    t = Trace()
    t.op("aten::add", 0, 10)
    t.memory(5, 0, 0, 0, addr=0)  # a memory event without an address is no block
    a = allocations(t.load(tmp_path).events)
    assert list(a.columns) == ["device", "addr", "bytes", "alloc_us", "free_us", "lifetime_us", "op", "top_op"]
    assert len(a) == 0
    # addresses and bytes int64, as a table with rows has them
    assert [str(a[c].dtype) for c in a.columns] == [TXT, "int64", "int64", "float64", "float64", "float64", TXT, TXT]


def test_alive_at_holds_a_block_allocated_at_the_time_but_not_one_freed_then():
    from nbprof.analysis.memory import alive_at

    nan = np.nan
    allocs = pd.DataFrame({
        "device": ["cuda:0", "cuda:0", "cuda:0", "cuda:0", "cuda:0", "cpu"],
        "addr": [1, 2, 3, 4, 5, 6],
        "bytes": [10, 30, 20, 40, 30, 99],
        "alloc_us": [100.0, 50.0, nan, 101.0, 0.0, 0.0],
        "free_us": [200.0, 100.0, nan, nan, nan, nan],
    })
    held = alive_at(allocs, 100.0, "cuda:0")
    # addr 1: allocated at 100 (held); 2: freed at 100 (gone); 3: from before, never freed; 4: later;
    # 5: never freed; the CPU block is another device. Biggest first, equal sizes in their order.
    assert held["addr"].tolist() == [5, 3, 1]
    assert alive_at(allocs, 99.0, "cuda:0")["addr"].tolist() == [2, 5, 3]


# ------------------------------------------------------------------------------- timeline tracks


def test_union_busy_us_counts_overlaps_once_per_bin():
    from nbprof.analysis.timeline_tracks import union_busy_us

    # [0,10) and [5,15) -> [0,15); [15,20) touches it; [30,40)
    start, end = np.array([5.0, 0.0, 30.0, 15.0]), np.array([15.0, 10.0, 40.0, 20.0])
    busy = union_busy_us(start, end, np.array([0.0, 10.0, 20.0, 35.0, 50.0]))
    assert busy.tolist() == [10.0, 10.0, 5.0, 5.0]
    # an edge before every interval, and one inside the last
    assert union_busy_us(start, end, np.array([-10.0, 0.0, 32.0])).tolist() == [0.0, 22.0]
    out = union_busy_us(np.zeros(0), np.zeros(0), np.array([0.0, 1.0, 2.0]))
    assert out.tolist() == [0.0, 0.0]


def test_gpu_busy_track_bins_per_device(tmp_path):
    from nbprof.analysis.timeline_tracks import gpu_busy_track

    t = Trace()
    ext = t.op("aten::mm", 0, 10)
    _kernel(t, "k0", 0, 50, ext=ext, stream=7)
    _kernel(t, "k1", 25, 50, ext=ext, stream=8)  # overlaps k0 on another stream: counted once
    _kernel(t, "k2", 10, 20, ext=ext, device=1)
    track = gpu_busy_track(t.load(tmp_path).events, 0.0, 100.0, bins=4)
    assert list(track.columns) == ["device", "t0_us", "t1_us", "busy_us", "busy_pct"]
    assert track.values.tolist() == [
        ["cuda:0", 0.0, 25.0, 25.0, 100.0], ["cuda:0", 25.0, 50.0, 25.0, 100.0],
        ["cuda:0", 50.0, 75.0, 25.0, 100.0], ["cuda:0", 75.0, 100.0, 0.0, 0.0],
        ["cuda:1", 0.0, 25.0, 15.0, 60.0], ["cuda:1", 25.0, 50.0, 5.0, 20.0],
        ["cuda:1", 50.0, 75.0, 0.0, 0.0], ["cuda:1", 75.0, 100.0, 0.0, 0.0],
    ]
    # bins < 1 is one bin; an empty span is a bin of 1e-9 µs
    one = gpu_busy_track(t.load(tmp_path, "b.json").events, 0.0, 100.0, bins=0)
    assert one[["t0_us", "t1_us", "busy_us"]].values.tolist() == [[0.0, 100.0, 75.0], [0.0, 100.0, 20.0]]
    flat = gpu_busy_track(t.load(tmp_path, "c.json").events, 30.0, 30.0, bins=1)
    assert flat["t1_us"].tolist() == [30.0 + 1e-9, 30.0 + 1e-9] and flat["busy_pct"].tolist() == [100.0, 0.0]


def test_gpu_busy_track_of_a_profile_without_device_work_has_the_columns(tmp_path):
    from nbprof.analysis.timeline_tracks import gpu_busy_track

    t = Trace()
    t.op("aten::add", 0, 10)
    track = gpu_busy_track(t.load(tmp_path).events, 0.0, 10.0)
    assert list(track.columns) == ["device", "t0_us", "t1_us", "busy_us", "busy_pct"] and len(track) == 0


def test_memory_track_starts_with_the_value_held_and_keeps_each_bins_peak_and_last():
    from nbprof.analysis.timeline_tracks import memory_track

    curve = pd.DataFrame({
        "device": ["cuda:0"] * 6 + ["cuda:1"],
        "time_us": [5.0, 12.0, 14.0, 16.0, 30.0, 99.0, 1.0],
        "allocated_bytes": [100, 300, 900, 200, 50, 7, 42],
    })
    track = memory_track(curve, 10.0, 50.0, bins=2)  # bins [10,30), [30,50]
    assert list(track.columns) == ["device", "time_us", "allocated_bytes"]
    assert track.values.tolist() == [
        ["cuda:0", 10.0, 100], ["cuda:0", 14.0, 900], ["cuda:0", 16.0, 200], ["cuda:0", 30.0, 50],
        ["cuda:1", 10.0, 42], ["cuda:1", 50.0, 42],  # nothing in the window: the value held, flat
    ]
    assert track["allocated_bytes"].dtype == I64
    # a device whose first event is after the window: nothing
    later = memory_track(curve.iloc[6:].assign(time_us=[60.0]), 10.0, 50.0)
    assert list(later.columns) == ["device", "time_us", "allocated_bytes"] and len(later) == 0
    empty = memory_track(curve.iloc[:0], 0.0, 1.0)
    assert list(empty.columns) == ["device", "time_us", "allocated_bytes"] and len(empty) == 0


def test_memory_track_keeps_the_first_of_equal_peaks_in_a_bin():
    from nbprof.analysis.timeline_tracks import memory_track

    curve = pd.DataFrame({"device": ["cuda:0"] * 4, "time_us": [1.0, 2.0, 3.0, 4.0],
                          "allocated_bytes": [5, 9, 9, 1]})
    track = memory_track(curve, 0.0, 10.0, bins=1)
    assert track[["time_us", "allocated_bytes"]].values.tolist() == [[2.0, 9], [4.0, 1]]


def test_flows_pair_with_the_latest_starting_runtime_call_of_an_id(tmp_path):
    from nbprof.analysis.timeline_tracks import flows

    t = Trace()
    ext = t.op("aten::mm", 0, 100)
    t.runtime("cudaLaunchKernel", 10, 20, ext=ext, corr=5)
    t.runtime("cuLaunchKernel", 12, 5, ext=ext, corr=5)  # the driver call under it: queued the work
    t.runtime("cudaLaunchKernel", 40, 5, ext=ext, corr=6)
    _kernel(t, "k5", 50, 10, ext=ext, corr=5)
    _kernel(t, "k6", 70, 10, ext=ext, corr=6)
    _kernel(t, "k7", 90, 10, ext=ext, corr=7)  # no launch recorded
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    f = flows(ev)
    assert list(f.columns) == ["launch", "work", "correlation"]
    assert f.values.tolist() == [[names.index("cuLaunchKernel"), names.index("k5"), 5],
                                 [names.index("cudaLaunchKernel", names.index("cuLaunchKernel")), names.index("k6"), 6]]
    assert all(f[c].dtype == I64 for c in f.columns)


def test_flows_of_a_profile_without_launches_are_empty_int64_columns(tmp_path):
    from nbprof.analysis.timeline_tracks import flows

    t = Trace()
    ext = t.op("aten::mm", 0, 100)
    _kernel(t, "k", 50, 10, ext=ext, corr=3)
    f = flows(t.load(tmp_path).events)
    assert list(f.columns) == ["launch", "work", "correlation"] and len(f) == 0
    assert all(f[c].dtype == I64 for c in f.columns)


# ------------------------------------------------------------------------------- timeline window


def test_window_summary_clips_each_event_to_the_span_and_sorts_ties_by_name(tmp_path):
    from nbprof.analysis.timeline_window import window_summary

    t = Trace()
    a = t.op("aten::b", 0, 100)  # overlaps [50, 150] by 50
    t.op("aten::a", 120, 40)  # by 30
    t.op("aten::a", 150, 10)  # starts at the span's end: overlaps (by 0)
    t.op("aten::c", 200, 10)  # after it: left out
    t.op("aten::z", 40, 10)  # ends at 50: overlaps by 0
    t.launch("gemm", a, 10, 5, 60, 20)  # the runtime call [10, 15] ends before the span
    _kernel(t, "gemm", 70, 40, ext=a, stream=8)  # overlaps the first gemm: busy once
    _kernel(t, "fill", 140, 20, ext=a)
    s = window_summary(t.load(tmp_path).events, 150.0, 50.0)  # given the other way round
    assert (s.t0_us, s.t1_us, s.span_us) == (50.0, 150.0, 100.0)
    assert list(s.ops.columns) == ["name", "calls", "in_window_us", "total_us"]
    assert s.ops.values.tolist() == [["aten::b", 1, 50.0, 100.0], ["aten::a", 2, 30.0, 50.0],
                                     ["aten::z", 1, 0.0, 10.0]]
    assert s.kernels.values.tolist() == [["gemm", 2, 60.0, 60.0], ["fill", 1, 10.0, 20.0]]
    assert s.device_busy_us == 60.0  # [60, 110) and [140, 150)
    # the runtime call starts at the span's end: in it, for 0 µs
    early = window_summary(t.load(tmp_path, "b.json").events, 0.0, 10.0)
    assert early.ops.values.tolist() == [["aten::b", 1, 10.0, 100.0], ["cudaLaunchKernel", 1, 0.0, 5.0]]
    # nothing in the span: empty tables with the columns, nothing busy
    none = window_summary(t.load(tmp_path, "c.json").events, 1000.0, 2000.0)
    assert len(none.ops) == len(none.kernels) == 0 and none.device_busy_us == 0.0
    assert list(none.kernels.columns) == ["name", "calls", "in_window_us", "total_us"]


def test_window_summary_orders_equal_times_by_name(tmp_path):
    from nbprof.analysis.timeline_window import window_summary

    t = Trace()
    t.op("aten::mul", 0, 10)
    t.op("aten::add", 20, 10)
    t.op("aten::sub", 40, 20)
    s = window_summary(t.load(tmp_path).events, 0.0, 100.0)
    assert s.ops["name"].tolist() == ["aten::sub", "aten::add", "aten::mul"]


def test_find_events_finds_drawn_events_by_a_part_of_their_name(tmp_path):
    from nbprof.analysis.timeline_window import find_events

    t = Trace()
    a = t.op("aten::Conv2d", 0, 100)
    t.launch("implicit_CONV_kernel", a, 10, 5, 60, 20)
    t.op("model.py(3): conv_block", 0, 200, cat="python_function")
    t.memory(50, 16, 16, 512)
    t.op("aten::relu", 150, 10)
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    hits = find_events(ev, "  conv ")
    assert sorted(names[i] for i in hits) == ["aten::Conv2d", "implicit_CONV_kernel", "model.py(3): conv_block"]
    assert hits.tolist() == sorted(hits.tolist())
    assert find_events(ev, "[memory]").tolist() == []  # memory events are not drawn
    out = find_events(ev, " ")
    assert out.tolist() == [] and out.dtype == I64
    assert find_events(ev, "LAUNCHKERNEL").tolist() == [names.index("cudaLaunchKernel")]


# ------------------------------------------------------------------------------------- timeline


def test_clip_overlaps_starts_each_rectangle_at_the_latest_end_before_it():
    from nbprof.analysis.timeline import clip_overlaps

    row = a64(0, 0, 0, 0, 1, 1)
    x0 = np.array([0.0, 5.0, 6.0, 12.0, 3.0, 4.0])
    x1 = np.array([10.0, 8.0, 11.0, 15.0, 9.0, 9.0])
    c0, c1, hidden = clip_overlaps(row, x0, x1)
    # row 0: [5,8) under [0,10): hidden; [6,11) from 10; [12,15) alone. Row 1: [4,9) ends with [3,9): hidden
    assert c0.tolist() == [0.0, 10.0, 10.0, 12.0, 3.0, 9.0]
    assert c1.tolist() == [10.0, 10.0, 11.0, 15.0, 9.0, 9.0]
    assert hidden.tolist() == [False, True, False, False, False, True]
    # rows apart: the first of a row is never clipped by the last of the row before
    c0, c1, hidden = clip_overlaps(a64(0, 1), np.array([0.0, 5.0]), np.array([10.0, 8.0]))
    assert (c0.tolist(), c1.tolist(), hidden.tolist()) == ([0.0, 5.0], [10.0, 8.0], [False, False])
    # touching is not overlapping
    c0, c1, hidden = clip_overlaps(a64(0, 0), np.array([0.0, 10.0]), np.array([10.0, 20.0]))
    assert (c0.tolist(), hidden.tolist()) == ([0.0, 10.0], [False, False])
    for n in (0, 1):
        c0, c1, hidden = clip_overlaps(a64(*[0] * n), np.zeros(n), np.ones(n))
        assert hidden.tolist() == [False] * n and hidden.dtype == bool


def test_merge_groups_joins_small_neighbours_within_a_pixel():
    from nbprof.analysis.timeline import merge_groups

    row = a64(0, 0, 0, 0, 0, 1)
    x0 = np.array([0.0, 1.0, 2.5, 9.5, 10.2, 10.4])
    x1 = np.array([0.5, 1.5, 5.0, 9.9, 10.3, 10.5])
    # px 2, t0 0: pixels 0, 0, 1, 4, 5, 5. 1 joins 0 (small, gap 0.5, same pixel); 2 is 2.5 wide;
    # 4 is in another pixel than 3; 5 is on another row
    assert merge_groups(row, x0, x1, 2.0).tolist() == [False, True, False, False, False, False]
    # t0 moves the pixel grid: at t0 = -1.2, 0 and 1 fall in pixels 0 and 1, 3 and 4 both in 5
    assert merge_groups(row, x0, x1, 2.0, t0=-1.2).tolist() == [False, False, False, False, True, False]
    # no merging at px 0, but a hidden rectangle joins the one before it on its row
    hidden = np.array([False, False, True, False, False, True])
    assert merge_groups(row, x0, x1, 0.0, hidden=hidden).tolist() == [False, False, True, False, False, False]
    # a gap of exactly px does not join; widths of exactly px do not either
    assert merge_groups(a64(0, 0), np.array([0.0, 1.5]), np.array([0.5, 1.6]), 1.0).tolist() == [False, False]
    assert merge_groups(a64(0, 0), np.array([0.0, 0.5]), np.array([0.2, 0.9]), 1.0).tolist() == [False, True]
    assert merge_groups(a64(0, 0), np.array([0.0, 0.1]), np.array([0.1, 1.1]), 1.0).tolist() == [False, False]
    out = merge_groups(a64(), np.zeros(0), np.zeros(0), 1.0)
    assert out.tolist() == [] and out.dtype == bool


def test_aggregate_sums_groups_and_names_them_after_their_busiest_key():
    from nbprof.analysis.timeline import aggregate

    join = np.array([False, True, True, True, False, False, True])
    x0 = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 20.0, 21.0])
    x1 = np.array([1.0, 5.0, 3.0, 4.0, 11.0, 21.0, 22.0])
    count = a64(1, 2, 1, 1, 1, 1, 3)
    busy = np.array([1.0, 1.0, 1.5, 1.0, 1.0, 1.0, 0.5])
    key = a64(7, 8, 9, 8, 5, 6, 6)
    group, agg = aggregate(join, x0, x1, count, busy, key, top=2)
    assert group.tolist() == [0, 0, 0, 0, 1, 2, 2]
    assert agg["x0"].tolist() == [0.0, 10.0, 20.0] and agg["x1"].tolist() == [5.0, 11.0, 22.0]
    assert agg["count"].tolist() == [5, 1, 4] and agg["busy"].tolist() == [4.5, 1.0, 1.5]
    assert agg["first"].tolist() == [0, 4, 5] and agg["size"].tolist() == [4, 1, 2]
    # group 0: key 8 has 2.0 busy (3 events), 9 has 1.5, 7 has 1.0: 8 names it, top 2 = 8, 9
    assert agg["key"].tolist() == [8, 5, 6]
    assert agg["top_keys"].tolist() == [[8, 9], [-1, -1], [6, -1]]
    assert agg["top_counts"].tolist() == [[3, 1], [0, 0], [4, 0]]
    assert agg["distinct"].tolist() == [3, 1, 1]
    assert agg["top_keys"].dtype == agg["top_counts"].dtype == agg["distinct"].dtype == I64


def test_aggregate_of_nothing():
    from nbprof.analysis.timeline import aggregate

    group, agg = aggregate(np.zeros(0, dtype=bool), np.zeros(0), np.zeros(0), a64(), np.zeros(0), a64())
    assert len(group) == 0
    for k in ("x0", "x1", "count", "busy", "first", "size", "key", "distinct"):
        assert len(agg[k]) == 0, k
    assert agg["count"].dtype == I64 and agg["top_keys"].shape == (0, 3)


def test_pair_sums_dense_and_hashed_agree_with_hand_sums():
    from nbprof.analysis.timeline import _pair_sums

    g, k = a64(3, 3, 1, 3, 1), a64(5, 2, 5, 5, 5)
    busy, count = np.array([1.0, 2.0, 4.0, 8.0, 16.0]), a64(1, 1, 2, 3, 5)
    want = {(1, 5): (20.0, 7), (3, 2): (2.0, 1), (3, 5): (9.0, 4)}
    for cells in (4_000_000, 0):  # the dense table, then the hashing path
        pg, pk, pb, pc = _pair_sums(g, k, busy, count, dense_cells=cells)
        got = {(int(a), int(b)): (float(c), int(d)) for a, b, c, d in zip(pg, pk, pb, pc)}
        assert got == want, cells
        assert pc.dtype == I64


def test_thread_and_device_labels():
    from nbprof.analysis.timeline import _device_label, _thread_label

    assert _thread_label(7, "main", {7: "worker"}) == "CPU thread 7 (main)"
    assert _thread_label(7, None, {7: "worker"}) == "CPU thread 7 (worker)"
    assert _thread_label(7, None, {"7": "loader"}) == "CPU thread 7 (loader)"
    assert _thread_label(7, None, {7: "thread 7 (pid 1)"}) == "CPU thread 7"
    assert _thread_label(7, None, {}) == "CPU thread 7"
    assert _device_label("cuda:1", 7) == "CUDA 1 stream 7"
    assert _device_label("mtia", 3) == "MTIA stream 3"


def test_python_depth_follows_the_caller_chain_and_stops_at_a_non_frame():
    from nbprof.analysis.timeline import _python_depth

    # rows 0..5: 1 <- 0, 2 <- 1, 3 <- 4 (4 is no frame), 5 <- 2
    parent = a64(-1, 0, 1, 4, -1, 2)
    py = a64(0, 1, 2, 3, 5)
    out = _python_depth(parent, py)
    assert out.tolist() == [0, 1, 2, 0, 3] and out.dtype == I64


def test_factorize_rows_numbers_combinations_in_order_of_first_appearance():
    from nbprof.analysis.timeline import _factorize_rows

    frame = pd.DataFrame({"a": [2, 1, 2, 1, 2], "b": [5, 5, 5, 6, 1 << 40]})
    codes, keys = _factorize_rows(frame)
    assert codes.tolist() == [0, 1, 0, 2, 3] and codes.dtype == I64
    assert keys.tolist() == [[2, 5], [1, 5], [1, 6], [2, 1 << 40]]
    codes, keys = _factorize_rows(frame.iloc[:0])
    assert codes.dtype == I64 and keys.shape == (0, 2) and keys.dtype == I64


def test_row_start_order_ties_longest_first():
    from nbprof.analysis.timeline import _row_start_order

    row = a64(1, 0, 0, 0, 1)
    s = np.array([0.0, 5.0, 1.0, 5.0, 0.0])
    e = np.array([1.0, 6.0, 2.0, 9.0, 3.0])
    assert _row_start_order(row, s, e).tolist() == [2, 3, 1, 4, 0]
    # no ties: row, then start
    assert _row_start_order(a64(1, 0, 0), np.array([0.0, 2.0, 1.0]), np.array([1.0, 3.0, 2.0])).tolist() == [2, 1, 0]
    out = _row_start_order(a64(), np.zeros(0), np.zeros(0))
    assert out.tolist() == [] and out.dtype == I64


# --------------------------------------------------------------------------------- key averages


def test_group_sum_is_exact_for_integers_beyond_float_precision():
    from nbprof.analysis.key_averages import _group_sum

    group = a64(0, 1, 0, 2)
    out = _group_sum(group, np.array([1.5, 2.0, 0.25, 3.0]), 4)
    assert out.tolist() == [1.75, 2.0, 3.0, 0.0] and out.dtype == np.float64
    out = _group_sum(group, np.array([5, -7, 1, 0], dtype=np.int32), 3)
    assert out.tolist() == [6, -7, 0] and out.dtype == I64
    big = 2**53 + 1  # not a float64: the sum must be done in integers
    out = _group_sum(group, a64(big, 3, 2, -big), 3)
    assert out.tolist() == [big + 2, 3, -big] and out.dtype == I64
    out = _group_sum(a64(), a64(), 2)
    assert out.tolist() == [0, 0] and out.dtype == I64
    # at exactly 2**53 in all, floats would still be exact, but the integer path gives the same
    out = _group_sum(a64(0, 0), a64(2**52, 2**52), 1)
    assert out.tolist() == [2**53] and out.dtype == I64


def test_first_appearance_codes():
    from nbprof.analysis.key_averages import _first_appearance_codes

    codes, first = _first_appearance_codes(a64(9, 4, 9, 7, 4, 7, 1))
    assert codes.tolist() == [0, 1, 0, 2, 1, 2, 3] and first.tolist() == [0, 1, 3, 6]
    assert codes.dtype == first.dtype == I64
    codes, first = _first_appearance_codes(a64())
    assert len(codes) == len(first) == 0 and codes.dtype == first.dtype == I64


def test_key_averages_refuses_an_unknown_grouping_and_stack_without_stacks(tmp_path):
    from nbprof.analysis.key_averages import key_averages
    from nbprof.errors import OptionError

    t = Trace()
    t.op("aten::add", 0, 10)
    ev = t.load(tmp_path).events
    with pytest.raises(OptionError) as e:
        key_averages(ev, group_by="module")
    assert str(e.value) == "group_by must be one of op, shape, stack; got 'module'"
    with pytest.raises(OptionError) as e:
        key_averages(ev, group_by="stack")
    assert str(e.value) == "grouping by stack needs Python stacks: profile with --stack"


KA_COLUMNS = ["name", "count", "self_cpu_us", "cpu_total_us", "cpu_avg_us", "self_device_us", "device_total_us",
              "device_avg_us", "self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes",
              "flops", "kind"]


def _ka_trace() -> Trace:
    t = Trace()
    mm = t.op("aten::mm", 0, 100)
    t.op("aten::empty", 10, 20)
    t.launch("gemm", mm, 40, 10, 200, 30)
    t.memory(15, 512, 512, 4096, addr=1)  # in aten::empty (and aten::mm): device bytes
    t.memory(100, 64, 64, 4096, device=-1, addr=2)  # at aten::mm's end: inside it, CPU bytes
    t.memory(150, 32, 96, 4096, device=-1, addr=3)  # outside every op: a "[memory]" row on the CPU
    t.memory(160, -512, 0, 4096, addr=1)  # outside: a "[memory]" row on the device
    t.op("aten::mm", 300, 50)
    return t


def test_key_averages_of_ops_kernels_and_loose_memory_by_hand(tmp_path):
    from nbprof.analysis.key_averages import key_averages

    k = key_averages(_ka_trace().load(tmp_path).events)
    assert list(k.columns) == KA_COLUMNS
    rows = {r[0]: r[1:] for r in k.values.tolist()}
    # in the file's order of their first event
    assert k["name"].tolist() == ["aten::mm", "aten::empty", "cudaLaunchKernel", "gemm", "[memory]"]
    # aten::mm: two calls, 150 µs; self 150 - 20 (empty) - 10 (the launch); the kernel's 30 µs
    assert rows["aten::mm"] == [2, 120.0, 150.0, 75.0, 30.0, 30.0, 15.0, 64, 64, 0, 512, 0, "op"]
    assert rows["aten::empty"] == [1, 20.0, 20.0, 20.0, 0.0, 0.0, 0.0, 0, 0, 512, 512, 0, "op"]
    assert rows["gemm"] == [1, 0.0, 0.0, 0.0, 30.0, 30.0, 30.0, 0, 0, 0, 0, 0, "kernel"]
    # the loose memory events: one row, the CPU's 32 bytes and the device's -512
    assert rows["[memory]"] == [2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 32, 32, -512, -512, 0, "memory"]
    for c in ("count", "self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes"):
        assert k[c].dtype == I64, c
    assert k["name"].dtype == object


def test_key_averages_rows_come_in_order_of_first_appearance(tmp_path):
    from nbprof.analysis.key_averages import key_averages

    t = Trace()
    t.op("aten::b", 0, 10)
    t.op("aten::a", 20, 10)
    t.op("aten::b", 40, 10)
    t.op("aten::c", 60, 10)
    assert key_averages(t.load(tmp_path).events)["name"].tolist() == ["aten::b", "aten::a", "aten::c"]


def test_key_averages_by_shape_and_by_stack(tmp_path):
    from nbprof.analysis.key_averages import key_averages

    t = Trace()
    for ts, dims in ((0, [[2, 3]]), (20, [[4, 5]]), (40, [[2, 3]])):
        t.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1000, "tid": 1000, "ts": ts,
                         "dur": 10 + ts / 10, "args": {"External id": ts + 1, "Input Dims": dims}})
    ev = t.load(tmp_path).events
    k = key_averages(ev, group_by="shape")
    assert list(k.columns) == KA_COLUMNS[:1] + ["input_shapes"] + KA_COLUMNS[1:]
    assert k[["name", "input_shapes", "count", "cpu_total_us"]].values.tolist() == [
        ["aten::relu", "[[2, 3]]", 2, 24.0], ["aten::relu", "[[4, 5]]", 1, 12.0]]
    stacks = pd.Series(["f ← g", "h", "h"], index=ev.index)
    k = key_averages(ev, group_by="stack", stacks=stacks)
    assert list(k.columns) == KA_COLUMNS[:1] + ["stack"] + KA_COLUMNS[1:]
    assert k[["name", "stack", "count", "cpu_total_us"]].values.tolist() == [
        ["aten::relu", "f ← g", 1, 10.0], ["aten::relu", "h", 2, 26.0]]


def test_key_averages_of_nothing_has_the_columns(tmp_path):
    from nbprof.analysis.key_averages import key_averages

    t = Trace()
    t.op("aten::add", 0, 10)
    ev = t.load(tmp_path).events.iloc[:0]
    k = key_averages(ev)
    assert list(k.columns) == KA_COLUMNS and len(k) == 0
    assert k["count"].dtype == I64


# ------------------------------------------------------------------------------------ call graph


def _graph():
    """cell -> main (3 s) -> leaf (1 s, 2 calls) and time.sleep (1.5 s); helper -> leaf (0.5 s)."""
    stats = pd.DataFrame({
        "filename": ["/u/a.py", "/u/a.py", "/u/b.py", "~", "/u/c.py"],
        "lineno": [1, 10, 5, 0, 10],
        "function": ["main", "leaf", "helper", "<built-in method time.sleep>", "leaf"],
        "ncalls": [1, 3, 1, 1, 1],
        "primitive_calls": [1, 3, 1, 1, 1],
        "tottime_s": [0.5, 1.5, 0.25, 1.5, 0.1],
        "cumtime_s": [3.0, 1.5, 0.75, 1.5, 0.1],
    })
    edge = [("/u/a.py", 1, "main", "/u/a.py", 10, "leaf", 2, 2, 1.0, 1.0),
            ("/u/a.py", 1, "main", "~", 0, "<built-in method time.sleep>", 1, 1, 1.5, 1.5),
            ("/u/b.py", 5, "helper", "/u/a.py", 10, "leaf", 1, 1, 0.5, 0.5)]
    edges = pd.DataFrame(edge, columns=["caller_filename", "caller_lineno", "caller_function", "callee_filename",
                                        "callee_lineno", "callee_function", "ncalls", "primitive_calls",
                                        "tottime_s", "cumtime_s"])
    return stats, edges


def test_match_function_by_key_location_name_builtin_or_code():
    from nbprof.analysis.callgraph import match_function

    stats, _ = _graph()
    assert match_function(stats, ("/u/b.py", 5, "helper")) == ("/u/b.py", 5, "helper")
    assert match_function(stats, "main") == ("/u/a.py", 1, "main")
    assert match_function(stats, "a.py:10(leaf)") == ("/u/a.py", 10, "leaf")
    assert match_function(stats, "time.sleep") == ("~", 0, "<built-in method time.sleep>")
    key = match_function(stats, "c.py:10(leaf)")
    assert key == ("/u/c.py", 10, "leaf") and type(key[1]) is int

    def helper():
        pass

    code = helper.__code__
    here = pd.DataFrame({"filename": [code.co_filename, code.co_filename], "lineno": [code.co_firstlineno, 1],
                         "function": ["helper", "helper"]})
    assert match_function(here, helper) == (code.co_filename, code.co_firstlineno, "helper")
    assert match_function(here, code) == (code.co_filename, code.co_firstlineno, "helper")

    class Box:
        def helper(self):
            pass

    method = Box().helper
    mcode = method.__func__.__code__
    there = pd.DataFrame({"filename": [mcode.co_filename], "lineno": [mcode.co_firstlineno], "function": ["helper"]})
    assert match_function(there, method) == (mcode.co_filename, mcode.co_firstlineno, "helper")


def test_match_function_says_what_it_could_not_match():
    from nbprof.analysis.callgraph import match_function
    from nbprof.errors import OptionError

    stats, _ = _graph()
    with pytest.raises(OptionError) as e:
        match_function(stats, "leaf")
    assert str(e.value) == ("'leaf' matches 2 functions (/u/a.py:10(leaf), /u/c.py:10(leaf)); "
                            "pass 'file:line(name)'")
    with pytest.raises(OptionError) as e:
        match_function(stats, "nowhere")
    assert str(e.value) == "'nowhere' is not in this profile"
    with pytest.raises(OptionError) as e:
        match_function(stats, 42)
    assert str(e.value) == "pass a function, its name or 'file:line(name)', not int"
    with pytest.raises(OptionError) as e:
        match_function(stats, ("/u/a.py", 2, "main"))
    assert str(e.value) == "('/u/a.py', 2, 'main') is not in this profile"

    def gone():
        pass

    with pytest.raises(OptionError) as e:
        match_function(stats, gone)
    assert str(e.value).endswith("gone is not in this profile")
    with pytest.raises(OptionError) as e:
        match_function(stats, gone.__code__)
    assert str(e.value) == "gone is not in this profile"
    # a tuple of another length is no key
    with pytest.raises(OptionError) as e:
        match_function(stats, ("/u/a.py", 1))
    assert str(e.value) == "pass a function, its name or 'file:line(name)', not tuple"


def test_callers_and_callees_are_cprofiles_edges_biggest_first():
    from nbprof.analysis.callgraph import callees, callers

    stats, edges = _graph()
    cols = ["function", "filename", "lineno", "ncalls", "primitive_calls", "tottime_s", "cumtime_s"]
    out = callers(stats, edges, "a.py:10(leaf)")
    assert list(out.columns) == cols
    assert out.values.tolist() == [["main", "/u/a.py", 1, 2, 2, 1.0, 1.0], ["helper", "/u/b.py", 5, 1, 1, 0.5, 0.5]]
    out = callees(stats, edges, "main")
    assert out.values.tolist() == [["<built-in method time.sleep>", "~", 0, 1, 1, 1.5, 1.5],
                                   ["leaf", "/u/a.py", 10, 2, 2, 1.0, 1.0]]
    assert out.index.tolist() == [0, 1]
    assert len(callers(stats, edges, "main")) == 0 and list(callers(stats, edges, "main").columns) == cols
    # the same function name elsewhere is another function
    assert len(callers(stats, edges, "c.py:10(leaf)")) == 0


def test_edge_index_lists_each_functions_edges_biggest_first():
    from nbprof.analysis.callgraph import EdgeIndex

    _, edges = _graph()
    ix = EdgeIndex(edges)
    assert ix.callers(("/u/a.py", 10, "leaf")) == [0, 2]
    assert ix.callees(("/u/a.py", 1, "main")) == [1, 0]
    assert ix.callees(("/u/a.py", 10, "leaf")) == [] and ix.callers(("/u/a.py", 1, "main")) == []
    assert ix.ncalls.tolist() == [2, 1, 1] and ix.primitive_calls.tolist() == [2, 1, 1]
    assert ix.tottime_s.tolist() == [1.0, 1.5, 0.5] and ix.cumtime_s.tolist() == [1.0, 1.5, 0.5]
    assert ix.caller[2] == ("/u/b.py", 5, "helper") and ix.callee[1] == ("~", 0, "<built-in method time.sleep>")
    # equal cumulative times keep the table's order
    tied = EdgeIndex(pd.concat([edges.iloc[[2]], edges.iloc[[2]].assign(caller_function="other")], ignore_index=True))
    assert tied.callers(("/u/a.py", 10, "leaf")) == [0, 1]


def test_other_threads_suspected_at_each_sign():
    from nbprof.analysis.callgraph import other_threads_suspected, top_level_time

    stats, edges = _graph()
    # the top level: main (3 s), helper (0.75 s), c.py's leaf (0.1 s)
    assert top_level_time(stats, edges) == pytest.approx(3.85)
    assert not other_threads_suspected(stats, edges, None)
    assert not other_threads_suspected(stats, edges, 3.85 / 1.02)  # at the 2 % allowance (+ 0.1 ms)
    assert other_threads_suspected(stats, edges, 3.7)
    assert not other_threads_suspected(stats, edges, 0.0)  # no wall time to compare with
    # own time above cumulative time: one thread cannot do that (1 µs of rounding allowed)
    assert other_threads_suspected(stats.assign(tottime_s=[3.1, 1.5, 0.25, 1.5, 0.1]), edges, None)
    # 2 µs over 3 s: within 1 µs + 1 µs a second of cumulative time
    assert not other_threads_suspected(stats.assign(tottime_s=[3.0 + 2e-6, 1.5, 0.25, 1.5, 0.1]), edges, None)
    assert other_threads_suspected(stats.assign(tottime_s=[3.0 + 5e-6, 1.5, 0.25, 1.5, 0.1]), edges, None)
    assert not other_threads_suspected(stats.iloc[:0], edges.iloc[:0], 1.0)


# --------------------------------------------------------------------------------------- modules


MODULE_COLUMNS = ["module", "name", "type", "parent", "depth", "calls", "cpu_total_us", "self_cpu_us",
                  "device_total_us", "self_device_us"]


def test_module_tree_by_hand(tmp_path):
    from nbprof.analysis.modules import module_tree

    t = Trace()
    t.op("nn.Module: Other_0", 5, 10, tid=2000, cat="python_function")  # first in the file, on another thread
    t.op("nn.Module: Net_0", 0, 100, cat="python_function")
    t.op("nn.Module: Linear_0", 10, 30, cat="python_function")
    mm = t.op("aten::mm", 15, 20)
    t.launch("gemm", mm, 20, 5, 50, 30)  # launched at 20, inside Linear_0's first call
    t.op("nn.Module: Linear_1", 50, 30, cat="python_function")
    t.op("nn.Module: Net_0", 200, 100, cat="python_function")
    t.op("nn.Module: Linear_0", 210, 20, cat="python_function")
    add = t.op("aten::add", 250, 10)
    t.launch("add_kernel", add, 255, 2, 400, 8)  # in Net_0's second call, in no child
    t.op("nn.Module: Block", 290, 5, cat="python_function")  # a name without an instance number
    t.op("aten::relu", 500, 10)  # outside every module
    m = module_tree(t.load(tmp_path).events)
    assert list(m.columns) == MODULE_COLUMNS
    assert m.values.tolist() == [
        ["Net_0", "Net_0", "Net", "", 0, 2, 200.0, 115.0, 38.0, 8.0],  # 200 - 30 - 30 - 20 - 5
        ["Net_0.Linear_0", "Linear_0", "Linear", "Net_0", 1, 2, 50.0, 50.0, 30.0, 30.0],
        ["Net_0.Linear_1", "Linear_1", "Linear", "Net_0", 1, 1, 30.0, 30.0, 0.0, 0.0],
        ["Net_0.Block", "Block", "Block", "Net_0", 1, 1, 5.0, 5.0, 0.0, 0.0],
        ["Other_0", "Other_0", "Other", "", 0, 1, 10.0, 10.0, 0.0, 0.0],
    ]
    assert m["depth"].dtype == m["calls"].dtype == I64
    assert all(m[c].dtype == np.float64 for c in MODULE_COLUMNS[6:])


def test_module_tree_children_in_order_of_first_call(tmp_path):
    """A child first called late in the first call but early in a later one keeps its place by
    its first call; deeper paths are built from their parents'."""
    from nbprof.analysis.modules import module_tree

    t = Trace()
    t.op("nn.Module: M_0", 0, 100, cat="python_function")
    t.op("nn.Module: B_0", 10, 10, cat="python_function")
    t.op("nn.Module: C_0", 12, 5, cat="python_function")
    t.op("nn.Module: D_0", 13, 2, cat="python_function")
    t.op("nn.Module: A_0", 30, 10, cat="python_function")
    m = module_tree(t.load(tmp_path).events)
    assert m["module"].tolist() == ["M_0", "M_0.B_0", "M_0.B_0.C_0", "M_0.B_0.C_0.D_0", "M_0.A_0"]
    assert m["depth"].tolist() == [0, 1, 2, 3, 1]
    assert m["parent"].tolist() == ["", "M_0", "M_0.B_0", "M_0.B_0.C_0", "M_0"]


def test_module_tree_without_module_events_has_the_columns_and_dtypes(tmp_path):
    from nbprof.analysis.modules import module_tree

    t = Trace()
    t.op("aten::add", 0, 10)
    t.op("model.py(3): forward", 0, 20, cat="python_function")
    t.op("nn.Module: Net_0", 0, 20)  # an op of that name is no module call
    m = module_tree(t.load(tmp_path).events)
    assert list(m.columns) == MODULE_COLUMNS and len(m) == 0
    assert [str(m[c].dtype) for c in MODULE_COLUMNS] == [TXT] * 4 + ["int64"] * 2 + ["float64"] * 4


# ---------------------------------------------------------------------------------------- stacks


def _frame(t: Trace, name: str, ts: float, dur: float, pid: int, parent: int | None, tid: int = 1000) -> None:
    t.events.append({"ph": "X", "cat": "python_function", "name": name, "pid": 1000, "tid": tid, "ts": ts,
                     "dur": dur, "args": {"Python id": pid, "Python parent id": parent}})


def test_user_frames_files_and_labels():
    from nbprof.analysis.stacks import frame_file, frame_label, is_user_frame

    for name in ("<built-in method cat>", "torch/nn/modules/module.py(1500): _call_impl",
                 "/x/lib/python3.11/site-packages/torch/nn/functional.py(1): linear",
                 "/x/site-packages/IPython/core/interactiveshell.py(3): run_code", "IPython/core/x.py(1): f",
                 "ipykernel/kernelbase.py(1): f", "nbprof/runner.py(1): f", "asyncio/events.py(80): _run",
                 "threading.py(1): run", "contextlib.py(1): f", "runpy.py(1): f", "<frozen runpy>(1): f",
                 "/x/site-packages/tornado/ioloop.py(1): f", "/x/site-packages/traitlets/x.py(1): f"):
        assert not is_user_frame(name), name
    for name in ("nn.Module: Linear_0", "/home/u/model.py(3): forward", "<ipython-input-5-abc>(2): <module>",
                 "/x/site-packages/numpy/core.py(1): f", "mytorch/a.py(1): f"):
        assert is_user_frame(name), name
    assert frame_file("/home/u/model.py(3): forward") == "/home/u/model.py"
    assert frame_file("nn.Module: Linear_0") is None
    assert frame_label("nn.Module: Linear_0", {}) == ("nn.Module: Linear_0", False)
    assert frame_label("/home/u/model.py(3): forward", {}) == ("/home/u/model.py(3): forward", False)
    assert frame_label("/home/u/model.py(3): forward", {"/home/u/model.py": "In [2]"}) == ("In [2](3): forward", True)
    assert frame_label("<ipython-input-5-0a1b>(2): <module>", {}) == ("In [5](2): <module>", True)
    cell = "/tmp/ipykernel_42/123.py(1): <module>"
    assert frame_label(cell, {}) == (cell, True)
    assert frame_label(cell, {"/tmp/ipykernel_42/123.py": "In [7]"}) == ("In [7](1): <module>", True)
    assert frame_label("C:\\Temp\\ipykernel_42\\123.py(1): <module>", {}) == ("C:\\Temp\\ipykernel_42\\123.py(1): <module>", True)
    assert frame_label("<cell line: 1>(1): f", {}) == ("<cell line: 1>(1): f", True)


def test_op_stacks_by_hand(tmp_path):
    from nbprof.analysis.stacks import op_stacks

    t = Trace()
    _frame(t, "/home/u/outer.py(1): run_all", 0, 2000, 9, None)  # around the cell: the kernel's
    _frame(t, "/tmp/ipykernel_42/123.py(1): <module>", 0, 1000, 1, 9)
    _frame(t, "/home/u/model.py(10): forward", 10, 490, 2, 1)
    _frame(t, "/x/site-packages/torch/nn/modules/module.py(1500): _call_impl", 20, 380, 3, 2)
    _frame(t, "nn.Module: Linear_0", 30, 270, 4, 3)
    t.op("aten::linear", 40, 60)
    t.op("aten::add", 450, 20)  # after Linear_0 and _call_impl ended: in forward
    t.op("aten::relu", 600, 10)  # in the cell only
    t.op("aten::mul", 40, 10, tid=2000)  # another thread: no frames there
    t.memory(45, 16, 16, 512)
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    code = {"/tmp/ipykernel_42/123.py": "In [3]"}
    stacks = op_stacks(ev, code_names=code)
    assert stacks.name == "stack" and stacks.index.equals(ev.index)
    got = dict(zip(names, stacks.tolist()))
    assert got["aten::linear"] == "nn.Module: Linear_0 ← /home/u/model.py(10): forward ← In [3](1): <module>"
    assert got["aten::add"] == "/home/u/model.py(10): forward ← In [3](1): <module>"
    assert got["aten::relu"] == "In [3](1): <module>"
    assert got["aten::mul"] == "" and got["[memory]"] == ""
    assert got["nn.Module: Linear_0"] == ""  # frames themselves have no stack
    short = dict(zip(names, op_stacks(ev, depth=2, code_names=code).tolist()))
    assert short["aten::linear"] == "nn.Module: Linear_0 ← /home/u/model.py(10): forward"
    plain = dict(zip(names, op_stacks(ev).tolist()))
    assert plain["aten::relu"] == "/tmp/ipykernel_42/123.py(1): <module>"


def test_op_stacks_an_op_ending_with_its_frame_is_in_it(tmp_path):
    from nbprof.analysis.stacks import op_stacks

    t = Trace()
    _frame(t, "/home/u/a.py(1): f", 0, 100, 1, None)
    _frame(t, "/home/u/a.py(5): g", 10, 40, 2, 1)
    t.op("aten::x", 30, 20)  # ends with g, at 50
    t.op("aten::y", 30, 21)  # ends after g: in f
    t.op("aten::z", 10, 5)  # starts with g: in g
    ev = t.load(tmp_path).events
    got = dict(zip(ev["name"].astype(str), op_stacks(ev).tolist()))
    assert got["aten::x"] == "/home/u/a.py(5): g ← /home/u/a.py(1): f"
    assert got["aten::y"] == "/home/u/a.py(1): f"
    assert got["aten::z"] == "/home/u/a.py(5): g ← /home/u/a.py(1): f"


# ---------------------------------------------------------------------------------- device stats


DEVICE_COLUMNS = ["device", "span_us", "busy_us", "busy_fraction", "idle_us", "kernel_us", "memcpy_us", "memset_us",
                  "kernels", "memcpys", "memsets", "streams", "sm_efficiency", "achieved_occupancy_pct",
                  "tensor_core_pct", "steps_span_us", "steps_busy_fraction", "steps_sm_efficiency",
                  "steps_achieved_occupancy_pct", "peak_allocated_bytes", "peak_reserved_bytes", "total_memory_bytes"]


def _device_trace() -> Trace:
    t = Trace()
    mm = t.op("aten::mm", 0, 1000)
    t.annotation("ProfilerStep#1", 100, 400)
    t.annotation("ProfilerStep#2", 500, 400)
    # blocks per SM 0.5 (occupancy 3 %) and 2 (12 %): SMs in use 0.5, then 1 (capped), then 1
    t.launch("sm90_xmma_gemm_f16", mm, 110, 5, 200, 100, blocks_per_sm=0.5)
    t.launch("elementwise_kernel", mm, 120, 5, 250, 100, stream=8, blocks_per_sm=2.0)
    t.launch("Memcpy HtoD", mm, 130, 5, 400, 50, runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=1 << 20)
    t.launch("Memset", mm, 140, 5, 950, 10, runtime="cudaMemsetAsync", cat="gpu_memset", nbytes=64)
    t.memory(50, 1000, total_allocated=1000, total_reserved=4096)
    t.memory(60, 2000, total_allocated=3000, total_reserved=8192)
    t.memory(70, -1000, total_allocated=2000, total_reserved=8192)
    return t


def test_device_stats_by_hand(tmp_path):
    from nbprof.analysis.device_stats import device_stats

    p = _device_trace().load(tmp_path)
    d = device_stats(p.events, p.meta)
    assert list(d.devices.columns) == DEVICE_COLUMNS
    [row] = d.devices.to_dict("records")
    assert row == {
        "device": "cuda:0", "span_us": 1000.0,
        "busy_us": 210.0, "busy_fraction": 0.21, "idle_us": 790.0,  # [200, 350), [400, 450), [950, 960)
        "kernel_us": 200.0, "memcpy_us": 50.0, "memset_us": 10.0, "kernels": 2, "memcpys": 1, "memsets": 1,
        "streams": 2,
        "sm_efficiency": 0.125,  # 0.5 * 50 + 1 * 50 + 1 * 50 = 125 µs of 1000
        "achieved_occupancy_pct": 7.5,  # (3 * 100 + 12 * 100) / 200
        "tensor_core_pct": 50.0,  # the xmma_gemm kernel's 100 µs of 200
        "steps_span_us": 800.0, "steps_busy_fraction": 0.25,  # [100, 900]: 150 + 50 of 800
        "steps_sm_efficiency": 125.0 / 800.0, "steps_achieved_occupancy_pct": 7.5,
        "peak_allocated_bytes": 3000, "peak_reserved_bytes": 8192, "total_memory_bytes": 80 * 2**30,
    }
    for c in ("kernels", "memcpys", "memsets", "streams", "peak_allocated_bytes", "peak_reserved_bytes",
              "total_memory_bytes"):
        assert d.devices[c].dtype == I64, c
    assert d.busy_fraction == {"cuda:0": 0.21}
    assert d.peak_allocated_bytes == {"cuda:0": 3000} and d.peak_reserved_bytes == {"cuda:0": 8192}
    assert list(d.streams.columns) == ["device", "stream", "busy_us", "busy_fraction", "kernel_us", "kernels"]
    assert d.streams.values.tolist() == [["cuda:0", 7, 160.0, 0.16, 100.0, 1], ["cuda:0", 8, 100.0, 0.1, 100.0, 1]]
    assert d.streams["stream"].dtype == d.streams["kernels"].dtype == I64


def test_device_stats_steps_window_clips_the_kernels_estimates(tmp_path):
    """A kernel half inside the steps' window counts half there."""
    from nbprof.analysis.device_stats import device_stats

    t = Trace()
    mm = t.op("aten::mm", 0, 1000)
    t.annotation("ProfilerStep#3", 100, 200)
    t.launch("k", mm, 110, 5, 250, 100, blocks_per_sm=1.0)  # [250, 350): 50 µs inside [100, 300)
    p = t.load(tmp_path)
    [row] = device_stats(p.events, p.meta).devices.to_dict("records")
    assert row["sm_efficiency"] == 0.1 and row["steps_sm_efficiency"] == 0.25
    assert row["steps_busy_fraction"] == 0.25 and row["steps_span_us"] == 200.0
    assert row["achieved_occupancy_pct"] == 6.0 and row["steps_achieved_occupancy_pct"] == 6.0
    assert row["tensor_core_pct"] == 0.0  # kernels, none on the Tensor Cores: 0 %, not NaN
    assert row["peak_allocated_bytes"] == -1 and row["peak_reserved_bytes"] == -1


def test_device_stats_without_steps_or_estimates_are_nan(tmp_path):
    from nbprof.analysis.device_stats import device_stats

    t = Trace()
    mm = t.op("aten::mm", 0, 100)
    t.launch("k", mm, 10, 5, 20, 50)
    t.device_properties = [{"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 1024}]
    p = t.load(tmp_path)
    [row] = device_stats(p.events, p.meta).devices.to_dict("records")
    for c in ("sm_efficiency", "achieved_occupancy_pct", "steps_span_us", "steps_busy_fraction",
              "steps_sm_efficiency", "steps_achieved_occupancy_pct", "tensor_core_pct"):
        assert np.isnan(row[c]), c
    assert row["busy_fraction"] == 0.5 and row["total_memory_bytes"] == 1024


def test_device_stats_of_a_cpu_profile_are_empty_tables_with_the_columns(tmp_path):
    from nbprof.analysis.device_stats import device_stats

    t = Trace()
    t.op("aten::mm", 0, 10)
    t.memory(5, 64, 64, 512, device=-1)
    p = t.load(tmp_path)
    d = device_stats(p.events, p.meta)
    assert list(d.devices.columns) == DEVICE_COLUMNS and len(d.devices) == 0
    assert list(d.streams.columns) == ["device", "stream", "busy_us", "busy_fraction", "kernel_us", "kernels"]
    assert len(d.streams) == 0
    assert [str(d.streams[c].dtype) for c in d.streams.columns] == [TXT, "int64"] + ["float64"] * 3 + ["int64"]
    assert d.busy_fraction == {} and d.peak_allocated_bytes == {}


def test_device_with_only_memory_events_is_a_row(tmp_path):
    from nbprof.analysis.device_stats import device_stats

    t = Trace()
    t.op("aten::empty", 0, 100)
    t.memory(5, 64, 64, 512, device=1)
    t.device_properties = [{"id": 1, "totalGlobalMem": 2048}, {"id": "x"}]
    p = t.load(tmp_path)
    d = device_stats(p.events, p.meta).devices
    assert d[["device", "busy_us", "kernels", "peak_allocated_bytes", "total_memory_bytes"]].values.tolist() == [
        ["cuda:1", 0.0, 0, 64, 2048]]
    assert d["busy_fraction"].tolist() == [0.0]


def test_profiled_windows_and_steps_windows_of_nothing(tmp_path):
    from nbprof.analysis.device_stats import profiled_windows, span_ns, steps_windows

    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    w = profiled_windows(p.events.iloc[:0], p.meta)
    assert list(w.columns) == ["rank_code", "start_ns", "end_ns"] and len(w) == 0
    assert all(w[c].dtype == I64 for c in w.columns)
    w = profiled_windows(p.events, p.meta)
    assert w.values.tolist() == [[0, 0, 10_000]] and all(w[c].dtype == I64 for c in w.columns)
    s = steps_windows(p.events)
    assert list(s.columns) == ["rank_code", "start_ns", "end_ns"] and len(s) == 0
    out = span_ns(pd.DataFrame({"rank_code": [1, 0, 1], "start_ns": [0, 5, 100], "end_ns": [10, 7, 150]}), 3)
    assert out.tolist() == [2.0, 60.0, 0.0] and out.dtype == np.float64


# ------------------------------------------------------------------------------- merged ranks


def _ranks(tmp_path, *traces: Trace, labels=(0, 1)):
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    parts = [read_trace_file(t.write(tmp_path / f"r{i}.json")) for i, t in enumerate(traces)]
    return TorchProfile.from_trace(concat_traces(parts, labels=list(labels), label_column="rank"))


def test_device_stats_of_merged_ranks_have_a_span_and_row_per_rank(tmp_path):
    from nbprof.analysis.device_stats import device_stats, process_codes

    a, b = Trace(rank=0), Trace(rank=1)
    ext = a.op("aten::mm", 0, 100)
    a.launch("k", ext, 10, 5, 20, 50)
    ext = b.op("aten::mm", 0, 400)
    b.launch("k", ext, 10, 5, 20, 100)
    b.launch("k2", ext, 20, 5, 30, 100, stream=9)
    p = _ranks(tmp_path, a, b, labels=["b", "a"])  # labels sort: rank "a" is code 0
    codes, labels = process_codes(p.events)
    assert labels.tolist() == ["a", "b"] and codes.dtype == I64
    d = device_stats(p.events, p.meta)
    assert list(d.devices.columns) == ["rank"] + DEVICE_COLUMNS
    assert d.devices[["rank", "device", "span_us", "busy_us", "busy_fraction", "kernels", "streams"]].values.tolist() \
        == [["a", "cuda:0", 400.0, 110.0, 0.275, 2, 2], ["b", "cuda:0", 100.0, 50.0, 0.5, 1, 1]]
    assert d.busy_fraction == {"rank a cuda:0": 0.275, "rank b cuda:0": 0.5}
    assert list(d.streams.columns) == ["rank", "device", "stream", "busy_us", "busy_fraction", "kernel_us", "kernels"]
    assert d.streams[["rank", "stream", "busy_us", "busy_fraction"]].values.tolist() == [
        ["a", 7, 100.0, 0.25], ["a", 9, 100.0, 0.25], ["b", 7, 50.0, 0.5]]
    out, _ = process_codes(p.events.drop(columns="rank"))
    assert out.tolist() == [0] * len(p.events) and out.dtype == I64


def test_allocations_of_merged_ranks_pair_within_a_rank(tmp_path):
    from nbprof.analysis.memory import allocations

    a, b = Trace(rank=0), Trace(rank=1)
    for t, free_at in ((a, 30), (b, 50)):
        t.op("aten::empty", 0, 100)
        t.memory(10, 256, 256, 4096, addr=5)  # the same address on both ranks
        t.memory(free_at, -256, 0, 4096, addr=5)
    p = _ranks(tmp_path, a, b)
    out = allocations(p.events)
    assert list(out.columns) == ["rank", "device", "addr", "bytes", "alloc_us", "free_us", "lifetime_us", "op", "top_op"]
    assert out[["rank", "addr", "alloc_us", "free_us"]].values.tolist() == [[0, 5, 10.0, 30.0], [1, 5, 10.0, 50.0]]
    empty = allocations(p.events.iloc[:0])
    assert list(empty.columns) == list(out.columns) and empty["rank"].dtype == object


def test_lanes_of_merged_ranks_keep_repeated_thread_ids_apart(tmp_path):
    from nbprof.analysis.tree import lanes

    a, b = Trace(rank=0), Trace(rank=1)
    a.op("aten::a", 0, 10)
    b.op("aten::b", 0, 10)
    ext = b.op("aten::c", 20, 10, tid=7)
    b.launch("k", ext, 21, 2, 25, 5)
    p = _ranks(tmp_path, a, b)
    ev = p.events
    lane, process = lanes(ev)
    names = ev["name"].astype(str).tolist()
    by = dict(zip(names, lane.tolist()))
    assert len({by["aten::a"], by["aten::b"], by["aten::c"]}) == 3 and by["k"] == -1
    proc = dict(zip(names, process.tolist()))
    assert proc["aten::a"] != proc["aten::b"] and proc["aten::b"] == proc["aten::c"]
    # both ops at depth 0, each on its own rank's lane: the tree does not nest one in the other
    assert ev["depth"].to_numpy()[[names.index("aten::a"), names.index("aten::b")]].tolist() == [0, 0]
    single = Trace()
    single.op("aten::a", 0, 10)
    ev1 = single.load(tmp_path).events
    lane, process = lanes(ev1)
    assert lane.tolist() == ev1["thread"].tolist() and process.tolist() == [0] * len(ev1)


# ------------------------------------------------------------------------------ timeline rects


RECT_COLUMNS = ["row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name", "family", "hue", "event",
                "names", "distinct"]


def _timeline_trace() -> Trace:
    t = Trace()
    t.annotation("ProfilerStep#1", 0, 200)
    o = t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 20)
    t.runtime("cudaStreamSynchronize", 50, 10, ext=o)
    t.op("aten::x", 5, 10, tid=2000)
    t.launch("k", o, 60, 5, 70, 20)
    t.gpu_annotation("ProfilerStep#1", 15, 100, o)
    t.memory(12, 16, 16, 512)
    t.op("/home/u/a.py(1): f", 0, 150, cat="python_function")
    return t


def test_timeline_rects_lanes_rows_and_families_by_hand(tmp_path):
    import zlib

    from nbprof.analysis.timeline import timeline_rects

    p = _timeline_trace().load(tmp_path)
    names = p.events["name"].astype(str).tolist()
    d = timeline_rects(p.events, p.meta, merge=False)
    assert list(d.rects.columns) == RECT_COLUMNS
    # rows: thread 1000's three levels, thread 2000, the stream's kernels and its GPU annotations
    assert d.rects[["row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name", "family"]].values.tolist() == [
        [0, 0, 0, 0.0, 200.0, 200.0, 1, "ProfilerStep#1", "step"],
        [1, 0, 1, 0.0, 100.0, 100.0, 1, "aten::outer", "op"],
        [2, 0, 2, 10.0, 30.0, 20.0, 1, "aten::inner", "op"],
        [2, 0, 2, 50.0, 60.0, 10.0, 1, "cudaStreamSynchronize", "sync"],
        [2, 0, 2, 60.0, 65.0, 5.0, 1, "cudaLaunchKernel", "runtime"],
        [3, 1, 0, 5.0, 15.0, 10.0, 1, "aten::x", "op"],
        [4, 2, 0, 70.0, 90.0, 20.0, 1, "k", "kernel"],
        [5, 2, 1, 15.0, 115.0, 100.0, 1, "ProfilerStep#1", "gpu_annotation"],
    ]
    assert [names[i] for i in d.rects["event"]] == d.rects["name"].tolist()
    assert d.rects["hue"].tolist() == [zlib.crc32(n.encode()) for n in d.rects["name"]]
    assert d.rects["names"].tolist() == [None] * 8 and d.rects["distinct"].tolist() == [1] * 8
    assert d.lanes[["lane", "pid", "thread", "device", "stream", "label", "kind", "levels", "first_row",
                    "events"]].values.tolist() == [
        [0, 1000, 1000, "cpu", -1, "CPU thread 1000 (main)", "cpu", 3, 0, 5],
        [1, 1000, 2000, "cpu", -1, "CPU thread 2000", "cpu", 1, 3, 1],
        [2, -1, -1, "cuda:0", 7, "CUDA 0 stream 7", "device", 2, 4, 2],
    ]
    assert d.lanes["rank"].tolist() == [None, None, None]
    assert d.rows.values.tolist() == [[0, 0, 0], [1, 0, 1], [2, 0, 2], [3, 1, 0], [4, 2, 0], [5, 2, 1]]
    assert d.hidden == {"python": 1, "memory": 1}
    assert (d.t0_us, d.t1_us, d.span_us, d.px_us, d.width_px, d.max_rects) == (0.0, 200.0, 200.0, 0.0, 2000, 20_000)
    assert (d.events_drawn, d.merged_events, d.merged_rects, d.empty) == (8, 0, 0, False)
    row_of = dict(zip(d.rects["event"], d.rects["row"]))
    assert d.event_row.tolist() == [row_of.get(i, -1) for i in range(len(names))]
    assert d.event_row.dtype == np.int32 and d.events is p.events or d.events.equals(p.events)


def test_timeline_rects_with_python_frames_get_a_lane_above_their_thread(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    p = _timeline_trace().load(tmp_path)
    d = timeline_rects(p.events, p.meta, python=True, merge=False)
    assert d.lanes[["label", "kind", "levels", "first_row", "events"]].values.tolist() == [
        ["Python thread 1000 (main)", "python", 1, 0, 1], ["CPU thread 1000 (main)", "cpu", 3, 1, 5],
        ["CPU thread 2000", "cpu", 1, 4, 1], ["CUDA 0 stream 7", "device", 2, 5, 2]]
    assert d.rects[["row", "name", "family"]].values.tolist()[0] == [0, "/home/u/a.py(1): f", "python"]
    assert d.hidden == {"memory": 1}


def test_timeline_rects_of_a_window_are_clipped_to_it(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    p = _timeline_trace().load(tmp_path)
    d = timeline_rects(p.events, p.meta, window=(55.0, 80.0))
    assert (d.t0_us, d.t1_us, d.events_drawn) == (55.0, 80.0, 6)
    assert d.rects[["name", "x0_us", "x1_us", "busy_us"]].values.tolist() == [
        ["ProfilerStep#1", 55.0, 80.0, 25.0], ["aten::outer", 55.0, 80.0, 25.0],
        ["cudaStreamSynchronize", 55.0, 60.0, 5.0], ["cudaLaunchKernel", 60.0, 65.0, 5.0],
        ["k", 70.0, 80.0, 10.0], ["ProfilerStep#1", 55.0, 80.0, 25.0]]
    # an event that ends exactly at the window's start is in it (for 0 µs)
    d = timeline_rects(p.events, p.meta, window=(30.0, 40.0))
    assert "aten::inner" in d.rects["name"].tolist()


def test_timeline_rects_merged_at_a_coarse_pixel(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    p = _timeline_trace().load(tmp_path)
    d = timeline_rects(p.events, p.meta, width_px=2, merge=True)  # a pixel of 100 µs
    assert d.px_us == 100.0
    assert d.rects[["row", "x0_us", "x1_us", "busy_us", "count", "name", "family", "event", "distinct"]
                   ].values.tolist()[2] == [2, 10.0, 65.0, 35.0, 3, "aten::inner", "op", -1, 3]
    assert d.rects["names"].iloc[2] == [("aten::inner", 1), ("cudaStreamSynchronize", 1), ("cudaLaunchKernel", 1)]
    assert (d.merged_events, d.merged_rects, len(d.rects)) == (3, 1, 6)
    # None merges only above max_rects events
    assert timeline_rects(p.events, p.meta, width_px=2, max_rects=8).px_us == 0.0
    assert timeline_rects(p.events, p.meta, width_px=2, max_rects=7).px_us == 100.0


def test_timeline_rects_of_no_events(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    p = _timeline_trace().load(tmp_path)
    d = timeline_rects(p.events.iloc[:0], p.meta)
    assert list(d.rects.columns) == RECT_COLUMNS and d.empty and (d.t0_us, d.t1_us, d.span_us) == (0.0, 0.0, 0.0)
    assert d.events_drawn == 0 and len(d.lanes) == 0 and d.hidden == {}


# ------------------------------------------------------------------------------------------ tree


def test_partially_overlapping_siblings_self_time_gives_their_overlap_back(tmp_path):
    """parent [0, 20], children [1, 12] and [6, 18]: torch's stack makes both children (the
    second ends after the first), and the time they cover is their union, 17 µs, not 11 + 12."""
    t = Trace()
    t.op("aten::parent", 0, 20)
    t.op("aten::a", 1, 11)
    t.op("aten::b", 6, 12)
    t.op("aten::c", 30, 10)  # a second top-level event after them: no overlap there
    t.op("aten::d", 31, 2)
    ev = t.load(tmp_path).events
    got = dict(zip(ev["name"].astype(str), zip(ev["parent"].tolist(), ev["depth"].tolist(), ev["self_cpu_us"].tolist())))
    assert got["aten::parent"] == (-1, 0, 3.0)
    assert got["aten::a"] == (0, 1, 11.0) and got["aten::b"] == (0, 1, 12.0)
    assert got["aten::c"] == (-1, 0, 8.0) and got["aten::d"] == (3, 1, 2.0)


def test_three_overlapping_siblings_overlap_counted_once(tmp_path):
    """children [0, 10], [5, 15], [8, 20] of [0, 30]: union 20, sum 32; the third overlaps
    [8, 15] of the two before it (7), the second [5, 10] (5)."""
    t = Trace()
    t.op("aten::p", 0, 30)
    t.op("aten::a", 0, 10)
    t.op("aten::b", 5, 10)
    t.op("aten::c", 8, 12)
    ev = t.load(tmp_path).events
    self_us = dict(zip(ev["name"].astype(str), ev["self_cpu_us"].tolist()))
    assert self_us == {"aten::p": 10.0, "aten::a": 10.0, "aten::b": 10.0, "aten::c": 12.0}


def test_a_kernel_linked_by_correlation_belongs_to_the_op_around_its_runtime_call(tmp_path):
    """Meta's traces: kernels carry no External id of an op, only the correlation id of the
    runtime call; a runtime call under profiler overhead climbs to the op around it."""
    t = Trace()
    t.op("aten::mm", 0, 100)
    t.op("Overhead", 5, 50, cat="overhead")
    t.runtime("cudaLaunchKernel", 10, 5, corr=11)
    _kernel(t, "gemm", 20, 30, corr=11)
    t.op("aten::add", 200, 100)
    t.runtime("cudaLaunchKernel", 210, 5, corr=12)
    _kernel(t, "add_kernel", 220, 7, corr=12)
    _kernel(t, "orphan", 400, 3, corr=99)  # no runtime call: no op
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    dev = dict(zip(names, ev["device_total_us"].tolist()))
    own = dict(zip(names, ev["self_device_us"].tolist()))
    assert (dev["aten::mm"], own["aten::mm"]) == (30.0, 30.0)
    assert (dev["aten::add"], own["aten::add"]) == (7.0, 7.0)
    assert dev["Overhead"] == 0.0
    parent = ev["parent"].tolist()
    assert parent[names.index("gemm")] == names.index("aten::mm")
    assert parent[names.index("add_kernel")] == names.index("aten::add")
    assert parent[names.index("orphan")] == -1
    assert (dev["orphan"], own["orphan"]) == (3.0, 3.0)


def test_build_tree_keeps_a_non_unique_index_and_the_attrs(tmp_path):
    from nbprof.analysis.tree import TREE_COLUMNS, build_tree

    t = Trace()
    t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 20)
    t.memory(15, 64, 64, 512, device=-1)
    ev = t.load(tmp_path).events
    base = ev.drop(columns=list(TREE_COLUMNS))
    base.attrs = {"note": "kept"}
    want = build_tree(base)
    twice = base.copy()
    twice.index = [7] * len(twice)  # a non-unique index: concat would misalign
    twice.attrs = {"note": "kept"}
    got = build_tree(twice)
    assert got.index.tolist() == [7] * len(twice) and got.attrs == {"note": "kept"} and want.attrs == {"note": "kept"}
    for c in TREE_COLUMNS:
        assert got[c].tolist() == want[c].tolist(), c
    assert want["parent"].tolist() == [-1, 0, 1] and want["cpu_mem_bytes"].tolist() == [64, 64, 0]
    assert want["self_cpu_mem_bytes"].tolist() == [0, 64, 0]


def test_memory_sums_beyond_float_precision_are_exact(tmp_path):
    big = 2**53 + 1
    t = Trace()
    t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 20)
    t.memory(15, big, big, big, addr=1)
    t.memory(50, 3, big + 3, big + 3, addr=2)
    ev = t.load(tmp_path).events
    got = dict(zip(ev["name"].astype(str), zip(ev["device_mem_bytes"].tolist(), ev["self_device_mem_bytes"].tolist())))
    assert got["aten::outer"] == (big + 3, 3) and got["aten::inner"] == (big, big)
    assert ev["device_mem_bytes"].dtype == ev["self_device_mem_bytes"].dtype == I64


def test_python_frames_hang_from_their_caller_by_id_within_a_process(tmp_path):
    t = Trace()
    _frame(t, "/home/u/a.py(1): f", 0, 100, 1, None)
    _frame(t, "/home/u/a.py(5): g", 10, 50, 2, 1)
    _frame(t, "/home/u/a.py(9): h", 20, 10, 3, 2)
    _frame(t, "/home/u/a.py(9): lost", 70, 10, 4, 77)  # its caller was not recorded
    ev = t.load(tmp_path).events
    names = ev["name"].astype(str).tolist()
    parent = dict(zip(names, ev["parent"].tolist()))
    assert parent["/home/u/a.py(1): f"] == -1
    assert parent["/home/u/a.py(5): g"] == names.index("/home/u/a.py(1): f")
    assert parent["/home/u/a.py(9): h"] == names.index("/home/u/a.py(5): g")
    assert parent["/home/u/a.py(9): lost"] == -1


# -------------------------------------------------------------------------------------- overview


OVERVIEW_COLUMNS = ["step", "start_us", "duration_us", "kernel_us", "memcpy_us", "memset_us", "runtime_us",
                    "dataloader_us", "cpu_exec_us", "other_us"]


def test_overview_of_merged_ranks_without_steps_is_one_row_per_rank(tmp_path):
    from nbprof.analysis.overview import overview

    a, b = Trace(rank=0), Trace(rank=1)
    ext = a.op("aten::mm", 0, 100)
    a.launch("k", ext, 10, 5, 20, 30)
    ext = b.op("aten::mm", 0, 50)
    b.launch("k", ext, 5, 5, 60, 60)  # runs past the op: the step stretches to 120
    p = _ranks(tmp_path, a, b, labels=["r0", "r1"])
    o = overview(p.events)
    assert list(o.columns) == OVERVIEW_COLUMNS[:1] + ["rank"] + OVERVIEW_COLUMNS[1:]
    assert o.values.tolist() == [
        ["all", "r0", 0.0, 100.0, 30.0, 0.0, 0.0, 5.0, 0.0, 65.0, 0.0],
        ["all", "r1", 0.0, 120.0, 60.0, 0.0, 0.0, 5.0, 0.0, 45.0, 10.0],
    ]
    assert o["step"].dtype == object


def test_overview_of_merged_ranks_with_steps_totals_per_rank(tmp_path):
    from nbprof.analysis.overview import overview

    a, b = Trace(rank=0), Trace(rank=1)
    for t, scale in ((a, 1), (b, 2)):
        t.annotation("ProfilerStep#0", 0, 10 * scale)
        t.annotation("ProfilerStep#1", 10 * scale, 10 * scale)
        t.op("aten::add", 1, 4)
    p = _ranks(tmp_path, a, b)
    o = overview(p.events)
    assert o[["step", "rank", "start_us", "duration_us", "cpu_exec_us", "other_us"]].values.tolist() == [
        [0, 0, 0.0, 10.0, 4.0, 6.0], [1, 0, 10.0, 10.0, 0.0, 10.0],
        [0, 1, 0.0, 20.0, 4.0, 16.0], [1, 1, 20.0, 20.0, 0.0, 20.0],
        ["all", 0, 0.0, 20.0, 4.0, 16.0], ["all", 1, 0.0, 40.0, 4.0, 36.0],
    ]


def test_overview_of_no_events_has_the_columns(tmp_path):
    from nbprof.analysis.overview import overview

    t = Trace()
    t.op("aten::add", 0, 10)
    o = overview(t.load(tmp_path).events.iloc[:0])
    assert list(o.columns) == OVERVIEW_COLUMNS and len(o) == 0
    assert [str(o[c].dtype) for c in OVERVIEW_COLUMNS] == ["object"] + ["float64"] * 9


def test_overview_advice_by_hand():
    from nbprof.analysis.overview import overview_advice

    def row(**kw):
        base = dict(duration_us=100.0, kernel_us=0.0, memcpy_us=0.0, memset_us=0.0, runtime_us=0.0,
                    dataloader_us=0.0, cpu_exec_us=0.0, other_us=0.0)
        base.update(kw)
        return pd.Series(base)

    assert overview_advice(row(duration_us=0.0, dataloader_us=50.0), True) == []
    assert overview_advice(row(kernel_us=50.0, dataloader_us=5.0), True) == []  # 5 %: not above it
    [loading] = overview_advice(row(kernel_us=50.0, dataloader_us=6.0), False)
    assert loading.startswith("6.0% of the step time is data loading") and "pin_memory" not in loading
    assert loading.endswith("while the model runs.")
    [loading] = overview_advice(row(kernel_us=50.0, dataloader_us=6.0), True)
    assert loading.endswith("runs and pin_memory=True (faster copies to the GPU).")
    # busy below half: why, by the biggest of loading, the CPU, the rest
    [_, why] = overview_advice(row(kernel_us=30.0, dataloader_us=40.0, cpu_exec_us=20.0, other_us=10.0), True)
    assert why == ("The GPU is busy 30.0% of the step time: it waits for the next batch from the DataLoader most of "
                   "the time.")
    [why] = overview_advice(row(kernel_us=49.0, cpu_exec_us=25.0, runtime_us=5.0, other_us=21.0), True)
    assert why.startswith("The GPU is busy 49.0% of the step time: the CPU is the bound: operators and launches "
                          "take 30.0 µs of the step")
    [why] = overview_advice(row(memcpy_us=20.0, memset_us=10.0, cpu_exec_us=20.0, other_us=50.0), True)
    assert why == "The GPU is busy 30.0% of the step time: try a bigger batch (it can change how the model converges)."
    assert overview_advice(row(kernel_us=50.0, other_us=50.0), True) == []  # exactly half: not below it
    assert overview_advice(row(kernel_us=10.0, other_us=90.0), False) == []


# ----------------------------------------------------------------------------------------- flame


def test_flame_location_labels_paths_and_families():
    from nbprof.analysis.flame import _short_path, code_family, location_label, pstats_location

    assert location_label("~", 0, "<built-in method time.sleep>") == "{built-in method time.sleep}"
    assert location_label("~", 0, "marshal.loads") == "marshal.loads"
    assert location_label("~", 3, "<lambda>") == "~:3(<lambda>)"  # only line 0 is pstats' builtin form
    assert location_label("/a/b/c/d.py", 9, "f") == "…/c/d.py:9(f)"
    assert location_label("/a/b/c/d.py", 9, "f", full_path=True) == "/a/b/c/d.py:9(f)"
    assert location_label("b/d.py", 9, "f") == "b/d.py:9(f)"
    assert location_label("/c/d.py", 9, "f", {"/c/d.py": "In [4]"}) == "In [4]:9(f)"
    assert location_label("/c/d.py", 9, "f", {"/c/d.py": ""}) == "/c/d.py:9(f)"
    assert _short_path("<frozen importlib._bootstrap>") == "<frozen importlib._bootstrap>"
    assert _short_path("C:\\x\\y\\z.py") == "…/y/z.py"
    assert _short_path("/a/b/c/d.py", keep=3) == "…/b/c/d.py"
    stats = pd.DataFrame({"filename": ["/a/b/c/d.py", "~"], "lineno": [9, 0], "function": ["f", "<built-in method x>"]})
    out = pstats_location(stats)
    assert out.tolist() == ["…/c/d.py:9(f)", "{built-in method x}"] and out.dtype == object
    assert pstats_location(stats, {"/a/b/c/d.py": "In [2]"}).tolist()[0] == "In [2]:9(f)"
    assert pstats_location(stats, full_paths=True).tolist()[0] == "/a/b/c/d.py:9(f)"
    assert code_family("<frozen importlib._bootstrap>") == ("stdlib", "importlib")
    assert code_family("<string>") == ("user", "")
    assert code_family("/usr/lib/python3/dist-packages/yaml/x.py") == ("package", "yaml")
    assert code_family("/x/site-packages") == ("user", "")  # a folder named so, no package under it
    assert code_family("/x/nb.py", {"/x/nb.py": "In [1]"}) == ("cell", "")
    assert code_family("C:\\Users\\me\\AppData\\Local\\Temp\\ipykernel_42\\123.py") == ("cell", "")
    assert code_family("<cell line: 3>") == ("cell", "")


def test_fit_scales_down_never_up():
    from nbprof.analysis.flame import _fit

    assert _fit([1.0, 2.0], 3.0) == [1.0, 2.0]
    assert _fit([1.0, 2.0], 5.0) == [1.0, 2.0]
    assert _fit([1.0, 2.0], 0.0) == [0.0, 0.0] and _fit([1.0, 2.0], -1.0) == [0.0, 0.0]
    out = _fit([1.0, 3.0], 2.0)
    assert out == [0.5, 1.5]
    out = _fit([0.1] * 10, 0.3)
    import math

    assert math.fsum(out) <= 0.3 and out[0] == pytest.approx(0.03)  # the exact sum fits
    assert _fit([], 1.0) == []


def _cprofile_tables(spec):
    """{name: (ncalls, primitive, tottime, cumtime, {caller: (ncalls, cumtime)})} -> stats, edges."""
    stats = pd.DataFrame([("m.py", i + 1, n, nc, pc, tt, ct) for i, (n, (nc, pc, tt, ct, _)) in enumerate(spec.items())],
                         columns=["filename", "lineno", "function", "ncalls", "primitive_calls", "tottime_s",
                                  "cumtime_s"])
    line = {n: i + 1 for i, n in enumerate(spec)}
    edges = pd.DataFrame([("m.py", line[c], c, "m.py", line[n], n, enc, enc, 0.0, ect)
                          for n, (*_, callers) in spec.items() for c, (enc, ect) in callers.items()],
                         columns=["caller_filename", "caller_lineno", "caller_function", "callee_filename",
                                  "callee_lineno", "callee_function", "ncalls", "primitive_calls", "tottime_s",
                                  "cumtime_s"])
    return stats, edges


def test_call_tree_by_hand_columns_and_dtypes():
    from nbprof.analysis.flame import TREE_COLUMNS, call_tree

    stats, edges = _cprofile_tables({
        "main": (1, 1, 1.0, 4.0, {}),
        "<listcomp>": (2, 2, 1.0, 1.0, {"main": (2, 1.0)}),
        "work": (1, 1, 2.0, 2.0, {"main": (1, 2.0)}),
        "idle": (1, 1, 0.0, 0.0, {"main": (1, 0.0)}),  # no time: left out
    })
    tree = call_tree(stats, edges, min_fraction=0, root_label="In [1]")
    assert list(tree.columns) == list(TREE_COLUMNS)
    assert tree[["id", "parent", "name", "label", "value_s", "self_s", "ncalls", "depth", "recursive", "kind",
                 "family"]].values.tolist() == [
        [0, -1, "In [1]", "In [1]", 4.0, 0.0, pytest.approx(np.nan, nan_ok=True), 0, False, "root", "root"],
        [1, 0, "main", "m.py:1(main)", 4.0, 1.0, 1.0, 1, False, "function", "user"],
        [2, 1, "work", "m.py:3(work)", 2.0, 2.0, 1.0, 2, False, "function", "user"],
        [3, 1, "<listcomp>:2", "m.py:2(<listcomp>)", 1.0, 1.0, 2.0, 2, False, "function", "user"],
    ]
    assert [str(tree[c].dtype) for c in ("id", "parent", "lineno", "value_s", "self_s", "ncalls", "depth",
                                         "recursive")] == ["int64"] * 3 + ["float64"] * 3 + ["int64", "bool"]
    with pytest.raises(ValueError) as e:
        call_tree(stats, edges, min_fraction=1.0)
    assert str(e.value) == "min_fraction must be in [0, 1); got 1.0"
    with pytest.raises(ValueError):
        call_tree(stats, edges, min_fraction=-0.1)
    assert len(call_tree(stats, edges, min_fraction=0.0, max_nodes=0)) == 2  # at least the root and one row


def test_stack_timelines_puts_each_part_under_the_last_on_one_clock(tmp_path):
    from nbprof.analysis.timeline import stack_timelines, timeline_rects

    a, b = Trace(), Trace()
    a.op("aten::a", 0, 10)
    a.memory(5, 16, 16, 512)
    ext = b.op("aten::b", 0, 20)
    b.launch("k", ext, 5, 2, 10, 5)
    pa, pb = a.load(tmp_path, "a.json"), b.load(tmp_path, "b.json")
    parts = [timeline_rects(pa.events, pa.meta, merge=False), timeline_rects(pb.events, pb.meta, merge=False)]
    parts = [dataclasses_replace(p, events=None, event_row=None) for p in parts]
    links = pd.DataFrame({"group": [0, 0], "row": [0, 1], "part": [0, 1], "x_us": [1.0, 2.0]})
    data, first_rows = stack_timelines(parts, ["r0", "r1"], [100.0, 0.0], width_px=500, max_rects=100, links=links)
    assert first_rows.tolist() == [0, 1] and first_rows.dtype == I64
    assert data.rects[["row", "lane", "x0_us", "x1_us", "name"]].values.tolist() == [
        [0, 0, 100.0, 110.0, "aten::a"], [1, 1, 0.0, 20.0, "aten::b"], [2, 1, 5.0, 7.0, "cudaLaunchKernel"],
        [3, 2, 10.0, 15.0, "k"]]
    assert data.lanes["label"].tolist() == ["rank r0 · CPU thread 1000 (main)", "rank r1 · CPU thread 1000 (main)",
                                            "rank r1 · CUDA 0 stream 7"]
    assert data.lanes["rank"].tolist() == ["r0", "r1", "r1"] and data.lanes["band"].tolist() == [0, 1, 1]
    assert data.lanes["first_row"].tolist() == [0, 1, 3] and data.lanes["lane"].tolist() == [0, 1, 2]
    assert data.rows.values.tolist() == [[0, 0, 0], [1, 1, 0], [2, 1, 1], [3, 2, 0]]
    assert (data.t0_us, data.t1_us) == (0.0, 110.0)  # b's start, a's end moved by 100
    assert data.events_drawn == 4 and data.hidden == {"memory": 1}
    assert data.links["row"].tolist() == [0, 2]  # part 1's row 1 is the stacked row 2
    assert (data.width_px, data.max_rects, data.px_us) == (500, 100, 0.0)
    windowed, _ = stack_timelines(parts, ["r0", "r1"], [100.0, 0.0], width_px=500, max_rects=100, window=(5.0, 50.0))
    assert (windowed.t0_us, windowed.t1_us) == (5.0, 50.0)
    # more rectangles than max_rects: merged again over the common span (rows stay apart)
    c = Trace()
    for ts in (0, 2, 4):
        c.op("aten::tiny", ts, 1)
    pc = c.load(tmp_path, "c.json")
    tiny = dataclasses_replace(timeline_rects(pc.events, pc.meta, merge=False), events=None, event_row=None)
    merged, _ = stack_timelines([tiny, parts[1]], ["r0", "r1"], [0.0, 0.0], width_px=1, max_rects=4)
    assert merged.rects[["row", "x0_us", "x1_us", "count", "name"]].values.tolist() == [
        [0, 0.0, 5.0, 3, "aten::tiny"], [1, 0.0, 20.0, 1, "aten::b"], [2, 5.0, 7.0, 1, "cudaLaunchKernel"],
        [3, 10.0, 15.0, 1, "k"]]
    assert (merged.merged_events, merged.merged_rects, merged.max_rects) == (3, 1, 4)
    kept, _ = stack_timelines([tiny, parts[1]], ["r0", "r1"], [0.0, 0.0], width_px=1, max_rects=6)
    assert len(kept.rects) == 6 and kept.merged_rects == 0  # at max_rects: left as they are
    none, rows = stack_timelines([], [], [], width_px=10, max_rects=10)
    assert none.empty and (none.t0_us, none.t1_us) == (0.0, 0.0) and rows.tolist() == []
    assert list(none.rects.columns) == RECT_COLUMNS and list(none.rows.columns) == ["row", "lane", "level"]


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


def _cycle(t: Trace, ts: float, dur: float) -> None:
    """The profiler's own span of one recorded cycle, as torch writes it."""
    t.events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": "Spans", "tid": "x", "ts": ts,
                     "dur": dur})


def test_profiled_windows_of_schedule_cycles_widen_to_their_events(tmp_path):
    """Cycle 0 records [100, 300] (µs, absolute) with ops at [50, 80] and [250, 400]; cycle 1
    [1000, 1100]. On the merged clock (origin 50): [0, 350] (the span from the cycle's origin,
    widened to its last event) and [950, 1050]."""
    from nbprof.analysis.device_stats import profiled_windows
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    c0, c1 = Trace(), Trace()
    _cycle(c0, 100, 200)
    c0.op("aten::a", 50, 30)
    c0.op("aten::b", 250, 150)
    _cycle(c1, 1000, 100)
    c1.op("aten::c", 1000, 50)
    parts = [read_trace_file(t.write(tmp_path / f"c{i}.json")) for i, t in enumerate((c0, c1))]
    p = TorchProfile.from_trace(concat_traces(parts))
    w = profiled_windows(p.events, p.meta)
    assert w.values.tolist() == [[0, 0, 350_000], [0, 950_000, 1_050_000]]
    assert all(w[c].dtype == I64 for c in w.columns)
    # the same cycles named in a column: each cycle's first event to its last
    q = TorchProfile.from_trace(concat_traces(parts, labels=["x", "y"], label_column="cycle"))
    w = profiled_windows(q.events, q.meta)
    assert w.values.tolist() == [[0, 0, 350_000], [0, 950_000, 1_000_000]]
    # all in one cycle: one window
    ev = q.events.assign(cycle="x")
    assert profiled_windows(ev, q.meta).values.tolist() == [[0, 0, 1_000_000]]


def test_profiled_windows_per_rank_and_per_rank_and_cycle(tmp_path):
    from nbprof.analysis.device_stats import profiled_windows

    a, b = Trace(rank=0), Trace(rank=1)
    a.op("aten::a", 10, 20)
    a.op("aten::a", 100, 20)
    b.op("aten::b", 0, 500)
    p = _ranks(tmp_path, a, b, labels=["r1", "r0"])  # sorted: r0 is code 0
    w = profiled_windows(p.events, p.meta)
    assert w.values.tolist() == [[0, 0, 500_000], [1, 10_000, 120_000]]
    assert all(w[c].dtype == I64 for c in w.columns)
    ev = p.events.assign(cycle=[0, 1, 0])  # rank r1's two ops in two cycles
    names = p.events["name"].astype(str).tolist()
    assert names == ["aten::a", "aten::a", "aten::b"]
    w = profiled_windows(ev, p.meta)
    assert w.values.tolist() == [[0, 0, 500_000], [1, 10_000, 30_000], [1, 100_000, 120_000]]


def test_timeline_lanes_name_autograd_threads_and_processes(tmp_path):
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    t.op("aten::main_work", 0, 1000)  # thread 1000: the main thread
    t.op("autograd::engine::evaluate_function: MmBackward0", 0, 10, tid=2000)
    t.op("autograd::engine::evaluate_function: AddBackward0", 20, 10, tid=2000)
    t.op("aten::zero_", 40, 10, tid=2000)
    t.op("aten::mm", 50, 20, tid=2000)  # 2 of 4 top-level events are the engine's: not more than half
    t.op("autograd::engine::evaluate_function: X", 0, 10, tid=3000)
    t.op("autograd::engine::evaluate_function: X", 20, 10, tid=3000)
    t.op("aten::add", 40, 10, tid=3000)  # 2 of 3: autograd
    t.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::worker", "pid": 2222, "tid": 4000, "ts": 5,
                     "dur": 5, "args": {"External id": 99}})
    p = t.load(tmp_path)
    lanes = timeline_rects(p.events, p.meta, merge=False).lanes
    assert lanes["label"].tolist() == ["pid 1000 · CPU thread 1000 (main)", "pid 1000 · CPU thread 2000",
                                       "pid 1000 · CPU thread 3000 (autograd)", "pid 2222 · CPU thread 4000"]
    assert lanes["pid"].tolist() == [1000, 1000, 1000, 2222] and lanes["events"].tolist() == [1, 4, 3, 1]


def test_remerge_by_hand(tmp_path):
    from nbprof.analysis.timeline import remerge, timeline_rects

    p = ops_to_merge().load(tmp_path)
    data = timeline_rects(p.events, p.meta, merge=False)
    out = remerge(data, 1)  # one pixel of 100 µs
    assert out.rects[["row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name", "family", "event",
                      "distinct"]].values.tolist() == [
        [0, 0, 0, 0.0, 6.0, 4.0, 3, "aten::a", "op", -1, 2], [1, 1, 0, 0.0, 100.0, 100.0, 1, "aten::z", "op", 3, 1]]
    assert out.rects["names"].tolist() == [[("aten::a", 2), ("aten::b", 1)], None]
    assert out.rects["hue"].tolist() == data.rects["hue"].iloc[[0, 3]].tolist()
    assert (out.px_us, out.width_px, out.max_rects, out.merged_events, out.merged_rects) == (100.0, 1, 20_000, 3, 1)
    assert out.lanes is data.lanes and out.rows is data.rows and out.events_drawn == 4
    assert (out.t0_us, out.t1_us) == (data.t0_us, data.t1_us)
    # at a finer resolution than it was merged at, with nothing to merge: the same timeline
    assert remerge(out, 2) is out
    assert remerge(data, 1, max_rects=7).max_rects == 7
    empty = timeline_rects(p.events.iloc[:0], p.meta)
    assert remerge(empty, 1) is empty


@pytest.mark.parametrize("at_us,loose", [(0.0, False), (50.0, False), (100.0, False), (100.001, True), (150.0, True)])
def test_a_memory_event_of_another_thread_is_loose_only_outside_every_op(tmp_path, at_us, loose):
    """Any thread's allocation inside an op's [start, end] is the op's (as torch counts): the
    event is on a thread with no op, so no parent links it; the ops open at its time decide."""
    from nbprof.analysis.key_averages import key_averages

    t = Trace()
    t.op("aten::empty", 0, 100)
    t.memory(at_us, 256, 256, 4096, tid=2000)
    k = key_averages(t.load(tmp_path).events)
    rows = dict(zip(k["name"], zip(k["count"], k["device_mem_bytes"])))
    assert rows["aten::empty"] == (1, 0 if loose else 256)
    assert rows.get("[memory]") == ((1, 256) if loose else None)


def test_loose_memory_of_merged_ranks_is_decided_within_each_rank(tmp_path):
    from nbprof.analysis.key_averages import key_averages

    a, b = Trace(rank=0), Trace(rank=1)
    a.op("aten::empty", 0, 100)
    b.op("aten::other", 500, 100)
    b.memory(50, 64, 64, 4096, tid=2000)  # in rank 0's op's time, but rank 1 had no op open then
    a.memory(550, 32, 32, 4096, tid=2000)  # the other way round
    b.memory(550, 16, 80, 4096, tid=2000)  # in its own rank's op
    k = key_averages(_ranks(tmp_path, a, b).events)
    rows = dict(zip(k["name"], zip(k["count"], k["device_mem_bytes"])))
    assert rows == {"aten::empty": (1, 0), "aten::other": (1, 16), "[memory]": (2, 96)}


def test_device_stats_steps_columns_per_rank_where_only_one_has_steps(tmp_path):
    from nbprof.analysis.device_stats import device_stats

    a, b = Trace(rank=0), Trace(rank=1)
    for t in (a, b):
        ext = t.op("aten::mm", 0, 1000)
        t.launch("k", ext, 10, 5, 100, 100, blocks_per_sm=1.0)
    a.annotation("ProfilerStep#0", 0, 400)  # rank 0's steps: [0, 400]
    p = _ranks(tmp_path, a, b)
    d = device_stats(p.events, p.meta).devices
    assert d["rank"].tolist() == [0, 1]
    assert d["steps_span_us"].tolist()[0] == 400.0 and np.isnan(d["steps_span_us"].tolist()[1])
    assert d["steps_busy_fraction"].tolist()[0] == 0.25 and np.isnan(d["steps_busy_fraction"].tolist()[1])
    assert d["steps_sm_efficiency"].tolist()[0] == 0.25 and np.isnan(d["steps_sm_efficiency"].tolist()[1])
    assert d["steps_achieved_occupancy_pct"].tolist()[0] == 6.0
    assert np.isnan(d["steps_achieved_occupancy_pct"].tolist()[1])
    assert d["sm_efficiency"].tolist() == [0.1, 0.1] and d["busy_fraction"].tolist() == [0.1, 0.1]


def test_allocated_totals_without_the_allocators_totals_are_running_sums_per_device(tmp_path):
    """torch 1.8-1.9 wrote no totals (-1): the curve is the running sum of the sizes per device
    from 0, in time order (events given out of order, two devices interleaved)."""
    from nbprof.analysis.memory import memory_curve

    t = Trace()
    t.op("aten::empty", 0, 100)
    t.memory(30, 100, -1, -1, addr=1)
    t.memory(10, 50, -1, -1, addr=2)
    t.memory(20, 7, -1, -1, device=-1, addr=3)
    t.memory(40, -50, -1, -1, addr=2)
    t.memory(25, 5, -1, -1, device=-1, addr=4)
    t.memory(35, 1000, 999, 2048, device=1, addr=5)  # a device with totals keeps them
    curve = memory_curve(t.load(tmp_path).events)
    assert curve[["device", "time_us", "allocated_bytes"]].values.tolist() == [
        ["cpu", 20.0, 7], ["cpu", 25.0, 12],
        ["cuda:0", 10.0, 50], ["cuda:0", 30.0, 150], ["cuda:0", 40.0, 100],
        ["cuda:1", 35.0, 999]]


def test_memory_track_at_the_windows_start_starts_with_the_value_before_it():
    from nbprof.analysis.timeline_tracks import memory_track

    curve = pd.DataFrame({"device": ["cuda:0"] * 3, "time_us": [5.0, 10.0, 20.0], "allocated_bytes": [1, 2, 3]})
    track = memory_track(curve, 10.0, 30.0, bins=1)
    assert track[["time_us", "allocated_bytes"]].values.tolist() == [[10.0, 1], [20.0, 3]]
    # an event exactly at the start with no value before it: no starting point
    track = memory_track(curve, 5.0, 30.0, bins=1)
    assert track[["time_us", "allocated_bytes"]].values.tolist() == [[20.0, 3]]


def test_call_tree_names_a_builtin_and_merges_a_lone_recursive_call():
    from nbprof.analysis.flame import call_tree

    stats = pd.DataFrame({
        "filename": ["/u/a.py", "~", "/u/a.py"], "lineno": [1, 0, 5],
        "function": ["main", "<built-in method time.sleep>", "rec"],
        "ncalls": [1, 1, 3], "primitive_calls": [1, 1, 1], "tottime_s": [0.5, 9.0, 0.5], "cumtime_s": [10.0, 9.0, 0.5],
    })
    rows = [("/u/a.py", 1, "main", "~", 0, "<built-in method time.sleep>", 1, 1, 9.0, 9.0),
            ("/u/a.py", 1, "main", "/u/a.py", 5, "rec", 1, 1, 0.5, 0.5),
            ("/u/a.py", 5, "rec", "/u/a.py", 5, "rec", 2, 0, 0.3, 0.3)]
    edges = pd.DataFrame(rows, columns=["caller_filename", "caller_lineno", "caller_function", "callee_filename",
                                        "callee_lineno", "callee_function", "ncalls", "primitive_calls",
                                        "tottime_s", "cumtime_s"])
    tree = call_tree(stats, edges, min_fraction=0.0)
    assert tree[["name", "label", "family", "kind", "depth"]].values.tolist() == [
        ["cell", "cell", "root", "root", 0], ["main", "/u/a.py:1(main)", "user", "function", 1],
        ["time.sleep", "{built-in method time.sleep}", "builtin", "function", 2],
        ["rec", "/u/a.py:5(rec)", "user", "function", 2],
        ["rec ↻", "/u/a.py:5(rec)", "user", "recursive", 3],
    ]
    assert tree["value_s"].tolist() == [10.0, 10.0, 9.0, 0.5, 0.3]
    assert tree["recursive"].tolist() == [False, False, False, False, True]
    # under 4 % of the root (0.4 s) the recursive call is merged: alone, it keeps its name and kind
    small = call_tree(stats, edges, min_fraction=0.04)
    assert small[["name", "kind", "recursive"]].values.tolist()[3:] == [["rec", "function", False],
                                                                        ["rec ↻", "recursive", True]]
    # under 6 % (0.6 s) rec itself is merged, alone: named, not expanded
    smaller = call_tree(stats, edges, min_fraction=0.06)
    assert smaller["name"].tolist() == ["cell", "main", "time.sleep", "rec"]
    assert smaller["kind"].tolist() == ["root", "function", "function", "function"]


def test_downsample_max_keeps_the_last_points_bucket_max_once():
    """The last point falls in the last bucket (not one of its own): where it is that bucket's
    highest, no other point of the bucket is kept for being highest."""
    from nbprof.analysis.memory import downsample_max

    x = np.arange(10, dtype=np.float64)
    y = np.array([5, 1, 9, 2, 3, 3, 0, 8, 7, 10], dtype=np.float64)
    kx, ky = downsample_max(x, y, 2)
    assert kx.tolist() == [0.0, 2.0, 5.0, 9.0] and ky.tolist() == [5.0, 9.0, 3.0, 10.0]


def test_memory_curve_and_peaks_of_one_memory_event(tmp_path):
    from nbprof.analysis.memory import memory_curve, memory_peaks

    t = Trace()
    t.op("aten::empty", 0, 10)
    t.memory(5, 64, 64, 512)
    curve = memory_curve(t.load(tmp_path).events)
    assert curve.values.tolist() == [["cuda:0", 5.0, 64, 512, 64, "aten::empty"]]
    [peak] = memory_peaks(curve)
    assert (peak.device, peak.peak_allocated_bytes, peak.start_allocated_bytes) == ("cuda:0", 64, 0)


def test_memory_peaks_come_by_device_whatever_the_curves_order():
    from nbprof.analysis.memory import memory_peaks

    curve = pd.DataFrame({"device": ["cuda:1", "cuda:0", "cuda:1"], "time_us": [1.0, 2.0, 3.0],
                          "allocated_bytes": [10, 20, 30], "reserved_bytes": [64, 64, 128],
                          "delta_bytes": [10, 20, 20], "op": ["a", "b", "c"]})
    assert [(p.device, p.peak_allocated_bytes, p.peak_op, p.peak_reserved_bytes) for p in memory_peaks(curve)] == [
        ("cuda:0", 20, "b", 64), ("cuda:1", 30, "c", 128)]


def test_allocations_top_op_is_an_operator_never_a_range(tmp_path):
    """Under a record_function range without an operator the block has no op; under an op
    inside a range, the outermost operator (not the range)."""
    from nbprof.analysis.memory import allocations

    t = Trace()
    t.annotation("my_range", 0, 100)
    t.memory(10, 64, 64, 512, addr=1)  # in the range only
    t.op("aten::conv2d", 20, 50)
    t.op("aten::empty", 30, 10)
    t.memory(35, 32, 96, 512, addr=2)  # in empty, in conv2d, in the range
    a = allocations(t.load(tmp_path).events)
    assert a[["addr", "op", "top_op"]].values.tolist() == [[1, "my_range", ""], [2, "aten::empty", "aten::conv2d"]]


def test_nesting_order_by_thread_start_longest_first_then_file_order():
    from nbprof.analysis.tree import _factorize_sorted, _nesting_order

    thread = a64(5, 3, 5, 3, 5, 5, 3)
    start = a64(10, 0, 10, 0, 0, 10, 7)
    end = a64(20, 5, 30, 9, 50, 20, 8)
    rows = a64(0, 1, 2, 3, 4, 5, 6)
    # thread 3: rows 1 and 3 start at 0 (3 is longer), then 6; thread 5: 4, then 2 (longest), 0 and 5 tie
    want = [3, 1, 6, 4, 2, 0, 5]
    assert _nesting_order(rows, thread, start, end).tolist() == want
    # the same where the packed key would not fit in 63 bits: a three-key sort
    far = start + np.where(rows == 4, 0, 2**61)
    assert _nesting_order(rows, thread, far, end + np.where(rows == 4, 0, 2**61)).tolist() == want
    assert _nesting_order(rows[:0], thread, start, end).tolist() == []
    assert _nesting_order(a64(2, 6), thread, start, end).tolist() == [6, 2]  # a subset of the rows
    values, codes = _factorize_sorted(a64(9, -1, 9, 4))
    assert values.tolist() == [-1, 4, 9] and codes.tolist() == [2, 0, 2, 1]


def test_call_tree_an_edge_from_a_function_without_a_row_counts_as_top_level():
    from nbprof.analysis.flame import call_tree

    stats = pd.DataFrame({"filename": ["/u/a.py"], "lineno": [3], "function": ["f"], "ncalls": [2],
                          "primitive_calls": [2], "tottime_s": [4.0], "cumtime_s": [4.0]})
    edges = pd.DataFrame([("/u/gone.py", 1, "ghost", "/u/a.py", 3, "f", 1, 1, 2.0, 2.0)],
                         columns=["caller_filename", "caller_lineno", "caller_function", "callee_filename",
                                  "callee_lineno", "callee_function", "ncalls", "primitive_calls", "tottime_s",
                                  "cumtime_s"])
    tree = call_tree(stats, edges)
    assert tree[["name", "value_s", "ncalls"]].values.tolist()[1:] == [["f", 4.0, 2.0]]
    assert tree["value_s"].iloc[0] == 4.0
