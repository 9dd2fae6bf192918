"""What seed 73's sample of mutants (docs/testing.md) showed no test held in
``nbprof/integrations/lightning_actions.py``: while a run marks Lightning's actions, the
``PassThroughProfiler`` keeps the state Lightning's own ``setup`` gives it (the answer: the same
calls on the class's own methods, outside any run)."""

from __future__ import annotations

import importlib.util

import pytest

from .conftest import run
from .lightning_fit import PACKAGES, lightning

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"), reason="needs pytorch-lightning")

CELL = """\
prof = PassThroughProfiler()
prof.setup("fit", local_rank=1, log_dir=log_dir)
seen = (prof.local_rank, prof._local_rank, prof.dirpath, prof._stage)
prof.describe()
"""


def test_a_pass_through_profilers_local_rank_and_log_dir_are_lightnings_inside_a_run(shell, tmp_path):
    """A Trainer on local rank 1 calls ``setup(stage, local_rank=1, log_dir=...)``: inside
    ``%%cprofile`` the profiler says rank 1 and keeps the log folder, as Lightning's own does."""
    pl = lightning(PACKAGES[0])
    ns = {"PassThroughProfiler": pl.profilers.PassThroughProfiler, "log_dir": str(tmp_path)}
    exec(CELL, ns)  # Lightning's own methods: no run is active
    lightnings = ns["seen"]
    assert lightnings == (1, 1, str(tmp_path), "fit")
    shell.user_ns.update(PassThroughProfiler=pl.profilers.PassThroughProfiler, log_dir=str(tmp_path))
    result, _ = run(shell, "%%cprofile -q -o p\n" + CELL)
    assert result.success
    assert shell.user_ns["seen"] == lightnings
