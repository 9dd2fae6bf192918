"""A CUDA memory snapshot's report in headless Chromium, as a user opens it: the page ``nbprof
view`` writes for a long history (the chart drawn by plotly from a bounded set of points, every
tab), and the live chart (the live timeline's browser code, ``views/live_timeline.js``, with the
snapshot's kernel side answering in this process): a zoom into a few hundred entries draws every
one of them, the replay's values; a selected span lists what each line allocated in it.
Screenshots: tests/artifacts/snapshot-page.png, snapshot-live.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nbprof

from .snapshots import simulated, write

lab = pytest.importorskip("tests.lab")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")]

ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture(scope="module")
def context():
    with lab.browser() as ctx:
        yield ctx


@pytest.fixture(scope="module")
def long_snapshot(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snap")
    return write(simulated(200_000, seed=3, dropped=10_000, lines=10), folder / "long.pickle")


def test_the_page_of_a_long_history(context, long_snapshot, tmp_path):
    from nbprof.cli import main
    from nbprof.views.snapshot_chart import BUCKETS

    out = tmp_path / "long.html"
    assert main(["view", long_snapshot, "--html", str(out), "-q"]) == 0
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(out.as_uri(), wait_until="load")
    page.wait_for_function("() => document.querySelector('#nbprof-snapshot-chart .main-svg')", timeout=60_000)
    points = page.evaluate("() => document.getElementById('nbprof-snapshot-chart')._fullData.map(t => t.x ? t.x.length : 0)")
    p = nbprof.load_snapshot(long_snapshot)
    assert len(p.active_memory()) == 190_000 and 0 < max(points) <= 2 * BUCKETS + 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "snapshot-page.png"), full_page=True)
    for tab in ("At the peak", "At the end", "Segments", "OOMs"):
        page.locator(".nbprof-tabs > label", has_text=tab).first.click()
        page.wait_for_timeout(200)
        assert page.locator(".nbprof-panel:visible table.dataTable").count() >= 1, tab
    assert errors == []
    page.close()


_HARNESS = r"""
async ([src, spec, config]) => {
  const handlers = {};
  const model = {
    get: (k) => ({spec, config})[k],
    on: (ev, cb) => { (handlers[ev] = handlers[ev] || []).push(cb); },
    off: (ev, cb) => { handlers[ev] = (handlers[ev] || []).filter((f) => f !== cb); },
    send: (msg) => { window.nbprofKernel(msg).then((reply) => {
      if (reply) for (const cb of [...(handlers['msg:custom'] || [])]) cb(reply); }); },
  };
  const url = URL.createObjectURL(new Blob([src], {type: 'text/javascript'}));
  const mod = await import(url);
  mod.default.render({model, el: document.getElementById('live')});
}
"""


def test_the_live_chart_zooms_exactly_and_lists_a_span(context, long_snapshot, tmp_path):
    from nbprof.analysis.snapshot import x_axis
    from nbprof.views import live_timeline as live
    from nbprof.views.figure import DEFAULT_CONFIG
    from nbprof.views.snapshot_chart import SnapshotChartState

    from .hostile import plotly_js

    p = nbprof.load_snapshot(long_snapshot)
    state = SnapshotChartState(p)
    html = tmp_path / "live.html"
    html.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                    f"<script src='{plotly_js().as_uri()}'></script></head><body><div id='live'></div></body></html>",
                    encoding="utf-8")
    page = context.new_page()
    page.expose_function("nbprofKernel", lambda msg: json.loads(json.dumps(state.answer(msg), default=float)))
    page.goto(html.as_uri(), wait_until="load")
    src = Path(live.__file__).with_name("live_timeline.js").read_text(encoding="utf-8")
    page.evaluate(_HARNESS, [src, state.spec(), dict(DEFAULT_CONFIG)])
    page.wait_for_function("() => document.querySelector('.nbprof-live')?.dataset.rendered === '0'", timeout=60_000)
    # zoom into ~300 entries in the middle (ms on the axis)
    x, _, _ = x_axis(p._data, p._replay.memory)
    lo, hi = float(x[100_000]), float(x[100_299])
    page.evaluate(f"() => Plotly.relayout(document.querySelector('.nbprof-live-plot'), "
                  f"{{'xaxis.range': [{lo / 1000}, {hi / 1000}]}})")
    page.wait_for_function("() => document.querySelector('.nbprof-live').dataset.rendered !== '0'", timeout=60_000)
    status = page.locator(".nbprof-live-status").text_content()
    assert status.startswith("every one of the") and "entries in this window drawn" in status
    drawn = page.evaluate("() => { const gd = document.querySelector('.nbprof-live-plot');"
                          " return gd._fullData.filter(t => t.stackgroup).map(t => Array.from(t.y)); }")
    total = np.sum(np.array(drawn, dtype=np.int64), axis=0)
    m = p.active_memory()
    inside = (x >= lo) & (x <= hi)
    # the window's entries, then the last one held to the axis' end
    assert total[-int(inside.sum()) - 1:-1].tolist() == m["active_bytes"].to_numpy()[inside].tolist()
    assert total[-1] == total[-2]
    page.evaluate("() => document.querySelector('.nbprof-live-plot').emit('plotly_selected', {range: {x: [-1e9, 1e9]}})")
    page.wait_for_function("() => document.querySelector('.nbprof-live-sel table')", timeout=30_000)
    lines = page.locator(".nbprof-live-sel td.n").evaluate_all("els => els.map(e => e.title)")
    assert lines and all("1234567.py:" in line for line in lines)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "snapshot-live.png"), full_page=True)
    page.close()
