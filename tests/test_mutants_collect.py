"""Contracts of the trace reader, the collectors, the units and the kernel / launch / range tables
that the mutation samples of issue 26 found unpinned: empty tables' columns and dtypes, exact
boundaries, rarely-taken branches. Every expected value is written out by hand (or recomputed from
the hand-made trace in plain Python), never taken from the code under test."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace

OBJ, I64, F64, BOOL = "object", "int64", "float64", "bool"


def dtypes(frame: pd.DataFrame, text: str | None = None) -> dict[str, str]:
    """Each column's dtype by name; ``text``: what the text columns read as (pandas 3 stores a
    column of Python strings as "str"; an empty table's text columns are "object")."""
    out = {c: str(t) for c, t in frame.dtypes.items()}
    return out if text is None else {c: (OBJ if t == text else t) for c, t in out.items()}


# ------------------------------------------------------------------------------ format


@pytest.mark.parametrize("column,unit", [
    ("total_us", "time_us"), ("tottime_s", "time_s"), ("cumtime_s", "time_s"), ("alloc_bytes", "bytes"),
    ("flops", "flops"), ("count", "count"), ("calls", "count"), ("share_pct", "count"),
    # a suffix, not a substring: "_s" inside a name, "flops" as a suffix of another word
    ("s_total", "count"), ("model_flops", "count"), ("bytes_in", "count"),
])
def test_unit_of_reads_a_columns_unit_from_its_suffix(column, unit):
    from nbprof.format import unit_of

    assert unit_of(column) == unit


# ------------------------------------------------------------------------------ native output


def test_stopping_the_stderr_filter_twice_is_harmless(capfd):
    from nbprof.collect.native_output import NativeStderrFilter

    capfd.readouterr()
    f = NativeStderrFilter()
    f.start()
    os.write(2, b"own line\n")
    f.stop()
    f.stop()  # a second stop (an interrupted cell's cleanup after the normal one) does nothing
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "own line\nafter\n"


# ------------------------------------------------------------------------------ ranges


RANGE_DTYPES = {"label": OBJ, "path": OBJ, "depth": I64, "count": I64, "total_us": F64, "mean_us": F64,
                "min_us": F64, "max_us": F64, "share_of_span": F64, "share_of_parent": F64, "share_of_root": F64,
                "device_us": F64, "kernels": I64, "gpu_span_us": F64}
RANGE_OP_DTYPES = {"path": OBJ, "label": OBJ, "name": OBJ, "count": I64, "self_cpu_us": F64, "self_device_us": F64}


def test_ranges_and_their_operators_of_a_profile_without_labels_are_empty_typed_tables(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    assert dtypes(p.ranges()) == RANGE_DTYPES and len(p.ranges()) == 0
    assert dtypes(p.range_ops()) == RANGE_OP_DTYPES and len(p.range_ops()) == 0


def test_ranges_and_their_operators_have_their_dtypes(tmp_path):
    t = Trace()
    t.annotation("outer", 0, 100)
    t.annotation("inner", 10, 30)
    t.op("aten::mm", 12, 5)
    t.annotation("inner", 50, 10)
    t.op("aten::add", 52, 3)
    p = t.load(tmp_path)
    r = p.ranges()
    assert dtypes(r, "str") == RANGE_DTYPES
    assert r["path"].tolist() == ["outer", "outer › inner"]
    assert r["count"].tolist() == [1, 2]
    assert r["min_us"].tolist() == [100.0, 10.0] and r["max_us"].tolist() == [100.0, 30.0]
    ops = p.range_ops()
    assert dtypes(ops, "str") == RANGE_OP_DTYPES
    assert ops[["path", "name", "count"]].values.tolist() == [
        ["outer", "aten::mm", 1], ["outer", "aten::add", 1], ["outer › inner", "aten::mm", 1],
        ["outer › inner", "aten::add", 1]]


def test_gpu_annotations_of_a_merged_same_name_range_count_for_the_range_it_merged_into(tmp_path):
    # "step" inside "step" (an only child of the same name) is one range; torch writes a GPU
    # annotation for each of the two, by External id: both spans count for the one "step" row.
    # A GPU annotation without an External id (0) belongs to no range.
    t = Trace()
    outer = t.annotation("step", 0, 100)
    inner = t.annotation("step", 10, 80)
    t.annotation("other", 200, 10)
    t.gpu_annotation("step", 20, 30, ext=outer)
    t.gpu_annotation("step", 60, 7, ext=inner)
    t.gpu_annotation("step", 90, 5, ext=0)  # no External id: attributed to nothing
    # a range without an External id, merged into its same-name parent: the GPU annotation of no id
    # must not be matched to it
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "other", "pid": 1000, "tid": 1000,
                     "ts": 201, "dur": 8, "args": {}})
    r = t.load(tmp_path).ranges().set_index("path")
    assert r.index.tolist() == ["step", "other"]
    assert r.loc["step", "count"] == 1 and r.loc["other", "count"] == 1
    assert r.loc["step", "gpu_span_us"] == 37.0
    assert r.loc["other", "gpu_span_us"] == 0.0


# ------------------------------------------------------------------------------ cProfile


def _fact(n):
    return 1 if n <= 1 else n * _fact(n - 1)


def _twice():
    return _fact(4) + _fact(3)


def _profiled(*work):
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    for w in work:
        w()
    prof.disable()
    return prof


def test_raw_stats_are_cprofiles_own_numbers_recursion_included():
    """pstats' snapshot of the same profile is the answer: each function's primitive and total
    calls (a recursive one's differ), times, and every caller edge's four numbers."""
    from nbprof.collect.cprofile import raw_stats

    prof = _profiled(_twice, lambda: _fact(6))
    ours = raw_stats(prof)
    prof.create_stats()
    theirs = prof.stats
    assert ours == theirs
    fact = next(k for k in ours if k[2] == "_fact")
    cc, nc = ours[fact][:2]
    assert (cc, nc) == (3, 13)  # three outer calls, 4 + 3 + 6 in all
    # the recursive edge: 3 + 2 + 5 calls; primitive where the edge was not already on the stack
    # (the first step down of each of the three outer calls)
    assert ours[fact][4][fact][:2] == (10, 3)


def test_merged_raw_stats_are_pstats_add():
    import pstats

    from nbprof.collect.cprofile import merge_raw, raw_stats

    first, second = _profiled(_twice), _profiled(_twice, lambda: _fact(2))
    ours = merge_raw([raw_stats(first), raw_stats(second)])
    theirs = pstats.Stats(first)
    theirs.add(pstats.Stats(second))
    assert ours == theirs.stats
