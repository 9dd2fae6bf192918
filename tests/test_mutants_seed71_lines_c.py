"""What seed 71's sample of mutants of ``analysis/lines.py`` (docs/testing.md) showed no test held:
``line_join`` on line data with no stacks at all (and so no events any stack could hold) answers
the outside row alone and an empty row map, rather than failing."""

from __future__ import annotations

import numpy as np
import pandas as pd

import nbprof
from nbprof.analysis.lines import OUTSIDE, line_join

from .conftest import DATA

# --------------------------------------------------------------------------- lines.line_join


def test_line_join_of_no_events_and_no_stacks_is_the_outside_row_alone_and_an_empty_row_map():
    """No events (a real trace's events frame, cut to none of its rows) and line data with no
    frames, no stacks, no ops, no allocations: by hand, nothing ran, so the table is the one
    outside row with every count and time 0 and no file or line, and the map of events rows to
    table rows is an int64 array of length 0 (one entry per event)."""
    events = nbprof.load_trace(DATA / "transformer_infer_stack.trace.json.gz").events.iloc[:0]
    data = {"frames": {"file": [], "line": [], "function": [], "function_line": []}, "cells": {}, "stacks": [],
            "ops": {"external_id": [], "stack": []}, "allocs": {"stack": [], "bytes": []}}
    table, rows = line_join(events, data)
    assert isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.shape == (0,)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["function"] == OUTSIDE and row["file"] is None and row["cell"] is None
    assert pd.isna(row["line"]) and pd.isna(row["function_line"])
    for c in ("ops", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "alloc_bytes",
              "alive_at_end_bytes"):
        assert row[c] == 0, c
