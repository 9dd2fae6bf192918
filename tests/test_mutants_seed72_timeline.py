"""Surviving mutants of seed 72 in ``nbprof.analysis.timeline``: the lanes table that
``timeline_rects`` lays out (``_lane_rows``) keeps its columns in the order every lanes table of
nbprof has, the lane number first (the key the rows and rectangles refer to)."""

from __future__ import annotations

import nbprof
from nbprof.analysis.timeline import timeline_rects

from .conftest import trace_path

# The order the DataLoaders' own timeline writes out for its empty lanes table
# (views/tabs/data_loading.loading_timeline) and that add_loading_lanes appends its lanes in.
LANE_COLUMNS = ["lane", "rank", "pid", "thread", "device", "stream", "label", "kind", "levels", "first_row",
                "events"]

# ---------------------------------------------------------------- analysis.timeline._lane_rows


def test_a_recorded_traces_lanes_table_has_the_lane_number_first_and_the_lanes_column_order():
    """The two-streams trace (a CPU thread, two CUDA streams): its timeline's lanes table has the
    columns of a lanes table in their order, ``lane`` first, numbered 0, 1, 2, ... down the rows."""
    p = nbprof.load_trace(trace_path("two_streams"))
    data = timeline_rects(p.events, p.meta, merge=False)
    assert list(data.lanes.columns) == LANE_COLUMNS
    assert data.lanes.iloc[:, 0].tolist() == list(range(len(data.lanes)))
    assert {"cpu", "device"} <= set(data.lanes["kind"])


def test_a_timeline_with_nothing_drawn_still_has_the_lanes_columns_in_order():
    """A window after the profile's end draws no event: no lane, and the (empty) lanes table still
    has the lanes columns in their order."""
    p = nbprof.load_trace(trace_path("two_streams"))
    end = float((p.events["start_us"] + p.events["dur_us"]).max())
    data = timeline_rects(p.events, p.meta, window=(end + 1_000.0, end + 2_000.0))
    assert data.events_drawn == 0 and len(data.lanes) == 0
    assert list(data.lanes.columns) == LANE_COLUMNS
