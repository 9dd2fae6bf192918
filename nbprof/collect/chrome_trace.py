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
- Args. The struct the args are decoded into, and which of them are read for which kinds, are
  generated from the events schema (``events.COLUMNS``: a column with an ``arg``) plus the few
  args this reader turns into columns itself (device, stream, bytes, shapes).

Formats. Every trace torch has written since 1.8: torch 1.8-1.9's capitalized categories
(``Operator``, ``Kernel``, ...; matched without regard to case) and its ``external id``, read
only once such a category shows up (a field more would cost every modern trace a pass); the
runtimes of other accelerators, which kineto files as runtime calls and kernels (``_CAT_KIND``);
categories nbprof does not know become "other", counted per category in the trace's notes.

Tolerance. The typed decoders reject a whole document for one value of another type (ROCm writes
``"stream": "0x0"`` on runtime calls). A file that fails them is decoded again with every field
as any JSON value and checked field by field (``_Reader.checked``): a value that reads as its type
is kept ("0x0" is 0), one that cannot be read leaves out its event when the event's kind reads
that field, counted per field in ``TraceMeta.reader_notes``. Only such files pay for the check.

Times: the writer prints ``ts``/``dur`` in µs with exactly three decimals (ns resolution). A float64
near 4.5e12 µs is only exact to ~1 ns, so naive ``ts * 1000`` can be off by a nanosecond; we split
``ts`` into its integer and fractional parts, which recovers the exact integer nanoseconds.
torch 1.8-1.9 and Meta's tooling print whole µs (integers): read the same way.

A trace is data, never code, and it may come from anywhere (a colleague's cluster run, a file
attached to a bug report). What it can make the reader do is bounded, and what it holds that
cannot be right is said, never shown as a number:

- Size. At most ``max_bytes`` of JSON are read (default :data:`DEFAULT_MAX_BYTES`, 4 GiB: ~11 M
  events as torch's writer lays them out; ``load_trace(path, max_bytes=...)`` or the environment
  variable ``NBPROF_MAX_TRACE_BYTES`` raise it). A ``.gz`` file is decompressed as it is read, in
  slices, never whole into memory; with the default limit, one that expands more than
  :data:`_BOMB_RATIO` times (real traces: 9-45x; a compression bomb: up to ~1,000x) is refused
  once :data:`_BOMB_FLOOR` has come out, in well under a second.
- Structure. JSON nested deeper than Python's recursion limit, invalid UTF-8 (read as U+FFFD,
  counted in a note), integers beyond int64 (an id: read as "none", counted; a pid/tid: an id of
  its own, counted), values of another type (above): a note or one ``TraceError`` line naming the
  file, never a raw ``RecursionError``, ``UnicodeDecodeError`` or ``OverflowError``.
- Times and rows (``_Reader._plausible``, ``_together``, ``_distinct``: vectorized, ~7 ms of a
  700k-event trace's 4 s). Events without a ``ts`` or ``name``, with a ``ts`` out of range (not a
  number; beyond what int64 ns hold: ns written where µs belong), a negative ``dur`` or one longer
  than a day are left out; a few events more than a day away from all the others are left out;
  events that span more than a day are kept, with a note asking whether they are ns; exact
  duplicates (every field the reader reads equal) are counted once. Each is one note in
  ``TraceMeta.reader_notes``, with its count; the report shows them first among its notes.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
import sys
import traceback
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ..errors import OptionError, TraceError
from ..format import plural
from ..meta import TraceMeta
from .cprofile import is_pstats_head
from ..events import (
    ARG_COLUMNS,
    COPY_CODES,
    COPY_KINDS,
    CORRELATED_KINDS,
    DEVICE_CODES,
    DEVICE_KINDS,
    DEVICE_MEMORY_TYPES,
    DEVICE_TYPE_CODE,
    DEVICE_WORK_CODES,
    IGNORED_NAMES,
    KINDS,
    KIND_CODE,
    MEMORY_CODES,
    MEMORY_KINDS,
    TRACE_CATEGORY,
    EventColumn,
    TraceData,
    device_labels,
    make_events_frame,
)

__all__ = ["read_trace_file", "parse_trace_bytes", "empty_trace", "max_trace_bytes", "TraceLimit", "NO_LIMIT",
           "DEFAULT_MAX_BYTES", "MAX_BYTES_ENV"]


@dataclass(frozen=True)
class _ArgField:
    """An entry of an event's ``args`` that the reader reads, for the rows of ``kinds`` only."""

    attr: str  # its attribute on the decoded args (an events column's name, for ARG_COLUMNS)
    arg: str  # its key in the trace
    type: Any  # what msgspec decodes it as
    default: Any  # what an event without it reads as
    kinds: tuple[str, ...]
    dtype: Any = np.int64  # of the values read (codes, for JSON kept as raw text)
    announced_by: str | None = None  # a trace-header flag: not read from traces that do not set it
    legacy: bool = False  # torch 1.8-1.9's spelling: read only from traces in its categories

    @property
    def raw(self) -> bool:
        return self.type is msgspec.Raw

    @property
    def nullable(self) -> bool:
        return self.type == (int | None)


def _column_field(c: EventColumn) -> _ArgField:
    """How an events column with an ``arg`` is read (see ``events.EventColumn``)."""
    if c.arg is None:
        raise ValueError(f"{c.name}: not read from one trace arg")
    if c.json_list or c.categorical:  # kept as raw JSON text: one conversion per distinct text
        return _ArgField(c.name, c.arg, msgspec.Raw, msgspec.Raw(b""), c.kinds, np.int32)
    kind = np.dtype(c.dtype).kind
    typ: Any = float if kind == "f" else (int | None) if c.null_default else int
    return _ArgField(c.name, c.arg, typ, c.default, c.kinds, np.dtype(c.dtype), c.announced_by)


_NOT_MEMORY = tuple(k for k in KINDS if k not in MEMORY_KINDS)
# The args the reader turns into columns itself (device labels, streams, bytes, shapes), then
# those events columns that are one arg each (events.ARG_COLUMNS), read as they are.
_FIELDS = (
    _ArgField("device", "device", int, -1, DEVICE_KINDS),
    _ArgField("stream", "stream", int, -1, DEVICE_KINDS),
    _ArgField("copy_bytes", "bytes", int, 0, COPY_KINDS),  # memcpy / memset size
    _ArgField("dma_bytes", "size", int, 0, COPY_KINDS),  # MTIA's DMA copies ("dma_request") call it "size"
    _ArgField("alloc_bytes", "Bytes", int, 0, MEMORY_KINDS),  # the signed size of an allocation event
    _ArgField("device_type", "Device Type", int, -1, MEMORY_KINDS),
    _ArgField("device_id", "Device Id", int, -1, MEMORY_KINDS),
    # memory events (often half of a --memory profile) have no shapes: not read for them
    _ArgField("input_dims", "Input Dims", msgspec.Raw, msgspec.Raw(b""), _NOT_MEMORY, np.int32, "record_shapes"),
    # torch 1.8-1.9: the launching op's id on runtime calls and device work ("External id" on ops)
    _ArgField("legacy_external_id", "external id", int, 0, CORRELATED_KINDS, legacy=True),
) + tuple(_column_field(c) for c in ARG_COLUMNS)

_Args = msgspec.defstruct(
    "_Args",
    [(f.attr, f.type, msgspec.field(name=f.arg, default=f.default)) for f in _FIELDS]
    + [
        ("name", str, ""),  # metadata events (thread_name, process_name)
        ("labels", str, ""),  # process_labels ("CPU", "GPU 0")
    ],
    gc=False,
)
_NO_ARGS = _Args()


def _reads(f: _ArgField) -> Callable[[list], list]:
    """``[a.<attr> for a in args]`` for one field (raw JSON as bytes, null as the default): written
    out as a comprehension (generated from the field's name), because ``map(attrgetter(attr),
    args)`` costs ~40 % more per value (~45 ns against ~33 ns), paid for every event of every
    field: reading a 200k-event trace took 3 % longer with attrgetter (measured, CPU time, 8
    alternating runs)."""
    if not f.attr.isidentifier():
        raise ValueError(f"not an attribute name: {f.attr!r}")
    value = f"a.{f.attr}"
    if f.raw:
        value = f"bytes({value})"
    elif f.nullable:  # null is the default ("Python parent id": null)
        value = f"{int(f.default)} if {value} is None else {value}"
    return eval(f"lambda args: [{value} for a in args]")  # noqa: S307 (a checked identifier)


# Fields read for the same kinds are read together, from one selection of rows.
_GROUPS: list[tuple[np.ndarray, list[tuple[_ArgField, Callable[[list], list]]]]] = []
for _kinds in dict.fromkeys(f.kinds for f in _FIELDS):
    _table = np.zeros(len(KINDS), dtype=bool)
    _table[[KIND_CODE[k] for k in _kinds]] = True
    _GROUPS.append((_table, [(f, _reads(f)) for f in _FIELDS if f.kinds == _kinds]))
del _kinds, _table
# the trace-header flags that decide what is read (shapes, FLOPs)
_ANNOUNCING = tuple(dict.fromkeys(f.announced_by for f in _FIELDS if f.announced_by))


class _Event(msgspec.Struct, gc=False):
    """An event whose ``args`` are always there (absent ones are the defaults) and whose fields
    have their types: what the fast decoders produce. A file that fails them (``"args": null``,
    a field of another type) is decoded into :class:`_LooseEvent` and checked field by field."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = math.nan  # none: not an event the table can place (see _plausible)
    dur: float = 0.0
    args: _Args = msgspec.field(default_factory=_Args)  # type: ignore[valid-type]


# The same fields with any JSON value: what a file that fails the typed decoders is read as.
_LooseArgs = msgspec.defstruct(
    "_LooseArgs",
    [(f.attr, msgspec.Raw if f.raw else Any, msgspec.field(name=f.arg, default=f.default)) for f in _FIELDS]
    + [("name", Any, ""), ("labels", Any, "")],
    gc=False,
)


class _LooseEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    name: Any = ""
    cat: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = 0.0
    # args of another type than an object: that event left out (see _Reader.checked), not the file
    args: _LooseArgs | list | str | int | float | bool | None = None  # type: ignore[valid-type]


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
    nbprofCompileLog: dict[str, Any] | None = None  # torch.compile's log, as nbprof's exporter writes it
    nbprofLines: Any = None  # --lines: {"line_data": ..., "sources": ...}, checked by analysis.lines
    nbprofCudaProfile: Any = None  # TraceMeta.cuda_profile, checked by _clock_header
    nbprofLeftOutWork: Any = None  # TraceMeta.left_out_work, checked by _clock_header


class _LooseTrace(msgspec.Struct, gc=False):
    traceEvents: list[_LooseEvent]
    deviceProperties: Any = []
    record_shapes: Any = 0
    profile_memory: Any = 0
    with_stack: Any = 0
    with_flops: Any = 0
    with_modules: Any = 0
    baseTimeNanoseconds: Any = 0
    traceName: Any = ""
    distributedInfo: Any = None
    nbprofCompileLog: Any = None
    nbprofLines: Any = None
    nbprofCudaProfile: Any = None
    nbprofLeftOutWork: Any = None


_DECODER = msgspec.json.Decoder(_Trace)
_LOOSE_DECODER = msgspec.json.Decoder(_LooseTrace, float_hook=float)  # 1e999: inf, left out, not an error
_LIST_DECODER = msgspec.json.Decoder(list[_Event])
_LOOSE_LIST_DECODER = msgspec.json.Decoder(list[_LooseEvent], float_hook=float)


def _read_as(value: Any, typ: Any) -> Any:
    """A value of another type read as ``typ`` (int, int | None, float, str, int | str) where it can
    be: "0x0" and "7" as integers (ROCm writes streams so), 7.0 as 7, "1.5" as 1.5. Raises
    ValueError where it cannot (a list, text that is no number, true/false for a number)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if typ is float:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and math.isfinite(number := float(value)):  # not "nan", "inf"
            return number
    elif typ is str:
        if isinstance(value, str):
            return value
    elif isinstance(value, int):
        return value
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    elif isinstance(value, str):
        if typ == (int | str):
            return value
        text = value.strip()
        return int(text) if text.lstrip("+-").isdigit() else int(text, 0)
    raise ValueError(value)


_EVENT_FIELDS = (("ph", str, ""), ("name", str, ""), ("cat", str, ""), ("pid", int | str, 0),
                 ("tid", int | str, 0), ("ts", float, math.nan), ("dur", float, 0.0))

# chrome-trace category -> our event kind: each kind's own category (events.TRACE_CATEGORY;
# "cpu_instant_event" is read as "memory", "oom" is decided later from the name), the calls of
# the other runtimes, and categories that are not events (None: flows between CPU and GPU, the
# profiler's own span). kineto itself folds the other accelerators' activity types into these
# (libkineto ActivityType.h: MTIA_RUNTIME, XPU_RUNTIME, HPU_OP, PRIVATEUSE1_* = RUNTIME / DRIVER;
# MTIA_CCP_EVENTS = CONCURRENT_KERNEL). Categories not here are "other", counted in a note.
_CAT_KIND: dict[str, str | None] = {
    **{cat: kind for kind, cat in TRACE_CATEGORY.items() if kind != "oom"},
    "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "runtime",
    "xpu_runtime": "runtime",
    "xpu_driver": "runtime",
    "mtia_runtime": "runtime",
    "glow_runtime": "runtime",
    "hpu_op": "runtime",
    "mtia_ccp_events": "kernel",
    "xpu_sync": "sync",
    "cuda_event": "sync",  # CUPTI's event records on a stream: the markers stream waits wait for
    "ac2g": None,
    "fwdbwd": None,
    "async_cpu_to_gpu": None,
    "async": None,
    "Trace": None,
    "": None,
}
# torch ~1.8-1.9 (the TensorBoard plugin's era) wrote capitalized categories, and "external id"
# (lower case) on runtime calls and device work; matched without regard to case.
_LEGACY_CAT_KIND: dict[str, str] = {
    "operator": "op",
    "runtime": "runtime",
    "kernel": "kernel",
    "memcpy": "memcpy",
    "memset": "memset",
    "python": "python",
    "memory": "memory",
    "dataloader": "annotation",
}
# The record_function ranges torch opens itself: profiler.step()'s, the DataLoader's and the
# DataPipes' iterators'. Traces that file ranges as operators (see _Reader.finish) still name them.
_TORCH_RANGE_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
# A category's prefix -> torch's DeviceType of the trace's device events (their labels: "xpu:0").
_ACCELERATOR_OF = {"xpu": DEVICE_TYPE_CODE["xpu"], "mtia": DEVICE_TYPE_CODE["mtia"],
                   "hpu": DEVICE_TYPE_CODE["hpu"], "privateuse1": DEVICE_TYPE_CODE["privateuseone"]}
_STREAM_TID = re.compile(r"stream\s*(\d{1,18})$", re.IGNORECASE)  # (an int64)
# MTIA's command processor writes its synchronization and its DMA copies among its kernels
# (kineto files them all as kernels): told apart by name.
_KIND_BY_NAME = {"mtia_ccp_events": {"event_wait": "sync", "event_record": "sync", "dma_request": "memcpy"}}

# Kind codes while reading: the event kinds, and codes for rows that are not (yet) events.
_DROP = -1  # not an event (flows, metadata, categories mapped to None)
_SPAN = -2  # the profiler's own span ("Trace"): not an event, but it fixes the time origin
_NO_CATEGORY = -3  # no "cat": torch 1.8-1.9's memory events (instant "[memory]"); else dropped
_UNKNOWN = len(KINDS)  # a category nbprof does not know: "other", counted per category
_NOT_AN_EVENT = "\x00"  # the "category" of phases other than "X" and "i"
_MEMORY_NAMES = frozenset({"[memory]", "[OutOfMemory]"})
_CAT_CODE: dict[str, int] = {
    cat: (_SPAN if cat == "Trace" else _NO_CATEGORY if cat == "" else _DROP if kind is None else KIND_CODE[kind])
    for cat, kind in _CAT_KIND.items()
}
_CAT_CODE[_NOT_AN_EVENT] = _DROP
_FOLDED_CAT_CODE = {c.lower(): code for c, code in _CAT_CODE.items() if code >= 0}
# the categories the reader looks at when it first meets them (what they say about the trace)
_CAT_CODE_AT_START = {c: code for c, code in _CAT_CODE.items()
                      if c not in _KIND_BY_NAME and c.split("_")[0] not in _ACCELERATOR_OF}


# Plausible times (µs, as the file writes them; see the module docstring). ts * 1000 must be an
# int64 of ns, with room for a span between the earliest and the latest: [-73, +146) years.
_LEFT_OUT_REASONS = ("zero_ts", "far", "negative_dur")  # TraceMeta.left_out_work's keys
_TS_MIN_US = -(2.0**61) / 1000.0
_TS_MAX_US = 2.0**62 / 1000.0
_DAY_US = 86_400e6
_DAY_NS = 86_400 * 10**9
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _category_code(cat: str) -> tuple[int, bool]:
    """The kind code of a category this reader has not met yet, and whether it is torch 1.8-1.9's
    spelling: exact names first, then without regard to case (both spellings), else unknown."""
    code = _CAT_CODE.get(cat)
    if code is not None:
        return code, False
    folded = cat.lower()
    if folded in _LEGACY_CAT_KIND:
        return KIND_CODE[_LEGACY_CAT_KIND[folded]], True
    return _FOLDED_CAT_CODE.get(folded, _UNKNOWN), False


# Where one event ends and the next begins: torch's writer (one event per block, "  {" ... "  },"
# at two spaces), compact JSON from json.dumps (kineto's writer in some builds; events start with
# "ph") and from msgspec (nbprof's exporter). A slice is cut between "}," and the next "{".
_EVENT_BOUNDARIES = (b"},\n  {", b'}, {"ph": ', b'},{"ph":')
# the end of the note of a file none of whose entries is an event (a live run's own file, where a
# cell ran no operator, leaves it out: there is no file of the user's to speak of)
NO_EVENT_READ = "an event nbprof reads"

_SLICE_BYTES = 1 << 18  # ~700-1,500 events: their objects stay in the CPU cache; ~2 MiB of buffers in all
_MAX_EVENT_BYTES = 64 << 20  # one event longer than this (no boundary in sight): read whole, not in slices

# The bounds on reading (see the module docstring). Gzip'd traces expand 9-15x (the recorded H100
# traces), torch 1.9's 44x (tests/data/wild); deflate's most is ~1,030x, which is what bombs are made of.
DEFAULT_MAX_BYTES = 4 << 30
MAX_BYTES_ENV = "NBPROF_MAX_TRACE_BYTES"
_BOMB_RATIO = 200
_BOMB_FLOOR = 64 << 20
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class TraceLimit:
    """How much JSON one read may produce (``bytes``), and whether a compressed file's expansion
    is checked: only under the default limit (a limit the user gave says they trust the file)."""

    bytes: int
    default: bool = False

    def how_to_raise(self) -> str:
        more = _size_text(max(2 * self.bytes, 8 << 30), unit="")
        return (f'if it is a trace, read it with load_trace(path, max_bytes="{more}") or the environment variable '
                f"{MAX_BYTES_ENV}={more}")


NO_LIMIT = TraceLimit(1 << 62)  # a trace nbprof itself just had torch write (a live profile)


def max_trace_bytes(max_bytes: int | str | None = None) -> TraceLimit:
    """The limit of one read: ``max_bytes`` (bytes, or text such as "8G"), else
    ``$NBPROF_MAX_TRACE_BYTES``, else :data:`DEFAULT_MAX_BYTES`. A bad value: an OptionError."""
    if max_bytes is None:
        env = os.environ.get(MAX_BYTES_ENV, "").strip()
        if not env:
            return TraceLimit(DEFAULT_MAX_BYTES, default=True)
        value: Any = env
        where = MAX_BYTES_ENV
    else:
        value, where = max_bytes, "max_bytes"
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n is None or n <= 0:
        raise OptionError(f'{where} must be a number of bytes, such as 8000000000 or "8G"; got {value!r}')
    return TraceLimit(n)


def _size_text(n: float, unit: str = "B") -> str:
    """Bytes in binary units: "4G" (unit="") or "4 GiB"."""
    for prefix in ("T", "G", "M", "K"):
        scale = _UNITS[prefix.lower()]
        if n >= scale:
            value = f"{n / scale:.3g}"
            return f"{value}{prefix}" if not unit else f"{value} {prefix}i{unit}"
    return f"{int(n)}" if not unit else f"{int(n)} {unit}"


class _Gunzip:
    """``read(n)`` over a gzip file's decompressed bytes, decompressed as they are asked for (never
    the whole stream in one object) and within a :class:`TraceLimit`. Reads every member of a
    multi-member file, as ``gzip`` does; zlib checks each member's CRC and length."""

    def __init__(self, f: Any, source: str, limit: TraceLimit) -> None:
        self.f, self.source, self.limit = f, source, limit
        self.z = zlib.decompressobj(wbits=31)
        self.in_member = False  # inside a member whose end has not been read
        self.pending = b""  # compressed bytes read from the file and not decompressed yet
        self.read_in = 0  # compressed bytes read from the file
        self.out = 0  # decompressed bytes given out
        self.done = False

    def read(self, n: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < n and not self.done:
            if not self.pending:
                self.pending = self.f.read(1 << 16)
                self.read_in += len(self.pending)
                if not self.pending:
                    self.done = True
                    if self.in_member or self.read_in == 0:
                        raise TraceError(f"{self.source}: gzip data is truncated or corrupt (the file ends inside "
                                         "its compressed stream: was it fully written?)")
                    break
            if not self.in_member:  # between members: zero padding is let be, as gzip lets it
                self.pending = self.pending.lstrip(b"\0")
                if not self.pending:
                    continue
                self.in_member = True
            try:
                data = self.z.decompress(self.pending, n - got)
            except zlib.error as e:
                raise TraceError(f"{self.source}: gzip data is truncated or corrupt ({e})") from None
            if self.z.eof:  # this member is whole; what follows is the next one
                # (all of it in unused_data: unconsumed_tail may hold the same bytes again)
                self.pending = self.z.unused_data
                self.z = zlib.decompressobj(wbits=31)
                self.in_member = False
            else:
                self.pending = self.z.unconsumed_tail
            if data:
                parts.append(data)
                got += len(data)
                self._count(len(data))
        return b"".join(parts)

    def _count(self, more: int) -> None:
        self.out += more
        limit = self.limit
        if self.out > limit.bytes:
            raise TraceError(f"{self.source}: more than {_size_text(limit.bytes)} of JSON once decompressed, the most "
                             f"nbprof reads from one file; {limit.how_to_raise()}")
        consumed = max(self.read_in - len(self.pending), 1)
        if limit.default and self.out > _BOMB_FLOOR and self.out > _BOMB_RATIO * consumed:
            raise TraceError(f"{self.source}: expands more than {_BOMB_RATIO}x ({_size_text(self.out)} of JSON from "
                             f"the first {_size_text(consumed)}; gzip'd traces expand 9-45x): a compression bomb? "
                             f"Not read; {limit.how_to_raise()}")

    def read_all(self) -> bytes:
        """The whole stream, for the plain path; refused at once when it does not start as a JSON
        document does (``{`` or ``[``), however long it is."""
        first = self.read(_SLICE_BYTES)
        lead = first.lstrip()[:1]
        if lead not in (b"{", b"[") and (lead or not first):  # (only blanks so far: read on, within bounds)
            raise TraceError(f"{self.source}: not a chrome trace (decompressed, it does not start with '{{' or '[')")
        parts = [first]
        while more := self.read(1 << 22):
            parts.append(more)
        return b"".join(parts)


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
            sliced = _read_sliced(_Gunzip(f, path, limit).read, path)
            if sliced is not None:
                return sliced
            f.seek(0)
            return _parse_whole(_Gunzip(f, path, limit).read_all(), path)
        if size > limit.bytes:
            raise TraceError(f"{path}: {_size_text(size)} of JSON, more than the {_size_text(limit.bytes)} nbprof "
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


def _decoded(decoder: Any, data: Any) -> tuple[Any, int]:
    """``decoder.decode(data)``, and how many invalid UTF-8 sequences in it were read as U+FFFD
    (msgspec refuses them in the strings it reads: the text is decoded again, repaired; only
    such files pay for it). JSON that does not decode gets one more try with torch's unescaped
    names repaired (:func:`_torch_names_escaped`)."""
    try:
        try:
            return decoder.decode(data), 0
        except msgspec.DecodeError:
            repaired = _torch_names_escaped(bytes(data))
            if repaired is None:
                raise
            return decoder.decode(repaired), 0
    except UnicodeDecodeError:
        raw = bytes(data)
        text = raw.decode("utf-8", "replace")
        fixed = _torch_names_escaped(text.encode("utf-8"))
        return decoder.decode(fixed if fixed is not None else text), text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")


# torch 2.4-2.14's trace writer writes an event's name as it is, without JSON escaping, on a line
# of its own: record_function('say "hi"') gives `    "name": "say "hi"",`, which no JSON reader
# accepts (torch 2.15 writes ' for "). Only such lines are rewritten, and only when a file does not
# decode as it is.
_TORCH_NAME_LINE = re.compile(rb'^([ \t]*"name": ")(.*)(",?)([ \t]*\r?)$', re.MULTILINE)


def _torch_names_escaped(data: bytes) -> bytes | None:
    """``data`` with the names of torch's writer's lines JSON-escaped; None when no line needed it."""
    changed = 0

    def escape(m: re.Match) -> bytes:
        nonlocal changed
        inner = m.group(2)
        try:
            json.loads(b'"' + inner + b'"')
            return m.group(0)  # already a JSON string
        except ValueError:
            changed += 1
            text = json.dumps(inner.decode("utf-8", "replace"), ensure_ascii=False)[1:-1]
            return m.group(1) + text.encode("utf-8") + m.group(3) + m.group(4)

    out = _TORCH_NAME_LINE.sub(escape, data)
    return out if changed else None


def _parse_whole(buf: Any, source: str) -> TraceData:
    """The plain path: decode the whole document at once (any layout; reports what is wrong)."""
    if bytes(buf[:256]).lstrip().startswith(b"["):
        # a bare list of events is a chrome trace too (the "JSON Array Format")
        loose_events: list | None = None
        try:
            try:
                events, bad_utf8 = _decoded(_LIST_DECODER, buf)
            except msgspec.ValidationError:
                loose_events, bad_utf8 = _decoded(_LOOSE_LIST_DECODER, buf)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise _decode_error(source, e) from None
        reader = _Reader(_Trace(traceEvents=[]), source)
        reader.bad_utf8 += bad_utf8
        if loose_events is not None:
            events = reader.checked(loose_events)
            del loose_events
        reader.add(events)
        del events  # before finish (which may raise): they may be views of the caller's buffer
        return reader.finish()
    try:
        try:
            trace, bad_utf8 = _decoded(_DECODER, buf)
            reader = _Reader(trace, source)
        except msgspec.ValidationError:
            loose, bad_utf8 = _decoded(_LOOSE_DECODER, buf)
            loose_events, loose.traceEvents = loose.traceEvents, []
            trace = _checked_header(loose)
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


def _checked_header(loose: Any) -> _Trace:
    """The header of a loosely decoded file, a field of the wrong type read as absent."""
    values = {}
    for f in msgspec.structs.fields(_Trace):
        if f.name == "traceEvents":
            continue
        v = getattr(loose, f.name)
        try:
            values[f.name] = msgspec.convert(v, f.type)
        except msgspec.ValidationError:
            pass
    return _Trace(traceEvents=[], **values)


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
    decode = _LIST_DECODER
    try:
        head, bad_utf8 = _decoded(_DECODER, prefix + b"]}")
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
                    events, bad_utf8 = _decoded(decode, b"".join((b"[", view[: cut + 1], b"]")))
                reader.bad_utf8 += bad_utf8
                reader.add(events)
                del events, pending[: cut + 2]
            elif len(pending) > _MAX_EVENT_BYTES:
                return None
            searched = max(len(pending) - len(boundary) + 1, 0)
            if not more:
                break
        # the last event and the footer: with the header, one small document
        full, bad_utf8 = _decoded(_DECODER, prefix + pending)
        reader.bad_utf8 += bad_utf8
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if any(bool(getattr(full, flag)) != bool(getattr(head, flag)) for flag in _ANNOUNCING):
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


class _Reader:
    """Turns decoded events, one slice at a time, into the columns of the events table."""

    def __init__(self, trace: _Trace, source: str) -> None:
        self.trace = trace
        self.source = source
        self.seen = 0  # events decoded, all kinds
        self.n = 0  # rows kept
        self.cat_code = dict(_CAT_CODE_AT_START)
        self.names = _Codes()
        self.ignored = np.zeros(0, dtype=bool)  # per name code: a utility op torch leaves out
        self.raw_codes = {f.attr: _Codes() for f in _FIELDS if f.raw}  # raw JSON (shapes, grid, ...)
        self.string_ids: dict[str, int] = {}  # pid/tid strings of hand-made traces
        # what the header says is in the file (shapes are also looked for, see add)
        self.announced = {flag: bool(getattr(trace, flag)) for flag in _ANNOUNCING}
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
        self.accelerator = DEVICE_TYPE_CODE["cuda"]  # the DeviceType of device events (see _ACCELERATOR_OF)
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("kind", "name", "ts", "dur", "pid", "tid")}
        # per field, (rows, values) of each slice it was read in
        self.sparse: dict[str, list[tuple[np.ndarray, Any]]] = defaultdict(list)

    def checked(self, events: list) -> list:
        """Loosely decoded events (:class:`_LooseEvent`) as typed ones, field by field.

        A value of another type is read where it can be (:func:`_read_as`); null reads as absent.
        A value that cannot be read leaves its event out when the event's kind reads that field
        (counted per field: the report's notes say how many), and is let be otherwise (it would
        not be read). One bad field never rejects the file."""
        out = []
        unreadable = self.unreadable
        cat_code = self.cat_code
        for e in events:
            bad = None
            values: dict[str, Any] = {}
            for attr, typ, default in _EVENT_FIELDS:
                v = getattr(e, attr)
                try:
                    values[attr] = default if v is None else _read_as(v, typ)
                except ValueError:
                    bad = bad or attr
                    values[attr] = default
            cat: str = values["cat"]
            if cat not in cat_code:
                cat_code[cat] = self._new_category(cat)
            code = cat_code[cat] if values["ph"] in ("X", "i") else _DROP
            if code == _NO_CATEGORY and values["ph"] == "i":
                code = KIND_CODE["memory"]
            kind = KINDS[code] if 0 <= code < len(KINDS) else "other" if code == _UNKNOWN else None
            a = e.args
            if a is None:
                values["args"] = _NO_ARGS
            elif not isinstance(a, _LooseArgs):
                values["args"] = _NO_ARGS
                bad = bad or "args"
            else:
                args = {}
                for f in _FIELDS:
                    v = getattr(a, f.attr)
                    if f.raw or v is None:
                        args[f.attr] = f.default if v is None else v
                        continue
                    try:
                        args[f.attr] = _read_as(v, f.type)
                    except ValueError:
                        args[f.attr] = f.default
                        if kind in f.kinds:
                            bad = bad or f"args.{f.arg}"
                for attr in ("name", "labels"):
                    v = getattr(a, attr)
                    args[attr] = v if isinstance(v, str) else ""
                values["args"] = _Args(**args)
            if bad is not None and (kind is not None or bad in ("ph", "cat")):
                unreadable[bad] += 1
                continue
            out.append(_Event(**values))
        return out

    def _new_category(self, cat: str) -> int:
        """The kind code of a category met for the first time (see ``_category_code``)."""
        code, legacy = _category_code(cat)
        self.legacy |= legacy
        if code == _UNKNOWN:
            self.unknown[cat] += 0  # listed; the events are counted as they come
        self.kind_by_name.update({n: KIND_CODE[k] for n, k in _KIND_BY_NAME.get(cat, {}).items()})
        accelerator = _ACCELERATOR_OF.get(cat.split("_")[0])
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
        cats = [e.cat if (e.ph == "X" or e.ph == "i") else _NOT_AN_EVENT for e in events]
        try:
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        except KeyError:
            for c in set(cats):
                if c not in cat_code:
                    cat_code[c] = self._new_category(c)
            kind = np.fromiter(map(cat_code.__getitem__, cats), dtype=np.int8, count=m)
        if self.unknown and (kind == _UNKNOWN).any():
            unknown = kind == _UNKNOWN
            for i in np.flatnonzero(unknown).tolist():
                self.unknown[cats[i]] += 1
            kind[unknown] = KIND_CODE["other"]
        del cats
        not_events = np.flatnonzero(kind < 0)
        # metadata, flows (most of these rows: Python ints, one test each), the profiler's span
        for i, code in zip(not_events.tolist(), kind[not_events].tolist()):
            e = events[i]
            if code == _DROP:
                ph = e.ph
                if ph == "M":
                    self._metadata(e)
                elif ph == "B" or ph == "E":
                    self.begin_end += 1
            elif code == _SPAN:
                self.span.append((e.ts, e.dur))
            elif e.ph == "i" and e.name in _MEMORY_NAMES:  # no category: torch 1.8-1.9's memory events
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
        for table, fields in _GROUPS:
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

    def _in_range(self, values: list, f: _ArgField) -> np.ndarray:
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
        if type(first) is int and values.count(first) == len(values) and _INT64_MIN <= first <= _INT64_MAX:
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
                if isinstance(v, int) and _INT64_MIN <= v <= _INT64_MAX:
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
        named = {i: int(m.group(1)) for v, i in self.string_ids.items() if (m := _STREAM_TID.match(v))}
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

    def _field(self, f: _ArgField) -> np.ndarray:
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
        tid = self._column("tid", np.int64)
        field = {f.attr: self._field(f) for f in _FIELDS if self.legacy or not f.legacy}

        def take(rows: np.ndarray | None) -> None:
            """Keep only ``rows`` (a mask) of every column read so far."""
            nonlocal kind, name_codes, ts, dur, pid, tid, n
            if rows is None:
                return
            kind, name_codes, ts, dur, pid, tid = (a[rows] for a in (kind, name_codes, ts, dur, pid, tid))
            for attr, values in field.items():
                field[attr] = values[rows]
            n = len(kind)

        # what cannot be a time, or an event, is left out and said (see the module docstring)
        plausible = self._plausible(ts, dur, name_codes != self.names.ids.get("", -1))
        self._left_out_work(kind, plausible, negative_dur=~np.isnan(ts) & (dur < 0.0))
        take(plausible)
        ts = _exact_ns(ts)  # from here on, ns
        dur = np.rint(dur * 1000.0).astype(np.int64)
        together = self._together(ts, ts + dur)
        self._left_out_work(kind, together, zero_ts=ts == 0, far=ts != 0)
        take(together)
        take(self._distinct([kind, name_codes, ts, dur, pid, tid, *field.values()]))
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
            ranges = np.array([v.startswith(_TORCH_RANGE_PREFIXES) for v in name_values], dtype=bool)[name_codes]
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
                    for f in _FIELDS:
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
        columns = {c.name: (self._raw_texts(c.name, field[c.name], _dims_text if c.json_list else _arg_text)
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

        # Overhead events (pid -1, tid 0 in the file) happen in the profiler's own code on the main
        # thread; torch files them there, under the op open at their start, and so do we.
        main_tid = _main_thread(kind, pid, tid)
        overhead = kind == KIND_CODE["overhead"]
        if overhead.any() and main_tid is not None:
            main_pid = int(pid[np.flatnonzero((tid == main_tid) & ~overhead)[0]])
            tid = np.where(overhead, main_tid, tid)
            pid = np.where(overhead, main_pid, pid)

        if any_device:
            thread = np.where(is_device, -1, _thread_id(tid))
            stream = np.where(is_device, np.where(stream >= 0, stream, self._streams_named(tid)), -1)
        else:  # a CPU profile: threads as they are, no streams (stream is all -1 already)
            thread = _thread_id(tid)
        main_tid = None if main_tid is None else int(_thread_id(np.int64(main_tid)))
        del tid, is_device

        origin_ns = int(start_ns.min()) if n else 0
        span = self._profiled_span(start_ns, start_ns + dur_ns)
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
        dist = trace.distributedInfo or {}
        rank, world_size = _header_int(dist.get("rank"), 1 << 31), _header_int(dist.get("world_size"), 1 << 31)
        if (rank is None) != (dist.get("rank") is None) or (world_size is None) != (dist.get("world_size") is None):
            self.dropped.append(f"distributedInfo {msgspec.json.encode(dist).decode()[:80]} does not say a rank: not used")
        devices, wrong = _device_properties(trace.deviceProperties or [])
        if wrong:
            self.dropped.append(f"{wrong:,} deviceProperties value{'s' if wrong != 1 else ''} of the wrong type "
                                "(a GPU's id, name or sizes): left out")
        meta = TraceMeta(
            source=self.source,
            origin_ns=origin_ns,
            base_time_ns=_header_int(trace.baseTimeNanoseconds, 1 << 63) or 0,
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
        self._clock_header(trace, meta)
        if trace.nbprofLines is not None:
            from .lines import checked_lines

            meta.line_data, meta.sources, problem = checked_lines(trace.nbprofLines)
            if problem:
                meta.reader_notes.append(f"nbprofLines: {problem}: the line table is left out")
        return TraceData(events=events, meta=meta)

    # -- what cannot be right: left out, and said ------------------------------------------------

    def _plausible(self, ts: np.ndarray, dur: np.ndarray, named: np.ndarray) -> np.ndarray | None:
        """The rows whose ``ts``, ``dur`` and name an event can have (None: all of them). A trace
        that passes costs four comparisons per event (NaN, a missing ``ts``, fails them all)."""
        ok = (ts >= _TS_MIN_US) & (ts < _TS_MAX_US) & (dur >= 0.0) & (dur <= _DAY_US) & named
        if ok.all():
            return None
        no_ts = np.isnan(ts)
        bad_ts = ~no_ts & ~((ts >= _TS_MIN_US) & (ts < _TS_MAX_US))
        no_name = ~(no_ts | bad_ts) & ~named
        rest = ~(no_ts | bad_ts | no_name)
        bad_dur = rest & ~(dur >= 0.0)
        long = rest & (dur > _DAY_US)
        if no_ts.any():
            self.dropped.append(f"{_events(no_ts.sum())} without a `ts`: left out")
        if bad_ts.any():
            self.dropped.append(
                f"{_events(bad_ts.sum())} with a `ts` nbprof cannot place (e.g. {ts[bad_ts][0]:g}; beyond 146 years "
                "of µs, or not a number: nanoseconds where chrome traces have µs?): left out")
        if no_name.any():
            self.dropped.append(f"{_events(no_name.sum())} without a `name`: left out")
        if bad_dur.any():
            self.dropped.append(f"{_events(bad_dur.sum())} with a negative `dur` (e.g. {dur[bad_dur][0]:g}): left out")
        if long.any():
            self.dropped.append(f"{_events(long.sum())} lasting longer than a day (`dur` up to {dur[long].max():g} µs: "
                                "nanoseconds where chrome traces have µs?): left out")
        return ok

    def _left_out_work(self, kind: np.ndarray, kept: np.ndarray | None, **why: np.ndarray) -> None:
        """Count the device work (kernels, memcpys, memsets) that ``kept`` leaves out, by why: a
        device record whose time cannot be is the clock_skew finding's evidence (``TraceMeta.left_out_work``)."""
        if kept is None:
            return
        out = ~kept & np.isin(kind, DEVICE_WORK_CODES)
        if out.any():
            for reason, mask in why.items():
                self.left_out_work[reason] += int((out & mask).sum())

    def _together(self, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray | None:
        """When the events span more than a day: the largest group of them with no gap of more
        than a day, if it holds most of them (a few strays, e.g. a ``ts`` of 0 among real ones, are
        left out); else all, and a note asking whether the times are ns. None: keep every row."""
        n = len(start_ns)
        if n == 0 or int(end_ns.max()) - int(start_ns.min()) <= _DAY_NS:
            return None
        order = np.argsort(start_ns, kind="stable")
        reach = np.maximum.accumulate(end_ns[order])
        group = np.zeros(n, dtype=np.int64)
        group[1:] = np.cumsum(start_ns[order][1:] - reach[:-1] > _DAY_NS)
        counts = np.bincount(group)
        largest = int(counts.argmax())
        keep: np.ndarray | None = None
        if len(counts) > 1 and 2 * counts[largest] > n:
            keep = np.empty(n, dtype=bool)
            keep[order] = group == largest
            away = ~keep
            self.dropped.append(
                f"{_events(away.sum())} more than a day away from the other {int(counts[largest]):,} (e.g. at `ts` "
                f"{start_ns[away][0] / 1000:g} µs, the others from {start_ns[keep].min() / 1000:g}): left out")
            start_ns, end_ns = start_ns[keep], end_ns[keep]
        span_us = (int(end_ns.max()) - int(start_ns.min())) / 1000
        if span_us > _DAY_US:
            self.dropped.append(f"the events span {_span_text(span_us)}, more than a profile runs: are `ts` and `dur` "
                                "nanoseconds? Chrome traces are in µs (shown as written)")
        return keep

    def _distinct(self, columns: list[np.ndarray]) -> np.ndarray | None:
        """Rows that do not repeat an earlier row in every column read (exact duplicates, e.g. a
        trace joined to itself, counted once), or None when no row does. Duplicates share their
        start: one stable argsort of the starts (timsort, on a file mostly in time order: ~5 ms
        at 700k events) finds the rows that share theirs, usually none at ns resolution (at whole
        µs, ~6 %: ~55 ms); those are hashed on every column, grouped by hash, and each compared in
        every column with the first of its group (a trace joined to itself, 1.4 M rows: ~2 s)."""
        n = len(columns[0])
        if n < 2:
            return None
        start = columns[2]
        order = np.argsort(start, kind="stable")
        sorted_start = start[order]
        same = sorted_start[1:] == sorted_start[:-1]
        del sorted_start
        if not same.any():
            return None
        shared = np.zeros(n, dtype=bool)
        shared[1:] = same
        shared[:-1] |= same
        rows = np.sort(order[shared])  # the rows that share their start with another row
        del order, shared, same
        values = [c[rows].view(np.int64) if c.dtype.kind == "f" else c[rows].astype(np.int64) for c in columns]
        h = np.zeros(len(rows), dtype=np.uint64)
        for i, v in enumerate(values):  # rotate, then mix in the column (wrapping products)
            h = (h << np.uint64(7)) | (h >> np.uint64(57))
            h ^= v.view(np.uint64) * np.uint64(_HASH_FACTORS[i % len(_HASH_FACTORS)])
        # group by hash (file order within a group); a row equal in every column to its group's
        # first row repeats it (a row that only shares the hash is kept)
        by_hash = np.argsort(h, kind="stable")
        grouped = h[by_hash]
        leads = np.ones(len(rows), dtype=bool)
        leads[1:] = grouped[1:] != grouped[:-1]
        del grouped, h
        if leads.all():
            return None
        lead = by_hash[np.maximum.accumulate(np.where(leads, np.arange(len(rows)), 0))]
        repeats = ~leads
        for v in values:
            repeats &= v[by_hash] == v[lead]
        if not repeats.any():
            return None
        keep = np.ones(n, dtype=bool)
        keep[rows[by_hash[repeats]]] = False
        k = n - int(keep.sum())
        self.dropped.append(f"{k:,} exact duplicate{'s' if k != 1 else ''} (an event repeated, every field nbprof reads "
                            "equal): counted once")
        return keep

    def _profiled_span(self, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[float, float] | None:
        """The profiler's own span (its "Trace" event: ts, dur in µs), when it is one a profile can
        have (it moves the time origin: a stray one would move every time)."""
        if not self.span:
            return None
        ts, dur = self.span[0]
        if (_TS_MIN_US <= ts < _TS_MAX_US) and (0.0 <= dur <= _DAY_US):
            if len(start_ns) == 0 or (int(start_ns.min()) - ts * 1000 <= _DAY_NS
                                      and (ts + dur) * 1000 - int(end_ns.max()) <= _DAY_NS):
                return ts, dur
        self.dropped.append(f"the profiler's span (its \"Trace\" event: `ts` {ts:g}, `dur` {dur:g}) is not one a "
                            "profile can have: not used")
        return None

    def _clock_header(self, trace: _Trace, meta: TraceMeta) -> None:
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
        notes += [f"{_events(count)} with `{arg}` beyond {dtype}: read as {default}"
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
        texts = np.array([_shape_text(self._utf8(raw)) for raw in dims.values()], dtype=object)
        used = np.zeros(len(texts), dtype=bool)
        used[codes] = True
        # different raw texts can mean the same shapes (spacing, "" and "[]"): one category each,
        # sorted as pd.Categorical sorts them
        categories, text_codes = np.unique(texts[used], return_inverse=True)
        raw_to_category = np.full(len(texts), -1, dtype=np.int32)
        raw_to_category[used] = text_codes.reshape(-1)
        return pd.Categorical.from_codes(raw_to_category[codes], categories=pd.Index(categories, dtype=object))


def _events(count: Any) -> str:
    count = int(count)
    return f"{count:,} event{'s' if count != 1 else ''}"


def _span_text(us: float) -> str:
    """A long time in words: "3.2 days", "92 years"."""
    days = us / _DAY_US
    return f"{days / 365.25:,.0f} years" if days >= 730 else f"{days:,.1f} days"


# odd 64-bit constants (splitmix64's and xxhash's): each column's factor in the duplicate hash
_HASH_FACTORS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xC2B2AE3D27D4EB4F,
                 0x165667B19E3779F9, 0x27D4EB2F165667C5)


def _shape_text(text: str) -> str:
    """Raw "Input Dims" JSON as torch's ``str(input_shapes)`` (see ``_Reader._shapes``); JSON that
    is no list of shapes, as it is written."""
    if not text:
        return "[]"
    try:
        if "[[[" in text or "], [[" in text or ",[[" in text:
            dims = json.loads(text)
            if isinstance(dims, list):
                text = str([[] if (isinstance(d, list) and d and isinstance(d[0], list)) else d for d in dims])
        elif ", " not in text and "," in text:
            text = str(json.loads(text))  # compact writers: normalise to Python's spacing
    except (ValueError, RecursionError):
        pass
    return text


def _arg_text(raw: str) -> str:
    """A string arg's text ("Collective name": "allreduce"); another JSON value as it reads."""
    if not raw:
        return ""
    try:
        value = json.loads(raw)
        return value if isinstance(value, str) else json.dumps(value)
    except (ValueError, RecursionError):
        return raw


def _dims_text(raw: str) -> str:
    """A launch dimension as the writer prints it (``[128, 1, 1]``), whatever the file's spacing."""
    if not raw:
        return ""
    try:
        return str([int(v) for v in json.loads(raw)])
    except (ValueError, TypeError, OverflowError, RecursionError):
        return raw


def _header_int(value: Any, bound: int) -> int | None:
    """An integer of the trace's header (a rank, a clock) in [0, bound), else None."""
    return value if type(value) is int and 0 <= value < bound else None


# deviceProperties entries the analyses read, and their JSON types (another type: the value is left out)
_DEVICE_PROPERTY_TEXT = ("name",)
_DEVICE_PROPERTY_INTS = ("id", "totalGlobalMem", "computeMajor", "computeMinor", "warpSize", "numSms",
                         "maxThreadsPerBlock", "maxThreadsPerMultiprocessor", "regsPerBlock", "regsPerMultiprocessor",
                         "sharedMemPerBlock", "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor")


def _device_properties(entries: list) -> tuple[list[dict[str, Any]], int]:
    """The trace's ``deviceProperties`` (one dict per GPU), each value the analyses read of its
    type (an int64 for numbers, text for the name); how many values were not."""
    out, wrong = [], 0
    for entry in entries:
        if not isinstance(entry, dict):
            wrong += 1
            continue
        keep = {}
        for key, value in entry.items():
            if key in _DEVICE_PROPERTY_INTS:
                ok = type(value) is int and _INT64_MIN <= value <= _INT64_MAX
            else:
                ok = key not in _DEVICE_PROPERTY_TEXT or isinstance(value, str)
            if ok:
                keep[key] = value
            else:
                wrong += 1
        out.append(keep)
    return out, wrong


def _thread_id(tid: Any) -> Any:
    """A CPU thread's id, never negative (-1 marks device rows, and rows with a negative thread
    are in no op tree): kineto writes thread ids as signed 32-bit numbers, so a large one reads
    negative (-549452224 in HTA's NCCL trace, for thread 3745515072), and string tids of hand-made
    traces have negative ids; both read as the unsigned 32-bit number."""
    # 2**32 added to the negative ones only: added to every id, the largest int64 ids overflowed
    return tid + np.where(tid < 0, 1 << 32, 0)


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
