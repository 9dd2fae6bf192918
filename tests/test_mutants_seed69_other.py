"""What seed 69's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: the status line of a big profile that nbprof's Lightning profiler draws, the note of a torch
session ended by code nbprof could not see and the graph break of a ``torch.compile`` in a live
``%%torchprof`` (torch's own counters), in a real IPython shell; the columns of the Source tab's code
view around a gap, read back by the standard library's HTML parser."""

from __future__ import annotations

import html.parser
import importlib.util

import pytest

from .conftest import needs_torch, reports, run

# ---------------------------------------------------------------- integrations.lightning.Profiler._finish


@pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"), reason="needs pytorch-lightning")
def test_the_lightning_profilers_big_report_says_it_is_drawing_it(shell, monkeypatch):
    """nbprof.lightning.Profiler in IPython, its profile taken as big (the threshold at 0 bytes, as
    tests/test_magics.py does for ``%%torchprof``): while the report is drawn the status line says
    "nbprof: drawing the report (... s)", then it is cleared and the one report is shown."""
    import nbprof
    from nbprof.views import progress

    from .lightning_fit import PACKAGES, fit

    monkeypatch.setattr(progress, "BIG_TRACE_BYTES", 0)
    shell.user_ns.update(fit=fit, package=PACKAGES[0], nbprof=nbprof)
    result, captured = run(shell, "prof = nbprof.lightning.Profiler()\ntrainer = fit(package, prof, steps=2)")
    assert result.success, result.error_in_exec
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    status = [t for t in texts if t.startswith("nbprof: ")]
    assert any(t.startswith("nbprof: drawing the report (") for t in status), status
    assert texts[-1] == ""  # cleared once the report is on screen
    assert len(reports(captured)) == 1


# ---------------------------------------------------------------- run.runner.takeover_note


@needs_torch
def test_a_torch_session_ended_by_unseen_code_is_said_whole(shell):
    """The cell ends nbprof's torch session itself (``torch.autograd._disable_profiler()``), where
    nbprof sees no profiler start: the note says so, and that torch kept nothing of what it was
    recording, in these words (written out by hand)."""
    result, _ = run(shell, "%%torchprof -q -o p69\nimport torch\nx = torch.ones(4, 4)\n"
                           "torch.autograd._disable_profiler()\nz = x + 1")
    assert result.error_in_exec is None
    assert shell.user_ns["p69"].meta.notes == [
        "nbprof's torch session was ended during the cell by code nbprof could not see: torch kept nothing of "
        "the part it was recording, so this report leaves it out"]


# ---------------------------------------------------------------- run.runner.torch_profile


@needs_torch
def test_a_live_torchprofs_compile_tab_has_the_graph_break_torch_counted(shell):
    """A function with a ``print`` (Dynamo cannot trace it) compiled with the eager backend (Dynamo
    only) and called once in ``%%torchprof``: torch's own counters count one graph break more after
    the cell; the profile's compilation has that one break, at the print line of the cell, with
    Dynamo's reason: read from the compile log the cell collected (the trace has no reasons)."""
    from torch._dynamo.utils import counters

    before = sum(counters["graph_break"].values())
    code = ("%%torchprof -q -o q69\nimport torch\ndef breaks69(x):\n    y = x * 2\n    print('side')\n"
            "    return y + 1\nout = torch.compile(breaks69, backend='eager')(torch.ones(3))")
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    assert sum(counters["graph_break"].values()) - before == 1
    comp = shell.user_ns["q69"].compilation()
    assert comp.has_log
    [gb] = comp.graph_breaks.to_dict("records")
    assert gb["frame"] == "breaks69" and gb["code"] == "print('side')"
    assert gb["reason"] == "Failed to trace builtin operator"


# ---------------------------------------------------------------- views.tabs.source._block_html


class _RowSpans(html.parser.HTMLParser):
    """Per ``table.nbprof-src``: the columns each row spans (its cells' colspans added up)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[int]] = []
        self.inside = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "nbprof-src" in (a.get("class") or "").split():
            self.inside = True
            self.tables.append([])
        elif self.inside and tag == "tr":
            self.tables[-1].append(0)
        elif self.inside and tag in ("td", "th"):
            self.tables[-1][-1] += int(a.get("colspan") or 1)

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False


# a function of 2 + 170 + 1 lines (longer than the 150 a block shows whole) whose branch never runs
LONG = "def long69(flag):\n    total = sum(range(100))\n    if flag:\n" + "".join(
    f"        v{i} = {i}\n" for i in range(169)) + "    return total\n"


def test_the_code_views_gap_row_spans_the_columns_of_the_table(shell):
    """A block too long to show whole shows "⋯" rows for its gaps: each such row spans the table's
    columns, as every other row: the header's "#", one per number (cProfile: hits, time) and the
    code, counted from the header cells, no more (a wider row adds an empty column to the table)."""
    run(shell, LONG)
    result, captured = run(shell, "%%cprofile --lines -o cpl69\nlong69(False)")
    assert result.error_in_exec is None
    [report] = reports(captured)
    page = report["text/html"]
    assert "⋯" in page
    parser = _RowSpans()
    parser.feed(page)
    assert parser.tables
    for spans in parser.tables:
        assert spans[0] >= 3  # "#", a number at least, the code
        assert spans == [spans[0]] * len(spans), spans
