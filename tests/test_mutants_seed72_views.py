"""Surviving mutants of seed 72 in ``nbprof.views``: the one line of text a figure says about
itself (``views.figure.describe``, through ``figure_bundle`` and ``rendering_figure``)."""

from __future__ import annotations

from nbprof.views.figure import PLOTLY_MIME, figure_bundle, rendering_figure

# ---------------------------------------------------------------- views.figure.describe


def test_a_figures_text_is_its_layout_description_before_its_title():
    """A plotly figure whose layout has ``meta.description`` and a title: its ``text/plain`` (and
    the note of its ``text/html``, with no static drawing given) is the description, as
    ``describe``'s documentation says, not the title."""
    import plotly.graph_objects as go

    fig = go.Figure(layout=dict(title="Loss per epoch", meta={"description": "Loss: 3 epochs, 0.12 at the end"}))
    bundle = figure_bundle(fig)
    assert bundle["text/plain"] == "Loss: 3 epochs, 0.12 at the end"
    assert bundle["text/html"].startswith('<div class="nbprof-figure"')
    assert "Loss: 3 epochs, 0.12 at the end (an interactive plotly figure" in bundle["text/html"]
    assert bundle[PLOTLY_MIME]["layout"]["meta"]["description"] == "Loss: 3 epochs, 0.12 at the end"


def test_a_rendering_figure_without_text_says_its_description_and_falls_back_to_its_title():
    """``rendering_figure`` with no ``text``: the line is the layout's description when it has one,
    else its title, else "plotly figure"."""
    described = rendering_figure({"data": [], "layout": {"title": {"text": "Throughput"},
                                                           "meta": {"description": "Throughput: 2 runs"}}})
    assert described._repr_mimebundle_(include={"text/plain"}) == {"text/plain": "Throughput: 2 runs"}
    titled = rendering_figure({"data": [], "layout": {"title": {"text": "Throughput"}, "meta": {"description": ""}}})
    assert titled._repr_mimebundle_(include={"text/plain"}) == {"text/plain": "Throughput"}
    bare = rendering_figure({"data": [], "layout": {}})
    assert bare._repr_mimebundle_(include={"text/plain"}) == {"text/plain": "plotly figure"}
