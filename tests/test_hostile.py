"""A trace is data, never code (issue 24): one test per way a trace's strings reached a page as
markup or script, in headless Chromium with a hook installed before any script of the page
(tests/hostile.py), and the escapes themselves against texts written out by hand.

Each browser test fails on the code before the fix (measured: the hook recorded the payload's
call) and passes after; each also checks that the hostile name reads in the page as written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import nbprof

from .conftest import needs_torch
from .hostile import FIELDS, PAYLOADS, SHOWN, Watch, hostile_folder, hostile_trace, shown, visible, write_trace

SCRIPT_BREAK = "</script><script>__pwned('script')</script>"
IMG = "<img src=x onerror=__pwned('{}')>"
QUOTES = "\" onmouseover=\"__pwned('attr')\" x=\""


def _names(**given: str):
    """``text(field)`` for hostile_trace: the given fields' texts, plain names for the others."""
    return lambda field: given.get(field, f"plain_{field}")


# ------------------------------------------------------------------------- the escapes, by hand


def test_script_json_escapes_what_could_end_or_break_a_script_element():
    from nbprof.format import script_json

    value = {"name": "</script><!--<script>&\u2028\u2029é\U0001f525"}
    assert script_json(value) == ('{"name": "\\u003c/script\\u003e\\u003c!--\\u003cscript\\u003e\\u0026'
                                  '\\u2028\\u2029\\u00e9\\ud83d\\udd25"}')
    assert json.loads(script_json(value)) == value


def test_esc_plotly_escapes_plotly_markup_and_keeps_quotes():
    from nbprof.format import esc, esc_plotly

    assert esc_plotly('<a href="javascript:x()">&</a>') == '&lt;a href="javascript:x()"&gt;&amp;&lt;/a&gt;'
    assert esc("\" onmouseover='x'") == "&quot; onmouseover=&#x27;x&#x27;"


def test_report_tables_keep_script_breaking_names_inside_their_json(tmp_path):
    """The tables' rows are JSON in a <script>: a name holding "</script>" is written with JSON
    escapes there (fast: the HTML itself, no browser)."""
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(op=SCRIPT_BREAK))))
    html = p.report().html(include_library=False)
    assert "\\u003c/script\\u003e\\u003cscript\\u003e__pwned('script')" in html  # in the rows' JSON
    assert "<script>__pwned" not in html and "</script><script>" not in html  # nowhere as written


# --------------------------------------------------------------------------------- the browser

lab = pytest.importorskip("tests.lab")


def in_browser(test):
    """A browser test: in the browser tier, skipped without Debian's chromium."""
    return pytest.mark.browser(pytest.mark.skipif(not lab.chromium_available(),
                                                  reason="Debian's chromium is not installed")(test))


@pytest.fixture(scope="module")
def watch():
    with lab.browser() as context:
        yield Watch(context)


def _page(tmp_path: Path, body: str, name: str = "out.html") -> Path:
    """A notebook output as a page of its own (what JupyterLab shows of it, scripts run)."""
    from nbprof.views.datatable import library_html

    path = tmp_path / name
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + library_html() + body
                    + "</body></html>", encoding="utf-8")
    return path


def _open_all_tabs(page, within: str = "") -> None:
    """Click every tab, nested ones too (a folder's Memory tab has a tab per rank): each top-level
    tab, then every tab its panel shows; a nested tab is hidden while its panel is."""
    for label in page.locator(f"{within} .nbprof-tabs > label".strip()).all():
        if not label.is_visible():
            continue
        label.click()
        page.wait_for_timeout(150)
        for inner in page.locator(f"{within} .nbprof-panel:visible .nbprof-tabs > label".strip()).all():
            if inner.is_visible():
                inner.click()
                page.wait_for_timeout(100)


@in_browser
@pytest.mark.parametrize("output", ["notebook report", "standalone page"])
def test_script_breaking_names_run_nothing(watch, tmp_path, output):
    """Op and range names with "</script><script>..." ended the tables' data script and ran on
    page load (the notebook report and p.to_html()'s page)."""
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(
        op=SCRIPT_BREAK, range="<!--<script>__pwned('comment')</script>-->"))))
    if output == "notebook report":
        path = _page(tmp_path, p._repr_mimebundle_()["text/html"])
    else:
        path = Path(p.to_html(tmp_path / "page.html"))
    page = watch.open(path, 1500)
    _open_all_tabs(page)
    assert Watch.ran(page) == []
    texts = Watch.texts(page)
    assert shown(texts, SCRIPT_BREAK) and shown(texts, "<!--<script>__pwned('comment')</script>-->")
    assert page.locator("table.dataTable").count() >= 4  # the tables still work
    page.close()


@in_browser
def test_html_in_grid_block_module_and_range_cells_is_text(watch, tmp_path):
    """The Kernels tab's Grid and Block columns, the Modules tab's Module column and the Ranges
    tab's Range column were written as HTML: an <img onerror> ran on load."""
    names = dict(grid=IMG.format("grid"), block=IMG.format("block"), module=IMG.format("module"),
                 range=IMG.format("range") + " & co")  # "&": DataTables reads such a search text as HTML
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(**names))))
    page = watch.open(_page(tmp_path, p._repr_mimebundle_()["text/html"]), 1500)
    _open_all_tabs(page)
    assert Watch.ran(page) == []
    assert page.locator("img").count() == 0
    cells = [visible(t) for t in page.locator("table.dataTable td").all_inner_texts()]
    # the interactive tables' cells (not only the static preview), as written; grid is the
    # trace's JSON text of the string, block its JSON list
    assert visible(IMG.format("module")) in " ".join(cells)
    assert any(c == visible(IMG.format("range") + " & co") for c in cells)
    assert any(c == visible(json.dumps(IMG.format("grid"))) for c in cells)
    assert any(c == visible(json.dumps([IMG.format("block"), 1, 1])) for c in cells)
    # searching the tables for the names finds them, and runs nothing either
    found = page.evaluate("""() => [...document.querySelectorAll('table.dataTable')].map(t => {
        const api = window.$(t).DataTable(); api.search("<img src=x onerror=__pwned('range')> &").draw();
        return api.rows({search: 'applied'}).count(); })""")
    assert found.count(1) >= 2 and set(found) <= {0, 1}  # the Operators and Ranges tables
    page.wait_for_timeout(300)
    assert Watch.ran(page) == []
    page.close()


@in_browser
def test_standalone_pages_policy_runs_only_nbprofs_scripts(watch, tmp_path):
    """The page's Content-Security-Policy: its own scripts all run (tables, plotly, the figure),
    none is blocked; markup that a missed escape would let in (an inline handler, a script
    element, a javascript: link) is blocked."""
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names())))
    html = Path(p.to_html(tmp_path / "page.html")).read_text(encoding="utf-8")
    page = watch.open(tmp_path / "page.html", 1000)
    page.locator(".nbprof-tabs > label", has_text="Timeline").click()
    page.wait_for_function("() => document.querySelector('#nbprof-timeline .main-svg')", timeout=30_000)
    assert page.locator("table.dataTable").count() >= 5
    assert page.evaluate("() => window.__blocked") == []
    page.close()
    missed = ("<img src=x onerror=\"__pwned('handler')\"><script>__pwned('script')</script>"
              "<a id=js href=\"javascript:__pwned('link')\">x</a>")
    (tmp_path / "missed.html").write_text(html.replace("<body>", "<body>" + missed, 1), encoding="utf-8")
    page = watch.open(tmp_path / "missed.html", 1000)
    page.click("#js")
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.__hits") == []
    assert len(page.evaluate("() => window.__blocked")) >= 3
    assert page.locator("table.dataTable").count() >= 5  # the page still works
    page.close()


@in_browser
def test_box_select_table_keeps_quotes_in_its_title(watch, tmp_path):
    """The standalone page's box-select table wrote title="' + name + '" with an escape that left
    '"' alone: a name with '" onmouseover=...' ran when the user hovered its row."""
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(op=QUOTES))))
    page = watch.open(Path(p.to_html(tmp_path / "page.html")), 1000)
    page.locator(".nbprof-tabs > label", has_text="Timeline").click()
    page.wait_for_function("() => document.querySelector('#nbprof-timeline .main-svg')", timeout=30_000)
    page.locator("#nbprof-timeline .modebar-btn[data-val='select']").first.click()
    x0, x1, y = page.evaluate("""() => { const gd = document.getElementById('nbprof-timeline');
        const fl = gd._fullLayout, box = gd.getBoundingClientRect();
        return [box.left + fl.xaxis._offset + fl.xaxis.l2p(0.005), box.left + fl.xaxis._offset + fl.xaxis.l2p(0.95),
                box.top + fl.yaxis._offset + 30]; }""")
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()
    page.wait_for_function("() => document.querySelector('#nbprof-timeline-selection td[title]')", timeout=10_000)
    titles = page.locator("#nbprof-timeline-selection td[title]").evaluate_all("els => els.map(e => e.title)")
    assert QUOTES in titles
    row = page.locator("#nbprof-timeline-selection td[title]").nth(titles.index(QUOTES))
    assert row.inner_text() == QUOTES
    row.hover()
    page.wait_for_timeout(200)
    assert Watch.ran(page) == []
    page.close()


@in_browser
@pytest.mark.parametrize("output", ["notebook report", "standalone page"])
def test_cluster_collective_and_process_group_names_run_nothing(watch, tmp_path, output):
    """A folder's cluster report: collective and process-group names went into the Ranks tab's
    collectives table as HTML and into its script unescaped."""
    names = dict(collective=IMG.format("collective"), pg=SCRIPT_BREAK)
    c = nbprof.load_trace(hostile_folder(tmp_path / "ranks", _names(**names)), progress=False)
    if output == "notebook report":
        path = _page(tmp_path, c._repr_mimebundle_()["text/html"])
    else:
        path = Path(c.to_html(tmp_path / "page.html"))
    page = watch.open(path, 1500)
    _open_all_tabs(page)
    assert Watch.ran(page) == []
    cells = [visible(t) for t in page.locator("table.dataTable td").all_inner_texts()]
    assert cells.count(visible(IMG.format("collective"))) == 2 and cells.count(visible(SCRIPT_BREAK)) == 2  # a row per rank
    page.close()


@in_browser
def test_plotly_labels_and_hover_show_markup_as_text(watch, tmp_path):
    """plotly reads its strings as markup (<b>, <span style>, <a href> made a live link): lane
    labels (a thread's name), rectangle labels and hover texts (names, grid) show it as text."""
    import plotly.offline

    link = '<a href="https://evil.example/">link</a>'
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(
        thread=link, op="<b>op</b>" + "x" * 60, grid=link))))
    spec = p.timeline()._repr_mimebundle_()["application/vnd.plotly.v1+json"]
    plotly_js = Path(plotly.offline.__file__).parent.parent / "package_data" / "plotly.min.js"
    path = tmp_path / "fig.html"
    path.write_text(f"<!DOCTYPE html><meta charset='utf-8'><script src='{plotly_js.as_uri()}'></script>"
                    "<div id='fig'></div><script>var spec = " + json.dumps(spec).replace("<", "\\u003c")
                    + "; Plotly.newPlot('fig', spec.data, spec.layout, spec.config);</script>", encoding="utf-8")
    page = watch.open(path, 1500)
    links = page.evaluate("() => [...document.querySelectorAll('#fig a')].map(a => a.getAttribute('xlink:href') || a.href)")
    assert links == []
    ticks = page.evaluate("() => [...document.querySelectorAll('#fig .ytick text')].map(t => t.textContent)")
    assert f"CPU thread 1001 ({link})" in ticks
    assert any(t.startswith("<b>op</b>xxx") for t in page.evaluate(
        "() => [...document.querySelectorAll('#fig .textpoint text')].map(t => t.textContent)"))
    # the op's hover label: the name and the kernel's grid as written
    x, y = page.evaluate("""() => { const gd = document.getElementById('fig'), fl = gd._fullLayout;
        const t = gd._fullData.find(t => t.type === 'heatmap' && t.hovertext[0].some(h => h.includes('&lt;b&gt;op')));
        const j = t.hovertext[0].findIndex(h => h.includes('&lt;b&gt;op'));
        const box = gd.getBoundingClientRect(), xm = (t.x[j] + t.x[j + 1]) / 2, ym = (t.y[0] + t.y[1]) / 2;
        return [box.left + fl.xaxis._offset + fl.xaxis.l2p(xm), box.top + fl.yaxis._offset + fl.yaxis.l2p(ym)]; }""")
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    hover = page.evaluate("() => document.querySelector('#fig .hoverlayer').textContent")
    assert "<b>op</b>xxx" in hover
    assert page.locator("#fig .hoverlayer tspan[style*='bold']").count() == 1  # nbprof's own <b> around the name
    assert Watch.ran(page) == []
    page.close()


@in_browser
@pytest.mark.parametrize("profiler", [pytest.param("torch", marks=needs_torch), "cprofile"])
def test_command_lines_html_report_runs_nothing(watch, tmp_path, profiler):
    """``python -m nbprof``'s HTML report of a script whose ranges (torch) and functions and files
    (cProfile) have hostile names: nothing runs, the names read as written."""
    names = [p for p in PAYLOADS if "\x00" not in p]
    if profiler == "torch":  # torch's trace writer leaves quotes unescaped (invalid JSON: a TraceError)
        names = [p for p in names if '"' not in p and p.isascii()]  # and names any non-ASCII "unknown"
    script = tmp_path / "hostile.py"
    if profiler == "torch":
        script.write_text("import torch\nx = torch.ones(8, 8)\nfor name in %r:\n"
                          "    with torch.profiler.record_function(name):\n        x = x @ x\n" % (names,))
    else:  # functions named by the payloads, in a file named by one
        script.write_text("import types\nnames = %r\n"
                          "code = compile('def f():\\n    return sum(range(3000))\\n', names[1], 'exec')\n"
                          "ns = {}\nexec(code, ns)\n"
                          "for n in names:\n"
                          "    g = types.FunctionType(ns['f'].__code__.replace(co_name=n, co_qualname=n), ns)\n"
                          "    for _ in range(50):\n        g()\n" % (names,))
    out = tmp_path / "report.html"
    run = subprocess.run([sys.executable, "-m", "nbprof", profiler, "-o", str(out), str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    page = watch.open(out, 1500)
    _open_all_tabs(page)
    Watch.hover_everything(page)
    assert Watch.ran(page) == []
    texts = Watch.texts(page)
    missing = [n for n in names if not shown(texts, n)]
    assert not missing
    page.close()


@in_browser
def test_every_field_shown_as_written_nothing_runs(watch, tmp_path):
    """Every canonical payload in every string field at once: the notebook report."""
    fields = {field: f"{field}{PAYLOADS[i % len(PAYLOADS)]}" for i, field in enumerate(FIELDS)}
    p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names(**fields))))
    page = watch.open(_page(tmp_path, p._repr_mimebundle_()["text/html"]), 1500)
    _open_all_tabs(page)
    Watch.hover_everything(page)
    assert Watch.ran(page) == []
    texts = Watch.texts(page)
    assert [f for f in SHOWN if not shown(texts, fields[f])] == []
    page.close()


@in_browser
def test_hostile_trace_in_jupyterlab_runs_nothing(watch, tmp_path):
    """The hostile trace and folder in real JupyterLab, the notebook trusted (run in the session):
    the report, the live timeline (a span selected) and the cluster report run nothing of the
    names, which read as written. Screenshot: tests/artifacts/hostile-jupyterlab.png."""
    import nbformat

    fields = {f: f"{f}{PAYLOADS[i % len(PAYLOADS)]}" for i, f in enumerate(
        ("op", "range", "module", "kernel", "thread", "collective", "pg", "grid", "block", "pyfunc", "memcpy"))}
    write_trace(tmp_path / "hostile.json", hostile_trace(_names(**fields)))
    hostile_folder(tmp_path / "ranks", _names(**fields))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "%load_ext nbprof\nimport nbprof", "p = nbprof.load_trace('hostile.json')\np",
        "c = nbprof.load_trace('ranks', progress=False)\nc")]
    nbformat.write(nb, tmp_path / "hostile.ipynb")
    artifacts = Path(__file__).parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with lab.jupyterlab(tmp_path) as server:  # the module's browser, its hook installed
        page = lab.open_notebook(watch.context, server, "hostile.ipynb")
        lab.run_all(page, timeout_s=300)
        page.wait_for_function("() => document.querySelector('.nbprof-live[data-rendered]')", timeout=120_000)
        errors = [o for cell in lab.cell_outputs(page) for o in cell if o.get("output_type") == "error"]
        assert not errors, errors
        _open_all_tabs(page, ".jp-OutputArea")
        page.evaluate("() => document.querySelector('.nbprof-live-plot').emit('plotly_selected', {range: {x: [-1e9, 1e9]}})")
        page.wait_for_function("() => document.querySelector('.nbprof-live-sel table')", timeout=30_000)
        page.evaluate("""() => { for (const el of document.querySelectorAll('.jp-OutputArea *'))
            for (const t of ['mouseover', 'mouseenter', 'focus']) el.dispatchEvent(new Event(t)); }""")
        page.wait_for_timeout(300)
        hits = page.evaluate("() => window.__hits")
        # markup made from names, in the outputs (JupyterLab's own DOM aside)
        made = page.evaluate("""() => { const out = [];
            for (const el of document.querySelectorAll('.jp-OutputArea *')) for (const a of el.attributes)
              if (a.name.toLowerCase().startsWith('on') || /^\\s*javascript:/i.test(a.value)) out.push(el.tagName + ' ' + a.name);
            return out; }""")
        texts = Watch.texts(page)
        missing = [f for f in ("op", "range", "module", "kernel", "collective", "pg") if not shown(texts, fields[f])]
        selected = page.locator(".nbprof-live-sel td.n").evaluate_all("els => els.map(e => e.title)")
        page.locator(".jp-Cell").nth(1).screenshot(path=str(artifacts / "hostile-jupyterlab.png"))
        lab.shutdown_kernel(page)
        page.close()
    assert hits == [] and made == []
    assert not missing, missing
    assert fields["op"] in selected and fields["range"] in selected


@in_browser
def test_compile_tab_names_run_nothing(watch, tmp_path):
    """The Compile tab (a saved profile's compile log: graph break reasons, code lines, frame and
    function names, recompile guards) with markup in every text: nothing runs, it reads as written."""
    import gzip

    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.model import TorchProfile

    data = Path(__file__).parent / "data" / "compile_cpu"
    run = json.loads((data / "run.json").read_text())
    payload = "<img src=x onerror=__pwned('compile')>"
    hit = []

    def poison(x, key=None):
        if isinstance(x, dict):
            return {k: poison(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [poison(v, key) for v in x]
        if isinstance(x, str) and key in ("loc", "restart_reasons", "recompile_reason", "co_name", "resume_code"):
            hit.append(key)
            return x + payload
        return x

    log = poison(run["compile_log"])
    p = TorchProfile.from_trace(read_trace_file(data / "trace.json.gz"), compile_log=log, code_names=run["code_names"])
    c = p.compilation()
    assert not c.empty and len(c.graph_breaks) and len(hit) > 20
    page = watch.open(Path(p.to_html(tmp_path / "page.html")), 1000)
    page.locator(".nbprof-tabs > label", has_text="Compile").click()
    page.wait_for_timeout(300)
    Watch.hover_everything(page)
    assert Watch.ran(page) == []
    cells = " ".join(page.locator(".nbprof-tabs table.dataTable td").all_inner_texts())
    assert payload in cells
    page.close()


# ---------------------------------------------------------------------- CUDA memory snapshots


def _hostile_snapshot(values: dict[str, str]) -> dict:
    """tests/snapshots.hand_snapshot with the file's strings hostile: every frame's filename and
    name (torch's frames, the frees'), the innermost frame of each allocation (its line in the
    chart's layers and legends: ``values["line3"]``, ...: short enough to be drawn whole), the
    segments' pool type, the allocator's settings (shown in the report's source line)."""
    from .snapshots import hand_snapshot

    snap = hand_snapshot()
    hostile = {"filename": values["frame_file"], "line": 3, "name": values["frame_name"]}
    entries = snap["device_traces"][0]
    allocations = {id(entries[i]["frames"]): entries[i]["frames"] for i in (1, 2, 5)}  # lines 3, 4, 5
    stacks = [e["frames"] for e in entries if "frames" in e] + [b["frames"] for s in snap["segments"]
                                                                 for b in s["blocks"]]
    for frames in stacks:
        for i, f in enumerate(frames):
            frames[i] = dict(hostile, line=f["line"])
    for frames in allocations.values():  # each allocation's innermost frame: its own file (no user code here)
        frames[0] = {"filename": values[f"line{frames[-1]['line']}"], "line": frames[-1]["line"], "name": "fn"}
    for seg in snap["segments"]:
        seg["segment_type"] = values["segment_type"]
    snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = values["alloc_conf"]
    return snap


# the frames' texts, each its own payload; the lines' files short and without a "/" that a short
# path would cut at (a line's label is drawn whole: its markup would be markup there)
SNAPSHOT_VALUES = {"frame_file": f"frame_file{PAYLOADS[0]}", "frame_name": f"frame_name{PAYLOADS[3]}",
                   "line3": PAYLOADS[1], "line4": PAYLOADS[8], "line5": PAYLOADS[13],
                   "segment_type": f"segment_type{PAYLOADS[6]}", "alloc_conf": f"conf{PAYLOADS[9]}"}


@in_browser
def test_snapshot_frames_and_settings_run_nothing_and_read_as_written(watch, tmp_path):
    """A memory snapshot's strings (its frames' files and functions, the lines the chart stacks,
    pool types, allocator settings) in its notebook report and figure, its standalone page
    (``nbprof view``) and the Memory snapshot tab of a torch report: nothing runs, the names read
    as written."""
    from nbprof.cli import main
    from nbprof.collect.snapshot import parse_snapshot

    from .hostile import outputs_page
    from .snapshots import write

    values = SNAPSHOT_VALUES
    path = write(_hostile_snapshot(values), tmp_path / "hostile.pickle")
    snap = nbprof.load_snapshot(path)
    torch_p = nbprof.load_trace(write_trace(tmp_path / "t.json", hostile_trace(_names())))
    torch_p.meta.snapshot = parse_snapshot(_hostile_snapshot(values), "--snapshot")
    assert main(["view", path, "--html", str(tmp_path / "page.html"), "-q"]) == 0
    pages = [outputs_page(tmp_path / "outputs.html", [snap._repr_mimebundle_(), snap.memory_curve()._repr_mimebundle_()]),
             tmp_path / "page.html", _page(tmp_path, torch_p._repr_mimebundle_()["text/html"], "torch.html")]
    for path in pages:
        page = watch.open(path, 1500)
        _open_all_tabs(page)
        Watch.hover_everything(page)
        assert Watch.ran(page) == [], path.name
        texts = Watch.texts(page)
        fields = ["frame_file", "frame_name", "line3", "line4", "line5"] + ([] if path.name == "torch.html" else ["alloc_conf"])
        assert [f for f in fields if not shown(texts, values[f])] == [], path.name
        if path.name == "outputs.html":  # plotly's own legend: the lines as text, not plotly's markup
            legend = [visible(t) for t in page.locator(".plot-container .legendtext").all_text_contents()]
            assert [f for f in ("line3", "line4", "line5") if not shown(legend, values[f])] == []
        page.close()
