"""Issue 40's user in real JupyterLab, in headless Chromium: an evaluation loop that keeps a score
per batch without ``torch.no_grad()``, under ``%%torchprof --memory --lines``. The report's
finding names the line and what it keeps a step; the Memory tab lists what the cell left allocated,
by line, and the steps; the fixed cell (``no_grad`` and ``.item()``) is quiet and left nothing.

Counted by hand: four ``Linear(512, 512)`` on a 256 x 512 batch; the last three save their input
(512 KiB each) and the score is 4 bytes: 1,572,868 B a step ("1.50 MiB"), 8 steps.
Screenshots: tests/artifacts/memory-leak-cell.png, memory-fixed-cell.png.
"""

from __future__ import annotations

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

SETUP = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)])
batches = [torch.randn(256, 512) for _ in range(8)]"""
LEAK = """%%torchprof --memory --lines -o evaluation
scores = []
for xb in batches:
    scores.append(model(xb).mean())"""
FIXED = """%%torchprof --memory --lines -o fixed
scores = []
with torch.no_grad():
    for xb in batches:
        scores.append(model(xb).mean().item())"""


def _memory_tab(cell):
    cell.locator(".nbprof-tabs").first.wait_for(timeout=120_000)
    cell.locator(".nbprof-tabs > label", has_text="Memory").first.click()
    panel = cell.locator(".nbprof-panel:visible").first
    panel.wait_for(timeout=30_000)
    return panel


def test_the_leak_cell_names_its_line_and_the_fixed_cell_is_quiet(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in ("%load_ext nbprof", SETUP, LEAK, FIXED)]
    nbformat.write(nb, tmp_path / "leak.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(tmp_path) as server, lab.browser(1400, 3200) as context:
        page = lab.open_notebook(context, server, "leak.ipynb")
        lab.run_all(page)
        leak, fixed = page.locator(".jp-Cell").nth(2), page.locator(".jp-Cell").nth(3)

        findings = leak.locator(".nbprof-finding").all_inner_texts()
        [growth] = [f for f in findings if "Memory grows step after step" in f]
        assert "8 of 8 steps (the loop at In [3] line 3)" in growth
        assert "In [3] line 4 scores.append(model(xb).mean()): 1.50 MiB a step" in growth.replace("`", "")
        assert "evaluation loop without torch.no_grad()" in growth
        panel = _memory_tab(leak)
        text = panel.inner_text()
        assert "Left allocated at the end: 32 blocks allocated during the profile (12.00 MiB on cpu)" in text
        assert "Memory per step (the loop at In [3] line 3)" in text
        by_line = panel.locator("table.dataTable").nth(2)  # operators, held at the peak, then by line
        by_line.wait_for(timeout=30_000)
        headers = [h.strip() for h in by_line.locator("thead th").all_inner_texts()]
        row = by_line.locator("tbody tr").first.locator("td").all_inner_texts()
        assert row[headers.index("Line")] == "In [3] line 4" and row[headers.index("Blocks")] == "32"
        assert row[headers.index("Size")] == "12.00 MiB"
        leak.screenshot(path=str(ARTIFACTS / "memory-leak-cell.png"))

        assert not [f for f in fixed.locator(".nbprof-finding").all_inner_texts() if "Memory grows" in f]
        panel = _memory_tab(fixed)
        assert "Left allocated at the end: nothing allocated during the profile" in panel.inner_text()
        fixed.screenshot(path=str(ARTIFACTS / "memory-fixed-cell.png"))
