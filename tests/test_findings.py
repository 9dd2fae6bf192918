"""Findings: each kind fires on a profile where it must, and stays quiet where it must not.

Evidence numbers are checked against answers computed here another way: from the raw trace
JSON, with plain loops, or from torch's own key_averages (the oracles).
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import pathlib

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.analysis import findings as F
from nbprof.model import PythonProfile, TorchProfile

from .conftest import TRACES, needs_torch, oracle, run, trace_path, union_length
from .synthetic import Trace, training_loop


def raw_events(name: str) -> list[dict]:
    with gzip.open(trace_path(name)) as f:
        return json.load(f)["traceEvents"]


def kinds(frame: pd.DataFrame) -> list[str]:
    return frame["kind"].tolist()


def one(frame: pd.DataFrame, kind: str) -> pd.Series:
    rows = frame[frame["kind"] == kind]
    assert len(rows) == 1, (kind, kinds(frame))
    return rows.iloc[0]


# ------------------------------------------------------------------------------------------ shape


@pytest.mark.parametrize("name", TRACES)
def test_findings_table_shape(name):
    f = nbprof.load_trace(trace_path(name)).findings
    assert list(f.columns) == ["kind", "severity", "message", "evidence"]
    assert set(f["kind"]) <= set(F.KINDS)
    assert set(f["severity"]) <= set(F.SEVERITIES)
    order = [F.SEVERITIES.index(s) for s in f["severity"]]
    assert order == sorted(order)
    assert all(isinstance(e, dict) for e in f["evidence"])
    assert all(m and "\n" not in m for m in f["message"])
    evidence = f["evidence"].tolist()  # plain data: JSON holds it as it is (no NaN, no numpy types)
    assert json.loads(json.dumps(evidence, allow_nan=False)) == evidence


def test_empty_profile_has_no_findings(tmp_path):
    t = Trace()
    t.annotation("idle", 0, 100)
    assert kinds(t.load(tmp_path).findings) == []
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "Trace", "name": "x", "ts": 0, "dur": 1,
                                                 "pid": "Spans", "tid": "x"}]}))
    assert len(nbprof.load_trace(path).findings) == 0


# ----------------------------------------------------------------------------------------- top_op


@pytest.mark.parametrize("name", ["cnn_train_cuda", "transformer_infer_stack", "two_streams"])
def test_top_op_is_torchs_top_operator_by_self_cuda_time(name):
    """Fires: the op with the most self CUDA time in torch's own table, its share of the kernel
    time summed from the raw file."""
    rows = [r for r in oracle(name)["rows"] if r["device_type"].endswith("CPU") and r["key"].startswith("aten::")]
    top = max(rows, key=lambda r: r["self_device_time_total"])
    kernel_us = sum(e["dur"] for e in raw_events(name) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    ev = one(nbprof.load_trace(trace_path(name)).findings, "top_op")["evidence"]
    assert ev["op"] == top["key"]
    assert ev["time_us"] == pytest.approx(top["self_device_time_total"], abs=0.01)
    assert ev["share"] == pytest.approx(top["self_device_time_total"] / kernel_us, rel=1e-9)
    assert ev["count"] == top["count"]


def test_top_op_calls_a_collective_communication_not_compute():
    """HTA's NCCL sample: the top op by self CUDA time is record_param_comms (the NCCL kernels it
    launched); "comms" contains "mm", which once made the advice say "It is compute"."""
    path = pathlib.Path(__file__).parent / "data" / "wild" / "nccl_data.json.gz"
    raw = json.load(gzip.open(path))["traceEvents"]
    kernel_names = {e["args"].get("correlation"): e["name"] for e in raw if e.get("cat") == "kernel"}
    assert any("nccl" in n for n in kernel_names.values())
    row = one(nbprof.load_trace(path).findings, "top_op")
    assert row["evidence"]["op"] == "record_param_comms"
    assert "It is communication" in row["message"] and "compute:" not in row["message"]


def test_top_op_does_not_fire_without_operators(tmp_path):
    t = Trace()
    t.annotation("label only", 0, 50)
    assert "top_op" not in kinds(t.load(tmp_path).findings)


# ------------------------------------------------------------------------------------------- sync


def test_sync_fires_on_item_in_the_loop(tmp_path):
    # 4 steps; each .item() blocks 300 µs in cudaStreamSynchronize. The last one is followed by
    # no launch, so it costs no overlap and is not counted: 3 calls, 900 µs.
    p = training_loop(4, kernel_us=100, item_sync_us=300).load(tmp_path)
    assert p.summary.span_us == pytest.approx(3965.0)  # first op at 30 µs, last ends at 3995 µs
    row = one(p.findings, "sync")
    ev = row["evidence"]
    assert ev["calls"] == 3
    assert ev["blocked_us"] == pytest.approx(900.0)
    assert ev["share_of_span"] == pytest.approx(900.0 / p.summary.span_us)
    assert ev["scalar_reads"] == 4
    assert ev["by_op"] == {"aten::_local_scalar_dense": {"count": 3, "us": pytest.approx(900.0)}}
    assert row["severity"] == "high"  # 900 / 3965 = 23 % of the span
    assert ".item()" in row["message"]


def test_sync_does_not_fire_on_a_final_synchronize_or_cheap_syncs(tmp_path):
    # the recorded traces end with torch.cuda.synchronize(): nothing is launched after it
    for name in TRACES:
        assert "sync" not in kinds(nbprof.load_trace(trace_path(name)).findings), name
    # 3 counted syncs of 20 µs: 60 µs of ~4 ms, under SYNC_MIN_SHARE
    p = training_loop(4, kernel_us=100, item_sync_us=20).load(tmp_path)
    assert "sync" not in kinds(p.findings)


@needs_torch
def test_sync_does_not_fire_on_cpu_item(shell):
    """On the CPU .item() is no synchronization."""
    result, _ = run(shell, "%%torchprof -q --no-cuda -o p\nimport torch\nx = torch.randn(100)\n"
                           "s = [float(x[i]) for i in range(100)]")
    assert result.error_in_exec is None
    p = shell.user_ns["p"]
    assert (p.key_averages()["name"] == "aten::_local_scalar_dense").any()
    assert "sync" not in kinds(p.findings)


# ------------------------------------------------------------------------------------------- copy


def test_copy_fires_on_pageable_host_to_device_copies(tmp_path):
    # per step: a 300 µs HtoD copy and a 600 µs kernel: copies are 1200 / 3600 of the GPU's work
    p = training_loop(4, kernel_us=600, copy_us=300).load(tmp_path)
    row = one(p.findings, "copy")
    ev = row["evidence"]
    assert ev["copies"] == 4
    assert ev["copy_us"] == pytest.approx(1200.0)
    assert ev["share_of_device_time"] == pytest.approx(1200.0 / 3600.0)
    assert ev["bytes"] == 4 * (4 << 20)
    assert ev["pageable"] == 4
    assert ev["by_direction"]["HtoD"]["count"] == 4
    assert ev["launched_by"] == {"aten::copy_": 4}
    assert row["severity"] == "high"
    assert "pin_memory" in row["message"]


def test_copy_does_not_fire_on_small_copies_or_without_copies(tmp_path):
    p = training_loop(4, kernel_us=900, copy_us=20).load(tmp_path)  # 80 of 3680 µs
    assert "copy" not in kinds(p.findings)
    for name in TRACES:  # no memcpy in any recorded trace
        assert "copy" not in kinds(nbprof.load_trace(trace_path(name)).findings)


def test_pinned_copies_are_not_called_pageable(tmp_path):
    p = training_loop(4, kernel_us=600, copy_us=300, pageable=False).load(tmp_path)
    row = one(p.findings, "copy")
    assert row["evidence"]["pageable"] == 0
    assert "pin_memory" not in row["message"]


# --------------------------------------------------------------------------------------- gpu_idle


@pytest.mark.parametrize("name", TRACES)
def test_gpu_idle_fires_on_the_recorded_traces(name):
    """All four recorded workloads are small: the GPU idles most of the time. The busy time is the
    union of the device intervals in the raw file, measured with a plain loop."""
    from .reference import ns, read

    p = nbprof.load_trace(trace_path(name))
    busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in raw_events(name)
                         if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")])
    # the span: the first event's start to the last one's end, in exact ns from the file
    events = [e for e in read(trace_path(name))["traceEvents"] if e.get("ph") in ("X", "i") and e.get("cat")]
    origin = min(ns(e["ts"]) for e in events)  # the profiler's own "Trace" span included
    events = [e for e in events if e["cat"] != "Trace"]
    span_us = (max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in events) - min(ns(e["ts"]) for e in events)) / 1000
    ev = one(p.findings, "gpu_idle")["evidence"]
    assert ev["busy_us"] == pytest.approx(busy, abs=0.01)
    assert ev["span_us"] == pytest.approx(span_us, abs=0.001)
    assert ev["busy_fraction"] == pytest.approx(busy / span_us, abs=1e-6)
    gaps = ev["largest_gaps"]
    assert gaps and gaps == sorted(gaps, key=lambda g: -g["dur_us"])
    # what the CPU ran in the middle of each gap: the innermost event open on each thread, the
    # main thread (its id is the process id) first
    cpu = [e for e in events if e["cat"] in ("cpu_op", "user_annotation", "cuda_runtime")]
    main = next(e["tid"] for e in cpu if e["pid"] == e["tid"])
    for g in gaps:
        mid = origin + round(g["start_us"] * 1000) + round(g["dur_us"] * 1000) // 2
        inner: dict = {}
        for e in cpu:
            if ns(e["ts"]) <= mid < ns(e["ts"]) + ns(e["dur"]):
                best = inner.get(e["tid"])
                if best is None or (ns(e["ts"]), -ns(e["dur"])) > (ns(best["ts"]), -ns(best["dur"])):
                    inner[e["tid"]] = e
        parts = [f"{e['name']} ({'main thread' if tid == main else f'thread {tid}'})" for tid, e in inner.items()]
        if not parts:
            assert g["cpu"] == "nothing torch records (Python code, I/O or waiting)"
            continue
        assert sorted(g["cpu"].split("; ")) == sorted(parts)
        if main in inner:
            assert g["cpu"].startswith(f"{inner[main]['name']} (main thread)")


def test_gpu_idle_names_what_the_cpu_did_in_the_longest_gap():
    ev = one(nbprof.load_trace(trace_path("cnn_train_cuda")).findings, "gpu_idle")["evidence"]
    longest = ev["largest_gaps"][0]
    # 5.24 ms: the main thread is inside "backward", autograd's thread starts its first op
    assert longest["start_us"] == pytest.approx(5237.634, abs=0.001)
    assert longest["cpu"].startswith("backward (main thread)")


def test_gpu_idle_does_not_fire_on_a_busy_gpu(tmp_path):
    p = training_loop(4, kernel_us=900).load(tmp_path)  # 3600 µs of kernels in ~4 ms
    assert p.device_stats.devices["busy_fraction"].iloc[0] > 0.85
    assert "gpu_idle" not in kinds(p.findings)
    q = training_loop(4, kernel_us=100).load(tmp_path, "idle.json")
    assert one(q.findings, "gpu_idle")["evidence"]["busy_us"] == pytest.approx(400.0)


# ------------------------------------------------------------------------------------- small_grid


@pytest.mark.parametrize("name", TRACES)
def test_small_grid_fires_on_the_recorded_traces(name):
    """Plain-loop answer from the raw JSON: kernel time with "blocks per SM" below 1."""
    ev = raw_events(name)
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    small = collections.Counter()
    for e in kernels:
        if e["args"]["blocks per SM"] < 1:
            small[e["name"]] += round(e["dur"] * 1000)
    share = sum(small.values()) / sum(round(e["dur"] * 1000) for e in kernels)
    p = nbprof.load_trace(trace_path(name))
    f = one(p.findings, "small_grid")
    e = f["evidence"]
    assert e["share_of_kernel_time"] == pytest.approx(share, rel=1e-9)
    assert e["small_grid_us"] == pytest.approx(sum(small.values()) / 1000, abs=1e-6)
    top = e["top_kernels"][0]
    assert top["kernel"] == small.most_common(1)[0][0]
    kt = p.kernels().set_index("name")
    assert top["launched_by"] == kt.loc[top["kernel"], "launched_by"]  # as the Kernels tab says
    assert e["sms"] == 132 and "132 on this GPU" in f["message"]
    assert f["severity"] == "low"  # these GPUs are mostly idle: filling them is not the first fix


def test_small_grid_leaves_out_nccl_kernels():
    """HTA's NCCL sample: NCCL kernels run one block per channel by design (0.07 blocks per SM):
    the share is over the other kernels, from the raw JSON."""
    path = pathlib.Path(__file__).parent / "data" / "wild" / "nccl_data.json.gz"
    kernels = [e for e in json.load(gzip.open(path))["traceEvents"]
               if e.get("cat") == "kernel" and "blocks per SM" in e.get("args", {})]
    assert any("nccl" in e["name"] and e["args"]["blocks per SM"] < 1 for e in kernels)
    compute = [e for e in kernels if "nccl" not in e["name"].lower()]
    small = sum(round(e["dur"] * 1000) for e in compute if e["args"]["blocks per SM"] < 1)
    share = small / sum(round(e["dur"] * 1000) for e in compute)
    assert share < F.small_grid.SMALL_GRID_MIN_SHARE  # 15 %: with the NCCL kernels it was 41 %
    assert "small_grid" not in kinds(nbprof.load_trace(path).findings)


def test_small_grid_severity_follows_how_busy_the_gpu_is(tmp_path):
    busy = training_loop(4, kernel_us=900, blocks_per_sm=0.25).load(tmp_path)
    f = one(busy.findings, "small_grid")
    assert f["severity"] == "medium" and f["evidence"]["share_of_kernel_time"] == pytest.approx(1.0)
    assert f["evidence"]["top_kernels"][0]["blocks_per_sm"] == pytest.approx(0.25)


def test_small_grid_does_not_fire_on_full_grids_or_without_estimates(tmp_path):
    full = training_loop(4, kernel_us=900, blocks_per_sm=4.0).load(tmp_path)
    assert full.kernels()["blocks_per_sm"].iloc[0] == pytest.approx(4.0)
    assert "small_grid" not in kinds(full.findings)
    bare = training_loop(4, kernel_us=900).load(tmp_path, "bare.json")  # no CUPTI estimates
    assert np.isnan(bare.kernels()["blocks_per_sm"].iloc[0])
    assert "small_grid" not in kinds(bare.findings)


# ----------------------------------------------------------------------------------- launch_bound


def launch_bound_runs(name: str) -> list[dict]:
    """Plain-loop answer: runs of >= 20 consecutive kernels under 10 µs whose launches took at
    least as long as they ran."""
    ev = raw_events(name)
    launch = {e["args"]["correlation"]: e["dur"] for e in ev
              if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation")}
    kernels = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    runs, cur = [], []
    for k in kernels + [None]:
        if k is not None and k["dur"] < F.launch_bound.TINY_KERNEL_US:
            cur.append(k)
            continue
        if len(cur) >= F.launch_bound.LAUNCH_MIN_KERNELS:
            kt = sum(x["dur"] for x in cur)
            lt = sum(launch.get(x["args"]["correlation"], 0) for x in cur)
            if lt >= kt:
                runs.append({"n": len(cur), "kernel": kt, "launch": lt,
                             "wall": cur[-1]["ts"] + cur[-1]["dur"] - cur[0]["ts"]})
        cur = []
    return runs


@pytest.mark.parametrize("name", ["cnn_train_cuda", "transformer_infer_stack", "cnn_cuda_toggled"])
def test_launch_bound_fires_on_small_kernels(name):
    runs = launch_bound_runs(name)
    assert runs
    p = nbprof.load_trace(trace_path(name))
    ev = one(p.findings, "launch_bound")["evidence"]
    assert ev["stretches"] == len(runs)
    assert ev["kernels"] == sum(r["n"] for r in runs)
    assert ev["kernel_us"] == pytest.approx(sum(r["kernel"] for r in runs), abs=0.01)
    assert ev["launch_us"] == pytest.approx(sum(r["launch"] for r in runs), abs=0.01)
    assert ev["wall_us"] == pytest.approx(sum(r["wall"] for r in runs), abs=0.01)
    assert ev["launch_us"] >= ev["kernel_us"]


def test_launch_bound_does_not_fire_on_few_or_cheap_to_launch_kernels(tmp_path):
    assert "launch_bound" not in kinds(nbprof.load_trace(trace_path("two_streams")).findings)  # 9 kernels
    # 40 tiny kernels (8 µs), each launched in 2 µs: the GPU, not the launches, sets the pace
    t = Trace()
    gpu = 10.0
    for i in range(40):
        ext = t.op("aten::add", i * 10.0, 4)
        t.launch("add_kernel", ext, i * 10.0 + 1, 2.0, gpu, 8.0)
        gpu += 8.5
    assert "launch_bound" not in kinds(t.load(tmp_path).findings)
    # the same kernels launched in 12 µs each: launch bound
    t = Trace()
    for i in range(40):
        ext = t.op("aten::add", i * 20.0, 14)
        t.launch("add_kernel", ext, i * 20.0 + 1, 12.0, i * 20.0 + 13, 8.0)
    ev = one(t.load(tmp_path, "b.json").findings, "launch_bound")["evidence"]
    assert (ev["kernels"], ev["kernel_us"], ev["launch_us"]) == (40, pytest.approx(320.0), pytest.approx(480.0))


# ------------------------------------------------------------------------------------- data_bound


@needs_torch
def test_data_bound_fires_when_loading_in_the_main_process_dominates(shell):
    """num_workers=0, 4 batches of 2 samples, each sleeping 10 ms: the loop does nothing else, so
    it waits for data nearly all the time; the measured answer names the main process and the
    time a batch takes (two 10 ms naps, more on a busy machine)."""
    code = """%%torchprof -q --no-cuda -o p
import time, torch
from torch.utils.data import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.ones(4) * i
total = 0.0
for batch in DataLoader(Slow(), batch_size=2):
    total = total + batch.sum()
"""
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    p = shell.user_ns["p"]
    ev = p.events
    nexts = ev[(ev["kind"] == "annotation") & ev["name"].astype(str).str.startswith("enumerate(DataLoader)")]
    assert len(nexts) == 5  # 4 batches, then the call that raises StopIteration
    row = one(p.findings, "data_bound")
    e = row["evidence"]
    assert e["batches"] == 4 and e["num_workers"] == 0 and e["epochs"] == 1
    assert 20_000 <= e["make_us"] < 200_000  # two naps of 10 ms
    # each batch's wait is inside its torch range (the range also holds __next__'s own work)
    b = p.data_loading()
    assert (b["wait_us"].to_numpy() <= nexts["dur_us"].to_numpy()[:4] + 1.0).all()
    assert row["severity"] == "high" and e["steady_share"] >= 0.3
    assert "num_workers=0" in row["message"] and "main process" in row["message"]


def test_data_bound_does_not_fire_when_loading_is_cheap(tmp_path):
    t = training_loop(4, kernel_us=900)
    for i in range(4):  # 30 µs of loading per 1000 µs step
        t.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", i * 1000.0 + 900, 30)
    assert "data_bound" not in kinds(t.load(tmp_path).findings)
    assert "data_bound" not in kinds(nbprof.load_trace(trace_path("cnn_train_cuda")).findings)


# ------------------------------------------------------------------------------------ memory_peak


def test_memory_peak_on_the_recorded_training_run():
    name = "cnn_train_cuda"
    raw = raw_events(name)
    mem = [e for e in raw if e.get("cat") == "cpu_instant_event" and e["args"].get("Device Type") == 1]
    peak = max(e["args"]["Total Allocated"] for e in mem)
    peak_event = min((e for e in mem if e["args"]["Total Allocated"] == peak), key=lambda e: e["ts"])
    # the blocks held at the peak: replay the allocations and frees in time order up to it (a
    # plain dict by address), then the outermost operator open on the allocating thread, by a
    # plain search over the raw ops
    ops = [e for e in raw if e.get("cat") == "cpu_op"]
    live: dict[int, dict] = {}
    for e in sorted(mem, key=lambda e: e["ts"]):
        if e["ts"] > peak_event["ts"]:
            break
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = e
        else:
            live.pop(e["args"]["Addr"], None)
    by_op: dict[str, int] = {}
    for e in live.values():
        around = [o for o in ops if o["tid"] == e["tid"] and o["ts"] <= e["ts"] <= o["ts"] + o["dur"]]
        outer = max(around, key=lambda o: o["dur"])["name"] if around else "(outside operators)"
        by_op[outer] = by_op.get(outer, 0) + e["args"]["Bytes"]
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[: F.memory_peak.MEMORY_TOP_OPS]
    # what it names is part of the peak (allocated during the profile, held at it)
    assert sum(by_op.values()) <= peak

    p = nbprof.load_trace(trace_path(name))
    row = one(p.findings, "memory_peak")
    ev = row["evidence"]
    assert ev["peak_allocated_bytes"] == peak == p.device_stats.devices["peak_allocated_bytes"].iloc[0]
    assert ev["peak_reserved_bytes"] == max(e["args"]["Total Reserved"] for e in mem)
    first = min(mem, key=lambda e: e["ts"])
    assert ev["allocated_before_profile_bytes"] == first["args"]["Total Allocated"] - first["args"]["Bytes"]
    assert [t["bytes"] for t in ev["top_ops"]] == [b for _, b in top]
    assert {t["op"] for t in ev["top_ops"]} <= set(by_op)
    assert row["severity"] == "low"  # 92 MB of an 80 GB H100


def test_memory_peak_severity_follows_the_device_size(tmp_path):
    t = training_loop(2, kernel_us=900)
    gib = 2**30
    t.memory(31, 10 * gib, 70 * gib, 78 * gib)  # reserved: 97.5 % of the fake 80 GiB device
    t.memory(60, -10 * gib, 60 * gib, 78 * gib)
    row = one(t.load(tmp_path).findings, "memory_peak")
    assert row["severity"] == "high"
    assert row["evidence"]["top_ops"] == [{"op": "aten::mm", "bytes": 10 * gib}]
    assert "expandable_segments" in row["message"]


def test_memory_peak_does_not_fire_without_memory_events():
    assert "memory_peak" not in kinds(nbprof.load_trace(trace_path("transformer_infer_stack")).findings)


# -------------------------------------------------------------------------------------- straggler


def test_straggler_fires_for_a_slow_rank_and_not_for_equal_ranks(tmp_path):
    for r in (0, 1):
        training_loop(4, kernel_us=400 if r == 0 else 800, rank=r).write(tmp_path / f"w{r}.json")
    row = one(nbprof.load_trace(tmp_path).findings, "straggler")
    ev = row["evidence"]
    assert ev["slowest_rank"] == 1
    # compute: 1600 vs 3200 µs of kernels; median of two ranks = 2400
    assert ev["imbalance"] == pytest.approx((3200 - 2400) / 2400)
    same = tmp_path / "same"
    same.mkdir()
    for r in (0, 1):
        training_loop(4, kernel_us=400, rank=r).write(same / f"w{r}.json")
    assert "straggler" not in kinds(nbprof.load_trace(same).findings)


def _cpu_rank(rank: int, load_us: float, wait_us: float) -> Trace:
    """A CPU-only DDP-like rank (gloo): per step a load_batch label, an op, an all-reduce that
    takes as long as this rank waits for the others."""
    t = Trace(rank=rank)
    for step in range(3):
        s0 = step * 100_000.0
        t.annotation("load_batch", s0, load_us)
        t.op("aten::addmm", s0 + load_us + 10, 500)
        t.annotation("gloo:all_reduce", s0 + load_us + 600, wait_us + 200)
    return t


def test_straggler_fires_on_cpu_ranks_from_the_wait_in_collectives(tmp_path):
    """gloo on the CPU: the fast rank waits in its all-reduce; the slow one (a slow loader) does not."""
    _cpu_rank(0, load_us=200, wait_us=20_000).write(tmp_path / "r0.json")
    _cpu_rank(1, load_us=20_200, wait_us=0).write(tmp_path / "r1.json")
    p = nbprof.load_trace(tmp_path)
    row = one(p.findings, "straggler")
    ev = row["evidence"]
    assert ev["slowest_rank"] == 1 and ev["comm_us"] == {"0": pytest.approx(3 * 20_200), "1": pytest.approx(600)}
    assert ev["differing"][0] == "load_batch"  # the label's own time, not the ProfilerStep markers
    assert "the other ranks wait for it" in row["message"]
    even = tmp_path / "even"
    even.mkdir()
    for r in (0, 1):
        _cpu_rank(r, load_us=200, wait_us=100).write(even / f"r{r}.json")
    assert "straggler" not in kinds(nbprof.load_trace(even).findings)


# -------------------------------------------------------------------------------------- cProfile


def python_profile(rows: dict) -> PythonProfile:
    """A PythonProfile from hand-made raw stats: {(file, line, fn): (cc, nc, tt, ct, callers)}."""
    return PythonProfile(rows)


def test_hot_function_fires_on_many_cheap_calls():
    main = ("main.py", 1, "<module>")
    hot = ("main.py", 10, "tiny")
    raw = {
        main: (1, 1, 0.4, 1.0, {}),
        hot: (50_000, 50_000, 0.6, 0.6, {main: (50_000, 50_000, 0.6, 0.6)}),
    }
    f = python_profile(raw).findings
    row = one(f, "hot_function")
    ev = row["evidence"]
    assert (ev["function"], ev["ncalls"]) == ("tiny", 50_000)
    assert ev["share"] == pytest.approx(0.6)
    assert ev["per_call_s"] == pytest.approx(0.6 / 50_000)
    assert row["severity"] == "high"
    top = one(f, "top_function")["evidence"]
    assert (top["function"], top["share"]) == ("tiny", pytest.approx(0.6))


def test_hot_function_does_not_fire_on_few_or_slow_calls():
    main = ("main.py", 1, "<module>")
    few = ("main.py", 10, "few")
    slow = ("main.py", 20, "slow")
    raw = {
        main: (1, 1, 0.1, 30.0, {}),
        few: (50, 50, 0.9, 0.9, {main: (50, 50, 0.9, 0.9)}),  # 50 calls
        slow: (20_000, 20_000, 29.0, 29.0, {main: (20_000, 20_000, 29.0, 29.0)}),  # 1.45 ms per call
    }
    f = python_profile(raw).findings
    assert "hot_function" not in kinds(f)
    assert kinds(f) == ["top_function"]
    assert len(python_profile({}).findings) == 0


def test_hot_function_live(shell):
    code = ("%%cprofile -q -o prof\ndef tiny(x):\n    return x * x + 1\n"
            "total = 0\nfor i in range(100_000):\n    total += tiny(i)")
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    prof = shell.user_ns["prof"]
    row = one(prof.findings, "hot_function")
    ev = row["evidence"]
    st = prof.pstats
    [(key, value)] = [(k, v) for k, v in st.stats.items() if k[2] == "tiny"]
    assert ev["ncalls"] == value[1] == 100_000
    assert ev["cumtime_s"] == pytest.approx(value[3])
    # the function by its cell, as the notebook shows it, and pstats' line number
    cell = shell.execution_count - 1  # the cell that just ran
    assert row["message"].startswith(f"In [{cell}]:{key[1]}(tiny) was called 100,000 times, ")


# ------------------------------------------------------------------------------------- thresholds


def test_thresholds_are_documented():
    # each threshold is a number in its kind's module, named in that module's docstring
    named = {"TOP_OP_MEDIUM_SHARE": F.top_op, "SYNC_MIN_SHARE": F.sync, "COPY_MIN_SHARE": F.copy,
             "GPU_IDLE_MIN_SHARE": F.gpu_idle, "TINY_KERNEL_US": F.launch_bound,
             "LAUNCH_MIN_KERNELS": F.launch_bound, "LAUNCH_MIN_SHARE": F.launch_bound,
             "DATA_BOUND_MIN_SHARE": F.data_bound, "MEMORY_HIGH_SHARE": F.memory_peak,
             "STRAGGLER_MIN_IMBALANCE": F.straggler, "HOT_MIN_CALLS": F.hot_function,
             "HOT_MAX_PER_CALL_S": F.hot_function, "HOT_MIN_SHARE": F.hot_function}
    for name, module in named.items():
        assert name in module.__doc__ and isinstance(getattr(module, name), (int, float))
    for module in F.TORCH_CHECKS + F.PYTHON_CHECKS:
        for name in F.thresholds(module):
            assert f"``{name}``" in module.__doc__, (module.__name__, name)
    assert set(F.KINDS) >= {"top_op", "sync", "copy", "launch_bound", "gpu_idle", "data_bound", "memory_peak",
                            "hot_function"}
    assert np.isfinite(F.launch_bound.TINY_KERNEL_US)


# --------------------------------------------------------------------------------------- registry


def test_every_kind_module_is_registered_once_and_names_its_kind():
    """A kind module left out of the registry would never run: every public module of the package
    is in it, once, and the kinds it gives are the ones the findings carry."""
    package = pathlib.Path(F.__file__).parent
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    torch_kinds = [m.__name__.rpartition(".")[2] for m in F.TORCH_CHECKS]
    python_kinds = [m.__name__.rpartition(".")[2] for m in F.PYTHON_CHECKS]
    # once in each registry; data_bound (the DataLoaders' records) is in both, one kind
    assert len(set(torch_kinds)) == len(torch_kinds) and len(set(python_kinds)) == len(python_kinds)
    assert sorted(set(torch_kinds) | set(python_kinds)) == sorted(modules)
    assert set(torch_kinds) & set(python_kinds) == {"data_bound"}
    assert F.KINDS == tuple(dict.fromkeys(F.TORCH_KINDS + F.PYTHON_KINDS))
    assert F.TORCH_KINDS == ("clock_skew", "compile_time", "recompile", "graph_break", "top_op", "sync", "sync_line",
                             "device_line", "copy", "gpu_idle", "launch_bound", "small_grid", "tensor_cores", "data_bound",
                             "comm_exposed", "collective_wait", "launch_delay", "memory_growth", "memory_peak",
                             "straggler")
    assert F.PYTHON_KINDS == ("top_function", "hot_function", "hot_line", "data_bound")
    seen = set()
    for name in TRACES:
        seen |= set(nbprof.load_trace(trace_path(name)).findings["kind"])
    assert seen <= set(F.TORCH_KINDS) and {"top_op", "gpu_idle", "small_grid"} <= seen


def test_docs_table_of_kinds_is_the_generated_one():
    """docs/findings.md holds exactly the table kinds_markdown() makes from the registry."""
    doc = (pathlib.Path(__file__).parents[1] / "docs" / "findings.md").read_text()
    begin, end = "<!-- kinds: begin -->\n", "<!-- kinds: end -->"
    assert begin in doc and end in doc
    table = doc[doc.index(begin) + len(begin):doc.index(end)]
    assert table == F.kinds_markdown(), (
        "docs/findings.md is out of date: replace its table with the output of\n"
        "python -c 'from nbprof.analysis.findings import kinds_markdown; print(kinds_markdown(), end=\"\")'")
    for kind in F.KINDS:
        assert f"| `{kind}` |" in table
    for module in F.TORCH_CHECKS + F.PYTHON_CHECKS:
        for name, value in F.thresholds(module).items():
            assert f"`{name}` = {value:g}" in table


# ------------------------------------------------- line by line (--lines): sync_line, device_line, hot_line

def _with_lines(profile, cell: str, source: str, lines_of_op: dict[str, int]):
    """``profile`` (a synthetic trace: no CPU machine records a CUDA wait) with the line data
    ``%%torchprof --lines`` would have collected: each operator named in ``lines_of_op`` on that
    line of ``cell`` (its External id on the stack [cell line]), every other one outside the
    user's code. ``lines()`` and the per-event lines the findings read are then nbprof's own join
    (tests/test_lines_torch.py checks the collected side on real profiles)."""
    ev = profile.events
    names, ext = ev["name"].astype(str).to_numpy(), ev["external_id"].to_numpy()
    numbers = sorted(set(lines_of_op.values()))
    frame_of = {n: i for i, n in enumerate(numbers)}
    ops = [(int(e), 1 + frame_of[lines_of_op[n]]) for n, e in zip(names, ext) if n in lines_of_op and e > 0]
    line_data = {
        "version": 1, "method": "tracer",
        "frames": {"file": [cell] * len(numbers), "line": numbers, "function": ["<module>"] * len(numbers),
                   "function_line": [1] * len(numbers)},
        "cells": {cell: "In [7]"},
        "stacks": [[]] + [[frame_of[n]] for n in numbers],
        "ops": {"external_id": [e for e, _ in ops], "stack": [s for _, s in ops]},
        "allocs": {"stack": [], "bytes": []}, "notes": [],
    }
    return TorchProfile(ev, dataclasses.replace(profile.meta, line_data=line_data, sources={cell: source}))


def _loop_with_lines(tmp_path, item_sync_us: float):
    # 4 steps: `y = x @ w` (aten::mm, a 500 µs kernel), `print(y.sum().item())` (aten::item, whose
    # _local_scalar_dense copies 2 µs back and waits in cudaStreamSynchronize), `x = torch.relu(y)`
    p = training_loop(4, kernel_us=500, item_sync_us=item_sync_us).load(tmp_path)
    # (the cell's lines as a loop body's, unindented: the trace holds the loop's four runs of them)
    source = "%%torchprof --lines\nx, w = torch.ones(8, 8), torch.ones(8, 8)\ny = x @ w\nprint(y.sum().item())\nx = torch.relu(y)\n"
    return _with_lines(p, "<ipython-input-7-abc>", source,
                       {"aten::mm": 3, "aten::item": 4, "aten::_local_scalar_dense": 4, "aten::relu": 5})


def test_sync_line_names_the_line_that_waits(tmp_path):
    p = _loop_with_lines(tmp_path, item_sync_us=300)
    assert p.summary.span_us == pytest.approx(3965.0)  # first op at 30 µs, last ends at 3995 µs
    row = one(p.findings, "sync_line")
    ev = row["evidence"]
    # every .item() waits 300 µs (the last one too: the line is where the time goes)
    assert (ev["cell"], ev["line"], ev["source"]) == ("In [7]", 4, "print(y.sum().item())")
    assert ev["waits"] == 4 and ev["waited_us"] == pytest.approx(1200.0)
    assert ev["share_of_span"] == pytest.approx(1200.0 / 3965.0)
    assert ev["by_op"] == {"aten::_local_scalar_dense": pytest.approx(1200.0)}
    assert row["severity"] == "high"  # 30 % of the span
    assert "In [7] line 4" in row["message"] and "print(y.sum().item())" in row["message"]
    assert "cudaStreamSynchronize" in row["message"]
    assert "4 waits, 1.20 ms in all, 30% of the span (cudaStreamSynchronize under aten::_local_scalar_dense)" in row[
        "message"], row["message"]


def test_sync_line_stays_quiet_on_short_waits_and_without_lines(tmp_path):
    p = _loop_with_lines(tmp_path, item_sync_us=40)  # 160 µs of 3965: 4 %, under SYNC_LINE_MIN_SHARE
    assert "sync_line" not in kinds(p.findings)
    (tmp_path / "plain").mkdir()
    plain = training_loop(4, kernel_us=500, item_sync_us=300).load(tmp_path / "plain")
    assert not {"sync_line", "device_line"} & set(kinds(plain.findings))  # no lines recorded


def test_device_line_names_the_line_with_the_most_device_time(tmp_path):
    p = _loop_with_lines(tmp_path, item_sync_us=300)
    row = one(p.findings, "device_line")
    ev = row["evidence"]
    assert (ev["line"], ev["source"]) == (3, "y = x @ w")
    assert ev["self_device_us"] == 2000.0 and ev["share_of_device"] == pytest.approx(2000.0 / 2008.0)
    assert row["severity"] == "medium"
    assert "In [7] line 3" in row["message"]


def test_hot_line_names_the_line_doing_the_work(shell):
    defined_in = shell.execution_count  # the cell that defines wait_a_bit: "In [n]"
    run(shell, "import time\ndef wait_a_bit():\n    total = 0\n    time.sleep(0.05)\n    return total")
    run(shell, "%%cprofile -q -o cp --lines\nfor _ in range(2):\n    wait_a_bit()")
    cp = shell.user_ns["cp"]
    row = one(cp.findings, "hot_line")
    ev = row["evidence"]
    assert ev["cell"] == f"In [{defined_in}]" and f"In [{defined_in}] line 4" in row["message"]
    # the sleep, not the cell line that called the function (its time includes the sleep's)
    assert (ev["function"], ev["line"], ev["source"], ev["hits"]) == ("wait_a_bit", 4, "    time.sleep(0.05)", 2)
    assert ev["self_time_us"] >= 100_000 and ev["share_of_wall"] == pytest.approx(ev["self_time_us"] / (cp.meta.wall_s * 1e6))
    assert row["severity"] == "medium"  # two 50 ms sleeps: most of the run
    run(shell, "%%cprofile -q -o plain\nwait_a_bit()")
    assert "hot_line" not in kinds(shell.user_ns["plain"].findings)


def test_device_line_on_a_recorded_cuda_trace_with_stacks():
    """The H100 transformer trace, recorded with with_stack: its lines are its script's function
    entries (record_traces.py, not on this machine: no source to quote). Every kernel, copy and
    memset ran under the one user frame, so its line holds all the device time, summed here
    from the raw JSON. Its two cudaDeviceSynchronize calls (torch.cuda.synchronize()) ran under no
    operator, on no line of the user's code: no sync_line."""
    p = nbprof.load_trace(trace_path("transformer_infer_stack"))
    row = one(p.findings, "device_line")
    device_us = sum(e["dur"] for e in raw_events("transformer_infer_stack")
                    if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert row["evidence"]["self_device_us"] == pytest.approx(device_us, abs=0.01)
    assert row["evidence"]["share_of_device"] == pytest.approx(1.0)
    assert row["evidence"]["file"].endswith("record_traces.py") and row["evidence"]["source"] == ""
    assert "record_traces.py:75, " in row["message"] and "``" not in row["message"]
    assert "sync_line" not in kinds(p.findings)
