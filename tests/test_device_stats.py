"""Device stats (busy fraction, per-stream busy time, peak memory) against plain-loop answers on
the raw trace files, and the vectorized interval helpers against brute force."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import nbprof
from nbprof.analysis._intervals import assign_points, measure_within, sum_in_intervals, union_segments
from nbprof.analysis.device_stats import DEVICE_COLUMNS, profiled_windows
from nbprof.collect.chrome_trace import read_trace_file
from nbprof.events import concat_traces
from nbprof.model import TorchProfile

from .conftest import TRACES, trace_path
from .synthetic import Trace

WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def raw(name):
    with gzip.open(trace_path(name)) as f:
        return json.load(f)["traceEvents"]


def ns(e):
    """An event's [start, end) in exact integer ns (the file's µs have three decimals)."""
    start = round(e["ts"] * 1000)
    return start, start + round(e["dur"] * 1000)


def union_length(intervals):
    total, cur = 0.0, None
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0.0)


@pytest.mark.parametrize("name", TRACES)
def test_sm_efficiency_and_occupancy_against_a_brute_force_sweep(name):
    """TensorBoard's "Est. SM Efficiency" / "Est. Achieved Occupancy" from CUPTI's per-kernel
    estimates: at each moment the running kernels' min(blocks per SM, 1), at most 1, over the
    span; and the occupancy weighted by kernel time."""
    p = nbprof.load_trace(trace_path(name))
    d = p.device_stats.devices.iloc[0]
    kernels = [e for e in raw(name) if e.get("cat") == "kernel"]
    spans = [(*ns(e), min(e["args"]["blocks per SM"], 1.0)) for e in kernels]
    cuts = sorted({t for s, e, _ in spans for t in (s, e)})
    area = 0.0
    for a, b in zip(cuts, cuts[1:]):  # each elementary interval: the kernels running through it
        area += min(1.0, sum(w for s, e, w in spans if s <= a and b <= e)) * (b - a)
    assert d["sm_efficiency"] == pytest.approx(area / 1000 / d["span_us"], rel=1e-9)
    assert d["sm_efficiency"] <= d["busy_fraction"] + 1e-12
    occ = sum(e["args"]["est. achieved occupancy %"] * e["dur"] for e in kernels) / sum(e["dur"] for e in kernels)
    assert d["achieved_occupancy_pct"] == pytest.approx(occ, rel=1e-6)


def test_sm_efficiency_is_nan_without_estimates(tmp_path):
    """A trace whose kernels carry no CUPTI estimates (older or other writers): NaN, not 0."""
    t = Trace()
    ext = t.op("aten::mm", 0, 10)
    t.launch("gemm", ext, 1, 2, 5, 20)
    d = t.load(tmp_path).device_stats.devices.iloc[0]
    assert d["kernels"] == 1 and d["busy_us"] == pytest.approx(20)
    assert np.isnan(d["sm_efficiency"]) and np.isnan(d["achieved_occupancy_pct"])


@pytest.mark.parametrize("name", TRACES)
def test_busy_time_per_device_and_stream(name):
    p = nbprof.load_trace(trace_path(name))
    stats = p.device_stats
    assert list(stats.devices.columns) == list(DEVICE_COLUMNS)
    work = [e for e in raw(name) if e.get("cat") in WORK]
    d = stats.devices.iloc[0]
    assert d["device"] == "cuda:0"
    assert d["busy_us"] == pytest.approx(union_length([ns(e) for e in work]) / 1000, abs=1e-9)
    assert d["span_us"] == pytest.approx(p.summary.span_us, abs=1e-6)
    assert d["busy_fraction"] == pytest.approx(d["busy_us"] / d["span_us"])
    assert d["kernels"] == sum(e["cat"] == "kernel" for e in work)
    assert d["memsets"] == sum(e["cat"] == "gpu_memset" for e in work)
    assert d["kernel_us"] == pytest.approx(sum(e["dur"] for e in work if e["cat"] == "kernel"), abs=1e-6)
    assert d["total_memory_bytes"] == 85017493504  # the H100's, from deviceProperties
    streams = stats.streams.set_index("stream")
    ids = sorted({e["args"]["stream"] for e in work})
    assert sorted(streams.index) == ids and d["streams"] == len(ids)
    for s in ids:
        mine = [ns(e) for e in work if e["args"]["stream"] == s]
        assert streams.loc[s, "busy_us"] == pytest.approx(union_length(mine) / 1000, abs=1e-9)
    assert streams["busy_us"].sum() >= d["busy_us"] - 1e-6  # streams can overlap; the device counts once
    assert stats.busy_fraction == {"cuda:0": pytest.approx(d["busy_fraction"])}


def test_peak_memory_is_the_allocators_largest_total():
    name = "cnn_train_cuda"
    mem = [e for e in raw(name) if e.get("cat") == "cpu_instant_event" and e["args"].get("Device Type") == 1]
    d = nbprof.load_trace(trace_path(name)).device_stats
    assert d.peak_allocated_bytes == {"cuda:0": max(e["args"]["Total Allocated"] for e in mem)}
    assert d.peak_reserved_bytes == {"cuda:0": max(e["args"]["Total Reserved"] for e in mem)}
    other = nbprof.load_trace(trace_path("two_streams")).device_stats.devices
    assert other["peak_allocated_bytes"].tolist() == [-1]  # no memory recorded


def test_cpu_profile_has_no_device_rows(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    assert len(p.device_stats.devices) == 0 and len(p.device_stats.streams) == 0


def test_schedule_cycles_count_only_their_windows(tmp_path):
    """Two recorded cycles 1 s apart: the second second is not profiled time."""
    paths = []
    for i in range(2):
        t = Trace()
        ext = t.op("aten::mm", 1_000_000 * i + 0, 100)
        t.launch("gemm", ext, 1_000_000 * i + 10, 5, 1_000_000 * i + 20, 50)
        t.events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": "Spans", "tid": "x",
                         "ts": 1_000_000 * i, "dur": 200})
        paths.append(t.write(tmp_path / f"c{i}.json"))
    merged = concat_traces([read_trace_file(p) for p in paths])
    p = TorchProfile.from_trace(merged)
    w = profiled_windows(p.events, p.meta)
    assert (w["end_ns"] - w["start_ns"]).tolist() == [200_000, 200_000]
    d = p.device_stats.devices.iloc[0]
    assert d["span_us"] == pytest.approx(400.0)
    assert d["busy_fraction"] == pytest.approx(100.0 / 400.0)
    # a "cycle" column (one label per cycle) gives the same windows from the events themselves
    labelled = concat_traces([read_trace_file(p) for p in paths], label_column="cycle")
    q = TorchProfile.from_trace(labelled)
    assert q.device_stats.devices["busy_us"].iloc[0] == pytest.approx(100.0)
    assert len(profiled_windows(q.events, q.meta)) == 2


def test_a_saved_schedule_keeps_its_cycles(tmp_path):
    """The cycles saved (``nbprofCycles``) and read back: each event's cycle as written, so the
    second between the cycles is still no idle time. Saved without them, the file read back was one
    window of 1,000,200 µs: busy 0.01 % instead of 25 %. Oracle: the two files written here."""
    paths = []
    for i in range(2):
        t = Trace()
        ext = t.op("aten::mm", 1_000_000 * i + 0, 100)
        t.launch("gemm", ext, 1_000_000 * i + 10, 5, 1_000_000 * i + 20, 50)
        paths.append(t.write(tmp_path / f"c{i}.json"))
    live = TorchProfile.from_trace(concat_traces([read_trace_file(p) for p in paths], label_column="cycle"))
    back = nbprof.load_trace(live.save(tmp_path / "saved.json.gz"))
    assert back.events["cycle"].tolist() == [0] * 3 + [1] * 3
    d = back.device_stats.devices.iloc[0]
    assert d["span_us"] == pytest.approx(200.0) and d["busy_fraction"] == pytest.approx(0.5)
    # saved again from what was read back: the same key
    again = json.loads(gzip.decompress(open(back.save(tmp_path / "again.json.gz"), "rb").read()))
    assert again["nbprofCycles"] == {"starts_ns": [0, 1_000_000_000]}


@pytest.mark.parametrize("key, note", [
    ([0, 5], "not a list of the cycles' starts"), ({"starts_ns": []}, "not a list of the cycles' starts"),
    ({"starts_ns": [0, 1.5]}, "not a list of the cycles' starts"), ({"starts_ns": [5, 5]}, "do not rise"),
    ({"starts_ns": [0, 1 << 63]}, "not a list of the cycles' starts")])
def test_a_cycles_key_that_does_not_fit_is_one_note(tmp_path, key, note):
    t = Trace()
    t.op("aten::mm", 0, 10)
    doc = t.doc()
    doc["nbprofCycles"] = key
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    p = nbprof.load_trace(path)
    assert "cycle" not in p.events.columns and len(p.events) == 1
    assert [n for n in p.meta.reader_notes if "nbprofCycles" in n] == [
        n for n in p.meta.reader_notes if note in n and "the cycles are left out" in n] != []


# ------------------------------------------------------------------------------- interval helpers


def test_interval_helpers_against_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 60))
        g = rng.integers(0, 3, n)
        s = rng.integers(0, 1000, n)
        e = s + rng.integers(0, 80, n)
        sg, ss, se = union_segments(s, e, g)
        for grp in range(3):
            mask = g == grp
            want = union_length(list(zip(s[mask].tolist(), e[mask].tolist())))
            assert (se[sg == grp] - ss[sg == grp]).sum() == want
            # segments are disjoint and sorted
            a, b = ss[sg == grp], se[sg == grp]
            assert (a[1:] > b[:-1]).all()
        # measure within windows = brute force on integer points
        ws, we, wg = np.array([100, 500, 100]), np.array([300, 900, 950]), np.array([0, 0, 2])
        got = measure_within(sg, ss, se, wg, ws, we, 3)
        for grp in range(3):
            cover = np.zeros(1100, dtype=bool)
            for a, b in zip(ss[sg == grp], se[sg == grp]):
                cover[a:b] = True
            inside = np.zeros(1100, dtype=bool)
            for a, b, gg in zip(ws, we, wg):
                if gg == grp:
                    inside[a:b] = True
            assert got[grp] == (cover & inside).sum()
        # points in intervals
        pt = rng.integers(0, 1100, 40)
        pg = rng.integers(0, 3, 40)
        w = rng.random(40)
        sums, counts = sum_in_intervals(pg, pt, w, g, s, e)
        for i in range(n):
            m = (pg == g[i]) & (pt >= s[i]) & (pt < e[i])
            assert counts[i] == m.sum() and sums[i] == pytest.approx(w[m].sum())
        idx = assign_points(pg, pt, sg, ss, se)
        for j in range(40):
            m = np.flatnonzero((sg == pg[j]) & (ss <= pt[j]) & (pt[j] < se))
            assert idx[j] == (m[0] if len(m) else -1)
