"""Reports outside a live kernel: nbconvert HTML (with and without scripts) and to_html files.

Without scripts is how GitHub's preview and untrusted notebooks show an output: the summary and
the tables must still be there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nbprof

from .conftest import DATA

lab = pytest.importorskip("tests.lab")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed"),
]


def _page(context, url: str):
    page = context.new_page()
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
    page.goto(url)
    time.sleep(1.5)
    return page


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A notebook with a torch report and a cProfile report, executed and exported by nbconvert."""
    import nbformat

    root = tmp_path_factory.mktemp("export")
    shutil.copy(DATA / "cnn_train_cuda.trace.json.gz", root)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext nbprof\nimport nbprof"),
        nbformat.v4.new_code_cell("nbprof.load_trace('cnn_train_cuda.trace.json.gz')"),
        nbformat.v4.new_code_cell("%%cprofile\nsorted(str(i) for i in range(20000));"),
    ]
    nbformat.write(nb, root / "shared.ipynb")
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", "shared.ipynb"],
        cwd=root, check=True, capture_output=True, timeout=300,
    )
    return root / "shared.html"


def test_nbconvert_html_reads_with_scripts(exported):
    with lab.browser() as context:
        page = _page(context, exported.as_uri())
        assert page.locator(".nbprof-report").count() == 2
        assert page.locator("table.dataTable").count() >= 3  # interactive, offline
        assert "torch profile" in page.locator(".nbprof-summary").first.inner_text()
        # the timeline output falls back to its static SVG (nbconvert does not draw plotly JSON)
        assert page.locator("svg text", has_text="CUDA 0 stream 7").count() >= 1
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "nbconvert.png"), full_page=True)


def test_nbconvert_html_reads_without_scripts(exported):
    with lab.browser(javascript=False) as context:
        page = _page(context, exported.as_uri())
        summaries = page.locator(".nbprof-summary").all_inner_texts()
        assert any("torch profile" in s and "self CUDA" in s for s in summaries)
        assert any(s.startswith("cProfile") for s in summaries)
        text = page.locator(".nbprof-report").first.inner_text()
        assert "aten::convolution_backward" in text  # the static preview of the table
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "nbconvert-noscript.png"), full_page=True)


def test_standalone_html_opens_offline(tmp_path):
    profile = nbprof.load_trace(DATA / "cnn_train_cuda.trace.json.gz")
    path = profile.to_html(tmp_path / "report.html")
    with lab.browser() as context:
        page = _page(context, Path(path).as_uri())
        assert page.locator("table.dataTable").count() >= 3
        page.locator(".nbprof-tabs > label", has_text="Timeline").click()
        time.sleep(1.5)
        assert page.locator(".js-plotly-plot .main-svg").count() >= 1
        # hover shows a kernel's launching op
        page.screenshot(path=str(Path(__file__).parent / "artifacts" / "standalone.png"))
