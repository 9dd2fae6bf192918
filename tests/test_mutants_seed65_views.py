"""What seed 65's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: a table cut at MAX_ROWS keeping its caller's caption next to the note of the
cut (rows counted by construction), an empty flame figure's line of text, and a live snapshot chart
drawing a zoom at the width the browser sent (a history of 400 entries, more than twice 100 pixels)."""

from __future__ import annotations

import re

import pandas as pd

import nbprof

from .snapshots import simulated, write
from .test_mutants_snapshot import dt_tables

# ---------------------------------------------------------------- views.datatable.datatable_html


def test_a_table_cut_at_max_rows_keeps_its_callers_caption():
    """5,001 rows, one more than MAX_ROWS (5,000): the caption is the caller's, then the note of
    the cut, "the first 5,000 of 5,001 rows"; the table holds 5,000 rows."""
    from nbprof.views.datatable import datatable_html
    from nbprof.views.table import Column

    frame = pd.DataFrame({"n": range(5001)})
    (table,) = dt_tables(datatable_html(frame, [Column("n", "N", "count")], caption="rows by hand"))
    assert table["caption"] == "rows by hand · the first 5,000 of 5,001 rows (the DataFrame has all)"
    assert len(table["rows"]) == 5000


# ---------------------------------------------------------------- views.flame._describe


def test_an_empty_flame_figure_says_it_is_a_flame_graph():
    """A tree with no rows (no box to draw): its text/plain is the flame figures' "<flame graph"
    line, without the count of boxes the tree does not have."""
    from nbprof.model import PythonProfile
    from nbprof.views.flame import flame_figure

    tree = PythonProfile({}).call_tree()
    whole = flame_figure(tree)._repr_mimebundle_()["text/plain"]
    assert whole.startswith("<flame graph: ")  # a tree with its root: the same wording, with its boxes
    empty = flame_figure(tree.iloc[:0])._repr_mimebundle_()["text/plain"]
    assert empty == "<flame graph>"


# ---------------------------------------------------------------- views.snapshot_chart.SnapshotChartState.answer


def test_a_live_snapshot_chart_draws_a_zoom_at_the_width_the_browser_sent(tmp_path):
    """400 history entries: the default width (672 px, two points a pixel at most) draws every
    one; a window message of width_px=100 draws at most 200 of them (each pixel's first and
    highest), and says so; a message without a width draws every one again."""
    from nbprof.views.snapshot_chart import SnapshotChartState

    state = SnapshotChartState(nbprof.load_snapshot(write(simulated(400, ooms=0), tmp_path / "s.pickle")))
    assert state.status() == "every one of the 400 entries in this window drawn"
    narrow = state.answer({"type": "window", "x0": None, "x1": None, "width_px": 100, "seq": 1})
    m = re.fullmatch(r"(\d+) of 400 entries drawn \(each pixel's first and highest\); zoom in for every one",
                     narrow["status"])
    assert m and int(m.group(1)) <= 200, narrow["status"]
    again = state.answer({"type": "window", "x0": None, "x1": None, "seq": 2})
    assert again["status"] == "every one of the 400 entries in this window drawn"
