"""The tutorial notebooks in real JupyterLab, in headless Chromium: run all, no error output, and
the reports, tables, plots and widgets each notebook shows are drawn.

The students' notebooks run there once per session (tests/tutorials.py), and that run is also
the one tests/test_notebooks.py judges (nbval's output check, the exercises' "✘" verdicts).
Full-page screenshots go to tests/artifacts/notebooks/ (look at them when a notebook changes).
"""

from __future__ import annotations

import pytest

from .conftest import HAS_TORCH
from .tutorials import PLOT, REPORT, TABLE, WIDGET

lab = pytest.importorskip("tests.lab")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.notebook,
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_TORCH, reason="needs torch"),
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]

# notebook -> {selector: the least number of elements drawn}
EXPECTED = {
    "01-quickstart.ipynb": {REPORT: 6, TABLE: 6, PLOT: 4, WIDGET: 1},
    "02-find-the-bottleneck.ipynb": {REPORT: 2, TABLE: 2, PLOT: 2},
    "03-pytorch-profiler-basics.ipynb": {REPORT: 5, TABLE: 6, PLOT: 5},
    "04-memory.ipynb": {REPORT: 4, TABLE: 4, PLOT: 4},
    "05-gpu-and-the-timeline.ipynb": {REPORT: 1, TABLE: 1, PLOT: 5},
    "06-long-training-loops.ipynb": {REPORT: 2, TABLE: 2, PLOT: 1},
    "07-torch-compile.ipynb": {REPORT: 3, TABLE: 6, PLOT: 3},
    "08-lightning-and-accelerate.ipynb": {REPORT: 4, TABLE: 4, PLOT: 3},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_renders_in_jupyterlab(tutorial_runs, name):
    run = tutorial_runs.get(name)
    assert run.runner == "jupyterlab"
    outputs = [cell.outputs for cell in run.ran.cells if cell.cell_type == "code"]
    errors = [o for cell in outputs for o in cell if o.output_type == "error"]
    assert not errors, [f"{e.get('ename')}: {e.get('evalue')}" for e in errors]
    assert any(outputs), "no outputs at all"
    assert not run.page_errors
    assert all(h >= 150 for h in run.plot_heights_px), f"plots drawn too small: {run.plot_heights_px}"
    missing = {sel: (run.drawn[sel], least) for sel, least in EXPECTED[name].items() if run.drawn[sel] < least}
    assert not missing, f"drawn (found, expected at least): {missing}"
    stderr = [o.text for cell in outputs for o in cell if o.output_type == "stream" and o.name == "stderr"]
    assert not [t for t in stderr if "nbprof:" in t], stderr  # nbprof's own warnings
