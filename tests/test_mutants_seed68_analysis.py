"""What seed 68's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: two integer changes 1 apart beyond 2**53 in a comparison (which
it fixed: as float64 they tied and sorted by name), a clock_skew check on a table whose clock zero
was moved (every start negative), copies launched by no operator, stretches of tiny kernels on two
GPUs, and a loop's steps with a metadata object that has no clock."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from .synthetic import Trace


def test_integer_changes_beyond_2_53_sort_largest_first_not_as_a_tie():
    """Two kernels whose bytes grew by 2**53 ("a") and 2**53 + 1 ("b"), by Python's exact integers:
    "b" changed more, so it comes first. As float64 both are 2**53 (the spacing there is 2): the
    rows tied and sorted by name, "a" first (fixed: an integer change sorts as it is)."""
    from nbprof.analysis.compare import compare_tables

    before = pd.DataFrame({"name": ["a", "b"], "bytes": [0, 0]})
    after = pd.DataFrame({"name": ["a", "b"], "bytes": [2**53, 2**53 + 1]})
    assert float(2**53) == float(2**53 + 1)  # what float64 would compare
    table = compare_tables(before, after, ["name"], ["bytes"], "bytes")
    assert table["name"].tolist() == ["b", "a"]
    assert [int(x) for x in table["bytes_change"]] == [2**53 + 1, 2**53]


def test_clock_skew_counts_idle_launches_on_each_gpu_of_a_table_with_negative_starts(tmp_path):
    """Two GPUs, four 1 µs kernels each, 1,000 µs apart on each GPU (cuda:0 at 1,501 + 1,000 i,
    cuda:1 500 µs later), each starting 1,500 µs after its cudaLaunchKernel. By hand: every kernel
    but each GPU's first starts 999 µs after the one before it on its GPU ended (>= 50 µs idle),
    so 3 + 3 = 6 launches onto an idle GPU, each waiting 1,500 µs. The table's zero moved to
    100,000 µs (every start negative, as a table shifted to a mark of its own) changes none of
    that. (With the groups' stride the span plus the base, negative here, cuda:0's ends spilled
    into cuda:1's: 3.)"""
    from nbprof.analysis.findings import clock_skew
    from nbprof.analysis.findings._common import TorchContext
    from nbprof.model import TorchProfile

    t = Trace()
    for i in range(4):
        for d in (0, 1):
            cpu = 100 + 1000 * i + 500 * d
            ext = t.op("aten::add", cpu - 1, 7)
            t.launch("add_kernel", ext, cpu, 5, cpu + 1500, 1, device=d)
    p = t.load(tmp_path)
    events = p.events
    events["start_us"] = events["start_us"] - 100_000.0
    assert events["start_us"].max() < 0
    [finding] = clock_skew.find(TorchContext(TorchProfile(events, p.meta)))
    ev = finding.evidence
    assert (ev["idle_launches"], ev["shift_us"], ev["median_wait_us"]) == (6, 1500.0, 1500.0)


def test_copies_launched_by_no_operator_are_said_to_come_from_unknown(tmp_path):
    """Three 100 µs copies of 1 MiB: one launched under aten::copy_, two by a bare cudaMemcpyAsync
    with no operator around it. The finding counts the launchers: two "(unknown)", one aten::copy_,
    and says the copies come mostly from "(unknown)"."""
    t = Trace()
    ext = t.op("aten::copy_", 0, 30)
    t.launch("Memcpy HtoD (Pinned -> Device)", ext, 1, 5, 10, 100, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=2**20)
    t.launch("Memcpy HtoD (Pinned -> Device)", 0, 200, 5, 210, 100, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=2**20)
    t.launch("Memcpy DtoH (Device -> Pinned)", 0, 400, 5, 410, 100, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=2**20)
    f = t.load(tmp_path).findings
    [row] = f[f["kind"] == "copy"].itertuples()
    assert row.evidence["launched_by"] == {"(unknown)": 2, "aten::copy_": 1}
    assert "mostly from (unknown). " in row.message


def test_tiny_kernels_on_two_gpus_are_two_stretches_not_one(tmp_path):
    """20 kernels of 5 µs on cuda:0 every 25 µs from 100 µs, and 12 on cuda:1 every 25 µs from
    110 µs, each launched by a 5 µs call. By hand: cuda:0's 20 make one stretch (480 µs wide, 100
    µs of kernels, 100 µs of launches); cuda:1's 12 are fewer than 20, no stretch. A stretch does
    not run from one GPU's last kernel into the next GPU's first (with it joined: 32 kernels)."""
    t = Trace()
    for i in range(20):
        ext = t.op("aten::add", 50 + i * 25, 7)
        t.launch("elementwise_kernel", ext, 51 + i * 25, 5, 100 + i * 25, 5, device=0)
    for i in range(12):
        ext = t.op("aten::mul", 60 + i * 25, 7)
        t.launch("elementwise_kernel", ext, 61 + i * 25, 5, 110 + i * 25, 5, device=1)
    f = t.load(tmp_path).findings
    [ev] = f.loc[f["kind"] == "launch_bound", "evidence"].tolist()
    assert (ev["stretches"], ev["kernels"]) == (1, 20)
    assert (ev["kernel_us"], ev["launch_us"], ev["wall_us"]) == (100.0, 100.0, 480.0)


def test_a_loops_steps_with_metadata_that_has_no_clock_are_on_the_loops_own_clock():
    """``step_windows`` with a metadata object that carries the loops and nothing else (no
    ``base_time_ns``, no ``origin_ns``): the clocks are one (a shift of 0), so each step starts
    LOOP_CLOCK_NS after its iteration's hit, as written: 10, 210, 410, 610 ns plus it."""
    from nbprof.analysis.growth import LOOP_CLOCK_NS, step_windows

    from .test_loops import CELL, _events, _loop

    starts = [10, 210, 410, 610]
    meta = SimpleNamespace(line_data={"loops": [_loop(5, starts, [s + 200 for s in starts])]})
    steps = step_windows(_events(), meta, {CELL: "In [3]"})
    assert steps.source == "the loop at In [3] line 5"
    assert steps.start_ns.tolist() == [s + LOOP_CLOCK_NS for s in starts]
    assert steps.end_ns.tolist() == [s + 200 + LOOP_CLOCK_NS for s in starts]
