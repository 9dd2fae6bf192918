"""Traces from several ranks (a folder, as torchrun + tensorboard_trace_handler writes it): one
profile with a rank column, and the per-rank comparison: time per rank, the slowest rank, the
kernels that differ. The ranks are copies of a recorded H100 trace, perturbed by hand."""

from __future__ import annotations

import copy
import gzip
import json

import numpy as np
import pytest

import nbprof
from nbprof.analysis.ranks import rank_differences

from .conftest import trace_path
from .synthetic import Trace, collectives_folder, training_loop

WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def recorded(name: str = "cnn_train_cuda") -> dict:
    with gzip.open(trace_path(name)) as f:
        return json.load(f)


def write_ranks(tmp_path, docs: list[dict]):
    for r, doc in enumerate(docs):
        doc["distributedInfo"] = {"rank": r, "world_size": len(docs)}
        with open(tmp_path / f"host_{r}.pt.trace.json", "w") as f:
            json.dump(doc, f)
    return nbprof.load_trace(tmp_path)


@pytest.fixture
def perturbed(tmp_path):
    """Rank 0: the recorded trace; rank 1: its gemm kernels 3x slower and no memsets."""
    base = recorded()
    slow = copy.deepcopy(base)
    for e in slow["traceEvents"]:
        if e.get("cat") == "kernel" and "gemm" in e["name"]:
            e["dur"] = round(e["dur"] * 3, 3)
    slow["traceEvents"] = [e for e in slow["traceEvents"] if e.get("cat") != "gpu_memset"]
    return write_ranks(tmp_path, [base, slow]), base, slow


def test_rank_table_equals_sums_over_each_file(perturbed):
    p, base, slow = perturbed
    r = p.ranks()
    t = r.table.set_index("rank")
    assert list(t.index) == [0, 1]
    for rank, doc in ((0, base), (1, slow)):
        work = [e for e in doc["traceEvents"] if e.get("cat") in WORK]
        assert t.loc[rank, "kernels"] == len(work)
        assert t.loc[rank, "device_us"] == pytest.approx(sum(e["dur"] for e in work), abs=1e-6)
        assert t.loc[rank, "comm_us"] == 0
        assert t.loc[rank, "compute_us"] == pytest.approx(t.loc[rank, "device_us"])
    # the CPU side is the same file twice
    single = nbprof.load_trace(trace_path("cnn_train_cuda"))
    assert t["self_cpu_us"].tolist() == pytest.approx([single.summary.self_cpu_us] * 2)
    assert t["span_us"].tolist() == pytest.approx([single.summary.span_us] * 2, abs=1e-3)
    assert t.loc[0, "device_busy_us"] == pytest.approx(single.device_stats.devices["busy_us"].iloc[0])
    k0, k1 = t["compute_us"]
    assert r.slowest == 1
    assert r.imbalance == pytest.approx((k1 - (k0 + k1) / 2) / ((k0 + k1) / 2))


def test_rank_differences_are_the_perturbed_kernels(perturbed):
    p, base, slow = perturbed
    d = p.ranks().differences
    gemms = {e["name"] for e in base["traceEvents"] if e.get("cat") == "kernel" and "gemm" in e["name"]}
    memsets = {e["name"] for e in base["traceEvents"] if e.get("cat") == "gpu_memset"}
    changed = set(d["name"])
    # gemm kernels worth at least 1 % of the slow rank's device time, and the dropped memsets
    total1 = sum(e["dur"] for e in slow["traceEvents"] if e.get("cat") in WORK)  # the slow rank's
    big = {n for n in gemms
           if sum(e["dur"] for e in slow["traceEvents"] if e.get("name") == n) >= 0.01 * total1}
    assert big <= changed
    assert changed <= gemms | memsets
    for _, row in d.iterrows():
        if row["name"] in gemms:
            assert row["slowest_rank"] == 1 and row["count_min"] == row["count_max"]
            assert row["time_us_rank1"] == pytest.approx(3 * row["time_us_rank0"], rel=1e-3)
            assert row["spread"] == pytest.approx(1.0, rel=1e-3)  # (3x - x) / 2x
        else:
            assert row["count_rank1"] == 0 and row["count_rank0"] > 0
    diffs = (d["time_max_us"] - d["time_min_us"]).to_numpy()
    assert (np.diff(diffs) <= 1e-9).all()


def test_identical_ranks_do_not_differ(tmp_path):
    p = write_ranks(tmp_path, [recorded("two_streams"), recorded("two_streams")])
    r = p.ranks()
    assert r.imbalance == 0
    assert len(r.differences) == 0
    assert sorted(p.events["rank"].unique()) == [0, 1]


def test_collectives_do_not_make_a_rank_slow(tmp_path):
    """In DDP the fast rank waits inside NCCL for the slow one: its kernel time is longer, but
    its compute is shorter."""
    r = nbprof.load_trace(collectives_folder(tmp_path)).ranks()
    t = r.table.set_index("rank")
    assert t["device_us"].tolist() == [600.0, 600.0]
    assert t["comm_us"].tolist() == [500.0, 50.0]
    assert t["compute_us"].tolist() == [100.0, 550.0]
    assert r.slowest == 1
    d = r.differences.set_index("name")
    assert d.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "comm"]
    assert not d.loc["gemm", "comm"]


def test_cpu_only_ranks_compare_ops(tmp_path):
    for r, dur in ((0, 100.0), (1, 130.0)):
        t = Trace(rank=r)
        t.op("aten::mm", 0, dur)
        t.op("aten::relu", 200, 10)
        t.write(tmp_path / f"r{r}.json")
    p = nbprof.load_trace(tmp_path)
    r = p.ranks()
    assert r.table["compute_us"].tolist() == [110.0, 140.0]
    assert r.slowest == 1
    d = r.differences
    assert d["name"].tolist() == ["aten::mm"]
    assert np.isnan(r.table["device_busy_fraction"]).all()


def test_device_stats_per_rank(tmp_path):
    p = write_ranks(tmp_path, [training_loop(3, kernel_us=500).doc(), training_loop(3, kernel_us=250).doc()])
    d = p.device_stats.devices.set_index("rank")
    assert d["busy_us"].tolist() == [1500.0, 750.0]
    assert d["kernels"].tolist() == [3, 3]
    assert rank_differences(p.events)["name"].tolist() == ["gemm_kernel"]


def test_single_profile_is_one_rank():
    p = nbprof.load_trace(trace_path("two_streams"))
    r = p.ranks()
    assert len(r.table) == 1 and r.imbalance == 0 and len(r.differences) == 0
