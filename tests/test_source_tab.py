"""The Source tab (``--lines``): the code as a heat map and a sortable table, read back from the HTML
by the standard library's parser; the user's text escaped; nbconvert's static HTML; and one look
at it in JupyterLab in headless Chromium (tests/artifacts/source-tab.png)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from . import htmltext
from .conftest import reports, run

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).parent / "artifacts"

# a function in one cell (ending with a line that never runs, with text that would be markup), the
# profiled cell in the next
DEFINE = '''import time
def step(n):
    label = "</td></tr><img src=x onerror=alert(1)>"  # the user's text, shown as text
    for _ in range(n):
        time.sleep(0.004)
    if n >= 0:
        return label
    raise ValueError("never runs")  # the function's last line, never run'''
PROFILED = "%%cprofile --lines -o cp\nout = step(5)\nmore = [step(1) for _ in range(2)]"


@pytest.fixture
def profiled(shell):
    run(shell, DEFINE)
    result, captured = run(shell, PROFILED)
    assert result.error_in_exec is None
    [report] = reports(captured)
    return shell.user_ns["cp"], report


def _labels(markup: str) -> list[str]:
    return [htmltext.text(m) for m in re.findall(r"<label for=[^>]*>(.*?)</label>", markup)]


def _checked(markup: str) -> int:
    inputs = re.findall(r'<input type="radio"[^>]*>', markup)
    return next(i for i, tag in enumerate(inputs) if " checked" in tag)


def test_the_tab_shows_the_cell_and_each_function_whole(profiled):
    cp, report = profiled
    html = report["text/html"]
    labels = _labels(html)
    assert labels == ["Functions", "Source", "Callers & callees", "Flame"]
    assert _checked(html) == 1  # with --lines the report opens on the Source tab
    blocks = htmltext.texts_of(html, "nbprof-src")
    assert len(blocks) == 2  # the cell, then step
    cell, function = blocks
    for line in PROFILED.splitlines():  # the cell as typed, magic line included
        assert line in cell
    for line in DEFINE.splitlines()[1:]:  # step whole, from its def to its last line, which never ran
        assert line.strip() in function
    assert "import time" not in function  # the cell's other code is not the function's
    # each block's title: the profiled cell as typed (its top level), then the function and where
    # it is defined (the cell before it, line 2)
    titles = [htmltext.text(t) for t in re.findall(r'<div style="margin:10px 0 2px;font-weight:600">(.*?)</div>', html)]
    assert len(titles) == 2 and re.fullmatch(r"In \[\d+\] \(the code as typed\)", titles[0]), titles
    assert re.fullmatch(r"step · In \[\d+\] line 2", titles[1]), titles
    # the hottest line (by own time): the sleep, 7 hits, highlighted in its code
    [hot] = htmltext.texts_of(html, "nbprof-src-hot")
    assert "time.sleep(0.004)" in hot and "◀ hottest" in hot
    [row] = re.findall(r'<tr id="nbprof-\d+-hot".*?</tr>', html, flags=re.S)
    cells = [htmltext.text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
    assert cells[:2] == ["5", "7"]  # its line number in the cell that defined step, its hits
    assert html.count('class="nbprof-src-hot"') == 1
    summary = htmltext.text(html)
    assert "hottest line: In [" in summary and "line 5 time.sleep(0.004)" in summary


def test_the_numbers_are_the_line_table_s(profiled):
    cp, report = profiled
    html = report["text/html"]
    lines = cp.lines()
    panel = html.split('class="nbprof-panel nbprof-panel-')[2]  # the Source tab's panel (the second)
    [table] = re.findall(r'<table class="nbprof-static".*?</table>', panel, flags=re.S)
    head = [htmltext.text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    assert head == ["Line", "Source", "Hits", "Own time", "% of wall", "Time", "Per hit", "Function"]
    from .test_mutants_snapshot import dt_tables

    [interactive] = dt_tables(panel)  # the same table, sortable, as DataTables gets it
    assert interactive["caption"].startswith("every line that ran, hottest first; click a header to sort")
    rows = [[htmltext.text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)[1:]]
    # hottest first: the rows in the order of their own time, every line that ran
    order = lines.sort_values("self_time_us", ascending=False, kind="stable")
    cut = [s.strip() if len(s.strip()) <= 70 else s.strip()[:67] + "..." for s in order["source"]]  # 70: the column's
    assert [r[1] for r in rows] == cut
    assert [int(r[2].replace(",", "")) for r in rows] == order["hits"].tolist()
    # the heat map's bars: the hottest line's own-time bar is the longest, at full width
    widths = [float(w) for w in re.findall(r"width:([\d.]+)px;background:#e8710a;vertical-align", html)]
    assert max(widths) == pytest.approx(48.0)


def test_the_user_s_text_stays_text(profiled):
    cp, report = profiled
    html = report["text/html"]
    assert "img" not in htmltext.tags(html)
    assert '<img src=x' not in html
    function = htmltext.texts_of(html, "nbprof-src")[1]
    assert 'label = "</td></tr><img src=x onerror=alert(1)>"' in function  # shown as typed


def test_text_report_without_lines_and_with(shell):
    run(shell, DEFINE)
    result, captured = run(shell, "%%cprofile\nstep(1)")
    [report] = reports(captured)
    assert "top lines" not in report["text/plain"]
    assert _labels(report["text/html"]) == ["Functions", "Source", "Callers & callees", "Flame"]
    assert _checked(report["text/html"]) == 0
    assert "Lines were not followed: run %%cprofile --lines" in htmltext.text(report["text/html"])


def test_a_torch_profile_with_lines_has_the_tab(tmp_path):
    """A TorchProfile whose lines() has rows (the documented shape, the outside row among them):
    the tab shows its columns, the code of the cell from meta.sources, the outside row in the table
    only. The live side (%%torchprof --lines) is tests/test_lines_torch.py's."""
    from .synthetic import training_loop

    p = training_loop(2, kernel_us=500).load(tmp_path)
    cell = "<ipython-input-7-abc>"
    text = "%%torchprof --lines\ny = x @ w\nx = torch.relu(y)\n"
    lines = pd.DataFrame(
        [["In [7]", cell, 2, "<module>", 1, "y = x @ w", 2, 80.0, 80.0, 1000.0, 1000.0, 0],
         ["In [7]", cell, 3, "<module>", 1, "x = torch.relu(y)", 2, 10.0, 10.0, 0.0, 0.0, 0],
         [None, None, None, "(outside your code)", None, None, 0, 30.0, 30.0, 0.0, 0.0, 0]],
        columns=["cell", "file", "line", "function", "function_line", "source", "ops", "self_cpu_us", "cpu_total_us",
                 "self_device_us", "device_total_us", "alloc_bytes"])
    for c in ("line", "function_line"):  # as lines() has them: the outside row has neither
        lines[c] = pd.array([None if v != v or v is None else int(v) for v in lines[c]], dtype="Int64")
    p.lines = lambda: lines.copy()
    p.meta.sources = {cell: text}
    html = p.report().html(include_library=False)
    labels = _labels(html)
    assert "Source" in labels and _checked(html) == labels.index("Source")
    [block] = htmltext.texts_of(html, "nbprof-src")
    assert "%%torchprof --lines" in block and "x = torch.relu(y)" in block
    assert "Self device" in block and "Allocated" not in block  # no memory recorded: no column
    [hot] = htmltext.texts_of(html, "nbprof-src-hot")
    assert "y = x @ w" in hot
    assert "outside your code" in htmltext.text(html)  # the table's last row
    assert "top lines by self device time" in p.report().text()
    # without lines: no tab (a torch report without --lines is as before)
    (tmp_path / "plain").mkdir()
    plain = training_loop(2, kernel_us=500).load(tmp_path / "plain")
    assert "Source" not in _labels(plain.report().html(include_library=False))


@pytest.mark.notebook
def test_nbconvert_static_html_has_the_code_view(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext nbprof"), nbformat.v4.new_code_cell(DEFINE),
                nbformat.v4.new_code_cell(PROFILED)]
    nbformat.write(nb, tmp_path / "lines.ipynb")
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", "lines.ipynb"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    html = (tmp_path / "lines.html").read_text(encoding="utf-8")
    blocks = htmltext.texts_of(html, "nbprof-src")
    assert len(blocks) == 2 and "time.sleep(0.004)" in blocks[1] and "more = [step(1)" in blocks[0]
    assert len(htmltext.texts_of(html, "nbprof-src-hot")) == 1
    assert "img" not in htmltext.tags(html.split("<body", 1)[1])


lab = pytest.importorskip("tests.lab")


@pytest.mark.browser
@pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")
def test_in_jupyterlab_the_tab_shows_and_sorts(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext nbprof"), nbformat.v4.new_code_cell(DEFINE),
                nbformat.v4.new_code_cell(PROFILED)]
    nbformat.write(nb, tmp_path / "lines.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(tmp_path) as server, lab.browser(1400, 1300) as context:
        page = lab.open_notebook(context, server, "lines.ipynb")
        lab.run_all(page)
        cell = page.locator(".jp-Cell").nth(2)
        panel = cell.locator(".nbprof-panel:visible")
        panel.locator("table.dataTable").first.wait_for(timeout=30_000)
        assert cell.locator(".nbprof-tabs > input:checked + label").inner_text() == "Source"
        assert panel.locator(".nbprof-src").count() == 2 and panel.locator(".nbprof-src-hot").is_visible()
        assert "time.sleep(0.004)" in panel.locator(".nbprof-src-hot").inner_text()
        table = panel.locator("table.dataTable").first
        headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
        hits_at = headers.index("Hits") + 1

        def hits() -> list[int]:
            return [int(x.replace(",", "")) for x in table.locator(f"tbody tr td:nth-child({hits_at})").all_inner_texts()]

        assert hits()[0] == 7  # opened on the hottest line: the sleep
        table.locator("thead th", has_text="Hits").click()
        time.sleep(0.5)
        assert hits() == sorted(hits())  # one click: ascending, by value
        table.locator("thead th", has_text="Hits").click()
        time.sleep(0.5)
        assert hits() == sorted(hits(), reverse=True)
        cell.screenshot(path=str(ARTIFACTS / "source-tab.png"))


MODEL = """import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 512)
        self.fc2 = torch.nn.Linear(512, 10)

    def forward(self, x):
        h = self.fc1(x).relu()
        h = h @ torch.eye(512)
        return self.fc2(h)
net = Net()
x = torch.randn(64, 256)"""  # the cell's top level right after forward, as issue 39 found it drawn inside

TRAIN = """%%torchprof --lines -o p
for _ in range(5):
    loss = net(x).square().mean()
    loss.backward()
    total = loss.item()"""


@pytest.mark.browser
@pytest.mark.skipif(not lab.chromium_available(), reason="Debian's chromium is not installed")
def test_in_jupyterlab_a_model_from_an_earlier_cell_shows_its_forward_line_by_line(tmp_path):
    """Issue 34's user: a model defined in one cell, trained under ``%%torchprof --lines`` in the
    next. The Source tab shows the cell and ``forward`` whole, each of forward's three lines with
    its 5 calls' operators (counted by hand: one ``aten::linear`` + ``aten::relu``, one
    ``aten::eye`` + ``aten::matmul``, one ``aten::linear`` per call)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext nbprof"), nbformat.v4.new_code_cell(MODEL),
                nbformat.v4.new_code_cell(TRAIN)]
    nbformat.write(nb, tmp_path / "model.ipynb")
    ARTIFACTS.mkdir(exist_ok=True)
    with lab.jupyterlab(tmp_path) as server, lab.browser(1400, 1500) as context:
        page = lab.open_notebook(context, server, "model.ipynb")
        lab.run_all(page)
        cell = page.locator(".jp-Cell").nth(2)
        cell.locator(".nbprof-tabs").first.wait_for(timeout=120_000)
        cell.locator(".nbprof-tabs > label", has_text="Source").click()
        panel = cell.locator(".nbprof-panel:visible")
        panel.locator(".nbprof-src").first.wait_for(timeout=30_000)
        code = panel.locator(".nbprof-src").all_inner_texts()
        assert len(code) == 2  # the cell, then forward (from the earlier cell)
        assert "loss.item()" in code[0] and "h = h @ torch.eye(512)" in code[1]
        assert "def __init__" not in code[1]  # only the function with time in it, whole
        assert "net = Net()" not in code[1] and "x = torch.randn" not in code[1]  # and nothing after it
        table = panel.locator("table.dataTable").first
        table.wait_for(timeout=30_000)
        headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
        line_at, ops_at = headers.index("Line"), headers.index("Ops")
        rows = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
        ops = {r[line_at]: int(r[ops_at].replace(",", "")) for r in rows}
        assert (ops["In [2] line 10"], ops["In [2] line 11"], ops["In [2] line 12"]) == (10, 10, 5)
        assert ops["In [3] line 5"] == 5  # .item(): aten::item once per step
        cell.screenshot(path=str(ARTIFACTS / "source-tab-model.png"))


# a class in one cell, its instance made at the cell's top level right after it (no blank line);
# a decorated method with a nested function at its end; a method whose docstring has a line at
# column 0
CLASS_CELL = '''import functools
class Net:
    def __init__(self):
        self.k = 3

    @functools.lru_cache(maxsize=None)
    def cached(self, n):
        def inner(m):
            return m + 1
        return inner(n)

    def forward(self, n):
        """Sums.
Its docstring's second line starts at column 0."""
        total = 0
        for i in range(n):
            total += i * self.k
        return total
net = Net()
x = 41'''


def _block_rows(html: str) -> list[dict[int, str]]:
    """Each code block of the Source tab: {line number: code} as its rows show them."""
    out = []
    for table in re.findall(r'<table class="nbprof-src".*?</table>', html, flags=re.S):
        rows = {}
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], flags=re.S):
            tds = [htmltext.text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
            if tds[0].isdigit():
                rows[int(tds[0])] = tds[-1].replace(" ◀ hottest", "")
        out.append(rows)
    return out


def test_a_method_s_block_ends_where_the_method_does(shell):
    """Each block is its function whole and nothing more: not the module-level lines after the
    class (issue 39: ``net = Net()`` and ``x = ...`` drawn as part of ``forward``), not the lines
    of the function around a nested one."""
    run(shell, CLASS_CELL)
    result, captured = run(shell, "%%cprofile --lines -o cpn\nnet.forward(1000)\nnet.cached(2)")
    assert result.error_in_exec is None
    [report] = reports(captured)
    blocks = _block_rows(report["text/html"])
    assert len(blocks) == 4  # the cell, forward, cached, inner
    lines = CLASS_CELL.splitlines()
    # forward: its def (line 12) to its return (18); cached: its decorator (its function_line, 6)
    # to the return after the nested def (10); inner: its two lines (8-9). Counted by hand.
    for name, first, last in (("forward", 12, 18), ("cached", 6, 10), ("inner", 8, 9)):
        [rows] = [b for b in blocks[1:] if min(b) == first]
        assert f"def {name}(" in rows[first + (name == "cached")]
        assert rows == {n: lines[n - 1] for n in range(first, last + 1)}, name


def test_the_share_column_reads_the_metric_once_not_per_row(shell, monkeypatch):
    """The Source table's share column: the line metric and its total computed once per table,
    not once per row (quadratic in the rows). Counted on the real profile at two sizes."""
    from nbprof.views.tabs import source

    calls = []
    real = source.line_metric

    def counted(lines):
        calls.append(len(lines))
        return real(lines)

    monkeypatch.setattr(source, "line_metric", counted)
    counts = []
    for n in (5, 60):
        body = "\n".join(f"v{i} = sum(range({i} * 50))" for i in range(n))
        result, _ = run(shell, f"%%cprofile -q --lines -o cps\n{body}")
        assert result.error_in_exec is None
        cps = shell.user_ns["cps"]
        assert len(cps.lines()) >= n
        calls.clear()
        source.render(cps.report())
        counts.append(len(calls))
    assert counts[0] == counts[1] and counts[0] <= 6, counts


@pytest.mark.parametrize("text,first,end", [
    # counted by hand: (the text, the function's first line, its last line)
    ("class A:\n    def f(self):\n        return 1\na = A()\n", 2, 3),
    ("def f():\n    x = 1\n\n    return x\n\n\ny = 2\n", 1, 4),
    ("@dec\n@dec2(1,\n      2)\ndef f():\n    pass\nf()\n", 1, 5),
    ("async def f():\n    await g()\nz = 1\n", 1, 2),
    ("def f():\n    s = '''\nflush left in a string\n'''\n    return s\nq = 0\n", 1, 5),
    ("def outer():\n    def inner():\n        return 1\n    return inner\n", 2, 3),
    ("%%cprofile --lines\ndef f():\n    return 1\n%time f()\n!ls\nf()\n", 2, 3),  # IPython syntax around it
    ("if True:\n    def f():\n        return 1\nelse:\n    def f():\n        return 2\n", 2, 3),
    ("def f(): return 1\ng = 2\n", 1, 1),
    ("f = lambda x: x\n", 1, None),  # no function starts there
    ("def f(:\n    pass\n", 1, None),  # not Python
])
def test_function_end_from_the_ast(text, first, end):
    from nbprof.views.tabs.source import function_end

    assert function_end(text.splitlines(), first) == end
