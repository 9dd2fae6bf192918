"""Degenerate profiles: every event at one instant and taking no time; steps whose device work
runs out of order. Each table's shape, columns and values worked out by hand from the trace
written here (no division by a zero span, no warning, no finding)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from .synthetic import Trace

N = 25  # more than the launch-bound finding's 20 consecutive tiny kernels


@pytest.fixture
def instant(tmp_path):
    """N ``aten::add`` at 100 µs, each launching a kernel at 100 µs, all taking 0 µs."""
    t = Trace()
    for _ in range(N):
        ext = t.op("aten::add", 100, 0)
        t.launch("tiny_kernel", ext, 100, 0, 100, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 anywhere
        p = t.load(tmp_path)
        p.findings, p.device_stats.devices, p.ranks().table  # computed once, under the filter
    return p


def test_a_profile_of_zero_time_has_no_findings(instant):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = instant.findings
    assert len(f) == 0 and list(f.columns) == ["kind", "severity", "message", "evidence"]


def test_a_profile_of_zero_time_has_zero_times_and_its_counts(instant):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ka = instant.key_averages()
        kernels = instant.kernels()
        overview = instant.overview()
    assert ka[["name", "count", "kind"]].values.tolist() == [
        ["aten::add", N, "op"], ["cudaLaunchKernel", N, "runtime"], ["tiny_kernel", N, "kernel"]]
    times = [c for c in ka.columns if c.endswith("_us")]
    assert (ka[times].to_numpy() == 0).all()
    assert kernels[["name", "kind", "count", "device_total_us", "share", "launched_by"]].values.tolist() == [
        ["tiny_kernel", "kernel", N, 0.0, 0.0, "aten::add"]]
    assert overview.drop(columns=["step"]).to_numpy().tolist() == [[0.0] * 9]
    assert overview["step"].tolist() == ["all"]
    assert len(instant.steps()) == 0


def test_a_device_busy_for_no_time_in_a_span_of_no_time(instant):
    d = instant.device_stats.devices
    assert d[["device", "span_us", "busy_us", "idle_us", "kernels"]].values.tolist() == [["cuda:0", 0.0, 0.0, 0.0, N]]
    assert np.isnan(d["busy_fraction"].iloc[0])  # 0 of 0: no fraction
    row = instant.ranks().table.iloc[0]
    assert (row["span_us"], row["kernels"], row["breakdown_window_us"], row["breakdown_exposed_comm_us"]) == (0.0, N, 0.0, 0.0)


def test_a_later_steps_kernel_that_ran_before_the_first_steps_does_not_move_the_first_step(tmp_path):
    """Step 0 launches k0, which waits on its stream until 500-600 µs; step 1 launches k1 on another
    stream, which runs at once (300-350 µs), before k0. The first step starts after device work
    of earlier, unprofiled steps only: k1 is step 1's, so step 0 still starts at its range's start
    (0) and ends with k0 (600); step 1 starts where step 0 ended and its work is done by then."""
    t = Trace()
    t.annotation("ProfilerStep#0", 0, 100)
    ext = t.op("aten::mm", 10, 20)
    t.launch("k0", ext, 12, 5, 500, 100, stream=7)
    t.annotation("ProfilerStep#1", 100, 100)
    ext = t.op("aten::mm", 110, 20)
    t.launch("k1", ext, 112, 5, 300, 50, stream=8)
    o = t.load(tmp_path).overview()
    assert o["step"].tolist() == [0, 1, "all"]
    # step 0, [0, 600]: kernels 100 + 50, launches 2 x 5, the ops' 2 x 20 less their launches, the rest other
    assert o.drop(columns=["step"]).to_numpy().tolist() == [
        [0.0, 600.0, 150.0, 0.0, 0.0, 10.0, 0.0, 30.0, 410.0],
        [600.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 600.0, 150.0, 0.0, 0.0, 10.0, 0.0, 30.0, 410.0]]


def test_a_kernels_launcher_and_configuration_are_its_most_frequent_the_first_seen_among_equals(tmp_path):
    """Nine kernels, each launched ``a`` times by aten::a<k> with 66 blocks, then ``b`` times by
    aten::b<k> with 132: each kernel's launcher and (grid, block) are the most frequent, the first
    seen where two are as frequent (17 pairs: enough for an unstable sort to swap equals)."""
    plan = [(2, 2), (2, 1), (1, 1), (1, 1), (1, 2), (2, 2), (2, 2), (2, 2), (2, 0)]
    t = Trace()
    at = 0.0
    for k, (a, b) in enumerate(plan):
        for op, bps, times in (("a", 0.5, a), ("b", 1.0, b)):
            for _ in range(times):
                ext = t.op(f"aten::{op}{k}", at, 5)
                t.launch(f"k{k}", ext, at + 1, 1, at + 2, 1, blocks_per_sm=bps)  # grid: 132 x bps blocks
                at += 10
    kernels = t.load(tmp_path).kernels().set_index("name").loc[[f"k{k}" for k in range(len(plan))]]
    first = ["b" if b > a else "a" for a, b in plan]
    assert kernels["launched_by"].tolist() == [f"aten::{op}{k}" for k, op in enumerate(first)]
    assert kernels["grid"].tolist() == ["[132, 1, 1]" if op == "b" else "[66, 1, 1]" for op in first]
    assert kernels["block"].tolist() == ["[128, 1, 1]"] * len(plan)
    assert kernels["launch_configs"].tolist() == [2 if b else 1 for a, b in plan]
    assert kernels["count"].tolist() == [a + b for a, b in plan]


def test_two_top_level_ops_that_partially_overlap_load_with_their_own_self_times(tmp_path):
    """Whole-µs clocks write ``ts 100 dur 52`` then ``ts 150 dur 40`` on one thread (the first ends
    2 µs into the second). Neither has children, so each self time is its own duration, and a
    folder holding such a rank loads too (b854553 raised IndexError in _sibling_overlap here)."""
    t = Trace()
    t.op("aten::linear", 100, 52)
    t.op("aten::relu", 150, 40)
    p = t.load(tmp_path)
    ops = p.events.set_index("name")
    assert ops.loc["aten::linear", "self_cpu_us"] == 52.0 and ops.loc["aten::relu", "self_cpu_us"] == 40.0
    assert (p.events["self_cpu_us"] >= 0).all()
    ka = p.key_averages().set_index("name")
    assert ka.loc["aten::linear", "cpu_total_us"] == 52.0 and ka.loc["aten::relu", "self_cpu_us"] == 40.0

    import nbprof
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        r = Trace(rank=rank)
        r.op("aten::linear", 100, 52)
        r.op("aten::relu", 150, 40)
        r.write(folder / f"rank{rank}.json")
    merged = nbprof.load_trace(folder)
    assert merged.key_averages().set_index("name").loc["aten::relu", "count"] == 2


def test_partial_overlaps_under_a_parent_give_back_their_overlap_once(tmp_path):
    """A parent [0, 100] over children [10, 62] and [60, 90] (2 µs shared): the children cover
    80 µs of it, so its self time is 20 µs, and theirs are their own 52 and 30."""
    t = Trace()
    t.op("aten::parent", 0, 100)
    t.op("aten::first", 10, 52)
    t.op("aten::second", 60, 30)
    ev = t.load(tmp_path).events.set_index("name")
    assert ev.loc["aten::parent", "self_cpu_us"] == pytest.approx(20.0)
    assert ev.loc["aten::first", "self_cpu_us"] == 52.0 and ev.loc["aten::second", "self_cpu_us"] == 30.0


def test_calls_sharing_both_timestamps_that_overfill_their_parent_leave_it_no_time(tmp_path):
    """On a whole-µs clock, a parent [0, 10] over two calls of ``aten::zeros`` both written [2, 8]
    (back-to-back calls, which _split_ties makes siblings): each call keeps its 6 µs, as in torch,
    and torch's parent self time, 10 - 6 - 6, is -2 µs; nbprof's is 0. Under a parent with room
    for both ([0, 20]), torch's 20 - 6 - 6 = 8 µs stands."""
    t = Trace()
    t.op("aten::parent", 0, 10)
    t.op("aten::zeros", 2, 6)
    t.op("aten::zeros", 2, 6)
    ev = t.load(tmp_path).events
    assert ev["parent"].tolist() == [-1, 0, 0]
    assert ev["self_cpu_us"].tolist() == [0.0, 6.0, 6.0]
    t.events[0]["dur"] = 20
    assert t.load(tmp_path, "roomy.json").events["self_cpu_us"].tolist() == [8.0, 6.0, 6.0]
