"""Contracts of the trace reader (nbprof/collect/chrome_trace.py) that issue 26's mutation samples
found unpinned: exact boundaries (the profiler's span, times, ids beyond int64), the rows an
instant event keeps, which copy of a duplicate stays, what a sliced or gzip'd read holds in memory.
Every trace is hand-made here and every expected value written out by hand (or recomputed from
the hand-made JSON in plain Python), never taken from the code under test."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbprof.collect.chrome_trace import parse_trace_bytes, read_trace_file

T0 = 200_000_000_000.0  # µs: whole µs, exact in float64 and as ns
DAY_US = 86_400e6
DAY_NS = 86_400 * 10**9


def op(name: str = "aten::add", ts: float = T0, dur: float = 5.0, **fields: Any) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
         "args": {"External id": 1}}
    e.update(fields)
    return e


def write(tmp_path: Path, events: list, name: str = "t.json", **header: Any) -> Path:
    path = tmp_path / name
    raw = json.dumps({**header, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    return path


def read(tmp_path: Path, events: list, name: str = "t.json", **header: Any):
    return read_trace_file(write(tmp_path, events, name, **header))


def names(data) -> list[str]:
    """The names of a TraceData's (or an events table's) rows, in order."""
    ev = getattr(data, "events", data)
    return ev["name"].astype(str).tolist()


# ------------------------------------------------------------------------------ instant events


def test_an_instant_event_that_is_no_memory_event_is_other_keeps_its_flops_and_has_no_memory_fields(tmp_path):
    """cpu_instant_event is memory's category, but only "[memory]" and "[OutOfMemory]" are memory
    events: another instant event in it is "other", none of the memory fields (bytes, totals,
    address, device) is its own, while a field every kind has (flops) stays."""
    mem = {"Bytes": 512, "Total Allocated": 4096, "Total Reserved": 8192, "Addr": 77, "Device Id": 1,
           "Device Type": 1, "flops": 1000}
    instant = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "pid": 1, "tid": 1}
    events = [op("aten::mm", T0, 10.0, args={"External id": 1, "flops": 64}),
              {**instant, "name": "marker", "ts": T0 + 1, "args": mem},
              {**instant, "name": "[memory]", "ts": T0 + 2, "args": mem},
              {**instant, "name": "[OutOfMemory]", "ts": T0 + 3, "args": mem}]
    ev = read(tmp_path, events, with_flops=1).events
    assert names(ev) == ["aten::mm", "marker", "[memory]", "[OutOfMemory]"]
    assert ev["kind"].astype(str).tolist() == ["op", "other", "memory", "oom"]
    assert ev["flops"].tolist() == [64, 1000, 1000, 1000]
    assert ev["bytes"].tolist() == [0, 0, 512, 512]
    assert ev["total_allocated_bytes"].tolist() == [-1, -1, 4096, 4096]
    assert ev["total_reserved_bytes"].tolist() == [-1, -1, 8192, 8192]
    assert ev["addr"].tolist() == [0, 0, 77, 77]
    assert ev["device"].astype(str).tolist() == ["cpu", "cpu", "cuda:1", "cuda:1"]
    assert [str(ev[c].dtype) for c in ("flops", "bytes", "total_allocated_bytes", "addr")] == ["int64"] * 4


# ------------------------------------------------------------------------------ the profiler's span


SPAN = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler"}
ONE_ENTRY = "the file's one entry is not an event nbprof reads"  # (the span is no event)
REFUSED = "the profiler's span (its \"Trace\" event: `ts` {ts:g}, `dur` {dur:g}) is not one a profile can have: not used"


def span_of(data) -> tuple[float | None, list[str]]:
    return data.meta.span_us, data.meta.reader_notes


@pytest.mark.parametrize("ts,ok", [
    (2.0**62 / 1000.0, False),  # the largest µs whose ns fit int64 with room for a span: excluded
    (math.nextafter(2.0**62 / 1000.0, 0.0), True),  # the float just below it
    (-(2.0**61) / 1000.0, True),  # the earliest: included
    (math.nextafter(-(2.0**61) / 1000.0, -math.inf), False),
])
def test_the_profilers_span_alone_is_used_inside_the_time_range_only(tmp_path, ts, ok):
    """A trace whose only entry is the profiler's span: its ts is placed (it is the time origin)
    where its ns fit [-2**61, 2**62): the end is open, the start closed."""
    data = read(tmp_path, [{**SPAN, "ts": ts, "dur": 30.0}])
    assert len(data.events) == 0
    if ok:
        assert span_of(data) == (30.0, [ONE_ENTRY])
        # the origin is the span's start in exact ns (whole µs here: ts * 1000)
        assert data.meta.origin_ns == int(ts) * 1000
    else:
        assert span_of(data) == (None, [REFUSED.format(ts=ts, dur=30.0), ONE_ENTRY])


@pytest.mark.parametrize("dur,ok", [(0.0, True), (DAY_US, True), (math.nextafter(DAY_US, math.inf), False),
                                    (-0.001, False)])
def test_the_profilers_span_lasts_from_zero_to_a_day(tmp_path, dur, ok):
    data = read(tmp_path, [{**SPAN, "ts": T0, "dur": dur}])
    assert span_of(data) == ((dur, [ONE_ENTRY]) if ok else (None, [REFUSED.format(ts=T0, dur=dur), ONE_ENTRY]))


@pytest.mark.parametrize("span_ts,span_dur,ok", [
    (T0 - DAY_US, 10.0, True),  # starts exactly a day before the first event
    (T0 - DAY_US - 0.001, 10.0, False),  # a ns more
    (T0, DAY_US, True),  # ends exactly a day after the last event's end (the event takes no time)
    (T0 + 1.0, DAY_US, False),  # a µs later
])
def test_the_profilers_span_is_used_within_a_day_of_the_events(tmp_path, span_ts, span_dur, ok):
    events = [op("a", T0, 0.0), op("b", T0, 0.0, tid=2)]
    data = read(tmp_path, events + [{**SPAN, "ts": span_ts, "dur": span_dur}])
    assert names(data) == ["a", "b"]
    if ok:
        assert span_of(data) == (span_dur, [])
        # the span moves the time origin to its start when it starts first
        origin_us = min(span_ts, T0)
        assert data.events["start_us"].tolist() == [pytest.approx(T0 - origin_us, abs=1e-3)] * 2
    else:
        assert span_of(data) == (None, [REFUSED.format(ts=span_ts, dur=span_dur)])
        assert data.events["start_us"].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------ exact duplicates


DUPLICATES = "{k} exact duplicate{s} (an event repeated, every field nbprof reads equal): counted once"


def test_one_event_written_twice_is_one_row(tmp_path):
    data = read(tmp_path, [op("a"), op("a")])
    assert names(data) == ["a"] and data.meta.reader_notes == [DUPLICATES.format(k=1, s="")]


def test_the_first_copy_of_a_duplicate_stays_where_it_was_among_many_at_one_start(tmp_path):
    """40 copies of one event interleaved with 40 distinct events of the same start: the first
    copy stays at its place in file order, every other copy goes (a sort that does not keep
    equal hashes in file order kept a later copy: the table's order changed)."""
    events = []
    for i in range(40):
        events += [op("dup", T0, 7.0), op(f"other{i}", T0, 7.0)]
    data = read(tmp_path, events)
    assert names(data) == ["dup"] + [f"other{i}" for i in range(40)]
    assert data.meta.reader_notes == [DUPLICATES.format(k=39, s="s")]


def test_a_duplicate_is_found_among_events_that_differ_in_one_field_only(tmp_path):
    """Events of one start that differ in one field each (name, kind, thread, duration, an id)
    are all distinct; each one's own copy is found whatever the others are."""
    base = op("x", T0, 5.0)
    variants = [base, op("y", T0, 5.0), op("x", T0, 6.0), op("x", T0, 5.0, tid=2), op("x", T0, 5.0, pid=3),
                op("x", T0, 5.0, cat="user_annotation"), op("x", T0, 5.0, args={"External id": 2})]
    events = variants + list(reversed(variants))
    data = read(tmp_path, events)
    ev = data.events
    assert len(ev) == len(variants)
    assert names(data) == ["x", "y", "x", "x", "x", "x", "x"]
    assert ev["dur_us"].tolist() == [5.0, 5.0, 6.0, 5.0, 5.0, 5.0, 5.0]
    assert ev["thread"].tolist() == [1, 1, 1, 2, 1, 1, 1]
    assert ev["pid"].tolist() == [1, 1, 1, 1, 3, 1, 1]
    assert ev["kind"].astype(str).tolist() == ["op"] * 5 + ["annotation", "op"]
    assert ev["external_id"].tolist() == [1, 1, 1, 1, 1, 1, 2]
    assert data.meta.reader_notes == [DUPLICATES.format(k=7, s="s")]
