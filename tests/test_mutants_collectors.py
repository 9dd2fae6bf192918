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
