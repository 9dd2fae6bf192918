"""The report in real JupyterLab, in headless Chromium: tabs, tables, sorting, timeline, controls.

Screenshots go to tests/artifacts/ (look at them when the report changes).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from .conftest import DATA, HAS_TORCH

lab = pytest.importorskip("tests.lab")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not HAS_TORCH, reason="needs torch"),
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

ARTIFACTS = Path(__file__).parent / "artifacts"

CELLS = [
    "%load_ext nbprof\nimport nbprof, torch",
    # 1: a live CPU profile with shapes and memory
    "%%torchprof --memory --shapes -o first\n"
    "for n in (16, 64, 256):\n"
    "    a = torch.randn(n, n)\n"
    "    for _ in range(3):\n"
    "        b = torch.relu(a @ a)\n",
    # 2: a recorded H100 profile: kernels, streams, memory
    "nbprof.load_trace('cnn_train_cuda.trace.json.gz')",
    # 3: the controls panel
    "nbprof.controls()",
    # 4: a run after the panel changed: no flags
    "%%torchprof -o second -q\nc = torch.ones(64, 64) * 3",
    # 5: cProfile (fib: pstats' ncalls "177/1", recursion)
    "%%cprofile -o cp\ndef f(n):\n    return sum(i * i for i in range(n))\n"
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n[f(2000) for _ in range(20)]; fib(10);",
]


def _notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, path)


def _run_cell(page, index: int) -> None:
    page.evaluate(
        """(i) => { const w = window.jupyterapp.shell.currentWidget;
                    w.content.activeCellIndex = i;
                    window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        index,
    )
    page.wait_for_function(
        """(i) => { const w = window.jupyterapp.shell.currentWidget;
                    const c = w.content.widgets[i];
                    return w.sessionContext.session.kernel.status === 'idle' && c.model.executionCount !== null
                        && !c.node.querySelector('.jp-InputPrompt').textContent.includes('*'); }""",
        arg=index,
        timeout=120_000,
    )


def _column(table, index: int) -> list[str]:
    return table.locator(f"tbody tr td:nth-child({index})").all_inner_texts()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    shutil.copy(DATA / "cnn_train_cuda.trace.json.gz", root)
    _notebook(root / "report.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(root) as server, lab.browser(1500, 1100) as context:
        page = lab.open_notebook(context, server, "report.ipynb")
        for i in range(4):
            _run_cell(page, i)
        time.sleep(2)
        yield page


def test_no_error_outputs(session):
    outputs = lab.cell_outputs(session)
    errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert not errors, errors
    assert "Error displaying widget" not in session.content()


def test_reports_have_tabs_and_tables(session):
    cell = session.locator(".jp-Cell").nth(1)
    labels = cell.locator(".nbprof-tabs > label").all_inner_texts()
    assert labels[:5] == ["Operators", "By input shape", "Memory", "Kernels", "Timeline"]
    assert cell.locator("table.dataTable").count() >= 3
    cuda = session.locator(".jp-Cell").nth(2)
    assert "Kernels" in cuda.locator(".nbprof-tabs > label").all_inner_texts()
    cuda.locator(".nbprof-tabs > label", has_text="Kernels").click()
    time.sleep(0.5)
    kernels = cuda.locator(".nbprof-panel:visible table.dataTable")
    assert kernels.count() == 1
    assert any("sm80_xmma" in t for t in _column(kernels, 1))
    # kernel names shortened by the table's script exactly as the Python twin does, full name on hover
    from nbprof.format import short_kernel_name

    spans = kernels.locator("tbody tr td:nth-child(1) span")
    pairs = [(spans.nth(i).inner_text(), spans.nth(i).get_attribute("title")) for i in range(spans.count())]
    assert len(pairs) >= 10 and any(full.startswith("void ") for _, full in pairs)
    assert all(shown == short_kernel_name(full, 60) for shown, full in pairs), pairs[:3]
    headers = kernels.locator("thead th").all_inner_texts()
    assert {"Grid", "Block", "Regs", "Occupancy %"} <= {h.strip() for h in headers}, headers
    session.locator(".jp-Cell").nth(2).screenshot(path=str(ARTIFACTS / "report-cuda-kernels.png"))


def test_clicking_a_header_sorts(session):
    cell = session.locator(".jp-Cell").nth(1)
    cell.locator(".nbprof-tabs > label", has_text="Operators").click()
    table = cell.locator(".nbprof-panel:visible table.dataTable").first
    headers = table.locator("thead th").all_inner_texts()
    calls = headers.index("Calls") + 1
    before = _column(table, 1)
    table.locator("thead th", has_text="Calls").click()
    time.sleep(0.5)
    after_names = _column(table, 1)
    after_calls = [int(x.replace(",", "")) for x in _column(table, calls)]
    assert after_names != before
    assert after_calls == sorted(after_calls)  # ascending after one click
    table.locator("thead th", has_text="Calls").click()
    time.sleep(0.5)
    desc = [int(x.replace(",", "")) for x in _column(table, calls)]
    assert desc == sorted(desc, reverse=True)
    # sorting a humanized column sorts by value, not by its text ("9.0 µs" < "1.00 ms")
    table.locator("thead th", has_text="Self CPU").nth(1).click()
    time.sleep(0.5)
    self_cpu_col = headers.index("Self CPU") + 1
    shown = _column(table, self_cpu_col)

    def us(text: str) -> float:
        v, unit = text.split()[0], text.split()[-1] if " " in text else "µs"
        return float(v) * {"µs": 1, "ms": 1e3, "s": 1e6}.get(unit, 1) if text != "0" else 0.0

    values = [us(t) for t in shown]
    assert values == sorted(values)  # ascending after one click, by value (DataTables' first direction)
    cell.screenshot(path=str(ARTIFACTS / "report-cpu-operators.png"))


def test_memory_tab_shows_the_curve(session):
    cell = session.locator(".jp-Cell").nth(2)
    cell.locator(".nbprof-tabs > label", has_text="Memory").click()
    time.sleep(0.5)
    panel = cell.locator(".nbprof-panel:visible")
    assert "peak" in (panel.locator("svg").first.text_content() or "")
    # the operators' memory, the blocks held at each device's peak (cuda:0, then the CPU), then
    # the blocks the profile left allocated (no --lines: no table by line)
    assert panel.locator("table.dataTable").count() == 4
    assert panel.get_by_text("Held on cuda:0 at its peak (70.68 MiB").count() == 1
    assert panel.get_by_text("Left allocated at the end:").count() == 1
    held = panel.locator("table.dataTable").nth(1)
    sizes = _column(held, 1)
    assert sizes[0] == "1.08 MiB" and len(sizes) == 10  # biggest first, ten a page
    cell.screenshot(path=str(ARTIFACTS / "report-cuda-memory.png"))


def test_timeline_renders(session):
    cell = session.locator(".jp-Cell").nth(2)
    cell.locator(".nbprof-tabs > label", has_text="Timeline").click()
    time.sleep(0.5)
    assert cell.locator(".nbprof-panel:visible svg").count() >= 1
    plots = cell.locator(".jp-OutputArea .js-plotly-plot .main-svg")
    assert plots.count() >= 1, "the zoomable timeline is shown under the report"
    cell.screenshot(path=str(ARTIFACTS / "report-cuda-timeline.png"))


def test_controls_panel_sets_the_next_runs_options(session):
    cell = session.locator(".jp-Cell").nth(3)
    toggles = cell.locator(".widget-toggle-button")
    assert toggles.count() == 4
    cuda = cell.locator(".widget-toggle-button", has_text="CUDA")
    assert cuda.is_disabled()  # no CUDA on this machine; the panel says why
    assert "CUDA off" in cell.inner_text()
    cell.locator(".widget-toggle-button", has_text="Memory").click()
    cell.locator(".widget-toggle-button", has_text="Shapes").click()
    time.sleep(0.5)
    assert "mod-active" in (cell.locator(".widget-toggle-button", has_text="Memory").get_attribute("class") or "")
    _run_cell(session, 4)
    collected = json.loads(lab.kernel_eval(session, "import json; print(json.dumps(second.collected))"))
    assert collected["memory"] is True and collected["shapes"] is True and collected["cuda"] is False
    cell.screenshot(path=str(ARTIFACTS / "controls.png"))


def test_cprofile_report(session):
    _run_cell(session, 5)
    cell = session.locator(".jp-Cell").nth(5)
    assert cell.locator(".nbprof-report").count() == 1
    table = cell.locator("table.dataTable").first
    assert any("(f)" in t for t in _column(table, 7))
    # ncalls as pstats prints it ("177/1": calls/primitive calls), sorted by the total calls
    calls = _column(table, 1)
    assert "177/1" in calls, calls
    table.locator("thead th", has_text="ncalls").click()
    time.sleep(0.5)
    totals = [int(x.split("/")[0].replace(",", "")) for x in _column(table, 1)]
    assert totals == sorted(totals) and "177/1" in _column(table, 1)
    # the zoomable flame icicle, drawn by JupyterLab's plotly.js: one box per call-tree node
    slices = cell.locator(".jp-OutputArea .js-plotly-plot g.slice")
    slices.first.wait_for(timeout=10_000)
    labels = " ".join(cell.locator(".jp-OutputArea .js-plotly-plot g.slice text").all_text_contents())
    assert slices.count() >= 4 and "sum" in labels and "cell" in labels, labels
    lab.full_screenshot(session, str(ARTIFACTS / "notebook.png"))


def test_every_tab_of_a_nine_tab_report_shows_its_panel(session, tmp_path):
    """A report with all nine tabs (stacks, ranges, steps, two ranks), in Chromium: clicking each
    tab, Timeline last, shows that tab's panel (visible, with a height) and hides the others."""
    from .test_report import ALL_TORCH_TABS, nine_tab_profile

    traces = tmp_path / "ranks"
    traces.mkdir()
    html = nine_tab_profile(traces).report().html(include_library=True)
    page_path = tmp_path / "nine.html"
    page_path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{html}</body></html>",
                         encoding="utf-8")
    page = session.context.new_page()  # the module's browser (one sync Playwright at a time)
    try:
        page.goto(page_path.as_uri())
        labels = page.locator(".nbprof-tabs > label")
        assert labels.all_inner_texts() == ALL_TORCH_TABS
        last = len(ALL_TORCH_TABS) - 1  # the Timeline
        for i in [*range(1, last + 1), 0, last]:
            labels.nth(i).click()
            time.sleep(0.2)
            panel = page.locator(f".nbprof-panel-{i}")
            box = panel.bounding_box()
            assert panel.is_visible() and box is not None and box["height"] > 0, ALL_TORCH_TABS[i]
            assert page.locator(".nbprof-panel:visible").count() == 1
        assert page.locator(f".nbprof-panel-{last} svg").first.is_visible()  # the timeline overview
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-nine-tabs-timeline.png"))
    finally:
        page.close()
