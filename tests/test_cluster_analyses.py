"""HTA's distributed analyses (temporal breakdown, comm-compute overlap, idle split, collectives,
kernel launches, queue length), checked against answers computed here from the raw JSON of the
traces with plain loops (never nbprof's code): the recorded H100 traces, HTA's NCCL sample
(tests/data/wild/nccl_data.json.gz) and hand-made two-rank folders with sub-µs kernels,
stream-wait events and work in the last profiler step (what HTA gets wrong)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.analysis.breakdown import KERNEL_WAIT_MAX_NS
from nbprof.analysis.findings.launch_delay import waits

from .conftest import DATA, trace_path
from .synthetic import PID, TID, Trace

H100 = ["cnn_train_cuda", "transformer_infer_stack", "cnn_cuda_toggled", "two_streams"]
NCCL = DATA / "wild" / "nccl_data.json.gz"
WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


# ---------------------------------------------------------------- oracles from the raw JSON


def load_doc(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def ns(value: float) -> int:
    """A JSON µs number -> exact ns (the text has at most three decimals)."""
    return int(Decimal(repr(value)) * 1000)


def union(intervals: list[tuple[int, int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def length(segments: list[list[int]]) -> int:
    return sum(e - s for s, e in segments)


def intersection(a: list[list[int]], b: list[list[int]]) -> int:
    total = 0
    for s1, e1 in a:
        for s2, e2 in b:
            total += max(0, min(e1, e2) - max(s1, s2))
    return total


def category(e: dict) -> str:
    if e["cat"] != "kernel":
        return "memory"
    return "comm" if e["name"].lower().startswith("nccl") else "compute"  # HTA's rule


def breakdown_oracle(doc: dict) -> dict[str, float]:
    """HTA's temporal breakdown, overlap and idle split of one rank, exact, device by device."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in events
              if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation")}
    by_device: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e.get("cat") in WORK_CATS:
            by_device[e["args"]["device"]].append(e)
    out: dict[str, float] = defaultdict(float)
    for work in by_device.values():
        iv = {c: union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in work if category(e) == c])
              for c in ("compute", "comm", "memory")}
        busy = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in work])
        cc = union([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in work if category(e) != "memory"])
        window = busy[-1][1] - busy[0][0]
        overlap = intersection(iv["comm"], iv["compute"])
        out["breakdown_window_us"] += window
        out["breakdown_compute_us"] += length(iv["compute"])
        out["breakdown_comm_us"] += length(iv["comm"])
        out["breakdown_memcpy_us"] += length(iv["memory"])
        out["breakdown_idle_us"] += window - length(busy)
        out["breakdown_exposed_comm_us"] += length(iv["comm"]) - overlap
        out["breakdown_exposed_memcpy_us"] += length(busy) - length(cc)
        out["overlap"] += overlap
        for (_, gap_start), (gap_end, _) in zip(busy, busy[1:]):
            starting = [e for e in work if ns(e["ts"]) == gap_end]
            launches = [launch.get(e["args"].get("correlation"), -(2**62)) for e in starting]
            if min(launches) > gap_start:
                out["idle_host_wait_us"] += gap_end - gap_start
            elif gap_end - gap_start < KERNEL_WAIT_MAX_NS:
                out["idle_kernel_wait_us"] += gap_end - gap_start
            else:
                out["idle_other_us"] += gap_end - gap_start
    result = {k: v / 1000 for k, v in out.items() if k != "overlap"}
    comm = out["breakdown_comm_us"]
    result["overlap_pct"] = 100 * out["overlap"] / comm if comm else float("nan")
    for k in ("idle_host_wait_us", "idle_kernel_wait_us", "idle_other_us"):
        result.setdefault(k, 0.0)
    return result


def check_row(row, expected: dict[str, float]) -> None:
    for column, value in expected.items():
        if np.isnan(value):
            assert np.isnan(row[column]), column
        else:
            assert row[column] == pytest.approx(value, abs=1e-6), column


# ---------------------------------------------------------------- hand-made ranks


def cluster_rank(rank: int, slow: float = 1.0, comm_us: float = 150.25) -> Trace:
    """Three profiler steps: a compute kernel, an NCCL all-reduce on its own stream that starts
    under the compute kernel and outlasts it, a sub-µs kernel 0.9 µs after both, a stream-wait
    event on the NCCL stream covering a gap, and the last step's kernels (HTA drops that step)."""
    t = Trace(rank=rank)
    for i in range(3):
        s0 = i * 1000.0
        t.annotation(f"ProfilerStep#{i}", s0, 999.0)
        ext = t.op("aten::mm", s0 + 10, 30)
        t.launch("gemm_kernel", ext, s0 + 12, 5, s0 + 20, 300.0 * slow)
        ext = t.op("aten::add", s0 + 41, 3)
        t.launch("elementwise_kernel", ext, s0 + 42, 1.5, s0 + max(20 + 300.0 * slow, 250 + comm_us) + 0.9, 0.357)
        ext = t.op("nccl:all_reduce", s0 + 50, 20, cat="user_annotation")
        t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", ext,
                 s0 + 52, 4, s0 + 250, comm_us, stream=20)
        t.events[-1]["args"].update({"Collective name": "allreduce", "In msg nelems": 1000 * (rank + 1),
                                     "dtype": "Float", "Process Group Name": "0",
                                     "Process Group Ranks": "[0, 1]"})
        # the NCCL stream waits for an event: a sync row on the stream, not work
        t.events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20,
                         "ts": s0 + 420.5, "dur": 300.0, "args": {"device": 0, "stream": 20, "correlation": 0}})
        ext = t.op("aten::copy_", s0 + 600, 20)
        t.launch("Memcpy DtoH (Device -> Pageable)", ext, s0 + 601, 3, s0 + 700.125, 2.5,
                 runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=4096)
    return t


def write_folder(tmp_path: Path, traces: list[Trace]) -> Path:
    for t in traces:
        t.write(tmp_path / f"host_{t.rank}.pt.trace.json")
    return tmp_path


@pytest.fixture
def cluster(tmp_path):
    folder = write_folder(tmp_path, [cluster_rank(0), cluster_rank(1, slow=1.5)])
    docs = {r: load_doc(folder / f"host_{r}.pt.trace.json") for r in (0, 1)}
    return nbprof.load_trace(folder), docs


# ---------------------------------------------------------------- the temporal breakdown


@pytest.mark.parametrize("name", H100)
def test_breakdown_of_h100_traces_matches_the_raw_json(name):
    p = nbprof.load_trace(trace_path(name))
    row = p.ranks().table.iloc[0]
    check_row(row, breakdown_oracle(load_doc(trace_path(name))))
    # the exclusive parts fill the window exactly
    parts = row[["breakdown_compute_us", "breakdown_exposed_comm_us", "breakdown_exposed_memcpy_us",
                 "breakdown_idle_us"]].sum()
    assert parts == pytest.approx(row["breakdown_window_us"], abs=1e-6)
    assert row["idle_host_wait_us"] + row["idle_kernel_wait_us"] + row["idle_other_us"] == pytest.approx(
        row["breakdown_idle_us"], abs=1e-6)


def test_breakdown_per_rank_matches_the_raw_json(cluster):
    p, docs = cluster
    table = p.ranks().table.set_index("rank")
    for r, doc in docs.items():
        check_row(table.loc[r], breakdown_oracle(doc))


def test_breakdown_is_exact_keeps_the_last_step_and_skips_stream_waits(cluster):
    p, docs = cluster
    assert (p.events["kind"] == "sync").sum() == 6  # the stream waits were read, as waits
    row = p.ranks().table.set_index("rank").loc[0]
    # by hand, per step: gemm 20-320, NCCL 250-400.25, a 0.357 µs kernel 0.9 µs after it, a copy of
    # 2.5 µs at 700.125; three steps, the last one included
    assert row["breakdown_compute_us"] == pytest.approx(3 * (300 + 0.357), abs=1e-9)
    assert row["breakdown_comm_us"] == pytest.approx(3 * 150.25, abs=1e-9)
    assert row["breakdown_memcpy_us"] == pytest.approx(3 * 2.5, abs=1e-9)
    # the window runs from the first kernel to the last step's copy: the stream waits add nothing
    assert row["breakdown_window_us"] == pytest.approx(2000 + 700.125 + 2.5 - 20, abs=1e-9)
    busy = 3 * (400.25 - 20 + 0.357 + 2.5)
    assert row["breakdown_idle_us"] == pytest.approx(row["breakdown_window_us"] - busy, abs=1e-9)
    # NCCL from 250 to 400.25 is under the gemm until 320
    overlap = 70
    assert row["overlap_pct"] == pytest.approx(100 * overlap / 150.25, abs=1e-9)
    assert row["breakdown_exposed_comm_us"] == pytest.approx(3 * (150.25 - overlap), abs=1e-9)
    # the 0.9 µs gap before the small kernel is kernel wait (queued at 42 µs, long before); the
    # copies were launched (601 µs) after the GPU ran dry (401.507): host wait, and so the next step
    assert row["idle_kernel_wait_us"] == pytest.approx(3 * 0.9, abs=1e-9)
    assert row["idle_host_wait_us"] == pytest.approx(row["breakdown_idle_us"] - 3 * 0.9, abs=1e-9)
    assert row["idle_other_us"] == 0


def test_schedule_cycles_each_have_their_window(tmp_path):
    """Two cycles of ``--schedule`` merged, 1 s apart: the second between them was not recorded, so
    it is no idle time; each cycle is a window of its own, and the sums are each file's."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    paths = []
    for i in range(2):
        t = cluster_rank(0)
        for e in t.events:
            e["ts"] += 1_000_000 * i
        t.events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": "Spans", "tid": "x",
                         "ts": 1_000_000 * i, "dur": 3000})
        paths.append(t.write(tmp_path / f"cycle{i}.json"))
    p = TorchProfile.from_trace(concat_traces([read_trace_file(path) for path in paths]))
    row = p.ranks().table.iloc[0]
    one = breakdown_oracle(load_doc(paths[0]))
    expected = {k: 2 * v for k, v in one.items() if k != "overlap_pct"}
    expected["overlap_pct"] = one["overlap_pct"]
    check_row(row, expected)


def test_overlap_on_htas_nccl_sample_matches_the_raw_json():
    p = nbprof.load_trace(NCCL)
    row = p.ranks().table.iloc[0]
    expected = breakdown_oracle(load_doc(NCCL))
    check_row(row, expected)
    assert 0 < row["overlap_pct"] < 100


# ---------------------------------------------------------------- collectives

ELEMENT_BYTES = {"Float": 4, "Byte": 1, "Long": 8, "BFloat16": 2}
SPELLING = {"allreduce": "all_reduce", "broadcast": "broadcast"}


def test_collectives_of_htas_nccl_sample_match_the_raw_json():
    doc = load_doc(NCCL)
    expected: dict = defaultdict(lambda: {"count": 0, "total": 0, "bytes": 0})
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            a = e["args"]
            row = expected[(SPELLING[a["Collective name"]], a["Process Group Name"], a["Process Group Ranks"])]
            row["count"] += 1
            row["total"] += ns(e["dur"])
            row["bytes"] += a["In msg nelems"] * ELEMENT_BYTES[a["dtype"]]
    assert len(expected) == 2  # all-reduces and broadcasts
    got = nbprof.load_trace(NCCL).collectives()
    assert len(got) == len(expected)
    for _, r in got.iterrows():
        want = expected[(r["name"], r["process_group"], r["process_group_ranks"])]
        assert r["count"] == want["count"]
        assert r["total_us"] == pytest.approx(want["total"] / 1000, abs=1e-9)
        assert r["mean_us"] == pytest.approx(want["total"] / 1000 / want["count"], abs=1e-9)
        assert r["bytes"] == want["bytes"]
    assert got["total_us"].is_monotonic_decreasing  # the largest first


def test_collectives_per_rank(cluster):
    p, docs = cluster
    got = p.collectives()
    assert got["rank"].tolist() == [0, 1]
    for r, doc in docs.items():
        row = got[got["rank"] == r].iloc[0]
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
        assert (row["name"], row["process_group"], row["process_group_ranks"]) == ("all_reduce", "0", "[0, 1]")
        assert row["count"] == len(kernels) == 3
        assert row["total_us"] == pytest.approx(sum(ns(e["dur"]) for e in kernels) / 1000, abs=1e-9)
        assert row["max_us"] == pytest.approx(max(e["dur"] for e in kernels), abs=1e-9)
        assert row["bytes"] == 3 * 1000 * (r + 1) * 4


def gloo_rank(rank: int, work_us: float) -> Trace:
    """DDP on the CPU with gloo, as torch records it: ``c10d::allreduce_`` on the main thread only
    enqueues; ``gloo:all_reduce`` on the backend's thread is the collective's work."""
    t = Trace(rank=rank)
    for i in range(2):
        s0 = i * 1000.0
        t.op("c10d::allreduce_", s0 + 10, 20)
        t.annotation("gloo:all_reduce", s0 + 25, work_us, tid=TID + 1)
        t.op("c10d::broadcast_", s0 + 500, 5)
        t.annotation("gloo:broadcast", s0 + 502, 7.5, tid=TID + 1)
    return t


def test_collectives_without_device_work_are_the_backends_ranges(tmp_path):
    p = nbprof.load_trace(write_folder(tmp_path, [gloo_rank(0, 300.0), gloo_rank(1, 120.5)]))
    got = p.collectives().set_index(["rank", "name"])
    assert sorted(got.index) == [(0, "all_reduce"), (0, "broadcast"), (1, "all_reduce"), (1, "broadcast")]
    assert got.loc[(0, "all_reduce"), "total_us"] == pytest.approx(600.0)
    assert got.loc[(1, "all_reduce"), "total_us"] == pytest.approx(241.0)
    assert got.loc[(1, "broadcast"), "count"] == 2
    assert (got["bytes"] == -1).all()  # gloo's ranges say no sizes
    assert (got["process_group"] == "").all()
    # the report's table says the size is not known ("—"), never "-1 B" (its static rows, shown
    # before the JavaScript runs, and the data its renderer formats: null is "—" there)
    html = p.report().html(include_library=False)
    assert "-1 B" not in html
    assert html.count('\\"all_reduce\\", \\"\\", 2, 600.0, 300.0, 300.0, \\"___NaN___\\"]') == 1  # null for itables


def test_collective_names_have_one_spelling():
    from nbprof.analysis.collectives import collective_name

    assert collective_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "all_reduce"
    assert collective_name("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)") == \
        "broadcast"
    assert collective_name("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "reduce_scatter"
    assert collective_name("ncclDevKernel_AllGather_RING_LL") == "all_gather"
    assert collective_name("ncclDevKernel_SendRecv") == "send_recv"
    assert collective_name("allgather_into_tensor_coalesced") == "all_gather"
    assert collective_name("c10d::allreduce_") == "all_reduce"
    assert collective_name("gloo:all_reduce") == "all_reduce"
    assert collective_name("something else") == "something else"


# ---------------------------------------------------------------- launches and queue length


def launches_oracle(doc: dict) -> dict[int, dict]:
    runtime = {e["args"]["correlation"]: e for e in doc["traceEvents"]
               if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation")}
    out = {}
    for e in doc["traceEvents"]:
        c = e.get("args", {}).get("correlation")
        if e.get("cat") in WORK_CATS and c in runtime:
            r = runtime[c]
            out[c] = {"name": e["name"], "launch": r["name"], "cpu_dur_us": r["dur"], "gpu_dur_us": e["dur"],
                      "launch_delay_us": (ns(e["ts"]) - ns(r["ts"])) / 1000, "stream": e["args"]["stream"],
                      "launch_ns": ns(r["ts"]), "end_ns": ns(e["ts"]) + ns(e["dur"])}
    return out


@pytest.mark.parametrize("path", [trace_path(n) for n in H100] + [NCCL], ids=H100 + ["nccl"])
def test_launches_match_the_raw_json(path):
    expected = launches_oracle(load_doc(path))
    got = nbprof.load_trace(path).launches()
    assert len(got) == len(expected) > 0
    for r in got.itertuples():
        want = expected[r.correlation]
        assert (r.name, r.launch, r.stream) == (want["name"], want["launch"], want["stream"])
        assert r.cpu_dur_us == pytest.approx(want["cpu_dur_us"], abs=1e-9)
        assert r.gpu_dur_us == pytest.approx(want["gpu_dur_us"], abs=1e-9)
        assert r.launch_delay_us == pytest.approx(want["launch_delay_us"], abs=1e-9)


@pytest.mark.parametrize("path", [trace_path(n) for n in H100] + [NCCL], ids=H100 + ["nccl"])
def test_queue_length_matches_a_walk_over_the_raw_json(path):
    by_stream: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for w in launches_oracle(load_doc(path)).values():
        by_stream[w["stream"]] += [(w["launch_ns"], 1), (w["end_ns"], -1)]
    got = nbprof.load_trace(path).queue_length().set_index("stream")
    assert sorted(got.index) == sorted(by_stream)
    for stream, changes in by_stream.items():
        changes.sort()  # by time; at one instant -1 (a finish) before +1 (a launch)
        queue, peak, area = 0, 0, 0
        for (t, step), nxt in zip(changes, changes[1:] + [None]):
            queue += step
            peak = max(peak, queue)
            if nxt is not None:
                area += queue * (nxt[0] - t)
        window = changes[-1][0] - changes[0][0]
        row = got.loc[stream]
        assert row["launches"] == len(changes) // 2
        assert row["max_queue_length"] == peak
        assert row["window_us"] == pytest.approx(window / 1000, abs=1e-9)
        assert row["mean_queue_length"] == pytest.approx(area / window, rel=1e-12)


def test_launches_and_queues_per_rank(cluster):
    p, docs = cluster
    launches = p.launches()
    for r, doc in docs.items():
        expected = launches_oracle(doc)
        mine = launches[launches["rank"] == r]
        assert len(mine) == len(expected) == 12
        assert sorted(mine["launch_delay_us"]) == pytest.approx(sorted(w["launch_delay_us"] for w in expected.values()),
                                                                abs=1e-9)
    queues = p.queue_length()
    assert sorted(zip(queues["rank"], queues["stream"])) == [(0, 7), (0, 20), (1, 7), (1, 20)]


# ---------------------------------------------------------------- findings


def kinds(p) -> set[str]:
    return set(p.findings["kind"])


@pytest.mark.parametrize("path", [trace_path(n) for n in H100] + [NCCL], ids=H100 + ["nccl"])
def test_cluster_findings_stay_quiet_on_the_recorded_traces(path):
    """Single ranks with no or well hidden communication, kernels that start as soon as their stream
    is free (the longest wait after a launch returned on an idle stream is 4.1 µs, in the NCCL
    sample): none of the three is true there."""
    p = nbprof.load_trace(path)
    assert not kinds(p) & {"comm_exposed", "collective_wait", "launch_delay"}


def test_comm_exposed_fires_on_the_rank_whose_communication_runs_alone(tmp_path):
    # rank 0: all-reduces of 700 µs from 250, the gemm ends at 320: 630 µs a step alone
    p = nbprof.load_trace(write_folder(tmp_path, [cluster_rank(0, comm_us=700.0), cluster_rank(1)]))
    f = p.findings.set_index("kind").loc["comm_exposed"]
    row = p.ranks().table.set_index("rank").loc[0]
    assert f["evidence"]["rank"] == 0
    assert f["evidence"]["exposed_comm_us"] == pytest.approx(3 * 630.0)
    # the window: the first gemm (20) to the last step's small kernel (2950.9 + 0.357)
    assert row["breakdown_window_us"] == pytest.approx(2951.257 - 20)
    assert f["evidence"]["share"] == pytest.approx(3 * 630.0 / (2951.257 - 20))
    assert f["evidence"]["ranks_over"] == 1
    assert f["severity"] == "high"  # 64 %


def test_comm_exposed_stays_quiet_when_communication_hides(cluster):
    p, _ = cluster  # rank 0: 80 of 150 µs exposed a step, 9 % of its window; rank 1: none
    assert "comm_exposed" not in kinds(p)


def test_collective_wait_names_the_rank_that_waits_and_the_late_one(tmp_path):
    p = nbprof.load_trace(write_folder(tmp_path, [cluster_rank(0, comm_us=600.0), cluster_rank(1)]))
    f = p.findings.set_index("kind").loc["collective_wait"]
    e = f["evidence"]
    assert (e["collective"], e["waiting_rank"], e["late_rank"]) == ("all_reduce", 0, 1)
    assert e["extra_us"] == pytest.approx(3 * (600 - 150.25))
    assert "Rank 0 waits in all_reduce" in f["message"]


def test_collective_wait_needs_a_real_difference(cluster):
    p, _ = cluster  # the same all-reduces on both ranks
    assert "collective_wait" not in kinds(p)


def test_launch_delay_fires_on_work_that_waits_on_an_idle_stream(tmp_path):
    t = Trace()
    for i in range(4):
        s0 = i * 1000.0
        ext = t.op("aten::mm", s0 + 10, 30)
        # launched at s0 + 12, the call returns at s0 + 17; the stream is idle; it starts at s0 + 417
        t.launch("gemm_kernel", ext, s0 + 12, 5, s0 + 417, 100.0)
    t.op("aten::relu", 3990, 5)
    p = t.load(tmp_path)
    f = p.findings.set_index("kind").loc["launch_delay"]
    assert f["evidence"]["launches"] == 4
    assert f["evidence"]["idle_us"] == pytest.approx(4 * 400.0)
    assert f["evidence"]["share"] == pytest.approx(1600.0 / (3995 - 10))
    # the same kernels queued behind each other (the CPU ahead) are no finding
    t2 = Trace()
    ext = t2.op("aten::mm", 10, 30)
    t2.launch("gemm_kernel", ext, 12, 5, 20, 1000.0)
    for i in range(4):
        ext = t2.op("aten::mm", 40 + i * 10, 5)
        t2.launch("gemm_kernel", ext, 41 + i * 10, 2, 1020 + i * 1000, 1000.0)
    q = t2.load(tmp_path, "queued.json")
    assert q.launches()["launch_delay_us"].max() > 3900
    assert "launch_delay" not in kinds(q)
    # nor are waits on a free stream while another stream keeps the GPU busy (a dependency)
    t3 = Trace()
    for i in range(4):
        s0 = i * 1000.0
        ext = t3.op("aten::mm", s0 + 10, 30)
        t3.launch("gemm_kernel", ext, s0 + 12, 5, s0 + 20, 900.0)
        ext = t3.op("nccl:all_reduce", s0 + 50, 10, cat="user_annotation")
        t3.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, s0 + 52, 4, s0 + 800, 100.0, stream=20)
    d = t3.load(tmp_path, "dependency.json")
    begin, start = waits(d.launches())
    assert ((start - begin) >= 700_000).sum() == 4  # the all-reduces waited 744 µs each, the GPU busy
    assert "launch_delay" not in kinds(d)


# ---------------------------------------------------------------- the Cluster section


def test_ranks_tab_draws_each_ranks_breakdown_and_the_collectives(tmp_path):
    import re

    from nbprof.views.tabs.ranks import BAR_PARTS

    p = nbprof.load_trace(write_folder(tmp_path, [cluster_rank(0, comm_us=700.0), cluster_rank(1, slow=1.5)]))
    html = p.report().html(include_library=False)
    svg = re.search(r'<svg[^>]*aria-label="GPU time per rank".*?</svg>', html, re.S).group(0)
    # where a notebook's outputs are sanitized the drawing hides, and this line says what it was
    from .htmltext import text

    assert "The per-rank breakdown is a drawing that shows once the notebook is trusted" in text(html)
    table = p.ranks().table.set_index("rank")
    longest = table["breakdown_window_us"].max()
    for r in (0, 1):
        row = table.loc[r]
        assert f"rank {r} · overlap {row['overlap_pct']:.0f}%" in svg
        # each part's bar is its time on the common scale, in document order, adding up to the window
        widths = [float(w) for w in re.findall(rf'<rect x="[\d.]+" y="\d+" width="([\d.]+)" height="\d+" fill="#\w+">'
                                               rf"<title>rank {r}:", svg)]
        parts = [row[c] for c, _, _ in BAR_PARTS if row[c] > 0]
        assert widths == pytest.approx([540 * v / longest for v in parts], abs=0.01)
        assert sum(parts) == pytest.approx(row["breakdown_window_us"], abs=1e-6)
    assert "collectives per rank" in html and "all_reduce" in html


class Summaries:
    """What a profile kept as per-rank summaries would hold: ranks() and collectives() only (the
    contract the Ranks tab renders from: helper L's cluster profile provides these)."""

    def __init__(self, profile) -> None:
        self._ranks, self._collectives = profile.ranks(), profile.collectives()

    def ranks(self):
        return self._ranks

    def collectives(self):
        return self._collectives


class Bare:
    def __init__(self, profile) -> None:
        self.profile, self.limit = profile, None


def test_ranks_tab_renders_from_the_rank_and_collective_tables_alone(cluster):
    from nbprof.views.tabs.ranks import RANKS

    import re

    p, _ = cluster

    def html(profile) -> str:  # each table gets a random element id
        return re.sub(r"itables_[0-9a-f_]+", "itables_ID", RANKS.render(Bare(profile)))

    assert html(Summaries(p)) == html(p)
