"""The chrome-trace reader's fast path (torch's writer layout, read in slices) against the plain
path and against the JSON itself, on the recorded traces and on hand-made odd files."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest

from nbprof.collect import chrome_trace as ct
from nbprof.collect import trace_schema
from nbprof.events import IGNORED_NAMES, TraceData

from .conftest import TRACES, frames_equal, needs_torch, trace_path


def reference_rows(doc: dict) -> list[tuple]:
    """(name, start ns, dur ns) of every event the table should have, straight from the JSON."""
    rows = []
    for e in doc["traceEvents"]:
        kind = trace_schema.CAT_KIND.get(e.get("cat", ""), "other")
        if e.get("ph") not in ("X", "i") or kind is None or e.get("name") in IGNORED_NAMES:
            continue
        ts = e.get("ts", 0.0)
        rows.append((e.get("name", ""), round(ts * 1000), round(e.get("dur", 0.0) * 1000)))
    return rows


def torch_layout(events: list[dict], **header) -> bytes:
    """A file laid out the way torch's writer lays it out (one event per "  {" block)."""
    head = "{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in header.items()) + '  "traceEvents": [\n'
    body = ",\n".join("  {\n" + ",\n".join(f'    "{k}": {json.dumps(v)}' for k, v in e.items()) + "\n  }"
                      for e in events)
    return (head + body + '\n  ],\n  "traceName": "t[1].json"\n}').encode()


def plain_read(raw: bytes) -> TraceData:
    """The reader without slicing: the whole file decoded at once, one batch."""
    trace = trace_schema.DECODER.decode(raw)
    events, trace.traceEvents = trace.traceEvents, []
    reader = ct._Reader(trace, "x")
    reader.add(events)
    return reader.finish()


def check_sliced(raw: bytes, monkeypatch, slice_bytes: int) -> None:
    expected = plain_read(raw)
    monkeypatch.setattr(ct, "_SLICE_BYTES", slice_bytes)
    sliced = ct._read_sliced(io.BytesIO(raw).read, "x")
    assert sliced is not None, "torch's writer layout was not recognised"
    frames_equal(sliced.events, expected.events)
    assert {k: v for k, v in vars(sliced.meta).items() if k != "source"} == {
        k: v for k, v in vars(expected.meta).items() if k != "source"
    }
    # and the basic columns against the JSON itself
    ref = reference_rows(json.loads(raw))
    ev = sliced.events
    origin = sliced.meta.origin_ns
    got = list(zip(ev["name"].astype(str), np.rint(ev["start_us"].to_numpy() * 1000).astype(np.int64) + origin,
                   np.rint(ev["dur_us"].to_numpy() * 1000).astype(np.int64)))
    assert [r[0] for r in got] == [r[0] for r in ref]
    assert all(abs(a[1] - b[1]) <= 1 and a[2] == b[2] for a, b in zip(got, ref))


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("slice_bytes", [1 << 10, 1 << 19])
@pytest.mark.parametrize("layout", ["as recorded", "torch's writer", "msgspec"])
def test_sliced_reading_equals_plain_reading(name, slice_bytes, layout, monkeypatch):
    """The recorded GPU traces: as stored (compact, from kineto's writer on that machine), laid out
    as torch 2.13's writer lays them out, and as nbprof's exporter writes JSON."""
    raw = gzip.decompress(trace_path(name).read_bytes())
    doc = json.loads(raw)
    if layout == "torch's writer":
        header = {k: v for k, v in doc.items() if k not in ("traceEvents", "traceName")}
        raw = torch_layout(doc["traceEvents"], **header)
    elif layout == "msgspec":
        import msgspec

        raw = msgspec.json.encode(doc)
    check_sliced(raw, monkeypatch, slice_bytes)


@needs_torch
@pytest.mark.parametrize("slice_bytes", [1 << 12, 1 << 19])
def test_live_trace_is_read_in_slices(tmp_path, slice_bytes, monkeypatch):
    """A trace torch's own writer just wrote (shapes, memory, a second thread)."""
    import threading

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    def work(n: int) -> None:
        x = torch.randn(n, n)
        for _ in range(20):
            with record_function("step"):
                x = torch.tanh(x @ x + 1)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        t = threading.Thread(target=work, args=(8,))
        t.start()
        work(16)
        t.join()
    path = tmp_path / "live.json"
    prof.profiler.kineto_results.save(str(path))
    check_sliced(path.read_bytes(), monkeypatch, slice_bytes)


def odd_events() -> list[dict]:
    ev = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": " main "}},
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 7, "ts": 10.0, "dur": 10.0,
         "args": {"External id": 1, "Input Dims": [[2, 3]]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::is_leaf", "pid": 1, "tid": 7, "ts": 11.0, "dur": 0.5},
        {"ph": "B", "cat": "cpu_op", "name": "begin-end events are not read", "pid": 1, "tid": 7, "ts": 12.0},
        {"ph": "X", "cat": "something_new", "name": "unknown category", "pid": 1, "tid": 7, "ts": 12.5,
         "dur": 1.0, "args": None},
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 13.0,
         "args": {"Bytes": 64, "Total Allocated": 64, "Total Reserved": 0, "Device Type": 0, "Device Id": -1}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "worker"}},
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 7, "ts": 14.0, "dur": 2.0,
         "args": {"External id": 2, "Input Dims": [[2, 3], [[1], [2]]]}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 7, "ts": 14.0},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 5.0, "dur": 30.0},
        {"ph": "X", "cat": "user_annotation", "name": "tail", "pid": "host", "tid": "main", "ts": 30.0, "dur": 1.0},
    ]
    return ev


def test_odd_files_read_the_same_sliced_or_whole(monkeypatch):
    events = odd_events()
    laid_out = torch_layout(events, schemaVersion=1, record_shapes=0)
    compact = json.dumps({"traceEvents": events, "traceName": "t[1].json"}).encode()
    monkeypatch.setattr(ct, "_SLICE_BYTES", 64)  # a slice per event or two
    a = ct.parse_trace_bytes(laid_out)
    b = ct.parse_trace_bytes(compact)
    frames_equal(a.events, b.events)
    ev = a.events
    assert ev["name"].astype(str).tolist() == ["outer", "unknown category", "[memory]", "inner", "tail"]
    assert ev["kind"].astype(str).tolist() == ["op", "other", "memory", "op", "annotation"]
    assert ev["input_shapes"].astype(str).tolist() == ["[[2, 3]]", "[]", "[]", "[[2, 3], []]", "[]"]
    assert ev["bytes"].tolist() == [0, 0, 64, 0, 0]
    assert a.meta.thread_names == {7: "main", 8: "worker"}
    assert a.meta.span_us == 30.0 and a.meta.record_shapes
    assert ev["start_us"].tolist() == [5.0, 7.5, 8.0, 9.0, 25.0]  # from the span's start
    assert ev["pid"].tolist()[:4] == [1, 1, 1, 1] and ev["pid"].iloc[4] < 0  # a string pid gets an id


def test_sliced_path_gives_way_to_the_plain_one_on_bad_files(monkeypatch):
    events = odd_events()
    laid_out = torch_layout(events)
    monkeypatch.setattr(ct, "_SLICE_BYTES", 64)
    assert ct._read_sliced(io.BytesIO(laid_out[: len(laid_out) // 2]).read, "x") is None  # truncated
    with pytest.raises(Exception, match="truncated"):
        ct.parse_trace_bytes(laid_out[: len(laid_out) // 2], "cut.json")


def test_trace_files_stream_in_slices(tmp_path, monkeypatch):
    """read_trace_file reads a plain file slice by slice (never all of it in memory)."""
    doc = json.loads(gzip.decompress(trace_path("cnn_train_cuda").read_bytes()))
    header = {k: v for k, v in doc.items() if k not in ("traceEvents", "traceName")}
    raw = torch_layout(doc["traceEvents"], **header)
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    monkeypatch.setattr(ct, "_SLICE_BYTES", 1 << 12)
    calls = []
    original = ct._parse_whole
    monkeypatch.setattr(ct, "_parse_whole", lambda *a: calls.append(1) or original(*a))
    streamed = ct.read_trace_file(path)
    assert not calls, "the file was read whole"
    frames_equal(streamed.events, plain_read(raw).events)
