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


# ------------------------------------------------------------------------------ ids and values beyond their type


def test_pids_and_tids_strings_and_integers_beyond_int64_get_ids_of_their_own(tmp_path):
    """Hand-made traces name processes and threads ("host", "main"); integers beyond int64 cannot
    be a column's value. Each distinct text (and each such integer, as text) gets its own negative
    id, -2, -3, ... in the order first met (pids before tids); all-digit text is the number;
    int64's own bounds are kept as they are. A thread's negative id reads as its unsigned 32-bit
    number (kineto writes tids as signed 32-bit numbers)."""
    big = 2**64
    rows = [(1, 1), ("host", "main"), (big, "worker"), (2**63 - 1, -(2**63)), ("42", big), (1, "main")]
    events = [op(f"op{i}", T0 + 10 * i, 1.0, pid=p, tid=t) for i, (p, t) in enumerate(rows)]
    data = read(tmp_path, events)
    ev = data.events
    assert names(ev) == [f"op{i}" for i in range(6)]
    # pids: 1, "host" -> -2, 2**64 -> -3, int64's largest, "42" -> 42, 1
    assert ev["pid"].tolist() == [1, -2, -3, 2**63 - 1, 42, 1]
    # tids: 1, "main" -> -4, "worker" -> -5, int64's smallest, 2**64 -> -3 (its text's id), "main" -> -4
    assert ev["thread"].tolist() == [1, 2**32 - 4, 2**32 - 5, -(2**63) + 2**32, 2**32 - 3, 2**32 - 4]
    assert str(ev["pid"].dtype) == str(ev["thread"].dtype) == "int64"
    assert data.meta.reader_notes == ["2 `pid` or `tid` values beyond int64: numbered apart"]


def test_pids_and_tids_written_as_digits_are_numbers(tmp_path):
    events = [op("a", T0, 1.0, pid="7", tid="8"), op("b", T0 + 10, 1.0, pid=7, tid="9")]
    data = read(tmp_path, events)
    assert data.events["pid"].tolist() == [7, 7] and data.events["thread"].tolist() == [8, 9]
    assert data.meta.reader_notes == []


def test_one_process_and_thread_at_int64s_bounds_are_read_as_they_are(tmp_path):
    events = [op(f"op{i}", T0 + 10 * i, 1.0, pid=2**63 - 1, tid=-(2**63) + 2**32) for i in range(3)]
    data = read(tmp_path, events)
    assert data.events["pid"].tolist() == [2**63 - 1] * 3
    # negative: 2**32 added (as to every negative thread id; it stays negative, in no op tree)
    assert data.events["thread"].tolist() == [-(2**63) + 2**33] * 3
    assert data.meta.reader_notes == []


def kernel(ts: float, **args: Any) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": 1.0,
            "args": {"device": 0, "stream": 7, "correlation": 1, "External id": 1, **args}}


def test_args_beyond_their_columns_type_read_as_the_default_and_are_counted(tmp_path):
    """Registers per thread are int32, ids int64: a value beyond the type is its column's
    default ("does not apply"), counted per arg in a note; the type's own bounds are values."""
    events = [kernel(T0, **{"registers per thread": 2**31, "External id": 2**63}),
              kernel(T0 + 10, **{"registers per thread": -(2**31), "External id": -(2**63)}),
              kernel(T0 + 20, **{"registers per thread": 2**31 - 1, "External id": 2**63 - 1}),
              kernel(T0 + 30, **{"registers per thread": 2**32 + 5, "External id": 2**64 - 1})]
    data = read(tmp_path, events)
    ev = data.events
    assert ev["registers_per_thread"].tolist() == [-1, -(2**31), 2**31 - 1, -1]
    assert ev["external_id"].tolist() == [0, -(2**63), 2**63 - 1, 0]
    assert [str(ev[c].dtype) for c in ("registers_per_thread", "external_id")] == ["int32", "int64"]
    assert sorted(data.meta.reader_notes) == ["2 events with `args.External id` beyond int64: read as 0",
                                              "2 events with `args.registers per thread` beyond int32: read as -1"]


def compact(doc: dict) -> bytes:
    """JSON as nbprof's exporter and json.dumps write it: events cut at '}, {"ph": '."""
    return json.dumps(doc).encode()


def test_values_beyond_their_type_are_counted_over_every_slice_of_a_large_file(tmp_path):
    """A file read in slices (~256 KiB each): the out-of-range values of every slice are counted."""
    n = 6000
    events = [kernel(T0 + i, **({"External id": 2**63} if i in (0, n // 2, n - 1) else {})) for i in range(n)]
    raw = compact({"traceEvents": events})
    assert len(raw) > 3 * (1 << 18)  # four slices at least
    path = tmp_path / "big.json"
    path.write_bytes(raw)
    data = read_trace_file(path)
    assert len(data.events) == n
    assert data.events["external_id"].tolist() == [0 if i in (0, n // 2, n - 1) else 1 for i in range(n)]
    assert data.meta.reader_notes == ["3 events with `args.External id` beyond int64: read as 0"]


# ------------------------------------------------------------------------------ reading in slices


@pytest.mark.parametrize("name", ["big.json", "big.json.gz"])
def test_a_large_file_is_read_in_slices_never_whole(tmp_path, name):
    """The module's promise: ~2 MB of buffers whatever the file's size, never the file whole in
    memory. A 12 MiB file (3,000 events, each with a 4 kB arg nbprof does not read) is read
    adding well under 4 MiB at its peak (1.3-1.4 MiB measured, plain or gzip'd); a reader that
    looks for the events' "[" in vain reads 4 MiB ahead before it starts cutting (12 MiB)."""
    import tracemalloc

    pad = "x" * 4000
    events = [op(f"op{i % 10}", T0 + i, 1.0, args={"External id": i + 1, "pad": pad}) for i in range(3000)]
    path = write(tmp_path, events, name)
    size = len(compact({"traceEvents": events}))
    assert size > 11 << 20
    read_trace_file(path)  # (imports, caches: not counted)
    tracemalloc.start()
    try:
        data = read_trace_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert names(data) == [f"op{i % 10}" for i in range(3000)]
    assert data.events["external_id"].tolist() == list(range(1, 3001))
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB at the peak reading a {size / 2**20:.0f} MiB file"


# ------------------------------------------------------------------------------ gzip


def gz_doc(n: int = 400) -> bytes:
    return compact({"traceEvents": [op(f"op{i % 7}", T0 + i, 1.0) for i in range(n)]})


@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 16, 1 << 18])
def test_gzip_reads_give_as_many_bytes_as_asked_until_the_end(n):
    """``Gunzip.read(n)``, as a file's ``read``: exactly n bytes until the stream's end, then the
    rest, then b"" (never more than asked: a read that decompressed a whole 64 KiB input at
    once could give ~1 MB for 1 byte asked), across members and zero padding."""
    from nbprof.collect.trace_limits import Gunzip, max_trace_bytes

    raw = gz_doc()
    cut = [0, 5, len(raw) // 3, len(raw)]
    data = b"".join(gzip.compress(raw[a:b], mtime=0) + b"\0" * 3 for a, b in zip(cut, cut[1:]))
    stream = Gunzip(__import__("io").BytesIO(data), "x", max_trace_bytes())
    chunks = list(iter(lambda: stream.read(n), b""))
    assert b"".join(chunks) == raw
    assert [len(c) for c in chunks] == [n] * (len(raw) // n) + ([len(raw) % n] if len(raw) % n else [])
    assert stream.read(n) == b""


def test_gzip_members_apart_by_more_zero_padding_than_one_read_are_read_whole(tmp_path):
    """Zeros after a member are let be, as ``gzip`` lets them, however many: 200 KiB of them
    (more than one 64 KiB read of the file holds) between two members."""
    raw = gz_doc()
    half = len(raw) // 2
    data = gzip.compress(raw[:half], mtime=0) + b"\0" * (200 << 10) + gzip.compress(raw[half:], mtime=0)
    assert gzip.decompress(data) == raw
    path = tmp_path / "padded.json.gz"
    path.write_bytes(data)
    assert names(read_trace_file(path)) == [f"op{i % 7}" for i in range(400)]


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_file_of_exactly_max_bytes_is_read_and_one_byte_more_is_not(tmp_path, name):
    """``max_bytes`` is the most JSON read from one file (decompressed, for .gz): a file of exactly
    that many bytes is read; one byte fewer allowed, it is refused with one line naming the file."""
    from nbprof.errors import TraceError

    raw = gz_doc(50)
    path = tmp_path / name
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    assert len(read_trace_file(path, max_bytes=len(raw)).events) == 50
    with pytest.raises(TraceError) as info:
        read_trace_file(path, max_bytes=len(raw) - 1)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert f"{(len(raw) - 1) / 1024:.3g} KiB" in message and "more than" in message and 'max_bytes="8G"' in message


# ------------------------------------------------------------------------------ the reader's notes


@pytest.mark.parametrize("k", [1, 2])
def test_every_reader_note_counts_in_singular_and_plural(tmp_path, k):
    """One file with k of everything the reader notes (a `ts` that is no number, unknown
    categories, begin/end events, invalid UTF-8, an id beyond int64, a pid beyond int64, an
    event without a name): each note, in the order the notes come, worded for k."""
    s = "" if k == 1 else "s"
    events = [op("a", T0, 1.0)]
    for i in range(k):
        events += [op("bad ts", "soon"), op("w", T0 + 10 + i, cat="weird"), op("o1", T0 + 20 + i, cat="odd"),
                   op("o2", T0 + 30 + i, cat="odd"), {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": T0},
                   op("BAD_UTF8", T0 + 40 + i), op("id", T0 + 50 + i, args={"External id": 2**63}),
                   op("pid", T0 + 60 + i, pid=2**64 + i), op("", T0 + 70 + i)]
    raw = json.dumps({"traceEvents": events}).encode().replace(b"BAD_UTF8", b"bad \xff name")
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    data = read_trace_file(path)
    assert data.meta.reader_notes == [
        f"{k} event{s} with an unreadable `ts`: left out",
        f'{3 * k} events in categories nbprof does not know, read as "other": odd ({2 * k}), weird ({k})',
        f'{k} begin/end ("B"/"E") events not read: nbprof reads complete ("X") and instant ("i") events',
        f"{k} invalid UTF-8 sequence{s} in names or args: read as \ufffd",
        f"{k} event{s} with `args.External id` beyond int64: read as 0",
        f"{k} `pid` or `tid` value{s} beyond int64: numbered apart",
        f"{k} event{s} without a `name`: left out",
    ]
    assert names(data).count("bad \ufffd name") == k


@pytest.mark.parametrize("entries,note", [
    (1, "the file's one entry is not an event nbprof reads"),
    (2, "none of the file's 2 entries is an event nbprof reads"),
])
def test_a_file_without_events_says_how_many_entries_it_had(tmp_path, entries, note):
    meta = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": f"t{i}"}} for i in range(entries)]
    data = read(tmp_path, meta)
    assert len(data.events) == 0 and data.meta.reader_notes == [note]
    assert data.meta.thread_names == {i: f"t{i}" for i in range(entries)}


# ------------------------------------------------------------------------------ events far apart


SPANS = "the events span {}, more than a profile runs: are `ts` and `dur` nanoseconds? Chrome traces are in µs (shown as written)"
AWAY = "{k} event{s} more than a day away from the other {m} (e.g. at `ts` {ts:g} µs, the others from {first:g}): left out"


@pytest.mark.parametrize("case", ["gap of a day", "gap of a day and a ns", "two halves", "no majority of 4",
                                  "one chain", "a day exactly", "before time zero"])
def test_events_more_than_a_day_apart(tmp_path, case):
    """Events are grouped where more than a day passes with nothing running: a group holding
    most of them is kept and the others left out (said); with no such group (or one group),
    all are kept and the span noted when it is over a day (times in ns where µs belong?)."""
    d, ns = DAY_US, 0.001
    starts, durs = {
        "gap of a day": ([T0, T0 + 1, T0 + 1 + d], [0.0, 0.0, 0.0]),  # a gap of exactly a day: one group
        "gap of a day and a ns": ([T0, T0 + 1, T0 + 1 + d + ns], [0.0, 0.0, 0.0]),
        "two halves": ([T0, T0 + 1, T0 + 2 * d, T0 + 2 * d + 1], [0.0] * 4),
        "no majority of 4": ([T0, T0 + 1, T0 + 2 * d, T0 + 4 * d], [0.0] * 4),  # groups of 2, 1, 1
        "one chain": ([T0, T0 + 0.8 * d], [0.9 * d, 0.9 * d]),  # overlapping: nothing apart, 1.7 days
        "a day exactly": ([T0, T0 + d], [0.0, 0.0]),
        "before time zero": ([-3 * d, -3 * d + 1, 0.0, 1.0], [0.0] * 4),  # two halves, negative times
    }[case]
    events = [op(f"e{i}", ts, dur) for i, (ts, dur) in enumerate(zip(starts, durs))]
    data = read(tmp_path, events)
    every = [f"e{i}" for i in range(len(starts))]
    expected_names, notes = {
        "gap of a day": (every, [SPANS.format("1.0 days")]),
        "gap of a day and a ns": (["e0", "e1"], [AWAY.format(k=1, s="", m=2, ts=T0 + 1 + d + ns, first=T0)]),
        "two halves": (every, [SPANS.format("2.0 days")]),
        "no majority of 4": (every, [SPANS.format("4.0 days")]),
        "one chain": (every, [SPANS.format("1.7 days")]),
        "a day exactly": (every, []),
        "before time zero": (every, [SPANS.format("3.0 days")]),
    }[case]
    assert names(data) == expected_names
    assert data.meta.reader_notes == notes


def test_a_most_of_the_events_group_keeps_its_own_far_apart_events_out(tmp_path):
    """Three of five events together, two strays far from them and from each other: the strays
    go, the first stray in file order named."""
    d = DAY_US
    events = [op("late", T0 + 3 * d), op("a", T0), op("b", T0 + 1), op("c", T0 + 2), op("early", T0 - 5 * d)]
    data = read(tmp_path, events)
    assert names(data) == ["a", "b", "c"]
    assert data.meta.reader_notes == [AWAY.format(k=2, s="s", m=3, ts=T0 + 3 * d, first=T0)]


@pytest.mark.parametrize("days,text", [(729.5, "729.5 days"), (730, "2 years"), (1000, "3 years")])
def test_a_span_of_two_years_or_more_is_said_in_years(tmp_path, days, text):
    """Back-to-back day-long events (one group: nothing apart) spanning ``days``."""
    whole = int(days)
    events = [op(f"e{i}", T0 + i * DAY_US, DAY_US) for i in range(whole)]
    if days != whole:
        events.append(op("last", T0 + whole * DAY_US, (days - whole) * DAY_US))
    data = read(tmp_path, events)
    assert len(data.events) == len(events) and data.meta.reader_notes == [SPANS.format(text)]


# ------------------------------------------------------------------------------ times an event cannot have


TS_MAX, TS_MIN = 2.0**62 / 1000.0, -(2.0**61) / 1000.0  # µs whose ns, and a span, fit int64


@pytest.mark.parametrize("ts,dur,note", [
    (TS_MAX, 1.0, "1 event with a `ts` nbprof cannot place (e.g. {ts:g}; beyond 146 years of µs, or not a number: "
                  "nanoseconds where chrome traces have µs?): left out"),
    (math.nextafter(TS_MAX, 0.0), 1.0, None),
    (TS_MIN, 1.0, None),
    (math.nextafter(TS_MIN, -math.inf), 1.0, "1 event with a `ts` nbprof cannot place (e.g. {ts:g}; beyond 146 years "
                                             "of µs, or not a number: nanoseconds where chrome traces have µs?): left out"),
    (T0, 0.0, None),
    (T0, -0.001, "1 event with a negative `dur` (e.g. -0.001): left out"),
    (T0, DAY_US, None),
    (T0, math.nextafter(DAY_US, math.inf), "1 event lasting longer than a day (`dur` up to 8.64e+10 µs: nanoseconds "
                                           "where chrome traces have µs?): left out"),
])
def test_an_events_time_and_duration_bounds(tmp_path, ts, dur, note):
    data = read(tmp_path, [op("e", ts, dur)])
    if note is None:
        assert names(data) == ["e"] and data.meta.reader_notes == []
        assert data.events["dur_us"].tolist() == [dur]
    else:
        assert len(data.events) == 0
        assert data.meta.reader_notes == [note.format(ts=ts)]  # (an event, left out: said once, for its reason)


def test_each_event_left_out_for_its_time_is_counted_once_under_its_first_reason(tmp_path):
    """The reasons in order: no ts, a ts out of range, no name, a negative dur, over a day; an
    event with several is counted under the first only; each note gives the first example (the
    longest duration)."""
    no_ts = {k: v for k, v in op("no ts", dur=-1.0).items() if k != "ts"}
    events = [op("ok", T0), no_ts, op("far", 1e16), op("", 1e17), op("far2", 2e16), op("", T0, -1.0),
              op("neg", T0, -2.5), op("neg2", T0, -7.0), op("long", T0, 2 * DAY_US), op("long2", T0, 3 * DAY_US),
              op("", T0, 5 * DAY_US)]
    data = read(tmp_path, events)
    assert names(data) == ["ok"]
    assert data.meta.reader_notes == [
        "1 event without a `ts`: left out",
        "3 events with a `ts` nbprof cannot place (e.g. 1e+16; beyond 146 years of µs, or not a number: "
        "nanoseconds where chrome traces have µs?): left out",
        "2 events without a `name`: left out",
        "2 events with a negative `dur` (e.g. -2.5): left out",
        "2 events lasting longer than a day (`dur` up to 2.592e+11 µs: nanoseconds where chrome traces have µs?): "
        "left out",
    ]


def test_a_pid_written_as_signed_text_is_one_number_in_every_slice(tmp_path):
    """A bug the mutation round found (_ids' numpy and per-value paths read text differently):
    "-7" (as " 7", "+7") was the number -7 in the slices numpy read whole, and a name's id in a
    slice that also held a name ("host"): one process split in two. Now the number everywhere,
    as numpy (and Python's int()) reads it."""
    n = 5000  # ~3 slices of ~256 KiB; the name only in the last
    events = [op(f"op{i % 3}", T0 + i, 0.5, pid="host" if i == n - 10 else "-7", tid=" 7" if i % 2 else "+8")
              for i in range(n)]
    raw = compact({"traceEvents": events})
    assert len(raw) > 2 * (1 << 18)
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    ev = read_trace_file(path).events
    assert ev["pid"].tolist() == [-2 if i == n - 10 else -7 for i in range(n)]
    assert ev["thread"].tolist() == [7 if i % 2 else 8 for i in range(n)]
    # within one slice alike: the name beside the number
    ev = read(tmp_path, [op("a", T0, pid="-7"), op("b", T0 + 1, pid="host"), op("c", T0 + 2, pid="٣")]).events
    assert ev["pid"].tolist() == [-7, -2, 3]


# ------------------------------------------------------------------------------ values of another type


def test_values_of_another_type_are_read_where_they_can_be_and_their_events_left_out_where_not(tmp_path):
    """A file the typed decoders refuse is read field by field: a value that reads as its type is
    kept (ROCm's "0x7" stream, "9" for an id, 3.0 for a correlation), null is the default; an
    event whose kind reads a field it cannot read is left out, counted under its first such field
    (ph, name, cat, pid, tid, ts, dur, args, then its args), metadata only for ph and cat."""
    def ev(label: str, i: int, **fields: Any) -> dict:
        return {**op(label, T0 + i, 1.0), **fields}

    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": T0, "dur": 2.0,
         "args": {"device": "1", "stream": "0x7", "correlation": 3.0, "External id": "9"}},
        ev("bad ph", 1, ph=5), ev("bad cat", 2, cat=7), ev("bad name and ts", 3, name=[1], ts="soon"),
        ev("bad pid", 4, pid=[1]), ev("bad tid", 5, tid={}), ev("bad ts", 6, ts="soon"), ev("bad ts 2", 7, ts="x"),
        ev("bad dur", 8, dur="long"), ev("bad args", 9, args=[1]), ev("bad id", 10, args={"External id": "seven"}),
        ev("b", 11, args={"Bytes": "lots", "External id": 4}),  # Bytes: not an op's: let be
        {"ph": "M", "name": "thread_name", "pid": [1], "tid": 6, "args": {"name": "worker"}},  # not counted
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 5, "args": {"name": 5}},  # a name of another type: ""
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": "x"},  # not counted
        ev("no ts", 13, ts=None), ev("e", 14, args=None), ev("f", 15, dur=None),
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": T0 + 16,
         "args": {"Bytes": "12", "Device Type": 1, "Device Id": "0", "Total Allocated": 12.0}},
    ]
    data = read(tmp_path, events)
    ev_ = data.events
    assert names(ev_) == ["k", "b", "e", "f", "[memory]"]
    assert ev_["kind"].astype(str).tolist() == ["kernel", "op", "op", "op", "memory"]
    assert ev_["device"].astype(str).tolist() == ["cuda:1", "cpu", "cpu", "cpu", "cuda:0"]
    assert ev_["stream"].tolist() == [7, -1, -1, -1, -1]
    assert ev_["correlation"].tolist() == [3, 0, 0, 0, 0]
    assert ev_["external_id"].tolist() == [9, 4, 0, 1, 0]
    assert ev_["dur_us"].tolist() == [2.0, 1.0, 1.0, 0.0, 0.0]
    assert ev_["bytes"].tolist() == [0, 0, 0, 0, 12]
    assert ev_["total_allocated_bytes"].tolist() == [-1, -1, -1, -1, 12]
    assert data.meta.thread_names == {6: "worker", 5: ""}
    assert data.meta.reader_notes == [
        "1 event with an unreadable `args`: left out",
        "1 event with an unreadable `args.External id`: left out",
        "1 event with an unreadable `cat`: left out",
        "1 event with an unreadable `dur`: left out",
        "1 event with an unreadable `name`: left out",
        "1 event with an unreadable `ph`: left out",
        "1 event with an unreadable `pid`: left out",
        "1 event with an unreadable `tid`: left out",
        "2 events with an unreadable `ts`: left out",
        "1 event without a `ts`: left out",
    ]


def test_text_args_are_kept_as_written_trailing_nul_included(tmp_path):
    """A text arg (a collective's name, its dtype) is the string as the JSON writes it: numpy's
    fixed-width strings would drop a trailing NUL ("all\\x00" read as "all", one category with "all")."""
    events = [kernel(T0 + i, **{"Collective name": name, "dtype": "Float"}) for i, name in
              enumerate(["all\u0000", "all", "b\u0000\u0000"])]
    ev = read(tmp_path, events).events
    assert ev["collective"].astype(str).tolist() == ["all\x00", "all", "b\x00\x00"]
    assert sorted(ev["collective"].cat.categories) == ["", "all", "all\x00", "b\x00\x00"]
