"""What seed 65's sample of mutants (docs/testing.md) showed no test held in the memory analyses,
each against an answer of its own: a table written by hand, a trace written by hand, the bytes a
script's leak keeps counted by hand."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from .conftest import needs_torch, run


def test_memory_growth_has_the_documented_columns_and_no_other(tmp_path):
    """``p.memory_growth()`` of four ``ProfilerStep#N`` steps written by hand, each keeping 8 KiB:
    exactly the columns its docstring lists (no leftover index column), rows 0..3 in step order."""
    from .test_boundaries import _growth_trace

    growth = _growth_trace([8192] * 4).load(tmp_path).memory_growth()
    assert list(growth.columns) == ["step", "device", "start_us", "end_us", "held_bytes", "added_bytes",
                                    "allocated_bytes", "added_never_freed_bytes", "never_freed_blocks"]
    assert list(growth.index) == [0, 1, 2, 3] and growth["step"].tolist() == [0, 1, 2, 3]
    assert growth["start_us"].tolist() == [0.0, 1000.0, 2000.0, 3000.0]


def test_alive_blocks_with_an_empty_line_table_are_on_no_line():
    """``alive_at_end`` given a line table with no rows (no line of the user's code ran): the two
    blocks alive at the end (of three written by hand; the freed one left out), biggest first, each
    on no line: cell and file None, line NA, source ""."""
    from nbprof.analysis.memory import alive_at_end

    allocs = pd.DataFrame({"row": [0, 1, 2], "bytes": [100, 300, 200], "alloc_us": [1.0, 2.0, 3.0],
                           "free_us": [np.nan, np.nan, 5.0]})
    lines = pd.DataFrame({"cell": pd.Series([], dtype=object), "file": pd.Series([], dtype=object),
                          "line": pd.Series([], dtype="Int64"), "source": pd.Series([], dtype=object)})
    alive = alive_at_end(allocs, np.full(3, -1, np.int64), lines)
    assert alive["bytes"].tolist() == [300, 100] and alive["row"].tolist() == [1, 0]
    assert alive["cell"].tolist() == [None, None] and alive["file"].tolist() == [None, None]
    assert alive["line"].isna().all() and alive["source"].tolist() == ["", ""]


@needs_torch
def test_memory_growth_names_the_line_of_a_users_file_outside_any_cell(shell, tmp_path, monkeypatch):
    """A cell calls a function of the user's own file whose loop keeps each step's output (and with
    it ReLU's saved result) in a list it returns. The loop's lines are the file's (no cell), and
    the memory_growth finding names that file's line and its bytes a step, counted by hand: ReLU's
    result 64 x 256 x 4 = 65,536 B + the output 64 x 10 x 4 = 2,560 B."""
    (tmp_path / "leaky_seed65.py").write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "net = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))\n"
        "xb = torch.randn(64, 32)\n"
        "\n"
        "\n"
        "def keep(steps):\n"
        "    outputs = []\n"
        "    for i in range(steps):\n"
        "        outputs.append(net(xb))\n"
        "    return outputs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result, _ = run(shell, "import leaky_seed65\nleaky_seed65.keep(1)\n")
        assert result.error_in_exec is None
        result, _ = run(shell, "%%torchprof --lines --memory -q -o g65_leak\nkept_g65 = leaky_seed65.keep(5)\n")
        assert result.error_in_exec is None
        p = shell.user_ns.pop("g65_leak")
    finally:
        sys.modules.pop("leaky_seed65", None)
        for name in ("leaky_seed65", "kept_g65", "g65_leak"):
            shell.user_ns.pop(name, None)
    f = p.findings
    [ev] = f[f["kind"] == "memory_growth"]["evidence"].tolist()
    assert ev["cell"] is None and ev["file"] == str(tmp_path / "leaky_seed65.py") and ev["line"] == 10
    assert ev["source"] == "        outputs.append(net(xb))"
    assert ev["bytes_per_step"] == 64 * 256 * 4 + 64 * 10 * 4
