"""A folder of ranks' timeline in real JupyterLab, in headless Chromium: every rank's lanes on one
clock, a 1 ms zoom drawn in full detail from the ranks' workers, a selected span listing what each
rank ran; numbers from the raw JSON of each rank's file.

Folders: tutorial 6's two-process DDP run (gloo, ``tests/data/ddp_gloo``), read in the kernel's
process, and 8 ranks of the recorded H100 trace tiled to ~20k events each
(``benchmarks/bench_cluster.py``'s folders), read and zoomed by 2 worker processes.
Screenshots go to tests/artifacts/ (look at them when the timeline changes).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from .conftest import DATA

lab = pytest.importorskip("tests.lab")
pytest.importorskip("anywidget")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

ARTIFACTS = Path(__file__).parent / "artifacts"
ROOT = Path(__file__).resolve().parent.parent
# the categories the timeline draws (CPU events on their threads, device work and GPU annotations
# on their streams; not memory instants, flows or Python frames)
DRAWN = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset",
         "gpu_user_annotation"}
CPU = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}

CELLS = [
    "%load_ext nbprof\nimport nbprof",
    # 1: the report and its live timeline, as a folder's cell value shows them
    "ddp = nbprof.load_trace('ddp_gloo', progress=False)\nddp",
    # 2: 8 ranks, read (and zoomed) by 2 worker processes
    "tiled = nbprof.load_trace('tiled8', workers=2, progress=False)\ntiled_live = tiled.timeline_view().live()\n"
    "tiled_live",
]

# events drawn in [a, b] ms: each heatmap cell overlapping it, a merged one by its count
COUNT_EVENTS = """([i, a, b]) => {
  const gd = document.querySelectorAll('.nbprof-live-plot')[i];
  let n = 0, cells = 0;
  for (const t of gd._fullData) {
    if (t.type !== 'heatmap') continue;
    const x = Array.from(t.x), z = Array.from(t.z[0]), h = t.hovertext[0];
    for (let k = 0; k < z.length; k++) {
      if (z[k] === null || Number.isNaN(z[k])) continue;
      if (x[k + 1] >= a && x[k] <= b) {
        const m = /^<b>([\\d,]+) merged events<\\/b>/.exec(h[k] || '');
        n += m ? parseInt(m[1].replace(/,/g, ''), 10) : 1;
        cells++;
      }
    }
  }
  return [n, cells];
}"""


def raw(folder: Path) -> list[dict]:
    """Each rank's trace file as JSON, in the folder's order."""
    out = []
    for f in sorted(folder.iterdir()):
        if f.name.endswith((".json", ".json.gz")):
            with (gzip.open(f) if f.suffix == ".gz" else open(f)) as fh:
                out.append(json.load(fh))
    return out


def origin_us(docs: list[dict]) -> float:
    """The common clock's zero, from the files: the earliest event (or profiler span) of any rank."""
    return min(e["ts"] for d in docs for e in d["traceEvents"]
               if e.get("ph") in ("X", "i", "I") and "ts" in e)


def in_span(d: dict, a_us: float, b_us: float, cats: set) -> list[tuple[str, float, float, float]]:
    """(name, ts, dur, time inside [a, b]) of the drawn events of ``cats`` overlapping [a, b] (absolute µs)."""
    out = []
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in cats and e["ts"] + e.get("dur", 0) >= a_us and e["ts"] <= b_us:
            dur = e.get("dur", 0)
            out.append((e["name"], e["ts"], dur, min(e["ts"] + dur, b_us) - max(e["ts"], a_us)))
    return out


def _tiled(root: Path) -> Path:
    spec = importlib.util.spec_from_file_location("bench_cluster", ROOT / "benchmarks" / "bench_cluster.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder, _ = bench.make_folder(root / "made", 8, 20_000)
    target = root / "tiled8"
    target.mkdir()
    for f in folder.glob("rank*.pt.trace.json.gz"):
        shutil.copy(f, target)
    return target


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    import nbformat

    root = tmp_path_factory.mktemp("cluster")
    shutil.copytree(DATA / "ddp_gloo", root / "ddp_gloo")
    _tiled(root)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, root / "cluster.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(root) as server, lab.browser(1500, 1300) as context:
        page = lab.open_notebook(context, server, "cluster.ipynb")
        lab.run_all(page, timeout_s=300)
        page.wait_for_function("() => document.querySelectorAll('.nbprof-live[data-rendered]').length === 2",
                               timeout=120_000)
        page.root = root  # type: ignore[attr-defined]
        yield page
        lab.kernel_eval(page, "tiled.close()")
        lab.shutdown_kernel(page)


def _kernel_json(page, code: str):
    out = lab.kernel_eval(page, "import json as _j\nprint(_j.dumps(" + code + "))")
    return json.loads(out.strip().splitlines()[-1])


def _ticks(page, i: int) -> list[str]:
    return page.evaluate("(i) => document.querySelectorAll('.nbprof-live-plot')[i].layout.yaxis.ticktext", i)


def _relayout(page, i: int, a: float, b: float) -> None:
    before = page.evaluate("(i) => document.querySelectorAll('.nbprof-live')[i].dataset.rendered", i)
    page.evaluate("([i, a, b]) => window.Plotly.relayout(document.querySelectorAll('.nbprof-live-plot')[i], "
                  "{'xaxis.range': [a, b]})", [i, a, b])
    page.wait_for_function("([i, b]) => document.querySelectorAll('.nbprof-live')[i].dataset.rendered !== b",
                           arg=[i, before], timeout=120_000)


def test_every_rank_has_its_lanes_and_the_report_its_timeline_tab(session):
    outputs = lab.cell_outputs(session)
    errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert not errors, errors
    assert "Error displaying widget" not in session.content()
    for i, folder in ((0, "ddp_gloo"), (1, "tiled8")):
        ticks = _ticks(session, i)
        for r, d in enumerate(raw(session.root / folder)):
            rank = d["distributedInfo"]["rank"]
            threads = {e["tid"] for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") in CPU}
            streams = {e["args"]["stream"] for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") in DEVICE}
            for tid in threads:
                assert any(t.startswith(f"rank {rank} · CPU thread {tid}") for t in ticks), (rank, tid, ticks)
            for s in streams:
                assert any(t.startswith(f"rank {rank} · CUDA 0 stream {s}") for t in ticks), (rank, s, ticks)
        assert len([t for t in ticks if t]) >= 2 * (2 if folder == "ddp_gloo" else 8)
    # the report of the DDP folder: a Timeline tab with both ranks' lanes, no events merged
    report = session.locator(".jp-Cell").nth(1).locator(".nbprof-report")
    assert report.locator(".nbprof-tabs > label", has_text="Timeline").count() == 1
    assert "rank 1 · CPU thread" in report.inner_html()
    assert _kernel_json(session, "['_merged' in ddp.__dict__, '_merged' in tiled.__dict__]") == [False, False]
    # the last arrival at each collective is marked: DDP's rank 1 (its data loading is slow)
    markers = session.evaluate("""() => document.querySelectorAll('.nbprof-live-plot')[0]._fullData
        .filter(t => t.name === 'arrived last').map(t => Array.from(t.text))""")
    assert markers and all(t.startswith("<b>rank 1 arrived last</b>") for t in markers[0])
    lab.full_screenshot(session, str(ARTIFACTS / "cluster-timeline-notebook.png"))


def _window(session, folder: str, rank: int = 0) -> tuple[float, float, float]:
    """A 1 ms window where rank ``rank`` is busy (the 400th CPU event's start), on the view's clock:
    (a ms, b ms, the common origin in µs)."""
    docs = raw(session.root / folder)
    origin = origin_us(docs)
    cpu = sorted(e["ts"] for e in docs[rank]["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    a = (cpu[min(400, len(cpu) - 1)] - origin) / 1000.0
    return a, a + 1.0, origin


@pytest.mark.parametrize("index,folder", [(0, "ddp_gloo"), (1, "tiled8")])
def test_a_1ms_zoom_is_drawn_in_full_detail_from_the_workers(session, index, folder):
    a, b, origin = _window(session, folder)
    cell = session.locator(".jp-Cell").nth(1 + index)
    _relayout(session, index, a, b)
    drawn, cells = session.evaluate(COUNT_EVENTS, [index, a, b])
    want = sum(len(in_span(d, origin + a * 1000, origin + b * 1000, DRAWN)) for d in raw(session.root / folder))
    assert drawn == want > 20
    # full detail: one cell per event, nothing merged (events on one row that overlap exactly aside)
    assert cells >= 0.99 * want
    # the workers drew it: the widget's state has no events; the tiled folder's are 2 processes;
    # nothing merged to pixels (px_us 0)
    name = "ddp" if folder == "ddp_gloo" else "tiled"
    live = "ddp_live" if name == "ddp" else "tiled_live"
    if name == "ddp":  # its widget was displayed with the report: find it
        lab.kernel_eval(session, "import gc, nbprof.views.live_timeline as _lt\nddp_live = [w for w in gc.get_objects() "
                                 "if isinstance(w, _lt._widget_class()) and getattr(w.state, \"timeline\", None) is ddp.timeline_view()"
                                 ".timeline][0]")
    state = _kernel_json(session, f"[{name}._pool.kind, {name}._pool.running, {name}._pool.started, "
                                  f"'_merged' in {name}.__dict__, {live}.state.events is None, "
                                  f"{live}.state.current.px_us]")
    assert state == (["this process", False, 0, False, True, 0.0] if name == "ddp"
                     else ["processes", True, 1, False, True, 0.0])
    cell.screenshot(path=str(ARTIFACTS / f"cluster-timeline-zoom-{folder}.png"))


def _drag(page, i: int, a: float, b: float) -> None:
    """A drag across the plot from a to b ms, in the select mode (plotly's box select)."""
    def point(x_ms):
        return page.evaluate("""([i, x]) => { const gd = document.querySelectorAll('.nbprof-live-plot')[i];
            const fl = gd._fullLayout, box = gd.getBoundingClientRect();
            return [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + 30]; }""", [i, x_ms])

    (x0, y), (x1, _) = point(a), point(b)
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()


def test_a_selected_span_lists_what_each_rank_ran(session):
    index, folder = 1, "tiled8"
    a, b, origin = _window(session, folder)
    _relayout(session, index, a - 0.5, b + 0.5)
    cell = session.locator(".jp-Cell").nth(2)
    cell.locator(".nbprof-live-select").click()
    _drag(session, index, a, b)
    session.wait_for_function("() => document.querySelectorAll('.nbprof-live')[1].querySelector("
                              "\".nbprof-live-sel-table[data-table='Each rank in the span'] tbody tr\")", timeout=60_000)
    sel = [float(v) for v in session.evaluate("() => document.querySelectorAll('.nbprof-live')[1].dataset.selection")
           .split(",")]
    assert sel[0] == pytest.approx(a, abs=0.05) and sel[1] == pytest.approx(b, abs=0.05)
    lo, hi = origin + sel[0] * 1000, origin + sel[1] * 1000
    rows = cell.locator(".nbprof-live-sel-table[data-table='Each rank in the span'] tbody tr")
    docs = raw(session.root / folder)
    assert rows.count() == len(docs) == 8
    for d in docs:
        rank = d["distributedInfo"]["rank"]
        row = cell.locator(f".nbprof-live-sel-table[data-table='Each rank in the span'] tbody tr[data-rank='{rank}']")
        # its top op and top kernel: the names with the most time inside the span, from its JSON
        for cats, col in ((CPU, 3), (DEVICE, 6)):
            totals: dict[str, float] = {}
            for name, _, _, inside in in_span(d, lo, hi, cats):
                totals[name] = totals.get(name, 0.0) + inside
            got = row.locator("td").nth(col)
            if not totals:
                assert got.inner_text() == "–"
                continue
            best = max(totals.values())
            assert got.get_attribute("title") in {n for n, t in totals.items() if t >= best - 1e-3}, (rank, col)
        # each rank's kernels listed: the JSON's kernels in the span, by time inside it
        kernels = cell.locator(f"details[data-rank='{rank}'] .nbprof-live-sel-table[data-table='Kernels'] td.n")
        names = {k.get_attribute("title") for k in kernels.all()}
        want = {n for n, *_ in in_span(d, lo, hi, DEVICE)}
        assert names <= want and len(names) == min(len(want), 8)
    cell.locator("details[data-rank='1'] summary").click()
    cell.locator(".nbprof-live-select").click()  # back to zoom
    cell.screenshot(path=str(ARTIFACTS / "cluster-timeline-selection.png"))
