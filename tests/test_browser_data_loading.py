"""The DataLoader's workers as a new user sees them (issue 41): JupyterLab in headless Chromium,
a starved loop and a balanced one, the Data loading tab, the lanes on the timeline, the finding.

Screenshots go to tests/artifacts/ (data-loading-*.png): look at them when these views change.
"""

from __future__ import annotations

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

DATASET = '''\
import time

import torch


def augment(x, nap):
    time.sleep(nap)  # a slow transform (decoding an image, say)
    return x * 2


class Images(torch.utils.data.Dataset):
    def __init__(self, n, nap):
        self.n, self.nap = n, nap

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return augment(torch.randn(64), self.nap), i % 10
'''

CELLS = [
    "%load_ext nbprof\nimport time, torch\nfrom torch.utils.data import DataLoader\nfrom images import Images",
    # 1: starved: one worker takes 40 ms a batch (8 samples x 5 ms); the loop does nothing else
    "%%torchprof -o starved\n"
    "train_loader = DataLoader(Images(96, 0.005), batch_size=8, num_workers=1)\n"
    "for xb, yb in train_loader:\n"
    "    loss = xb.sum()",
    # 2: balanced: four workers take 1.6 ms a batch, the loop's step 200 ms (a batch's trip from a
    # worker takes up to ~10 ms on a machine busy with other jobs: still well under 10 % of a step)
    "%%torchprof -o balanced\n"
    "fed_loader = DataLoader(Images(48, 0.0002), batch_size=8, num_workers=4)\n"
    "for xb, yb in fed_loader:\n"
    "    time.sleep(0.2)",
    # 3: the same starved loop under %%cprofile
    "%%cprofile -o cp\n"
    "for xb, yb in DataLoader(Images(48, 0.005), batch_size=8, num_workers=2):\n"
    "    loss = xb.sum()",
]


def _notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-data")
    (root / "images.py").write_text(DATASET)
    _notebook(root / "loaders.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(root) as server, lab.browser(1500, 1100) as context:
        page = lab.open_notebook(context, server, "loaders.ipynb")
        lab.run_all(page)
        time.sleep(2)
        yield page
        lab.shutdown_kernel(page)


def _cell(page, i: int):
    return page.locator(".jp-Cell").nth(i)


def test_no_error_outputs(page):
    outputs = lab.cell_outputs(page)
    errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert not errors, errors


def test_the_starved_loop_says_so(page):
    cell = _cell(page, 1)
    text = cell.locator(".nbprof-report").inner_text()
    assert "The loop waited for train_loader's batches" in text
    assert "A worker takes" in text and "workers would keep up; it has 1" in text
    assert "augment" in text  # what takes the workers' time (time.sleep, called from augment)
    cell.screenshot(path=str(ARTIFACTS / "data-loading-starved-report.png"))


def test_the_data_loading_tab(page):
    cell = _cell(page, 1)
    cell.locator(".nbprof-tabs > label", has_text="Data loading").click()
    time.sleep(0.8)
    panel = cell.locator(".nbprof-panel:visible")
    text = panel.inner_text()
    assert "train_loader" in text and "1 worker, fork" in text and "Inside the workers" in text
    tables = panel.locator("table.dataTable")
    assert tables.count() == 2  # the workers, their functions
    functions = tables.nth(1).inner_text()
    assert "augment" in functions and "__getitem__" in functions
    lanes = panel.locator("svg").first.text_content() or ""
    assert "train_loader: main process" in lanes and "train_loader: worker 0" in lanes
    cell.screenshot(path=str(ARTIFACTS / "data-loading-tab.png"))


def test_the_lanes_on_the_timeline(page):
    cell = _cell(page, 1)
    cell.locator(".nbprof-tabs > label", has_text="Timeline").click()
    time.sleep(0.8)
    overview = cell.locator(".nbprof-panel:visible svg").first.text_content() or ""
    assert "train_loader: worker 0" in overview and "waiting for batch" in overview
    plot = cell.locator(".jp-OutputArea .js-plotly-plot")
    assert plot.count() >= 1, "the zoomable timeline is shown under the report"
    assert "train_loader: worker 0" in (plot.first.text_content() or "")
    cell.screenshot(path=str(ARTIFACTS / "data-loading-timeline.png"))


def test_the_balanced_loop_is_quiet(page):
    cell = _cell(page, 2)
    text = cell.locator(".nbprof-report").inner_text()
    assert "waited for fed_loader's batches" not in text
    assert "Data loading" in cell.locator(".nbprof-tabs > label").all_inner_texts()
    cell.screenshot(path=str(ARTIFACTS / "data-loading-balanced-report.png"))


def test_the_cprofile_report_has_the_tab_and_lanes(page):
    cell = _cell(page, 3)
    cell.locator(".nbprof-tabs > label", has_text="Data loading").click()
    time.sleep(0.8)
    panel = cell.locator(".nbprof-panel:visible")
    lanes = panel.locator("svg").first.text_content() or ""
    assert "worker 1" in lanes and "main process" in lanes
    # a cProfile report lists no findings above its tabs: the tab says what data_bound says
    assert "The loop waited for DataLoader 1's batches" in panel.inner_text()
    cell.screenshot(path=str(ARTIFACTS / "data-loading-cprofile-tab.png"))
