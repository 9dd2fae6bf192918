"""What seed 69's sample of mutants (docs/testing.md) showed no test held in nbprof.analysis, each
against an answer of its own: small arrays and tables written by hand, a folder of ranks written
by hand, an empty cProfile profile; every expected value worked out from the numbers written here."""

from __future__ import annotations

import math

import numpy as np

import nbprof

from .synthetic import Trace


def test_points_in_intervals_keys_narrow_times_in_int64():
    """Times in an int32 array (2 s and 5 ns) and one interval from -1 s to 2.1 s: the keys are
    counted from the earliest time (-1 s), 3 s for the first point, past int32's 2.1 s. Counted in
    int64 both points lie in the interval, the 5 ns one first (by time)."""
    from nbprof.analysis._intervals import points_in_intervals

    iv, pt = points_in_intervals(np.zeros(2, np.int64), np.array([2_000_000_000, 5], dtype=np.int32),
                                 np.zeros(1, np.int64), np.array([-1_000_000_000]), np.array([2_100_000_000]))
    assert iv.tolist() == [0, 0] and pt.tolist() == [1, 0]


def test_a_collective_one_rank_never_ran_counts_zero_there(tmp_path):
    """Two ranks, each with a collective the other never ran: rank 0 spends 500 µs in an
    all-reduce (after 100 µs of gemm, span 0 -> 610 µs), rank 1 10 µs in a broadcast (after a gemm
    from 10 to 600 µs, span 610 µs). A rank without a collective spends 0 in it: the all-reduce is
    rank 0 waiting 500 µs against 0 (500 / 610 of its span, "high", the late rank 1); the broadcast
    is 10 against 0, 10 / 610 = 1.6 % of rank 1's span, under 5 %: no finding."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    a, b = Trace(rank=0), Trace(rank=1)
    ext = a.op("aten::mm", 0, 20)
    a.launch("gemm", ext, 1, 5, 10, 100)
    ext = a.op("c10d::allreduce_", 30, 10)
    a.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 31, 5, 110, 500, stream=20)
    ext = b.op("aten::mm", 0, 20)
    b.launch("gemm", ext, 1, 5, 10, 590)
    ext = b.op("c10d::broadcast_", 30, 10)
    b.launch("ncclDevKernel_Broadcast_RING_LL", ext, 31, 5, 600, 10, stream=20)
    a.write(folder / "a.json")
    b.write(folder / "b.json")
    p = nbprof.load_trace(folder)
    coll = p.collectives()
    assert sorted(zip(coll["rank"], coll["total_us"])) == [(0, 500.0), (1, 10.0)]
    f = p.findings
    [(severity, evidence)] = f.loc[f["kind"] == "collective_wait", ["severity", "evidence"]].values.tolist()
    assert severity == "high"
    assert evidence["waiting_rank"] == 0 and evidence["late_rank"] == 1
    assert evidence["total_us"] == {"0": 500.0, "1": 0.0} and evidence["extra_us"] == 500.0
    assert math.isclose(evidence["share"], 500 / 610)


def test_event_line_rows_of_a_profile_without_event_lines_is_none():
    """A cProfile profile (of no call) has no ``_event_lines``: it cannot tell an event's line,
    so ``event_line_rows`` says None (its documented answer), not an error."""
    from nbprof.analysis.hot_lines import event_line_rows
    from nbprof.model import PythonProfile

    p = PythonProfile({})
    assert not hasattr(p, "_event_lines")
    assert event_line_rows(p) is None


def _parts(rows: list[tuple[str, float]]):
    """A rank's ``module_parts`` table written by hand: (path, first call in µs) in tree order, each
    module called once for 1 µs of CPU time."""
    import pandas as pd

    paths = [p for p, _ in rows]
    return pd.DataFrame({
        "module": paths, "name": [p.rsplit(".", 1)[-1] for p in paths],
        "type": [p.rsplit(".", 1)[-1].rsplit("_", 1)[0] for p in paths],
        "parent": [p.rsplit(".", 1)[0] if "." in p else "" for p in paths],
        "depth": [p.count(".") for p in paths], "calls": [1] * len(rows), "cpu_total_us": [1.0] * len(rows),
        "self_cpu_us": [1.0] * len(rows), "device_total_us": [0.0] * len(rows), "self_device_us": [0.0] * len(rows),
        "first_us": [t for _, t in rows]})


def test_merged_module_trees_order_children_by_first_call_on_the_common_clock():
    """Rank 0: Net_0 at 0 µs calls Linear_0 at 1 µs, then ReLU_0 at 2 µs. Rank 1 (its clock 10 µs
    ahead: shift -10): Net_0 at 10 -> 0 µs calls Dropout_0 at 10.5 -> 0.5 µs, before rank 0's
    Linear_0. Merged, Net_0's children come by first call: Dropout_0, Linear_0, ReLU_0 (not in the
    order the ranks' tables list them)."""
    from nbprof.analysis.modules import merge_modules

    r0 = _parts([("Net_0", 0.0), ("Net_0.Linear_0", 1.0), ("Net_0.ReLU_0", 2.0)])
    r1 = _parts([("Net_0", 10.0), ("Net_0.Dropout_0", 10.5)])
    out = merge_modules([(r0, 0.0), (r1, -10.0)])
    assert out["module"].tolist() == ["Net_0", "Net_0.Dropout_0", "Net_0.Linear_0", "Net_0.ReLU_0"]
    assert out["calls"].tolist() == [2, 1, 1, 1]
