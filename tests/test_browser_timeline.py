"""The live timeline in real JupyterLab, in headless Chromium: zoom asks the kernel for the
window's rectangles, a selected span lists its ops and kernels, hover draws the launch -> kernel
arrow, find fades what does not match.

Screenshots go to tests/artifacts/ (look at them when the timeline changes).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import DATA, HAS_TORCH

lab = pytest.importorskip("tests.lab")
pytest.importorskip("anywidget")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not HAS_TORCH, reason="needs torch"),
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

ARTIFACTS = Path(__file__).parent / "artifacts"
BIG_EVENTS = 200_000

CELLS = [
    "%load_ext nbprof\nimport nbprof",
    # 1: a big profile: merged to pixels in the full view
    "big = nbprof.load_trace('big.trace.json.gz')\nbig_live = big.timeline_view().live()\nbig_live",
    # 2: a recorded H100 profile: launches, kernels, memory
    "cnn = nbprof.load_trace('cnn_train_cuda.trace.json.gz')\ncnn_live = cnn.timeline_view().live()\ncnn_live",
]

# the heatmap cells drawn (rectangles) whose extent overlaps [a, b] ms, read from plotly's own data
COUNT_RECTS = """([a, b]) => {
  const gd = document.querySelectorAll('.nbprof-live-plot')[%d];
  let n = 0;
  for (const t of gd._fullData) {
    if (t.type !== 'heatmap') continue;
    const x = Array.from(t.x), z = Array.from(t.z[0]);
    for (let i = 0; i < z.length; i++) {
      if (z[i] === null || Number.isNaN(z[i])) continue;
      if (x[i + 1] >= a && x[i] <= b) n++;
    }
  }
  return n;
}"""


def _notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from nbprof.model import TorchProfile

    from .test_timeline import synthetic_events

    root = tmp_path_factory.mktemp("live")
    shutil.copy(DATA / "cnn_train_cuda.trace.json.gz", root)
    TorchProfile(synthetic_events(BIG_EVENTS)).save(root / "big.trace.json.gz")
    _notebook(root / "live.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(root) as server, lab.browser(1500, 1200) as context:
        page = lab.open_notebook(context, server, "live.ipynb")
        lab.run_all(page, timeout_s=300)
        page.wait_for_function("() => document.querySelectorAll('.nbprof-live[data-rendered]').length === 2",
                               timeout=120_000)
        yield page
        lab.shutdown_kernel(page)


def _kernel_json(page, code: str):
    out = lab.kernel_eval(page, "import json as _j\nprint(_j.dumps(" + code + "))")
    return json.loads(out.strip().splitlines()[-1])


def test_live_timeline_draws_without_errors(session):
    outputs = lab.cell_outputs(session)
    errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert not errors, errors
    assert "Error displaying widget" not in session.content()
    assert session.locator(".nbprof-live-plot .main-svg").count() >= 2
    # the output keeps the static drawing for front ends without a kernel
    html = [o for o in outputs[1] if o.get("output_type") == "execute_result"][0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in html and "<svg" in html["text/html"]


def test_zoom_redraws_the_window_in_full_detail(session):
    full = _kernel_json(session, "[big_live.state.full.t0_us, big_live.state.full.t1_us, "
                                 "int(big_live.state.full.merged_rects)]")
    t0, t1, merged = full
    assert merged > 0  # the full view is merged to pixels
    a, b = (t0 + (t1 - t0) * 0.5) / 1000, (t0 + (t1 - t0) * 0.502) / 1000
    before = session.evaluate(COUNT_RECTS % 0, [a, b])
    session.locator(".jp-Cell").nth(1).screenshot(path=str(ARTIFACTS / "live-timeline-full.png"))
    session.evaluate("([a, b]) => window.Plotly.relayout(document.querySelectorAll('.nbprof-live-plot')[0], "
                     "{'xaxis.range': [a, b]})", [a, b])
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live')[0].dataset.rendered !== '0'",
                              timeout=60_000)
    after = session.evaluate(COUNT_RECTS % 0, [a, b])
    # the kernel's answer: every event overlapping the window, one rectangle each
    events = _kernel_json(session, f"""int(((big.events['start_us'] + big.events['dur_us'] >= {a * 1000})
        & (big.events['start_us'] <= {b * 1000})
        & big.events['kind'].isin(['op','annotation','runtime','overhead','other','kernel','memcpy','memset','gpu_annotation'])).sum())""")
    assert after > before
    assert after == events > 100
    status = session.locator(".nbprof-live-status").first.inner_text()
    assert "merged" not in status, status
    cell = session.locator(".jp-Cell").nth(1)
    cell.screenshot(path=str(ARTIFACTS / "live-timeline-zoomed.png"))
    # double-click's autorange: the full view again
    session.evaluate("() => window.Plotly.relayout(document.querySelectorAll('.nbprof-live-plot')[0], "
                     "{'xaxis.autorange': true})")
    session.wait_for_function("() => document.querySelector('.nbprof-live-status').textContent.includes('merged')",
                              timeout=60_000)


def _plot_point(page, index: int, x_ms: float, y: float) -> tuple[float, float]:
    """Page pixels of a point in the figure's data coordinates (plotly's own axis mapping), the
    figure scrolled into the window first (a pointer off the window hovers nothing: the report
    above it grows as nbprof says more)."""
    return tuple(page.evaluate(
        """([i, x, y]) => { const gd = document.querySelectorAll('.nbprof-live-plot')[i];
            gd.scrollIntoView({block: 'center'});
            const fl = gd._fullLayout, box = gd.getBoundingClientRect();
            return [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + fl.yaxis.l2p(y)]; }""",
        [index, x_ms, y]))


def test_selecting_a_span_lists_its_ops_and_kernels(session):
    cell = session.locator(".jp-Cell").nth(2)
    cell.locator(".nbprof-live-select").click()
    a, b = 9.0, 13.0  # ms: the second step's forward and backward
    x0, y0 = _plot_point(session, 1, a, 0)
    x1, _ = _plot_point(session, 1, b, 0)
    session.mouse.move(x0, y0 + 40)
    session.mouse.down()
    session.mouse.move((x0 + x1) / 2, y0 + 40, steps=5)
    session.mouse.move(x1, y0 + 40, steps=5)
    session.mouse.up()
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live')[1].querySelector('.nbprof-live-sel table')",
                              timeout=30_000)
    sel = [float(v) for v in session.evaluate("() => document.querySelectorAll('.nbprof-live')[1].dataset.selection").split(",")]
    assert sel[0] == pytest.approx(a, abs=0.1) and sel[1] == pytest.approx(b, abs=0.1)
    # the kernel's answer, from the events table itself: device work overlapping the span, by the
    # time inside it
    want = _kernel_json(session, f"""(lambda ev: (lambda w: w.assign(t=w['start_us'].clip({sel[0] * 1000}, {sel[1] * 1000}).rsub(
        (w['start_us'] + w['dur_us']).clip({sel[0] * 1000}, {sel[1] * 1000}))).groupby('name', observed=True)['t'].sum()
        .sort_values(ascending=False, kind='stable').index.astype(str).tolist()[:12])(
        ev[ev['kind'].isin(['kernel', 'memcpy', 'memset']) & (ev['start_us'] + ev['dur_us'] >= {sel[0] * 1000})
           & (ev['start_us'] <= {sel[1] * 1000})]))(cnn.events)""")
    kernels = cell.locator(".nbprof-live-sel-table[data-table='Kernels'] td.n")
    got = [kernels.nth(i).get_attribute("title") for i in range(kernels.count())]
    assert len(got) == len(want) >= 5
    assert set(got) == set(want)
    ops = cell.locator(".nbprof-live-sel-table[data-table='Operators and ranges'] td.n").all_inner_texts()
    assert "backward" in ops or "forward" in ops
    cell.locator(".nbprof-live-select").click()  # back to zoom
    cell.screenshot(path=str(ARTIFACTS / "live-timeline-selection.png"))


def test_hovering_a_kernel_draws_the_arrow_from_its_launch(session):
    # the longest kernel with a launch, and that launch, from the events table and its correlation ids
    k = _kernel_json(session, """(lambda ev: (lambda k, r: (lambda m: [float(m['start_us_k']), float(m['dur_us_k']),
        float(m['start_us_r']), str(m['name_r'])])(k.merge(r, on='correlation', suffixes=('_k', '_r'))
        .sort_values('dur_us_k', ascending=False).iloc[0]))(
        ev[(ev['kind'] == 'kernel') & (ev['correlation'] > 0)], ev[(ev['kind'] == 'runtime') & (ev['correlation'] > 0)]))(cnn.events)""")
    start, dur, launch_start, launch_name = k
    a, b = (launch_start - 20) / 1000, (start + dur + 20) / 1000
    session.evaluate("([a, b]) => window.Plotly.relayout(document.querySelectorAll('.nbprof-live-plot')[1], "
                     "{'xaxis.range': [a, b]})", [a, b])
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live')[1].dataset.rendered !== '0'",
                              timeout=30_000)
    stream_y = session.evaluate("""() => { const gd = document.querySelectorAll('.nbprof-live-plot')[1];
        const i = gd.layout.yaxis.ticktext.findIndex(t => t.startsWith('CUDA'));
        return gd.layout.yaxis.tickvals[i]; }""")
    x, y = _plot_point(session, 1, (start + dur / 2) / 1000, stream_y)
    session.mouse.move(x, y)
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live')[1].dataset.flow", timeout=30_000)
    arrow = session.evaluate("""() => { const gd = document.querySelectorAll('.nbprof-live-plot')[1];
        return gd.layout.annotations.filter(a => a.name === 'nbprof-flow')[0]; }""")
    assert arrow["ax"] == pytest.approx(launch_start / 1000, abs=1e-6)
    assert arrow["x"] == pytest.approx(start / 1000, abs=1e-6)
    assert arrow["y"] == pytest.approx(stream_y, abs=1e-6)
    assert session.locator(".nbprof-live-plot").nth(1).locator(".annotation-arrow-g path, g.annotation path").count() >= 1
    assert launch_name.startswith("cuda")
    session.locator(".jp-Cell").nth(2).screenshot(path=str(ARTIFACTS / "live-timeline-flow.png"))


def test_find_by_name_keeps_matches_and_fades_the_rest(session):
    cell = session.locator(".jp-Cell").nth(2)
    session.evaluate("() => window.Plotly.relayout(document.querySelectorAll('.nbprof-live-plot')[1], "
                     "{'xaxis.autorange': true})")
    time.sleep(1.0)
    cell.locator(".nbprof-live-search").fill("conv")
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live-find')[1].textContent.includes('match')",
                              timeout=30_000)
    text = cell.locator(".nbprof-live-find").inner_text()
    want = _kernel_json(session, """int((cnn.events['name'].astype(str).str.lower().str.contains('conv')
        & ~cnn.events['kind'].isin(['memory', 'oom'])).sum())""")
    assert text.startswith(f"{want:,} events match"), text
    colors = session.evaluate("""() => document.querySelectorAll('.nbprof-live-plot')[1]._fullLayout.coloraxis.colorscale
        .map(c => c[1])""")
    assert "#eceef1" in colors and len(set(colors)) > 2  # faded, and matches in color
    cell.screenshot(path=str(ARTIFACTS / "live-timeline-find.png"))


def test_standalone_page_summarizes_a_selected_span_without_a_kernel(session, tmp_path):
    """The exported report (no kernel): plotly's box select over the timeline lists the span's
    duration and the names drawn in it, by time clipped to the span, from the figure's rects."""
    import nbprof
    from nbprof.views.timeline import prepare_timeline

    p = nbprof.load_trace(DATA / "cnn_train_cuda.trace.json.gz")
    path = tmp_path / "report.html"
    p.to_html(path)
    # a page of the session's browser (one playwright per process: a second would nest)
    page = session.context.new_page()
    try:
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
        page.goto(path.as_uri())
        page.locator(".nbprof-tabs > label", has_text="Timeline").click()
        page.wait_for_function("() => document.querySelector('#nbprof-timeline .main-svg')", timeout=30_000)
        page.locator("#nbprof-timeline .modebar-btn[data-val='select']").first.click()

        def point(x_ms: float) -> list:
            return page.evaluate("""(x) => { const gd = document.getElementById('nbprof-timeline');
                const fl = gd._fullLayout, box = gd.getBoundingClientRect();
                return [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + 40]; }""", x_ms)

        (x0, y), (x1, _) = point(9.0), point(13.0)
        page.mouse.move(x0, y)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, y, steps=5)
        page.mouse.move(x1, y, steps=5)
        page.mouse.up()
        page.wait_for_function("() => document.querySelector('#nbprof-timeline-selection table')", timeout=10_000)
        head = page.locator("#nbprof-timeline-selection div").first.inner_text()
        a, b = (float(v) for v in head.split(" ms")[0].replace("Selection ", "").split(" – "))
        names = page.locator("#nbprof-timeline-selection td[title]").evaluate_all("els => els.map(e => e.title)")
        page.locator("#nbprof-timeline-selection").locator("..").screenshot(path=str(ARTIFACTS / "static-timeline-selection.png"))
    finally:
        page.close()
    assert a == pytest.approx(9.0, abs=0.1) and b == pytest.approx(13.0, abs=0.1)
    # the same rects in Python: each rect's clipped extent under its name
    r = prepare_timeline(p).rects
    x0s, x1s = r["x0_us"].to_numpy() / 1000, r["x1_us"].to_numpy() / 1000
    inside = (x1s >= a) & (x0s <= b)
    clipped = (np.minimum(x1s, b) - np.maximum(x0s, a))[inside]
    sums = pd.Series(clipped, index=r["name"].to_numpy()[inside]).groupby(level=0).sum()
    want = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
    assert f"{int(inside.sum())} rects" in head
    assert names == [n for n, _ in want[:15]]
