"""The TensorBoard plugin's own unit tests (pytorch/kineto ``tb_plugin/test/test_profiler.py``,
BSD-3-Clause), ported: the plugin's hand-made traces in torch 1.8-1.9's format and the numbers it
expects, asserted on nbprof. The traces that the plugin keeps inline are in tests/data/wild
(``TestProfiler.<test>.json``) or, where short, written here as the plugin writes them.

Where the plugin's number is not torch's (and so not nbprof's) the test says so and why, and
asserts nbprof's number next to the plugin's. Where the plugin is wrong on real traces (not in its
unit tests): it ignores kernels launched through ``cuLaunchKernel`` (the last test here), drops
events whose timestamps collide on a whole-µs clock (``test_wild_traces``: back-to-back calls that
share a timestamp stay apart), adds profiler overhead to the enclosing op's self time and reports
negative self times for unfinished ops (``docs/differences.md``).

The plugin's step breakdown (Total, CpuOp, Other, ...) gives each instant of a step to one role and
stretches a step over the device work it launched; nbprof's steps() are torch's step ranges and
the device work launched in them: the tests assert where the two meet and say where they do not.
``p.overview()`` is the plugin's breakdown itself: its steps_costs are asserted in
tests/test_overview.py, test_build_module_hierarchy in tests/test_modules.py.

test_tensor_core is in tests/test_tensor_cores.py. Not ported, nbprof has no such view yet:
test_distributed_nccl, test_distributed_gloo_gpu, test_distributed_gloo_cpu,
test_distributed_nccl_user_annotation_has_communication (issue 14)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import nbprof

WILD = Path(__file__).parent / "data" / "wild"
NLL = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
GEMM = "void gemmSN_TN_kernel_64addr"


def load(test: str):
    return nbprof.load_trace(WILD / f"TestProfiler.{test}.json")


def load_events(tmp_path: Path, events: list[dict]):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(events))  # the plugin's traces are bare lists of events
    return nbprof.load_trace(path)


def op(name: str, ts: float, dur: float, ext: int, tid: str = "456") -> dict:
    return {"ph": "X", "cat": "Operator", "name": name, "pid": 13721, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input Dims": [], "External id": ext}}


def runtime(name: str, ts: float, dur: float, corr: int, ext: int, tid: str = "456") -> dict:
    return {"ph": "X", "cat": "Runtime", "name": name, "pid": 13721, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext}}


def kernel(name: str, ts: float, dur: float, corr: int, ext: int, stream: str = "stream 7") -> dict:
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext, "device": 0}}


def test_all_categories():
    p = load("test_all_categories")
    k = p.key_averages().set_index("name")
    to, nll = k.loc["aten::to"], k.loc["aten::nll_loss_backward"]
    assert (to["count"], to["cpu_total_us"], to["device_total_us"], to["self_cpu_us"], to["self_device_us"]) == \
        (1, 60, 0, 60, 0)
    assert (nll["count"], nll["cpu_total_us"], nll["device_total_us"]) == (1, 70, 30)
    assert nll["self_cpu_us"] == 70 - 20 - 10 - 5
    assert nll["self_device_us"] == 30
    by_shape = p.key_averages("shape").set_index("name")
    assert by_shape.loc["aten::to", "input_shapes"] == "[[2, 8, 5], [], [], [], [], [], [], []]"
    assert by_shape.loc["aten::nll_loss_backward", "input_shapes"] == "[[], [32, 1000], [32], [], [], [], []]"
    # the plugin's op list leaves out the ProfilerStep and the DataLoader range (2 rows); torch's
    # key averages, and nbprof's, keep every range: 4 rows of ops and ranges
    assert k["kind"].isin(["op", "annotation"]).sum() == 4 and k.loc["ProfilerStep*", "count"] == 1
    kernels = p.kernels()
    row = kernels[kernels["kind"] == "kernel"].iloc[0]
    assert (row["name"], row["launched_by"], row["count"]) == (NLL, "aten::nll_loss_backward", 1)
    assert (row["device_total_us"], row["device_avg_us"], row["device_min_us"], row["device_max_us"]) == \
        (15, 15, 15, 15)
    # the step's costs: kernel 15, memcpy 10, memset 5, DataLoader 180
    d = p.device_stats.devices.iloc[0]
    assert (d["kernel_us"], d["memcpy_us"], d["memset_us"]) == (15, 10, 5)
    # runtime: the plugin says 30, the calls took 20 + 10 + 5 = 35. Not wrong, another definition:
    # its step breakdown gives each instant of the step to one role, device work first, so the
    # 5 µs cudaLaunchKernel (405-410) counts as the memcpy running then (405-415). nbprof sums
    # each kind's own time
    ev = p.events
    assert ev.loc[ev["kind"] == "runtime", "dur_us"].sum() == 35
    assert k.loc["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "cpu_total_us"] == 180
    assert p.steps()["dur_us"].tolist() == [400.0]


def test_external_id():
    """Runtime calls of 0 µs at an op's start or end: the External id tells which op launched."""
    k = load("test_external_id").key_averages().set_index("name")
    assert k.loc["aten::mat_mul", "device_total_us"] == 5 + 6 + 7 + 8
    assert k.loc["aten::mat_mul", "self_device_us"] == 6 + 8
    assert k.loc["aten::mm", "device_total_us"] == 5 + 7
    assert k.loc["aten::mm", "self_device_us"] == 5 + 7


def test_operator_relation(tmp_path):
    for mm_start in (100, 130):  # the same start, then the same end
        p = load_events(tmp_path, [op("aten::mat_mul", 100, 100, 2), op("aten::mm", mm_start, 70, 4)])
        k = p.key_averages().set_index("name")
        assert k.loc["aten::mat_mul", "self_cpu_us"] == 100 - 70
        assert k.loc["aten::mm", "self_cpu_us"] == 70


def test_remove_dup_nodes(tmp_path):
    """Nested ops of one name are one op (torch's _remove_dup_nodes), with its children's kernels."""
    events = [op("aten::mm", 100, 100, 2), op("aten::mm", 110, 80, 3), op("aten::mm", 120, 60, 4),
              runtime("cudaLaunchKernel", 130, 20, 335, 4), kernel(GEMM, 220, 8, 335, 4)]
    k = load_events(tmp_path, events).key_averages()
    ops = k[k["kind"] == "op"]
    assert ops["name"].tolist() == ["aten::mm"]
    assert ops["self_device_us"].tolist() == [8]


def test_top_level_runtime(tmp_path):
    """A runtime call on another thread than any op, whose External id names no op: its kernel
    belongs to no op (nbprof's fallback through the correlation finds no op around the call)."""
    events = [op("aten::mm", 100, 100, 2, tid="123"), runtime("cudaLaunchKernel", 130, 20, 335, 335),
              kernel(GEMM, 220, 8, 335, 335)]
    p = load_events(tmp_path, events)
    k = p.key_averages().set_index("name")
    assert k.loc["aten::mm", "device_total_us"] == 0 and k.loc["aten::mm", "self_device_us"] == 0
    assert p.kernels()["count"].tolist() == [1]


def test_runtime_called_by_profilerstep(tmp_path):
    events = [op("ProfilerStep#1", 100, 300, 2), runtime("cudaLaunchKernel", 130, 20, 335, 2),
              kernel(GEMM, 220, 8, 335, 2)]
    p = load_events(tmp_path, events)
    ev = p.events
    assert p.device_stats.devices.iloc[0]["kernel_us"] == 8
    assert ev.loc[ev["kind"] == "runtime", "dur_us"].sum() == 20
    # the step's "Other" (the plugin's step breakdown): its time that is neither kernel nor runtime
    assert p.steps().iloc[0]["dur_us"] == 300
    step = p.overview().iloc[0]
    assert (step["duration_us"], step["kernel_us"], step["runtime_us"], step["other_us"]) == (300, 8, 20, 300 - 8 - 20)
    # "ProfilerStep is not regarded as an operator": no op rows; the kernel is the step's
    k = p.key_averages()
    assert (k["kind"] == "op").sum() == 0
    kernels = p.kernels()
    assert kernels["count"].tolist() == [1] and kernels["launched_by"].tolist() == ["ProfilerStep#1"]


def test_runtime_launch_multiple_kernels():
    """One cudaLaunchCooperativeKernelMultiDevice, two kernels on two streams."""
    p = load("test_runtime_launch_multipe_kernels")
    assert p.key_averages().set_index("name").loc["Broadcast", "device_total_us"] == 120318 + 132800
    kernels = p.kernels()
    assert kernels["count"].tolist() == [2] and kernels["launched_by"].tolist() == ["Broadcast"]


def test_self_time():
    k = load("test_self_time").key_averages().set_index("name")
    mat_mul, mm = k.loc["aten::mat_mul"], k.loc["aten::mm"]
    assert (mat_mul["cpu_total_us"], mat_mul["device_total_us"]) == (100, 20 + 16)
    assert (mat_mul["self_cpu_us"], mat_mul["self_device_us"]) == (100 - 40 - 25, 16)
    assert (mm["cpu_total_us"], mm["device_total_us"], mm["self_cpu_us"], mm["self_device_us"]) == (40, 20, 30, 20)


def test_gpu_utilization():
    """No ProfilerStep: the plugin's window is the whole profile (100 to 220 µs), as nbprof's."""
    p = load("test_gpu_utilization")
    d = p.device_stats.devices
    assert d["device"].tolist() == ["cuda:1"]
    d = d.iloc[0]
    assert d["busy_fraction"] == pytest.approx((40 + 20) / 120)
    assert d["sm_efficiency"] == pytest.approx(
        (0.5 * (135 - 130) + 1.0 * (140 - 135) + 0.6 * (145 - 140) + 0.9 * (150 - 145) + 0.3 * (170 - 150)
         + 1.0 * (220 - 200)) / (220 - 100))
    # the file's "est. achieved occupancy %" values are fractions (0.6): read as they are written
    assert d["achieved_occupancy_pct"] == pytest.approx((0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / (10 + 15 + 25 + 20))
    assert math.isnan(d["steps_busy_fraction"])
    # per kernel name: time-weighted blocks per SM and occupancy. The plugin leaves out the 0 µs
    # kernel; weighted by duration it weighs nothing here either
    k = p.kernels().set_index("name")
    assert k.loc[GEMM, "blocks_per_sm"] == pytest.approx(0.6)
    assert k.loc[GEMM, "occupancy_pct"] == pytest.approx(0.1)
    assert k.loc[NLL, "blocks_per_sm"] == pytest.approx((0.5 * 10 + 0.3 * 25 + 10.5 * 20) / (10 + 25 + 20))
    assert k.loc[NLL, "occupancy_pct"] == pytest.approx((0.6 * 10 + 1.0 * 25 + 0.3 * 20) / (10 + 25 + 20))


def test_gpu_utilization_kernel_out_of_step(tmp_path):
    """Both kernels run outside the only ProfilerStep: over the steps' window (the plugin's) the
    GPU is idle and the estimates have no kernel (the plugin's None, nbprof's NaN); over the whole
    profile they are what the kernels did."""
    est = {"blocks per SM": 0.5, "est. achieved occupancy %": 0.6}
    events = [op("aten::mat_mul", 10, 10, 1), op("aten::mm", 120, 70, 3), op("aten::mm", 220, 20, 4),
              op("ProfilerStep#2", 100, 100, 2),
              {**kernel(NLL, 60, 20, 334, 1), "pid": 1, "args": {"correlation": 334, "external id": 1, "device": 1, **est}},
              runtime("cudaLaunchKernel", 15, 5, 334, 1),
              {**kernel(NLL, 240, 25, 337, 4), "pid": 1,
               "args": {"correlation": 337, "external id": 4, "device": 1, "blocks per SM": 10.5,
                        "est. achieved occupancy %": 0.3}},
              runtime("cudaLaunchKernel", 230, 10, 337, 4)]
    p = load_events(tmp_path, events)
    d = p.device_stats.devices.iloc[0]
    assert d["steps_busy_fraction"] == 0.0
    assert math.isnan(d["steps_sm_efficiency"]) and math.isnan(d["steps_achieved_occupancy_pct"])
    assert d["busy_fraction"] == pytest.approx(45 / 255)
    assert d["achieved_occupancy_pct"] == pytest.approx((20 * 0.6 + 25 * 0.3) / 45)
    k = p.kernels().set_index("name")
    assert k.loc[NLL, "blocks_per_sm"] == pytest.approx((20 * 0.5 + 25 * 10.5) / (20 + 25))
    assert k.loc[NLL, "occupancy_pct"] == pytest.approx((20 * 0.6 + 25 * 0.3) / (20 + 25))


# self increase, increase (bytes) per op name: the plugin's memory table, GPU0 and CPU
GPU_MEMORY = {"aten::to": (104, 104), "aten::nll_loss_backward": (0, 0), "aten::copy_": (0, 0), "aten::addmm": (0, 0),
              "aten::tranas_stride": (0, 0), "aten::transpose": (0, 0), "aten::t": (0, 0), "aten::liner": (20, 20)}
CPU_MEMORY = {"aten::to": (4, 4), "aten::liner": (0, 50), "aten::tranas_stride": (50, 50), "aten::transpose": (0, 50),
              "aten::t": (0, 50)}


def test_memory_view():
    """The bytes allocated (net) inside each op, self and with its children, per device: the plugin's
    "self increase" and "increase" columns. Its allocation sizes and counts (allocations only, frees
    left out) have no column in nbprof; its call counts are the ops' counts."""
    k = load("test_memory_view").key_averages().set_index("name")
    for name, (self_bytes, total) in GPU_MEMORY.items():
        assert (k.loc[name, "self_device_mem_bytes"], k.loc[name, "device_mem_bytes"]) == (self_bytes, total), name
    for name, (self_bytes, total) in CPU_MEMORY.items():
        assert (k.loc[name, "self_cpu_mem_bytes"], k.loc[name, "cpu_mem_bytes"]) == (self_bytes, total), name


def test_kernels_launched_through_the_driver_api(tmp_path):
    """Where the plugin is wrong: it links kernels only to the runtime launch calls it knows by name
    (cudaLaunchKernel, ...), so a kernel launched through the driver API (``cuLaunchKernel``,
    category ``cuda_driver``: Triton's and torch.compile's kernels) gets no op, and its op shows no
    device time. The launch is a launch whatever its name: the kernel is its op's."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add", "pid": 1, "tid": 1, "ts": 100,
               "dur": 50, "args": {"External id": 7}},
              {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5,
               "args": {"External id": 7, "correlation": 70}},
              {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7, "ts": 120,
               "dur": 12, "args": {"External id": 7, "correlation": 70, "device": 0, "stream": 7}}]
    p = load_events(tmp_path, events)
    assert p.key_averages().set_index("name").loc["triton_poi_fused_add", "self_device_us"] == 12
    assert p.kernels()["launched_by"].tolist() == ["triton_poi_fused_add"]


def memcpy(ts: float, dur: float, corr: int, ext: int) -> dict:
    return {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7",
            "ts": ts, "dur": dur, "args": {"stream": 7, "correlation": corr, "external id": ext}}


def busy_in(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Device busy time within [lo, hi): a plain loop over disjoint (start, end) intervals."""
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in intervals)


def test_no_profilerstep(tmp_path):
    """No ProfilerStep: the plugin makes the whole profile one step; nbprof has no step rows and its
    whole-profile numbers are that step's."""
    events = [{**op("aten::to", 100, 60, 3, tid="123"), "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []],
                                                                 "External id": 3}},
              op("aten::nll_loss_backward", 300, 70, 4), kernel(NLL, 320, 100, 40348, 4),
              runtime("cudaLaunchKernel", 310, 20, 40348, 4)]
    p = load_events(tmp_path, events)
    k = p.key_averages().set_index("name")
    to, nll = k.loc["aten::to"], k.loc["aten::nll_loss_backward"]
    assert (to["count"], to["cpu_total_us"], to["device_total_us"], to["self_cpu_us"], to["self_device_us"]) == \
        (1, 60, 0, 60, 0)
    assert (nll["count"], nll["cpu_total_us"], nll["device_total_us"], nll["self_cpu_us"], nll["self_device_us"]) == \
        (1, 70, 100, 70 - 20, 100)
    assert p.key_averages("shape").set_index("name").loc["aten::to", "input_shapes"] == \
        "[[2, 8, 5], [], [], [], [], [], [], []]"
    row = p.kernels().iloc[0]
    assert len(p.kernels()) == 1
    assert (row["name"], row["launched_by"], row["count"]) == (NLL, "aten::nll_loss_backward", 1)
    assert (row["device_total_us"], row["device_avg_us"], row["device_min_us"], row["device_max_us"]) == \
        (100, 100, 100, 100)
    assert p.steps().empty
    d = p.device_stats.devices.iloc[0]
    # the plugin's one step: Total (320 + 100) - 100, kernel 100, no copies
    assert (d["span_us"], d["kernel_us"], d["memcpy_us"], d["memset_us"]) == ((320 + 100) - 100, 100, 0, 0)
    # runtime: the plugin says 320 - 310 = 10 (each instant to one role, device work first: the call's
    # last 10 µs count as the kernel running then); nbprof sums the calls' own time. See test_all_categories
    ev = p.events
    assert ev.loc[ev["kind"] == "runtime", "dur_us"].sum() == 20
    assert math.isnan(d["steps_busy_fraction"]) and d["busy_fraction"] == pytest.approx(100 / 320)


def test_multiple_profilersteps_no_overlap(tmp_path):
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"),
              {**op("aten::to", 200, 60, 2, tid="123"), "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []],
                                                                 "External id": 2}},
              op("ProfilerStep#2", 350, 150, 3, tid="123"), op("aten::mm", 360, 50, 4, tid="123"),
              memcpy(280, 40, 334, 2), runtime("cudaMemcpyAsync", 250, 5, 334, 2, tid="123"),
              kernel(NLL, 410, 200, 40348, 4), runtime("cudaLaunchKernel", 400, 5, 40348, 4, tid="123")]
    p = load_events(tmp_path, events)
    s = p.steps()
    assert s["step"].tolist() == [1, 2]
    # the plugin's per-step device costs (memcpy 40, then kernel 200): the device work each step launched
    assert s["device_us"].tolist() == [40, 200] and s["kernels"].tolist() == [1, 1]
    # its CpuOp + Runtime: 55 + 5 and 45 + 5, the self time of the ops and calls in the step
    assert s["self_cpu_us"].tolist() == [(60 - 5) + 5, (50 - 5) + 5]
    assert s["top_op"].tolist() == ["aten::to", "aten::mm"]
    # the plugin's step Total (320 - 100, 610 - 350) runs to the end of the device work the step
    # launched; nbprof's dur_us is the step's own range, as torch records it (another definition)
    assert s["dur_us"].tolist() == [200, 150]
    k = p.key_averages().set_index("name")
    for name, expected in (("aten::to", (1, 60, 40, 60 - 5, 40)), ("aten::mm", (1, 50, 200, 50 - 5, 200))):
        r = k.loc[name]
        assert (r["count"], r["cpu_total_us"], r["device_total_us"], r["self_cpu_us"], r["self_device_us"]) == \
            expected, name
    kernels = p.kernels().set_index("kind")  # the plugin's kernel list has kernels only; nbprof's copies too
    assert (kernels.loc["kernel", "name"], kernels.loc["kernel", "launched_by"], kernels.loc["kernel", "count"]) == \
        (NLL, "aten::mm", 1)
    assert (kernels.loc["kernel", "device_total_us"], kernels.loc["kernel", "device_min_us"],
            kernels.loc["kernel", "device_max_us"]) == (200, 200, 200)
    assert kernels.loc["memcpy", "launched_by"] == "aten::to"
    d = p.device_stats.devices.iloc[0]
    assert d["steps_span_us"] == 500 - 100
    assert d["steps_busy_fraction"] == pytest.approx(busy_in([(280, 320), (410, 610)], 100, 500) / 400)


def test_multiple_profilersteps_with_overlap(tmp_path):
    """A kernel launched before the profile (no runtime call, no op) runs into step 1; step 1's
    memcpy runs into step 2."""
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 200, 60, 2, tid="123"),
              op("ProfilerStep#2", 350, 150, 3, tid="123"), op("aten::mm", 360, 50, 4, tid="123"),
              kernel(NLL, 150, 90, 123, 123), memcpy(280, 100, 334, 2),
              runtime("cudaMemcpyAsync", 250, 5, 334, 2, tid="123"), kernel(NLL, 410, 200, 40348, 4),
              runtime("cudaLaunchKernel", 400, 5, 40348, 4, tid="123")]
    p = load_events(tmp_path, events)
    s = p.steps()
    # the plugin: step 1 memcpy 100 and no kernel (the early kernel is nobody's), step 2 kernel 200
    assert s["device_us"].tolist() == [100, 200] and s["kernels"].tolist() == [1, 1]
    assert s["self_cpu_us"].tolist() == [(60 - 5) + 5, (50 - 5) + 5]
    # the plugin's Totals ((280 + 100) - (150 + 90), 610 - (280 + 100)) start each step where the
    # previous step's device work ended; nbprof's are the steps' ranges
    assert s["dur_us"].tolist() == [200, 150]
    kernels = p.kernels().set_index("kind")
    assert (kernels.loc["kernel", "count"], kernels.loc["kernel", "device_total_us"]) == (2, 90 + 200)
    assert kernels.loc["kernel", "launched_by"] == "aten::mm"
    k = p.key_averages().set_index("name")
    assert k.loc["ProfilerStep*", "device_total_us"] == 100 + 200  # not the early kernel
    d = p.device_stats.devices.iloc[0]
    device = [(150, 240), (280, 380), (410, 610)]
    assert d["busy_us"] == busy_in(device, 100, 610)
    assert d["steps_busy_fraction"] == pytest.approx(busy_in(device, 100, 500) / 400)


def test_last_steps_no_kernel(tmp_path):
    """The plugin drops the last steps when they launched no kernel (its overview counts 1 step of
    3). nbprof keeps every step torch recorded: their time on the CPU was spent, launching nothing
    is what they did (another definition, not a wrong one)."""
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 120, 10, 2, tid="123"),
              op("ProfilerStep#2", 300, 100, 3, tid="123"), op("ProfilerStep#3", 400, 50, 4, tid="123"),
              kernel(NLL, 90, 20, 123, 123), runtime("cudaMemcpyAsync", 125, 5, 334, 2, tid="123"),
              kernel(NLL, 150, 180, 334, 2)]
    s = load_events(tmp_path, events).steps()
    assert s["step"].tolist() == [1, 2, 3]
    assert s["device_us"].tolist() == [180, 0, 0] and s["kernels"].tolist() == [1, 0, 0]
    # the plugin's Total of step 1, (150 + 180) - (90 + 20): from the end of the earlier kernel to
    # the end of its own; nbprof's is its range
    assert s["dur_us"].tolist() == [200, 100, 50]


def test_pure_cpu(tmp_path):
    events = [op("ProfilerStep#1", 100, 200, 1, tid="123"), op("aten::to", 120, 10, 2, tid="123"),
              op("ProfilerStep#2", 300, 100, 3, tid="123"), op("aten::mm", 350, 40, 4, tid="123")]
    p = load_events(tmp_path, events)
    s = p.steps()
    # the plugin's Total, CpuOp and Other (Total - CpuOp); no device work
    assert s["dur_us"].tolist() == [200, 100]
    assert s["self_cpu_us"].tolist() == [10, 40]
    assert (s["dur_us"] - s["self_cpu_us"]).tolist() == [200 - 10, 100 - 40]
    assert s["device_us"].tolist() == [0, 0] and s["kernels"].tolist() == [0, 0]
    assert p.kernels().empty and p.device_stats.devices.empty


def launch(ts: float, dur: float, corr: int, ext: int, **launch_args) -> dict:
    """A kernel1 launch with CUPTI's launch fields as the plugin writes them (each may be missing)."""
    return {"ph": "X", "cat": "Kernel", "name": "kernel1", "pid": 0, "tid": "stream 7", "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext, "device": 0,
                     **{k.replace("_", " "): v for k, v in launch_args.items()}}}


def launch_groups(p) -> dict:
    """The plugin's kernel table, grouped by name, launching op and launch configuration: from
    nbprof's events table (its grid, block, registers, shared memory and parent columns)."""
    ev = p.events
    work = ev[ev["kind"] == "kernel"]
    names = ev["name"].astype(str).to_numpy()
    out: dict = {}
    for _, e in work.iterrows():
        key = (e["name"], names[e["parent"]], str(e["grid"]), str(e["block"]), int(e["registers_per_thread"]),
               int(e["shared_memory_bytes"]))
        out.setdefault(key, []).append(e["dur_us"])
    return out


def test_group_by_kernel_columns(tmp_path):
    config = {"registers_per_thread": 18, "shared_memory": 0}
    events = [op("op1", 200, 60, 3, tid="123"), op("op2", 340, 70, 4),
              launch(230, 15, 1000, 3, grid=[16, 1, 1], block=[16, 16, 16], **config),
              runtime("cudaLaunchKernel", 210, 5, 1000, 3),
              launch(250, 10, 1001, 3, grid=[16, 1, 1], block=[16, 16, 16], **config),
              runtime("cudaLaunchKernel", 215, 5, 1001, 3),
              launch(250, 13, 1002, 3, grid=[16, 1, 1], block=[16, 16, 64], **config),
              runtime("cudaLaunchKernel", 220, 5, 1002, 3),
              launch(250, 17, 1003, 4, grid=[16, 1, 1], block=[16, 16, 64], **config),
              runtime("cudaLaunchKernel", 350, 5, 1003, 4)]
    p = load_events(tmp_path, events)
    # the plugin's three rows, as nbprof's events carry them
    assert launch_groups(p) == {
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 16]", 18, 0): [15, 10],
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 64]", 18, 0): [13],
        ("kernel1", "op2", "[16, 1, 1]", "[16, 16, 64]", 18, 0): [17],
    }
    # nbprof's Kernels table has one row per kernel name (the launching op most often, the launch
    # configuration used most, first seen on a tie, and how many there were); per op, key_averages
    row = p.kernels().iloc[0]
    assert len(p.kernels()) == 1
    assert (row["count"], row["device_total_us"], row["device_min_us"], row["device_max_us"]) == (4, 55, 10, 17)
    assert row["device_avg_us"] == pytest.approx(55 / 4)
    assert (row["launched_by"], row["grid"], row["block"], row["launch_configs"]) == \
        ("op1", "[16, 1, 1]", "[16, 16, 16]", 2)
    assert (row["registers_per_thread"], row["shared_memory_bytes"]) == (18, 0)
    k = p.key_averages().set_index("name")
    assert (k.loc["op1", "device_total_us"], k.loc["op2", "device_total_us"]) == (15 + 10 + 13, 17)


def test_group_by_kernel_columns_invalid_input(tmp_path):
    """Launches that lack a launch field: the plugin groups each missing field as None. nbprof reads
    the launches (a field not written is "" or -1 in the events) and its Kernels table summarizes
    what is known: a missing register count or shared memory size is unknown, never -1, and a
    launch without its block is no launch configuration."""
    events = [op("op1", 200, 60, 3, tid="123"),
              launch(220, 1, 1000, 3, block=[16, 16, 16], registers_per_thread=18, shared_memory=0),
              runtime("cudaLaunchKernel", 210, 5, 1000, 3, tid="123"),
              launch(230, 2, 1001, 3, grid=[16, 1, 1], registers_per_thread=18, shared_memory=0),
              runtime("cudaLaunchKernel", 220, 5, 1001, 3, tid="123"),
              launch(240, 3, 1002, 3, grid=[16, 1, 1], block=[16, 16, 16], shared_memory=0),
              runtime("cudaLaunchKernel", 230, 5, 1002, 3, tid="123"),
              launch(250, 4, 1003, 3, grid=[16, 1, 1], block=[16, 16, 16], registers_per_thread=18),
              runtime("cudaLaunchKernel", 240, 5, 1003, 3, tid="123"),
              launch(260, 5, 1004, 3), runtime("cudaLaunchKernel", 250, 5, 1004, 3, tid="123")]
    p = load_events(tmp_path, events)
    # the plugin's five rows, one a launch: its None is the events' "" or -1
    assert launch_groups(p) == {
        ("kernel1", "op1", "", "[16, 16, 16]", 18, 0): [1],
        ("kernel1", "op1", "[16, 1, 1]", "", 18, 0): [2],
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 16]", -1, 0): [3],
        ("kernel1", "op1", "[16, 1, 1]", "[16, 16, 16]", 18, -1): [4],
        ("kernel1", "op1", "", "", -1, -1): [5],
    }
    row = p.kernels().iloc[0]
    assert (row["count"], row["device_total_us"], row["launched_by"]) == (5, 1 + 2 + 3 + 4 + 5, "op1")
    assert (row["grid"], row["block"], row["launch_configs"]) == ("[16, 1, 1]", "[16, 16, 16]", 1)
    assert (row["registers_per_thread"], row["shared_memory_bytes"]) == (18, 0)
    # one launch that wrote neither: unknown (NaN), where the table said -1 before
    alone = load_events(tmp_path, [op("op1", 200, 60, 3), launch(220, 1, 1000, 3, grid=[16, 1, 1], block=[16, 16, 16]),
                                   runtime("cudaLaunchKernel", 210, 5, 1000, 3)]).kernels().iloc[0]
    assert math.isnan(alone["registers_per_thread"]) and math.isnan(alone["shared_memory_bytes"])


# ts, device type (0 CPU, 1 CUDA), device id, address, bytes, total allocated, total reserved:
# the plugin's TestMemoryCurve events
MEMORY_CPU = [(1, 0, 0, 1, 4, 4, 0), (20, 0, 0, 1, -4, 0, 0), (100, 0, 0, 2, 8000, 8000, 0),
              (200, 0, 0, 2, -8000, 0, 0), (300, 0, 0, 3, 4, 4, 0), (400, 0, 0, 4, 16, 20, 0),
              (500, 0, 0, 5, 4000, 4020, 0), (600, 0, 0, 4, -16, 4004, 0), (700, 0, 0, 7, 80, 4084, 0),
              (800, 0, 0, 3, -4, 4080, 0), (900, 0, 0, 7, -80, 4000, 0), (905, 0, 0, 4, -4000, 0, 0)]
MEMORY_GPU = [(2, 1, 0, 11, 400, 400, 512), (22, 1, 0, 11, -400, 0, 512), (105, 1, 0, 12, 5000, 5000, 10240),
              (106, 1, 0, 13, 3000, 8000, 10240), (205, 1, 0, 12, -5000, 3000, 10240),
              (401, 1, 0, 14, 1024, 4024, 10240), (499, 1, 0, 15, 4, 4028, 10240),
              (501, 1, 0, 13, -3000, 1028, 10240), (502, 1, 0, 15, -4, 1024, 10240),
              (906, 1, 0, 14, -1024, 0, 10240)]


def memory_profile(tmp_path: Path):
    def entry(ts, dev, dev_id, addr, size, allocated, reserved):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 0, "tid": 0, "ts": ts,
                "args": {"Device Type": dev, "Device Id": dev_id, "Addr": addr, "Bytes": size,
                         "Total Allocated": allocated, "Total Reserved": reserved}}
    return load_events(tmp_path, [entry(*e) for e in sorted(MEMORY_CPU + MEMORY_GPU)])


def test_memory_curve_no_step_plot(tmp_path):
    """Per device, one point per memory event: time from the profile's start (the plugin's
    profiler_start_ts, 1 here), total allocated, total reserved."""
    curve = memory_profile(tmp_path)._memory_curve
    assert sorted(set(curve["device"])) == ["cpu", "cuda:0"]  # the plugin's CPU and GPU0
    for device, expected in (("cpu", MEMORY_CPU), ("cuda:0", MEMORY_GPU)):
        d = curve[curve["device"] == device]
        assert d["time_us"].tolist() == [e[0] - 1 for e in expected], device
        assert d["allocated_bytes"].tolist() == [e[-2] for e in expected], device
        assert d["reserved_bytes"].tolist() == [e[-1] for e in expected], device


def test_memory_curve_step_plot(tmp_path):
    """The plugin patches a point in before each change (the previous totals at the next time) so
    its line chart draws steps; nbprof's figure is a step line itself (plotly's "hv": each total
    holds until the next event), over the same points, in ms. (The plugin's own test checks only
    the first half of its GPU points: it loops over the events where it means the patched curve.)"""
    fig = memory_profile(tmp_path).memory_curve()
    traces = {t.name: t for t in fig.data if t.name}
    for device, expected in (("cpu", MEMORY_CPU), ("cuda:0", MEMORY_GPU)):
        allocated, reserved = traces[f"{device} allocated"], traces[f"{device} reserved"]
        assert allocated.line.shape == reserved.line.shape == "hv"
        assert list(allocated.x) == pytest.approx([(e[0] - 1) / 1000 for e in expected]), device
        assert list(allocated.y) == [e[-2] for e in expected], device
        assert list(reserved.y) == [e[-1] for e in expected], device


def test_datapipe(tmp_path):
    """A DataPipe's iterator range filed as an operator (``cpu_op``: torch before the
    ``user_annotation`` category) is a range, as the plugin reads it (its DataLoader role, not an
    operator); so is ``ProfilerStep#N`` there, and steps() finds it."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 7557, "tid": 7557, "ts": 90, "dur": 50,
               "args": {"External id": 33}},
              {"ph": "X", "cat": "cpu_op", "name": "enumerate(DataPipe)#ShufflerIterDataPipe", "pid": 7557,
               "tid": 7557, "ts": 100, "dur": 23, "args": {"External id": 34}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 7557, "tid": 7557, "ts": 105, "dur": 3,
               "args": {"External id": 35}}]
    p = load_events(tmp_path, events)
    ev = p.events.set_index("name")
    assert ev.loc["enumerate(DataPipe)#ShufflerIterDataPipe", "kind"] == "annotation"
    assert (ev.loc["enumerate(DataPipe)#ShufflerIterDataPipe", "start_us"],
            ev.loc["enumerate(DataPipe)#ShufflerIterDataPipe", "dur_us"]) == (100 - 90, 23)
    assert ev.loc["aten::add", "kind"] == "op"
    s = p.steps()
    assert (s["step"].tolist(), s["dur_us"].tolist(), s["ops"].tolist()) == ([1], [50], [1])
