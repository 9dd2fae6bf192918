"""A folder of ranks' Ranges table (``analysis.ranges.merge_ranges``) when a range took no time: a
``record_function`` that opened and closed within the clock's tick is 0 µs in every rank, so its
share of its outermost range is 0 of 0. That is no share (NaN, as a device busy 0 of a 0 µs span),
and no numpy RuntimeWarning reaches the user's notebook. Expected values are worked out by hand
from the hand-made traces written here."""

from __future__ import annotations

import math
import warnings

import nbprof

from .synthetic import Trace


def _rank(rank: int) -> Trace:
    """``work`` 0-100 µs with ``fwd`` 10-50 µs inside it; ``instant`` at 200 µs taking 0 µs; an operator."""
    t = Trace(rank=rank)
    t.annotation("work", 0, 100.0)
    t.annotation("fwd", 10, 40.0)
    t.annotation("instant", 200, 0)
    t.op("aten::add", 300, 10)
    return t


def test_a_folders_range_of_zero_time_has_no_share_of_its_root_and_no_warning(tmp_path):
    for r in (0, 1):
        _rank(r).write(tmp_path / f"host_{r}.pt.trace.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy 0/0 warning reaching the notebook is a failure
        p = nbprof.load_trace(tmp_path, workers=0, progress=False)
        table = p.ranges()
    rows = {row["path"]: row for _, row in table.iterrows()}
    assert list(rows) == ["work", "work › fwd", "instant"]
    assert [rows[k]["count"] for k in rows] == [2, 2, 2]
    assert [rows[k]["total_us"] for k in rows] == [200.0, 80.0, 0.0]
    assert rows["work"]["share_of_root"] == 1.0
    assert math.isclose(rows["work › fwd"]["share_of_root"], 80.0 / 200.0)
    assert math.isclose(rows["work › fwd"]["share_of_parent"], 80.0 / 200.0)
    assert math.isnan(rows["instant"]["share_of_root"])  # 0 µs of a 0 µs root: no share
    assert math.isnan(rows["instant"]["share_of_parent"])  # at the top
