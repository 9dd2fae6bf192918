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
  event, no per-event Python objects kept); the fields only some kinds have (memory, device,
  Python ids) are read only for the rows of those kinds, and External id and shapes not for
  memory events. ~0.8 µs per event, next to ~1 µs for msgspec's decode.

Times: the writer prints ``ts``/``dur`` in µs with exactly three decimals (ns resolution). A float64
near 4.5e12 µs is only exact to ~1 ns, so naive ``ts * 1000`` can be off by a nanosecond; we split
``ts`` into its integer and fractional parts, which recovers the exact integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceError
from ..events import (
    DEVICE_MEMORY_TYPES,
    KINDS,
    KIND_CODE,
    IGNORED_NAMES,
    make_events_frame,
)

__all__ = ["TraceData", "read_trace_file", "parse_trace_bytes"]


class _Args(msgspec.Struct, gc=False):
    external_id: int = msgspec.field(name="External id", default=0)
    correlation: int = 0
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    device: int = -1
    stream: int = -1
    # memcpy / memset size ("bytes") and the signed size of an allocation event ("Bytes")
    copy_bytes: int = msgspec.field(name="bytes", default=0)
    alloc_bytes: int = msgspec.field(name="Bytes", default=0)
    total_allocated: int = msgspec.field(name="Total Allocated", default=-1)
    total_reserved: int = msgspec.field(name="Total Reserved", default=-1)
    device_type: int = msgspec.field(name="Device Type", default=-1)
    device_id: int = msgspec.field(name="Device Id", default=-1)
    addr: int = msgspec.field(name="Addr", default=0)  # memory events: the block's address
    python_id: int = msgspec.field(name="Python id", default=-1)
    python_parent_id: int | None = msgspec.field(name="Python parent id", default=-1)
    flops: int = 0  # written by nbprof's exporter (torch's writer drops FLOPs)
    # kernels: CUPTI's launch configuration and occupancy estimates
    grid: msgspec.Raw = msgspec.Raw(b"")
    block: msgspec.Raw = msgspec.Raw(b"")
    registers: int = msgspec.field(name="registers per thread", default=-1)
    shared_memory: int = msgspec.field(name="shared memory", default=-1)
    blocks_per_sm: float = msgspec.field(name="blocks per SM", default=float("nan"))
    warps_per_sm: float = msgspec.field(name="warps per SM", default=float("nan"))
    occupancy: float = msgspec.field(name="est. achieved occupancy %", default=float("nan"))
    name: str = ""  # metadata events (thread_name, process_name)
    labels: str = ""  # process_labels ("CPU", "GPU 0")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    """An event whose ``args`` are always there (absent ones are the defaults): what the fast
    decoders produce. A file with ``"args": null`` fails them and is read with :class:`_LooseEvent`."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: _Args = msgspec.field(default_factory=_Args)


class _LooseEvent(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: _Args | None = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event]
    deviceProperties: list[dict[str, Any]] = []
    record_shapes: int = 0
    profile_memory: int = 0
    with_stack: int = 0
    with_flops: int = 0
    with_modules: int = 0
    baseTimeNanoseconds: int = 0
    traceName: str = ""
    distributedInfo: dict[str, Any] | None = None


class _LooseTrace(_Trace, gc=False):
    traceEvents: list[_LooseEvent]  # type: ignore[assignment]


_DECODER = msgspec.json.Decoder(_Trace)
_LOOSE_DECODER = msgspec.json.Decoder(_LooseTrace)
_LIST_DECODER = msgspec.json.Decoder(list[_Event])
_LOOSE_LIST_DECODER = msgspec.json.Decoder(list[_LooseEvent])

# chrome-trace category -> our event kind; categories mapped to None are not events
# (flows between CPU and GPU, the profiler's own span).
_CAT_KIND: dict[str, str | None] = {
    "cpu_op": "op",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "overhead": "overhead",
    "cpu_instant_event": "memory",  # "[memory]"; "[OutOfMemory]" becomes "oom" below
    "ac2g": None,
    "fwdbwd": None,
    "async_cpu_to_gpu": None,
    "Trace": None,
    "": None,
}
_DEVICE_KINDS = {"kernel", "memcpy", "memset", "gpu_annotation"}

# Kind codes while reading: the event kinds, and two codes for rows that are not events.
_DROP = -1  # not an event (flows, metadata, categories mapped to None)
_SPAN = -2  # the profiler's own span ("Trace"): not an event, but it fixes the time origin
_NOT_AN_EVENT = "\x00"  # the "category" of phases other than "X" and "i"
_CAT_CODE: dict[str, int] = {
    cat: (_SPAN if cat == "Trace" else _DROP if kind is None else KIND_CODE[kind])
    for cat, kind in _CAT_KIND.items()
}
_CAT_CODE[_NOT_AN_EVENT] = _DROP
_C = KIND_CODE
_DEVICE_CODES = np.array([_C[k] for k in _DEVICE_KINDS], dtype=np.int8)
_MEMORY_CODES = np.array([_C["memory"]], dtype=np.int8)  # "oom" is decided later, from the name
# rows whose args have a CUPTI correlation id (runtime calls, device work; "other" for unknown
# categories such as cuda_sync)
_CORRELATED_CODES = np.array(
    [_C[k] for k in ("runtime", "kernel", "memcpy", "memset", "gpu_annotation", "other")], dtype=np.int8
)
_COPY_CODES = np.array([_C["memcpy"], _C["memset"]], dtype=np.int8)
_OP_CODES = np.array([_C["op"], _C["annotation"]], dtype=np.int8)


def _kind_table(codes: np.ndarray) -> np.ndarray:
    table = np.zeros(len(KINDS), dtype=bool)
    table[codes] = True
    return table


# groups of kinds whose rows have fields of their own (read for those rows only)
_GROUPS = {
    "correlation": _kind_table(_CORRELATED_CODES),
    "device": _kind_table(_DEVICE_CODES),
    "memory": _kind_table(_MEMORY_CODES),
    "copy": _kind_table(_COPY_CODES),
    "python": _kind_table(np.array([_C["python"]])),
    "kernel": _kind_table(np.array([_C["kernel"]])),
}

# Where one event ends and the next begins: torch's writer (one event per block, "  {" ... "  },"
# at two spaces), compact JSON from json.dumps (kineto's writer in some builds; events start with
# "ph") and from msgspec (nbprof's exporter). A slice is cut between "}," and the next "{".
_EVENT_BOUNDARIES = (b"},\n  {", b'}, {"ph": ', b'},{"ph":')
_SLICE_BYTES = 1 << 18  # ~700-1,500 events: their objects stay in the CPU cache; ~2 MiB of buffers in all


@dataclass
class TraceData:
    """What a trace holds: the events table and what the file says about its collection."""

    events: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)


def read_trace_file(path: str | os.PathLike) -> TraceData:
    """Read one ``.json`` or ``.json.gz`` chrome trace file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder; pass a trace file (.json or .json.gz)")
    size = os.path.getsize(path)
    if size == 0:
        raise TraceError(f"{path}: the file is empty, not a chrome trace")
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            try:
                buf: Any = gzip.decompress(f.read())
            except (OSError, EOFError) as e:
                raise TraceError(f"{path}: gzip data is truncated or corrupt ({e})") from None
            return parse_trace_bytes(buf, source=path)
        if not head.lstrip().startswith(b"["):
            # read in slices straight from the file: the file is never all in our memory
            sliced = _read_sliced(f.read, path)
            if sliced is not None:
                return sliced
            f.seek(0)
        # mmap avoids a second copy of a large file in memory.
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse_whole(buf, path)


def parse_trace_bytes(buf: Any, source: str = "<trace>") -> TraceData:
    """Parse chrome-trace JSON (bytes, bytearray or mmap) into a :class:`TraceData`."""
    if not bytes(buf[:256]).lstrip().startswith(b"["):
        with memoryview(buf) as view:
            sliced = _read_sliced(_reader_of(view), source)
        if sliced is not None:
            return sliced
    return _parse_whole(buf, source)


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
        try:
            try:
                events: list = _LIST_DECODER.decode(buf)
            except msgspec.ValidationError:
                events = _loose(_LOOSE_LIST_DECODER.decode(buf))
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise _decode_error(source, e) from None
        reader = _Reader(_Trace(traceEvents=[]), source)
        reader.add(events)
        return reader.finish()
    try:
        try:
            trace = _DECODER.decode(buf)
        except msgspec.ValidationError:
            trace = _LOOSE_DECODER.decode(buf)
            trace.traceEvents = _loose(trace.traceEvents)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise _decode_error(source, e) from None
    events, trace.traceEvents = trace.traceEvents, []
    reader = _Reader(trace, source)
    reader.add(events)
    del events
    return reader.finish()


def _loose(events: list) -> list:
    """Events with ``"args": null`` (hand-written files): give them the default args."""
    for e in events:
        if e.args is None:
            e.args = _NO_ARGS
    return events


def _read_sliced(read: Callable[[int], bytes], source: str) -> TraceData | None:
    """Read a trace slice by slice as it streams in (see the module docstring).

    ``read(n)`` gives the next bytes of the file (b"" at its end). Returns None when the file is not
    in a layout we can cut or a slice does not decode; the caller then reads it whole (and reports
    what is wrong with it, if anything is)."""
    data = read(_SLICE_BYTES)
    while len(data) < (4 << 20):  # a long header, long first events: read on a little
        key = data.find(b'"traceEvents"')
        open_at = data.find(b"[", key, key + 64) if key >= 0 else -1
        if open_at >= 0 and any(data.find(b, open_at) >= 0 for b in _EVENT_BOUNDARIES):
            break
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
    decode = _LIST_DECODER.decode
    try:
        head = _DECODER.decode(prefix + b"]}")
        reader = _Reader(head, source)
        pending = data[open_at + 1 :]
        del data
        while True:
            more = read(_SLICE_BYTES)
            if more:
                pending += more
            # complete events end at the last boundary; the rest waits for more bytes
            cut = pending.rfind(boundary)
            if cut > 0:
                with memoryview(pending) as view:
                    reader.add(decode(b"".join((b"[", view[: cut + 1], b"]"))))
                pending = pending[cut + 2 :]
            if not more:
                break
        # the last event and the footer: with the header, one small document
        full = _DECODER.decode(prefix + pending)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if (bool(full.record_shapes), bool(full.with_flops)) != (bool(head.record_shapes), bool(head.with_flops)):
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


def _ints(values: list) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=len(values))


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


class _Reader:
    """Turns decoded events, one slice at a time, into the columns of the events table."""

    def __init__(self, trace: _Trace, source: str) -> None:
        self.trace = trace
        self.source = source
        self.seen = 0  # events decoded, all kinds
        self.n = 0  # rows kept
        self.cat_code = dict(_CAT_CODE)
        self.names = _Codes()
        self.ignored = np.zeros(0, dtype=bool)  # per name code: a utility op torch leaves out
        self.dims = _Codes()
        self.launch_dims = _Codes()  # kernels' grid and block, raw JSON lists
        self.string_ids: dict[str, int] = {}  # pid/tid strings of hand-made traces
        self.shapes = bool(trace.record_shapes)
        self.flops = bool(trace.with_flops)
        self.thread_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.span: list[tuple[float, float]] = []
        self.cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("kind", "name", "ts", "dur", "pid", "tid", "external_id", "dims", "flops")
        }
        self.sparse: dict[str, list[np.ndarray]] = defaultdict(list)
        self.slice_rows: list[int] = []  # rows kept from each slice

    # -- one slice -----------------------------------------------------------------------------

    def add(self, events: list) -> None:
        m = len(events)
        if m == 0:
            return
        self.seen += m
        cat_code = self.cat_code
        # the kind of each event from its category; phases other than complete ("X") and
        # instant ("i") events are not events of the table (metadata, flows, begin/end pairs)
        cats = [e.cat if (e.ph == "X" or e.ph == "i") else _NOT_AN_EVENT for e in events]
        try:
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        except KeyError:
            for c in set(cats):
                cat_code.setdefault(c, KIND_CODE["other"])
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        del cats
        keep = kind >= 0
        if not keep.all():
            for i in np.flatnonzero(kind < 0).tolist():  # metadata, flows, the profiler's span
                e = events[i]
                if e.ph == "M":
                    self._metadata(e)
                elif kind[i] == _SPAN:
                    self.span.append((e.ts, e.dur))

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
        counts = np.bincount(kind, minlength=len(KINDS))
        cols = self.cols
        self.slice_rows.append(m)
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
        sparse = self.sparse

        # memory events (often half of a --memory profile) have no External id and no shapes:
        # read those for the other rows only
        n_memory = int(counts[KIND_CODE["memory"]])
        if n_memory == 0:
            ops, op_rows = args, None
        elif n_memory == m:
            ops, op_rows = [], np.zeros(0, dtype=np.int64)
        else:
            op_rows = np.flatnonzero(kind != KIND_CODE["memory"])
            ops = [args[i] for i in op_rows.tolist()]
        external_id = _ints([a.external_id for a in ops])
        if op_rows is not None:
            full = np.zeros(m, dtype=np.int64)
            full[op_rows] = external_id
            external_id = full
        cols["external_id"].append(external_id)
        if not self.shapes and self.n - m < 5000:
            # shapes not announced by the file: look for them in its first 5,000 events
            if any(a.input_dims for a in args[: 5000 - (self.n - m)]):
                self.shapes = True
        if self.shapes:
            dims = self.dims.encode([bytes(a.input_dims) for a in ops])
            if op_rows is not None:
                full = np.full(m, self.dims.encode([b""])[0], dtype=np.int32)
                full[op_rows] = dims
                dims = full
            cols["dims"].append(dims)
        else:
            cols["dims"].append(np.zeros(0, dtype=np.int32))  # no shapes in this slice
        if self.flops:
            cols["flops"].append(_ints([a.flops for a in args]))

        # fields only some kinds have: read for the rows of those kinds only
        if n_memory:
            sub = self._rows(base, kind, args, "memory", counts, n_memory)
            sparse["alloc_bytes"].append(_ints([a.alloc_bytes for a in sub]))
            sparse["total_allocated"].append(_ints([a.total_allocated for a in sub]))
            sparse["total_reserved"].append(_ints([a.total_reserved for a in sub]))
            sparse["device_type"].append(_ints([a.device_type for a in sub]))
            sparse["device_id"].append(_ints([a.device_id for a in sub]))
            sparse["addr"].append(_ints([a.addr for a in sub]))
        if n_memory + counts[_OP_CODES].sum() == m:
            return  # a CPU slice (ops, annotations, memory): nothing else to read
        sub = self._rows(base, kind, args, "correlation", counts)
        if sub:
            sparse["correlation"].append(_ints([a.correlation for a in sub]))
        sub = self._rows(base, kind, args, "device", counts)
        if sub:
            sparse["device"].append(_ints([a.device for a in sub]))
            sparse["stream"].append(_ints([a.stream for a in sub]))
        sub = self._rows(base, kind, args, "copy", counts)
        if sub:
            sparse["copy_bytes"].append(_ints([a.copy_bytes for a in sub]))
        sub = self._rows(base, kind, args, "kernel", counts)
        if sub:
            k = len(sub)
            sparse["grid"].append(self.launch_dims.encode([bytes(a.grid) for a in sub]))
            sparse["block"].append(self.launch_dims.encode([bytes(a.block) for a in sub]))
            sparse["registers"].append(_ints([a.registers for a in sub]))
            sparse["shared_memory"].append(_ints([a.shared_memory for a in sub]))
            for f in ("blocks_per_sm", "warps_per_sm", "occupancy"):
                sparse[f].append(np.fromiter([getattr(a, f) for a in sub], dtype=np.float64, count=k))
        sub = self._rows(base, kind, args, "python", counts)
        if sub:
            sparse["python_id"].append(_ints([a.python_id for a in sub]))
            sparse["python_parent_id"].append(
                _ints([-1 if a.python_parent_id is None else a.python_parent_id for a in sub])
            )

    def _rows(self, base: int, kind: np.ndarray, args: list, group: str, counts: np.ndarray,
              count: int | None = None) -> list:
        """The args of the rows of a group of kinds; their row numbers go to ``sparse["rows:" + group]``."""
        table = _GROUPS[group]
        if count is None:
            count = int(counts[table].sum())
        if count == 0:
            return []
        if count == len(args):
            rows = np.arange(len(args))
            sub = args
        else:
            rows = np.flatnonzero(table[kind])
            sub = [args[i] for i in rows.tolist()]
        self.sparse["rows:" + group].append(rows + base)
        return sub

    def _ids(self, values: list) -> np.ndarray:
        """pid/tid values are ints, or strings in hand-made traces: strings get stable negative ids."""
        first = values[0]
        if type(first) is int and values.count(first) == len(values):  # one thread: no conversion
            return np.full(len(values), first, dtype=np.int64)
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError):
            out = np.empty(len(values), dtype=np.int64)
            names = self.string_ids
            for i, v in enumerate(values):
                if isinstance(v, int):
                    out[i] = v
                else:
                    out[i] = names.setdefault(v, -(len(names) + 2))
            return out

    def _metadata(self, e: Any) -> None:
        if e.name == "thread_name" and isinstance(e.tid, int):
            self.thread_names[e.tid] = e.args.name.strip()
        elif e.name == "process_labels" and isinstance(e.pid, int):
            self.process_labels[e.pid] = e.args.labels

    def _column(self, key: str, dtype: Any) -> np.ndarray:
        """A column from its slices (the slices are let go: no second copy stays around)."""
        parts, self.cols[key] = self.cols[key], []
        if not parts:
            return np.zeros(0, dtype=dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _sparse_column(self, rows_key: str, column: str, default: int) -> np.ndarray:
        out = np.full(self.n, default, dtype=np.int64) if default else np.zeros(self.n, dtype=np.int64)
        values = self.sparse.pop(column, None)
        if values:
            out[np.concatenate(self.sparse["rows:" + rows_key])] = np.concatenate(values)
        return out

    # -- the table -----------------------------------------------------------------------------

    def finish(self) -> TraceData:
        trace = self.trace
        n = self.n
        if n == 0 and not self.span and self.seen == 0:
            raise TraceError(f"{self.source}: the trace has no events (traceEvents is empty)")
        kind = self._column("kind", np.int8)
        name_codes = self._column("name", np.int32)
        all_names = self.names.values()

        # names: only those of kept rows, in order of first appearance
        used = np.zeros(len(all_names), dtype=bool)
        used[name_codes] = True
        new_code = np.cumsum(used) - 1
        name_codes = new_code[name_codes].astype(np.int32)
        name_values = [v for v, u in zip(all_names, used.tolist()) if u]
        name_index = {v: i for i, v in enumerate(name_values)}

        if n:
            mem_mask = kind == KIND_CODE["memory"]
            if mem_mask.any():
                oom_code = name_index.get("[OutOfMemory]", -1)
                memory_code = name_index.get("[memory]", -1)
                kind[mem_mask & (name_codes == oom_code)] = KIND_CODE["oom"]
                other = mem_mask & (name_codes != oom_code) & (name_codes != memory_code)
                kind[other] = KIND_CODE["other"]

        start_ns = _exact_ns(self._column("ts", np.float64))
        dur_ns = np.rint(self._column("dur", np.float64) * 1000.0).astype(np.int64)
        pid = self._column("pid", np.int64)
        tid = self._column("tid", np.int64)
        external_id = self._column("external_id", np.int64)
        correlation = self._sparse_column("correlation", "correlation", 0)
        device_arg = self._sparse_column("device", "device", -1)
        stream = self._sparse_column("device", "stream", -1)
        is_device = np.isin(kind, _DEVICE_CODES)
        is_memory = (kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"])
        nbytes = self._sparse_column("memory", "alloc_bytes", 0)
        total_allocated = self._sparse_column("memory", "total_allocated", -1)
        total_reserved = self._sparse_column("memory", "total_reserved", -1)
        mem_device_type = self._sparse_column("memory", "device_type", -1)
        mem_device_id = self._sparse_column("memory", "device_id", -1)
        addr = self._sparse_column("memory", "addr", 0)
        if self.sparse.get("copy_bytes"):
            rows = np.concatenate(self.sparse["rows:copy"])
            nbytes[rows] = np.concatenate(self.sparse["copy_bytes"])
        # memory rows that turned out not to be memory events (other instant events) keep -1s
        not_memory = ~is_memory
        for col, default in ((total_allocated, -1), (total_reserved, -1), (mem_device_type, -1),
                             (mem_device_id, -1), (addr, 0)):
            col[not_memory] = default
        nbytes[not_memory & ~np.isin(kind, _COPY_CODES)] = 0
        python_mask = kind == KIND_CODE["python"]
        python_id = self._sparse_column("python", "python_id", -1)
        python_parent_id = self._sparse_column("python", "python_parent_id", -1)

        launch = self._launch_columns()
        flops = self._column("flops", np.int64) if self.flops else np.zeros(n, dtype=np.int64)
        has_flops = bool(flops.any())

        input_shapes = self._shapes() if self.shapes else None

        # Devices: device events carry their GPU index; memory events their device type and index.
        any_device = bool(is_device.any())
        device = np.where(is_device, np.where(device_arg >= 0, device_arg, 0), -1) if any_device else device_arg
        del device_arg
        mem_on_device = is_memory & np.isin(mem_device_type, list(DEVICE_MEMORY_TYPES))
        if mem_on_device.any():
            device = np.where(mem_on_device, np.maximum(mem_device_id, 0), device)
        del mem_device_id, mem_on_device

        # Overhead events (pid -1, tid 0 in the file) happen in the profiler's own code on the main
        # thread; torch files them there, under the op open at their start, and so do we.
        main_tid = _main_thread(kind, pid, tid)
        overhead = kind == KIND_CODE["overhead"]
        if overhead.any() and main_tid is not None:
            main_pid = int(pid[np.flatnonzero((tid == main_tid) & ~overhead)[0]])
            tid = np.where(overhead, main_tid, tid)
            pid = np.where(overhead, main_pid, pid)

        if any_device:
            thread = np.where(is_device, -1, tid)
            stream = np.where(is_device, np.where(stream >= 0, stream, tid), -1)
        else:  # a CPU profile: threads as they are, no streams (stream is all -1 already)
            thread = tid
        del tid, is_device

        origin_ns = int(start_ns.min()) if n else 0
        span = self.span
        if span:
            span_ns = int(_exact_ns(np.array([span[0][0]]))[0])
            origin_ns = min(origin_ns, span_ns) if n else span_ns

        start_ns -= origin_ns
        events = make_events_frame(
            name=pd.Categorical.from_codes(name_codes, categories=pd.Index(name_values, dtype=object)),
            kind=kind,
            device=device,
            thread=thread,
            stream=stream,
            start_ns=start_ns,
            dur_ns=dur_ns,
            correlation=correlation,
            external_id=external_id,
            input_shapes=input_shapes,
            nbytes=nbytes,
            total_allocated=total_allocated,
            total_reserved=total_reserved,
            mem_device_type=mem_device_type,
            addr=addr,
            pid=pid,
            python_id=python_id,
            python_parent_id=python_parent_id,
            flops=flops,
            launch=launch,
        )
        dist = trace.distributedInfo or {}
        meta: dict[str, Any] = {
            "source": self.source,
            "origin_ns": origin_ns,
            "base_time_ns": trace.baseTimeNanoseconds,
            "record_shapes": bool(trace.record_shapes) or self.shapes,
            "profile_memory": bool(trace.profile_memory) or bool(is_memory.any()),
            "with_stack": bool(trace.with_stack) or bool(python_mask.any()),
            # torch's writer drops FLOPs; nbprof's exporter keeps them
            "with_flops": bool(trace.with_flops) and has_flops,
            "with_modules": bool(trace.with_modules),
            "device_properties": list(trace.deviceProperties or []),
            "thread_names": self.thread_names,
            "trace_name": trace.traceName,
            "rank": dist.get("rank"),
            "world_size": dist.get("world_size"),
            "main_thread": main_tid,
            "span_us": (span[0][1] if span else None),
        }
        return TraceData(events=events, meta=meta)

    def _launch_columns(self) -> dict[str, Any] | None:
        """Kernels' launch configuration (see ``events.LAUNCH_COLUMNS``); None when no kernel has one."""
        if not self.sparse.get("grid"):
            return None
        rows = np.concatenate(self.sparse.pop("rows:kernel"))
        out: dict[str, Any] = {}
        texts = [_dims_text(raw) for raw in self.launch_dims.values()]  # once per distinct dimension
        for column, key in (("grid", "grid"), ("block", "block")):
            codes = np.concatenate(self.sparse.pop(key))
            full = np.full(self.n, -1, dtype=np.int32)
            full[rows] = codes
            out[column] = (full, texts)
        for column, key, dtype, default in (
            ("registers_per_thread", "registers", np.int32, -1),
            ("shared_memory_bytes", "shared_memory", np.int64, -1),
            ("blocks_per_sm", "blocks_per_sm", np.float64, np.nan),
            ("warps_per_sm", "warps_per_sm", np.float64, np.nan),
            ("occupancy_pct", "occupancy", np.float64, np.nan),
        ):
            full = np.full(self.n, default, dtype=dtype)
            full[rows] = np.concatenate(self.sparse.pop(key))
            out[column] = full
        return out

    def _shapes(self) -> pd.Categorical:
        """Raw "Input Dims" JSON -> torch's ``str(event.input_shapes)`` for each event.

        The writer prints the same ``[[8, 16], [16]]`` text Python would, so the raw bytes are the
        key as they are. A TensorList argument is written as a list of shapes; torch's
        ``input_shapes`` shows it as ``[]``, and so do we.
        """
        empty = self.dims.encode([b""])[0]  # slices read before shapes showed up have none
        parts = [p if len(p) else np.full(rows, empty, dtype=np.int32)
                 for p, rows in zip(self.cols.pop("dims"), self.slice_rows)]
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        texts = np.array([_shape_text(raw) for raw in self.dims.values()], dtype=object)
        used = np.zeros(len(texts), dtype=bool)
        used[codes] = True
        # different raw texts can mean the same shapes (spacing, "" and "[]"): one category each,
        # sorted as pd.Categorical sorts them
        categories, text_codes = np.unique(texts[used], return_inverse=True)
        raw_to_category = np.full(len(texts), -1, dtype=np.int32)
        raw_to_category[used] = text_codes.reshape(-1)
        return pd.Categorical.from_codes(raw_to_category[codes], categories=pd.Index(categories, dtype=object))


def _shape_text(raw: bytes) -> str:
    if not raw:
        return "[]"
    text = raw.decode()
    if "[[[" in text or "], [[" in text or ",[[" in text:
        dims = json.loads(text)
        text = str([[] if (d and isinstance(d[0], list)) else d for d in dims])
    elif ", " not in text and "," in text:
        text = str(json.loads(text))  # compact writers: normalise to Python's spacing
    return text


def _dims_text(raw: bytes) -> str:
    """A launch dimension as the writer prints it (``[128, 1, 1]``), whatever the file's spacing."""
    if not raw:
        return ""
    try:
        return str([int(v) for v in json.loads(raw)])
    except (ValueError, TypeError):
        return raw.decode(errors="replace")


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
    e = np.zeros(0, dtype=np.int64)
    events = make_events_frame(
        name=np.zeros(0, dtype=object), kind=np.zeros(0, dtype=np.int8), device=e, thread=e, stream=e,
        start_ns=e, dur_ns=e, correlation=e, external_id=e, input_shapes=None, nbytes=e,
        total_allocated=e, total_reserved=e, mem_device_type=e, pid=e, python_id=e, python_parent_id=e,
    )
    return TraceData(events=events, meta={"source": "empty", "origin_ns": 0})
