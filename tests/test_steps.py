"""Long loops: ``%%torchprof --schedule`` with ``nbprof.step()`` records only the active steps;
``steps()`` and ``step_breakdown()`` show them one by one and side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis.device_stats import profiled_windows
from nbprof.analysis.steps import STEP_COLUMNS
from nbprof.errors import OptionError

from .conftest import needs_torch, run, trace_path
from .synthetic import Trace

LOOP = """%%torchprof --schedule {schedule} -q -o p
import torch, nbprof
x = torch.randn(64, 64)
for i in range({n}):
    with torch.profiler.record_function("body"):
        y = torch.mm(x, x).relu()
        if i % 2:
            y = y.sum()
    nbprof.step()
"""


def profile_loop(shell, schedule: str, n: int):
    result, _ = run(shell, LOOP.format(schedule=schedule, n=n))
    assert result.error_in_exec is None
    return shell.user_ns["p"]


def step_names(p) -> list[str]:
    ev = p.events
    names = ev.loc[ev["kind"] == "annotation", "name"].astype(str)
    return sorted(n for n in names if n.startswith("ProfilerStep#"))


@needs_torch
def test_schedule_records_only_the_active_steps(shell):
    # wait 1, warmup 1, active 2: steps 0 and 1 are not recorded, 2 and 3 are, 4 and 5 not
    p = profile_loop(shell, "1,1,2", 6)
    assert step_names(p) == ["ProfilerStep#2", "ProfilerStep#3"]
    averages = p.key_averages().set_index("name")
    assert averages.loc["aten::mm", "count"] == 2  # one matmul per recorded step
    assert averages.loc["aten::sum", "count"] == 1  # only odd steps sum: step 3
    assert averages.loc["body", "count"] == 2
    s = p.steps()
    assert list(s.columns) == list(STEP_COLUMNS)
    assert s["step"].tolist() == [2, 3]
    ev = p.events
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")].sort_values("start_us")
    assert s["start_us"].tolist() == steps["start_us"].tolist()
    assert s["dur_us"].tolist() == steps["dur_us"].tolist()
    # every op of the cell ran inside a step: the steps' ops and self CPU add up to the profile's
    ops = averages[averages["kind"] == "op"]
    assert s["ops"].sum() == ops["count"].sum()
    runtime = averages[averages["kind"].isin(["runtime", "overhead", "other"])]
    assert s["self_cpu_us"].sum() == pytest.approx(ops["self_cpu_us"].sum() + runtime["self_cpu_us"].sum(), abs=0.01)
    assert s["ops"].iloc[1] > s["ops"].iloc[0]  # step 3 also sums
    assert (s["device_us"] == 0).all() and (s["kernels"] == 0).all()
    assert set(s["top_op"]) <= set(ops.index)


@needs_torch
def test_schedule_repeats_and_the_gap_between_cycles_is_not_profiled_time(shell):
    p = profile_loop(shell, "1,1,2,2", 8)  # two cycles: steps 2, 3 and 6, 7
    assert step_names(p) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#6", "ProfilerStep#7"]
    assert p.steps()["step"].tolist() == [2, 3, 6, 7]
    w = profiled_windows(p.events, p.meta)
    assert len(w) == 2  # one window per recorded cycle
    ev = p.events
    end = ev["start_us"] + ev["dur_us"]
    cycle2 = ev["start_us"] >= ev.loc[ev["name"] == "ProfilerStep#6", "start_us"].iloc[0]
    # the first window ends at or after cycle 1's last event and before cycle 2's first
    assert w["end_ns"].iloc[0] / 1000 >= end[~cycle2].max() - 1e-3
    assert w["end_ns"].iloc[0] / 1000 < ev.loc[cycle2, "start_us"].min()
    r = p.ranges().set_index("label")
    assert r.loc["ProfilerStep*", "count"] == 4
    recorded = (w["end_ns"] - w["start_ns"]).sum() / 1000
    assert r.loc["body", "share_of_span"] == pytest.approx(r.loc["body", "total_us"] / recorded)


@needs_torch
def test_step_breakdown_puts_steps_side_by_side(shell):
    p = profile_loop(shell, "0,0,3", 3)
    b = p.step_breakdown()
    assert list(b.columns) == [0, 1, 2]
    averages = p.key_averages().set_index("name")
    ops = averages[averages["kind"] == "op"]
    # each op's row adds up to its self CPU time over the profile (all ops ran inside steps)
    for name, total in b.sum(axis=1).items():
        assert total == pytest.approx(ops.loc[name, "self_cpu_us"], abs=0.01)
    assert b.sum(axis=1).is_monotonic_decreasing
    counts = p.step_breakdown("op", "count")
    assert counts.loc["aten::mm"].tolist() == [1, 1, 1]
    assert counts.loc["aten::sum"].tolist() == [0, 1, 0]
    labels = p.step_breakdown("range", "count")
    assert labels.loc["body"].tolist() == [1, 1, 1]
    with pytest.raises(OptionError, match="metric must be one of"):
        p.step_breakdown("range", "self_cpu_us")
    with pytest.raises(OptionError, match="by must be one of"):
        p.step_breakdown("module")


def test_steps_on_a_constructed_gpu_loop(tmp_path):
    """Kernels belong to the step in which they were launched, whenever they ran."""
    t = Trace()
    for i in range(3):
        base = i * 1000.0
        t.annotation(f"ProfilerStep#{i + 5}", base, 900)
        ext = t.op("aten::mm", base + 10, 100)
        # the kernel of step i runs late, in the next step's time (the GPU lags the CPU)
        t.launch("gemm", ext, base + 20, 10, base + 950, 200.0 + i)
        ext = t.op("aten::add", base + 200, 50)
        t.launch("add", ext, base + 210, 10, base + 1160, 5.0)
    p = t.load(tmp_path)
    s = p.steps()
    assert s["step"].tolist() == [5, 6, 7]
    assert s["device_us"].tolist() == [205.0, 206.0, 207.0]
    assert s["kernels"].tolist() == [2, 2, 2]
    assert s["top_op"].tolist() == ["aten::mm"] * 3
    assert s["top_op_us"].tolist() == [200.0, 201.0, 202.0]
    k = p.step_breakdown("kernel")
    assert list(k.index) == ["gemm", "add"]
    assert k.loc["gemm"].tolist() == [200.0, 201.0, 202.0]


def test_steps_per_rank(tmp_path):
    for r in (0, 1):
        t = Trace(rank=r)
        for i in range(2):
            t.annotation(f"ProfilerStep#{i}", i * 100.0, 90)
            t.op("aten::mm", i * 100.0 + 5, 10 * (r + 1))
        t.write(tmp_path / f"w{r}.json")
    p = nbprof.load_trace(tmp_path)
    s = p.steps()
    assert s[["step", "rank"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert s["self_cpu_us"].tolist() == [10.0, 20.0, 10.0, 20.0]
    b = p.step_breakdown()
    assert isinstance(b.columns, pd.MultiIndex) and b.columns.names == ["rank", "step"]
    assert b.loc["aten::mm"].tolist() == [10.0, 10.0, 20.0, 20.0]


def test_no_steps_no_rows():
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    s = p.steps()
    assert list(s.columns) == list(STEP_COLUMNS) and len(s) == 0
    assert p.step_breakdown().shape == (0, 0) or len(p.step_breakdown().columns) == 0


def test_nbprof_step_outside_a_profile_is_a_no_op():
    assert nbprof.step() is None
    assert nbprof.cuda_collection(False) is None


def test_step_and_cuda_collection_under_cprofile_do_nothing(shell):
    """cProfile has no steps and records no CUDA: the loop profiles unchanged, and nbprof's own
    calls are not in the profile."""
    result, _ = run(shell, "%%cprofile -q -o cp\nimport nbprof\nnbprof.cuda_collection(False)\n"
                           "for i in range(3):\n    sorted(range(10))\n    nbprof.step()")
    assert result.error_in_exec is None
    stats = shell.user_ns["cp"].stats
    assert stats.loc[stats["function"] == "<built-in method builtins.sorted>", "ncalls"].tolist() == [3]
    assert not stats["function"].isin(["step", "cuda_collection"]).any()


@needs_torch
def test_schedule_without_steps_says_how(shell):
    result, captured = run(shell, "%%torchprof --schedule 1,1,2 -q -o p\nimport torch\ny = torch.ones(3) * 2")
    assert result.error_in_exec is None
    p = shell.user_ns["p"]
    assert any("nbprof.step()" in n for n in p.meta.notes)
    assert len(p.steps()) == 0
    assert np.isfinite(p.summary.span_us)
