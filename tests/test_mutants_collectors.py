"""Contracts of the collectors and readers that seed 52's mutation sample (issue 38) found unpinned:
a saved line table's checks edge by edge, a zoom of a timeline with DataLoader lanes, a DataLoader
worker's recording as the main process finds it, a live trace's file name as the stale-file
cleanup reads it, a torch profiler whose session another one ended. Every expected value is
written out by hand (or read from what the test itself made), never taken from the code under test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from .conftest import needs_torch, run
from .synthetic import Trace
from .test_platforms import leftovers, windows_files  # noqa: F401  # the fixture, used by name

# ------------------------------------------------------------------------------ saved line tables

CELL = "<ipython-input-1-abc>"


def lines_doc(**change) -> tuple[dict, int, int]:
    """A trace saved with a line table (``nbprofLines``, as ``save()`` writes it): aten::mm (5 µs)
    on line 2 of "In [1]" (stack 1), aten::add (2 µs) from no line of the user's (stack 0, the
    empty stack), a 64-byte allocation from no line either. ``change``: line_data's keys replaced."""
    t = Trace()
    mm = t.op("aten::mm", 10.0, 5.0)
    add = t.op("aten::add", 30.0, 2.0)
    data = {"version": 1, "method": "tracer", "cells": {CELL: "In [1]"},
            "frames": {"file": [CELL], "line": [2], "function": ["<module>"], "function_line": [1]},
            "stacks": [[], [0]], "ops": {"external_id": [mm, add], "stack": [1, 0]},
            "allocs": {"stack": [0], "bytes": [64]}, "notes": []}
    data.update(change)
    doc = t.doc()
    doc["nbprofLines"] = {"line_data": data, "sources": {CELL: "x = 1\ny = x @ x\n"}}
    return doc, mm, add


def load_doc(tmp_path, doc):
    import nbprof

    path = tmp_path / "lines.json"
    path.write_text(json.dumps(doc))
    return nbprof.load_trace(path, progress=False)


def test_ops_and_allocations_on_the_empty_stack_keep_the_line_table(tmp_path):
    """Stack 0 is the empty stack (an op or allocation no line of the user's made): a valid index,
    whose time goes to the "outside your code" row; the last stack is valid too."""
    doc, _, _ = lines_doc()
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is not None and not [n for n in p.meta.notes if "nbprofLines" in n]
    lines = p.lines()
    assert lines["line"].tolist()[:1] == [2] and lines["source"].iloc[0] == "y = x @ x"
    assert lines["ops"].tolist() == [1, 1]  # mm on its line, add outside
    assert lines["self_cpu_us"].tolist() == [5.0, 2.0]
    assert lines["alloc_bytes"].tolist() == [0, 64]


@pytest.mark.parametrize("change, said", [
    ({"frames": {"file": [CELL], "line": [2, 3], "function": ["<module>"], "function_line": [1]}},
     "frames of unequal lengths"),
    ({"frames": {"file": [CELL], "line": [0], "function": ["<module>"], "function_line": [1]}},
     "a frame's file or line is not one"),  # lines count from 1
    ({"frames": {"file": [7], "line": [2], "function": ["<module>"], "function_line": [1]}},
     "a frame's file or line is not one"),
    ({"stacks": [[0]]}, "a stack names a frame that is not there"),  # stack 0 must be the empty one
    ({"stacks": []}, "a stack names a frame that is not there"),
    ({"stacks": [[], [1]]}, "a stack names a frame that is not there"),  # one frame: index 0 only
    ({"stacks": [[], [-1]]}, "a stack names a frame that is not there"),
    ({"ops": {"external_id": [1, 2], "stack": [1]}}, "ops of unequal lengths or not integers"),
    ({"ops": {"external_id": [1, 2], "stack": [1, 2]}}, "ops name a stack that is not there"),  # 2 stacks
    ({"ops": {"external_id": [1, 2], "stack": [1, -1]}}, "ops name a stack that is not there"),
    ({"allocs": {"stack": [2], "bytes": [64]}}, "allocs name a stack that is not there"),
    ({"allocs": {"stack": [-1], "bytes": [64]}}, "allocs name a stack that is not there"),
    ({"allocs": {"stack": [0], "bytes": [64.5]}}, "allocs of unequal lengths or not integers"),
    ({"cells": {CELL: 3}}, "cells are not a table of text"),
    ({"frames": "x"}, "not the shape nbprof writes"),
])
def test_a_line_table_that_points_nowhere_is_left_out_and_said(tmp_path, change, said):
    doc, _, _ = lines_doc(**change)
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is None
    assert f"nbprofLines: {said}: the line table is left out" in p.meta.notes, p.meta.notes


def test_sources_that_are_not_text_leave_the_line_table_out(tmp_path):
    doc, _, _ = lines_doc()
    doc["nbprofLines"]["sources"] = {CELL: 12}
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is None and "nbprofLines: sources are not text: the line table is left out" in p.meta.notes


# ------------------------------------------------------------------------------ DataLoader lanes

BASE_NS = 1_790_000_000_000_000_000  # the trace's baseTimeNanoseconds (time.time_ns() of ts 0)


def loading_profile(tmp_path):
    """A torch trace (aten::mm at 10 µs, aten::add at 30 µs) saved with a DataLoader record
    (``nbprofDataLoading``, as ``save()`` writes it): "train_loader" without workers, its pass
    started at 900 µs, batches 0 and 1 made in the main process at 1000 and 1200 µs (100 µs each),
    all on the trace's clock (baseTimeNanoseconds + µs)."""
    import nbprof

    t = Trace()
    t.op("aten::mm", 10.0, 5.0)
    t.op("aten::add", 30.0, 2.0)
    doc = t.doc()
    doc["baseTimeNanoseconds"] = BASE_NS

    def ns(us):
        return BASE_NS + us * 1000

    loader = {"number": 1, "name": "train_loader", "dataset": "TensorDataset", "iterable": False, "num_workers": 0,
              "batch_size": 4, "prefetch_factor": None, "persistent_workers": False, "pin_memory": False,
              "start_method": ""}
    doc["nbprofDataLoading"] = {
        "version": 1, "began_ns": ns(0), "ended_ns": ns(5000), "pid": 1, "call_cost_ns": 0.0, "loaders": [loader],
        "passes": [[1, 0, 1, "single", ns(900), ns(910)]],
        "waits": [[1, 0, 0, -1, ns(1000), ns(1100), "ok"], [1, 0, 1, -1, ns(1200), ns(1300), "ok"]],
        "unwatched": [], "workers": []}
    path = tmp_path / "loading.json"
    path.write_text(json.dumps(doc))
    return nbprof.load_trace(path, progress=False)


def test_a_zoom_without_the_loaders_batches_keeps_their_lane_and_its_row(tmp_path):
    """A window over the ops only (0-50 µs, the batches are at 1000-1300 µs): the DataLoader's lane
    is still there, with its row (one level), so the figure still names it; its rectangles are the
    window's (none). The whole timeline has the two batches on that lane."""
    from nbprof.analysis.timeline import timeline_rects

    p = loading_profile(tmp_path)
    assert p.data_loading()["wait_start_us"].tolist() == [1000.0 - 10.0, 1200.0 - 10.0]  # the first event is 0
    zoom = timeline_rects(p.events, p.meta, window=(0.0, 50.0))
    assert zoom.lanes["label"].tolist() == ["CPU thread 1000 (main)", "train_loader: main process"]
    data_lane = int(zoom.lanes["lane"].iloc[1])
    assert sorted(zip(zoom.rows["lane"], zoom.rows["level"])) == [(0, 0), (data_lane, 0)]
    assert int(zoom.lanes["first_row"].iloc[1]) in set(zoom.rows["row"])
    assert sorted(zoom.rects["name"]) == ["aten::add", "aten::mm"]
    fig = p.timeline(window_us=(0.0, 50.0))
    assert list(fig.layout.yaxis.ticktext) == ["CPU thread 1000 (main)", "train_loader: main process"]

    whole = timeline_rects(p.events, p.meta)
    assert whole.lanes["label"].tolist() == zoom.lanes["label"].tolist()
    assert sorted(zip(whole.rows["lane"], whole.rows["level"])) == [(0, 0), (data_lane, 0)]
    waits = whole.rects[whole.rects["lane"] == data_lane]
    assert sorted(waits["name"]) == ["making batch 0", "making batch 1"]
    assert sorted(zip(waits["x0_us"], waits["x1_us"])) == [(990.0, 1090.0), (1190.0, 1290.0)]
