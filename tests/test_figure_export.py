"""nbprof's figures are plotly figures users save and restyle (issue 24's side bug): plotly's own
``write_html``, ``plotly.io.to_html`` and ``to_json`` work on each of them, before and after a
user's ``update_layout(template=...)``, and each passes plotly's validation. On main,
``p.memory_curve().write_html(...)`` raised ``AttributeError: 'str' object has no attribute
'get'`` (the template set as a bare name on a figure built without validation)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest

import nbprof

from .conftest import run, trace_path


@pytest.fixture
def profile():
    return nbprof.load_trace(trace_path("cnn_train_cuda"))


@pytest.fixture
def flame(ip):
    result, _ = run(ip, "%%cprofile -q -o export_cp\nsorted(str(i) for i in range(20000))\n")
    assert result.error_in_exec is None
    return ip.user_ns["export_cp"].flame()


FIGURES = ["memory_curve", "timeline", "flame"]


def figure(name, profile, flame):
    return flame if name == "flame" else getattr(profile, name)()


@pytest.mark.parametrize("name", FIGURES)
@pytest.mark.parametrize("restyled", [False, True])
def test_plotly_saves_every_figure(name, restyled, profile, flame, tmp_path):
    fig = figure(name, profile, flame)
    if restyled:  # as a user restyles a figure: the name resolved to the template it names
        fig.update_layout(template="plotly_dark")
    path = tmp_path / f"{name}.html"
    fig.write_html(path, include_plotlyjs=False)
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False)
    doc = json.loads(pio.to_json(fig))
    assert path.stat().st_size > 1000 and "Plotly.newPlot" in html
    template = doc["layout"].get("template", {})
    assert isinstance(template, dict), "a template is an object in plotly's JSON, never a bare name"
    if restyled:
        assert template["layout"]["paper_bgcolor"] == "rgb(17,17,17)"  # plotly_dark's, resolved
    assert all(trace.get("type") and len(trace) > 1 for trace in doc["data"]), "no empty traces"
    checked = go.Figure(fig.to_dict())  # plotly's validation: the figure is one it would build
    assert len(checked.data) == len(fig.data)


def test_memory_curve_is_the_same_figure_validated(profile):
    """The memory curve, built as plain dicts (no validation at every call), is what plotly's
    validation makes of it: its traces, titles and plotly_white template."""
    fig = profile.memory_curve()
    checked = go.Figure(fig.to_dict())
    assert [t.name for t in checked.data] == [t["name"] for t in fig.to_dict()["data"]]
    assert checked.layout.title.text == "Allocated memory" and checked.layout.yaxis.title.text == "bytes"
    assert checked.layout.template.layout.plot_bgcolor == pio.templates["plotly_white"].layout.plot_bgcolor
    devices = profile.events.loc[profile.events["kind"] == "memory", "device"].astype(str).nunique()
    assert len(checked.data) == 2 * devices  # allocated and reserved per device, nothing else
