"""Seed 73's survivors in nbprof/analysis (issue 38): the idle split of ``breakdown_table``
(``ranks().table``'s ``idle_*`` columns) on a trace whose device work lies far apart in time.

The expected numbers are worked out here from the times written into a hand-made trace
(tests/synthetic.py); times in a loaded profile start at the trace's first event.
"""

from __future__ import annotations

import pytest

from .synthetic import Trace

HALF_DAY_US = 43_200e6


def test_a_host_wait_gap_stays_host_wait_when_the_work_is_400_days_after_the_first_kernel(tmp_path):
    """Two GPUs; cuda:1's work lies T = 2**45 µs (~407 days) after cuda:0's one kernel (CPU ops
    every half day keep every event within a day of another, so the reader keeps them all).

    cuda:1: W at T-1000 for 10 µs (ends T-990); X at T, launched at T-500, after the GPU ran dry:
    the 990 µs gap is host wait. Y starts 2**-7 µs (8 ns) after X, inside X's busy time, launched
    long before: it does not end the gap (X starts first) and decides nothing. A (device, start) key
    held as float64 (~2**56 ns there, steps of 16 ns) took X and Y as starting together and let
    Y's early launch call the gap "other".
    Window: T-1000 -> T+10 = 1010 µs on cuda:1 plus cuda:0's 10 µs; busy 10 + 10 + 10."""
    t_us = 2.0**45
    t = Trace()
    t.device_properties.append({"id": 1, "name": "Fake GPU", "totalGlobalMem": 80 * 2**30})
    for kernel, cpu, gpu, dur, device in (("K0", 1, 2, 10, 0), ("W", 3, t_us - 1000, 10, 1),
                                          ("Y", 4, t_us + 2.0**-7, 5, 1), ("X", t_us - 500, t_us, 10, 1)):
        ext = t.op("aten::mm", cpu - 0.5, 2)
        t.launch(kernel, ext, cpu, 1, gpu, dur, device=device)
    for k in range(int(t_us // HALF_DAY_US) + 2):
        t.op("chain", k * HALF_DAY_US + 100, 1)
    p = t.load(tmp_path)
    kernels = p.events[p.events["kind"] == "kernel"]
    assert len(kernels) == 4  # none left out as too far away
    row = p.ranks().table.iloc[0]
    assert row["breakdown_window_us"] == pytest.approx(1020.0, abs=1e-6)
    assert row["breakdown_idle_us"] == pytest.approx(990.0, abs=1e-6)
    assert row["idle_host_wait_us"] == pytest.approx(990.0, abs=1e-6)
    assert row["idle_kernel_wait_us"] == 0.0
    assert row["idle_other_us"] == 0.0
