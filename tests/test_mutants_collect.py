"""Contracts of the trace reader, the collectors, the units and the kernel / launch / range tables
that the mutation samples of issue 26 found unpinned: empty tables' columns and dtypes, exact
boundaries, rarely-taken branches. Every expected value is written out by hand (or recomputed from
the hand-made trace in plain Python), never taken from the code under test."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace

OBJ, I64, F64, BOOL = "object", "int64", "float64", "bool"
# what a column of Python strings gets in this pandas (2: "object", 3: "str"), with rows or without
TXT = str(pd.Series(["a"]).dtype)


def dtypes(frame: pd.DataFrame, text: str | None = None) -> dict[str, str]:
    """Each column's dtype by name; ``text``: what the text columns read as (pandas 3 stores a
    column of Python strings as "str")."""
    out = {c: str(t) for c, t in frame.dtypes.items()}
    return out if text is None else {c: (OBJ if t == text else t) for c, t in out.items()}


# ------------------------------------------------------------------------------ format


@pytest.mark.parametrize("column,unit", [
    ("total_us", "time_us"), ("tottime_s", "time_s"), ("cumtime_s", "time_s"), ("alloc_bytes", "bytes"),
    ("flops", "flops"), ("count", "count"), ("calls", "count"), ("share_pct", "count"),
    # a suffix, not a substring: "_s" inside a name, "flops" as a suffix of another word
    ("s_total", "count"), ("model_flops", "count"), ("bytes_in", "count"),
])
def test_unit_of_reads_a_columns_unit_from_its_suffix(column, unit):
    from nbprof.format import unit_of

    assert unit_of(column) == unit


# ------------------------------------------------------------------------------ native output


def test_stopping_the_stderr_filter_twice_is_harmless(capfd):
    from nbprof.collect.native_output import NativeStderrFilter

    capfd.readouterr()
    f = NativeStderrFilter()
    f.start()
    os.write(2, b"own line\n")
    f.stop()
    f.stop()  # a second stop (an interrupted cell's cleanup after the normal one) does nothing
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "own line\nafter\n"


# ------------------------------------------------------------------------------ ranges


RANGE_DTYPES = {"label": TXT, "path": TXT, "depth": I64, "count": I64, "total_us": F64, "mean_us": F64,
                "min_us": F64, "max_us": F64, "share_of_span": F64, "share_of_parent": F64, "share_of_root": F64,
                "device_us": F64, "kernels": I64, "gpu_span_us": F64}
RANGE_OP_DTYPES = {"path": TXT, "label": TXT, "name": TXT, "count": I64, "self_cpu_us": F64, "self_device_us": F64}


def test_ranges_and_their_operators_of_a_profile_without_labels_are_empty_typed_tables(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    assert dtypes(p.ranges()) == RANGE_DTYPES and len(p.ranges()) == 0
    assert dtypes(p.range_ops()) == RANGE_OP_DTYPES and len(p.range_ops()) == 0


def test_ranges_and_their_operators_have_their_dtypes(tmp_path):
    t = Trace()
    t.annotation("outer", 0, 100)
    t.annotation("inner", 10, 30)
    t.op("aten::mm", 12, 5)
    t.annotation("inner", 50, 10)
    t.op("aten::add", 52, 3)
    p = t.load(tmp_path)
    r = p.ranges()
    assert dtypes(r) == RANGE_DTYPES
    assert r["path"].tolist() == ["outer", "outer › inner"]
    assert r["count"].tolist() == [1, 2]
    assert r["min_us"].tolist() == [100.0, 10.0] and r["max_us"].tolist() == [100.0, 30.0]
    ops = p.range_ops()
    assert dtypes(ops) == RANGE_OP_DTYPES
    assert ops[["path", "name", "count"]].values.tolist() == [
        ["outer", "aten::mm", 1], ["outer", "aten::add", 1], ["outer › inner", "aten::mm", 1],
        ["outer › inner", "aten::add", 1]]


def test_gpu_annotations_of_a_merged_same_name_range_count_for_the_range_it_merged_into(tmp_path):
    # "step" inside "step" (an only child of the same name) is one range; torch writes a GPU
    # annotation for each of the two, by External id: both spans count for the one "step" row.
    # A GPU annotation without an External id (0) belongs to no range.
    t = Trace()
    outer = t.annotation("step", 0, 100)
    inner = t.annotation("step", 10, 80)
    t.annotation("other", 200, 10)
    t.gpu_annotation("step", 20, 30, ext=outer)
    t.gpu_annotation("step", 60, 7, ext=inner)
    t.gpu_annotation("step", 90, 5, ext=0)  # no External id: attributed to nothing
    # a range without an External id, merged into its same-name parent: the GPU annotation of no id
    # must not be matched to it
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "other", "pid": 1000, "tid": 1000,
                     "ts": 201, "dur": 8, "args": {}})
    r = t.load(tmp_path).ranges().set_index("path")
    assert r.index.tolist() == ["step", "other"]
    assert r.loc["step", "count"] == 1 and r.loc["other", "count"] == 1
    assert r.loc["step", "gpu_span_us"] == 37.0
    assert r.loc["other", "gpu_span_us"] == 0.0


# ------------------------------------------------------------------------------ cProfile


def _fact(n):
    return 1 if n <= 1 else n * _fact(n - 1)


def _twice():
    return _fact(4) + _fact(3)


def _profiled(*work):
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    for w in work:
        w()
    prof.disable()
    return prof


def test_raw_stats_are_cprofiles_own_numbers_recursion_included():
    """pstats' snapshot of the same profile is the answer: each function's primitive and total
    calls (a recursive one's differ), times, and every caller edge's four numbers."""
    from nbprof.collect.cprofile import raw_stats

    prof = _profiled(_twice, lambda: _fact(6))
    ours = raw_stats(prof)
    prof.create_stats()
    theirs = prof.stats
    assert ours == theirs
    fact = next(k for k in ours if k[2] == "_fact")
    cc, nc = ours[fact][:2]
    assert (cc, nc) == (3, 13)  # three outer calls, 4 + 3 + 6 in all
    # the recursive edge: 3 + 2 + 5 calls; primitive where the edge was not already on the stack
    # (the first step down of each of the three outer calls)
    assert ours[fact][4][fact][:2] == (10, 3)


def test_merged_raw_stats_are_pstats_add():
    import pstats

    from nbprof.collect.cprofile import merge_raw, raw_stats

    first, second = _profiled(_twice), _profiled(_twice, lambda: _fact(2))
    ours = merge_raw([raw_stats(first), raw_stats(second)])
    theirs = pstats.Stats(first)
    theirs.add(pstats.Stats(second))
    assert ours == theirs.stats


# ------------------------------------------------------------------------------ the trace reader


def _launching_trace() -> Trace:
    t = Trace()
    ext = t.op("aten::mm", 0, 50)
    t.launch("gemm_kernel", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40, stream=7)
    return t


def test_a_trace_read_field_by_field_keeps_every_arg_of_its_events(tmp_path):
    """ROCm writes a runtime call's stream as "0x0": the file fails the typed decoders and is read
    field by field. The other args of every event (External id, correlation, device, stream,
    launch dimensions) are read as in a typed file."""
    typed = _launching_trace()
    loose = _launching_trace()
    runtime = next(e for e in loose.events if e["cat"] == "cuda_runtime")
    runtime["args"]["stream"] = "0x0"
    for t, name in ((typed, "typed.json"), (loose, "loose.json")):
        p = t.load(tmp_path, name)
        launches = p.launches()
        assert launches[["name", "launch", "correlation", "stream"]].values.tolist() == [
            ["gemm_kernel", "cudaLaunchKernel", 1, 7]], name
        assert launches["launch_delay_us"].tolist() == [20.0]
        k = p.kernels()
        assert k[["name", "launched_by", "streams"]].values.tolist() == [["gemm_kernel", "aten::mm", "cuda:0 s7"]]
        assert not p.meta.reader_notes


def test_an_event_with_an_unreadable_field_is_left_out_and_the_events_after_it_are_read(tmp_path):
    t = Trace()
    bad = {"ph": "X", "cat": "kernel", "name": "bad_kernel", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
           "args": {"device": 0, "stream": "not a number", "correlation": 99}}
    t.events.append(bad)
    ext = t.op("aten::mm", 0, 50)
    t.launch("gemm_kernel", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40, stream=7)
    t.launch("gemm_kernel", ext, cpu_ts=20, cpu_dur=5, gpu_ts=70, gpu_dur=10, stream=7)
    p = t.load(tmp_path)
    assert p.kernels()[["name", "count", "device_total_us"]].values.tolist() == [["gemm_kernel", 2, 50.0]]
    assert p.launches()["correlation"].tolist() == [1, 2]
    assert p.meta.reader_notes == ["1 event with an unreadable `args.stream`: left out"]


def test_device_properties_keep_the_values_of_their_types_and_count_the_others(tmp_path):
    t = _launching_trace()
    t.device_properties = [
        {"id": 0, "name": "GPU A", "numSms": 132, "totalGlobalMem": 80 * 2**30, "computeMajor": 9,
         "clockRate": "1.98 GHz"},  # a key nbprof does not read: kept as it is
        {"id": 1, "name": 7, "numSms": "132", "warpSize": 32.0},  # a number as a name, numbers as text / float
    ]
    p = t.load(tmp_path)
    assert p.meta.device_properties == [
        {"id": 0, "name": "GPU A", "numSms": 132, "totalGlobalMem": 80 * 2**30, "computeMajor": 9,
         "clockRate": "1.98 GHz"},
        {"id": 1},
    ]
    assert p.meta.reader_notes == [
        "3 deviceProperties values of the wrong type (a GPU's id, name or sizes): left out"]
    t.device_properties = [{"id": 0, "name": "GPU A", "numSms": "132"}]  # one: the singular
    assert t.load(tmp_path).meta.reader_notes == [
        "1 deviceProperties value of the wrong type (a GPU's id, name or sizes): left out"]


@pytest.mark.parametrize("info,noted", [
    ({"rank": 0, "world_size": 2}, False),
    ({"rank": 1, "world_size": 2, "backend": "nccl"}, False),
    ({"rank": "0", "world_size": 2}, True),
    ({"rank": 0, "world_size": -2}, True),
])
def test_a_distributed_info_that_does_not_say_a_rank_is_noted(tmp_path, info, noted):
    import json

    doc = _launching_trace().doc()
    doc["distributedInfo"] = info
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    import nbprof

    p = nbprof.load_trace(path)
    notes = [n for n in p.meta.reader_notes if n.startswith("distributedInfo")]
    assert bool(notes) == noted
    if not noted:
        assert (p.meta.rank, p.meta.world_size) == (info["rank"], info["world_size"])


@pytest.mark.parametrize("loose", [False, True])
def test_a_bare_list_of_events_is_read_with_or_without_fields_of_another_type(tmp_path, loose):
    import json

    import nbprof

    t = _launching_trace()
    if loose:
        next(e for e in t.events if e["cat"] == "cuda_runtime")["args"]["stream"] = "0x0"
    path = tmp_path / "list.json"
    path.write_text(json.dumps(t.events, indent=1))
    p = nbprof.load_trace(path)
    assert p.launches()[["name", "correlation", "launch_delay_us"]].values.tolist() == [["gemm_kernel", 1, 20.0]]
    assert p.kernels()["launched_by"].tolist() == ["aten::mm"]
    assert not p.meta.reader_notes


def test_the_events_text_columns_categories_are_python_strings(tmp_path):
    """The text columns read from args (shapes, types, launch dimensions, collectives' fields) are
    categoricals of Python strings (object categories), as the events table makes them, whatever
    pandas would infer; the kinds' and devices' are pandas' own strings."""
    import json

    import nbprof

    t = Trace()
    ext = t.op("aten::mm", 0, 50)
    t.events[-1]["args"].update({"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]})
    t.launch("gemm_kernel", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40, blocks_per_sm=2.0)
    doc = t.doc()
    doc["record_shapes"] = 1
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    ev = nbprof.load_trace(path).events
    cats = {c: str(ev[c].cat.categories.dtype) for c in ev.columns if isinstance(ev[c].dtype, pd.CategoricalDtype)}
    assert cats == {"name": OBJ, "kind": "str", "device": "str", "input_shapes": OBJ, "input_types": OBJ,
                    "grid": OBJ, "block": OBJ, "collective": OBJ, "msg_dtype": OBJ, "process_group": OBJ,
                    "process_group_ranks": OBJ}
    assert sorted(ev["input_shapes"].cat.categories) == ["[[2, 3], [3, 4]]", "[]"]  # torch: "[]" for no inputs
    assert sorted(ev["grid"].cat.categories) == ["", "[264, 1, 1]"]


# ------------------------------------------------------------------------------ live torch


def test_open_ranges_close_the_latest_of_a_name_and_close_all_innermost_first():
    torch = pytest.importorskip("torch")
    from nbprof.collect.torch_live import OpenRanges

    ranges = OpenRanges()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        ranges.enter("fit")
        ranges.enter("step")
        ranges.enter("fit")  # the same name again, nested
        assert len(ranges) == 3
        torch.ones(1)
        ranges.exit("fit")  # the inner "fit"
        ranges.exit("never opened")  # nothing
        assert len(ranges) == 2
        torch.zeros(1)
        ranges.close_all()  # "step", then the outer "fit"
        assert len(ranges) == 0
        torch.full((1,), 2.0)
    spans = {}
    for e in prof.events():
        if e.name in ("fit", "step", "aten::ones", "aten::zeros", "aten::full"):
            spans.setdefault(e.name, []).append((e.time_range.start, e.time_range.end))
    (ones,), (zeros,), (full,) = spans["aten::ones"], spans["aten::zeros"], spans["aten::full"]
    outer, inner = sorted(spans["fit"])
    (step,) = spans["step"]
    assert outer[0] <= step[0] <= inner[0] <= ones[0] and inner[1] <= zeros[0]  # the inner one ended first
    assert zeros[1] <= step[1] <= outer[1] <= full[0]  # then step, then the outer one, before the last op


# ------------------------------------------------------------------------------ kernels, launches

KERNEL_DTYPES = {"name": TXT, "kind": TXT, "count": I64, "device_total_us": F64, "device_avg_us": F64,
                 "device_min_us": F64, "device_max_us": F64, "share": F64, "bytes": I64, "streams": TXT,
                 "launched_by": TXT, "grid": TXT, "block": TXT, "launch_configs": I64, "registers_per_thread": F64,
                 "shared_memory_bytes": F64, "blocks_per_sm": F64, "occupancy_pct": F64, "tensor_cores": BOOL,
                 "bandwidth_gbps": F64}
LAUNCH_DTYPES = {"rank": OBJ, "device": TXT, "stream": I64, "correlation": I64, "name": TXT, "kind": TXT,
                 "launch": TXT, "launch_start_us": F64, "cpu_dur_us": F64, "gpu_dur_us": F64, "launch_delay_us": F64}


def test_kernel_and_launch_tables_of_a_profile_without_device_work_are_empty_typed_tables(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    k = p.kernels()
    assert dtypes(k) == KERNEL_DTYPES and len(k) == 0
    assert k["name"].str.contains("gemm").tolist() == []  # text columns, as in a table with rows
    assert dtypes(p.launches()) == LAUNCH_DTYPES and len(p.launches()) == 0


def test_kernel_and_launch_tables_have_their_dtypes(tmp_path):
    p = _launching_trace().load(tmp_path)
    assert dtypes(p.kernels()) == KERNEL_DTYPES
    assert dtypes(p.launches()) == LAUNCH_DTYPES


def test_queue_length_of_one_stream_by_hand(tmp_path):
    t = Trace()
    ext = t.op("aten::mm", 0, 100)
    t.launch("k1", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40)  # queued 10 -> done 70
    t.launch("k2", ext, cpu_ts=20, cpu_dur=5, gpu_ts=50, gpu_dur=10)  # queued 20 -> done 60
    q = t.load(tmp_path).queue_length()
    assert dtypes(q) == {"rank": OBJ, "device": TXT, "stream": I64, "launches": I64, "window_us": F64,
                                "mean_queue_length": F64, "max_queue_length": I64}
    # 1 queued over [10, 20), 2 over [20, 60), 1 over [60, 70): 100 µs of work items over a 60 µs window
    assert q.values.tolist() == [[None, "cuda:0", 7, 2, 60.0, 100 / 60, 2]]
