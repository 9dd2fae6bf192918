"""The tutorial notebooks in real JupyterLab, in headless Chromium: run all, no error output, and
the reports, tables, plots and widgets each notebook shows are drawn.

Full-page screenshots go to tests/artifacts/notebooks/ (look at them when a notebook changes).
The notebooks run in a copy of notebooks/ (files they write stay out of the repository).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import HAS_TORCH
import nbformat

from .test_notebooks import NOTEBOOKS, copy_notebooks

lab = pytest.importorskip("tests.lab")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_TORCH, reason="needs torch"),
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

ARTIFACTS = Path(__file__).parent / "artifacts" / "notebooks"

REPORT = "div.nbprof-report"
TABLE = "table.dataTable"
PLOT = ".jp-OutputArea .js-plotly-plot .main-svg"
WIDGET = ".jupyter-widgets"

# notebook -> {selector: the least number of elements drawn}
EXPECTED = {
    "01-quickstart.ipynb": {REPORT: 6, TABLE: 6, PLOT: 4, WIDGET: 1},
    "02-find-the-bottleneck.ipynb": {REPORT: 2, TABLE: 2, PLOT: 2},
    "03-pytorch-profiler-basics.ipynb": {REPORT: 5, TABLE: 6, PLOT: 5},
    "04-memory.ipynb": {REPORT: 4, TABLE: 4, PLOT: 4},
    "05-gpu-and-the-timeline.ipynb": {REPORT: 1, TABLE: 1, PLOT: 5},
    "06-long-training-loops.ipynb": {REPORT: 2, TABLE: 2, PLOT: 1},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = copy_notebooks(tmp_path_factory.mktemp("lab") / "notebooks")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with lab.jupyterlab(root) as s, lab.browser(1400, 1000) as context:
        yield s, context


def _scroll_top(page) -> None:
    page.evaluate("() => { for (const el of document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook'))"
                  " el.scrollTop = 0; }")
    time.sleep(0.5)


def _screenshots(page, stem: str, part_height: int = 1600) -> None:
    """The whole notebook from the top, and the same in parts of a readable size."""
    _scroll_top(page)
    lab.full_screenshot(page, str(ARTIFACTS / f"{stem}.png"))  # collapses the sidebar, grows the viewport
    _scroll_top(page)
    page.screenshot(path=str(ARTIFACTS / f"{stem}.png"), full_page=True)
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    for old in ARTIFACTS.glob(f"{stem}-part*.png"):
        old.unlink()
    for i, y in enumerate(range(0, height, part_height)):
        page.screenshot(path=str(ARTIFACTS / f"{stem}-part{i + 1}.png"),
                        clip={"x": 0, "y": y, "width": width, "height": min(part_height, height - y)})


def _count(page, selector: str) -> int:
    return page.evaluate("(s) => document.querySelectorAll(s).length", selector)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_renders_in_jupyterlab(server, name):
    s, context = server
    page = lab.open_notebook(context, s, name)
    try:
        lab.run_all(page, timeout_s=420)
        time.sleep(2)  # let plotly and the widget manager draw
        outputs = lab.cell_outputs(page)
        errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
        assert not errors, [f"{e.get('ename')}: {e.get('evalue')}" for e in errors]
        assert any(outputs), "no outputs at all"
        html = page.content()
        assert "Error displaying widget" not in html
        assert "Javascript Error" not in html
        found = {sel: _count(page, sel) for sel in EXPECTED[name]}
        heights = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea .js-plotly-plot')]"
                                ".map(el => Math.round(el.getBoundingClientRect().height))")
        assert all(h >= 150 for h in heights), f"plots drawn too small: {heights}"
        missing = {sel: (found[sel], least) for sel, least in EXPECTED[name].items() if found[sel] < least}
        _screenshots(page, Path(name).stem)
        assert not missing, f"drawn (found, expected at least): {missing}"
        stderr = [o.get("text", "") for cell in outputs for o in cell
                  if o.get("output_type") == "stream" and o.get("name") == "stderr"]
        assert not [t for t in stderr if "nbprof:" in t], stderr  # nbprof's own warnings
        # the students' notebook, exercises not done: every check cell says so with "✘"
        code_cells = [c for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells if c.cell_type == "code"]
        assert len(code_cells) == len(outputs)
        verdicts = ["".join(o.get("text", "") for o in out if o.get("output_type") == "stream")
                    for cell, out in zip(code_cells, outputs) if "exercise-check" in cell.metadata.get("tags", [])]
        assert len(verdicts) >= 2 and all("✘" in v and "✔" not in v for v in verdicts), verdicts
    finally:
        page.close()
