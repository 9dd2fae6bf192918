"""Traces nbprof did not record (tests/data/wild: torch 1.8-1.9, ROCm, Meta's format, NCCL, MTIA)
against their raw JSON, and odd files made here: every format loads with every view working, the
numbers equal what the file says, and what nbprof cannot read is said, counted."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.analysis import findings as F
from nbprof.analysis.findings import sync as sync_finding

WILD = Path(__file__).parent / "data" / "wild"
SAMPLES = sorted(p.name for p in WILD.iterdir() if p.name.endswith((".json", ".json.gz")))
WORK = ("kernel", "memcpy", "memset")


def raw(name: str) -> dict:
    path = WILD / name
    with (gzip.open(path) if name.endswith(".gz") else open(path, "rb")) as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def complete(doc: dict, *cats: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats]


def write(tmp_path: Path, events: list[dict], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_every_sample_is_a_sample():
    assert len(SAMPLES) == 11


@pytest.mark.parametrize("name", SAMPLES)
def test_every_view_works_on_every_sample(name):
    p = nbprof.load_trace(WILD / name)
    ev = p.events
    doc = raw(name)
    assert (ev["kind"] != "other").all(), "every category of these files is known"
    assert p.meta.notes == []
    # every complete event of the file is a row (utility ops torch leaves out aside)
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") not in ("Trace", None)]
    assert len(ev[ev["kind"] != "memory"]) == len(x)
    html = p.report().html(include_library=False)
    assert "nbprof" in html and "Traceback" not in html
    fig = p.timeline()
    assert len(fig.data) > 0
    # key averages: a row per kernel (copy, memset) name holding all of the file's device work
    work = complete(doc, "kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events")
    k = p.key_averages()
    device_rows = k[k["kind"].isin(WORK)]
    on_device = ev[ev["kind"].isin(WORK)]
    assert int(device_rows["count"].sum()) == len(on_device) > 0
    assert device_rows["self_device_us"].sum() == pytest.approx(on_device["dur_us"].sum())
    ops = [e for e in complete(doc, "cpu_op", "Operator") if e.get("dur", 0) > 0]
    assert (k["kind"] == "op").any() == bool(ops)
    f = p.findings
    assert set(f["kind"]) <= set(F.KINDS) and set(f["severity"]) <= set(F.SEVERITIES)
    kernels = p.kernels()
    assert len(kernels) == len(set(zip(ev.loc[ev["kind"].isin(WORK), "name"].astype(str),
                                       ev.loc[ev["kind"].isin(WORK), "kind"].astype(str))))
    stats = p.device_stats.devices
    assert len(stats) >= 1 and (stats["busy_fraction"] <= 1.0).all()
    # a step per ProfilerStep range of the CPU
    steps = {e["name"] for e in complete(doc, "user_annotation", "cpu_op", "Operator")
             if e["name"].startswith("ProfilerStep#")}
    assert len(p.steps()) == len(steps)
    # a kernel's time is its time in the file
    assert ev.loc[ev["kind"].isin(WORK + ("sync",)), "dur_us"].sum() == pytest.approx(sum(e["dur"] for e in work))


def test_torch_1_9_format_reads_its_capitalized_categories():
    """The TensorBoard plugin's resnet50 sample: 'Operator', 'Kernel', 'Runtime', 'Memcpy', and
    'external id' in lower case on kernels."""
    name = "resnet50_num_workers_0.pt.trace.json.gz"
    doc, p = raw(name), nbprof.load_trace(WILD / name)
    ev = p.events
    for cat, kind in (("Runtime", "runtime"), ("Kernel", "kernel"), ("Memcpy", "memcpy")):
        assert (ev["kind"] == kind).sum() == len(complete(doc, cat)), cat
    # torch 1.9 filed its record_function ranges as operators: the DataLoader's iterator range is
    # a range (as the plugin reads it), every other "Operator" an op
    loader = [e for e in complete(doc, "Operator") if e["name"].startswith("enumerate(DataLoader)#")]
    assert len(loader) == 1
    assert (ev["kind"] == "op").sum() == len(complete(doc, "Operator")) - len(loader)
    assert ev.loc[ev["name"] == loader[0]["name"], "kind"].tolist() == ["annotation"]
    memory = [e for e in doc["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    assert (ev["kind"] == "memory").sum() == len(memory) > 0
    # each kernel belongs to the op whose "External id" its "external id" names
    op_of = {e["args"]["External id"]: e["name"] for e in complete(doc, "Operator")}
    by_op = collections.Counter()
    for e in complete(doc, "Kernel", "Memcpy", "Memset"):
        by_op[op_of[e["args"]["external id"]]] += e["dur"]
    k = p.key_averages().set_index("name")
    for op, us in by_op.items():
        assert k.loc[op, "self_device_us"] == pytest.approx(us), op
    assert (ev.loc[ev["kind"].isin(WORK), "parent"] >= 0).all()


def test_torch_1_9_memory_peak_is_the_running_sum_of_sizes():
    """torch 1.8-1.9 wrote no allocator totals: the peak in the report's header, the device stats
    and the memory curve are the running sum of the sizes, as a plain loop over the raw JSON
    computes it (never the "does not apply" -1)."""
    name = "resnet50_num_workers_0.pt.trace.json.gz"
    doc, p = raw(name), nbprof.load_trace(WILD / name)
    memory = sorted((e["ts"], e["args"]["Device Type"], e["args"]["Bytes"]) for e in doc["traceEvents"]
                    if e.get("ph") == "i" and e.get("name") == "[memory]")
    peaks: dict[str, int] = {}
    running: dict[str, int] = {}
    for _, device_type, nbytes in memory:
        device = "cpu" if device_type == 0 else "cuda:0"
        running[device] = running.get(device, 0) + nbytes
        peaks[device] = max(peaks.get(device, running[device]), running[device])
    assert p.summary.peak_allocated_bytes == peaks
    assert p.device_stats.peak_allocated_bytes["cuda:0"] == peaks["cuda:0"]
    curve = p._memory_curve
    assert int(curve.loc[curve["device"] == "cuda:0", "allocated_bytes"].max()) == peaks["cuda:0"]
    assert "-1 B" not in p.report().text()


def test_rocm_trace_with_string_streams_loads():
    """HTA's MI250 sample writes 'stream': '0x0' on runtime calls: read, never a rejected file."""
    name = "amd_mi250_rocm6.json.gz"
    doc, p = raw(name), nbprof.load_trace(WILD / name)
    ev = p.events
    assert any(isinstance(e["args"].get("stream"), str) for e in complete(doc, "cuda_runtime"))
    hip = ev[ev["name"].astype(str).str.startswith("hip")]
    assert len(hip) == len(complete(doc, "cuda_runtime")) and (hip["kind"] == "runtime").all()
    kernels = ev[ev["kind"] == "kernel"]
    assert sorted(kernels["stream"]) == sorted(e["args"]["stream"] for e in complete(doc, "kernel"))
    assert (kernels["parent"] >= 0).all()


def enclosing_op_oracle(doc: dict) -> dict[str, float]:
    """HTA's linking, written out: kernel -> runtime call with its correlation -> the innermost
    cpu_op / user_annotation on the call's thread whose interval holds the call (of two with the
    same interval, the later in the file: the callee). Device time per op name."""
    calls = {e["args"]["correlation"]: e for e in complete(doc, "cuda_runtime")}
    frontend = collections.defaultdict(list)
    for i, e in enumerate(complete(doc, "cpu_op", "user_annotation")):
        frontend[(e["pid"], e["tid"])].append((i, e))
    out: dict[str, float] = collections.Counter()
    for k in complete(doc, "kernel", "gpu_memcpy", "gpu_memset"):
        call = calls[k["args"]["correlation"]]
        around = [(i, o) for i, o in frontend[(call["pid"], call["tid"])]
                  if o["ts"] <= call["ts"] and call["ts"] + call["dur"] <= o["ts"] + o["dur"]]
        if around:
            _, inner = min(around, key=lambda io: (io[1]["dur"], -io[1]["ts"], -io[0]))
            out[inner["name"]] += k["dur"]
    return out


def test_meta_format_links_kernels_through_the_runtime_call():
    name = "meta_format_control.json.gz"
    doc, p = raw(name), nbprof.load_trace(WILD / name)
    op_ids = {e["args"]["External id"] for e in complete(doc, "cpu_op")}
    assert not any(e["args"]["External id"] in op_ids for e in complete(doc, "kernel"))  # no External id links
    ev = p.events
    work = ev[ev["kind"].isin(WORK)]
    assert (work["parent"] >= 0).all()
    oracle = enclosing_op_oracle(doc)
    k = p.key_averages().set_index("name")
    for op, us in oracle.items():
        assert k.loc[op, "self_device_us"] == pytest.approx(us), op
    assert (p.kernels()["launched_by"] != "").all()


def test_mtia_runtime_and_device_events_are_not_other():
    name = "mtia_inference_rank_0.json.gz"
    doc, p = raw(name), nbprof.load_trace(WILD / name)
    ev = p.events
    ccp = collections.Counter(e["name"] for e in complete(doc, "mtia_ccp_events"))
    assert (ev["kind"] == "runtime").sum() == len(complete(doc, "mtia_runtime"))
    assert (ev["kind"] == "sync").sum() == ccp["event_wait"] + ccp["event_record"]
    assert (ev["kind"] == "memcpy").sum() == ccp["dma_request"]
    assert (ev["kind"] == "kernel").sum() == sum(ccp.values()) - ccp["event_wait"] - ccp["event_record"] - ccp["dma_request"]
    on_device = ev[ev["kind"].isin(WORK + ("sync",))]
    assert set(on_device["device"].astype(str)) == {"mtia:0"}
    assert (on_device["stream"] >= 0).all()


def test_a_saved_profile_keeps_its_accelerator(tmp_path):
    p = nbprof.load_trace(WILD / "mtia_inference_rank_0.json.gz")
    q = nbprof.load_trace(p.save(tmp_path / "mtia.json.gz"))
    assert q.events["kind"].astype(str).tolist() == p.events["kind"].astype(str).tolist()
    assert set(q.events["device"].astype(str)) == set(p.events["device"].astype(str))


# --------------------------------------------------------------------- field-level tolerance


def kernel(i: int, **args) -> dict:
    return {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 100 + 10 * i, "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i, **args}}


def launch(i: int, **args) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 95 + 10 * i,
            "dur": 2, "args": {"correlation": i, **args}}


def test_an_unreadable_field_drops_its_event_with_a_counted_note(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 90, "dur": 300,
               "args": {"External id": 1}}]
    events += [kernel(i, stream="abc") for i in range(12)]
    events += [kernel(i) for i in range(12, 20)]
    events += [launch(i, stream=[1, 2]) for i in range(20)]  # a runtime call's stream is never read
    events.append(kernel(20, stream="0x1f"))  # ROCm's spelling: a number
    p = nbprof.load_trace(write(tmp_path, events))
    ev = p.events
    assert (ev["kind"] == "kernel").sum() == 9
    assert (ev["kind"] == "runtime").sum() == 20
    assert ev.loc[ev["name"] == "k20", "stream"].tolist() == [31]
    assert p.meta.notes == ["12 events with an unreadable `args.stream`: left out"]
    assert "12 events with an unreadable `args.stream`" in p.report().html(include_library=False)


def test_a_bad_time_drops_the_event_not_the_file(tmp_path):
    events = [kernel(0), {**kernel(1), "ts": "soon"}, {**kernel(2), "dur": "12.5"}]
    p = nbprof.load_trace(write(tmp_path, events))
    assert p.events["name"].astype(str).tolist() == ["k0", "k2"]
    assert p.events["dur_us"].tolist() == [5.0, 12.5]
    assert p.meta.notes == ["1 event with an unreadable `ts`: left out"]


def test_unknown_categories_are_said_and_counted(tmp_path):
    events = [{"ph": "X", "cat": "gizmo_runtime", "name": f"g{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
              for i in range(5)]
    events += [{"ph": "X", "name": "nameless", "pid": 1, "tid": 1, "ts": 9, "dur": 1}]
    p = nbprof.load_trace(write(tmp_path, events))
    assert (p.events["kind"] == "other").sum() == 6
    assert p.meta.notes == ['6 events in categories nbprof does not know, read as "other": gizmo_runtime (5), '
                            "(none) (1)"]


def test_a_file_of_events_nbprof_does_not_read_says_so(tmp_path):
    events = [{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "name": "a", "pid": 1, "tid": 1, "ts": 2}]
    p = nbprof.load_trace(write(tmp_path, events))
    assert len(p.events) == 0
    assert p.meta.notes == ['2 begin/end ("B"/"E") events not read: nbprof reads complete ("X") and instant ("i") events',
                            "none of the file's 2 entries is an event nbprof reads"]


def test_folder_of_ranks_keeps_each_files_notes(tmp_path):
    (tmp_path / "ranks").mkdir()
    write(tmp_path / "ranks", [kernel(0), {**kernel(1), "ts": "x"}], "r0.json")
    write(tmp_path / "ranks", [kernel(0)], "r1.json")
    p = nbprof.load_trace(tmp_path / "ranks")
    assert p.meta.notes == ["r0.json: 1 event with an unreadable `ts`: left out"]


# ------------------------------------------------------------------------------ sync kind, ties


def sync_trace() -> list[dict]:
    """Two streams: stream 8 waits for stream 7's event; the CPU waits in cudaEventSynchronize."""
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": 0, "dur": 1000,
          "args": {"External id": 1}}
    k0 = {**kernel(1, **{"External id": 1}), "ts": 10, "dur": 100}
    k1 = {**kernel(3, **{"External id": 1}), "ts": 600, "dur": 100}
    wait = {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 8, "ts": 20, "dur": 90,
            "args": {"device": 0, "stream": 8, "correlation": 2, "wait_on_stream": 7}}
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventSynchronize_v2", "pid": 1, "tid": 1, "ts": 100,
            "dur": 400, "args": {"correlation": 5, "External id": 1}}
    done = {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 100, "dur": 400,
            "args": {"device": 0, "stream": 7, "correlation": 5}}
    return [op, {**launch(1, **{"External id": 1}), "ts": 5}, k0, wait, call, done,
            {**launch(3, **{"External id": 1}), "ts": 550}, k1]


def test_sync_events_are_a_kind_on_their_stream_and_no_device_time(tmp_path):
    p = nbprof.load_trace(write(tmp_path, sync_trace()))
    ev = p.events
    sync = ev[ev["kind"] == "sync"]
    assert sync["name"].astype(str).tolist() == ["Stream Wait Event", "Event Sync"]
    assert sync["stream"].tolist() == [8, 7] and (sync["thread"] == -1).all()
    d = p.device_stats.devices.iloc[0]
    assert d["busy_us"] == 200.0 and d["kernel_us"] == 200.0
    assert p.key_averages().set_index("name").loc["aten::item", "self_device_us"] == 200.0
    rects = p.timeline().data
    assert any("synchronize" in str(getattr(t, "name", "")) for t in rects)


def test_the_sync_finding_counts_a_call_whose_device_side_is_a_sync(tmp_path):
    """cudaEventSynchronize_v2 is no name the finding knows: its Event Sync says it blocked."""
    assert "cudaEventSynchronize_v2" not in sync_finding.SYNC_CALLS
    p = nbprof.load_trace(write(tmp_path, sync_trace()))
    row = p.findings.set_index("kind").loc["sync"]
    assert row["evidence"]["calls"] == 1 and row["evidence"]["blocked_us"] == 400.0


def test_threads_waiting_at_once_count_once_in_the_share_of_the_span(tmp_path):
    """MTIA's sample has many threads synchronizing at the same time: summed, the finding said
    265 % of the span. The share is the time some thread was waiting; the total stays the sum."""
    events = sync_trace()
    call = next(e for e in events if e["name"] == "cudaEventSynchronize_v2")
    # another thread waits 200-450, inside the first call's 100-500 (before the last launch, 550)
    other = {**call, "tid": 2, "ts": 200, "dur": 250, "args": {"correlation": 6}}
    events += [other, {**next(e for e in events if e["name"] == "Event Sync"), "ts": 200, "dur": 250,
                       "args": {"device": 0, "stream": 7, "correlation": 6}}]
    p = nbprof.load_trace(write(tmp_path, events))
    e = p.findings.set_index("kind").loc["sync", "evidence"]
    first, last = 0, max(x["ts"] + x["dur"] for x in events)  # the span: first to last event
    assert e["calls"] == 2 and e["blocked_us"] == 650.0
    assert e["waiting_us"] == 400.0  # 100-500: the union, by hand
    assert e["share_of_span"] == pytest.approx(400.0 / (last - first))


def test_back_to_back_calls_sharing_a_timestamp_stay_apart(tmp_path):
    """A whole-µs clock: 22 aten::result_type calls inside one op, each 1 µs at the same µs."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 100, "dur": 40,
               "args": {"External id": 1}}]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::result_type", "pid": 1, "tid": 1, "ts": 110, "dur": 1,
                "args": {"External id": 2 + i}} for i in range(22)]
    p = nbprof.load_trace(write(tmp_path, events))
    k = p.key_averages().set_index("name")
    assert k.loc["aten::result_type", "count"] == 22
    assert k.loc["aten::result_type", "cpu_total_us"] == 22.0
    assert k.loc["aten::add", "self_cpu_us"] == 40.0 - 22.0
    ev = p.events
    assert (ev.loc[ev["name"] == "aten::result_type", "depth"] == 1).all()
    # a real nested call of the same op (it starts or ends elsewhere) is still merged, as torch does
    nested = events[:1] + [{**events[1], "dur": 10}, {**events[2], "ts": 111, "dur": 5}]
    q = nbprof.load_trace(write(tmp_path, nested, "nested.json"))
    assert q.key_averages().set_index("name").loc["aten::result_type", "count"] == 1


def test_device_stats_over_both_windows(tmp_path):
    """Kernels inside and outside the profiler steps: the steps' window counts only what ran in it."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100,
            "dur": 100, "args": {"External id": 1}}
    events = [step, {**kernel(1, **{"blocks per SM": 0.5, "est. achieved occupancy %": 40}), "ts": 150, "dur": 100},
              {**kernel(2, **{"blocks per SM": 2.0, "est. achieved occupancy %": 80}), "ts": 0, "dur": 50}]
    d = nbprof.load_trace(write(tmp_path, events)).device_stats.devices.iloc[0]
    assert d["span_us"] == 250.0 and d["busy_fraction"] == pytest.approx(150 / 250)
    assert d["sm_efficiency"] == pytest.approx((0.5 * 100 + 1.0 * 50) / 250)
    assert d["achieved_occupancy_pct"] == pytest.approx((40 * 100 + 80 * 50) / 150)
    assert d["steps_span_us"] == 100.0 and d["steps_busy_fraction"] == pytest.approx(50 / 100)
    assert d["steps_sm_efficiency"] == pytest.approx(0.5 * 50 / 100)
    assert d["steps_achieved_occupancy_pct"] == pytest.approx(40.0)
    assert np.isnan(nbprof.load_trace(write(tmp_path, events[1:], "nosteps.json"))
                    .device_stats.devices.iloc[0]["steps_busy_fraction"])
