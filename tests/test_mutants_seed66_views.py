"""What seed 66's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: the recorded trace's own events, a line table built by hand with its times
chosen, a curve of one byte."""

from __future__ import annotations

import json

import pytest

import nbprof

from .conftest import trace_path
from .synthetic import Trace
from .test_cluster import LINE_CELL
from .test_mutants_snapshot import dt_tables

# ------------------------------------------------------- views.live_timeline.LiveTimelineState


def _merged_live_state():
    """The live timeline of the recorded CNN training step, merged to 200 rectangles (most of them
    merged: their ``event`` is -1 and ``names`` lists what they hold)."""
    from nbprof.views import live_timeline
    from nbprof.views.timeline import prepare_timeline

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    full = prepare_timeline(p, max_rects=200)
    assert (full.rects["event"] < 0).sum() > 50  # merged: the case under test
    return p, full, live_timeline.LiveTimelineState(p, full, python=False, max_rects=200, height=None)


def test_live_find_on_a_merged_timeline_counts_the_merged_rects_that_hold_a_match():
    """Find on a merged live timeline raised ValueError ("assignment destination is read-only":
    pandas' copy-on-write gives np.asarray a read-only view, which ``_matching`` wrote into for
    each merged rectangle). Now: the status line counts the rectangles whose name, or one of whose
    merged names, holds "relu" (counted here in a plain loop over the rectangles), which include
    merged ones drawn under another name; the events it counts are the raw trace file's relu
    events."""
    from .test_timeline import raw_x

    p, full, state = _merged_live_state()
    status = state.find("ReLU")
    r = full.rects
    holds = [("relu" in str(n).lower()) or (e < 0 and any("relu" in str(x).lower() for x, _ in (names or [])))
             for n, e, names in zip(r["name"], r["event"], r["names"])]
    assert status.endswith(f"· {sum(holds)} rects on screen"), status
    assert any(h and "relu" not in str(n).lower() for h, n in zip(holds, r["name"]))  # merged under another name
    hit = state._matching(full)
    assert hit.tolist() == holds
    relu = [n for n, _, _, _ in raw_x("cnn_train_cuda", p) if "relu" in n.lower()]
    assert status.startswith(f"{len(relu)} events match")  # the raw trace file's relu events
    state.spec()  # the faded figure builds


# ------------------------------------------------------------------- views.timeline._layout


def test_the_live_timeline_s_subtitle_says_zooming_redraws():
    """A merged live timeline's subtitle tells the user to zoom in (the kernel redraws the window
    in full detail), not to call ``timeline(window_us=...)`` as the static figure's does."""
    from nbprof.views.timeline import figure_spec

    _, full, state = _merged_live_state()
    sub = state.spec()["layout"]["title"]["subtitle"]["text"]
    assert "zoom in: the kernel draws the window in full detail" in sub
    assert "window_us=" not in sub
    static = figure_spec(full, False, None)["layout"]["title"]["subtitle"]["text"]
    assert "window_us=(start_us, end_us) draws a part in full detail" in static and "zoom in" not in static


# ------------------------------------------------------------------ views.memory.memory_curve_figure


def test_a_one_byte_memory_curve_s_ticks_stop_at_its_one_byte(tmp_path):
    """A CPU op that allocates 1 byte (and another that frees it): the figure's y axis has whole-
    byte ticks 0 B and 1 B, the curve's top, and none above what the curve reaches."""
    t = Trace()
    t.op("aten::empty", 0, 10)
    t.memory(5, 1, 1, 1, device=-1)
    t.op("aten::free_it", 20, 10)
    t.memory(25, -1, 0, 1, device=-1)
    fig = t.load(tmp_path).memory_curve()
    assert list(fig.layout.yaxis.tickvals) == [0.0, 1.0]
    assert list(fig.layout.yaxis.ticktext) == ["0 B", "1 B"]


# --------------------------------------------------------------------- views.tabs.source._table


def test_the_source_table_keeps_lines_of_equal_time_in_their_line_order(tmp_path):
    """Forty lines of one cell, each with one 5 µs ``aten::mm`` but every fourth (lines 1, 5, 9,
    ...) with 9 µs: the Source tab's table, hottest first, lists the ten 9 µs lines then the thirty
    5 µs lines, each group in line order (a tie keeps the line table's order), then the time
    outside the user's code."""
    n = 40
    dur = [9.0 if i % 4 == 0 else 5.0 for i in range(n)]
    t = Trace()
    for i in range(n):
        t.op("aten::mm", 20.0 * (i + 1), dur[i])
    doc = t.doc()
    doc["nbprofLines"] = {
        "line_data": {"version": 1, "method": "tracer", "cells": {LINE_CELL: "In [1]"},
                      "frames": {"file": [LINE_CELL] * n, "line": list(range(1, n + 1)), "function": ["<module>"] * n,
                                 "function_line": [1] * n},
                      "stacks": [[]] + [[i] for i in range(n)],
                      "ops": {"external_id": list(range(1, n + 1)), "stack": list(range(1, n + 1))},
                      "allocs": {"stack": [], "bytes": []}, "notes": []},
        "sources": {LINE_CELL: "".join(f"x{i} = torch.mm(a, a)\n" for i in range(1, n + 1))}}
    (tmp_path / "lines.json").write_text(json.dumps(doc))
    p = nbprof.load_trace(str(tmp_path / "lines.json"))
    html = p.report(limit=0).html(include_library=False)
    [table] = [d for d in dt_tables(html) if d["caption"].startswith("every line that ran")]
    hot = [i + 1 for i in range(0, n, 4)]
    warm = [i + 1 for i in range(n) if i % 4]
    assert [row[0] for row in table["rows"]] == [f"In [1] line {k}" for k in hot + warm] + ["outside your code"]
    own = table["headers"].index("Self CPU")
    assert [row[own] for row in table["rows"]][:n] == pytest.approx([9.0] * 10 + [5.0] * 30)
