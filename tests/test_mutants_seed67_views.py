"""What seed 67's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: the plotly mimetype without the traces' uids (what plotly's own ``to_json``
writes), the standalone page of a cProfile run drawing its flame in the div named for it at the
figure's height (counted by hand), the Data loading tab's table of the workers' functions in
pstats' order (``pstats.Stats.sort_stats("tottime")`` of the same stats), and the Source tab's
line about the functions it leaves out (counted by hand)."""

from __future__ import annotations

import marshal
import pstats
import re

from nbprof.meta import PythonMeta
from nbprof.model import PythonProfile

from .conftest import run
from .test_data_loading_findings import loop_record, profile_of
from .test_mutants_views3 import dt_tables

# ---------------------------------------------------------------- views.figure.figure_json


def test_the_plotly_mimetype_drops_the_uids_a_user_gave_the_traces():
    """A figure of nbprof's restyled by its user with a trace uid (``update_traces(uid=...)``): the
    plotly mimetype holds the figure without it, as plotly's own ``to_json`` writes a figure
    (plotly's default drops the uids: the same figure gives the same output, whatever the ids)."""
    import plotly.io as pio

    from nbprof.views.figure import PLOTLY_MIME, rendering_figure

    fig = rendering_figure({"data": [{"type": "bar", "x": ["a", "b"], "y": [1, 2], "name": "bars"}], "layout": {}})
    fig.update_traces(uid="mine")
    assert fig.data[0].uid == "mine"
    [trace] = fig._repr_mimebundle_()[PLOTLY_MIME]["data"]
    assert "uid" not in trace and trace["name"] == "bars" and trace["x"] == ["a", "b"]
    assert '"uid"' not in pio.to_json(fig, validate=False)  # plotly's own answer, for the same figure


# ---------------------------------------------------------------- views.page._standalone_html


def test_the_standalone_page_of_a_cprofile_run_draws_its_flame_in_its_own_div_at_its_height():
    """A cProfile run's page (``to_html``): the Flame tab's figure is drawn into the div
    ``nbprof-flame`` (the id the page's browser test reads), which keeps the figure's height until
    it is drawn: 260 px, not the 500 px of a figure without a height. The flame of the root, g and
    f under it has 3 rows: max(260, 70 + 56 * 3) = 260 px (flame_figure's rule, counted by hand)."""
    from nbprof.views.page import standalone_html

    raw = {("m.py", 1, "f"): (1, 1, 0.2, 0.5, {}),
           ("m.py", 9, "g"): (2, 2, 0.3, 0.3, {("m.py", 1, "f"): (2, 2, 0.3, 0.3)})}
    page = standalone_html(PythonProfile(raw, PythonMeta()))
    assert '<div id="nbprof-flame" style="width:100%;min-height:260px"></div>' in page
    assert 'window.nbprofFigure("nbprof-flame", {' in page
    assert re.findall(r'<div id="([^"]*)" style="width:100%;min-height', page) == ["nbprof-flame"]


# ---------------------------------------------------------------- views.tabs.data_loading.render


def test_the_workers_functions_are_listed_in_pstats_order_ties_as_recorded(tmp_path):
    """The Data loading tab's table of the workers' functions (one worker, its stats written by
    hand: 30 functions, own times 0, 1 or 2 ms, many equal) lists them as pstats sorts them by own
    time, ``pstats.Stats.sort_stats("tottime")`` of the same stats (a stable sort: equal times in
    the order the profile recorded them), and its static preview shows the first 20 of them."""
    from nbprof.views.report import PythonReport
    from nbprof.views.tabs.data_loading import render

    raw = {("w.py", i + 1, f"f{i:02d}"): (1, 1, (i % 3) * 0.001, (i % 3) * 0.001, {}) for i in range(30)}
    rec = loop_record([300.0, 100.0], workers=1)
    rec.workers[0].stats = raw
    (tmp_path / "w.prof").write_bytes(marshal.dumps(raw))
    st = pstats.Stats(str(tmp_path / "w.prof"))
    st.sort_stats("tottime")
    want = [fn for _, _, fn in st.fcn_list]
    assert len(set(want[:10])) == 10 and {int(f[1:]) % 3 for f in want[:10]} == {2}

    markup = render(PythonReport(profile_of(rec)))
    table = dt_tables(markup)[-1]
    assert table["headers"][-1] == "filename:lineno(function)"
    got = [re.search(r"\((\w+)\)$", row[-1]).group(1) for row in table["rows"]]
    assert got == want
    before = markup[:markup.rindex("let dt_args = ")]  # the static preview comes before the table's data
    preview = before[before.rindex("<tbody"):before.rindex("</tbody>")]
    assert re.findall(r'title="w\.py:\d+\((f\d\d)\)"', preview) == want[:20]


# ---------------------------------------------------------------- views.tabs.source.render


def test_the_source_tab_says_how_many_functions_it_does_not_show(shell):
    """A cell that runs 14 functions of its own (``%%cprofile --lines``): the Source tab shows the
    cell and 11 of them with their code (12 blocks) and says, in one line, that 3 more functions
    ran and that p.lines() has every line."""
    from nbprof.views.tabs.source import render

    defs = "\n".join(f"def f{i}():\n    return sum(range({i + 1} * 2000))\n" for i in range(14))
    calls = "\n".join(f"f{i}()" for i in range(14))
    result, _ = run(shell, f"%%cprofile -q --lines -o cps67\n{defs}\n{calls}")
    assert result.error_in_exec is None
    markup = render(shell.user_ns["cps67"].report())
    line = '<div class="nbprof-empty">3 more functions ran: p.lines() has every line</div>'
    assert line + '<div style="margin-top:12px">' in markup
