"""Read a chrome trace (as written by torch.profiler) into the events table.

This is the one reader of torch profiles: a live profile is written by torch's own C++ trace
writer (``kineto_results.save``) into memory and read back here, so a live profile and a file
loaded from disk become the same table by construction.

Why JSON and not the pybind event objects: ``kineto_results.events()`` alone costs ~4.6 µs per
event and every attribute read another 0.3-3.8 µs (measured on this machine with torch 2.13),
which is more than torch's whole ``__exit__``. torch's C++ writer costs ~2.5-4 µs per event and
``msgspec`` decodes the result into GC-free structs at ~1 µs per event, reading only the fields
we use.

How a file is read (numbers from ``benchmarks/bench_profiling.py`` on a 2-core EPYC VM; there,
every pass over a million decoded events that are no longer in the CPU cache costs 50-100 ns per
event, mostly cache misses):

- Slices. The events array is cut where one event ends and the next begins (torch's writer prints
  one event per block, ``  {`` ... ``  },``; compact files, ``}, {"ph": ...``) into slices of
  ~256 KB (~700-1,500 events), read from the file as they are needed. Each slice is decoded, its
  columns are read while its objects are still in the CPU cache, and its objects are freed before
  the next slice is decoded (which reuses their memory): ~2 MB of buffers whatever the file size,
  and the file is never all in memory. A cut can only land between two events (a JSON string
  holds no raw newline), and a slice that does not decode sends the file down the plain path
  (decode it whole), which reads any layout and reports what is wrong with a bad file.
- Columns. One list comprehension and one numpy conversion per field; strings (names,
  categories, shapes) become integer codes through a dict kept across slices (one lookup per
  event, no per-event Python objects kept); each arg is read only for the rows of the kinds
  that have it (``events.COLUMNS`` declares which: memory fields for memory events, External id
  and shapes not for them, launch dimensions for kernels, ...). ~0.8 µs per event, next to ~1 µs
  for msgspec's decode.
- Args and categories: what is read, and as what, is ``collect/trace_schema.py`` (generated
  from the events schema, ``events.COLUMNS``); a file that fails the typed decoders is read
  again loosely and checked field by field there (ROCm's ``"stream": "0x0"``).

Times: the writer prints ``ts``/``dur`` in µs with exactly three decimals (ns resolution). A float64
near 4.5e12 µs is only exact to ~1 ns, so naive ``ts * 1000`` can be off by a nanosecond; we split
``ts`` into its integer and fractional parts, which recovers the exact integer nanoseconds.
torch 1.8-1.9 and Meta's tooling print whole µs (integers): read the same way.

What a file can make this reader do is bounded (its size, its decompression, the rows that
cannot be right: ``collect/trace_limits.py``); the pass itself is here, whole.
"""

from __future__ import annotations

import mmap
import os
import sys
import traceback
from collections import Counter, defaultdict
from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceError
from ..events import (
    ARG_COLUMNS,
    COPY_CODES,
    DEVICE_CODES,
    DEVICE_MEMORY_TYPES,
    DEVICE_TYPE_CODE,
    DEVICE_WORK_CODES,
    IGNORED_NAMES,
    KINDS,
    KIND_CODE,
    MEMORY_CODES,
    TraceData,
    device_labels,
    make_events_frame,
)
from ..format import plural
from ..meta import TraceMeta
from .cprofile import is_pstats_head
from .trace_limits import (NO_LIMIT, Gunzip, TraceLimit, distinct_rows, max_trace_bytes, plausible_rows,
                           profiled_span, rows_together, size_text)
from .trace_cycles import read_cycles
from .trace_ranks import read_ranks
from .trace_schema import (ACCELERATOR_OF, ANNOUNCING, CAT_CODE_AT_START, DECODER, DROP, FIELDS, GROUPS, INT64_MAX,
                           INT64_MIN, KIND_BY_NAME, LIST_DECODER, LOOSE_DECODER, LOOSE_LIST_DECODER, MEMORY_NAMES,
                           NOT_AN_EVENT, SPAN, STREAM_TID, TORCH_RANGE_PREFIXES, UNKNOWN, ArgField, Trace, arg_text,
                           category_code, checked_events, checked_header, decoded, device_properties, dims_text,
                           header_int, shape_text)

__all__ = ["read_trace_file", "parse_trace_bytes", "empty_trace", "NO_EVENT_READ", "NO_LIMIT"]


# Where one event ends and the next begins: torch's writer (one event per block, "  {" ... "  },"
# at two spaces), compact JSON from json.dumps (kineto's writer in some builds; events start with
# "ph") and from msgspec (nbprof's exporter). A slice is cut between "}," and the next "{".
_EVENT_BOUNDARIES = (b"},\n  {", b'}, {"ph": ', b'},{"ph":')
# the end of the note of a file none of whose entries is an event (a live run's own file, where a
# cell ran no operator, leaves it out: there is no file of the user's to speak of)
NO_EVENT_READ = "an event nbprof reads"

_SLICE_BYTES = 1 << 18  # ~700-1,500 events: their objects stay in the CPU cache; ~2 MiB of buffers in all
_MAX_EVENT_BYTES = 64 << 20  # one event longer than this (no boundary in sight): read whole, not in slices


def read_trace_file(path: str | os.PathLike, *, max_bytes: int | str | TraceLimit | None = None) -> TraceData:
    """Read one ``.json`` or ``.json.gz`` chrome trace file; at most ``max_bytes`` of JSON (see
    :func:`max_trace_bytes`). Whatever is wrong with the file: a one-line TraceError naming it."""
    path = os.fspath(path)
    limit = max_bytes if isinstance(max_bytes, TraceLimit) else max_trace_bytes(max_bytes)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder; pass a trace file (.json or .json.gz)")
    try:
        return _read_file(path, limit)
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply to read (deeper than ~{sys.getrecursionlimit()} levels; "
                         "torch's traces nest 6)") from None
    except MemoryError:
        raise TraceError(f"{path}: not enough memory to read it") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None


def _read_file(path: str, limit: TraceLimit) -> TraceData:
    size = os.path.getsize(path)
    if size == 0:
        raise TraceError(f"{path}: the file is empty, not a chrome trace")
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if is_pstats_head(head):  # what people try first with a python -m cProfile -o file
            raise TraceError(f"{path}: a cProfile .prof file, not a chrome trace: use nbprof.load_prof")
        if head == b"\x1f\x8b":
            # decompressed as it is read, in slices; only a file they cannot cut is decompressed whole
            sliced = _read_sliced(Gunzip(f, path, limit).read, path)
            if sliced is not None:
                return sliced
            f.seek(0)
            return _parse_whole(Gunzip(f, path, limit).read_all(), path)
        if size > limit.bytes:
            raise TraceError(f"{path}: {size_text(size)} of JSON, more than the {size_text(limit.bytes)} nbprof "
                             f"reads from one file; {limit.how_to_raise()}")
        if not head.lstrip().startswith(b"["):
            # read in slices straight from the file: the file is never all in our memory
            sliced = _read_sliced(f.read, path)
            if sliced is not None:
                return sliced
            f.seek(0)
        # mmap avoids a second copy of a large file in memory.
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                return _parse_whole(buf, path)
            except BaseException as e:
                # the frames of its traceback hold decoded values that are views of the map
                # (msgspec.Raw): let them go, or closing the map raises BufferError in its place
                traceback.clear_frames(e.__traceback__)
                raise


def parse_trace_bytes(buf: Any, source: str = "<trace>") -> TraceData:
    """Parse chrome-trace JSON (bytes, bytearray or mmap) into a :class:`TraceData`."""
    try:
        if not bytes(buf[:256]).lstrip().startswith(b"["):
            with memoryview(buf) as view:
                sliced = _read_sliced(_reader_of(view), source)
            if sliced is not None:
                return sliced
        return _parse_whole(buf, source)
    except RecursionError:
        raise TraceError(f"{source}: JSON nested too deeply to read") from None


def _reader_of(view: memoryview) -> Callable[[int], bytes]:
    """``read(n)`` over a buffer in memory, as a file's ``read``."""
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        out = bytes(view[pos : pos + n])
        pos += len(out)
        return out

    return read


def _parse_whole(buf: Any, source: str) -> TraceData:
    """The plain path: decode the whole document at once (any layout; reports what is wrong)."""
    if bytes(buf[:256]).lstrip().startswith(b"["):
        # a bare list of events is a chrome trace too (the "JSON Array Format")
        loose_events: list | None = None
        try:
            try:
                events, bad_utf8 = decoded(LIST_DECODER, buf)
            except msgspec.ValidationError:
                loose_events, bad_utf8 = decoded(LOOSE_LIST_DECODER, buf)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise _decode_error(source, e) from None
        reader = _Reader(Trace(traceEvents=[]), source)
        reader.bad_utf8 += bad_utf8
        if loose_events is not None:
            events = reader.checked(loose_events)
            del loose_events
        reader.add(events)
        del events  # before finish (which may raise): they may be views of the caller's buffer
        return reader.finish()
    try:
        try:
            trace, bad_utf8 = decoded(DECODER, buf)
            reader = _Reader(trace, source)
        except msgspec.ValidationError:
            loose, bad_utf8 = decoded(LOOSE_DECODER, buf)
            loose_events, loose.traceEvents = loose.traceEvents, []
            trace = checked_header(loose)
            reader = _Reader(trace, source)
            trace.traceEvents = reader.checked(loose_events)
            del loose_events
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise _decode_error(source, e) from None
    reader.bad_utf8 += bad_utf8
    events, trace.traceEvents = trace.traceEvents, []
    reader.add(events)
    del events
    return reader.finish()


def _read_sliced(read: Callable[[int], bytes], source: str) -> TraceData | None:
    """Read a trace slice by slice as it streams in (see the module docstring).

    ``read(n)`` gives the next bytes of the file (b"" at its end). Returns None when the file is not
    in a layout we can cut or a slice does not decode; the caller then reads it whole (and reports
    what is wrong with it, if anything is)."""
    data = read(_SLICE_BYTES)
    if data.lstrip()[:1] == b"[":  # a bare list of events: read whole
        return None
    seen = 0  # data[:seen] was looked through already
    while len(data) < (4 << 20):  # a long header, long first events: read on a little
        key = data.find(b'"traceEvents"')
        open_at = data.find(b"[", key, key + 64) if key >= 0 else -1
        if open_at >= 0 and any(data.find(b, max(open_at, seen - len(b))) >= 0 for b in _EVENT_BOUNDARIES):
            break
        seen = len(data)
        more = read(_SLICE_BYTES)
        if not more:
            break
        data += more
    key = data.find(b'"traceEvents"', 0, 1 << 20)
    if key < 0:
        return None
    colon = data.find(b":", key, key + 64)
    open_at = data.find(b"[", key, key + 64)
    if colon < 0 or open_at < 0 or data[colon + 1 : open_at].strip():
        return None
    for boundary in _EVENT_BOUNDARIES:
        if data.find(boundary, open_at) >= 0:
            break
    else:
        return None
    prefix = data[: open_at + 1]  # the header, up to the events' "["
    decode = LIST_DECODER
    try:
        head, bad_utf8 = decoded(DECODER, prefix + b"]}")
        reader = _Reader(head, source)
        reader.bad_utf8 += bad_utf8
        pending = bytearray(data[open_at + 1 :])  # bytes after the last cut: appended to, cut from the front
        del data
        searched = 0  # pending[:searched] holds no boundary
        while True:
            more = read(_SLICE_BYTES)
            if more:
                pending += more
            # complete events end at the last boundary; the rest waits for more bytes
            cut = pending.rfind(boundary, searched)
            if cut > 0:
                with memoryview(pending) as view:
                    events, bad_utf8 = decoded(decode, b"".join((b"[", view[: cut + 1], b"]")))
                reader.bad_utf8 += bad_utf8
                reader.add(events)
                del events, pending[: cut + 2]
            elif len(pending) > _MAX_EVENT_BYTES:
                return None
            searched = max(len(pending) - len(boundary) + 1, 0)
            if not more:
                break
        # the last event and the footer: with the header, one small document
        full, bad_utf8 = decoded(DECODER, prefix + pending)
        reader.bad_utf8 += bad_utf8
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if any(bool(getattr(full, flag)) != bool(getattr(head, flag)) for flag in ANNOUNCING):
        return None  # announced after the events (we read them without knowing): read it whole
    reader.add(full.traceEvents)
    full.traceEvents = []
    reader.trace = full
    return reader.finish()


def _decode_error(source: str, error: Exception) -> TraceError:
    msg = str(error)
    if "truncated" in msg.lower():
        return TraceError(f"{source}: the JSON is truncated (was the file fully written?)")
    return TraceError(f"{source}: not a chrome trace ({msg})")


def _exact_ns(us: np.ndarray) -> np.ndarray:
    """µs floats with three decimals -> exact integer nanoseconds (see the module docstring)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


class _Codes:
    """Strings -> small integer codes in order of first appearance, kept across slices."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def encode(self, values: list) -> np.ndarray:
        ids = self.ids
        try:
            return np.fromiter(map(ids.__getitem__, values), dtype=np.int32, count=len(values))
        except KeyError:
            for v in dict.fromkeys(values):
                if v not in ids:
                    ids[v] = len(ids)
            return np.fromiter(map(ids.__getitem__, values), dtype=np.int32, count=len(values))

    def values(self) -> list:
        return list(self.ids)


_LEFT_OUT_REASONS = ("zero_ts", "far", "negative_dur")  # TraceMeta.left_out_work's keys


class _Reader:
    """Turns decoded events, one slice at a time, into the columns of the events table."""

    def __init__(self, trace: Trace, source: str) -> None:
        self.trace = trace
        self.source = source
        self.seen = 0  # events decoded, all kinds
        self.n = 0  # rows kept
        self.cat_code = dict(CAT_CODE_AT_START)
        self.names = _Codes()
        self.ignored = np.zeros(0, dtype=bool)  # per name code: a utility op torch leaves out
        self.raw_codes = {f.attr: _Codes() for f in FIELDS if f.raw}  # raw JSON (shapes, grid, ...)
        self.string_ids: dict[str, int] = {}  # pid/tid strings of hand-made traces
        # what the header says is in the file (shapes are also looked for, see add)
        self.announced = {flag: bool(getattr(trace, flag)) for flag in ANNOUNCING}
        self.thread_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.span: list[tuple[float, float]] = []
        self.legacy = False  # torch 1.8-1.9's categories seen: its "external id" is read too
        self.unknown: Counter[str] = Counter()  # events per category nbprof does not know
        self.begin_end = 0  # "B"/"E" events: not read (torch writes complete events)
        self.unreadable: Counter[str] = Counter()  # events left out, per field that could not be read
        self.bad_utf8 = 0  # invalid UTF-8 sequences read as U+FFFD
        self.out_of_range: Counter[tuple[str, str, Any]] = Counter()  # (arg, dtype, default) -> events
        self.big_ids = 0  # pid/tid values beyond int64
        self.dropped: list[str] = []  # notes on the rows finish() leaves out (or keeps, doubtful)
        self.left_out_work: Counter[str] = Counter()  # device work left out for its time, by why (TraceMeta's)
        self.kind_by_name: dict[str, int] = {}  # kernels of these names are of another kind (MTIA)
        self.name_kind = np.zeros(0, dtype=np.int8)  # per name code: that kind, or -1
        self.accelerator = DEVICE_TYPE_CODE["cuda"]  # the DeviceType of device events (see ACCELERATOR_OF)
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("kind", "name", "ts", "dur", "pid", "tid")}
        # per field, (rows, values) of each slice it was read in
        self.sparse: dict[str, list[tuple[np.ndarray, Any]]] = defaultdict(list)

    def checked(self, events: list) -> list:
        """Loosely decoded events as typed ones (``trace_schema.checked_events``)."""
        return checked_events(events, self._code_of, self.unreadable)

    def _code_of(self, cat: str) -> int:
        code = self.cat_code.get(cat)
        if code is None:
            code = self.cat_code[cat] = self._new_category(cat)
        return code

    def _new_category(self, cat: str) -> int:
        """The kind code of a category met for the first time (see ``category_code``)."""
        code, legacy = category_code(cat)
        self.legacy |= legacy
        if code == UNKNOWN:
            self.unknown[cat] += 0  # listed; the events are counted as they come
        self.kind_by_name.update({n: KIND_CODE[k] for n, k in KIND_BY_NAME.get(cat, {}).items()})
        accelerator = ACCELERATOR_OF.get(cat.split("_")[0])
        if accelerator is not None:
            self.accelerator = accelerator
        return code

    # -- one slice -----------------------------------------------------------------------------

    def add(self, events: list) -> None:
        m = len(events)
        if m == 0:
            return
        self.seen += m
        cat_code = self.cat_code
        # the kind of each event from its category; phases other than complete ("X") and
        # instant ("i") events are not events of the table (metadata, flows, begin/end pairs)
        cats = [e.cat if (e.ph == "X" or e.ph == "i") else NOT_AN_EVENT for e in events]
        try:
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        except KeyError:
            for c in set(cats):
                if c not in cat_code:
                    cat_code[c] = self._new_category(c)
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        if self.unknown and (kind == UNKNOWN).any():
            unknown = kind == UNKNOWN
            for i in np.flatnonzero(unknown).tolist():
                self.unknown[cats[i]] += 1
            kind[unknown] = KIND_CODE["other"]
        del cats
        not_events = np.flatnonzero(kind < 0)
        # metadata, flows (most of these rows: Python ints, one test each), the profiler's span
        for i, code in zip(not_events.tolist(), kind[not_events].tolist()):
            e = events[i]
            if code == DROP:
                ph = e.ph
                if ph == "M":
                    self._metadata(e)
                elif ph == "B" or ph == "E":
                    self.begin_end += 1
            elif code == SPAN:
                self.span.append((e.ts, e.dur))
            elif e.ph == "i" and e.name in MEMORY_NAMES:  # no category: torch 1.8-1.9's memory events
                kind[i] = KIND_CODE["memory"]
            elif e.ph == "X":  # a complete event without a category: nbprof cannot tell what it is
                kind[i] = KIND_CODE["other"]
                self.unknown["(none)"] += 1
        keep = kind >= 0

        names = self.names.encode([e.name for e in events])
        if len(self.ignored) < len(self.names.ids):
            self.ignored = np.array([n in IGNORED_NAMES for n in self.names.ids], dtype=bool)
        keep &= ~self.ignored[names]
        if not keep.all():
            rows = np.flatnonzero(keep)
            events = [events[i] for i in rows.tolist()]
            kind = kind[rows]
            names = names[rows]
            m = len(events)
            if m == 0:
                return
        if self.kind_by_name:
            if len(self.name_kind) < len(self.names.ids):
                self.name_kind = np.array([self.kind_by_name.get(n, -1) for n in self.names.ids], dtype=np.int8)
            renamed = (kind == KIND_CODE["kernel"]) & (self.name_kind[names] >= 0)
            kind[renamed] = self.name_kind[names][renamed]
        counts = np.bincount(kind, minlength=len(KINDS))
        cols = self.cols
        cols["kind"].append(kind)
        cols["name"].append(names)
        # one comprehension per field while the slice is in the CPU cache; fromiter with a count
        # is the cheapest conversion of a list of Python numbers
        cols["ts"].append(np.fromiter([e.ts for e in events], dtype=np.float64, count=m))
        cols["dur"].append(np.fromiter([e.dur for e in events], dtype=np.float64, count=m))
        cols["pid"].append(self._ids([e.pid for e in events]))
        cols["tid"].append(self._ids([e.tid for e in events]))
        args = [e.args for e in events]
        base = self.n
        self.n += m
        if not self.announced["record_shapes"] and base < 5000:
            # shapes not announced by the file: look for them in its first 5,000 events
            if any(a.input_dims for a in args[: 5000 - base]):
                self.announced["record_shapes"] = True

        # the args, each read for the rows of the kinds that have it only (memory events have
        # no External id and no shapes, only kernels have launch dimensions, ...)
        sparse = self.sparse
        for table, fields in GROUPS:
            count = int(counts[table].sum())
            if count == 0:
                continue
            group_rows: np.ndarray | None = None  # selected once, for the first field read
            sub: list = args
            for f, read in fields:
                if (f.announced_by and not self.announced[f.announced_by]) or (f.legacy and not self.legacy):
                    continue
                if group_rows is None:
                    if count == m:
                        group_rows = np.arange(base, base + m)
                    else:
                        at = np.flatnonzero(table[kind])
                        group_rows, sub = at + base, [args[i] for i in at.tolist()]
                values = read(sub)
                if f.raw:
                    out = self.raw_codes[f.attr].encode(values)
                else:
                    try:
                        out = np.fromiter(values, dtype=f.dtype, count=count)
                    except OverflowError:  # an integer beyond the column's type (int64, int32)
                        out = self._in_range(values, f)
                sparse[f.attr].append((group_rows, out))

    def _in_range(self, values: list, f: ArgField) -> np.ndarray:
        """A field's values where some integer is beyond its column's type: read as the field's
        default (counted, for a note). Only such slices pay for the per-value check."""
        info = np.iinfo(f.dtype)
        bad = [not (info.min <= v <= info.max) for v in values]
        self.out_of_range[(f"args.{f.arg}", info.dtype.name, f.default)] += sum(bad)
        return np.fromiter((f.default if b else v for v, b in zip(values, bad)), dtype=f.dtype, count=len(values))

    def _ids(self, values: list) -> np.ndarray:
        """pid/tid values are ints, or strings in hand-made traces: strings (and integers beyond
        int64, counted) get stable negative ids."""
        first = values[0]
        if type(first) is int and values.count(first) == len(values) and INT64_MIN <= first <= INT64_MAX:
            return np.full(len(values), first, dtype=np.int64)  # one thread: no conversion
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            out = np.empty(len(values), dtype=np.int64)
            names = self.string_ids
            for i, v in enumerate(values):
                if isinstance(v, str):  # "123", "-7", " 7": a number, as numpy read it above (Python's int())
                    try:
                        v = int(v)
                    except ValueError:
                        pass
                if isinstance(v, int) and INT64_MIN <= v <= INT64_MAX:
                    out[i] = v
                    continue
                if isinstance(v, int):
                    self.big_ids += 1
                    v = str(v)
                out[i] = names.setdefault(v, -(len(names) + 2))
            return out

    def _streams_named(self, tid: np.ndarray) -> np.ndarray:
        """The stream a thread named "stream 7" stands for (hand-made and torch 1.8-1.9 traces write
        device events' tid so), else the tid as it is."""
        named = {i: int(m.group(1)) for v, i in self.string_ids.items() if (m := STREAM_TID.match(v))}
        if not named:
            return tid
        ids, numbers = np.array(list(named)), np.array(list(named.values()))
        at = np.minimum(np.searchsorted(np.sort(ids), tid), len(ids) - 1)
        order = np.argsort(ids)
        hit = ids[order][at] == tid
        return np.where(hit, numbers[order][at], tid)

    def _metadata(self, e: Any) -> None:
        if e.name == "thread_name" and isinstance(e.tid, int):
            self.thread_names[int(_thread_id(np.int64(e.tid)))] = e.args.name.strip()
        elif e.name == "process_labels" and isinstance(e.pid, int):
            self.process_labels[e.pid] = e.args.labels

    def _column(self, key: str, dtype: Any) -> np.ndarray:
        """A column from its slices (the slices are let go: no second copy stays around)."""
        parts, self.cols[key] = self.cols[key], []
        if not parts:
            return np.zeros(0, dtype=dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _field(self, f: ArgField) -> np.ndarray:
        """A field for every row: what was read, its default elsewhere (a raw field: the code of
        the empty text, or -1 if it never had one)."""
        if f.raw:
            codes = self.raw_codes[f.attr]
            default = codes.ids.get(b"", -1)
        else:
            default = f.default
        parts = self.sparse.pop(f.attr, [])
        values = [v for _, v in parts]
        if sum(len(v) for v in values) == self.n:  # read for every row (rows come in order, once each)
            return np.concatenate(values) if values else np.zeros(0, dtype=f.dtype)
        out = np.full(self.n, default, dtype=f.dtype)
        if parts:
            out[np.concatenate([r for r, _ in parts])] = np.concatenate(values)
        return out

    # -- the table -----------------------------------------------------------------------------

    def finish(self) -> TraceData:
        trace = self.trace
        n = self.n
        if n == 0 and not self.span and self.seen == 0 and not self.unreadable:
            raise TraceError(f"{self.source}: the trace has no events (traceEvents is empty)")
        kind = self._column("kind", np.int8)
        name_codes = self._column("name", np.int32)
        ts = self._column("ts", np.float64)
        dur = self._column("dur", np.float64)
        pid = self._column("pid", np.int64)
        # a merged trace's nbprofRanks names every event's, before rows are left out
        file_pids = pid if trace.nbprofRanks is not None else None
        tid = self._column("tid", np.int64)
        field = {f.attr: self._field(f) for f in FIELDS if self.legacy or not f.legacy}

        def take(rows: np.ndarray | None) -> None:
            """Keep only ``rows`` (a mask) of every column read so far."""
            nonlocal kind, name_codes, ts, dur, pid, tid, n
            if rows is None:
                return
            kind, name_codes, ts, dur, pid, tid = (a[rows] for a in (kind, name_codes, ts, dur, pid, tid))
            for attr, values in field.items():
                field[attr] = values[rows]
            n = len(kind)

        def checked(rows_and_notes: tuple[np.ndarray | None, list[str]]) -> None:
            rows, notes = rows_and_notes
            self.dropped += notes
            take(rows)

        # what cannot be a time, or an event, is left out and said (collect/trace_limits.py)
        plausible = plausible_rows(ts, dur, name_codes != self.names.ids.get("", -1))
        self._left_out_work(kind, plausible[0], negative_dur=~np.isnan(ts) & (dur < 0.0))
        checked(plausible)
        ts = _exact_ns(ts)  # from here on, ns
        dur = np.rint(dur * 1000.0).astype(np.int64)
        together = rows_together(ts, ts + dur)
        self._left_out_work(kind, together[0], zero_ts=ts == 0, far=ts != 0)
        checked(together)
        checked(distinct_rows([kind, name_codes, ts, dur, pid, tid, *field.values()]))
        start_ns, dur_ns = ts, dur
        del ts, dur
        all_names = self.names.values()

        # names: only those of kept rows, in order of first appearance
        used = np.zeros(len(all_names), dtype=bool)
        used[name_codes] = True
        new_code = np.cumsum(used) - 1
        name_codes = new_code[name_codes].astype(np.int32)
        name_values = [v for v, u in zip(all_names, used.tolist()) if u]
        name_index = {v: i for i, v in enumerate(name_values)}

        if n:  # torch 1.8-1.11 filed record_function ranges as operators ("Operator", then "cpu_op",
            # before "user_annotation"): torch's own ranges, told by name, are ranges (steps, loaders)
            ranges = np.array([v.startswith(TORCH_RANGE_PREFIXES) for v in name_values], dtype=bool)[name_codes]
            kind[ranges & (kind == KIND_CODE["op"])] = KIND_CODE["annotation"]
        if n:
            mem_mask = kind == KIND_CODE["memory"]
            if mem_mask.any():
                oom_code = name_index.get("[OutOfMemory]", -1)
                memory_code = name_index.get("[memory]", -1)
                kind[mem_mask & (name_codes == oom_code)] = KIND_CODE["oom"]
                other = mem_mask & (name_codes != oom_code) & (name_codes != memory_code)
                if other.any():  # instant events that are not memory events: none of its fields
                    kind[other] = KIND_CODE["other"]
                    for f in FIELDS:
                        if "memory" in f.kinds and "other" not in f.kinds:
                            field[f.attr][other] = f.default

        device_arg = field.pop("device")
        stream = field.pop("stream")
        is_device = np.isin(kind, DEVICE_CODES)
        is_memory = np.isin(kind, MEMORY_CODES)
        # bytes: an allocation's signed size, or the size of a copy or fill
        nbytes = field.pop("alloc_bytes")
        copy_bytes = field.pop("copy_bytes")
        dma_bytes = field.pop("dma_bytes")
        copy_bytes = np.where(copy_bytes > 0, copy_bytes, dma_bytes)
        is_copy = np.isin(kind, COPY_CODES)
        nbytes[is_copy] = copy_bytes[is_copy]
        del copy_bytes, dma_bytes, is_copy
        mem_device_type = field.pop("device_type")
        mem_device_id = field.pop("device_id")
        python_mask = kind == KIND_CODE["python"]
        flops = field["flops"]
        has_flops = bool(flops.any())
        dims = field.pop("input_dims")
        input_shapes = self._shapes(dims) if self.announced["record_shapes"] else None
        del dims
        if self.legacy:  # torch 1.8-1.9: "external id" where "External id" is not written
            legacy_id = field.pop("legacy_external_id")
            field["external_id"] = np.where(field["external_id"] == 0, legacy_id, field["external_id"])
            del legacy_id
        columns = {c.name: (self._raw_texts(c.name, field[c.name], dims_text if c.json_list else arg_text)
                            if c.json_list or c.categorical else field[c.name])
                   for c in ARG_COLUMNS}
        del field

        # Devices: device events carry their GPU index; memory events their device type and index.
        any_device = bool(is_device.any())
        device = np.where(is_device, np.where(device_arg >= 0, device_arg, 0), -1) if any_device else device_arg
        del device_arg
        mem_on_device = is_memory & np.isin(mem_device_type, list(DEVICE_MEMORY_TYPES))
        if mem_on_device.any():
            device = np.where(mem_on_device, np.maximum(mem_device_id, 0), device)
        del mem_device_id, mem_on_device
        # the device type of each row: memory events say theirs, every other device event is the
        # accelerator whose runtime the trace holds (CUDA, and HIP, unless another one shows)
        device_type = np.where(is_memory, mem_device_type, self.accelerator)
        del mem_device_type

        # a folder's ranks merged into this file (collect/trace_ranks.py): each event's rank, and its
        # process's id in its rank's own trace
        ranks = None
        if file_pids is not None:
            ranks, problem = read_ranks(trace.nbprofRanks, file_pids, pid)
            if ranks is None:
                self.dropped.append(str(problem))
            else:
                pid = ranks.pid
        del file_pids

        # Overhead events (pid -1, tid 0 in the file) happen in the profiler's own code on the main
        # thread; torch files them there, under the op open at their start, and so do we (each
        # rank's on its own).
        main_tid = _main_thread(kind, pid, tid)
        overhead = kind == KIND_CODE["overhead"]
        if overhead.any() and main_tid is not None:
            if ranks is None:
                pid, tid = _on_thread(overhead, ~overhead, main_tid, pid, tid)
            else:
                for r in np.unique(ranks.rank[overhead]).tolist():
                    mine = ranks.rank == r
                    rank_main = _main_thread(kind[mine], pid[mine], tid[mine])
                    if rank_main is not None:
                        pid, tid = _on_thread(overhead & mine, mine & ~overhead, rank_main, pid, tid)

        if any_device:
            thread = np.where(is_device, -1, _thread_id(tid))
            stream = np.where(is_device, np.where(stream >= 0, stream, self._streams_named(tid)), -1)
        else:  # a CPU profile: threads as they are, no streams (stream is all -1 already)
            thread = _thread_id(tid)
        main_tid = None if main_tid is None else int(_thread_id(np.int64(main_tid)))
        del tid, is_device

        origin_ns = int(start_ns.min()) if n else 0
        span, notes = profiled_span(self.span, start_ns, start_ns + dur_ns)
        self.dropped += notes
        if span:
            span_ns = int(_exact_ns(np.array([span[0]]))[0])
            origin_ns = min(origin_ns, span_ns) if n else span_ns

        start_ns -= origin_ns
        events = make_events_frame(
            name=pd.Categorical.from_codes(name_codes, categories=pd.Index(name_values, dtype=object)),
            kind=kind,
            device=device_labels(device, device_type),
            thread=thread,
            stream=stream,
            start_us=start_ns / 1000.0,
            dur_us=dur_ns / 1000.0,
            input_shapes=input_shapes,
            bytes=nbytes,
            pid=pid,
            **columns,
        )
        if ranks is not None:
            events["rank"] = ranks.rank
        elif trace.nbprofCycles is not None:  # a --schedule profile saved: each event's cycle
            cycle, problem = read_cycles(trace.nbprofCycles, start_ns + origin_ns)
            if cycle is None:
                self.dropped.append(str(problem))
            else:
                events["cycle"] = cycle
        dist = trace.distributedInfo or {}
        rank, world_size = header_int(dist.get("rank"), 1 << 31), header_int(dist.get("world_size"), 1 << 31)
        if (rank is None) != (dist.get("rank") is None) or (world_size is None) != (dist.get("world_size") is None):
            self.dropped.append(f"distributedInfo {msgspec.json.encode(dist).decode()[:80]} does not say a rank: not used")
        devices, wrong = device_properties([] if trace.deviceProperties is None else trace.deviceProperties)
        if wrong:
            self.dropped.append(f"{wrong:,} deviceProperties value{'s' if wrong != 1 else ''} of the wrong type "
                                "(a GPU's id, name or sizes): left out")
        meta = TraceMeta(
            source=self.source,
            origin_ns=origin_ns,
            base_time_ns=header_int(trace.baseTimeNanoseconds, 1 << 63) or 0,
            record_shapes=bool(self.announced["record_shapes"]),
            profile_memory=bool(trace.profile_memory) or bool(is_memory.any()),
            with_stack=bool(trace.with_stack) or bool(python_mask.any()),
            # torch's writer drops FLOPs; nbprof's exporter keeps them
            with_flops=bool(trace.with_flops) and has_flops,
            with_modules=bool(trace.with_modules),
            device_properties=devices,
            thread_names=self.thread_names,
            trace_name=trace.traceName,
            rank=rank,
            world_size=world_size,
            main_thread=main_tid,
            span_us=(span[1] if span else None),
            compile_log=trace.nbprofCompileLog if isinstance(trace.nbprofCompileLog, dict) else None,
            reader_notes=self._notes(),
        )
        if ranks is not None:  # no one rank's trace: each rank's (meta.parts), the first's threads' names
            meta.parts, meta.files = ranks.parts, [m.source for m in ranks.parts]
            if ranks.parts:
                meta.thread_names = dict(ranks.parts[0].thread_names)
        self._clock_header(trace, meta)
        if trace.nbprofLines is not None:
            from .lines import checked_lines

            meta.line_data, meta.sources, problem = checked_lines(trace.nbprofLines)
            if problem:
                meta.reader_notes.append(f"nbprofLines: {problem}: the line table is left out")
        if trace.nbprofDataLoading is not None:
            from .data_loading import record_from_json

            meta.data_loading, problem = record_from_json(trace.nbprofDataLoading)
            if problem:
                meta.reader_notes.append(f"nbprofDataLoading: {problem}: the DataLoaders' records are left out")
        return TraceData(events=events, meta=meta)

    # -- what cannot be right: left out, and said ------------------------------------------------

    def _left_out_work(self, kind: np.ndarray, kept: np.ndarray | None, **why: np.ndarray) -> None:
        """Count the device work (kernels, memcpys, memsets) that ``kept`` leaves out, by why: a
        device record whose time cannot be is the clock_skew finding's evidence (``TraceMeta.left_out_work``)."""
        if kept is None:
            return
        out = ~kept & np.isin(kind, DEVICE_WORK_CODES)
        if out.any():
            for reason, mask in why.items():
                self.left_out_work[reason] += int((out & mask).sum())

    def _clock_header(self, trace: Trace, meta: TraceMeta) -> None:
        """What nbprof's exporter wrote of the CUDA clock (``nbprofCudaProfile``, ``nbprofLeftOutWork``)
        into ``meta``, with the device work this read left out; a value of another shape: a note."""
        number, left_out = trace.nbprofCudaProfile, trace.nbprofLeftOutWork
        if number is not None:
            if type(number) is int and 1 <= number < 1 << 31:
                meta.cuda_profile = number
            else:
                meta.reader_notes.append(f"nbprofCudaProfile {msgspec.json.encode(number).decode()[:40]} is not a "
                                         "count of profiles: not used")
        counts = Counter(self.left_out_work)
        if left_out is not None:
            if isinstance(left_out, dict) and all(k in _LEFT_OUT_REASONS and type(v) is int and 0 <= v < 1 << 62
                                                  for k, v in left_out.items()):
                counts.update(left_out)
            else:
                meta.reader_notes.append(f"nbprofLeftOutWork {msgspec.json.encode(left_out).decode()[:60]} is not "
                                         "counts of device records: not used")
        meta.left_out_work = {k: int(v) for k, v in counts.items() if v}

    def _notes(self) -> list[str]:
        """What was not read or not understood, counted: a profile that holds less than its file
        always says so."""
        notes = [f"{plural(count, 'event')} with an unreadable `{name}`: left out"
                 for name, count in sorted(self.unreadable.items())]
        unknown = {cat: count for cat, count in self.unknown.items() if count}
        if unknown:
            listed = ", ".join(f"{cat} ({count:,})" for cat, count in sorted(unknown.items(), key=lambda x: -x[1]))
            notes.append(f"{plural(sum(unknown.values()), 'event')} in categories nbprof does not know, read as "
                         f'"other": {listed}')
        if self.begin_end:
            notes.append(f'{self.begin_end:,} begin/end ("B"/"E") events not read: nbprof reads complete '
                         '("X") and instant ("i") events')
        if self.bad_utf8:
            notes.append(f"{self.bad_utf8:,} invalid UTF-8 sequence{'s' if self.bad_utf8 != 1 else ''} in names or "
                         "args: read as \ufffd")
        notes += [f"{plural(count, 'event')} with `{arg}` beyond {dtype}: read as {default}"
                  for (arg, dtype, default), count in self.out_of_range.items()]
        if self.big_ids:
            notes.append(f"{self.big_ids:,} `pid` or `tid` value{'s' if self.big_ids != 1 else ''} beyond int64: "
                         "numbered apart")
        notes += self.dropped
        if self.n == 0 and self.seen:
            notes.append(f"none of the file's {self.seen:,} entries is {NO_EVENT_READ}" if self.seen > 1 else
                         f"the file's one entry is not {NO_EVENT_READ}")
        return notes

    def _utf8(self, raw: bytes) -> str:
        """Raw JSON as text (msgspec does not check raw values' UTF-8: invalid bytes read as
        U+FFFD, counted)."""
        try:
            return raw.decode()
        except UnicodeDecodeError:
            text = raw.decode(errors="replace")
            self.bad_utf8 += text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")
            return text

    def _raw_texts(self, attr: str, codes: np.ndarray, text: Callable[[str], str]) -> pd.Categorical:
        """A categorical column from its raw-JSON codes: ``text`` of each distinct raw value (a
        JSON list, kernels' grid and block: as torch's writer prints it; a string: the string),
        worked out once per distinct text; "" for rows without one."""
        texts = [text(self._utf8(raw)) for raw in self.raw_codes[attr].values()]
        # raw texts that read the same share a category (-1, no text, reads the leading "")
        categories, text_code = np.unique(np.array([""] + texts, dtype=object), return_inverse=True)
        return pd.Categorical.from_codes(text_code.reshape(-1)[codes + 1].astype(np.int32),
                                         categories=pd.Index(categories, dtype=object))

    def _shapes(self, codes: np.ndarray) -> pd.Categorical:
        """Raw "Input Dims" JSON -> torch's ``str(event.input_shapes)`` for each event.

        The writer prints the same ``[[8, 16], [16]]`` text Python would, so the raw bytes are the
        key as they are. A TensorList argument is written as a list of shapes; torch's
        ``input_shapes`` shows it as ``[]``, and so do we.
        """
        dims = self.raw_codes["input_dims"]
        if (codes < 0).any():  # rows read before shapes showed up, and memory events, have none
            codes = np.where(codes < 0, dims.encode([b""])[0], codes)
        texts = np.array([shape_text(self._utf8(raw)) for raw in dims.values()], dtype=object)
        used = np.zeros(len(texts), dtype=bool)
        used[codes] = True
        # different raw texts can mean the same shapes (spacing, "" and "[]"): one category each,
        # sorted as pd.Categorical sorts them
        categories, text_codes = np.unique(texts[used], return_inverse=True)
        raw_to_category = np.full(len(texts), -1, dtype=np.int32)
        raw_to_category[used] = text_codes.reshape(-1)
        return pd.Categorical.from_codes(raw_to_category[codes], categories=pd.Index(categories, dtype=object))


def _thread_id(tid: Any) -> Any:
    """A CPU thread's id, never negative (-1 marks device rows, and rows with a negative thread
    are in no op tree): kineto writes thread ids as signed 32-bit numbers, so a large one reads
    negative (-549452224 in HTA's NCCL trace, for thread 3745515072), and string tids of hand-made
    traces have negative ids; both read as the unsigned 32-bit number."""
    # 2**32 added to the negative ones only: added to every id, the largest int64 ids overflowed
    return tid + np.where(tid < 0, 1 << 32, 0)


def _on_thread(moved: np.ndarray, others: np.ndarray, thread: int, pid: np.ndarray,
               tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pid, tid`` with the ``moved`` rows on ``thread``, in the process of the first of the
    ``others`` rows on that thread."""
    main_pid = int(pid[np.flatnonzero((tid == thread) & others)[0]])
    return np.where(moved, main_pid, pid), np.where(moved, thread, tid)


def _main_thread(kind: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> int | None:
    """The main thread of the profiled process: the CPU thread whose id is the process id.

    Falls back to the thread of the earliest CPU operator when no thread id equals a pid.
    """
    cpu = (kind == KIND_CODE["op"]) | (kind == KIND_CODE["annotation"])
    if not cpu.any():
        return None
    same = cpu & (pid == tid) & (pid >= 0)
    if same.any():
        return int(tid[np.flatnonzero(same)[0]])
    return int(tid[np.flatnonzero(cpu)[0]])


def empty_trace() -> TraceData:
    """A trace with no events (a cell that ran no torch operators)."""
    return TraceData(events=make_events_frame(), meta=TraceMeta(source="empty"))
