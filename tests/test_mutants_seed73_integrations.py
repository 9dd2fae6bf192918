"""Seed 73, the integrations: what ``nbprof.lightning.Profiler`` and ``nbprof.from_profiler`` say was
recorded.

- ``Profiler(shapes=True)`` profiling a Lightning fit by itself records the ops' input shapes (the
  batch of 8 rows of 16 features is the hand-known answer, and torch's own
  ``key_averages(group_by_input_shape=True)`` of the profiler that ran agrees).
- ``from_profiler`` of a torch profiler: whether CUDA was one of the activities it was asked for is the
  profile's ``meta.with_cuda`` (False, not "unknown, a trace file", for a CPU-only profiler), and so the
  Kernels tab says CUDA was not recorded. (A profiler asked for CUDA needs a GPU: tests/test_gpu_*.py.)
"""

from __future__ import annotations

import html
import importlib.util

import pytest

from .conftest import needs_torch

pytestmark = needs_torch


def _cpu_profiler():
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(4, 4) @ torch.ones(4, 4)
    return prof


# ---------------------------------------------------------------- integrations.lightning.Profiler.__init__


@pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"), reason="needs pytorch-lightning")
def test_a_lightning_profiler_asked_for_shapes_records_the_batches_input_shapes():
    """shapes=True is %%torchprof's --shapes: the fit's first Linear (16 -> 32) gets batches of 8 rows,
    so its aten::linear is recorded with input shapes [[8, 16], [32, 16], [32]], as torch's own
    key_averages(group_by_input_shape=True) of the same profiler lists it."""
    import nbprof

    from .lightning_fit import PACKAGES, fit

    prof = nbprof.lightning.Profiler(shapes=True, quiet=True)
    fit(PACKAGES[0], prof, steps=2)
    p = prof.result
    assert p.collected["shapes"] is True
    first_linear = [[8, 16], [32, 16], [32]]
    torchs = {(e.key, str(e.input_shapes)) for e in p.profiler.key_averages(group_by_input_shape=True)}
    assert ("aten::linear", str(first_linear)) in torchs
    linear = p.events[p.events["name"] == "aten::linear"]
    assert str(first_linear) in set(linear["input_shapes"].astype(str))


# ---------------------------------------------------------------- integrations.profilers._options_of


def test_from_profiler_of_a_cpu_only_torch_profiler_says_cuda_was_not_recorded():
    """A profiler asked for the CPU only: with_cuda is False (None would mean "a trace file, its
    kernels say"), and the Kernels tab tells the user CUDA was not recorded."""
    import nbprof

    p = nbprof.from_profiler(_cpu_profiler())
    assert p.meta.with_cuda is False and p.collected["cuda"] is False
    assert "CUDA was not recorded" in html.unescape(p.report().html())
