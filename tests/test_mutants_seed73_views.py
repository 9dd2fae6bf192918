"""Surviving mutants of seed 73 around the views: the help a user reads for ``nbprof view -h``
(``cli.view_parser``'s description), and the interactive figure nbprof hands Colab
(``views.figure.colab_html``, through ``figure_bundle``), which must draw the figure's own traces."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from nbprof import cli
from nbprof.views.figure import figure_bundle

# ---------------------------------------------------------------- cli.view_parser


def test_a_view_help_says_it_prints_the_table_and_writes_the_html_report_in_sentences(capsys):
    """``nbprof view -h`` (in-process): its description ends with what the command does, as a
    sentence of its own ("Prints its text table and writes its HTML report."), every sentence
    starting with a capital and HTML spelled as the flags' help and docs/howto/command-line.md spell it."""
    with pytest.raises(SystemExit) as e:
        cli.main(["view", "-h"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    description = " ".join(out.split("positional arguments:")[0].split("\n", 2)[2].split())  # after usage
    assert description.endswith("Prints its text table and writes its HTML report.")
    starts = re.findall(r"\.\)?\s+([A-Za-z])", description)
    assert starts and all(c.isupper() for c in starts), starts
    assert "html report" not in description


# ---------------------------------------------------------------- views.figure.colab_html


def test_a_figure_in_colab_draws_its_own_traces_layout_and_config(monkeypatch):
    """In Colab (``google.colab`` imported), a figure's ``text/html`` is plotly.js drawing the
    figure: the ``Plotly.newPlot`` call holds the two hand-made traces, in order, with the
    figure's title and config; no trace, the call would draw an empty plot."""
    import plotly.graph_objects as go

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    fig = go.Figure([go.Bar(name="forward", x=["a", "b"], y=[3, 5]),
                     go.Bar(name="backward", x=["a", "b"], y=[7, 11])],
                    layout=dict(title={"text": "Time per step"}))
    html = figure_bundle(fig, config={"displaylogo": False})["text/html"]
    assert "cdn.plot.ly" in html  # plotly.js from plotly's CDN, not the notebook's
    call = re.search(r"Plotly\.newPlot\((.*)\)", html, re.S).group(1)  # (div id, data, layout, config)
    data = json.loads(re.search(r'^\s*"[^"]+",\s*(\[.*?\]),\s*\{', call, re.S).group(1))
    assert [t.get("name") for t in data] == ["forward", "backward"]
    assert [t.get("type") for t in data] == ["bar", "bar"]
    assert [t.get("x") for t in data] == [["a", "b"], ["a", "b"]]
    assert '"Time per step"' in call
    assert '"displaylogo": false' in call or '"displaylogo":false' in call
