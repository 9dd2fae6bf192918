"""``%%torchprof --snapshot`` on a real GPU (``-m gpu``; skipped where torch sees no CUDA device),
and every real snapshot kept in tests/data/snapshots against torch's own ``_memory_viz`` (those
run anywhere).

On a GPU: the cell's allocations counted by hand (four 4 MiB tensors kept, an 8 MiB one freed)
in the replay, the blocks at the end with the cell's line, torch's own fields of every segment
(``allocated_size``, ``active_size``) and ``_memory_viz.calc_active``; the history off again after
the cell, after an exception and after a KeyboardInterrupt; a history the user had on left on and
cut to the cell. With ``NBPROF_KEEP_GPU_DATA=1`` the snapshot torch dumps of the same cell is kept
as tests/data/snapshots/cuda_<device>.pickle for the tests below.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import pytest

import nbprof

from .conftest import GPU_DATA, HAS_TORCH, run

DATA = Path(__file__).parent / "data" / "snapshots"

CELL = """%%torchprof --snapshot -q -o gpu_snap
import torch
keep = []
for _ in range(4):
    keep.append(torch.empty(1024, 1024, device="cuda"))
tmp = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
del tmp
torch.cuda.synchronize()
"""
MiB = 1 << 20


def _cuda():
    if not HAS_TORCH:
        pytest.skip("needs torch with CUDA")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch


def _history_on(torch) -> bool:
    return bool(torch._C._cuda_isHistoryEnabled())


@pytest.mark.gpu
def test_snapshot_of_a_cell_counted_by_hand(shell):
    torch = _cuda()
    result, _ = run(shell, CELL)
    assert result.success and not _history_on(torch)
    p = shell.user_ns["gpu_snap"]
    snap = p.snapshot()
    m = snap.active_memory()
    start = snap._replay.initial[torch.cuda.current_device()]
    dev = f"cuda:{torch.cuda.current_device()}"
    mine = m[m["device"] == dev]
    assert int(mine["active_bytes"].max()) - start == 16 * MiB + 8 * MiB  # the four kept and tmp
    assert int(mine["active_bytes"].iloc[-1]) - start == 16 * MiB  # tmp freed
    end = snap.blocks("end")
    cell = f"In [{result.execution_count}]"
    kept = end[(end["cell"] == cell)]
    assert kept["requested_bytes"].tolist() == [4 * MiB] * 4 and set(kept["line"]) == {5}
    assert "Memory snapshot" in p.report().html(include_library=False)
    # torch's own fields of every segment, and memory_viz's sum of its blocks
    from torch.cuda import _memory_viz as mv

    seg = snap.segments().set_index("address")
    raw = snap._data.segments.set_index("address")
    assert (seg["allocated_bytes"] == raw["torch_allocated_bytes"]).all()
    assert (seg["active_bytes"] == raw["torch_active_bytes"]).all()
    if os.environ.get("NBPROF_KEEP_GPU_DATA") == "1":  # the same cell, dumped by torch itself, kept
        torch.cuda.memory._record_memory_history("all", context="all", stacks="python", max_entries=100_000)
        try:
            run(shell, CELL.replace("%%torchprof --snapshot -q -o gpu_snap\n", ""))
            DATA.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^a-z0-9]+", "_", torch.cuda.get_device_name().lower()).strip("_")
            torch.cuda.memory._dump_snapshot(str(DATA / f"cuda_{name}.pickle"))
        finally:
            torch.cuda.memory._record_memory_history(None)
    raw_segments = torch.cuda.memory._snapshot()["segments"]
    assert sum(mv.calc_active(s) for s in raw_segments) == torch.cuda.memory_allocated()


@pytest.mark.gpu
@pytest.mark.parametrize("ending", ["raise ValueError('boom')", "raise KeyboardInterrupt"])
def test_the_history_is_off_after_a_failing_cell(shell, ending):
    torch = _cuda()
    result, _ = run(shell, f"%%torchprof --snapshot -q -o gpu_fail\nimport torch\nx = torch.ones(1 << 20, device='cuda')\n{ending}")
    assert not result.success and not _history_on(torch)
    snap = shell.user_ns["gpu_fail"].snapshot()
    assert (snap.active_memory()["action"] == "alloc").any()
    result, _ = run(shell, "%%torchprof --snapshot -q\nimport torch\ntorch.ones(4, device='cuda').sum()")
    assert result.success and not _history_on(torch)  # the next run works


@pytest.mark.gpu
def test_a_history_the_user_had_on_stays_on_and_is_cut_to_the_cell(shell):
    torch = _cuda()
    torch.cuda.memory._record_memory_history("all", max_entries=10_000)
    try:
        before = torch.ones(1 << 20, device="cuda")  # in the user's history, before the cell
        result, _ = run(shell, "%%torchprof --snapshot -q -o gpu_users\nimport torch\nx = torch.ones(2 << 20, device='cuda')")
        assert result.success and _history_on(torch)
        p = shell.user_ns["gpu_users"]
        allocs = p.snapshot().active_memory()
        sizes = allocs.loc[allocs["action"] == "alloc", "size_bytes"].tolist()
        assert (2 << 20) * 4 in sizes and (1 << 20) * 4 not in sizes
        assert any("your own _record_memory_history" in n for n in p.meta.notes)
        del before
    finally:
        torch.cuda.memory._record_memory_history(None)


# ------------------------------------------------------------- real snapshots, kept (any machine)


def _kept() -> list[Path]:
    """Real snapshots kept here, and those a GPU check run kept (``--snapshot``'s, tests/conftest.py's
    GPU_DATA)."""
    return [p for folder in (DATA, GPU_DATA) if folder.is_dir() for p in sorted(folder.glob("*.pickle"))]


@pytest.mark.parametrize("path", _kept() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no real snapshot kept yet (scripts/gpu-check.sh on a GPU keeps one)"))],
    ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_kept_real_snapshots_against_memory_viz(path):
    from torch.cuda import _memory_viz as mv

    from .test_snapshot import memory_viz_totals

    with open(path, "rb") as f:
        raw = pickle.load(f)  # our own file: trusted here, the oracle's way to read it
    p = nbprof.load_snapshot(path)
    seg = p.segments().set_index("address")
    for s in raw["segments"]:
        assert seg.loc[s["address"], "allocated_bytes"] == mv.calc_active(s) == s["allocated_size"]
    m = p.active_memory()
    for d, trace in enumerate(raw["device_traces"]):
        if not trace:
            continue
        start, after = memory_viz_totals(raw, d)
        rows = m[(m["device"] == f"cuda:{d}") & m["action"].isin(["alloc", "free_completed"])]
        assert rows["active_bytes"].tolist() == after
