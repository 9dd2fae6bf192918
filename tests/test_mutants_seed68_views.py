"""What seed 68's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: the overview of exactly 30 steps drawing every one with no "more steps" line
(counted by hand), the standalone page's flame script calling ``nbprofFigure`` with the div's id
and the figure only (read back by a JSON parser), a folder's summed row that no rank's table holds
being on 0 ranks (a per-rank table cut by hand), and the empty timeline's note being a figure
plotly's own validation accepts, in the middle of the plotting area."""

from __future__ import annotations

import json
import re

import nbprof
from nbprof.meta import PythonMeta
from nbprof.model import PythonProfile

from .conftest import DATA
from .htmltext import text
from .synthetic import Trace

# ---------------------------------------------------------------- views.overview.overview_html


def test_an_overview_of_exactly_thirty_steps_draws_them_all_and_no_more_line(tmp_path):
    """30 steps (ProfilerStep#0..29, 1 ms each with an op inside), as many as the overview draws:
    30 bars, step 0 to step 29, and no line sending the reader to p.overview() for more steps
    (there are none: not "0 more steps")."""
    from nbprof.views.overview import overview_html

    t = Trace()
    for k in range(30):
        t.annotation(f"ProfilerStep#{k}", 1000 * k, 999)
        t.op("aten::mm", 1000 * k + 10, 500)
    p = nbprof.load_trace(t.write(tmp_path / "steps.json"))
    assert len(p.steps()) == 30
    html = overview_html(p)
    labels = re.findall(r'<span style="width:5em;flex:none">(.*?)</span>', html)
    assert labels == [f"step {k}" for k in range(30)]
    assert "more step" not in text(html) and "p.overview()" not in text(html)


# ---------------------------------------------------------------- views.page._figure_div


def test_the_flame_script_of_a_page_passes_the_id_and_the_figure_only():
    """A cProfile run's page draws its flame with ``window.nbprofFigure(id, figure);`` and nothing
    after the figure (no function to call once drawn: only the timeline has one). Read back by
    ``json``: the call's arguments are exactly two JSON values, "nbprof-flame" and a figure with
    data and a layout, and the script ends right after them."""
    from nbprof.views.page import standalone_html

    raw = {("m.py", 1, "f"): (1, 1, 0.2, 0.5, {}),
           ("m.py", 9, "g"): (2, 2, 0.3, 0.3, {("m.py", 1, "f"): (2, 2, 0.3, 0.3)})}
    page = standalone_html(PythonProfile(raw, PythonMeta()))
    calls = re.findall(r"window\.nbprofFigure\((.*?)\);</script>", page, flags=re.S)
    assert len(calls) == 1
    div_id, figure = json.loads(f"[{calls[0]}]")
    assert div_id == "nbprof-flame"
    assert set(figure) >= {"data", "layout"} and figure["data"]


# ---------------------------------------------------------------- views.tabs.spread._spread


def test_a_summed_row_no_ranks_table_holds_is_on_no_rank():
    """The Ranges of the two-rank DDP folder with its per-rank table cut by hand: "gloo:all_reduce"
    taken out of both ranks' rows, "ProfilerStep* › load_batch" out of rank 1's. The summed table's
    rows are then on 0, 1 and 2 ranks (every other row on both), and the table has its "On ranks"
    column."""
    from nbprof.views.table import Column
    from nbprof.views.tabs.spread import with_rank_spread

    p = nbprof.load_trace(DATA / "cluster_views" / "ranks", workers=0, progress=False)
    assert sorted(p.rank_labels) == [0, 1]
    frame = p.ranges()
    per = p.ranges(per_rank=True)
    load_batch = "ProfilerStep* › load_batch"
    per = per[(per["path"] != "gloo:all_reduce") & ~((per["path"] == load_batch) & (per["rank"] == 1))]
    cols = [Column("path", "Range", "text"), Column("total_us", "Total", "time_us")]
    out, cols, caption = with_rank_spread(p, frame, cols, per, ["path"], "total_us", "Total")
    ranks = dict(zip(out["path"], out["ranks"]))
    assert ranks["gloo:all_reduce"] == 0 and ranks[load_batch] == 1
    assert {r for path, r in ranks.items() if path not in ("gloo:all_reduce", load_batch)} == {2}
    assert len(ranks) == len(frame) == 9
    assert "On ranks" in [c.header for c in cols] and caption.startswith("summed over 2 ranks")


# ---------------------------------------------------------------- views.timeline.figure_spec


def test_an_empty_timelines_note_is_a_figure_plotly_validates(tmp_path):
    """The timeline of a window with no event in it (one op at 0..100 µs, the window 500..600 µs)
    says "no events" in the middle of the plotting area: plotly's own validation
    (``go.Figure``) accepts the figure, and reads the note at x = y = 0.5 of the paper."""
    import plotly.graph_objects as go

    from nbprof.views.timeline import timeline_figure

    t = Trace()
    t.op("aten::mm", 0, 100)
    fig = timeline_figure(nbprof.load_trace(t.write(tmp_path / "one.json")), window_us=(500, 600))
    checked = go.Figure(fig.to_dict())
    [note] = checked.layout.annotations
    assert (note.text, note.x, note.y, note.xref, note.yref) == ("no events", 0.5, 0.5, "paper", "paper")
