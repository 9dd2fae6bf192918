"""A trace is data, never code (issue 24), the reader's half: what a trace's size, structure and
numbers can make nbprof do. Reading is bounded (a gzip bomb, deep nesting: one line, in seconds,
in little memory), every malformed input is a one-line TraceError naming the file or a note, and
numbers that cannot be right are left out and said, never shown. The answers come from the raw
JSON, recomputed here in plain Python. (The fuzz test of the same: tests/test_trace_fuzz.py.)"""

from __future__ import annotations

import collections
import gzip
import io
import json
import os
import struct
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.collect import trace_limits
from nbprof.errors import OptionError, TraceError

from .conftest import DATA, trace_path
from .test_perf_reader import torch_layout

WILD = DATA / "wild"
BASE = 4484342762862.144  # µs: a recorded H100 trace's clock
DAY_US = 86_400e6


def op(name: str = "aten::add", ts: float = BASE, dur: float = 5.0, **fields) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
         "args": {"External id": 1}}
    e.update(fields)
    return e


def write(tmp_path: Path, events: list, name: str = "t.json", **header) -> Path:
    path = tmp_path / name
    raw = json.dumps({**header, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    return path


def loaded(path: Path):
    """load_trace with every warning an error (no warning may reach the user)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return nbprof.load_trace(path)


def one_line_error(path: Path, match: str, **kwargs) -> str:
    with pytest.raises(TraceError, match=match) as info:
        nbprof.load_trace(path, **kwargs)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    return message


def raw_doc(name: str) -> dict:
    return json.loads(gzip.decompress(trace_path(name).read_bytes()))


def rows_of(doc: dict) -> list[dict]:
    """The events that are rows of the events table, from the JSON (utility ops torch leaves out
    aside): complete and instant events of the categories the table reads."""
    from nbprof.collect.trace_schema import CAT_KIND
    from nbprof.events import IGNORED_NAMES

    def read(e: dict) -> bool:
        if not e.get("cat"):  # torch 1.8-1.9's memory events have no category
            return e.get("ph") == "X" or e.get("name") in ("[memory]", "[OutOfMemory]")
        return CAT_KIND.get(e["cat"], "other") is not None

    return [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i") and read(e) and e.get("name") not in IGNORED_NAMES]


# -- bounded reading ---------------------------------------------------------------------------


def gzip_bomb(path: Path, head: bytes, chunk: bytes, copies: int, tail: bytes, *, members: bool = False) -> Path:
    """head + copies x chunk + tail, gzip'd without compressing GBs. One member: the deflate stream
    of a chunk after a full flush is the same bytes every time, so it is repeated (the CRC is still
    computed over every byte); ``members``: a member per chunk, the same member repeated, as
    ``cat a.gz b.gz`` makes (gzip reads every member)."""
    if members:
        one = gzip.compress(chunk, compresslevel=9, mtime=0)
        path.write_bytes(gzip.compress(head, mtime=0) + one * copies + gzip.compress(tail, mtime=0))
        return path
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [c.compress(head), c.flush(zlib.Z_FULL_FLUSH)]
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    parts += [block] * copies
    parts.append(c.compress(tail) + c.flush())
    crc = zlib.crc32(head)
    for _ in range(copies):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + copies * len(chunk) + len(tail)
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + b"".join(parts)
                     + struct.pack("<II", crc, size & 0xFFFFFFFF))
    return path


BOMB_RUN = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway read fails here, not the machine
import nbprof, nbprof.model, nbprof.collect.chrome_trace  # imported before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = []
for path in sys.argv[1:]:
    t0 = time.perf_counter()
    try:
        nbprof.load_trace(path)
        error = ("", "")
    except BaseException as e:
        error = (type(e).__name__, str(e))
    out.append(dict(path=path, error=error[0], message=error[1], seconds=time.perf_counter() - t0))
peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(json.dumps(dict(runs=out, peak_added_mb=peak_mb)))
"""


def read_bombs(*paths: Path) -> dict:
    """Load each file in a fresh process (its address space capped at 2 GiB, so that a reader that
    decompresses it all fails there, not the machine): the error, the seconds, the peak memory."""
    run = subprocess.run([sys.executable, "-c", BOMB_RUN, *map(str, paths)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONWARNINGS": "error"})
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def check_refused(result: dict, *expected: str) -> None:
    for r, words in zip(result["runs"], expected, strict=True):
        assert r["error"] == "TraceError", r
        assert r["path"] in r["message"] and words in r["message"] and "\n" not in r["message"]
        assert r["seconds"] < 20, r  # ~0.5 s on a quiet 2-core VM; decompressing it all takes 10-20 s
    assert result["peak_added_mb"] < 300, result


def test_a_gzip_bomb_is_one_line_within_seconds_in_bounded_memory(tmp_path):
    """A 0.6 MB file that expands to 670 MB of blanks in the events array of a valid document (the
    issue's, 2.5 GB: a raw MemoryError after 9 s; the slow test below has it): one line saying
    what it is and how to read it anyway, in well under a second, adding < 300 MB (~70 MB)."""
    bomb = gzip_bomb(tmp_path / "blanks.json.gz", b'{"traceEvents": [', b" " * (16 << 20), 40, b"]}")
    assert bomb.stat().st_size < 1 << 20
    result = read_bombs(bomb)
    check_refused(result, "compression bomb")
    message = result["runs"][0]["message"]
    assert 'max_bytes="8G"' in message and "NBPROF_MAX_TRACE_BYTES=8G" in message


@pytest.mark.slow
def test_gzip_bombs_of_every_kind_are_refused(tmp_path):
    """~2.4 MB files that expand to 2.5 GB: blanks in the events array (one gzip member), a 2.5 GB
    name, 2.5 GB of zeros (a member per 16 MiB)."""
    copies = 150  # x 16 MiB = 2.5 GB
    spaces = gzip_bomb(tmp_path / "blanks.json.gz", b'{"traceEvents": [', b" " * (16 << 20), copies, b"]}")
    name = gzip_bomb(tmp_path / "name.json.gz", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1, '
                     b'"name": "', b"a" * (16 << 20), copies, b'"}]}', members=True)
    zeros = gzip_bomb(tmp_path / "zeros.json.gz", b"", b"\0" * (16 << 20), copies, b"", members=True)
    assert all(p.stat().st_size < 3 << 20 for p in (spaces, name, zeros))
    check_refused(read_bombs(spaces, name, zeros), "compression bomb", "compression bomb", "not a chrome trace")


def test_gzip_is_read_as_it_streams_every_member_and_padding(tmp_path):
    """The streamed decompression reads what ``gzip`` reads: several members (as
    tensorboard_trace_handler's files are: a header member, then the events), zero padding after
    a member; and says what ``gzip`` refuses (a cut file, a bad CRC, bytes after the last member)."""
    raw = gzip.decompress(trace_path("cnn_train_cuda").read_bytes())
    expected = rows_of(json.loads(raw))
    cut = [0, 1000, len(raw) // 2, len(raw)]
    members = b"".join(gzip.compress(raw[a:b]) for a, b in zip(cut, cut[1:])) + b"\0" * 100
    path = tmp_path / "members.json.gz"
    path.write_bytes(members)
    ev = loaded(path).events
    assert len(ev) == len(expected) and ev["dur_us"].sum() == pytest.approx(sum(e.get("dur", 0) for e in expected))
    # whatever the members and the sizes asked for, the bytes are gzip's (a member's end met in
    # the middle of a read once gave its next bytes twice)
    rng = np.random.default_rng(0)
    for _ in range(20):
        cut = [0, *sorted(rng.choice(len(raw), size=int(rng.integers(1, 6)), replace=False).tolist()), len(raw)]
        data = b"".join(gzip.compress(raw[a:b]) + b"\0" * int(rng.integers(0, 3)) for a, b in zip(cut, cut[1:]))
        stream = trace_limits.Gunzip(io.BytesIO(data), "x", trace_limits.max_trace_bytes())
        parts = iter(lambda: stream.read(int(rng.choice([1, 100, 4096, 1 << 18]))), b"")
        assert b"".join(parts) == gzip.decompress(data) == raw
    one = gzip.compress(raw)
    bad_crc = one[:-8] + bytes([one[-8] ^ 1]) + one[-7:]
    for name, data, words in (("cut.json.gz", one[: len(one) // 2], "truncated"),
                              ("crc.json.gz", bad_crc, "corrupt"), ("tail.json.gz", one + b"garbage", "corrupt")):
        (tmp_path / name).write_bytes(data)
        one_line_error(tmp_path / name, words)


def test_the_size_limit_says_how_to_raise_it_and_raising_it_reads_the_file(tmp_path, monkeypatch):
    gz = trace_path("two_streams")
    plain = tmp_path / "two_streams.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    size = plain.stat().st_size
    monkeypatch.setenv("NBPROF_MAX_TRACE_BYTES", str(size // 2))
    for path in (gz, plain):
        message = one_line_error(path, "the most nbprof reads|more than the")
        assert 'max_bytes="8G"' in message and "NBPROF_MAX_TRACE_BYTES=8G" in message
    # the keyword wins over the environment; text sizes are read as binary units
    assert len(nbprof.load_trace(gz, max_bytes="1M").events) == len(rows_of(json.loads(plain.read_bytes())))
    assert len(nbprof.load_trace(plain, max_bytes=size).events) > 0
    monkeypatch.setenv("NBPROF_MAX_TRACE_BYTES", "16G")
    assert len(nbprof.load_trace(gz).events) > 0
    for bad in ("lots", -5, 0, True):
        with pytest.raises(OptionError, match="max_bytes"):
            nbprof.load_trace(gz, max_bytes=bad)
    monkeypatch.setenv("NBPROF_MAX_TRACE_BYTES", "a lot")
    with pytest.raises(OptionError, match="NBPROF_MAX_TRACE_BYTES"):
        nbprof.load_trace(gz)


def test_the_limit_holds_for_every_rank_of_a_folder(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank{rank}.json.gz").write_bytes(trace_path("two_streams").read_bytes())
    message = one_line_error(folder / "rank0.json.gz", "the most nbprof reads", max_bytes=1000)
    assert "rank0.json.gz" in message
    with pytest.raises(TraceError, match=r"rank0\.json\.gz: more than 1000 B of JSON"):
        nbprof.load_trace(folder, max_bytes=1000, workers=0, progress=False)
    p = nbprof.load_trace(folder, max_bytes="1M", workers=0, progress=False)
    assert p.rank(1).events is not None and len(p.events) == 2 * len(nbprof.load_trace(trace_path("two_streams")).events)


@pytest.mark.slow
def test_the_limit_reaches_worker_processes(tmp_path, monkeypatch):
    """The keyword travels to spawned workers (the environment variable is theirs already)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank{rank}.json.gz").write_bytes(trace_path("two_streams").read_bytes())
    with pytest.raises(TraceError, match=r"rank[01]\.json\.gz: more than 1000 B of JSON"):
        nbprof.load_trace(folder, max_bytes=1000, workers=1, progress=False)
    monkeypatch.setenv("NBPROF_MAX_TRACE_BYTES", "1000")
    p = nbprof.load_trace(folder, max_bytes="1M", workers=1, progress=False)
    assert p.rank_labels == [0, 1] and len(p.rank(0).events) > 0  # the rank read again, with the limit


def test_deeply_nested_json_is_one_line(tmp_path):
    """100k nested arrays in an arg (the issue's: a raw RecursionError), in every layout."""
    deep = "[" * 100_000 + "]" * 100_000
    events = [op(), op(ts=BASE + 10, args={"External id": 2, "Input Dims": "DEEP"})]
    text = torch_layout(events).decode().replace('"DEEP"', deep)
    for name, raw in (("laid_out.json", text.encode()), ("compact.json", json.dumps({"traceEvents": events}).replace(
            '"DEEP"', deep).encode()), ("list.json", json.dumps(events).replace('"DEEP"', deep).encode())):
        for path, data in ((tmp_path / name, raw), (tmp_path / (name + ".gz"), gzip.compress(raw))):
            path.write_bytes(data)
            one_line_error(path, "nested too deeply")
    # nested deeply, but within what the decoder reads: read as torch shows a list of lists (a
    # TensorList argument): []
    path = tmp_path / "deep_shapes.json"
    path.write_text(json.dumps({"record_shapes": 1, "traceEvents": events}).replace('"DEEP"', "[" * 500 + "]" * 500))
    shapes = loaded(path).events["input_shapes"].astype(str).tolist()
    assert shapes == ["[]", "[[]]"]


# -- malformed values: notes, never raw errors ---------------------------------------------------


@pytest.mark.parametrize("layout", ["torch", "compact", "gzip"])
def test_invalid_utf8_reads_as_replacement_characters_with_a_note(tmp_path, layout):
    """Names and shapes with bytes that are not UTF-8 (the issue's: a UnicodeDecodeError that did
    not name the file)."""
    events = [op("aten::addBAD", args={"External id": 1, "Input Dims": [["BAD"], [2, 3]]}),
              op("aten::mul", ts=BASE + 10, args={"External id": 2, "Input Dims": [[4]]})]
    text = (torch_layout(events, record_shapes=1) if layout == "torch"
            else json.dumps({"record_shapes": 1, "traceEvents": events}).encode())
    raw = text.replace(b"BAD", b"\xff\xfe")
    path = tmp_path / ("t.json.gz" if layout == "gzip" else "t.json")
    path.write_bytes(gzip.compress(raw) if layout == "gzip" else raw)
    p = loaded(path)
    ev = p.events
    assert ev["name"].astype(str).tolist() == [b"aten::add\xff\xfe".decode(errors="replace"), "aten::mul"]
    assert ev["input_shapes"].astype(str).tolist()[0] == '[["' + b"\xff\xfe".decode(errors="replace") + '"], [2, 3]]'
    invalid = raw.decode(errors="replace").count("\ufffd")  # each invalid sequence, as Python counts them
    assert p.meta.notes == [f"{invalid} invalid UTF-8 sequences in names or args: read as \ufffd"]


def test_integers_beyond_int64_are_a_note_not_a_crash(tmp_path):
    """An id beyond int64 (the issue's: an OverflowError from np.fromiter)."""
    events = [op(args={"External id": 2**64 + 5}), op("aten::mul", ts=BASE + 10, args={"External id": 7}),
              op("aten::sub", ts=BASE + 20, pid=2**70, tid=-(2**63) - 1)]
    p = loaded(write(tmp_path, events))
    ev = p.events
    assert ev["name"].astype(str).tolist() == ["aten::add", "aten::mul", "aten::sub"]
    assert ev["external_id"].tolist() == [0, 7, 1]
    assert ev["pid"].iloc[2] not in (1, 2**63 - 1) and ev["thread"].iloc[2] != 1  # a process and thread apart
    assert p.meta.notes == ["1 event with `args.External id` beyond int64: read as 0",
                            "2 `pid` or `tid` values beyond int64: numbered apart"]


def test_args_of_another_type_leave_out_the_event_not_the_file(tmp_path):
    events = [op(), op("aten::mul", ts=BASE + 10, args=5), op("aten::sub", ts=BASE + 20, args=["x"])]
    p = loaded(write(tmp_path, events))
    assert p.events["name"].astype(str).tolist() == ["aten::add"]
    assert p.meta.notes == ["2 events with an unreadable `args`: left out"]


def test_a_bad_bare_list_is_a_trace_error_not_a_buffer_error(tmp_path):
    """A bare list of events (read from a memory map) whose only event cannot be read: the error
    said, not a BufferError from closing the map while decoded values still pointed into it."""
    path = tmp_path / "list.json"
    path.write_text(json.dumps([{"cat": 0, "args": {"Collective name": 0}}]))
    p = loaded(path)
    assert len(p.events) == 0 and p.meta.notes == ["1 event with an unreadable `cat`: left out"]


# -- times that cannot be right: left out and said -----------------------------------------------


def test_ts_beyond_int64_is_left_out_with_a_note_and_no_warning(tmp_path):
    """The issue's: the event drawn at 0, the span moved, a numpy RuntimeWarning."""
    events = [op(ts=BASE + 3), op("aten::mul", ts=BASE + 10), op("stray", ts=2**70), op("nan", ts="nan")]
    p = loaded(write(tmp_path, events))
    ev = p.events
    assert ev["name"].astype(str).tolist() == ["aten::add", "aten::mul"]
    assert ev["start_us"].tolist() == [0.0, 7.0]
    assert p.meta.notes == [
        "1 event with an unreadable `ts`: left out",
        "1 event with a `ts` nbprof cannot place (e.g. 1.18059e+21; beyond 146 years of µs, or not a number: "
        "nanoseconds where chrome traces have µs?): left out",
    ]


def test_huge_or_negative_times_never_show_a_negative_time(tmp_path):
    """The issue's: durations of -9.2e15 µs, "self CPU -9223372041.854 s"."""
    events = [op("outer", dur=100), op("inner", ts=BASE + 10, dur=20), op("huge ts", ts=1e16, dur=1),
              op("huge dur", ts=BASE + 20, dur=1e16), op("negative", ts=BASE + 30, dur=-5),
              op("two days", ts=BASE + 40, dur=2 * DAY_US)]
    p = loaded(write(tmp_path, events))
    assert p.events["name"].astype(str).tolist() == ["outer", "inner"]
    ka = p.key_averages().set_index("name")
    assert ka.loc["outer", "self_cpu_us"] == pytest.approx(80.0) and ka.loc["inner", "cpu_total_us"] == 20.0
    text = p.report().text()
    assert "-9" not in text and "-0." not in text
    assert p.meta.notes[0].startswith("1 event with a `ts` nbprof cannot place (e.g. 1e+16")
    assert p.meta.notes[1:] == ["1 event with a negative `dur` (e.g. -5): left out",
                                "2 events lasting longer than a day (`dur` up to 1e+16 µs: nanoseconds where chrome "
                                "traces have µs?): left out"]


def test_partially_overlapping_children_never_give_a_negative_self_time(tmp_path):
    # torch's stack leaves [1, 12] and [6, 18] as siblings under [0, 20]: torch's self CPU of the
    # parent is 20 - 11 - 12 = -3 µs. The children cover [1, 18]: 17 µs; the parent's own time is 3 µs.
    # A second parent whose children nest properly keeps the plain sum (100 - 10 - 20 = 70).
    events = [op("parent", ts=BASE, dur=20), op("first", ts=BASE + 1, dur=11), op("second", ts=BASE + 6, dur=12),
              op("proper", ts=BASE + 50, dur=100), op("a", ts=BASE + 60, dur=10), op("b", ts=BASE + 80, dur=20)]
    p = loaded(write(tmp_path, events))
    self_us = dict(zip(p.events["name"].astype(str), p.events["self_cpu_us"]))
    assert self_us == {"parent": 3.0, "first": 11.0, "second": 12.0, "proper": 70.0, "a": 10.0, "b": 20.0}
    ka = p.key_averages().set_index("name")
    assert (ka["self_cpu_us"] >= 0).all() and ka.loc["parent", "cpu_total_us"] == 20.0
    assert "-3" not in p.report().text()


def test_nanoseconds_where_microseconds_belong_are_said(tmp_path):
    # time.time_ns(): beyond what µs can be
    epoch_ns = [op(f"op{i}", ts=1.7e18 + i * 10_000, dur=5_000) for i in range(5)]
    p = loaded(write(tmp_path, epoch_ns, "epoch.json"))
    assert len(p.events) == 0
    assert p.meta.notes == ["5 events with a `ts` nbprof cannot place (e.g. 1.7e+18; beyond 146 years of µs, or not "
                            "a number: nanoseconds where chrome traces have µs?): left out"]
    # time.perf_counter_ns() over a two-minute run: kept, and doubted (in µs it is 1.7 days)
    perf_ns = [op(f"step{i}", ts=5e13 + i * 30e9, dur=29e9) for i in range(5)]
    p = loaded(write(tmp_path, perf_ns, "perf.json"))
    assert len(p.events) == 5 and p.events["dur_us"].max() == 29e9
    assert p.meta.notes == ["the events span 1.7 days, more than a profile runs: are `ts` and `dur` nanoseconds? "
                            "Chrome traces are in µs (shown as written)"]


def test_events_without_ts_or_name_are_left_out_not_placed_at_zero(tmp_path):
    """The issue's: kept at 0, stretching the span; blank rows."""
    doc = raw_doc("two_streams")
    expected = rows_of(doc)
    first = min(e["ts"] for e in expected)
    origin = min([first] + [e["ts"] for e in doc["traceEvents"] if e.get("cat") == "Trace"])  # the profiler's span
    span = max(e["ts"] + e.get("dur", 0) for e in expected) - origin
    no_ts = {k: v for k, v in op("no ts").items() if k != "ts"}
    no_name = {k: v for k, v in op(ts=first + 1).items() if k != "name"}
    doc["traceEvents"] += [no_ts, no_name, op("", ts=first + 2)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    p = loaded(path)
    ev = p.events
    assert len(ev) == len(expected) and "" not in set(ev["name"].astype(str))
    assert float((ev["start_us"] + ev["dur_us"]).max()) == pytest.approx(span, abs=1e-3)
    assert p.meta.notes == ["1 event without a `ts`: left out", "2 events without a `name`: left out"]


def test_exact_duplicates_are_counted_once(tmp_path):
    """The issue's: a trace joined to itself counted twice (1.6 ms of self CPU in a 0.99 ms span)."""
    doc = raw_doc("two_streams")
    rows = rows_of(doc)
    doc["traceEvents"] = doc["traceEvents"] + doc["traceEvents"]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(doc))
    p = loaded(path)
    count = collections.Counter(e["name"] for e in rows if e["cat"] == "cpu_op")
    ka = p.key_averages().set_index("name")
    assert {n: int(ka.loc[n, "count"]) for n in count} == dict(count)
    cpu = sum(e["dur"] for e in rows if e["cat"] == "cpu_op" and e["name"] == "aten::mm")
    assert ka.loc["aten::mm", "cpu_total_us"] == pytest.approx(cpu, abs=1e-3)
    assert p.meta.notes == [f"{len(rows)} exact duplicates (an event repeated, every field nbprof reads equal): "
                            "counted once"]
    # events that differ in one field read are not duplicates
    doc["traceEvents"] = doc["traceEvents"][: len(doc["traceEvents"]) // 2] + [
        {**e, "args": {**e.get("args", {}), "External id": 10**6 + i}} for i, e in enumerate(rows)]
    path.write_text(json.dumps(doc))
    assert len(loaded(path).events) == 2 * len(rows)


def test_a_few_events_far_from_the_others_are_left_out(tmp_path):
    events = [op(f"op{i}", ts=BASE + 10 * i) for i in range(6)] + [op("zero", ts=0.0), op("later", ts=BASE + 3 * DAY_US)]
    p = loaded(write(tmp_path, events))
    assert p.events["name"].astype(str).tolist() == [f"op{i}" for i in range(6)]
    assert p.events["start_us"].max() == 50.0
    assert p.meta.notes == [f"2 events more than a day away from the other 6 (e.g. at `ts` 0 µs, the others from "
                            f"{BASE:g}): left out"]


def test_the_profilers_span_is_used_only_where_a_profile_can_have_it(tmp_path):
    span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler"}
    events = [op(), op("aten::mul", ts=BASE + 10)]
    p = loaded(write(tmp_path, events + [{**span, "ts": BASE - 5, "dur": 30.0}], "good.json"))
    assert p.meta.span_us == 30.0 and p.events["start_us"].tolist() == [5.0, 15.0] and p.meta.notes == []
    p = loaded(write(tmp_path, events + [{**span, "ts": 0.0, "dur": 30.0}], "stray.json"))
    assert p.meta.span_us is None and p.events["start_us"].tolist() == [0.0, 10.0]
    assert p.meta.notes == ["the profiler's span (its \"Trace\" event: `ts` 0, `dur` 30) is not one a profile can "
                            "have: not used"]


def test_header_values_of_the_wrong_type_are_notes(tmp_path):
    events = [op()]
    p = loaded(write(tmp_path, events, distributedInfo={"rank": [1], "world_size": 2},
                     deviceProperties=[{"id": "x", "name": 5, "numSms": 132}, {"id": 1, "numSms": "lots"}],
                     baseTimeNanoseconds=2**70))
    assert p.meta.rank is None and p.meta.base_time_ns == 0
    assert p.meta.device_properties == [{"numSms": 132}, {"id": 1}]
    assert p.meta.notes == ['distributedInfo {"rank":[1],"world_size":2} does not say a rank: not used',
                            "3 deviceProperties values of the wrong type (a GPU's id, name or sizes): left out"]
    p.findings  # noqa: B018 (the analyses that read deviceProperties run)


def test_every_recorded_trace_reads_without_a_note():
    """No real trace is flagged: not ns-looking, no duplicates, nothing left out (and no warning)."""
    files = sorted(DATA.glob("*.trace.json.gz")) + sorted((DATA / "ddp_gloo").glob("*.json.gz")) + sorted(
        p for p in WILD.iterdir() if p.name.endswith((".json", ".json.gz")))
    assert len(files) == 18  # hta_cases is made by hand (HTA's quirks), the others recorded
    for path in files:
        p = loaded(path)
        raw = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
        doc = raw if isinstance(raw, dict) else {"traceEvents": raw}
        assert p.meta.notes == [], path.name
        assert len(p.events) == len(rows_of(doc)), path.name
        assert (p.events["start_us"] >= 0).all() and (p.events["dur_us"] >= 0).all()
        assert np.isfinite(p.events["start_us"]).all()


# ------------------------------------------------- torch's writer: names it does not escape


TORCH_WRITER_LINES = """{
  "schemaVersion": 1,
  "traceEvents": [
  {
    "ph": "X",
    "cat": "user_annotation",
    "name": "say "hi" \\ back\\slash",
    "pid": 7,
    "tid": 7,
    "ts": 1000.000,
    "dur": 10.000
    ,
    "args": {
      "External id": 1
    }
  },
  {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::add",
    "pid": 7,
    "tid": 7,
    "ts": 1002.000,
    "dur": 3.000
    ,
    "args": {
      "External id": 2
    }
  }
  ]
}
"""


@pytest.mark.parametrize("compressed", [False, True])
def test_names_torch_wrote_without_escaping_read_as_written(tmp_path, compressed):
    # torch 2.4-2.14 write record_function('say "hi"') as `"name": "say "hi"",` (invalid JSON):
    # the line is repaired, the name reads exactly as the user wrote it
    path = tmp_path / ("t.json.gz" if compressed else "t.json")
    data = TORCH_WRITER_LINES.encode()
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(json.JSONDecodeError):
        json.loads(data)
    p = loaded(path)
    names = p.events["name"].astype(str).tolist()
    assert names == ['say "hi" \\ back\\slash', "aten::add"]
    assert p.events.loc[p.events["name"] == "aten::add", "dur_us"].tolist() == [3.0]


@pytest.mark.parametrize("props,kept,wrong", [
    (["GPU 0", {"id": 1, "numSms": 132}], [{"id": 1, "numSms": 132}], 1),  # one entry no object: the others kept
    ([{"id": 0}, None, 7, {"id": 1}], [{"id": 0}, {"id": 1}], 2),
    ("H100", [], 1),  # no list at all: said, not silently absent
    ({"id": 0}, [], 1),
])
def test_device_properties_that_are_no_objects_are_counted_and_the_rest_kept(tmp_path, props, kept, wrong):
    p = loaded(write(tmp_path, [op()], deviceProperties=props))
    assert p.meta.device_properties == kept
    assert p.meta.notes == [f"{wrong} deviceProperties value{'s' if wrong != 1 else ''} of the wrong type "
                            "(a GPU's id, name or sizes): left out"]
    assert p.key_averages("op")["count"].sum() == 1  # the events read as without the header
