"""The report where notebooks go: JupyterLab and Notebook 7 (resizing the window), a saved notebook
reopened untrusted (outputs sanitized), and the size of a notebook with many reports.

Screenshots go to tests/artifacts/ (look at them when the report changes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import HAS_TORCH

lab = pytest.importorskip("tests.lab")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not HAS_TORCH, reason="needs torch"),
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

ARTIFACTS = Path(__file__).parent / "artifacts"

CELLS = [
    "%load_ext nbprof\nimport nbprof, torch",
    # 1: a report (Operators with shapes and FLOPs: the widest table) and the timeline under it
    "%%torchprof --memory --shapes --flops -o p\n"
    "for n in (16, 64):\n"
    "    a = torch.randn(n, n)\n"
    "    b = torch.relu(a @ a)\n",
    # 2: the timeline view as a cell's value
    "p.timeline_view()",
    # 3: cProfile: the report and the flame view under it
    "%%cprofile -o cp\ndef f(n):\n    return sum(i * i for i in range(n))\n[f(2000) for _ in range(20)];",
]


def _notebook(path: Path, cells: list[str]) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)


# the height of each plotly figure drawn in each code cell's outputs (the live timeline's too)
PLOT_HEIGHTS = """() => [...document.querySelectorAll('.jp-CodeCell')].map(cell =>
    [...cell.querySelectorAll('.jp-OutputArea-output.js-plotly-plot, .nbprof-live-plot.js-plotly-plot')]
        .map(p => Math.round(p.getBoundingClientRect().height)))"""


def _resize_keeps_figures(page, name: str) -> None:
    """Every figure (the timeline under the report, the timeline view, the flame view) keeps its
    height through window resizes (and, in JupyterLab, a sidebar that opens and closes)."""
    deadline = time.time() + 30
    while time.time() < deadline and sum(map(len, page.evaluate(PLOT_HEIGHTS))) < 3:
        time.sleep(0.5)
    time.sleep(1.0)
    drawn = page.evaluate(PLOT_HEIGHTS)
    assert [len(h) for h in drawn] == [0, 1, 1, 1], drawn
    assert all(h > 150 for cell in drawn for h in cell), drawn
    steps = [(900, 800), (1400, 1000), (700, 900), (1400, 1000)]
    for i, (w, h) in enumerate(steps):
        page.set_viewport_size({"width": w, "height": h})
        if name == "lab" and i % 2:
            page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
        time.sleep(1.2)
        after = page.evaluate(PLOT_HEIGHTS)
        assert after == drawn, (w, h, drawn, after)  # same heights: none collapsed, none grew
    page.screenshot(path=str(ARTIFACTS / f"frontend-{name}-after-resize.png"), full_page=True)


# the Operators table with shapes and FLOPs: its wrapper's widths and where its last header is
WIDE_TABLE = """() => { const t = document.querySelector('.jp-CodeCell .nbprof-panel:not([hidden]) .nbprof-table');
    const last = [...t.querySelectorAll('thead th')].pop();
    return {scroll: t.scrollWidth, client: t.clientWidth, last: last.innerText.trim(),
            right: last.getBoundingClientRect().right, edge: t.getBoundingClientRect().right}; }"""


def _wide_table_fits(page, name: str) -> None:
    """At 1400 px (JupyterLab with its file browser open) every column of the widest table shows:
    no scrolling to reach FLOPs and Kind."""
    table = page.evaluate(WIDE_TABLE)
    assert table["last"] == "Kind", table
    assert table["scroll"] <= table["client"] + 1 and table["right"] <= table["edge"] + 1, table
    page.locator(".jp-CodeCell").nth(1).screenshot(path=str(ARTIFACTS / f"frontend-{name}-wide-table.png"))


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_figures_keep_their_height_when_the_window_resizes(tmp_path, app):
    if app == "notebook" and not lab.notebook7_available():
        pytest.skip("Jupyter Notebook 7 (the notebook package) is not installed")
    ARTIFACTS.mkdir(exist_ok=True)
    _notebook(tmp_path / "resize.ipynb", CELLS)
    with lab.jupyterlab(tmp_path, app=app) as server, lab.browser(1400, 1000) as context:
        page = lab.open_notebook(context, server, "resize.ipynb")
        lab.run_all(page)
        try:
            # the tables' library (gzipped, views.assets) unpacked and ran: interactive tables
            page.wait_for_function("() => document.querySelectorAll('.nbprof-report table.dataTable').length >= 2",
                                   timeout=30_000)
            _wide_table_fits(page, app)
            _resize_keeps_figures(page, app)
        finally:
            lab.shutdown_kernel(page)


# the visible text and height of each report, and the text of what shows of its panels
REPORTS = """() => [...document.querySelectorAll('.nbprof-report')].map(r => ({
    height: Math.round(r.getBoundingClientRect().height),
    text: r.innerText,
    panels: [...r.querySelectorAll('.nbprof-panel')].filter(p => p.offsetParent !== null).length,
    unstyled: [...r.querySelectorAll('.nbprof-unstyled')].filter(p => p.offsetParent !== null).length}))"""


def test_a_saved_notebook_reopened_untrusted_reads(tmp_path):
    """A notebook run elsewhere and opened here is not trusted: JupyterLab sanitizes its HTML
    outputs (no <style>, no <script>, no SVG). Each report still reads: its first tab only, with a
    line that says why, no block of hover text where the drawings were, and a bounded height."""
    from .conftest import DATA

    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(DATA / "cnn_train_cuda.trace.json.gz", tmp_path)
    cells = [*CELLS, "nbprof.load_trace('cnn_train_cuda.trace.json.gz').report(group_by='op')",
             "%%torchprof --memory -o m\nx = [torch.ones(256, 256) for _ in range(8)]"]
    _notebook(tmp_path / "run.ipynb", cells)
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "run.ipynb",
                    "--output", "saved.ipynb"], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    with lab.jupyterlab(tmp_path) as server, lab.browser(1400, 1000) as context:
        page = lab.open_notebook(context, server, "saved.ipynb")
        try:
            time.sleep(2)
            trusted = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets"
                                    ".filter(c => c.model.type === 'code').map(c => c.model.trusted)")
            assert trusted and not any(trusted), trusted
            lab.full_screenshot(page, str(ARTIFACTS / "frontend-untrusted.png"))
            reports = page.evaluate(REPORTS)
        finally:
            lab.shutdown_kernel(page)
    assert len(reports) == 4, [r["text"][:80] for r in reports]
    for r in reports:
        assert r["panels"] == 1 and r["unstyled"] >= 1, r
        assert "the notebook" in r["text"] and "untrusted" in r["text"]
        # the drawings went with their text: no hover lines (" · at 12.345 ms", "cumtime ... ncalls")
        assert not re.search(r" · at \d+\.\d{3} ms", r["text"]) and "ncalls " not in r["text"], r["text"][:3000]
        assert len(r["text"]) < 8_000 and r["height"] < 1_600, (len(r["text"]), r["height"])
    # what the first tab shows is there: the static preview of the operators table
    assert "aten::convolution_backward" in reports[2]["text"]


def test_a_notebook_with_ten_reports_stays_small(tmp_path):
    """Ten small profiles in one notebook: the tables' library once (gzipped, ~256 KB), then
    ~50 KB a report with its timeline: 782 KB (measured; 1.35 MB before the library was gzipped).
    Of the 50 KB: the report 23 KB, the live timeline's output 4 KB (its static drawing) and its
    widget state, which nbconvert saves in the notebook's metadata, 16 KB (the widget's code, 9 KB,
    and its first drawing)."""
    import nbformat

    cells = ["%load_ext nbprof\nimport torch"]
    cells += [f"%%torchprof\na = torch.randn({8 * (i + 1)}, {8 * (i + 1)})\nb = torch.relu(a @ a)" for i in range(10)]
    _notebook(tmp_path / "ten.ipynb", cells)
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "ten.ipynb",
                    "--output", "saved.ipynb"], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    saved = tmp_path / "saved.ipynb"
    nb = nbformat.read(saved, as_version=4)
    reports = [o for c in nb.cells for o in c.outputs if "nbprof-report" in o.get("data", {}).get("text/html", "")]
    assert len(reports) == 10
    with_library = [o for o in reports if "DecompressionStream" in o["data"]["text/html"]]
    assert len(with_library) == 1  # once per session
    assert saved.stat().st_size < 850_000, saved.stat().st_size


def test_colab_html_draws_the_interactive_figure(monkeypatch, tmp_path):
    """The html emitted for Colab (its output frames run scripts, not the plotly mimetype) draws the
    interactive timeline in Chromium, plotly.js served as plotly's CDN would (the same file: its
    integrity hash must match)."""
    import types

    import plotly.offline

    import nbprof

    from .conftest import DATA

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    html = nbprof.load_trace(DATA / "two_streams.trace.json.gz").timeline()._repr_mimebundle_()["text/html"]
    path = tmp_path / "colab.html"
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{html}</body></html>",
                    encoding="utf-8")
    plotly_js = plotly.offline.get_plotlyjs()
    with lab.browser(1200, 900) as context:
        page = context.new_page()
        page.route("https://cdn.plot.ly/**", lambda r: r.fulfill(
            status=200, body=plotly_js, headers={"Content-Type": "text/javascript", "Access-Control-Allow-Origin": "*"}))
        page.goto(path.as_uri())
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=20_000)
        assert page.locator(".js-plotly-plot .heatmaplayer image, .js-plotly-plot .hm").count() >= 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "frontend-colab-timeline.png"))


def test_colab_html_holds_the_figures_traces_layout_and_config():
    """Fast: what colab_html hands plotly.js is the figure's own traces, layout and config (the
    browser test above draws it; seed 53's colab_html 8 emptied the traces)."""
    import json
    import re

    import nbprof
    from nbprof.views.figure import colab_html, figure_json

    from .conftest import DATA

    spec = figure_json(nbprof.load_trace(DATA / "two_streams.trace.json.gz").timeline())
    html = colab_html(spec)
    call = re.search(r"Plotly\.newPlot\((.*)\)", html, re.S).group(1)  # (div id, data, layout, config)
    data = json.loads(re.search(r'^\s*"[^"]+",\s*(\[.*?\]),\s*\{', call, re.S).group(1))
    assert [t.get("name") for t in data] == [t.get("name") for t in spec["data"]] and len(data) > 1
    assert f'"description":"{spec["layout"]["meta"]["description"]}"' in call  # the layout's own
